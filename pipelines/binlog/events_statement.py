"""Statement-based helpers: INTVAR, RAND, USER_VAR and the LOAD DATA family
(see :mod:`pipelines.binlog.events`)."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .charsets import BINARY_COLLATION, codec_for_collation
from .constants import EventType
from .errors import CorruptEvent, UnsupportedType, need
from .framing import EventHeader
from .layout import Layout
from .values import decode_text
from .wire import U32, lstr8
from .events_common import declared_post_header, name_text, post_header
from .events_control import INTVAR_BODY, RAND_BODY


@dataclass(frozen=True, slots=True)
class IntvarEvent:
    """INTVAR: LAST_INSERT_ID (type 1) or INSERT_ID (type 2) for the next statement."""

    header: EventHeader
    type: int
    value: int

    @property
    def name(self) -> str:
        return {1: "LAST_INSERT_ID", 2: "INSERT_ID"}.get(self.type, f"INTVAR_{self.type}")


@dataclass(frozen=True, slots=True)
class RandEvent:
    """RAND: the two seeds of RAND() for the next statement."""

    header: EventHeader
    seed1: int
    seed2: int


# Item_result codes of USER_VAR values
USER_VAR_STRING = 0
USER_VAR_REAL = 1
USER_VAR_INT = 2
USER_VAR_ROW = 3
USER_VAR_DECIMAL = 4
USER_VAR_UNSIGNED_F = 0x01


@dataclass(frozen=True, slots=True)
class UserVarEvent:
    """USER_VAR: the value of ``@name`` for the next statement.

    ``value`` is decoded for the simple types: STRING -> text in collation ``charset``
    (bytes for ``binary``; an InvalidText when not valid), REAL -> float, INT -> int (unsigned when ``flags`` has
    UNSIGNED_F). DECIMAL and ROW values are left undecoded (``value`` is None);
    ``value_bytes`` always holds the logged bytes (for DECIMAL: precision, scale,
    then the binary decimal).
    """

    header: EventHeader
    name: str
    is_null: bool
    value_type: int
    charset: int
    value_bytes: bytes
    value: Any
    flags: int

    @property
    def unsigned(self) -> bool:
        return bool(self.flags & USER_VAR_UNSIGNED_F)


@dataclass(frozen=True, slots=True)
class BeginLoadQueryEvent:
    """BEGIN_LOAD_QUERY (17): the first block of a LOAD DATA file."""

    header: EventHeader
    file_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class AppendBlockEvent:
    """APPEND_BLOCK (9): a further block of a LOAD DATA file."""

    header: EventHeader
    file_id: int
    data: bytes


@dataclass(frozen=True, slots=True)
class ExecLoadEvent:
    """EXEC_LOAD (10, MySQL < 5.0.3): run the LOAD DATA of CREATE_FILE ``file_id``."""

    header: EventHeader
    file_id: int


@dataclass(frozen=True, slots=True)
class DeleteFileEvent:
    """DELETE_FILE (11): drop the temporary LOAD DATA file ``file_id``."""

    header: EventHeader
    file_id: int


@dataclass(frozen=True, slots=True)
class LoadEvent:
    """LOAD (6), NEW_LOAD (12) and CREATE_FILE (8): LOAD DATA as logged by MySQL < 5.0.3.

    ``sql_ex`` holds the FIELDS/LINES options (``field_term``, ``enclosed``,
    ``line_term``, ``line_start``, ``escaped`` as bytes, ``opt_flags``).
    CREATE_FILE also carries ``file_id`` and the first ``block`` of the file.
    """

    header: EventHeader
    thread_id: int
    exec_time: int
    skip_lines: int
    schema: str
    table: str
    fields: tuple[str, ...]
    file_name: str
    sql_ex: dict[str, Any]
    file_id: int | None = None
    block: bytes = b""


# =============================================================================
# statement-based helpers: INTVAR, RAND, USER_VAR, LOAD DATA family
# =============================================================================

USER_VAR_HEAD = Layout("value_type:B charset:I value_len:I", "UserVarValueHead")
FILE_ID_POST_HEADER = Layout("file_id:I", "FileIdPostHeader")
LOAD_POST_HEADER = Layout(
    "thread_id:I exec_time:I skip_lines:I table_len:B db_len:B num_fields:I", "LoadPostHeader"
)
_OLD_SQL_EX = Layout("field_term:c enclosed:c line_term:c line_start:c escaped:c opt_flags:B empty_flags:B", "OldSqlEx")
_SQL_EX_NAMES = ("field_term", "enclosed", "line_term", "line_start", "escaped")


def decode_intvar(data, ctx, header) -> IntvarEvent:
    off = declared_post_header(ctx, EventType.INTVAR, 0)
    b = INTVAR_BODY.unpack(data, off)
    return IntvarEvent(header, b.type, b.value)


def decode_rand(data, ctx, header) -> RandEvent:
    off = declared_post_header(ctx, EventType.RAND, 0)
    b = RAND_BODY.unpack(data, off)
    return RandEvent(header, b.seed1, b.seed2)


def _user_var_value(value_type: int, raw: bytes, flags: int, charset: int):
    if value_type == USER_VAR_STRING:
        try:
            codec = codec_for_collation(charset) if charset != BINARY_COLLATION else None
        except UnsupportedType:
            codec = None
        return decode_text(raw, codec) if codec else raw
    if value_type == USER_VAR_REAL:
        if len(raw) != 8:
            raise CorruptEvent(f"USER_VAR REAL value of {len(raw)} bytes (need 8)")
        return struct.unpack("<d", raw)[0]
    if value_type == USER_VAR_INT:
        if len(raw) != 8:
            raise CorruptEvent(f"USER_VAR INT value of {len(raw)} bytes (need 8)")
        return int.from_bytes(raw, "little", signed=not flags & USER_VAR_UNSIGNED_F)
    return None  # DECIMAL / ROW: see value_bytes


def decode_user_var(data, ctx, header) -> UserVarEvent:
    off = declared_post_header(ctx, EventType.USER_VAR, 0)
    need(data, off, 4, "USER_VAR name length")
    name_len = U32.unpack_from(data, off)[0]
    off += 4
    need(data, off, name_len + 1, "USER_VAR name")
    name = name_text(bytes(data[off : off + name_len]))
    off += name_len
    is_null = bool(data[off])
    off += 1
    if is_null:
        return UserVarEvent(header, name, True, USER_VAR_STRING, 63, b"", None, 0)
    h = USER_VAR_HEAD.unpack(data, off)
    off += USER_VAR_HEAD.size
    need(data, off, h.value_len, "USER_VAR value")
    raw = bytes(data[off : off + h.value_len])
    off += h.value_len
    flags = data[off] if off < len(data) else 0  # older servers wrote no flags byte
    return UserVarEvent(header, name, False, h.value_type, h.charset, raw, _user_var_value(h.value_type, raw, flags, h.charset), flags)


def decode_begin_load_query(data, ctx, header) -> BeginLoadQueryEvent:
    ph, off = post_header(data, ctx, EventType.BEGIN_LOAD_QUERY, FILE_ID_POST_HEADER)
    return BeginLoadQueryEvent(header, ph.file_id, bytes(data[off:]))


def decode_append_block(data, ctx, header) -> AppendBlockEvent:
    ph, off = post_header(data, ctx, EventType.APPEND_BLOCK, FILE_ID_POST_HEADER)
    return AppendBlockEvent(header, ph.file_id, bytes(data[off:]))


def decode_exec_load(data, ctx, header) -> ExecLoadEvent:
    ph, _ = post_header(data, ctx, EventType.EXEC_LOAD, FILE_ID_POST_HEADER)
    return ExecLoadEvent(header, ph.file_id)


def decode_delete_file(data, ctx, header) -> DeleteFileEvent:
    ph, _ = post_header(data, ctx, EventType.DELETE_FILE, FILE_ID_POST_HEADER)
    return DeleteFileEvent(header, ph.file_id)


def _sql_ex(data, off: int, new_format: bool) -> tuple[dict[str, Any], int]:
    """LOAD DATA options: NEW_LOAD/CREATE_FILE use five length-prefixed strings and
    an options byte; LOAD uses five single bytes, options and "empty" flags."""
    if new_format:
        out: dict[str, Any] = {}
        for n in _SQL_EX_NAMES:
            out[n], off = lstr8(data, off, f"LOAD {n}")
        need(data, off, 1, "LOAD options")
        out["opt_flags"] = data[off]
        return out, off + 1
    r = _OLD_SQL_EX.unpack(data, off)
    out = {n: (b"" if r.empty_flags >> i & 1 else getattr(r, n)) for i, n in enumerate(_SQL_EX_NAMES)}
    out["opt_flags"] = r.opt_flags
    return out, off + _OLD_SQL_EX.size


def _decode_load_family(data, ctx, header, *, new_format: bool, create_file: bool) -> LoadEvent:
    # The LOAD post-header is read with its fixed size, as the server does
    # (Load_log_event::copy_log_event); CREATE_FILE adds its own (the file id).
    ph = LOAD_POST_HEADER.unpack(data, 0)
    off = LOAD_POST_HEADER.size
    file_id = None
    if create_file:
        cf, n = post_header(data[off:], ctx, EventType.CREATE_FILE, FILE_ID_POST_HEADER)
        file_id, off = cf.file_id, off + n
    sql_ex, off = _sql_ex(data, off, new_format)
    need(data, off, ph.num_fields, "LOAD field lengths")
    lens = bytes(data[off : off + ph.num_fields])
    off += ph.num_fields
    fields = []
    for n in lens:
        need(data, off, n + 1, "LOAD field name")
        fields.append(name_text(bytes(data[off : off + n])))
        off += n + 1
    need(data, off, ph.table_len + 1 + ph.db_len + 1, "LOAD table and database names")
    table = name_text(bytes(data[off : off + ph.table_len]))
    off += ph.table_len + 1
    schema = name_text(bytes(data[off : off + ph.db_len]))
    off += ph.db_len + 1
    end = len(data)
    cut = bytes(data[off:end]).find(b"\0")
    name_end = end if cut < 0 else off + cut
    file_name = name_text(bytes(data[off:name_end]))
    block = bytes(data[name_end + 1 :]) if create_file and cut >= 0 else b""
    return LoadEvent(
        header, ph.thread_id, ph.exec_time, ph.skip_lines, schema, table, tuple(fields), file_name, sql_ex, file_id, block
    )


def decode_load(data, ctx, header) -> LoadEvent:
    return _decode_load_family(data, ctx, header, new_format=False, create_file=False)


def decode_new_load(data, ctx, header) -> LoadEvent:
    return _decode_load_family(data, ctx, header, new_format=True, create_file=False)


def decode_create_file(data, ctx, header) -> LoadEvent:
    return _decode_load_family(data, ctx, header, new_format=True, create_file=True)
