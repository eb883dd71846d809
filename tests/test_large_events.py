"""Big events through the whole pipeline (issue 4, "Load and resources").

* A LONGBLOB row of ~100 MB: the binlog holds one ~100 MB WRITE_ROWS event and one ~200 MB
  UPDATE_ROWS event (FULL row image: before and after). Bronze + silver must land it, silver must
  equal the server (compared by SHA-256 and length), and ``python -m pipelines.binlog dump`` must
  read the file.
* One transaction of row inserts into a narrow table: bronze holds every row exactly once, silver's
  count and sums equal the server's. ``LARGE_TXN_ROWS`` sets its size: 200,000 by default to keep
  the suite fast, ``LARGE_TXN_ROWS=1000000`` for the million of the issue.

The load test over gigabytes of binlog (wall time, peak RSS) is ``make load`` (scripts/load_test.py).
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mariadb_server import MariaDBServer, mariadb_available
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines import bronze, delta_io
from pipelines.silver import step as silver_step
from pipelines.binlog.constants import EventType
from pipelines.binlog.stream import EventStream
from pipelines.bronze.schema import BRONZE_TABLE
from pipelines.config import load_config
from pipelines.paths import silver_table_path

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.spark, pytest.mark.mariadb, pytest.mark.slow]

BLOB_CHUNKS = 3_276_800  # 32-byte SHA-256 digests: 104,857,600 bytes = 100 MiB
BLOB_BYTES = BLOB_CHUNKS * 32
TXN_ROWS = int(os.environ.get("LARGE_TXN_ROWS", "200000"))  # LARGE_TXN_ROWS=1000000: the full million


@pytest.fixture
def server(tmp_path_factory):
    """A fresh server per test, so each test's binlogs hold only its own workload."""
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    srv = MariaDBServer(
        tmp_path_factory.mktemp("large-mariadb"),
        row_image="FULL",
        row_metadata="FULL",
        extra_args=("--max-allowed-packet=1G", "--plugin-load-add=ha_sequence", "--max-binlog-size=1G",
                    "--innodb-log-file-size=512M"),
    )
    srv.start()
    yield srv
    srv.stop()


def _cfg(binlogs: Path, warehouse: Path):
    return load_config(REPO / "conf" / "pipeline.yaml",
                       {"input": str(binlogs), "warehouse": str(warehouse), "progress": False})


def _closed_binlogs(srv: MariaDBServer, dest: Path) -> list[Path]:
    """Rotate, then copy every closed binlog file of ``srv`` that holds more than the header."""
    srv.flush_logs()
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for f in srv.binlog_files()[:-1]:
        if f.stat().st_size > 1024:
            shutil.copyfile(f, dest / f.name)
            out.append(dest / f.name)
    return out


def _rows_events(path: Path) -> list[tuple[str, int, int]]:
    """(event type name, event length, rows) of every rows event in ``path``."""
    out = []
    with EventStream(str(path)) as s:
        for ev in s.events():
            rows = getattr(ev, "rows", None)
            if rows is not None:
                h = ev.header
                out.append((EventType(h.type_code).name, h.end_pos - h.pos, len(rows)))
    return out


def _bronze_ops(spark, warehouse: Path, db: str, table: str) -> dict:  # noqa: F811
    df = delta_io.open_table(str(warehouse / BRONZE_TABLE), spark=spark).read_df(columns=["db", "table", "op", "_seq"])
    df = df.where((df["db"] == db) & (df["table"] == table))
    ops = {r["op"]: r["n"] for r in df.groupBy("op").count().withColumnRenamed("count", "n").collect()}
    ops["_distinct_seq"] = df.select("_seq").distinct().count()
    return ops


def test_100mb_blob_row(server, tmp_path):
    server.sql(
        f"""
CREATE DATABASE big;
USE big;
CREATE TABLE blobs (id INT PRIMARY KEY, note VARCHAR(20), b LONGBLOB) ENGINE=InnoDB;
SET SESSION group_concat_max_len = 1073741824;
INSERT INTO blobs SELECT 1, 'first', GROUP_CONCAT(UNHEX(SHA2(seq, 256)) ORDER BY seq SEPARATOR '')
  FROM seq_1_to_{BLOB_CHUNKS};
INSERT INTO blobs VALUES (2, 'small', X'00FF');
UPDATE blobs SET note = 'updated', b = CONCAT(SUBSTRING(b, 1, 1000000), X'5A5A', SUBSTRING(b, 1000003))
  WHERE id = 1;
""")
    expected = server.query_rows("SELECT id, note, LENGTH(b), SHA2(b, 256) FROM big.blobs ORDER BY id")
    assert expected[0][2] == str(BLOB_BYTES)

    files = _closed_binlogs(server, tmp_path / "binlogs")
    events = [e for f in files for e in _rows_events(f)]
    big = [(name, size) for name, size, _ in events if size > 90_000_000]
    assert [n for n, _ in big] == ["WRITE_ROWS_V1", "UPDATE_ROWS_V1"], big
    assert 100_000_000 < big[0][1] < 110_000_000 and 200_000_000 < big[1][1] < 220_000_000, big

    # the decoder's dump reads the file; its output streams through a pipe (hundreds of MB of text).
    # jsonl by default: the text format takes ~70 s and ~6 GB here (dump._text_value builds one str
    # per byte); LARGE_DUMP_FORMAT=text checks it too.
    fmt = os.environ.get("LARGE_DUMP_FORMAT", "jsonl")
    marker = {"text": rb"### (INSERT INTO|UPDATE) `big`.`blobs`", "jsonl": rb'"op": "(insert|update)"'}[fmt]
    for f in files:
        proc = subprocess.Popen([sys.executable, "-m", "pipelines.binlog", "dump", "--format", fmt, str(f)],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        seen, total, tail = set(), 0, b""
        while chunk := proc.stdout.read(1 << 20):
            total += len(chunk)
            seen.update(m.group(1) for m in re.finditer(marker, tail + chunk))
            tail = chunk[-64:]
        err = proc.stderr.read()
        assert proc.wait(timeout=600) == 0, err[-3000:]
        if f == files[-1]:
            assert len(seen) == 2, (total, seen)  # an insert and an update
            assert total > 2 * BLOB_BYTES  # the values are printed, not elided

    # The pipeline runs as the job, in its own JVM: a Java heap exhausted by a 100 MB value takes
    # its SparkContext down, which must not be the shared session of the test run.
    warehouse = tmp_path / "warehouse"
    proc = subprocess.run(
        [sys.executable, str(REPO / "jobs" / "run_pipeline.py"), "--binlog-dir", str(tmp_path / "binlogs"),
         "--warehouse", str(warehouse), "--no-progress"],
        cwd=REPO, capture_output=True, text=True, timeout=900,
    )
    out = proc.stdout + proc.stderr
    steps = ("bronze run", "silver run", "java.lang.OutOfMemoryError")
    assert proc.returncode == 0, out[-200:] + "\n" + "\n".join(x for x in out.splitlines() if x.startswith(steps))

    from deltalake import DeltaTable

    changes = DeltaTable(str(warehouse / BRONZE_TABLE)).to_pyarrow_table(columns=["table", "op", "_seq"])
    ops = sorted(op for t, op in zip(changes.column("table").to_pylist(), changes.column("op").to_pylist())
                 if t == "blobs")
    assert ops == ["c", "c", "u"] and len(set(changes.column("_seq").to_pylist())) == changes.num_rows
    table = delta_io.open_table(silver_table_path(warehouse, "big", "blobs")).read_arrow(["id", "note", "b"])
    got = sorted([str(i), n, str(len(b)), hashlib.sha256(b).hexdigest()]
                 for i, n, b in zip(*(table.column(c).to_pylist() for c in ("id", "note", "b"))))
    assert got == expected


def test_transaction_of_a_million_rows(spark, server, tmp_path):  # noqa: F811
    server.sql(
        f"""
CREATE DATABASE bulk;
USE bulk;
CREATE TABLE narrow (id INT NOT NULL PRIMARY KEY, v INT NOT NULL, tag CHAR(2)) ENGINE=InnoDB;
INSERT INTO narrow SELECT seq, (seq * 7919) % 1000003, IF(seq % 3 = 0, NULL, 'ab') FROM seq_1_to_{TXN_ROWS};
""")
    expected = server.query_rows("SELECT COUNT(*), SUM(id), SUM(v), COUNT(tag) FROM bulk.narrow")[0]
    assert expected[0] == str(TXN_ROWS)

    files = _closed_binlogs(server, tmp_path / "binlogs")
    warehouse = tmp_path / "warehouse"
    cfg = _cfg(tmp_path / "binlogs", warehouse)
    b = bronze.run(spark, cfg)
    assert b.status == "ok" and b.quarantined == 0, b.summary()
    assert _bronze_ops(spark, warehouse, "bulk", "narrow") == {"c": TXN_ROWS, "_distinct_seq": TXN_ROWS}
    # the whole transaction is one GTID in bronze
    gtids = (delta_io.open_table(str(warehouse / BRONZE_TABLE), spark=spark).read_df(columns=["table", "gtid"])
             .where("`table` = 'narrow'").select("gtid").distinct().count())
    assert gtids == 1, files
    s = silver_step.run(spark, cfg)
    assert s.status == "ok" and s.quarantined == 0, s.summary()

    df = delta_io.open_table(silver_table_path(warehouse, "bulk", "narrow"), spark=spark).read_df()
    df.createOrReplaceTempView("silver_narrow")
    got = spark.sql("SELECT COUNT(*), SUM(id), SUM(v), COUNT(tag) FROM silver_narrow").first()
    assert [str(x) for x in got] == expected
