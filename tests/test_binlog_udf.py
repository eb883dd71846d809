"""``binlog_changes(content, path)``: SQL over raw binlog files through Spark's ``binaryFile``
source. On fresh binlogs from a private MariaDB its counts per operation equal what the
workload did (and what ``mariadb-binlog -vvv`` prints); its rows are bronze's; bad bytes name
the file and the offset; ``python -m pipelines.sql --engine spark`` has it, on an empty warehouse."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from binlog_surgery import events, flip_byte
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines import binlog_udf, bronze, delta_io
from pipelines.config import load_config

pytestmark = [pytest.mark.mariadb, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[1]

WORKLOAD = """
CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10));
INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd');
UPDATE t SET v = 'x' WHERE id <= 2;
DELETE FROM t WHERE id = 4;
CREATE TABLE k (a INT);
INSERT INTO k VALUES (1), (1), (2);
DELETE FROM k WHERE a = 1;
"""
WANT = {"c": 7, "u": 2, "d": 3}
QUERY = ("SELECT c.op AS op, count(*) AS n FROM (SELECT explode(binlog_changes(content, path)) AS c "
         "FROM binaryFile.`{folder}`) GROUP BY c.op")


@pytest.fixture(scope="module")
def binlogs(tmp_path_factory):
    from mariadb_server import MariaDBServer, mariadb_available

    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("udf")
    srv = MariaDBServer(root / "mariadb").start()
    try:
        first = srv.flush_logs()
        srv.sql("CREATE DATABASE u")
        srv.sql(WORKLOAD, db="u")
        srv.flush_logs()
        files = srv.binlog_files()
        folder = root / "binlogs"
        folder.mkdir()
        for f in files[files.index(first):-1]:
            shutil.copy(f, folder / f.name)
    finally:
        srv.stop()
    return folder


def _mariadb_binlog_counts(folder: Path) -> dict[str, int]:
    from mariadb_server import MARIADB_BINLOG

    text = subprocess.run([MARIADB_BINLOG, "-vvv", *sorted(map(str, folder.iterdir()))],
                          capture_output=True, text=True, check=True).stdout
    return {"c": len(re.findall(r"^### INSERT INTO", text, re.M)),
            "u": len(re.findall(r"^### UPDATE", text, re.M)),
            "d": len(re.findall(r"^### DELETE FROM", text, re.M))}


def test_counts_per_operation_over_raw_files(spark, binlogs):  # noqa: F811
    binlog_udf.register(spark)
    got = {r["op"]: r["n"] for r in spark.sql(QUERY.format(folder=binlogs)).collect()}
    assert got == WANT == _mariadb_binlog_counts(binlogs)


def test_rows_are_bronzes(spark, binlogs, tmp_path):  # noqa: F811
    binlog_udf.register(spark)
    fields = list(binlog_udf.FIELDS)
    cols = ["_seq", "source_file", "db", "table", "op", "before", "after", "pk", "gtid", "commit_ts", "_shape"]
    assert set(cols) <= set(fields)
    raw = (spark.sql(f"SELECT explode(binlog_changes(content, path)) AS c FROM binaryFile.`{binlogs}`")
           .select(*[f"c.`{c}`" for c in cols]).orderBy("_seq").collect())
    cfg = load_config(None, {"input": str(binlogs), "warehouse": str(tmp_path / "wh"), "progress": False,
                             "delta.backend": "rs"})
    assert bronze.run(spark, cfg).status == "ok"
    landed = sorted(delta_io.open_table(cfg.warehouse_path("bronze/binlog_changes")).read_arrow(cols).to_pylist(),
                    key=lambda r: r["_seq"])
    assert len(raw) == sum(WANT.values())
    for r in landed:  # (Arrow gives the UTC time zone; Spark's rows are UTC without one)
        r["commit_ts"] = r["commit_ts"].replace(tzinfo=None)
    got = [r.asDict(recursive=True) for r in raw]
    assert [{k: v for k, v in r.items() if k != "commit_ts"} for r in got] == \
        [{k: v for k, v in r.items() if k != "commit_ts"} for r in landed]
    assert [r["commit_ts"] for r in got] == [r["commit_ts"] for r in landed]


def test_bad_bytes_name_the_file_and_offset(spark, binlogs, tmp_path):  # noqa: F811
    binlog_udf.register(spark)
    name = sorted(p.name for p in binlogs.iterdir())[0]
    data = (binlogs / name).read_bytes()
    rows_event = next(e for e in events(data) if e.type_code in (23, 24, 25, 30, 31, 32))
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / name).write_bytes(flip_byte(data, rows_event.pos + 25))  # inside the event: its CRC32 fails
    with pytest.raises(Exception) as e:
        spark.sql(QUERY.format(folder=bad)).collect()
    assert re.search(rf"binlog_changes: \S*{re.escape(name)}: offset \d+", str(e.value)), str(e.value)[-2000:]


def test_sql_cli_registers_it_on_an_empty_warehouse(binlogs, tmp_path):
    empty = tmp_path / "wh"
    empty.mkdir()
    r = subprocess.run([sys.executable, "-m", "pipelines.sql", "--engine", "spark", "--warehouse", str(empty),
                        "--format", "jsonl", QUERY.format(folder=binlogs)],
                       capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr[-3000:]
    import json

    assert {d["op"]: d["n"] for d in map(json.loads, r.stdout.splitlines())} == WANT
