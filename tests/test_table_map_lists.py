"""The TABLE_MAP's optional-metadata lists, established on a private MariaDB server: for every
column type MariaDB has, which lists (SIGNEDNESS, column charsets, ENUM/SET charsets and values,
geometry types) the server writes it into. The oracle is the server itself: each table puts the
type under test in front of columns whose decoding depends on every list being aligned, and the
decoded row must equal what ``SELECT`` returns. ``mariadb-binlog`` is not consulted: it skips
YEAR in SIGNEDNESS although the server writes it there, and so shifts every later bit.
"""
from __future__ import annotations

import pytest

from pipelines.binlog.changes import RowChange, iter_changes
from pipelines.binlog.constants import ColumnType
from pipelines.binlog.events_table_map import _optional_metadata
from pipelines.binlog.txindex import scan

pytestmark = pytest.mark.mariadb

# every MariaDB 10.11 column type (and the spellings that give another real type or metadata)
TYPES = [
    "TINYINT", "TINYINT UNSIGNED", "SMALLINT", "SMALLINT UNSIGNED", "MEDIUMINT", "MEDIUMINT UNSIGNED", "INT",
    "INT UNSIGNED", "BIGINT", "BIGINT UNSIGNED", "BOOL", "DECIMAL(5,2)", "DECIMAL(5,2) UNSIGNED", "FLOAT",
    "FLOAT UNSIGNED", "DOUBLE", "BIT(3)", "YEAR", "DATE", "TIME", "TIME(2)", "DATETIME", "DATETIME(3)",
    "TIMESTAMP(1) NULL", "CHAR(3)", "VARCHAR(4)", "CHAR(3) CHARACTER SET latin1", "BINARY(2)", "VARBINARY(3)",
    "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT CHARACTER SET latin1", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB",
    "ENUM('x','y')", "ENUM('q') CHARACTER SET latin1", "SET('x','y')", "JSON", "GEOMETRY", "POINT", "LINESTRING",
    "POLYGON", "MULTIPOINT", "GEOMETRYCOLLECTION", "INET4", "INET6", "UUID",
]
# after the type under test: one column for each list, each decoded wrongly when a list is off by one
PROBES = ("u TINYINT UNSIGNED, s MEDIUMINT, c VARCHAR(5) CHARACTER SET latin1, e ENUM('a','é') CHARACTER SET latin1, "
          "g LINESTRING, st SET('m','ñ') CHARACTER SET latin1, v SMALLINT UNSIGNED")
PROBE_VALUES = "255, -1, 'é', 'é', ST_GeomFromText('LINESTRING(0 0, 1 1)'), 'ñ', 65535"
EXPECTED = {"u": 255, "s": -1, "c": "é", "e": "é", "st": "ñ", "v": 65535}


def _changes(files, db: str) -> dict[str, RowChange]:
    out = {}
    for path in files:
        for ch in iter_changes(str(path), scan(str(path))):
            if isinstance(ch, RowChange) and ch.db == db:
                out[ch.table] = ch
    return out


def _named(ch: RowChange) -> dict:
    names = ch.table_map.column_names
    return {names[i]: v for i, v in zip(ch.columns_after, ch.after)}


def test_every_type_keeps_the_lists_aligned(mariadb_factory):
    srv = mariadb_factory(row_metadata="FULL")
    srv.sql("CREATE DATABASE lists CHARACTER SET utf8mb4")
    for i, t in enumerate(TYPES):
        srv.sql(f"CREATE TABLE t{i} (x {t}, {PROBES}); INSERT INTO t{i} (u, s, c, e, g, st, v) VALUES ({PROBE_VALUES})",
                db="lists")
    srv.flush_logs()
    changes = _changes(srv.binlog_files()[:-1], "lists")
    wrong = []
    for i, t in enumerate(TYPES):
        server = srv.query_rows(f"SELECT u, s, c, e, st, v, ST_AsText(g) FROM lists.t{i}")[0]
        assert server == ["255", "-1", "é", "é", "ñ", "65535", "LINESTRING(0 0,1 1)"], t  # the oracle
        got = _named(changes[f"t{i}"])
        values = {k: got[k] for k in EXPECTED}
        if values != EXPECTED:
            wrong.append(f"{t}: {values}")
        geo = changes[f"t{i}"].table_map.geometry_types
        if geo is None or geo[5] != 2:  # g: LINESTRING
            wrong.append(f"{t}: geometry types {geo}")
    assert not wrong, "\n".join(wrong)


def test_the_issue_table_a_year_before_integers(mariadb_factory):
    # the table from the report: silver had MEDIUMINT -1 as 16777215 and TINYINT UNSIGNED 255 as -1
    srv = mariadb_factory(row_metadata="FULL")
    srv.sql("CREATE DATABASE y CHARACTER SET utf8mb4")
    srv.sql("CREATE TABLE t (id INT, c0 VARBINARY(300), c1 YEAR, c2 TINYTEXT, c3 MEDIUMINT, c4 DATE, c5 BIT(7), "
            "c6 TIMESTAMP(3) NULL, c7 BIT(7), c8 BINARY(4), c9 BIGINT, c10 TINYINT UNSIGNED, c11 DATE); "
            "INSERT INTO t (id, c1, c3, c9, c10) VALUES (1, 2024, -1, -9223372036854775808, 255)", db="y")
    srv.flush_logs()
    got = _named(_changes(srv.binlog_files()[:-1], "y")["t"])
    server = srv.query_rows("SELECT c1, c3, c9, c10 FROM y.t")[0]
    assert [str(got[c]) for c in ("c1", "c3", "c9", "c10")] == server == ["2024", "-1", "-9223372036854775808", "255"]


def test_mysql_rules_stay_mysql_rules():
    # MySQL writes no bit for YEAR (writer and reader agree): a MySQL table map with YEAR before a
    # TINYINT UNSIGNED has one bit, for the TINYINT
    types = (ColumnType.YEAR, ColumnType.TINY)
    raw = bytes([1, 1, 0b1000_0000])  # SIGNEDNESS, length 1, one bit set
    assert _optional_metadata(raw, types, mariadb=False)["signedness"] == (None, True)
    # MariaDB writes a bit for YEAR first: YEAR's "unsigned", then the TINYINT's
    raw = bytes([1, 1, 0b1000_0000])
    assert _optional_metadata(raw, types, mariadb=True)["signedness"] == (True, False)
