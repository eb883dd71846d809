"""Real tests of the private MariaDB server helper and the workloads (no mocks: real mariadbd)."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from binlog_text import iter_rows, parse_binlog_file, parse_binlog_text, run_mariadb_binlog
from mariadb_server import MARIADB_BINLOG, MariaDBError, MariaDBServer
from workloads import (
    ALL_TYPES_FINAL_COUNTS,
    ALL_TYPES_TABLES,
    ROUNDTRIP_COLUMNS,
    Change,
    all_types_workload,
    comparable,
    fetch_python_rows,
    float32,
    from_binlog_text,
    random_roundtrip_rows,
    roundtrip_insert_sql,
    roundtrip_workload,
)

pytestmark = pytest.mark.mariadb

BINLOG_MAGIC = b"\xfebin"


def _files_from(server: MariaDBServer, start_file: str) -> list[Path]:
    files = server.binlog_files()
    names = [f.name for f in files]
    return files[names.index(start_file) :]


def _rows_for(server: MariaDBServer, start_file: str, db: str, table: str | None = None) -> list[dict]:
    rows = []
    for f in _files_from(server, start_file):
        rows += [
            r for r in iter_rows(parse_binlog_file(f)) if r["db"] == db and (table is None or r["table"] == table)
        ]
    return rows


# ------------------------------------------------------------------------------------------ server


def test_server_settings(mariadb):
    assert mariadb.running
    v = mariadb.variables(
        ["log_bin", "binlog_format", "binlog_row_image", "binlog_checksum", "binlog_row_metadata",
         "binlog_annotate_row_events", "server_id", "time_zone", "skip_networking"]
    )  # fmt: skip
    assert v == {
        "log_bin": "1",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
        "binlog_checksum": "CRC32",
        "binlog_row_metadata": "MINIMAL",
        "binlog_annotate_row_events": "1",
        "server_id": "1",
        "time_zone": "+00:00",
        "skip_networking": "1",
    }
    assert len(os.fsencode(str(mariadb.socket))) <= 100
    assert mariadb.binlog_dir.is_dir() and mariadb.binlog_files()
    assert Path(mariadb.query_value("SELECT @@log_bin_basename")) == mariadb.binlog_basename


def test_query_rows_escaping(mariadb):
    rows = mariadb.query_rows(
        "SELECT 'a\\tb', 'l1\\nl2', 'back\\\\slash', 'nul\\0x', NULL, 'é😀', '', 1 UNION ALL "
        "SELECT 'x', 'y', 'z', 'w', 'v', 'u', 't', 2"
    )
    assert rows == [
        ["a\tb", "l1\nl2", "back\\slash", "nul\x00x", None, "é😀", "", "1"],
        ["x", "y", "z", "w", "v", "u", "t", "2"],
    ]
    assert mariadb.query_rows("SELECT X'00FF0A5C', HEX(NULL)", binary=True) == [[b"\x00\xff\n\\", None]]
    assert mariadb.query_rows("SELECT 1 FROM DUAL WHERE 0") == []
    assert mariadb.query_value("SELECT 42") == "42"
    # multi-statement scripts run in one session
    out = mariadb.sql("SET @x = 5;\nSELECT @x + 1;\nSELECT @x * 2;")
    assert out.split() == ["6", "10"]


def test_sql_error_is_clear(mariadb):
    with pytest.raises(MariaDBError) as ei:
        mariadb.sql("SELECT 1;\nSELEC oops;")
    msg = str(ei.value)
    assert "ERROR 1064" in msg and "SELEC oops" in msg and "line 2" in msg


def test_flush_logs_makes_new_file(mariadb):
    before = mariadb.binlog_files()
    new = mariadb.flush_logs()
    after = mariadb.binlog_files()
    assert after[:-1] == before and after[-1] == new and new not in before
    assert new.read_bytes()[:4] == BINLOG_MAGIC
    assert mariadb.master_status()[0] == new.name
    # the previous file was closed with a Rotate event pointing at the new one
    ev = parse_binlog_file(before[-1])
    assert ev[-1]["type"] == "Rotate" and ev[-1]["next_file"] == new.name


# ------------------------------------------------------------------------------- all-types workload


@pytest.fixture(scope="module")
def all_types(mariadb):
    run = all_types_workload(mariadb, db="wl")
    mariadb.flush_logs()
    return run


def test_all_types_final_state(mariadb, all_types):
    counts = {t: int(mariadb.query_value(f"SELECT COUNT(*) FROM wl.{t}")) for t in ALL_TYPES_TABLES}
    assert counts == ALL_TYPES_FINAL_COUNTS
    assert mariadb.query_rows("SELECT id, balance FROM wl.t_acct ORDER BY id") == [["1", "69.75"], ["2", "80.25"]]
    assert mariadb.query_rows("SELECT HEX(cbin), HEX(vbin) FROM wl.t_str WHERE id = 2") == [
        ["0000616200000000", "00FF00"]
    ]
    assert mariadb.query_rows("SELECT d, y, CAST(dt3 AS CHAR), UNIX_TIMESTAMP(ts6) FROM wl.t_time WHERE id = 5") == [
        ["0000-00-00", "0000", "0000-00-00 00:00:00.000", "0.000000"]
    ]
    assert mariadb.query_value("SELECT e + 0 FROM wl.t_enum WHERE id = 6") == "0"


def test_all_types_binlog_files(mariadb, all_types):
    files = _files_from(mariadb, all_types.start[0])
    assert len(files) >= 2  # the workload's file + the one opened by FLUSH BINARY LOGS
    for f in files:
        assert f.is_file() and f.read_bytes()[:4] == BINLOG_MAGIC
    proc = subprocess.run(
        [MARIADB_BINLOG, "--no-defaults", "-vvv", "--base64-output=decode-rows", str(files[0])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.returncode == 0, proc.stderr.decode()
    for table in ("t_int", "t_str", "t_blob", "t_geo", "t_mdb", "t_nopk", "t_large"):
        assert f"### INSERT INTO `wl`.`{table}`".encode() in proc.stdout
    assert b"### UPDATE `wl`.`t_cpk`" in proc.stdout and b"### DELETE FROM `wl`.`t_nopk`" in proc.stdout


def test_all_types_binlog_matches_final_state(mariadb, all_types):
    events = []
    for f in _files_from(mariadb, all_types.start[0]):
        events += parse_binlog_file(f)
    rows = [r for r in iter_rows(events) if r["db"] == "wl"]
    # replaying inserts/deletes gives the final row counts (rolled-back work is absent)
    net = Counter()
    for r in rows:
        net[r["table"]] += {"insert": 1, "delete": -1, "update": 0}[r["op"]]
    assert dict(net) == ALL_TYPES_FINAL_COUNTS
    assert not any("ghost" in (r["after"] or {}).get(2, "") for r in rows if r["table"] == "t_acct")
    # every MariaDB column type family shows up in the type comments
    types = {tc.name for r in rows for img in ("before_types", "after_types") for tc in (r[img] or {}).values()}
    assert {
        "TINYINT", "SHORTINT", "MEDIUMINT", "INT", "LONGINT", "DECIMAL", "FLOAT", "DOUBLE", "BIT", "YEAR",
        "DATE", "TIME", "DATETIME", "TIMESTAMP", "STRING", "VARSTRING", "TINYBLOB/TINYTEXT", "BLOB/TEXT",
        "MEDIUMBLOB/MEDIUMTEXT", "LONGBLOB/LONGTEXT", "ENUM", "SET", "GEOMETRY",
    } <= types  # fmt: skip
    # the multi-table transaction is one GTID group: 2 updates, 2 inserts, 1 delete between BEGIN/COMMIT
    acct = [(r["table"], r["op"]) for r in rows if r["table"] in ("t_acct", "t_ledger")]
    assert acct == [("t_acct", "insert")] * 3 + [
        ("t_acct", "update"), ("t_acct", "update"), ("t_ledger", "insert"), ("t_ledger", "insert"), ("t_acct", "delete")
    ]  # fmt: skip
    # primary-key update of t_cpk: before and after keys differ
    pk = [r for r in rows if r["table"] == "t_cpk" and r["op"] == "update"][0]
    assert (pk["before"][1], pk["after"][1]) == ("1", "10")
    # large rows: 20000 x 'L' arrive intact
    big = [r for r in rows if r["table"] == "t_large" and r["op"] == "insert"][0]
    assert big["after"][2] == "'" + "L" * 20000 + "'"


# --------------------------------------------------------------------------------- random roundtrip


def test_random_rows_are_deterministic():
    a, b = random_roundtrip_rows(7, 20), random_roundtrip_rows(7, 20)
    assert a == b and a != random_roundtrip_rows(8, 20)
    assert all(v is None for k, v in a[0].items() if k != "id")
    kinds = {c.name: c.kind for c in ROUNDTRIP_COLUMNS}
    for row in a[1:]:
        for name, v in row.items():
            if v is None:
                continue
            k = kinds[name]
            assert isinstance(v, {"int": int, "dec": Decimal, "float": float, "double": float, "bit": int,
                                  "year": int, "date": dt.date, "time": dt.timedelta, "datetime": dt.datetime,
                                  "timestamp": dt.datetime, "char": str, "varchar": str, "text": str,
                                  "binary": bytes, "varbinary": bytes, "blob": bytes, "enum": str, "set": str,
                                  "json": str}[k])  # fmt: skip
            if k == "timestamp":
                assert v.tzinfo is dt.timezone.utc
            if k == "float":
                assert float32(v) == v


@pytest.mark.parametrize("seed", [1, 2])
def test_roundtrip_expected_values_match_server(mariadb, seed):
    run = roundtrip_workload(mariadb, seed=seed, n=40, db=f"rt_srv{seed}")
    assert fetch_python_rows(mariadb, run.db, run.table) == run.final
    # the inserted rows (before changes) also read back identically from a fresh copy
    mariadb.sql(f"CREATE TABLE {run.db}.copy LIKE {run.db}.{run.table}")
    mariadb.sql(roundtrip_insert_sql(run.rows, "copy"), db=run.db)
    assert fetch_python_rows(mariadb, run.db, "copy") == {r["id"]: r for r in run.rows}


def test_roundtrip_binlog_text_matches_expected_changes(mariadb):
    run = roundtrip_workload(mariadb, seed=3, n=30, db="rt_bin", rows_per_statement=7)
    mariadb.flush_logs()
    rows = _rows_for(mariadb, run.start[0], run.db, run.table)
    names = [c.name for c in ROUNDTRIP_COLUMNS]

    def image(img, types):
        if img is None:
            return None
        assert sorted(img) == list(range(1, len(ROUNDTRIP_COLUMNS) + 1))  # FULL row image
        return {names[i - 1]: from_binlog_text(ROUNDTRIP_COLUMNS[i - 1], img[i], types[i]) for i in img}

    def expect(values):
        if values is None:
            return None
        return {c.name: comparable(c, values[c.name], from_text=True) for c in ROUNDTRIP_COLUMNS}

    got = [Change(r["op"], image(r["before"], r["before_types"]), image(r["after"], r["after_types"])) for r in rows]
    want = [Change(c.op, expect(c.before), expect(c.after)) for c in run.changes]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"change #{i}"


# ------------------------------------------------------------------------- several servers at once


def test_two_servers_with_different_settings(mariadb_factory):
    a = mariadb_factory(server_id=2, checksum="NONE", row_metadata="FULL")
    b = mariadb_factory(server_id=3, row_image="MINIMAL", annotate_rows=False)
    assert a.running and b.running and a.socket != b.socket and a.pid != b.pid
    assert a.variables(["binlog_checksum", "binlog_row_metadata", "server_id"]) == {
        "binlog_checksum": "NONE",
        "binlog_row_metadata": "FULL",
        "server_id": "2",
    }
    assert b.variables(["binlog_row_image", "binlog_annotate_row_events", "server_id"]) == {
        "binlog_row_image": "MINIMAL",
        "binlog_annotate_row_events": "0",
        "server_id": "3",
    }
    script = (
        "CREATE DATABASE d; USE d;"
        "CREATE TABLE t (id INT PRIMARY KEY, u INT UNSIGNED, v VARCHAR(20));"
        "INSERT INTO t VALUES (1, 4294967295, 'one'), (2, 0, 'two');"
        "UPDATE t SET v = 'uno' WHERE id = 1;"
    )
    a.sql(script)
    b.sql(script)
    ev_a = parse_binlog_text(run_mariadb_binlog(a.binlog_files()[-1], print_table_metadata=True))
    ev_b = parse_binlog_text(run_mariadb_binlog(b.binlog_files()[-1], print_table_metadata=True))
    assert all(e["crc32"] is None for e in ev_a) and all(e["server_id"] == 2 for e in ev_a)
    assert all(e["crc32"] is not None for e in ev_b) and all(e["server_id"] == 3 for e in ev_b)
    tm = next(e for e in ev_a if e["type"] == "Table_map" and e["table"] == "t")
    assert [(c.name, c.unsigned) for c in tm["columns"]] == [("id", False), ("u", True), ("v", False)]
    assert tm["primary_key"] == ["id"]
    assert "Annotate_rows" in {e["type"] for e in ev_a} and "Annotate_rows" not in {e["type"] for e in ev_b}
    upd_a = [r for r in iter_rows(ev_a) if r["op"] == "update"][0]
    upd_b = [r for r in iter_rows(ev_b) if r["op"] == "update"][0]
    assert sorted(upd_a["before"]) == [1, 2, 3] and sorted(upd_a["after"]) == [1, 2, 3]
    assert sorted(upd_b["before"]) == [1] and sorted(upd_b["after"]) == [3]  # MINIMAL: PK / changed cols
    # stop one, the other keeps running
    a.stop()
    assert not a.running and b.running
    assert b.query_value("SELECT COUNT(*) FROM d.t") == "2"


def test_clean_stop_and_restart(tmp_path):
    srv = MariaDBServer(tmp_path / "srv", server_id=9)
    with srv:
        srv.sql("CREATE DATABASE keep; CREATE TABLE keep.t (id INT PRIMARY KEY); INSERT INTO keep.t VALUES (1)")
        pid = srv.pid
        last = srv.binlog_files()[-1]
    assert not srv.running
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert "Shutdown complete" in srv.error_log_text()
    ev = parse_binlog_file(last)
    assert ev[-1]["type"] == "Stop"  # a clean shutdown ends the binlog with a STOP event
    srv.stop()  # idempotent
    # restart on the same datadir: data kept, a new binlog file
    with srv:
        assert srv.query_value("SELECT COUNT(*) FROM keep.t") == "1"
        assert srv.binlog_files()[-1] != last


def test_long_basedir_uses_short_socket(tmp_path):
    base = tmp_path / ("x" * 60) / ("y" * 60)
    with MariaDBServer(base, server_id=5) as srv:
        assert not str(srv.socket).startswith(str(base))
        assert len(os.fsencode(str(srv.socket))) <= 100
        assert srv.query_value("SELECT @@server_id") == "5"
        sock_dir = srv.socket.parent
    assert not sock_dir.exists()


def test_start_failure_reports_error_log(tmp_path):
    srv = MariaDBServer(tmp_path / "bad", extra_args=("--no-such-option-xyz=1",), start_timeout=30)
    with pytest.raises(MariaDBError) as ei:
        srv.start()
    assert "no-such-option-xyz" in str(ei.value)
    assert not srv.running
