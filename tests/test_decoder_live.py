"""The decoder on fresh binlogs from a private MariaDB server: every type of the
all-types workload against ``mariadb-binlog -vvv`` under several server
settings, and a randomized round trip (values inserted == values decoded)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from binlog_text import parse_binlog_file
from conformance_check import check_rows
from pipelines.binlog.changes import RowChange, iter_changes
from pipelines.binlog.txindex import scan
from workloads import all_types_workload, roundtrip_workload

SETTINGS = {
    "minimal-meta-crc32": dict(row_metadata="MINIMAL", checksum="CRC32"),
    "full-meta-no-checksum": dict(row_metadata="FULL", checksum="NONE"),
    "minimal-image": dict(row_image="MINIMAL", row_metadata="FULL"),
    "noblob-image": dict(row_image="NOBLOB"),
}


@pytest.mark.parametrize("setting", SETTINGS, ids=list(SETTINGS))
def test_all_types_equal_mariadb_binlog(mariadb_factory, setting):
    srv = mariadb_factory(**SETTINGS[setting])
    all_types_workload(srv, db="wl")
    srv.flush_logs()
    files = srv.binlog_files()
    rows = 0
    for path in files:
        truth = parse_binlog_file(path)
        check_rows(path, truth, skip_tables=set())
        rows += sum(len(e.get("rows", ())) for e in truth)
    assert rows > 100  # the workload really produced row changes


def _decoded_changes(files, db, table) -> list[RowChange]:
    out = []
    for path in files:
        for ch in iter_changes(path, scan(path)):
            if isinstance(ch, RowChange) and ch.db == db and ch.table == table:
                out.append(ch)
    return out


def _as_dict(ch: RowChange, cols, values):
    if values is None:
        return None
    names = ch.table_map.column_names
    return {names[i]: v for i, v in zip(cols, values)}


@pytest.mark.parametrize("seed", [1, 2])
def test_random_round_trip(mariadb_factory, seed):
    srv = mariadb_factory(row_metadata="FULL")
    run = roundtrip_workload(srv, seed=seed, n=60, n_updates=25, n_deletes=8, rows_per_statement=7)
    srv.flush_logs()
    got = _decoded_changes(srv.binlog_files(), run.db, run.table)
    assert len(got) == len(run.changes)
    for k, (ch, exp) in enumerate(zip(got, run.changes)):
        assert ch.op == exp.op, k
        assert _as_dict(ch, ch.columns_before, ch.before) == exp.before, f"change {k} before"
        assert _as_dict(ch, ch.columns_after, ch.after) == exp.after, f"change {k} after"


def test_dump_cli_jsonl_contract(mariadb_factory, tmp_path):
    srv = mariadb_factory(row_metadata="FULL")
    srv.sql(
        "CREATE DATABASE d; USE d; CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10), n DECIMAL(5,2));"
        "INSERT INTO t VALUES (1,'a',1.50),(2,NULL,-0.25); UPDATE t SET v='b' WHERE id=1; DELETE FROM t WHERE id=2;"
    )
    srv.flush_logs()
    path = srv.binlog_files()[0]
    out = subprocess.run([sys.executable, "-m", "pipelines.binlog", "dump", "--format", "jsonl", str(path)],
                         capture_output=True, text=True, check=True).stdout
    events = [json.loads(line) for line in out.splitlines()]
    assert all({"file", "pos", "end_pos", "type_code", "type"} <= e.keys() for e in events)
    rows = [e for e in events if e.get("op")]
    assert [(e["op"], e["db"], e["table"]) for e in rows] == [
        ("insert", "d", "t"), ("update", "d", "t"), ("delete", "d", "t")]
    assert rows[0]["rows"] == [{"before": None, "after": {"id": 1, "v": "a", "n": "1.50"}},
                               {"before": None, "after": {"id": 2, "v": None, "n": "-0.25"}}]
    assert rows[1]["rows"][0]["after"]["v"] == "b" and rows[1]["rows"][0]["before"]["v"] == "a"
    assert rows[2]["rows"] == [{"before": {"id": 2, "v": None, "n": "-0.25"}, "after": None}]
    text = subprocess.run([sys.executable, "-m", "pipelines.binlog", "dump", str(path)],
                          capture_output=True, text=True, check=True).stdout
    assert "### INSERT INTO `d`.`t`" in text and "### UPDATE `d`.`t`" in text and "###   @2='b'" in text


def test_dump_cli_names_file_and_offset_on_bad_input(tmp_path):
    bad = tmp_path / "x.000001"
    bad.write_bytes(b"\xfebin" + b"\x00" * 10)
    r = subprocess.run([sys.executable, "-m", "pipelines.binlog", "dump", str(bad)], capture_output=True, text=True)
    assert r.returncode == 1
    assert f"{bad}: offset 4: truncated event header: need 19 bytes but got 10" in r.stderr
