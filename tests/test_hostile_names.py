"""Database, table and column names come from the binlog: they are data. A private MariaDB
server creates tables whose names hold backticks, quotes, dots, slashes, backslashes, spaces,
emoji, SQL keywords, ``..``, ``%`` and ``~`` escapes and 64-character names; the whole pipeline
(bronze, then silver) runs over its binlogs, and every silver table must land at its escaped
path inside the warehouse, nothing may be written outside it, and each silver table must equal
the server's ``SELECT *``.

Half the tables are logged with ``binlog_row_metadata=MINIMAL`` (silver takes the column names
from the CREATE TABLE statements in the binlog), half with ``FULL`` (names in the table maps).
MariaDB identifiers are limited to the Basic Multilingual Plane, so the emoji are BMP ones (☕).
"""
from __future__ import annotations

import os
from pathlib import Path

import deltalake
import pytest

from spark_fixtures import require_delta_spark, spark  # noqa: F401  (the shared session fixture)

from pipelines import bronze, delta_io
from pipelines.silver import step as silver_step
from pipelines.config import load_config
from pipelines.paths import silver_table_name, silver_table_path

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

DB_QUOTES = 'shop`; DROP DATABASE x; -- it\'s "q" ☕'
DB_DOTS = ".."
DB_LONG = "d" * 60 + "☕./`"  # 64 characters (MariaDB's own file name for a database caps the rest)
KEY = "id"

# (db, table, metadata, [(column, type)], rows) - the first column is the key
TABLES = [
    (DB_QUOTES, "..", "MINIMAL",
     [(KEY, "INT"), ("a`b", "VARCHAR(20)"), ('it\'s "q"', "VARCHAR(20)"), ("with space", "INT")],
     [(1, "x`y", "it's", 7), (2, 'say "hi"', None, -1), (3, "..", "/etc/passwd", 0)]),
    (DB_DOTS, "select", "MINIMAL",
     [(KEY, "INT"), ("a.b", "VARCHAR(20)"), ("☕", "INT"), ("select", "VARCHAR(10)"), ("c" * 64, "INT")],
     [(1, "a.b", 1, "from", 64), (2, "\\", 2, "where", None), (3, "☕", 3, "", 0)]),
    (DB_QUOTES, "a/b\\c ☕ .x", "FULL",
     [(KEY, "INT"), ("from/../x", "VARCHAR(20)"), ("%25", "INT"), ("~7E", "VARCHAR(5)")],
     [(1, "../../x", 25, "~"), (2, "%2F", 37, "~7E"), (3, None, None, None)]),
    (DB_LONG, "t" * 64, "FULL",
     [(KEY, "INT"), ("y" * 64, "VARCHAR(20)"), ("order", "INT")],
     [(1, "long", 1), (2, "names", 2), (3, "here", 3)]),
]


def q(name: str) -> str:
    """A quoted MariaDB identifier."""
    return "`" + name.replace("`", "``") + "`"


def lit(v) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, int):
        return str(v)
    return "'" + v.replace("\\", "\\\\").replace("'", "''") + "'"


def workload(db: str, table: str, cols, rows) -> str:
    t = f"{q(db)}.{q(table)}"
    defs = ", ".join(f"{q(c)} {ty}" for c, ty in cols) + f", PRIMARY KEY ({q(KEY)})"
    sql = [f"CREATE DATABASE IF NOT EXISTS {q(db)}", f"CREATE TABLE {t} ({defs})"]
    sql += [f"INSERT INTO {t} VALUES ({', '.join(lit(v) for v in r)})" for r in rows]
    second = cols[1][0]
    sql.append(f"UPDATE {t} SET {q(second)} = {lit('new ' + chr(39) + '`')} WHERE {q(KEY)} = 1")
    sql.append(f"DELETE FROM {t} WHERE {q(KEY)} = 2")
    return ";\n".join(sql) + ";\n"


def silver_rows(path: str, cols) -> list[tuple]:
    rows = delta_io.open_table(path).read_arrow().to_pylist()
    return sorted(tuple(None if r[c] is None else str(r[c]) for c, _t in cols) for r in rows)


def files_under(root: Path) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), root) for d, _dirs, fs in os.walk(root) for f in fs}


@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_hostile_names_land_at_their_escaped_paths(spark, mariadb_factory, backend, tmp_path):  # noqa: F811
    if backend == "spark":
        require_delta_spark(spark)
    srv = mariadb_factory(row_metadata="MINIMAL")
    first = srv.flush_logs()
    for db, table, metadata, cols, rows in TABLES:
        srv.sql(f"SET GLOBAL binlog_row_metadata = '{metadata}'")
        srv.sql(workload(db, table, cols, rows))
    srv.flush_logs()
    folder, wh = tmp_path / "in", tmp_path / "wh"
    folder.mkdir()
    files = srv.binlog_files()
    for p in files[files.index(first) : -1]:
        (folder / p.name).write_bytes(p.read_bytes())
    siblings = set(os.listdir(tmp_path.parent))
    cfg = load_config(None, {"input": str(folder), "warehouse": str(wh), "progress": False,
                             "delta.backend": backend})

    b = bronze.run(spark, cfg)
    s = silver_step.run(spark, cfg)

    assert b.status == "ok" and b.quarantined == 0, b.summary()
    assert s.status == "ok" and s.quarantined == 0, s.summary()
    for db, table, metadata, cols, _rows in TABLES:
        assert s.tables[f"{db}.{table}"]["name_source"] == {"MINIMAL": "ddl", "FULL": "table_map"}[metadata]
        path = silver_table_path(str(wh), db, table)
        assert os.path.dirname(os.path.dirname(path)) == str(wh / "silver")
        assert deltalake.DeltaTable.is_deltatable(path), f"{db}.{table} not at {path}"
        assert silver_table_name(path) == (db, table)
        expected = srv.query_rows(f"SELECT {', '.join(q(c) for c, _t in cols)} FROM {q(db)}.{q(table)}")
        assert silver_rows(path, cols) == sorted(tuple(r) for r in expected), f"{db}.{table}"

    # nothing outside the warehouse: the only folders with Delta logs are the expected tables,
    # nothing new next to tmp_path, and under tmp_path only the input and the warehouse
    tables = {os.path.relpath(d, wh) for d, dirs, _fs in os.walk(wh) if "_delta_log" in dirs}
    silver = {os.path.relpath(silver_table_path(str(wh), db, t), wh) for db, t, *_ in TABLES}
    assert {t for t in tables if t.startswith("silver" + os.sep)} == silver
    assert all(t.startswith(("silver" + os.sep, "bronze" + os.sep, "_pipeline" + os.sep)) for t in tables), tables
    assert set(os.listdir(tmp_path.parent)) == siblings
    assert set(os.listdir(tmp_path)) == {"in", "wh"}
    assert all(".." not in Path(f).parts for f in files_under(wh))
