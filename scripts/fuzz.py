"""Mutation fuzzing of the decoder over real binlogs, for a time budget.

    .venv/bin/python -m scripts.fuzz --seconds 120

Each input is a seed file with 1–8 random mutations (bit flips, byte writes,
cuts, insertions, zeroed words). Every input is decoded completely (events,
rows, the transaction index and the row-change iterator); anything other than
a ``BinlogError`` naming the file and an offset inside it is a failure. Most
inputs are decoded without checksum verification, so that the damage reaches
the event and column decoders instead of stopping at the CRC. Prints
how many inputs ran and how they ended.
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections import Counter
from pathlib import Path

from pipelines.binlog.changes import iter_changes
from pipelines.binlog.errors import BinlogError
from pipelines.binlog.stream import EventStream
from pipelines.binlog.txindex import scan

ROOT = Path(__file__).resolve().parents[1]


def seed_files() -> list[Path]:
    corpus = ROOT.parent / "shared" / "corpus"
    seeds = sorted((corpus / "mariadb-10.11" / "binlogs").glob("binlog.0000??"))
    seeds += sorted(p for p in (corpus / "public").rglob("*") if p.is_file() and "." not in p.name.replace("mysql-bin.", "").replace("bin-log.", "").replace("binlog.", ""))
    seeds += sorted((ROOT / "samples" / "binlogs").glob("*.0*"))
    return [p for p in seeds if 0 < p.stat().st_size < 2_000_000]


def mutate(rng: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if not buf:
            break
        i = rng.randrange(len(buf))
        kind = rng.choice(("flip", "byte", "cut", "insert", "zero", "len"))
        if kind == "flip":
            buf[i] ^= 1 << rng.randrange(8)
        elif kind == "byte":
            buf[i] = rng.randrange(256)
        elif kind == "cut":
            del buf[i:]
        elif kind == "insert":
            buf[i:i] = rng.randbytes(rng.randint(1, 32))
        elif kind == "zero":
            buf[i : i + 4] = b"\0\0\0\0"
        elif kind == "len":  # aim at an event-length field
            buf[i : i + 4] = rng.choice((b"\xff\xff\xff\x7f", b"\x13\x00\x00\x00", b"\x00\x00\x00\x00"))
    return bytes(buf)


def run_one(data: bytes, name: str, verify: bool = True) -> str:
    """Decode everything; without checksum verification the event decoders see the damage."""
    try:
        with EventStream(data, name=name, verify_checksums=verify) as s:
            for _ in s.events():
                pass
        idx = scan(data, name=name, verify_checksums=verify)
        for _ in iter_changes(data, idx, name=name, verify_checksums=verify):
            pass
        return "ok"
    except BinlogError as e:
        if e.file != name or e.offset is None or not 0 <= e.offset <= len(data):
            raise AssertionError(f"error without a proper location: {e!r}") from e
        return type(e).__name__


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    rng = random.Random(a.seed)
    seeds = [(f, f.read_bytes()) for f in seed_files()]
    if not seeds:
        print("no seed files", file=sys.stderr)
        return 2
    outcomes: Counter[str] = Counter()
    deadline = time.monotonic() + a.seconds
    n = 0
    while time.monotonic() < deadline:
        f, data = rng.choice(seeds)
        data = mutate(rng, data[: rng.choice((4096, 65536, 400_000))])
        n += 1
        try:
            verify = rng.random() < 0.3
            outcomes[run_one(data, f"fuzz-{f.name}", verify)] += 1
        except Exception:
            print(f"FAILURE on input {n} (seed file {f}):", file=sys.stderr)
            traceback.print_exc()
            Path("fuzz-failure.bin").write_bytes(data)
            return 1
    print(f"fuzz: {n} inputs from {len(seeds)} seed files in {a.seconds:.0f} s; "
          f"no exception outside BinlogError; outcomes: {dict(outcomes)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
