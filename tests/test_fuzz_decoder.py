"""Property-based fuzzing of the whole decoder over mutated real binlogs.

Whatever the bytes, decoding either succeeds or raises a ``BinlogError``
naming the file and an offset inside it; it never loops and never lets any
other exception escape. Every prefix of a valid file yields its complete
events, then exactly one ``TruncatedEvent``.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from pipelines.binlog.errors import BinlogError, TruncatedEvent
from pipelines.binlog.stream import EventStream
from pipelines.binlog.txindex import scan

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "150"))


def _seed_files() -> list[Path]:
    """Small real files: the corpus when present, else the committed samples."""
    root = Path(__file__).resolve().parents[2] / "shared" / "corpus"
    picks = []
    if root.exists():
        for rel in ("mariadb-10.11/binlogs/binlog.000002", "mariadb-10.11/binlogs/binlog.000009",
                    "mariadb-10.11/binlogs/binlog.000012", "mariadb-10.11/binlogs/binlog.000016",
                    "public/debezium__mysql-binlog-connector-java/mysql-bin.checksum-crc32",
                    "public/debezium__mysql-binlog-connector-java/mysql-bin.compressed",
                    "public/zalora__binlog-parser/gtid__mysql-bin.01"):
            p = root / rel
            if p.exists():
                picks.append(p)
    samples = Path(__file__).resolve().parents[1] / "samples" / "binlogs"
    picks += sorted(p for p in samples.glob("*.0*") if p.stat().st_size < 400_000)
    return picks


SEEDS = _seed_files()


def _decode_all(data: bytes, name: str = "fuzz.000001") -> int:
    n = 0
    try:
        with EventStream(data, name=name) as s:
            for _ in s.events():
                n += 1
    except BinlogError as e:
        assert e.file == name
        assert e.offset is not None and 0 <= e.offset <= len(data), e
    return n


@pytest.mark.skipif(not SEEDS, reason="no seed binlogs (corpus and samples both absent)")
@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_files_fail_cleanly(data):
    seed = data.draw(st.sampled_from(SEEDS), label="seed")
    buf = bytearray(seed.read_bytes()[:200_000])
    for _ in range(data.draw(st.integers(1, 8), label="mutations")):
        kind = data.draw(st.sampled_from(["flip", "byte", "cut", "insert", "zero"]))
        i = data.draw(st.integers(0, max(len(buf) - 1, 0)))
        if kind == "flip" and buf:
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "byte" and buf:
            buf[i] = data.draw(st.integers(0, 255))
        elif kind == "cut":
            del buf[i:]
        elif kind == "insert":
            buf[i:i] = data.draw(st.binary(min_size=1, max_size=16))
        elif kind == "zero":
            buf[i : i + 4] = b"\0\0\0\0"
    _decode_all(bytes(buf))
    # the quick index pass must never raise for bad bytes either
    try:
        idx = scan(bytes(buf), name="fuzz.000001")
    except BinlogError:
        pass  # only possible for a bad magic or format description
    else:
        assert idx.complete_until <= len(buf)


@pytest.mark.skipif(not SEEDS, reason="no seed binlogs (corpus and samples both absent)")
@pytest.mark.parametrize("seed", SEEDS[:3], ids=lambda p: p.name)
def test_every_prefix_yields_complete_events_then_one_truncation(seed):
    data = seed.read_bytes()[:60_000]
    with EventStream(data, name="full") as s:
        ends = []
        try:
            for ev in s.events(flatten=False):
                ends.append(ev.header.end_pos)
        except TruncatedEvent:
            pass  # the 60 KB cut itself
    step = max(1, (len(data) - ends[0]) // 400)
    for cut in range(ends[0], len(data), step):
        got = []
        err = None
        try:
            with EventStream(data[:cut], name="p") as s:
                for ev in s.events(flatten=False):
                    got.append(ev.header.end_pos)
        except TruncatedEvent as e:
            err = e
        assert got == [e for e in ends if e <= cut]
        if cut in ends or cut == ends[0]:
            assert err is None
        else:
            assert err is not None and err.offset == (got[-1] if got else ends[0])

