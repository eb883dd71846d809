"""Event decoders: one unit test per event built from bytes (``event_builders``), then the
real files of ``../shared/corpus`` checked against their manifests and text decodes."""
from __future__ import annotations

import collections
import csv
import dataclasses
import itertools
import re
import struct
import sys
import types
from pathlib import Path

import pytest

from pipelines.binlog.charsets import codec_for_collation
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import event_builders as eb
from pipelines.binlog.constants import ColumnType as T
from pipelines.binlog.constants import EventFlag, EventType, event_type_name
from pipelines.binlog.errors import BinlogError, CorruptEvent, TruncatedEvent, UnsupportedType
from pipelines.binlog.events import (
    NUMERIC_TYPES,
    EVENT_DECODERS,
    MARIA_FL_DDL,
    MARIA_FL_START_ALTER,
    MARIA_FL_TRANSACTIONAL,
    AnnotateRowsEvent,
    BeginLoadQueryEvent,
    BinlogCheckpointEvent,
    DecodeContext,
    ExecuteLoadQueryEvent,
    FormatDescriptionEvent,
    GtidEvent,
    GtidListEvent,
    HeartbeatEvent,
    IgnorableEvent,
    IncidentEvent,
    IntvarEvent,
    MariaGtidEvent,
    PreviousGtidsEvent,
    QueryEvent,
    RandEvent,
    RotateEvent,
    RowsEvent,
    RowsQueryEvent,
    StartEncryptionEvent,
    StopEvent,
    TableMapEvent,
    TransactionContextEvent,
    TransactionPayloadEvent,
    UnknownEvent,
    UserVarEvent,
    ViewChangeEvent,
    XaPrepareEvent,
    XidEvent,
    decode_event,
)
from pipelines.binlog.framing import BinlogFile
from pipelines.binlog.values import InvalidText

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"binlog corpus not found at {CORPUS}")

SID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def _ctx(kind="mysql80", **kw) -> DecodeContext:
    return DecodeContext(eb.fmt(kind), **kw)


def _decode(code, data, kind="mysql80", ctx=None, **hkw):
    return decode_event(eb.raw(code, data, **hkw), ctx or _ctx(kind))


# ============================================================================= control events


def test_rotate_stop_xid():
    ev = _decode(EventType.ROTATE, eb.rotate(4, "binlog.000002"))
    assert isinstance(ev, RotateEvent) and (ev.position, ev.next_file) == (4, "binlog.000002")
    assert isinstance(_decode(EventType.STOP, b""), StopEvent)
    assert _decode(EventType.XID, eb.xid(2**64 - 1)).xid == 2**64 - 1


def test_rotate_without_name_is_corrupt():
    with pytest.raises(CorruptEvent, match="no file name"):
        _decode(EventType.ROTATE, eb.rotate(4, ""))


def test_xa_prepare():
    ev = _decode(EventType.XA_PREPARE, eb.xa_prepare(True, 1, b"gtrid-1", b"bq"))
    assert isinstance(ev, XaPrepareEvent)
    assert (ev.one_phase, ev.format_id, ev.gtrid_length, ev.bqual_length) == (True, 1, 7, 2)
    assert (ev.gtrid, ev.bqual, ev.data) == (b"gtrid-1", b"bq", b"gtrid-1bq")


def test_xa_prepare_rejects_oversized_xid():
    data = bytes([0]) + eb.u(1, 4) + eb.u(65, 4) + eb.u(0, 4) + b"x" * 65
    with pytest.raises(CorruptEvent, match="max 64"):
        _decode(EventType.XA_PREPARE, data)


def test_incident():
    ev = _decode(EventType.INCIDENT, eb.incident(1, "lost events"))
    assert isinstance(ev, IncidentEvent) and (ev.incident, ev.message) == (1, "lost events")


def test_heartbeat_v1_and_v2():
    ev = _decode(EventType.HEARTBEAT, b"binlog.000007", next_pos=1234)
    assert isinstance(ev, HeartbeatEvent) and (ev.log_file, ev.log_position, ev.version) == ("binlog.000007", 1234, 1)
    big = 5_000_000_000  # beyond the 4-byte next_pos of the common header
    ev = _decode(EventType.HEARTBEAT_V2, eb.heartbeat_v2("binlog.000007", big))
    assert (ev.log_file, ev.log_position, ev.version) == ("binlog.000007", big, 2)


def test_heartbeat_v2_skips_unknown_fields_and_needs_its_own():
    data = eb.packed_int(9) + eb.packed_int(3) + b"xyz" + eb.heartbeat_v2("f", 9)
    assert _decode(EventType.HEARTBEAT_V2, data).log_position == 9
    with pytest.raises(CorruptEvent, match="lacks"):
        _decode(EventType.HEARTBEAT_V2, eb.packed_int(0))


def test_ignorable_and_rows_query():
    ev = _decode(EventType.IGNORABLE, b"\x01\x02")
    assert isinstance(ev, IgnorableEvent) and ev.raw == b"\x01\x02"
    long_q = "INSERT INTO t VALUES " + ",".join(["(1)"] * 100)  # > 255 bytes: the length byte wraps
    ev = _decode(EventType.ROWS_QUERY, eb.rows_query(long_q), flags=EventFlag.IGNORABLE)
    assert isinstance(ev, RowsQueryEvent) and ev.query == long_q and ev.query_bytes == long_q.encode()


def test_format_description_wraps_framing():
    data = eb.fde_data(eb.fmt("mariadb")) + b"\0\0\0\0"  # framing leaves the CRC on the FDE
    ev = _decode(EventType.FORMAT_DESCRIPTION, data)
    assert isinstance(ev, FormatDescriptionEvent)
    assert ev.format.is_mariadb and ev.format.post_header_len(EventType.MARIA_GTID) == 19


# ============================================================================= QUERY


def test_query_mysql_status_vars_all_decoded():
    status = b"".join([
        eb.sv(0, eb.u(0x0C084000, 4)),
        eb.sv(1, eb.u(1168113696, 8)),
        eb.sv(3, eb.u(2, 2) + eb.u(1, 2)),
        eb.sv(4, eb.u(255, 2) + eb.u(255, 2) + eb.u(8, 2)),
        eb.sv(5, eb.lstr8("+00:00")),
        eb.sv(6, eb.lstr8("std")),
        eb.sv(7, eb.u(5, 2)),
        eb.sv(8, eb.u(33, 2)),
        eb.sv(9, eb.u(0b101, 8)),
        eb.sv(10, eb.u(999, 4)),
        eb.sv(11, eb.lstr8("root") + eb.lstr8("localhost")),
        eb.sv(12, bytes([2]) + b"db1\0db2\0"),
        eb.sv(13, eb.u(123456, 3)),
        eb.sv(14, eb.u(77, 8)),
        eb.sv(16, b"\x01"),
        eb.sv(17, eb.u(42, 8)),
        eb.sv(18, eb.u(255, 2)),
        eb.sv(19, b"\x01"),
        eb.sv(20, b"\x00"),
    ])
    ev = _decode(EventType.QUERY, eb.query("CREATE TABLE t (a INT)", schema="db1", status=status, error_code=3))
    assert isinstance(ev, QueryEvent) and not ev.compressed
    assert (ev.schema, ev.query, ev.error_code, ev.thread_id) == ("db1", "CREATE TABLE t (a INT)", 3, 7)
    assert ev.status_vars == {
        "Q_FLAGS2": 0x0C084000,
        "Q_SQL_MODE": 1168113696,
        "Q_AUTO_INCREMENT": {"increment": 2, "offset": 1},
        "Q_CHARSET": {"client": 255, "connection": 255, "server": 8},
        "Q_TIME_ZONE": "+00:00",
        "Q_CATALOG_NZ": "std",
        "Q_LC_TIME_NAMES": 5,
        "Q_CHARSET_DATABASE": 33,
        "Q_TABLE_MAP_FOR_UPDATE": 5,
        "Q_MASTER_DATA_WRITTEN": 999,
        "Q_INVOKER": {"user": "root", "host": "localhost"},
        "Q_UPDATED_DB_NAMES": ("db1", "db2"),
        "Q_MICROSECONDS": 123456,
        "Q_COMMIT_TS": 77,
        "Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP": True,
        "Q_DDL_LOGGED_WITH_XID": 42,
        "Q_DEFAULT_COLLATION_FOR_UTF8MB4": 255,
        "Q_SQL_REQUIRE_PRIMARY_KEY": 1,
        "Q_DEFAULT_TABLE_ENCRYPTION": 0,
    }


def test_query_mariadb_status_vars_hrnow_xid_flags3_collations():
    status = b"".join([
        eb.sv(2, eb.lstr8("std") + b"\0"),  # old Q_CATALOG with its terminator
        eb.sv(128, eb.u(654321, 3)),
        eb.sv(129, eb.u(2**63 + 5, 8)),
        eb.sv(130, bytes([4]) + eb.u(254, 8)),  # COMMIT ALTER of START ALTER seq_no 254
        eb.sv(131, bytes([2]) + eb.u(45, 2) + eb.u(2347, 2) + eb.u(8, 2) + eb.u(8, 2)),
    ])
    ev = _decode(EventType.QUERY, eb.query("ALTER TABLE t ADD c INT", schema="d", status=status), "mariadb")
    assert ev.status_vars == {
        "Q_CATALOG": "std",
        "Q_HRNOW": 654321,
        "Q_XID": 2**63 + 5,
        "Q_GTID_FLAGS3": {"flags": 4, "sa_seq_no": 254},
        "Q_CHARACTER_SET_COLLATIONS": ((45, 2347), (8, 8)),
    }


def test_query_updated_db_names_over_max_has_no_names():
    ev = _decode(EventType.QUERY, eb.query("DROP DATABASE x", status=eb.sv(12, bytes([254]))))
    assert ev.status_vars == {"Q_UPDATED_DB_NAMES": None}


def test_query_unknown_status_var_stops_parse_like_the_server():
    status = eb.sv(0, eb.u(0, 4)) + bytes([99, 1, 2, 3]) + eb.sv(1, eb.u(1, 8))
    ev = _decode(EventType.QUERY, eb.query("BEGIN", status=status))
    assert ev.query == "BEGIN"
    assert ev.status_vars == {"Q_FLAGS2": 0, "_unparsed": bytes([99, 1, 2, 3]) + eb.sv(1, eb.u(1, 8))}


def test_query_truncated_status_var_is_corrupt():
    with pytest.raises(CorruptEvent, match="Q_SQL_MODE runs past"):
        _decode(EventType.QUERY, eb.query("BEGIN", status=eb.sv(1, b"\0\0\0")))


def _q_charset(collation: int) -> bytes:
    return bytes([4]) + eb.u(collation, 2) * 3  # Q_CHARSET: client, connection, server


def test_query_text_in_its_client_charset_and_bytes_kept():
    latin1 = b"INSERT INTO t VALUES ('caf\xe9')"
    ev = _decode(EventType.QUERY, eb.query(latin1, status=_q_charset(8)))  # latin1 client
    assert ev.query == "INSERT INTO t VALUES ('café')" and type(ev.query) is str and ev.query_bytes == latin1
    # cp1251 bytes on a utf8 connection (old PHP): visible replacements, the exact bytes kept
    cp1251 = "INSERT INTO wp_posts VALUES ('Регистрация')".encode("cp1251")
    ev = _decode(EventType.QUERY, eb.query(cp1251, status=_q_charset(33)))
    assert isinstance(ev.query, InvalidText) and ev.query.raw == cp1251 == ev.query_bytes
    assert ev.query.startswith("INSERT INTO wp_posts VALUES ('\ufffd") and ev.query.encode("utf-8")
    # no Q_CHARSET (old servers): UTF-8
    ev = _decode(EventType.QUERY, eb.query(latin1))
    assert isinstance(ev.query, InvalidText) and ev.query == "INSERT INTO t VALUES ('caf\ufffd')"


def test_query_longer_declared_post_header_skips_unknown_bytes():
    ctx = DecodeContext(eb.with_post_header(eb.fmt(), EventType.QUERY, 16))
    ev = _decode(EventType.QUERY, eb.query("COMMIT", schema="s", extra_post_header=b"???"), ctx=ctx)
    assert (ev.schema, ev.query) == ("s", "COMMIT")


def test_query_pre_50_post_header_has_no_status_vars():
    ctx = DecodeContext(eb.with_post_header(eb.fmt(), EventType.QUERY, 11))
    data = eb.u(3, 4) + eb.u(0, 4) + bytes([1]) + eb.u(0, 2) + b"d\0" + b"SELECT 1"
    ev = _decode(EventType.QUERY, data, ctx=ctx)
    assert (ev.thread_id, ev.schema, ev.query, ev.status_vars) == (3, "d", "SELECT 1", {})


def test_query_shorter_post_header_is_corrupt():
    ctx = DecodeContext(eb.with_post_header(eb.fmt(), EventType.QUERY, 12))
    with pytest.raises(CorruptEvent, match="declared as 12 bytes"):
        _decode(EventType.QUERY, eb.query("BEGIN"), ctx=ctx)


def test_query_database_must_be_nul_terminated():
    data = bytearray(eb.query("BEGIN", schema="db"))
    data[13 + 2] = ord("X")  # overwrite the NUL after the schema
    with pytest.raises(CorruptEvent, match="NUL-terminated"):
        _decode(EventType.QUERY, bytes(data))


def test_query_compressed_mariadb():
    text = "INSERT INTO t VALUES " + ",".join(f"({i})" for i in range(200))
    ev = _decode(EventType.MARIA_QUERY_COMPRESSED, eb.query(text, schema="db", compressed=True), "mariadb")
    assert isinstance(ev, QueryEvent) and ev.compressed and ev.query == text and ev.schema == "db"


def test_query_compressed_length_lie_is_corrupt():
    data = eb.query("x", compressed=False)[:-1] + bytes([0x81, 50]) + __import__("zlib").compress(b"short")
    with pytest.raises(CorruptEvent, match="declares 50 uncompressed bytes"):
        _decode(EventType.MARIA_QUERY_COMPRESSED, data, "mariadb")


def test_execute_load_query():
    q = "LOAD DATA INFILE '/tmp/x.tsv' INTO TABLE t"
    start = q.index("'") + 1
    ev = _decode(EventType.EXECUTE_LOAD_QUERY, eb.execute_load_query(q, file_id=3, fn_start=start, fn_end=start + 10, dup=2))
    assert isinstance(ev, ExecuteLoadQueryEvent)
    assert (ev.file_id, ev.dup_handling, ev.query) == (3, 2, q)
    assert ev.query_bytes[ev.fn_pos_start : ev.fn_pos_end] == b"/tmp/x.tsv"


def test_execute_load_query_file_name_outside_statement_is_corrupt():
    with pytest.raises(CorruptEvent, match="file name at"):
        _decode(EventType.EXECUTE_LOAD_QUERY, eb.execute_load_query("LOAD", file_id=1, fn_start=2, fn_end=99))


# ============================================================================= statement-based helpers


def test_intvar_and_rand():
    ev = _decode(EventType.INTVAR, eb.intvar(2, 17))
    assert isinstance(ev, IntvarEvent) and (ev.type, ev.name, ev.value) == (2, "INSERT_ID", 17)
    ev = _decode(EventType.RAND, eb.rand(795665426, 505643458))
    assert isinstance(ev, RandEvent) and (ev.seed1, ev.seed2) == (795665426, 505643458)


@pytest.mark.parametrize(
    "value,kw,expected",
    [
        (b"hello", {"value_type": 0, "charset": 45}, "hello"),
        ("caf\u00e9".encode("latin-1"), {"value_type": 0, "charset": 8}, "caf\u00e9"),
        (b"\x00\xff", {"value_type": 0, "charset": 63}, b"\x00\xff"),  # binary: bytes
        (struct.pack("<q", -42), {"value_type": 2}, -42),
        (struct.pack("<Q", 2**64 - 1), {"value_type": 2, "flags": 1}, 2**64 - 1),
        (struct.pack("<d", 2.5e10), {"value_type": 1}, 2.5e10),
        (bytes([3, 2, 0x81, 0x0E]), {"value_type": 4}, None),  # DECIMAL: left in value_bytes
        (b"old", {"value_type": 0, "flags": None}, "old"),  # servers without the flags byte
    ],
)
def test_user_var(value, kw, expected):
    ev = _decode(EventType.USER_VAR, eb.user_var("uv", value, **kw))
    assert isinstance(ev, UserVarEvent) and ev.name == "uv" and not ev.is_null
    assert ev.value == expected and ev.value_bytes == value


def test_user_var_text_not_valid_in_its_charset():
    ev = _decode(EventType.USER_VAR, eb.user_var("uv", "Регистрация".encode("cp1251"), value_type=0, charset=45))
    assert isinstance(ev.value, InvalidText) and ev.value.raw == "Регистрация".encode("cp1251")


def test_user_var_null():
    ev = _decode(EventType.USER_VAR, eb.user_var("n", None))
    assert ev.is_null and ev.value is None and ev.value_bytes == b""


def test_load_data_blocks():
    ev = _decode(EventType.BEGIN_LOAD_QUERY, eb.file_block(1, b"1\ta\n2\tb\n"), "mariadb")
    assert isinstance(ev, BeginLoadQueryEvent) and (ev.file_id, ev.data) == (1, b"1\ta\n2\tb\n")
    assert _decode(EventType.APPEND_BLOCK, eb.file_block(1, b"3\tc\n"), "mariadb").data == b"3\tc\n"
    assert _decode(EventType.EXEC_LOAD, eb.u(5, 4), "mysql56").file_id == 5
    assert _decode(EventType.DELETE_FILE, eb.u(6, 4), "mysql56").file_id == 6


def test_new_load_and_create_file():
    post = eb.u(9, 4) + eb.u(1, 4) + eb.u(2, 4) + bytes([1, 2]) + eb.u(2, 4)
    sql_ex = eb.lstr8("\t") + eb.lstr8('"') + eb.lstr8("\n") + eb.lstr8("") + eb.lstr8("\\") + bytes([2])
    body = bytes([1, 1]) + b"a\0b\0" + b"t\0" + b"db\0" + b"/tmp/f.txt"
    ev = _decode(EventType.NEW_LOAD, post + sql_ex + body, "mysql56")
    assert (ev.table, ev.schema, ev.fields, ev.file_name, ev.skip_lines) == ("t", "db", ("a", "b"), "/tmp/f.txt", 2)
    assert ev.sql_ex["field_term"] == b"\t" and ev.sql_ex["enclosed"] == b'"' and ev.sql_ex["opt_flags"] == 2
    ev = _decode(EventType.CREATE_FILE, post + eb.u(4, 4) + sql_ex + body + b"\0" + b"1\t2\n", "mysql56")
    assert (ev.file_id, ev.block, ev.file_name) == (4, b"1\t2\n", "/tmp/f.txt")
    old_ex = b"\t\"\n#\\" + bytes([0, 0x08])  # LINE_START_EMPTY
    ev = _decode(EventType.LOAD, post + old_ex + body, "mysql56")
    assert ev.sql_ex["line_start"] == b"" and ev.sql_ex["field_term"] == b"\t"


# ============================================================================= TABLE_MAP

# id INT, tu TINYINT UNSIGNED, v VARCHAR(20), e ENUM('a','b'), s SET('x','y','z'),
# g POINT, b TEXT, d DECIMAL(10,2)
_TM_TYPES = [T.LONG, T.TINY, T.VARCHAR, T.STRING, T.STRING, T.GEOMETRY, T.BLOB, T.NEWDECIMAL]
_TM_META = eb.u(80, 2) + bytes([T.ENUM, 1]) + bytes([T.SET, 1]) + bytes([4]) + bytes([2]) + bytes([10, 2])
_TM_NULLABLE = [False, True, True, True, True, True, True, True]


def _table_map_data(optional=b"", **kw):
    return eb.table_map(42, "db", "t", _TM_TYPES, _TM_META, _TM_NULLABLE, optional=optional, **kw)


def _full_optional_metadata(character_charsets):
    return b"".join([
        eb.tlv(1, eb.bits_msb([False, True, False])),  # id, tu, d
        eb.tlv(3, eb.packed_ints(character_charsets)),
        eb.tlv(4, eb.packed_strs(["id", "tu", "v", "e", "s", "g", "b", "d"])),
        eb.tlv(5, eb.str_lists([["x", "y", "z"]])),
        eb.tlv(6, eb.str_lists([["a", "b"]])),
        eb.tlv(7, eb.packed_ints([1])),
        eb.tlv(9, eb.packed_ints([0, 0, 2, 5])),
        eb.tlv(11, eb.packed_ints([8, 45])),
        eb.tlv(12, eb.bits_msb([True] * 7 + [False])),
    ])


def test_table_map_basic_and_recorded_in_context():
    ctx = _ctx()
    ev = decode_event(eb.raw(EventType.TABLE_MAP, _table_map_data()), ctx)
    assert isinstance(ev, TableMapEvent)
    assert (ev.table_id, ev.flags, ev.schema, ev.table, ev.column_count) == (42, 1, "db", "t", 8)
    assert ev.column_types == tuple(_TM_TYPES)
    assert ev.real_types == (T.LONG, T.TINY, T.VARCHAR, T.ENUM, T.SET, T.GEOMETRY, T.BLOB, T.NEWDECIMAL)
    assert ev.nullable == tuple(_TM_NULLABLE)
    assert ev.signedness is None and ev.column_names is None and ev.raw_optional_metadata == b""
    assert ctx.table_maps[42] is ev


def test_table_map_full_optional_metadata_mysql():
    # MySQL: character columns are v and b (GEOMETRY is not one)
    opt = _full_optional_metadata([45, 63])
    ev = _decode(EventType.TABLE_MAP, _table_map_data(opt))
    assert ev.signedness == (False, True, None, None, None, None, None, False)
    assert ev.column_charsets == (None, None, 45, 8, 45, None, 63, None)
    assert ev.column_names == ("id", "tu", "v", "e", "s", "g", "b", "d")
    assert ev.set_values == (None, None, None, None, ("x", "y", "z"), None, None, None)
    assert ev.enum_values == (None, None, None, ("a", "b"), None, None, None, None)
    assert ev.geometry_types == (None, None, None, None, None, 1, None, None)
    assert ev.primary_key == ((0, 0), (2, 5))
    assert ev.visibility == (True,) * 7 + (False,)
    assert ev.raw_optional_metadata == opt and ev.unknown_metadata == ()


def test_table_map_mariadb_counts_geometry_as_character():
    opt = _full_optional_metadata([45, 63, 63])  # v, g, b
    ev = _decode(EventType.TABLE_MAP, _table_map_data(opt), "mariadb")
    assert ev.column_charsets == (None, None, 45, 8, 45, 63, 63, None)


def test_table_map_default_charset_with_overrides():
    opt = eb.tlv(2, eb.packed_ints([45, 1, 63])) + eb.tlv(10, eb.packed_ints([8]))
    ev = _decode(EventType.TABLE_MAP, _table_map_data(opt))
    assert ev.column_charsets == (None, None, 45, 8, 8, None, 63, None)


def test_table_map_simple_primary_key_vector_and_unknown_tlv():
    types = [T.LONG, T.VECTOR]
    opt = eb.tlv(8, eb.packed_ints([0])) + eb.tlv(13, eb.packed_ints([768])) + eb.tlv(99, b"future")
    data = eb.table_map(7, "db", "v", types, bytes([4]), [False, True], optional=opt)
    ev = _decode(EventType.TABLE_MAP, data)
    assert ev.primary_key == ((0, 0),) and ev.vector_dimensions == (None, 768)
    assert ev.unknown_metadata == ((99, b"future"),)


def test_table_map_charset_count_mismatch_is_corrupt():
    with pytest.raises(CorruptEvent, match="lists 3 collations for 2 columns"):
        _decode(EventType.TABLE_MAP, _table_map_data(eb.tlv(3, eb.packed_ints([45, 45, 45]))))


def test_table_map_metadata_length_must_match_types():
    data = eb.table_map(1, "d", "t", [T.LONG, T.VARCHAR], eb.u(80, 2) + b"\0", [True, True])
    with pytest.raises(CorruptEvent, match="metadata is 3 bytes"):
        _decode(EventType.TABLE_MAP, data)


def test_table_map_4_byte_table_id_of_old_servers():
    ctx = DecodeContext(eb.with_post_header(eb.fmt("mysql56"), EventType.TABLE_MAP, 6))
    ev = _decode(EventType.TABLE_MAP, _table_map_data(table_id_width=4), ctx=ctx)
    assert ev.table_id == 42 and ev.column_count == 8


# ============================================================================= rows events


def _ctx_with_table(kind="mysql80", **kw):
    ctx = _ctx(kind, **kw)
    decode_event(eb.raw(EventType.TABLE_MAP, eb.table_map(5, "db", "t", [T.LONG, T.LONG, T.LONG], b"", [True] * 3)), ctx)
    return ctx


@pytest.mark.parametrize(
    "code,kind,v2",
    [(EventType.WRITE_ROWS, "mysql80", True), (EventType.WRITE_ROWS_V1, "mariadb", False), (EventType.PRE_GA_WRITE_ROWS, "mysql56", False)],
)
def test_write_rows_versions(code, kind, v2):
    f = eb.fmt(kind)
    if code == EventType.PRE_GA_WRITE_ROWS:
        f = eb.with_post_header(f, code, 8)
    ctx = DecodeContext(f, decode_rows=False)
    tm = decode_event(eb.raw(EventType.TABLE_MAP, eb.table_map(5, "db", "t", [T.LONG] * 3, b"", [True] * 3)), ctx)
    body = b"\xf8" + eb.u(1, 4) + eb.u(2, 4) + eb.u(3, 4)
    ev = decode_event(eb.raw(code, eb.rows(5, 3, [1, 1, 1], body, v2=v2)), ctx)
    assert isinstance(ev, RowsEvent) and ev.op == "insert" and ev.stmt_end
    assert (ev.columns_before, ev.columns_after, ev.column_count) == ((), (0, 1, 2), 3)
    assert ev.rows == () and ev.body == body and ev.table_map is tm
    assert ctx.table_maps == {}  # the statement ended: its table maps are forgotten


def test_update_and_delete_bitmaps():
    ctx = _ctx_with_table(decode_rows=False)
    ev = decode_event(eb.raw(EventType.UPDATE_ROWS, eb.rows(5, 3, [1, 0, 1], b"", present_after=[0, 1, 1], flags=0)), ctx)
    assert (ev.op, ev.columns_before, ev.columns_after) == ("update", (0, 2), (1, 2))
    ev = decode_event(eb.raw(EventType.DELETE_ROWS, eb.rows(5, 3, [1, 1, 0], b"")), ctx)
    assert (ev.op, ev.columns_before, ev.columns_after) == ("delete", (0, 1), ())


def test_rows_v2_extra_data_ndb_and_partition():
    ctx = _ctx_with_table(decode_rows=False)
    extra = bytes([0, 4, 1, 0xAA, 0xBB]) + bytes([1]) + eb.u(3, 2) + eb.u(7, 2)
    ev = decode_event(eb.raw(EventType.UPDATE_ROWS, eb.rows(5, 3, [1] * 3, b"", present_after=[1] * 3, extra=extra, flags=0)), ctx)
    assert ev.extra_data == {"ndb": {"format": 1, "data": b"\xaa\xbb"}, "partition_id": 3, "source_partition_id": 7}
    ev = decode_event(eb.raw(EventType.WRITE_ROWS, eb.rows(5, 3, [1] * 3, b"", extra=bytes([1]) + eb.u(9, 2))), ctx)
    assert ev.extra_data == {"partition_id": 9}


def test_rows_v2_unknown_extra_type_kept_unparsed():
    ctx = _ctx_with_table(decode_rows=False)
    ev = decode_event(eb.raw(EventType.WRITE_ROWS, eb.rows(5, 3, [1] * 3, b"", extra=bytes([1]) + eb.u(9, 2) + b"\x07zz")), ctx)
    assert ev.extra_data == {"partition_id": 9, "_unparsed": b"\x07zz"}


def test_partial_update_rows_header():
    ctx = _ctx_with_table(decode_rows=False)
    data = eb.rows(5, 3, [1] * 3, b"\x01row", present_after=[1, 1, 0], extra=bytes([1]) + eb.u(0, 2) + eb.u(1, 2))
    ev = decode_event(eb.raw(EventType.PARTIAL_UPDATE_ROWS, data), ctx)
    assert ev.partial and ev.op == "update" and ev.columns_after == (0, 1)
    assert ev.extra_data == {"partition_id": 0, "source_partition_id": 1} and ev.body == b"\x01row"


def test_rows_without_table_map_is_corrupt_with_location():
    with pytest.raises(CorruptEvent, match="table_id 99 has no preceding TABLE_MAP") as e:
        _decode(EventType.WRITE_ROWS, eb.rows(99, 1, [1], b"x"), pos=1234)
    assert (e.value.file, e.value.offset) == ("test-bin.000001", 1234)


def test_rows_width_must_match_table_map():
    with pytest.raises(CorruptEvent, match="has 2 columns"):
        decode_event(eb.raw(EventType.WRITE_ROWS, eb.rows(5, 2, [1, 1], b"")), _ctx_with_table())


def test_dummy_stmt_end_rows_event_needs_no_table_map():
    ev = _decode(EventType.WRITE_ROWS, eb.rows(0x00FFFFFF, 0, [], b"", flags=1))
    assert ev.table_map is None and ev.rows == () and ev.stmt_end and ev.column_count == 0


def test_mariadb_compressed_rows_are_decompressed():
    ctx = _ctx_with_table("mariadb", decode_rows=False)
    body = (b"\xf8" + eb.u(1, 4) * 3) * 50
    ev = decode_event(eb.raw(EventType.MARIA_WRITE_ROWS_COMPRESSED_V1, eb.rows(5, 3, [1] * 3, body, v2=False, compressed=True, flags=0)), ctx)
    assert ev.compressed and ev.op == "insert" and ev.body == body
    ev = decode_event(
        eb.raw(EventType.MARIA_UPDATE_ROWS_COMPRESSED, eb.rows(5, 3, [1] * 3, body, present_after=[1] * 3, compressed=True)), ctx
    )
    assert ev.compressed and ev.op == "update" and ev.body == body


def test_rows_decoded_through_rows_module(monkeypatch):
    calls = []

    def fake_decode_rows(op, table_map, body, before, after, *, partial, event_type):
        calls.append((op, table_map.table, body, before, after, partial, event_type))
        return [(None, (1, 2, 3))]

    monkeypatch.setitem(sys.modules, "pipelines.binlog.rows", types.SimpleNamespace(decode_rows=fake_decode_rows))
    ctx = _ctx_with_table("mariadb")
    ev = decode_event(eb.raw(EventType.MARIA_WRITE_ROWS_COMPRESSED_V1, eb.rows(5, 3, [1] * 3, b"ROWS", v2=False, compressed=True)), ctx)
    assert ev.rows == ((None, (1, 2, 3)),) and ev.body == b""
    assert calls == [("insert", "t", b"ROWS", (), (0, 1, 2), False, EventType.WRITE_ROWS_V1)]
    ctx = _ctx_with_table("mysql80")
    decode_event(eb.raw(EventType.PARTIAL_UPDATE_ROWS, eb.rows(5, 3, [1] * 3, b"JSON", present_after=[0, 0, 1])), ctx)
    assert calls[1] == ("update", "t", b"JSON", (0, 1, 2), (2,), True, EventType.PARTIAL_UPDATE_ROWS)


# ============================================================================= MySQL GTIDs


def test_gtid_56_without_logical_clock():
    ev = _decode(EventType.GTID, eb.gtid(SID, 7, flags=1), "mysql56")
    assert isinstance(ev, GtidEvent) and ev.gtid == f"{SID}:7" and ev.gtid_flags == 1
    assert ev.last_committed is None and ev.immediate_commit_timestamp is None


def test_gtid_80_all_fields():
    data = eb.gtid(SID, 12, logical_clock=(10, 11), immediate_ts=1_700_000_000_123_456, original_ts=1_600_000_000_000_001,
                   transaction_length=300, immediate_version=80036, original_version=50744, ticket=9)
    ev = _decode(EventType.GTID, data)
    assert (ev.last_committed, ev.sequence_number, ev.transaction_length) == (10, 11, 300)
    assert (ev.immediate_commit_timestamp, ev.original_commit_timestamp) == (1_700_000_000_123_456, 1_600_000_000_000_001)
    assert (ev.immediate_server_version, ev.original_server_version, ev.commit_group_ticket) == (80036, 50744, 9)
    assert ev.tag is None and not ev.anonymous


def test_gtid_original_equals_immediate_when_flag_clear():
    data = eb.gtid(SID, 1, logical_clock=(0, 1), immediate_ts=5, transaction_length=1000, immediate_version=80036)
    ev = _decode(EventType.GTID, data)
    assert ev.original_commit_timestamp == 5 and ev.original_server_version == 80036 and ev.commit_group_ticket is None


def test_anonymous_gtid():
    ev = _decode(EventType.ANONYMOUS_GTID, eb.gtid("00000000-0000-0000-0000-000000000000", 0, logical_clock=(3, 4)))
    assert ev.anonymous and ev.gtid is None and ev.sequence_number == 4
    with pytest.raises(CorruptEvent, match="must be 0"):
        _decode(EventType.ANONYMOUS_GTID, eb.gtid(SID, 5))


def test_gtid_invalid_gno():
    with pytest.raises(CorruptEvent, match="GNO 0"):
        _decode(EventType.GTID, eb.gtid(SID, 0))


def test_gtid_tagged():
    data = eb.gtid_tagged(SID, 123456789, "blue_tag", flags=1, last_committed=7, sequence_number=8,
                          immediate_ts=1_700_000_000_000_000, original_ts=1_699_999_999_999_999,
                          transaction_length=4242, immediate_version=90100, ticket=77)
    ev = _decode(EventType.GTID_TAGGED, data)
    assert isinstance(ev, GtidEvent)
    assert (ev.sid, ev.gno, ev.tag, ev.gtid) == (SID, 123456789, "blue_tag", f"{SID}:blue_tag:123456789")
    assert (ev.gtid_flags, ev.last_committed, ev.sequence_number, ev.transaction_length) == (1, 7, 8, 4242)
    assert (ev.immediate_commit_timestamp, ev.original_commit_timestamp) == (1_700_000_000_000_000, 1_699_999_999_999_999)
    assert (ev.immediate_server_version, ev.original_server_version, ev.commit_group_ticket) == (90100, 90100, 77)


def test_gtid_tagged_ignorable_unknown_field_is_skipped_non_ignorable_rejected():
    data = eb.gtid_tagged(SID, 5, "t", unknown_fields=eb.varlen_uint(40) + b"\x02")
    assert _decode(EventType.GTID_TAGGED, data).gno == 5
    data = eb.gtid_tagged(SID, 5, "t", unknown_fields=eb.varlen_uint(40) + b"\x02", last_non_ignorable=41)
    with pytest.raises(UnsupportedType, match="non-ignorable field 40"):
        _decode(EventType.GTID_TAGGED, data)


def test_previous_gtids_untagged_and_tagged():
    sid2 = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
    ev = _decode(EventType.PREVIOUS_GTIDS, eb.previous_gtids([(SID, None, [(1, 6), (7, 10)]), (sid2, None, [(5, 6)])]))
    assert isinstance(ev, PreviousGtidsEvent)
    assert ev.gtid_set == f"{SID}:1-5:7-9,{sid2}:5"
    assert ev.sids == ((SID, None, ((1, 5), (7, 9))), (sid2, None, ((5, 5),)))
    data = eb.previous_gtids([(SID, None, [(1, 4)]), (SID, "blue", [(1, 3)]), (sid2, "red", [(2, 9)])], tagged=True)
    ev = _decode(EventType.PREVIOUS_GTIDS, data)
    assert ev.gtid_set == f"{SID}:1-3:blue:1-2,{sid2}:red:2-8"
    assert _decode(EventType.PREVIOUS_GTIDS, eb.previous_gtids([])).gtid_set == ""


def test_transaction_context_and_view_change():
    ev = _decode(EventType.TRANSACTION_CONTEXT, eb.transaction_context(SID, 12, True, b"\x01\x02", ["h1", "h2"], ["r"]))
    assert isinstance(ev, TransactionContextEvent)
    assert (ev.server_uuid, ev.thread_id, ev.gtid_specified, ev.snapshot_version) == (SID, 12, True, b"\x01\x02")
    assert (ev.write_set, ev.read_set) == (("h1", "h2"), ("r",))
    ev = _decode(EventType.VIEW_CHANGE, eb.view_change("15000:1", 44, {"group_gtid_executed": f"{SID}:1-5", "k": ""}))
    assert isinstance(ev, ViewChangeEvent)
    assert (ev.view_id, ev.seq_number, ev.certification_info) == ("15000:1", 44, {"group_gtid_executed": f"{SID}:1-5", "k": ""})


# ============================================================================= TRANSACTION_PAYLOAD


def _payload_events() -> list[bytes]:
    tm = eb.table_map(70, "db", "t", [T.LONG], b"", [False])
    return [
        eb.inner_event(EventType.QUERY, eb.query("BEGIN", schema="db")),
        eb.inner_event(EventType.TABLE_MAP, tm),
        eb.inner_event(EventType.WRITE_ROWS, eb.rows(70, 1, [1], b"\x00" + eb.u(5, 4))),
        eb.inner_event(EventType.XID, eb.xid(99)),
    ]


@pytest.mark.parametrize("compression", [0, 255])
def test_transaction_payload_unpacks_and_records_table_maps(compression):
    inner = _payload_events()
    ctx = _ctx(decode_rows=False)
    data = eb.transaction_payload(b"".join(inner), compression=compression)
    ev = decode_event(eb.raw(EventType.TRANSACTION_PAYLOAD, data, pos=500), ctx)
    assert isinstance(ev, TransactionPayloadEvent)
    assert ev.compression_type == compression
    assert ev.uncompressed_size == (sum(map(len, inner)) if compression == 0 else None)
    assert [type(e).__name__ for e in ev.events] == ["QueryEvent", "TableMapEvent", "RowsEvent", "XidEvent"]
    assert ev.events[2].table_map is ev.events[1]
    assert 70 not in ctx.table_maps  # forgotten at the end of the statement (STMT_END)
    assert [e.header.inner_pos for e in ev.events] == [0, *itertools.accumulate(map(len, inner[:-1]))]
    for e in ev.events:
        assert e.header.in_payload and e.header.pos == 500 and e.header.end_pos == ev.header.end_pos
    assert ev.events[3].xid == 99 and ev.events[0].query == "BEGIN"


def test_transaction_payload_unknown_tlv_field_skipped():
    data = eb.transaction_payload(b"".join(_payload_events()), extra_fields=eb.packed_int(9) + eb.packed_int(2) + b"zz")
    assert len(_decode(EventType.TRANSACTION_PAYLOAD, data, ctx=_ctx(decode_rows=False)).events) == 4


def test_transaction_payload_size_lie_is_corrupt():
    data = eb.transaction_payload(b"".join(_payload_events()), declared_uncompressed=10)
    with pytest.raises(CorruptEvent, match="declares 10 uncompressed bytes"):
        _decode(EventType.TRANSACTION_PAYLOAD, data, ctx=_ctx(decode_rows=False))


def test_transaction_payload_errors_inside_carry_payload_position():
    inner = eb.inner_event(EventType.WRITE_ROWS, eb.rows(12345, 1, [1], b""))
    with pytest.raises(CorruptEvent, match="table_id 12345") as e:
        _decode(EventType.TRANSACTION_PAYLOAD, eb.transaction_payload(inner), pos=777)
    assert e.value.offset == 777


def test_transaction_payload_truncated_inner_event():
    inner = eb.inner_event(EventType.XID, eb.xid(1))[:-3]
    with pytest.raises(TruncatedEvent):
        _decode(EventType.TRANSACTION_PAYLOAD, eb.transaction_payload(inner, compression=255))


def test_transaction_payload_nested_is_corrupt():
    inner = eb.inner_event(EventType.TRANSACTION_PAYLOAD, eb.transaction_payload(b"", compression=255))
    with pytest.raises(CorruptEvent, match="nested"):
        _decode(EventType.TRANSACTION_PAYLOAD, eb.transaction_payload(inner, compression=255))


# ============================================================================= MariaDB


def test_annotate_rows_and_binlog_checkpoint():
    ev = _decode(EventType.MARIA_ANNOTATE_ROWS, eb.annotate_rows("UPDATE t SET a=1"), "mariadb")
    assert isinstance(ev, AnnotateRowsEvent) and ev.query == "UPDATE t SET a=1"
    ev = _decode(EventType.MARIA_BINLOG_CHECKPOINT, eb.binlog_checkpoint("binlog.000003"), "mariadb")
    assert isinstance(ev, BinlogCheckpointEvent) and ev.file == "binlog.000003"


def test_maria_gtid_standalone_ddl():
    ev = _decode(EventType.MARIA_GTID, eb.maria_gtid(9883, 0, 0x29), "mariadb", server_id=10124)
    assert isinstance(ev, MariaGtidEvent) and ev.gtid == "0-10124-9883" and ev.standalone
    assert ev.commit_id is None and ev.xa_format_id is None and ev.flags_extra == 0


def test_maria_gtid_group_commit_id():
    ev = _decode(EventType.MARIA_GTID, eb.maria_gtid(293, 1, 0x0E, commit_id=402), "mariadb")
    assert (ev.gtid, ev.commit_id, ev.standalone) == ("1-1-293", 402, False)


def test_maria_gtid_xa_with_extra_engines():
    data = eb.maria_gtid(86, 0, 0x4C, xa=(1, b"xa1", b""), flags_extra=1, extra_engines=255)
    ev = _decode(EventType.MARIA_GTID, data, "mariadb")
    assert (ev.xa_format_id, ev.xa_gtrid, ev.xa_bqual, ev.flags_extra, ev.extra_engines) == (1, b"xa1", b"", 1, 255)
    assert ev.xa_xid == "X'786131',X'',1"
    assert _decode(EventType.MARIA_GTID, eb.maria_gtid(1, 0, 0x0C), "mariadb").xa_xid is None


def test_maria_gtid_completed_xa_with_commit_id():
    data = eb.maria_gtid(89, 0, 0x8F, commit_id=5, xa=(7, b"xa2", b"bq"))
    ev = _decode(EventType.MARIA_GTID, data, "mariadb")
    assert (ev.commit_id, ev.xa_format_id, ev.xa_gtrid, ev.xa_bqual) == (5, 7, b"xa2", b"bq")


def test_maria_gtid_commit_alter():
    ev = _decode(EventType.MARIA_GTID, eb.maria_gtid(255, 0, 0x29, flags_extra=4, sa_seq_no=254) + b"\0", "mariadb")
    assert (ev.flags_extra, ev.sa_seq_no) == (4, 254)


def test_gtid_list_and_start_encryption():
    ev = _decode(EventType.MARIA_GTID_LIST, eb.gtid_list([(0, 1, 290), (7, 2, 1001)], flags=1), "mariadb")
    assert isinstance(ev, GtidListEvent) and ev.gtids == ((0, 1, 290), (7, 2, 1001)) and ev.flags == 1
    assert ev.gtid_list == "0-1-290,7-2-1001"
    nonce = bytes(range(12))
    ev = _decode(EventType.MARIA_START_ENCRYPTION, eb.start_encryption(1, 3, nonce), "mariadb")
    assert isinstance(ev, StartEncryptionEvent) and (ev.scheme, ev.key_version, ev.nonce) == (1, 3, nonce)
    with pytest.raises(CorruptEvent, match="START_ENCRYPTION body"):
        _decode(EventType.MARIA_START_ENCRYPTION, eb.start_encryption(1, 3, nonce) + b"x", "mariadb")


# ============================================================================= dispatch


def test_unknown_type_kept_whole_with_ignorable_flag():
    ev = _decode(100, b"\x00" * 8, flags=EventFlag.IGNORABLE)
    assert isinstance(ev, UnknownEvent) and ev.raw == b"\x00" * 8 and ev.ignorable
    assert not _decode(101, b"x").ignorable


def test_known_type_flagged_ignorable_is_still_decoded():
    assert isinstance(_decode(EventType.ROWS_QUERY, eb.rows_query("q"), flags=EventFlag.IGNORABLE), RowsQueryEvent)


def test_foreign_exception_in_a_decoder_becomes_corrupt_event(monkeypatch):
    def broken(data, ctx, header):
        raise ValueError("boom")

    monkeypatch.setitem(EVENT_DECODERS, EventType.XID, broken)
    with pytest.raises(CorruptEvent, match="XID event could not be decoded: ValueError: boom") as e:
        _decode(EventType.XID, eb.xid(1), pos=88)
    assert (e.value.file, e.value.offset) == ("test-bin.000001", 88)


def test_truncated_event_gets_location():
    with pytest.raises(TruncatedEvent) as e:
        _decode(EventType.XID, b"\x01\x02", pos=321)
    assert e.value.offset == 321 and e.value.need == 8 and e.value.got == 2


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(code=st.sampled_from(sorted(EVENT_DECODERS)), data=st.binary(max_size=96), kind=st.sampled_from(["mysql80", "mariadb"]))
def test_garbage_never_escapes_the_error_hierarchy(code, data, kind):
    ctx = _ctx(kind, decode_rows=False)
    decode_event(eb.raw(EventType.TABLE_MAP, eb.table_map(1, "d", "t", [T.LONG], b"", [True])), ctx)
    try:
        decode_event(eb.raw(code, data), ctx)
    except BinlogError as e:
        assert e.offset == 4 and e.file == "test-bin.000001"


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_varlen_integer_round_trip(n):
    from pipelines.binlog.wire import varlen_uint as _varlen_uint

    enc = eb.varlen_uint(n)
    assert _varlen_uint(enc, 0) == (n, len(enc))


def test_whole_file_through_framing():
    f = eb.fmt("mariadb")
    data = eb.binlog_file(
        [
            (EventType.MARIA_GTID_LIST, eb.gtid_list([])),
            (EventType.MARIA_GTID, eb.maria_gtid(1, 0, 0x0C)),
            (EventType.TABLE_MAP, eb.table_map(3, "db", "t", [T.LONG], b"", [False])),
            (EventType.WRITE_ROWS_V1, eb.rows(3, 1, [1], b"\x00" + eb.u(1, 4), v2=False)),
            (EventType.XID, eb.xid(5)),
        ],
        f,
    )
    bf = BinlogFile(data, name="mem")
    ctx = DecodeContext(bf.format, decode_rows=False)
    evs = [decode_event(r, ctx) for r in bf.events()]
    assert [type(e).__name__ for e in evs] == [
        "FormatDescriptionEvent", "GtidListEvent", "MariaGtidEvent", "TableMapEvent", "RowsEvent", "XidEvent"
    ]


# ============================================================================= corpus


_MANIFEST_NAMES = {  # MANIFEST.tsv / FILES.tsv spelling -> EventType name
    "WRITE_ROWS_V2": "WRITE_ROWS", "UPDATE_ROWS_V2": "UPDATE_ROWS", "DELETE_ROWS_V2": "DELETE_ROWS",
    # FILES.tsv drops the _V1 of MariaDB's compressed v1 rows events (types 166-168, as its README says)
    "MARIA_WRITE_ROWS_COMPRESSED": "MARIA_WRITE_ROWS_COMPRESSED_V1",
    "MARIA_UPDATE_ROWS_COMPRESSED": "MARIA_UPDATE_ROWS_COMPRESSED_V1",
    "MARIA_DELETE_ROWS_COMPRESSED": "MARIA_DELETE_ROWS_COMPRESSED_V1",
}


def _expected_counts(spec: str) -> collections.Counter:
    out = collections.Counter()
    for item in filter(None, spec.split(",")):
        name, n = item.rsplit(":", 1)
        if re.fullmatch(r"T\d+", name):
            name = f"UNKNOWN_{name[1:]}"
        out[_MANIFEST_NAMES.get(name, name)] += int(n)
    return out


def _decode_file(path: Path, decode_rows: bool = False):
    """Top-level events of a file; the inner events of payloads stay in ``.events``."""
    with BinlogFile(path) as bf:
        ctx = DecodeContext(bf.format, decode_rows=decode_rows)
        out = []
        for r in bf.events():
            ctx.format = bf.format
            out.append(decode_event(r, ctx))
        return out


def _corpus_files():
    if not CORPUS.is_dir():
        return []
    files = []
    with open(CORPUS / "mariadb-10.11" / "FILES.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            files.append(pytest.param(CORPUS / "mariadb-10.11" / "binlogs" / row["file"], row["event_types"], id=row["file"]))
    with open(CORPUS / "public" / "MANIFEST.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["events"] in ("", "0"):  # the two files that are not binlogs
                continue
            files.append(pytest.param(CORPUS / "public" / row["file"], row["event_types"], id=row["file"]))
    return files


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("path,event_types", _corpus_files())
def test_corpus_event_counts(path, event_types):
    events = _decode_file(path)
    got = collections.Counter(event_type_name(e.header.type_code) for e in events)
    assert got == _expected_counts(event_types)
    unknown = [e for e in events if isinstance(e, UnknownEvent)]
    assert all(event_type_name(e.header.type_code).startswith("UNKNOWN_") for e in unknown)


def _text_decodes():
    if not CORPUS.is_dir():
        return []
    out = [p for p in sorted((CORPUS / "mariadb-10.11" / "binlogs").glob("binlog.0000??.txt"))]
    with open(CORPUS / "public" / "MANIFEST.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            if row["second_opinion_status"].startswith("ok"):
                out.append(CORPUS / "public" / row["second_opinion_decode"].split(" (")[0])
    return [pytest.param(p, id=p.name) for p in out]


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("txt", _text_decodes())
def test_corpus_against_mariadb_binlog_text(txt):
    """Positions, statements, GTIDs, xids, table maps and rows-event headers as
    ``mariadb-binlog`` printed them."""
    from binlog_text import parse_text_file

    binlog = txt.parent / re.sub(r"(\.mariadb-binlog)?\.txt$", "", txt.name)
    ours = {e.header.pos: e for e in _decode_file(binlog)}
    checked = collections.Counter()
    for t in parse_text_file(txt):
        if t["pos"] not in ours:
            continue
        ev = ours[t["pos"]]
        kind = t["type"]
        assert ev.header.end_pos == t["end_log_pos"] or ev.header.next_pos == t["end_log_pos"]
        if kind in ("Query", "Query_compressed"):
            assert isinstance(ev, QueryEvent) and ev.compressed == (kind == "Query_compressed")
            sql = t["sql"]
            if ev.status_vars.get("Q_GTID_FLAGS3", {}).get("flags"):  # two-phase ALTER: printed commented out
                sql = "\n".join(line.removeprefix("### ") for line in sql.split("\n"))
            assert ev.query == sql, f"at {t['pos']}"
            assert (ev.thread_id, ev.error_code) == (t["thread_id"], t["error_code"])
            if t.get("xid"):
                assert ev.status_vars.get("Q_XID") == t["xid"]
        elif kind == "Gtid":
            assert isinstance(ev, MariaGtidEvent) and ev.gtid == t["gtid"]
            words = t["gtid_flags"]
            cid = re.search(r"cid=(\d+)", words)
            assert ev.commit_id == (int(cid.group(1)) if cid else None)
            assert ("trans" in words.split()) == bool(ev.flags & MARIA_FL_TRANSACTIONAL)
            assert ("ddl" in words.split()) == bool(ev.flags & MARIA_FL_DDL)
            assert ("START ALTER" in words) == bool(ev.flags_extra & MARIA_FL_START_ALTER)
            sa = re.search(r"COMMIT ALTER id= (\d+)", words)
            assert ev.sa_seq_no == (int(sa.group(1)) if sa else None)
        elif kind == "Gtid_list":  # one GTID per line after the first
            printed = t["gtids"] + [g.strip("#, ]") for g in t["body"] if g.startswith("# ")]
            assert sorted(f"{d}-{s}-{n}" for d, s, n in ev.gtids) == sorted(printed)
        elif kind == "Format_desc":
            assert ev.format.server_version == t["server_version"]
        elif kind == "Binlog_checkpoint":
            assert ev.file == t["file"]
        elif kind == "Xid":
            assert isinstance(ev, XidEvent) and ev.xid == t["xid"]
        elif kind == "Rotate":
            assert (ev.next_file, ev.position) == (t["next_file"], t["next_pos"])
        elif kind == "Table_map":
            assert (ev.schema, ev.table, ev.table_id) == (t["db"], t["table"], t["table_id"])
        elif kind == "Annotate_rows":
            assert ev.query == t["sql"]
        elif "rows" in t:
            assert isinstance(ev, RowsEvent) and ev.table_id == t["table_id"] and ev.op == t["op"]
            assert ev.stmt_end == ("STMT_END_F" in (t["flags"] or ""))
        elif kind == "Intvar":
            m = re.match(r"SET (\w+)=(\d+)", t["body"][0])
            assert (ev.name, ev.value) == (m.group(1), int(m.group(2)))
        elif kind == "Rand":
            m = re.match(r"SET @@RAND_SEED1=(\d+), @@RAND_SEED2=(\d+)", t["body"][0])
            assert (ev.seed1, ev.seed2) == (int(m.group(1)), int(m.group(2)))
        elif kind == "User_var":
            assert t["body"][0].startswith(f"SET @`{ev.name}`:=")
        elif kind == "XA_prepare":
            assert isinstance(ev, XaPrepareEvent) and ev.xa_xid.upper() == t["xid"].upper()
        else:
            continue
        checked[kind] += 1
    assert checked, "nothing compared"


# Files the row layer (rows.py / decimal.py / temporal.py) cannot decode yet; not an
# event-layer matter, so they are expected failures here.
_ROW_LAYER_GAPS = {
    "binlog.000017.txt": "MariaDB 5.3 fractional TIME/DATETIME (a known corpus gap)",
}


def _row_count_params():
    return [
        pytest.param(*p.values, id=p.id, marks=[pytest.mark.xfail(reason=_ROW_LAYER_GAPS[p.id], raises=BinlogError)])
        if p.id in _ROW_LAYER_GAPS else p
        for p in _text_decodes()
    ]


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("txt", _row_count_params())
def test_corpus_row_counts_with_the_rows_layer(txt):
    """With ``decode_rows=True`` every statement has as many row changes as mariadb-binlog printed."""
    pytest.importorskip("pipelines.binlog.rows")
    from binlog_text import parse_text_file

    binlog = txt.parent / re.sub(r"(\.mariadb-binlog)?\.txt$", "", txt.name)
    ours = {}
    for e in _decode_file(binlog, decode_rows=True):
        for inner in e.events if isinstance(e, TransactionPayloadEvent) else (e,):
            if isinstance(inner, RowsEvent):
                ours[inner.header.pos] = inner
    statements = [t for t in parse_text_file(txt) if "rows" in t and t.get("stmt_events")]
    for t in statements:
        assert sum(len(ours[p].rows) for p in t["stmt_events"]) == t["number_of_rows"], f"at {t['pos']}"
    assert all(not r.body for r in ours.values())


@needs_corpus
@pytest.mark.corpus
def test_corpus_mysql_gtids_against_mysqlbinlog():
    """MySQL 5.7 GTIDs, logical clocks and Previous-GTIDs as MySQL's own mysqlbinlog printed them."""
    text = (CORPUS / "public" / "zalora__binlog-parser" / "expected" / "gtid-plaintext-mysql-bin.01").read_text()
    events = _decode_file(CORPUS / "public" / "zalora__binlog-parser" / "gtid__mysql-bin.01")
    expected = re.findall(
        r"last_committed=(\d+)\tsequence_number=(\d+)\trbr_only=(yes|no)\n(?:/\*!50718 [^\n]*\n)?"
        r"SET @@SESSION.GTID_NEXT= '([^']+)'",
        text,
    )
    gtids = [e for e in events if isinstance(e, GtidEvent)]
    assert len(gtids) == 17
    got = [(str(e.last_committed), str(e.sequence_number), "no" if e.gtid_flags & 1 else "yes", e.gtid) for e in gtids]
    assert got == expected
    prev = re.search(r"Previous-GTIDs\n# (\S+)", text).group(1)
    assert [e.gtid_set for e in events if isinstance(e, PreviousGtidsEvent)] == [prev]


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize(
    "compressed,unpacked",
    [
        ("debezium__mysql-binlog-connector-java/mysql-bin.compressed",
         "derived/debezium__mysql-binlog-connector-java_mysql-bin.compressed.unpacked"),
        ("apecloud__mysql-binlog-connector-rust/mysql-bin.000057",
         "derived/apecloud__mysql-binlog-connector-rust_mysql-bin.000057.unpacked"),
    ],
)
def test_corpus_transaction_payload_matches_unpacked_copy(compressed, unpacked):
    def flat(events):
        for e in events:
            if isinstance(e, TransactionPayloadEvent):
                assert e.compression_type == 0 and e.uncompressed_size > e.payload_size
                yield from e.events
            else:
                yield e

    def comparable(e):
        if isinstance(e, FormatDescriptionEvent):
            return "FDE"  # the unpacked copy has checksums switched off
        e = dataclasses.replace(e, header=None)
        return dataclasses.replace(e, table_map=None) if isinstance(e, RowsEvent) else e

    ours = list(flat(_decode_file(CORPUS / "public" / compressed)))
    theirs = _decode_file(CORPUS / "public" / unpacked)
    assert [e.header.type_code for e in ours] == [e.header.type_code for e in theirs]
    assert [comparable(e) for e in ours] == [comparable(e) for e in theirs]
    assert any(e.header.in_payload for e in ours)


# collation ids of the corpus tables (MariaDB's information_schema.COLLATIONS)
_COLLATIONS = {
    8: "latin1_swedish_ci", 33: "utf8mb3_general_ci", 35: "ucs2_general_ci", 45: "utf8mb4_general_ci",
    46: "utf8mb4_bin", 54: "utf16_general_ci", 60: "utf32_general_ci", 63: None,  # binary: not printed
}
_GEOMETRY_NAMES = ["GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON",
                   "GEOMETRYCOLLECTION"]


@needs_corpus
@pytest.mark.corpus
@pytest.mark.parametrize("name", ["binlog.000011", "binlog.000012"])
def test_corpus_table_map_optional_metadata(name):
    """binlog_row_metadata=MINIMAL/FULL against ``mariadb-binlog --print-table-metadata``."""
    from binlog_text import parse_text_file

    binlogs = CORPUS / "mariadb-10.11" / "binlogs"
    ours = {e.header.pos: e for e in _decode_file(binlogs / name) if isinstance(e, TableMapEvent)}
    maps = [t for t in parse_text_file(binlogs / f"{name}.meta.txt") if t["type"] == "Table_map"]
    assert maps and all(t["pos"] in ours for t in maps)
    for t in maps:
        ev, cols = ours[t["pos"]], t["columns"]
        assert len(cols) == ev.column_count
        # The tool reads SIGNEDNESS without the bit MariaDB writes for YEAR (docs/decoder.md, "Where our
        # decode differs"): the same bits, spread over the numeric columns but YEAR.
        tool_signedness = {}
        if ev.signedness is not None:
            bits = [b for b in ev.signedness if b is not None]
            numeric = [j for j, ty in enumerate(ev.column_types) if ty in NUMERIC_TYPES]
            tool_signedness = dict(zip(numeric, bits))
        for i, c in enumerate(cols):
            assert c.nullable == ev.nullable[i]
            if ev.column_names is not None:
                assert c.name == ev.column_names[i]
            if i in tool_signedness:
                assert c.unsigned == tool_signedness[i], (ev.table, i)
            if ev.column_charsets is not None and ev.column_charsets[i] is not None:
                assert c.collation == _COLLATIONS[ev.column_charsets[i]], (ev.table, i)
            # the tool prints member names as raw bytes of the column charset
            raw_type = c.type.encode("utf-8", "surrogateescape")
            cid = ev.column_charsets[i] if ev.column_charsets else None
            codec = (codec_for_collation(cid) if cid is not None else None) or "utf-8"
            for kind, members in (("ENUM", ev.enum_values), ("SET", ev.set_values)):
                if members is not None and members[i] is not None:
                    listed = ",".join(f"'{v}'" for v in members[i]).encode(codec)
                    assert raw_type.startswith(kind.encode() + b"(" + listed + b")"), (ev.table, i)
            if ev.geometry_types is not None and ev.geometry_types[i] is not None:
                assert c.type.split()[0] == _GEOMETRY_NAMES[ev.geometry_types[i]]
        if ev.primary_key is not None:
            assert [ev.column_names[i] for i, _ in ev.primary_key] == t["primary_key"]
        else:
            assert "primary_key" not in t


@needs_corpus
@pytest.mark.corpus
def test_corpus_mariadb_compressed_events():
    events = _decode_file(CORPUS / "mariadb-10.11" / "binlogs" / "binlog.000013")
    rows = [e for e in events if isinstance(e, RowsEvent) and e.compressed]
    assert len(rows) == 34 and all(e.body for e in rows)
    assert sum(isinstance(e, QueryEvent) and e.compressed for e in events) == 2


@needs_corpus
@pytest.mark.corpus
def test_corpus_encrypted_file():
    """START_ENCRYPTION decodes (as mariadb-binlog printed it offline); what follows is
    encrypted, and must come out as an error at the event's offset, never as a
    plausible event."""
    path = CORPUS / "mariadb-10.11-encrypted" / "binlog.000002"
    offline = (CORPUS / "mariadb-10.11-encrypted" / "binlog.000002.offline.txt").read_text()
    m = re.search(r"# Encryption scheme: (\d+), key_version: (\d+), nonce: ([0-9a-f]+)", offline)
    with BinlogFile(path) as bf:
        ctx = DecodeContext(bf.format, decode_rows=False)
        it = bf.events()
        first = [decode_event(next(it), ctx) for _ in range(2)]
        assert isinstance(first[0], FormatDescriptionEvent)
        start = first[1]
        assert isinstance(start, StartEncryptionEvent)
        assert (start.scheme, start.key_version, start.nonce.hex()) == (int(m.group(1)), int(m.group(2)), m.group(3))
        try:
            for r in it:
                assert isinstance(decode_event(r, ctx), UnknownEvent)
        except BinlogError as e:
            assert e.offset == start.header.end_pos
