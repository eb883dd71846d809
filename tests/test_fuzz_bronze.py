"""Fuzzing the bronze step with mutated real binlogs.

The seeds are written by MariaDB servers started by the suite (with and without CRC32
checksums), plus a few corpus files when ``../shared/corpus`` is there. Each example mutates a
seed (flipped bytes, overwritten header fields, cuts, inserted, deleted or repeated slices,
appended garbage) and feeds it through the bronze step's pure parts: :func:`bronze.plan_file`
(the quick index and the decision what to read) and :func:`bronze.decode_range` (one Spark
task's work). Whatever the bytes, nothing may escape either of them (every ``BinlogError``
becomes a quarantine row or a stopped range), and every quarantine row and error names the
file and an offset inside it. ``FUZZ_EXAMPLES`` scales the number of examples (default 80).

A short end-to-end run then sends a folder with a few mutated files through ``bronze.run``.
"""
from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

import deltalake
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from mariadb_server import MariaDBServer, mariadb_available
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines import bronze
from pipelines.bronze import decode as bronze_decode
from pipelines.binlog.changes import RowChange, iter_changes
from pipelines.config import load_config

FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "80"))
CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
CORPUS_SEEDS = ("mariadb-10.11/binlogs/binlog.000009", "public/zalora__binlog-parser/gtid__mysql-bin.01",
                "public/debezium__mysql-binlog-connector-java/mysql-bin.checksum-crc32")

WORKLOAD = """
CREATE DATABASE {db}; USE {db};
CREATE TABLE t (id INT PRIMARY KEY, d DECIMAL(10,2), s VARCHAR(30), b BLOB, dt DATETIME(3), j JSON,
                e ENUM('a','b'), u BIGINT UNSIGNED, f DOUBLE, y YEAR, bt BIT(5));
INSERT INTO t VALUES (1, 12.5, 'one', X'00ff', '2024-01-02 03:04:05.678', '{{"k": [1, 2]}}', 'a', 18446744073709551615,
                      1.5, 2024, b'10101'),
                     (2, -0.01, 'two ☕', NULL, '1000-01-01 00:00:00', NULL, 'b', 0, -2e300, 1901, b'0');
BEGIN; UPDATE t SET s = 'uno', d = d * 2 WHERE id = 1; INSERT INTO t (id, s) VALUES (3, 'three'); COMMIT;
DELETE FROM t WHERE id = 2;
ALTER TABLE t ADD COLUMN z INT AFTER id;
INSERT INTO t (id, z, s) VALUES (4, 40, REPEAT('x', 30));
CREATE TABLE k (a INT, b TEXT);
INSERT INTO k VALUES (1, 'dup'), (1, 'dup'), (NULL, NULL);
XA START 'fz'; INSERT INTO k VALUES (9, 'xa'); XA END 'fz'; XA PREPARE 'fz'; XA COMMIT 'fz';
UPDATE k SET b = 'once' WHERE a = 1 LIMIT 1;
"""


def _server_seeds(srv: MariaDBServer, db: str, n_files: int) -> list[tuple[str, bytes]]:
    srv.flush_logs()
    out = []
    for k in range(n_files):
        path = srv.binlog_files()[-1]
        srv.sql(WORKLOAD.format(db=f"{db}{k}") + "FLUSH BINARY LOGS;")
        out.append((path.name, path.read_bytes()))
    return out


@pytest.fixture(scope="module")
def seeds(mariadb, tmp_path_factory) -> dict[str, list[tuple[str, bytes]]]:
    """Consecutive files from a CRC32 server and from a server without checksums, and corpus files."""
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    out = {"crc32": _server_seeds(mariadb, "fuzz_crc", 3)}
    with MariaDBServer(tmp_path_factory.mktemp("fuzz-nocrc"), checksum="NONE") as srv:
        out["none"] = _server_seeds(srv, "fuzz_none", 2)
    out["corpus"] = [(Path(rel).name, (CORPUS / rel).read_bytes()) for rel in CORPUS_SEEDS if (CORPUS / rel).exists()]
    return out


# -- mutations ----------------------------------------------------------------------------------------


def _header_offsets(data: bytes) -> list[int]:
    """Where the event headers of an undamaged file start (framing only)."""
    pos, out = 4, []
    while pos + 19 <= len(data):
        length = int.from_bytes(data[pos + 9 : pos + 13], "little")
        if length < 19:
            break
        out.append(pos)
        pos += length
    return out


def mutate(data: bytes, rnd: random.Random, n: int) -> bytes:
    """``n`` random mutations of ``data``, from ``rnd``."""
    buf = bytearray(data)
    for _ in range(n):
        kind = rnd.choice(["flip", "flip", "header", "cut", "insert", "delete", "repeat", "append"])
        size = len(buf)
        at = rnd.randrange(size) if size else 0
        if kind == "flip" and size:
            buf[at] ^= 1 << rnd.randrange(8)
        elif kind == "header":
            heads = _header_offsets(bytes(buf)) or [4]
            h = rnd.choice(heads)
            field = rnd.choice([4, 9, 13, 17])  # type code, length, next position, flags
            value = rnd.choice([0, 1, 19, 0xFF, 0x7FFFFFFF, 0xFFFFFFFF, rnd.randrange(1 << 32)])
            width = 1 if field == 4 else 2 if field == 17 else 4
            if h + field + width <= size:
                buf[h + field : h + field + width] = (value & ((1 << (8 * width)) - 1)).to_bytes(width, "little")
        elif kind == "cut":
            del buf[at:]
        elif kind == "insert":
            buf[at:at] = rnd.randbytes(rnd.randrange(1, 40))
        elif kind == "delete":
            del buf[at : at + rnd.randrange(1, 60)]
        elif kind == "repeat":
            buf[at:at] = buf[at : at + rnd.randrange(1, 200)]
        else:
            buf += rnd.randbytes(rnd.randrange(1, 100))
    return bytes(buf)


# -- the pure parts ----------------------------------------------------------------------------------


def check_file(path: str, name: str, newest: bool, cfg) -> list[tuple]:
    """Plan and decode one file the way a bronze run does, checking what comes out."""
    size = os.path.getsize(path)
    f = bronze.SourceFile(name, path, size, 0, 7)
    plan = bronze.plan_file(f, None, path, newest, cfg)  # anything raised here fails the test
    assert 0 <= plan.end <= size and plan.status in (bronze.DONE, bronze.PARTIAL, bronze.QUARANTINED)
    if plan.status == bronze.QUARANTINED:
        assert plan.error and plan.error.startswith(f"{name}: offset {plan.error_offset}"), plan.error
        assert 0 <= plan.error_offset <= size
    records = []
    for s, e in plan.ranges:
        w = bronze.WorkRange(name, path, 7, s, e, bronze_decode._sub_index(plan.index, s, e), "fuzz", None)
        got = list(bronze.decode_range(w))  # anything raised here fails the test
        kind, stat = got[-1]
        assert kind == "stat" and all(k != "stat" for k, _r in got[:-1])
        _name, _s, _e, _events, _ops, err, skipped, _ignorable, _invalid_text = stat
        if err is not None:
            offset, cut, reason, _cls = err
            assert s <= cut <= offset <= size and f"{name}: offset " in reason, err
        for b, e2 in skipped:
            assert s <= b < e2 <= e
        for kind, rec in got[:-1]:
            if kind == "quar":
                assert rec[0] == name and isinstance(rec[2], int) and 0 <= rec[2] <= size, rec[:4]
                assert name in rec[3] and rec[4] and rec[6] is not None, rec[:5]
            elif kind == "row":
                assert rec[0] == name and s <= rec[2] < e
        records += got
    return records


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_mutated_binlogs_through_plan_and_decode(seeds, data):
    group = data.draw(st.sampled_from([g for g in ("crc32", "none", "corpus") if seeds[g]]), label="group")
    name, seed = data.draw(st.sampled_from(seeds[group]), label="seed")
    rnd = random.Random(data.draw(st.integers(0, 2**32 - 1), label="rng"))
    mutated = mutate(seed, rnd, data.draw(st.integers(1, 4), label="mutations"))
    newest = data.draw(st.booleans(), label="newest")
    with tempfile.TemporaryDirectory() as d:
        cfg = load_config(None, {"input": d, "warehouse": os.path.join(d, "wh"),
                                 "parallelism.target_bytes_per_task": 512})
        path = os.path.join(d, name)
        with open(path, "wb") as fh:
            fh.write(mutated)
        check_file(path, name, newest, cfg)


def test_the_seeds_decode_whole(seeds, tmp_path):
    """Without mutations every seed lands completely: the fuzz checks start from good files."""
    cfg = load_config(None, {"input": str(tmp_path), "warehouse": str(tmp_path / "wh"),
                             "parallelism.target_bytes_per_task": 512})
    for group in ("crc32", "none"):
        for name, data in seeds[group]:
            (tmp_path / name).write_bytes(data)
            recs = check_file(str(tmp_path / name), name, False, cfg)
            assert not [r for k, r in recs if k == "quar"], name
            rows = sum(1 for ch in iter_changes(str(tmp_path / name)) if type(ch) is RowChange)
            assert sum(1 for k, _r in recs if k == "row") == rows > 0


# -- a short end-to-end run ----------------------------------------------------------------------------


@pytest.mark.spark
def test_a_run_over_mutated_files_lands_the_good_ones(spark, seeds, tmp_path):  # noqa: F811
    """Three consecutive files of one series, the middle one mutated a few times with a fixed
    seed: the run finishes, the good files land whole, the mutated one is quarantined or lands
    whatever is good in it."""
    (a, da), (b, db), (c, dc) = seeds["crc32"]
    folder = tmp_path / "in"
    folder.mkdir()
    rnd = random.Random(int(os.environ.get("FUZZ_SEED", "20240501")))
    for name, data in ((a, da), (b, mutate(db, rnd, 3)), (c, dc)):
        (folder / name).write_bytes(data)
    cfg = load_config(None, {"input": str(folder), "warehouse": str(tmp_path / "wh"), "progress": False,
                             "delta.backend": "rs", "accept_gaps": True})

    stats = bronze.run(spark, cfg)

    assert stats.status == "ok"
    rows = deltalake.DeltaTable(cfg.warehouse_path("bronze/binlog_changes")).to_pyarrow_table().to_pylist()
    for name, data in ((a, da), (c, dc)):
        (tmp_path / name).write_bytes(data)
        expected = sum(1 for ch in iter_changes(str(tmp_path / name)) if type(ch) is RowChange)
        assert sum(1 for r in rows if r["source_file"] == name) == expected, name
    assert len({r["_seq"] for r in rows}) == len(rows)
