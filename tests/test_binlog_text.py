"""Tests of the mariadb-binlog text parser against the shared corpus (real server output)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest

from binlog_text import (
    UTC,
    TypeComment,
    iter_rows,
    parse_binlog_text,
    parse_text_file,
    parse_type_comment,
    parse_value,
    rows_events,
    unquote_bytes,
)

pytestmark = pytest.mark.corpus

# small and medium files covering: all types (02), keys/txn/XA (03), DDL (04), MINIMAL (07),
# NOBLOB (08), checksum NONE (09), row metadata (11, 12), compressed events (13), statement/mixed
# (14), GTID domains / two-phase ALTER (15), MariaDB specifics incl. a mixed Update+Write statement
# (16), group commit (18), STOP event (19)
FILES = [
    "binlog.000002.txt",
    "binlog.000003.txt",
    "binlog.000004.txt",
    "binlog.000007.txt",
    "binlog.000008.txt",
    "binlog.000009.txt",
    "binlog.000011.meta.txt",
    "binlog.000012.meta.txt",
    "binlog.000013.txt",
    "binlog.000014.txt",
    "binlog.000015.txt",
    "binlog.000016.txt",
    "binlog.000018.txt",
    "binlog.000019.txt",
]


@pytest.fixture(scope="module")
def binlogs(corpus_dir):
    d = corpus_dir / "mariadb-10.11" / "binlogs"
    if not d.is_dir():
        pytest.skip(f"no MariaDB 10.11 corpus in {d}")
    return d


@pytest.fixture(scope="module")
def files_tsv(binlogs):
    lines = (binlogs.parent / "FILES.tsv").read_text("utf-8").splitlines()
    head = lines[0].split("\t")
    return {r[0]: dict(zip(head, r)) for r in (l.split("\t") for l in lines[1:])}


@pytest.fixture(scope="module")
def parsed(binlogs):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = parse_text_file(binlogs / name)
        return cache[name]

    return get


@pytest.mark.parametrize("name", FILES)
def test_rows_match_printed_statements(binlogs, parsed, files_tsv, name):
    data = (binlogs / name).read_bytes()
    events = parsed(name)
    # every "### INSERT INTO / UPDATE / DELETE FROM `db`.`t`" line is exactly one parsed row image
    printed = re.findall(rb"^### (INSERT INTO|UPDATE|DELETE FROM) `", data, re.M)
    rows = list(iter_rows(events))
    assert len(rows) == len(printed)
    assert [r["op"] for r in rows] == [
        {b"INSERT INTO": "insert", b"UPDATE": "update", b"DELETE FROM": "delete"}[p] for p in printed
    ]
    # "# Number of rows: N" after the statement's last event counts all its rows
    assert sum(e["number_of_rows"] or 0 for e in rows_events(events)) == len(rows)
    for e in rows_events(events):
        if "stmt_events" in e:
            assert e["number_of_rows"] == len(e["rows"]) > 0
        else:
            assert e["rows"] == [] and e["stmt_end_pos"] > e["pos"]
        assert not e.get("extra"), e.get("extra")
    # same number of events as the binary file holds (FILES.tsv), contiguous positions
    binfile = name.split(".txt")[0].replace(".meta", "")
    assert len(events) == int(files_tsv[binfile]["events"])
    assert events[0]["pos"] == 4
    for a, b in zip(events, events[1:]):
        assert a["end_log_pos"] == b["pos"]
    # every value line carries a type comment and converts without error
    for r in rows:
        for img in ("before", "after"):
            if r[img] is None:
                continue
            assert set(r[img]) == set(r[img + "_types"])
            for k, text in r[img].items():
                tc = r[img + "_types"][k]
                assert isinstance(tc, TypeComment)
                assert (parse_value(text, tc) is None) == tc.is_null == (text == "NULL")


def test_event_types_and_fields(parsed):
    ev = parsed("binlog.000003.txt")
    types = [e["type"] for e in ev]
    assert types[:4] == ["Format_desc", "Gtid_list", "Binlog_checkpoint", "Gtid"]
    assert types[-1] == "Rotate" and ev[-1]["next_file"] == "binlog.000004" and ev[-1]["next_pos"] == 4
    assert ev[0]["server_version"].startswith("10.11.")
    assert ev[0]["crc32"] == 0x13160939
    g = ev[3]
    assert (g["gtid"], g["domain_id"], g["seq_no"], g["gtid_flags"]) == ("0-1-63", 0, 63, "trans")
    # Annotate_rows printed before its Table_map: both "# at" lines come first
    ann, tm, wr, xid = ev[4:8]
    assert (ann["type"], ann["pos"], ann["end_log_pos"]) == ("Annotate_rows", 381, 580)
    assert ann["sql"].startswith("INSERT INTO corpus.marker(section, note) VALUES ('02_keys_txn'")
    assert (tm["type"], tm["pos"], tm["db"], tm["table"], tm["table_id"]) == ("Table_map", 580, "corpus", "marker", 18)
    assert (wr["type"], wr["pos"], wr["op"], wr["table_id"], wr["flags"]) == ("Write_rows", 637, "insert", 18, "STMT_END_F")
    assert wr["rows"][0]["after"] == {
        1: "2",
        2: "'02_keys_txn'",
        3: "'no-PK, composite keys, key changes, multi-row, multi-table txn, rollback, savepoint, XA, triggers, FK cascade'",
    }
    assert wr["rows"][0]["after_types"][2] == TypeComment("VARSTRING", "256", 256, False, False)
    assert (xid["type"], xid["xid"]) == ("Xid", 73)
    q = ev[9]
    assert q["type"] == "Query" and q["db"] == "corpus" and q["thread_id"] == 5
    assert q["sql"] == "CREATE TABLE t_nopk (a INT, b VARCHAR(20), c DATETIME(3)) ENGINE=InnoDB"
    xa = [e for e in ev if e["type"] == "XA_prepare"]
    assert [e["xid"] for e in xa] == ["X'786131',X'',1", "X'786132',X'6271',7"]


def test_checksum_none_and_special_events(parsed):
    ev = parsed("binlog.000009.txt")
    assert all(e["crc32"] is None for e in ev)
    ev = parsed("binlog.000014.txt")
    assert {"Intvar", "Rand", "User_var", "Begin_load_query", "Execute_load_query"} <= {e["type"] for e in ev}
    ex = next(e for e in ev if e["type"] == "Execute_load_query")
    assert ex["sql"].startswith("LOAD DATA LOCAL INFILE")
    ev = parsed("binlog.000019.txt")
    assert ev[-1]["type"] == "Stop"
    ev = parsed("binlog.000015.txt")
    assert [e["gtid_flags"] for e in ev if e["type"] == "Gtid" and "ALTER" in e["gtid_flags"]] == [
        "ddl START ALTER",
        "ddl COMMIT ALTER id= 254",
    ]


def test_multi_event_statement(parsed):
    # a system-versioned UPDATE is logged as Update_rows + Write_rows; mariadb-binlog prints both
    # row images after the second header
    ev = parsed("binlog.000016.txt")
    upd = next(e for e in ev if e["pos"] == 2631)
    wr = next(e for e in ev if e["pos"] == 2713)
    assert (upd["type"], upd["rows"], upd["stmt_end_pos"]) == ("Update_rows", [], 2713)
    assert wr["type"] == "Write_rows" and wr["stmt_events"] == [2631, 2713]
    assert [r["op"] for r in wr["rows"]] == ["update", "insert"]
    assert wr["table"] == upd["table"] == "t_versioned"


def test_table_metadata(parsed):
    ev = parsed("binlog.000012.meta.txt")
    tm = next(e for e in ev if e["type"] == "Table_map" and e["table"] == "t_int")
    cols = tm["columns"]
    assert [c.name for c in cols[:4]] == ["id", "ti", "tiu", "si"]
    assert [c.unsigned for c in cols[:4]] == [False, False, True, False]
    assert cols[0].nullable is False and cols[1].nullable is True
    assert tm["primary_key"] == ["id"]
    tm = next(e for e in ev if e["type"] == "Table_map" and e["table"] == "marker")
    assert tm["columns"][1].charset == "utf8mb4" and tm["columns"][1].type.startswith("VARCHAR(64) NOT NULL")
    ev = parsed("binlog.000011.meta.txt")  # MINIMAL metadata: no names
    tm = next(e for e in ev if e["type"] == "Table_map" and e.get("columns"))
    assert tm["columns"][0].name is None


def _row(parsed, name, table, op, nth=0):
    rows = [r for r in iter_rows(parsed(name)) if r["table"] == table and r["op"] == op]
    return rows[nth]


def _values(row, img="after", unsigned=()):
    return {
        k: parse_value(v, row[img + "_types"][k], unsigned=k in unsigned) for k, v in row[img].items()
    }


def test_hand_checked_values_ints_decimals(parsed):
    r = _row(parsed, "binlog.000002.txt", "t_int", "insert", 1)  # (2,127,255,32767,65535,...)
    assert r["after"][3] == "-1 (255)"
    v = _values(r, unsigned={3, 5, 7, 9, 11, 13})
    assert v == {1: 2, 2: 127, 3: 255, 4: 32767, 5: 65535, 6: 8388607, 7: 16777215, 8: 2147483647,
                 9: 4294967295, 10: 9223372036854775807, 11: 18446744073709551615, 12: 1, 13: 99999999}
    assert _values(r)[11] == -1  # signed reading when signedness unknown
    r = _row(parsed, "binlog.000002.txt", "t_int", "insert", 0)
    assert _values(r, unsigned={11})[10] == -9223372036854775808
    r = _row(parsed, "binlog.000002.txt", "t_dec", "insert", 2)
    v = _values(r)
    assert v[10] == Decimal("-99999999999999999999999999999999999.999999999999999999999999999999")
    assert v[9] == Decimal("-0.99999999999999999999999999999999999999")
    assert str(v[3]) == "-999.99" and v[12] == Decimal("0.0000")


def test_hand_checked_values_temporal(parsed):
    rows = [r for r in iter_rows(parsed("binlog.000002.txt")) if r["table"] == "t_time" and r["op"] == "insert"]
    lo, hi, zero = (_values(r) for r in rows[:3])
    assert lo[2] == dt.date(1000, 1, 1) and lo[3] == 1901
    assert lo[4] == -dt.timedelta(hours=838, minutes=59, seconds=59)
    assert lo[10] == -dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=999999)
    assert lo[18] == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert hi[2] == dt.date(9999, 12, 31) and hi[3] == 2155
    assert hi[17] == dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    assert hi[24] == dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC)
    assert hi[19] == dt.datetime(2038, 1, 19, 3, 14, 7, 900000, tzinfo=UTC)
    # zero dates (sql_mode=''): YEAR 0 printed as 1900, DATE as '0000:00:00', TIMESTAMP as 0
    assert zero[2] == "0000-00-00" and zero[3] == 0
    assert zero[11] == "0000-00-00 00:00:00" and zero[17] == "0000-00-00 00:00:00.000000"
    assert zero[18] == "0000-00-00 00:00:00" and zero[21] == "0000-00-00 00:00:00.000"
    tc = parse_type_comment("/* TIME(1) meta=1 nullable=1 is_null=0 */")
    assert parse_value("'-00:00:00.5'", tc) == -dt.timedelta(microseconds=500000)
    tc = parse_type_comment("/* DATE meta=0 nullable=1 is_null=0 */")
    assert parse_value("'2024:02:29'", tc) == dt.date(2024, 2, 29)
    assert parse_value("'2024:00:15'", tc) == "2024-00-15"


def test_hand_checked_values_strings_bits(parsed):
    r = _row(parsed, "binlog.000002.txt", "t_str", "insert", 2)
    v = _values(r)
    assert v[2] == b"  lead" and v[3] == b"trail"  # CHAR: trailing spaces stripped in the binlog
    assert v[4] == b"tab\there" and v[5] == b"nl\nx"
    assert v[6] == b"quote's \\ bs"  # quote and backslash printed raw
    assert v[8] == "café ß".encode("latin1")  # latin1 column: raw latin1 bytes in the text
    assert v[12] == "ñ".encode()
    assert v[15] == b"\x00\x00\x00c"
    assert v[17] == b"\x00" * 15 + b"\xff"  # BINARY(16): pad bytes are not stripped inside
    assert v[19] == b"\xff\xfe" and v[20] == b""
    r = _row(parsed, "binlog.000002.txt", "t_bit", "insert", 4)
    assert r["after"][9] == "b'0000000100100011010001010110011110001001101010111100110111101111'"
    assert _values(r)[9] == 0x0123456789ABCDEF
    r = _row(parsed, "binlog.000002.txt", "t_enum", "insert", 1)
    v = _values(r)
    assert v[3] == 300  # ENUM(2 bytes) index
    assert v[7] == 2**64 - 1  # SET with 64 members, all set
    assert r["after"][6] == "b'0000000110000000'" and v[6] == 0x8001  # 's0,s15': little-endian bytes
    r = _row(parsed, "binlog.000002.txt", "t_enum", "insert", 4)  # (5,'b','v256','ü','x,z','s7,s8','m0,m31,m32')
    v = _values(r)
    assert (v[2], v[3], v[5], v[6], v[7]) == (2, 257, 0b101, (1 << 7) | (1 << 8), 1 | (1 << 31) | (1 << 32))


def test_float_double(parsed):
    r = _row(parsed, "binlog.000002.txt", "t_float", "insert", 1)
    assert r["after"][2] == "3.40282e+38"  # FLOAT: %g, 6 significant digits
    v = _values(r)
    assert v[2] == 3.40282e38 and v[4] == 1.7976931348623157e308


def test_parse_value_edge_cases():
    t = lambda s: parse_type_comment(s)
    assert unquote_bytes("'a\\x00\\x1f\\x41\\'") == b"a\x00\x1f\\x41\\"  # only bytes < 0x20 are escaped
    assert parse_value("NULL", t("/* VARSTRING(4) meta=4 nullable=1 is_null=1 */")) is None
    assert parse_value("'NULL'", t("/* VARSTRING(4) meta=4 nullable=1 is_null=0 */")) == b"NULL"
    assert parse_value("-56 (200)", "/* TINYINT meta=0 nullable=1 is_null=0 */", unsigned=True) == 200
    assert parse_value("5", "/* TINYINT meta=0 nullable=1 is_null=0 */", unsigned=True) == 5
    assert parse_value("b''", t("/* SET(1 bytes) meta=63489 nullable=1 is_null=0 */")) == 0
    assert parse_value("1588748889.123", t("/* TIMESTAMP(3) meta=3 nullable=1 is_null=0 */")) == dt.datetime(
        2020, 5, 6, 7, 8, 9, 123000, tzinfo=UTC
    )
    assert parse_value("'100:00:00.5'", t("/* TIME(1) meta=1 nullable=1 is_null=0 */")) == dt.timedelta(
        hours=100, microseconds=500000
    )
    tc = t("/* GEOMETRY meta=4 nullable=1 is_null=0 */")
    assert tc.full == "GEOMETRY" and tc.params is None and str(tc) == "/* GEOMETRY meta=4 nullable=1 is_null=0 */"


def test_parse_synthetic_text():
    text = (
        "# at 4\n"
        "#700101  0:00:00 server id 7  end_log_pos 100 \tStart: binlog v 4, server v 10.11.0-MariaDB created 700101\n"
        "# at 100\n"
        "#700101  0:00:00 server id 7  end_log_pos 150 \tTable_map: `d``b`.`t 1` mapped to number 5\n"
        "# at 150\n"
        "#700101  0:00:00 server id 7  end_log_pos 200 \tDelete_rows: table id 5 flags: STMT_END_F\n"
        "### DELETE FROM `d``b`.`t 1`\n"
        "### WHERE\n"
        "###   @1='x /* INT meta=0 nullable=0 is_null=0 */' /* VARSTRING(8) meta=8 nullable=1 is_null=0 */\n"
        "###   @2=1.5                  /* FLOAT meta=4 nullable=1 is_null=0 */\n"
        "# Number of rows: 1\n"
    )
    ev = parse_binlog_text(text.encode())
    assert [e["type"] for e in ev] == ["Format_desc", "Table_map", "Delete_rows"]
    assert (ev[1]["db"], ev[1]["table"]) == ("d`b", "t 1")
    (row,) = ev[2]["rows"]
    assert row["op"] == "delete" and row["after"] is None and row["db"] == "d`b"
    assert row["before"] == {1: "'x /* INT meta=0 nullable=0 is_null=0 */'", 2: "1.5"}
    assert row["before_types"][2].name == "FLOAT"
