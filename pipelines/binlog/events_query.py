"""QUERY (and MariaDB's compressed QUERY), EXECUTE_LOAD_QUERY and the status variables
(see :mod:`pipelines.binlog.events`)."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from .constants import EventType
from .errors import CorruptEvent, TruncatedEvent, need
from .framing import EventHeader
from .layout import Layout
from .wire import U64, cstr, lstr8
from .events_common import declared_post_header, maria_uncompress, name_text, post_header, statement_text
from .events_mariadb import MARIA_FL_COMMIT_ALTER, MARIA_FL_ROLLBACK_ALTER


@dataclass(frozen=True, slots=True)
class QueryEvent:
    """QUERY (2), and MariaDB QUERY_COMPRESSED (165) once decompressed (``compressed=True``).

    ``status_vars`` maps status variable names (``"Q_SQL_MODE"``, ``"Q_CHARSET"``...,
    see ``STATUS_VARS``) to decoded values. An unknown code stops the parse the way
    the server does (it cannot know the length): the undecoded rest, starting with
    that code, is kept as ``status_vars["_unparsed"]``.
    """

    header: EventHeader
    thread_id: int
    exec_time: int
    error_code: int
    schema: str
    query: str  # in the client charset (Q_CHARSET); an InvalidText when not valid there; query_bytes: exact
    query_bytes: bytes
    status_vars: dict[str, Any]
    compressed: bool = False


@dataclass(frozen=True, slots=True)
class ExecuteLoadQueryEvent:
    """EXECUTE_LOAD_QUERY (18): a LOAD DATA statement whose file was sent in
    BEGIN_LOAD_QUERY/APPEND_BLOCK events with the same ``file_id``.
    ``query_bytes[fn_pos_start:fn_pos_end]`` is the file name in the statement."""

    header: EventHeader
    thread_id: int
    exec_time: int
    error_code: int
    schema: str
    query: str
    query_bytes: bytes
    status_vars: dict[str, Any]
    file_id: int
    fn_pos_start: int
    fn_pos_end: int
    dup_handling: int  # 0 = error, 1 = IGNORE, 2 = REPLACE


# =============================================================================
# QUERY and its status variables
# =============================================================================

QUERY_POST_HEADER = Layout("thread_id:I exec_time:I db_len:B error_code:H status_vars_len:H", "QueryPostHeader")
QUERY_POST_HEADER_PRE50 = Layout("thread_id:I exec_time:I db_len:B error_code:H", "QueryPostHeaderPre50")
EXECUTE_LOAD_QUERY_POST_HEADER = Layout(
    QUERY_POST_HEADER.spec + " file_id:I fn_pos_start:I fn_pos_end:I dup_handling:B", "ExecuteLoadQueryPostHeader"
)

_SV_AUTO_INCREMENT = Layout("increment:H offset:H")
_SV_CHARSET = Layout("client:H connection:H server:H")
_SV_CHARSET_COLLATION = Layout("charset:H collation:H")
_OVER_MAX_DBS_IN_EVENT_MTS = 254
_MAX_DBS_IN_EVENT_MTS = 16


def _sv_fixed(fmt: str):
    """Reader of one fixed-size little-endian integer (``struct`` code)."""
    s = struct.Struct("<" + fmt)

    def read(buf, off, end):
        need(buf[:end], off, s.size, "status variable")
        return s.unpack_from(buf, off)[0], off + s.size

    return read


def _sv_u24(buf, off, end):
    need(buf[:end], off, 3, "status variable")
    return int.from_bytes(buf[off : off + 3], "little"), off + 3


def _sv_layout(layout: Layout):
    def read(buf, off, end):
        return layout.unpack(buf[:end], off)._asdict(), off + layout.size

    return read


def _sv_lstr(buf, off, end):
    raw, off = lstr8(buf[:end], off, "status variable string")
    return name_text(raw), off


def _sv_catalog_z(buf, off, end):
    """Q_CATALOG (MySQL 5.0.0-5.0.3): length, text, and a NUL not counted in the length."""
    raw, off = lstr8(buf[:end], off, "Q_CATALOG")
    need(buf[:end], off, 1, "Q_CATALOG terminator")
    return name_text(raw), off + 1


def _sv_invoker(buf, off, end):
    user, off = lstr8(buf[:end], off, "Q_INVOKER user")
    host, off = lstr8(buf[:end], off, "Q_INVOKER host")
    return {"user": name_text(user), "host": name_text(host)}, off


def _sv_updated_db_names(buf, off, end):
    """Count, then that many NUL-terminated names. A count above the maximum
    (OVER_MAX_DBS_IN_EVENT_MTS) means "too many to list" and no names follow:
    the value is then None."""
    need(buf[:end], off, 1, "Q_UPDATED_DB_NAMES count")
    count = buf[off]
    off += 1
    if count > _MAX_DBS_IN_EVENT_MTS:
        return None, off
    names = []
    for _ in range(count):
        raw, off = cstr(buf, off, end, "Q_UPDATED_DB_NAMES name")
        names.append(name_text(raw))
    return tuple(names), off


def _sv_bool(buf, off, end):
    need(buf[:end], off, 1, "status variable")
    return bool(buf[off]), off + 1


def _sv_gtid_flags3(buf, off, end):
    """MariaDB Q_GTID_FLAGS3: the GTID event's flags_extra, plus the START ALTER
    sequence number for a COMMIT/ROLLBACK ALTER."""
    need(buf[:end], off, 1, "Q_GTID_FLAGS3")
    flags = buf[off]
    off += 1
    value: dict[str, int] = {"flags": flags}
    if flags & (MARIA_FL_COMMIT_ALTER | MARIA_FL_ROLLBACK_ALTER):
        need(buf[:end], off, 8, "Q_GTID_FLAGS3 sa_seq_no")
        value["sa_seq_no"] = U64.unpack_from(buf, off)[0]
        off += 8
    return value, off


def _sv_charset_collations(buf, off, end):
    """MariaDB 11.2+ Q_CHARACTER_SET_COLLATIONS: count, then (charset id, collation id) pairs."""
    need(buf[:end], off, 1, "Q_CHARACTER_SET_COLLATIONS count")
    count = buf[off]
    off += 1
    pairs = []
    for _ in range(count):
        r = _SV_CHARSET_COLLATION.unpack(buf[:end], off)
        pairs.append((r.charset, r.collation))
        off += _SV_CHARSET_COLLATION.size
    return tuple(pairs), off


# code -> (name, reader(buf, off, end) -> (value, next_off)). Codes 0-20 MySQL
# (12-20 MySQL only), 128+ MariaDB only; no code means two things.
STATUS_VARS: dict[int, tuple[str, Callable]] = {
    0: ("Q_FLAGS2", _sv_fixed("I")),
    1: ("Q_SQL_MODE", _sv_fixed("Q")),
    2: ("Q_CATALOG", _sv_catalog_z),
    3: ("Q_AUTO_INCREMENT", _sv_layout(_SV_AUTO_INCREMENT)),
    4: ("Q_CHARSET", _sv_layout(_SV_CHARSET)),
    5: ("Q_TIME_ZONE", _sv_lstr),
    6: ("Q_CATALOG_NZ", _sv_lstr),
    7: ("Q_LC_TIME_NAMES", _sv_fixed("H")),
    8: ("Q_CHARSET_DATABASE", _sv_fixed("H")),
    9: ("Q_TABLE_MAP_FOR_UPDATE", _sv_fixed("Q")),
    10: ("Q_MASTER_DATA_WRITTEN", _sv_fixed("I")),
    11: ("Q_INVOKER", _sv_invoker),
    12: ("Q_UPDATED_DB_NAMES", _sv_updated_db_names),
    13: ("Q_MICROSECONDS", _sv_u24),
    # Q_COMMIT_TS: commit sequence number of MySQL 5.7 development releases (8 bytes);
    # Q_COMMIT_TS2 (15) has no reader in any server, so it stops the parse.
    14: ("Q_COMMIT_TS", _sv_fixed("Q")),
    16: ("Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP", _sv_bool),
    17: ("Q_DDL_LOGGED_WITH_XID", _sv_fixed("Q")),
    18: ("Q_DEFAULT_COLLATION_FOR_UTF8MB4", _sv_fixed("H")),
    19: ("Q_SQL_REQUIRE_PRIMARY_KEY", _sv_fixed("B")),
    20: ("Q_DEFAULT_TABLE_ENCRYPTION", _sv_fixed("B")),
    128: ("Q_HRNOW", _sv_u24),
    129: ("Q_XID", _sv_fixed("Q")),
    130: ("Q_GTID_FLAGS3", _sv_gtid_flags3),
    131: ("Q_CHARACTER_SET_COLLATIONS", _sv_charset_collations),
}


def decode_status_vars(buf, off: int, end: int) -> dict[str, Any]:
    """Status variables in ``buf[off:end]`` as ``{name: value}``."""
    out: dict[str, Any] = {}
    while off < end:
        code = buf[off]
        entry = STATUS_VARS.get(code)
        if entry is None:
            out["_unparsed"] = bytes(buf[off:end])
            break
        name, read = entry
        try:
            out[name], off = read(buf, off + 1, end)
        except TruncatedEvent as e:
            raise CorruptEvent(f"status variable {name} runs past the status block ({e.message})") from None
    return out


class _QueryParts(NamedTuple):
    thread_id: int
    exec_time: int
    error_code: int
    schema: str
    query_bytes: bytes
    status_vars: dict[str, Any]


def _query_parts(data, ctx, code: int, layout: Layout, *, compressed: bool = False):
    """Common part of QUERY, QUERY_COMPRESSED and EXECUTE_LOAD_QUERY."""
    declared = declared_post_header(ctx, code, layout.size)
    if declared == QUERY_POST_HEADER_PRE50.size and code == EventType.QUERY:
        ph = QUERY_POST_HEADER_PRE50.unpack(data, 0)  # binlog v3 (MySQL 4.x): no status variables
        sv_len = 0
    else:
        ph, declared = post_header(data, ctx, code, layout)
        sv_len = ph.status_vars_len
    off = declared
    need(data, off, sv_len, "QUERY status variables")
    status_vars = decode_status_vars(data, off, off + sv_len)
    off += sv_len
    need(data, off, ph.db_len + 1, "QUERY default database")
    schema = bytes(data[off : off + ph.db_len])
    if data[off + ph.db_len] != 0:
        raise CorruptEvent("QUERY default database is not NUL-terminated")
    off += ph.db_len + 1
    query = maria_uncompress(data[off:], "QUERY_COMPRESSED statement") if compressed else bytes(data[off:])
    parts = _QueryParts(ph.thread_id, ph.exec_time, ph.error_code, name_text(schema), query, status_vars)
    return parts, ph


def decode_query(data, ctx, header) -> QueryEvent:
    p, _ = _query_parts(data, ctx, EventType.QUERY, QUERY_POST_HEADER)
    return QueryEvent(header, p.thread_id, p.exec_time, p.error_code, p.schema,
                      statement_text(p.query_bytes, p.status_vars), p.query_bytes, p.status_vars)


def decode_query_compressed(data, ctx, header) -> QueryEvent:
    p, _ = _query_parts(data, ctx, EventType.MARIA_QUERY_COMPRESSED, QUERY_POST_HEADER, compressed=True)
    return QueryEvent(
        header, p.thread_id, p.exec_time, p.error_code, p.schema, statement_text(p.query_bytes, p.status_vars),
        p.query_bytes, p.status_vars, True
    )


def decode_execute_load_query(data, ctx, header) -> ExecuteLoadQueryEvent:
    p, ph = _query_parts(data, ctx, EventType.EXECUTE_LOAD_QUERY, EXECUTE_LOAD_QUERY_POST_HEADER)
    if ph.fn_pos_start > ph.fn_pos_end or ph.fn_pos_end > len(p.query_bytes) or ph.dup_handling > 2:
        raise CorruptEvent(
            f"EXECUTE_LOAD_QUERY file name at [{ph.fn_pos_start}, {ph.fn_pos_end}) of a "
            f"{len(p.query_bytes)}-byte statement, dup handling {ph.dup_handling}"
        )
    return ExecuteLoadQueryEvent(
        header, p.thread_id, p.exec_time, p.error_code, p.schema, statement_text(p.query_bytes, p.status_vars),
        p.query_bytes, p.status_vars, ph.file_id, ph.fn_pos_start, ph.fn_pos_end, ph.dup_handling,
    )
