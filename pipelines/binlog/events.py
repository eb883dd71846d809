"""One decoder per event type, dispatched through ``EVENT_DECODERS``.

Every decoded event is a frozen dataclass whose first field is ``header``
(:class:`~pipelines.binlog.framing.EventHeader`). Decoders are pure:
``decode_x(data, ctx, header) -> Event`` where ``data`` is the memoryview of the
event's post-header + body (common header and checksum stripped).

>>> from pipelines.binlog.framing import BinlogFile
>>> with BinlogFile("samples/binlogs/binlog.000001") as f:
...     ctx = DecodeContext(f.format)
...     [type(decode_event(raw, ctx)).__name__ for raw in f.events()][:3]
['FormatDescriptionEvent', 'GtidListEvent', 'BinlogCheckpointEvent']

:func:`decode_event` is the only entry point callers need: it picks the decoder,
turns unknown types into :class:`UnknownEvent`, records every decoded
:class:`TableMapEvent` in ``ctx.table_maps`` (for the stream and for the events
unpacked from a TRANSACTION_PAYLOAD alike) and puts the file and offset on every
error.

Post-headers are declared as :class:`~pipelines.binlog.layout.Layout` tables and
checked against the length the FORMAT_DESCRIPTION event declares for the type:
a longer declared post-header has its unknown tail skipped, a shorter one is
either an old format we know (4-byte table ids, pre-5.0 QUERY) or a
:class:`CorruptEvent`.

Sources for the layouts: MySQL ``libs/mysql/binlog/event/*.cpp`` (formerly
``libbinlogevents``), ``sql/log_event.cc``; MariaDB ``sql/log_event.cc`` and
``sql/log_event.h``.
"""
from __future__ import annotations

import struct
import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple

from .constants import (
    COMMON_HEADER_LEN,
    ROWS_EVENT_OPS,
    ROWS_FLAG_STMT_END,
    ColumnType,
    EventFlag,
    EventType,
    event_type_name,
)
from .errors import BinlogError, CorruptEvent, TruncatedEvent, UnsupportedType, need
from .gtid import MariadbGtidState, MysqlGtidSet, mysql_gtid
from .framing import EVENT_HEADER, EventHeader, FormatDescription, RawEvent, parse_format_description
from .layout import Layout
from .wire import U16, U32, U64, cstr, lstr8, packed_int, varlen_int, varlen_uint
from .charsets import BINARY_COLLATION, codec_for_collation
from .values import decode_text


@dataclass(slots=True)
class DecodeContext:
    """State an event decoder may read: the format and the table maps seen so far.

    The stream (``stream.py``) owns it. :func:`decode_event` records each
    TableMapEvent in ``table_maps`` after decoding it and forgets them all at
    the end of each statement (a rows event flagged STMT_END).
    """

    format: FormatDescription
    table_maps: dict[int, "TableMapEvent"] = field(default_factory=dict)
    decode_rows: bool = True
    # Completes a table map from outside knowledge (e.g. the precision of MariaDB
    # 5.3 temporal columns, which the binlog does not carry): TableMapEvent -> TableMapEvent.
    table_map_hook: Any = None


# =============================================================================
# small pure readers (each returns the value and the next offset)
# =============================================================================

# the wire-format readers are in wire.py


def _text(raw: bytes) -> str:
    """Identifiers and file names: UTF-8; an :class:`.values.InvalidText` (the exact bytes kept)
    where the bytes are not UTF-8."""
    return decode_text(raw, "utf-8")


def _statement_text(raw: bytes, status_vars: Mapping[str, Any]) -> str:
    """A statement in the client character set its ``Q_CHARSET`` names (UTF-8 without one, or
    for ``binary``); an :class:`.values.InvalidText` where the bytes are not valid there (the
    server stores whatever bytes the client sent: cp1251 text on a utf8 connection is common)."""
    charset = status_vars.get("Q_CHARSET")
    try:
        codec = codec_for_collation(charset["client"]) if charset is not None else None
    except UnsupportedType:  # a collation id newer than our table: the text, as UTF-8
        codec = None
    return decode_text(raw, codec or "utf-8")


def _uuid(raw) -> str:
    return str(uuid.UUID(bytes=bytes(raw)))


def _bits_lsb(buf, off: int, count: int) -> tuple[bool, ...]:
    """``count`` bits, bit i in byte i//8 at position i%8 (rows-event bitmaps, null bits)."""
    return tuple(bool(buf[off + (i >> 3)] >> (i & 7) & 1) for i in range(count))


def _bits_msb(raw: bytes) -> tuple[bool, ...]:
    """Every bit of ``raw``, most significant first (optional metadata bit fields)."""
    return tuple(bool(b >> (7 - k) & 1) for b in raw for k in range(8))


def _declared_post_header(ctx: DecodeContext, code: int, default: int) -> int:
    """Post-header length the format description declares for ``code``
    (``default`` when its table is too short to say)."""
    n = ctx.format.post_header_len(code)
    return default if n is None else n


def _post_header(data, ctx: DecodeContext, code: int, layout: Layout):
    """Unpack ``layout`` at the start of ``data`` and return (record, body offset).

    A longer declared post-header has its unknown tail skipped; a shorter one
    cannot hold the fields and is a :class:`CorruptEvent`.
    """
    declared = _declared_post_header(ctx, code, layout.size)
    if declared < layout.size:
        raise CorruptEvent(
            f"{event_type_name(code)} post-header is declared as {declared} bytes, "
            f"but its layout needs {layout.size}"
        )
    need(data, 0, declared, f"{event_type_name(code)} post-header")
    return layout.unpack(data, 0), declared


# MariaDB compressed records (binlog_buf_uncompress): header byte
# 1AAA0LLL = compressed flag, algorithm (0 = zlib), length-of-length; then the
# uncompressed length big-endian in LLL bytes; then the zlib stream.
_MARIA_COMPRESSION_ZLIB = 0


def _maria_uncompress(buf, what: str) -> bytes:
    need(buf, 0, 1, f"{what} compression header")
    head = buf[0]
    if not head & 0x80:
        raise CorruptEvent(f"{what}: compression header 0x{head:02x} lacks the compressed flag")
    alg = (head & 0x70) >> 4
    if alg != _MARIA_COMPRESSION_ZLIB:
        raise UnsupportedType(f"{what}: compression algorithm {alg} (only 0 = zlib exists)")
    lenlen = head & 0x07
    if not 1 <= lenlen <= 4:
        raise CorruptEvent(f"{what}: compressed length field of {lenlen} bytes (need 1..4)")
    need(buf, 1, lenlen, f"{what} uncompressed length")
    size = int.from_bytes(buf[1 : 1 + lenlen], "big")
    d = zlib.decompressobj()
    try:
        out = d.decompress(bytes(buf[1 + lenlen :]), size + 1)
    except zlib.error as e:
        raise CorruptEvent(f"{what}: zlib stream is damaged ({e})") from None
    if len(out) != size or not d.eof:
        raise CorruptEvent(f"{what}: declares {size} uncompressed bytes, zlib stream gives {len(out)}")
    return out


def _xid_text(gtrid: bytes, bqual: bytes, format_id: int) -> str:
    return f"X'{gtrid.hex()}',X'{bqual.hex()}',{format_id}"


# =============================================================================
# event classes
# =============================================================================


@dataclass(frozen=True, slots=True)
class UnknownEvent:
    """An event type this decoder does not know; kept whole, never dropped.

    ``ignorable`` is the header's LOG_EVENT_IGNORABLE_F: the server that wrote
    it says readers that do not know the type may skip it.
    """

    header: EventHeader
    raw: bytes
    ignorable: bool = False


@dataclass(frozen=True, slots=True)
class FormatDescriptionEvent:
    header: EventHeader
    format: FormatDescription


@dataclass(frozen=True, slots=True)
class RotateEvent:
    """ROTATE: the next file and the position to continue at in it."""

    header: EventHeader
    position: int
    next_file: str


@dataclass(frozen=True, slots=True)
class StopEvent:
    header: EventHeader


@dataclass(frozen=True, slots=True)
class XidEvent:
    """XID: commit of an XA-capable (InnoDB) transaction."""

    header: EventHeader
    xid: int


@dataclass(frozen=True, slots=True)
class XaPrepareEvent:
    """XA_PREPARE (38): ``XA PREPARE`` or ``XA COMMIT ... ONE PHASE`` of an XA transaction."""

    header: EventHeader
    one_phase: bool
    format_id: int
    gtrid_length: int
    bqual_length: int
    data: bytes  # gtrid followed by bqual

    @property
    def gtrid(self) -> bytes:
        return self.data[: self.gtrid_length]

    @property
    def xa_xid(self) -> str:
        """The XID as MariaDB prints it: ``X'gtrid',X'bqual',format_id`` (hex)."""
        return _xid_text(self.gtrid, self.bqual, self.format_id)

    @property
    def bqual(self) -> bytes:
        return self.data[self.gtrid_length : self.gtrid_length + self.bqual_length]


@dataclass(frozen=True, slots=True)
class IncidentEvent:
    """INCIDENT: something happened on the source that replicas cannot see (e.g. lost events)."""

    header: EventHeader
    incident: int  # 1 = INCIDENT_LOST_EVENTS
    message: str


@dataclass(frozen=True, slots=True)
class HeartbeatEvent:
    """HEARTBEAT (27) or HEARTBEAT_V2 (41); only ever sent over the wire.

    v1 carries the file name in its body and the position in the common header's
    ``next_pos``; v2 carries both as TLV fields (position 64-bit).
    """

    header: EventHeader
    log_file: str
    log_position: int
    version: int


@dataclass(frozen=True, slots=True)
class IgnorableEvent:
    """IGNORABLE (28): a generic event the server marks as safe to skip."""

    header: EventHeader
    raw: bytes


@dataclass(frozen=True, slots=True)
class RowsQueryEvent:
    """ROWS_QUERY (29): the statement behind the following rows events (binlog_rows_query_log_events)."""

    header: EventHeader
    query: str
    query_bytes: bytes


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


@dataclass(frozen=True, slots=True, weakref_slot=True)
class TableMapEvent:
    """TABLE_MAP: the layout of one table's rows, valid until the next statement.

    Per-column tuples all have ``column_count`` entries; optional-metadata
    fields are ``None`` when the server did not log them.
    """

    header: EventHeader
    table_id: int
    flags: int
    schema: str
    table: str
    column_count: int
    column_types: tuple[int, ...]  # ColumnType codes as logged (STRING may hide ENUM/SET)
    column_metas: tuple[Any, ...]  # per-column metadata, as columns.read_metadata returns it
    nullable: tuple[bool, ...]
    # optional metadata (MySQL 8.0.1+ binlog_row_metadata, MariaDB 10.5+)
    signedness: tuple[bool | None, ...] | None = None  # True = unsigned; None for non-numeric
    column_charsets: tuple[int | None, ...] | None = None  # collation id per column, None if n/a
    column_names: tuple[str, ...] | None = None
    set_values: tuple[tuple[str, ...] | None, ...] | None = None  # per column, None if not SET
    enum_values: tuple[tuple[str, ...] | None, ...] | None = None  # per column, None if not ENUM
    geometry_types: tuple[int | None, ...] | None = None
    primary_key: tuple[tuple[int, int], ...] | None = None  # (column index, prefix length 0=whole)
    visibility: tuple[bool, ...] | None = None  # True = visible
    vector_dimensions: tuple[int | None, ...] | None = None
    raw_optional_metadata: bytes = b""
    real_types: tuple[int, ...] = ()  # column_types with STRING resolved to ENUM/SET from the metadata
    unknown_metadata: tuple[tuple[int, bytes], ...] = ()  # optional-metadata TLVs of unknown type


@dataclass(frozen=True, slots=True)
class RowsEvent:
    """WRITE/UPDATE/DELETE rows (v0, v1, v2, partial, MariaDB compressed).

    ``rows`` holds one ``(before, after)`` pair per row change; each image is a
    tuple of values for the columns listed in ``columns_before`` /
    ``columns_after`` (column indexes, in order), or ``None`` (insert has no
    before image, delete no after image).

    With ``DecodeContext.decode_rows`` false, ``rows`` is ``()`` and ``body``
    holds the row images undecoded (decompressed for MariaDB compressed events).
    ``extra_data`` (v2 only) may hold ``"ndb"`` (``{"format": int, "data": bytes}``),
    ``"partition_id"``, ``"source_partition_id"`` (updates), and ``"_unparsed"``
    (the bytes from an unknown extra-data type on, which stops the parse as in
    the server).
    """

    header: EventHeader
    op: str  # "insert" | "update" | "delete"
    table_id: int
    flags: int
    extra_data: dict[str, Any]
    column_count: int
    columns_before: tuple[int, ...]
    columns_after: tuple[int, ...]
    table_map: TableMapEvent | None
    rows: tuple[tuple[tuple | None, tuple | None], ...]
    partial: bool = False
    compressed: bool = False
    body: bytes = b""

    @property
    def stmt_end(self) -> bool:
        return bool(self.flags & ROWS_FLAG_STMT_END)


@dataclass(frozen=True, slots=True)
class GtidEvent:
    """MySQL GTID (33), ANONYMOUS_GTID (34) and GTID_TAGGED (42, MySQL 8.3+).

    Fields a server version did not write are ``None`` (5.6 has no logical
    timestamps, 5.7 before 5.7.? no commit timestamps, ...).
    ``original_*`` equal ``immediate_*`` when the event says so (transaction
    committed first on this server).
    """

    header: EventHeader
    gtid_flags: int  # bit 0: may contain statement-based events
    sid: str  # source UUID
    gno: int
    tag: str | None = None
    last_committed: int | None = None
    sequence_number: int | None = None
    immediate_commit_timestamp: int | None = None  # microseconds since the epoch
    original_commit_timestamp: int | None = None
    transaction_length: int | None = None
    immediate_server_version: int | None = None
    original_server_version: int | None = None
    commit_group_ticket: int | None = None

    @property
    def anonymous(self) -> bool:
        return self.header.type_code == EventType.ANONYMOUS_GTID

    @property
    def gtid(self) -> str | None:
        """``uuid:gno`` or ``uuid:tag:gno``; None for an anonymous transaction."""
        if self.anonymous:
            return None
        return mysql_gtid(self.sid, self.tag, self.gno)


@dataclass(frozen=True, slots=True)
class PreviousGtidsEvent:
    """PREVIOUS_GTIDS (35): the GTIDs executed before this file.

    ``sids`` lists ``(uuid, tag or None, ((first, last), ...))`` with inclusive
    intervals; ``gtid_set`` is the same in MySQL's text form
    (``uuid:1-5:7,uuid2:tag:1-3``).
    """

    header: EventHeader
    sids: tuple[tuple[str, str | None, tuple[tuple[int, int], ...]], ...]
    gtid_set: str


@dataclass(frozen=True, slots=True)
class TransactionContextEvent:
    """TRANSACTION_CONTEXT (36, group replication certification)."""

    header: EventHeader
    server_uuid: str
    thread_id: int
    gtid_specified: bool
    snapshot_version: bytes  # encoded GTID set
    write_set: tuple[str, ...]
    read_set: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ViewChangeEvent:
    """VIEW_CHANGE (37, group replication membership change)."""

    header: EventHeader
    view_id: str
    seq_number: int
    certification_info: dict[str, str]


TRANSACTION_PAYLOAD_ZSTD = 0
TRANSACTION_PAYLOAD_NONE = 255


@dataclass(frozen=True, slots=True)
class TransactionPayloadEvent:
    """TRANSACTION_PAYLOAD (40, binlog_transaction_compression): a whole
    transaction's events, compressed. ``events`` are decoded with the same
    context; their headers say ``in_payload=True``, ``pos``/``end_pos`` are the
    payload event's and ``inner_pos`` is the offset in the uncompressed buffer.
    """

    header: EventHeader
    payload_size: int
    compression_type: int  # 0 = ZSTD, 255 = NONE
    uncompressed_size: int | None
    events: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class AnnotateRowsEvent:
    """MariaDB ANNOTATE_ROWS (160): the statement behind the following rows events."""

    header: EventHeader
    query: str
    query_bytes: bytes


@dataclass(frozen=True, slots=True)
class BinlogCheckpointEvent:
    """MariaDB BINLOG_CHECKPOINT (161): crash recovery may start from ``file``."""

    header: EventHeader
    file: str


# MariaDB Gtid_log_event flags2 / flags_extra
MARIA_FL_STANDALONE = 0x01
MARIA_FL_GROUP_COMMIT_ID = 0x02
MARIA_FL_TRANSACTIONAL = 0x04
MARIA_FL_ALLOW_PARALLEL = 0x08
MARIA_FL_WAITED = 0x10
MARIA_FL_DDL = 0x20
MARIA_FL_PREPARED_XA = 0x40
MARIA_FL_COMPLETED_XA = 0x80
MARIA_FL_EXTRA_MULTI_ENGINE = 0x01
MARIA_FL_START_ALTER = 0x02
MARIA_FL_COMMIT_ALTER = 0x04
MARIA_FL_ROLLBACK_ALTER = 0x08


@dataclass(frozen=True, slots=True)
class MariaGtidEvent:
    """MariaDB GTID (162): starts an event group (instead of BEGIN) or marks a
    standalone statement (DDL).

    ``commit_id`` is set with FL_GROUP_COMMIT_ID; ``xa_format_id`` / ``xa_gtrid``
    / ``xa_bqual`` with FL_PREPARED_XA or FL_COMPLETED_XA. ``flags_extra`` and
    the fields after it exist from MariaDB 10.8 on (0 / None before).
    """

    header: EventHeader
    seq_no: int
    domain_id: int
    flags: int
    commit_id: int | None = None
    xa_format_id: int | None = None
    xa_gtrid: bytes | None = None
    xa_bqual: bytes | None = None
    flags_extra: int = 0
    extra_engines: int | None = None
    sa_seq_no: int | None = None  # the START ALTER this COMMIT/ROLLBACK ALTER refers to

    @property
    def gtid(self) -> str:
        return f"{self.domain_id}-{self.header.server_id}-{self.seq_no}"

    @property
    def standalone(self) -> bool:
        return bool(self.flags & MARIA_FL_STANDALONE)

    @property
    def xa_xid(self) -> str | None:
        """The XA transaction's XID as ``X'gtrid',X'bqual',format_id``; None outside XA."""
        if self.xa_format_id is None:
            return None
        return _xid_text(self.xa_gtrid, self.xa_bqual, self.xa_format_id)


@dataclass(frozen=True, slots=True)
class GtidListEvent:
    """MariaDB GTID_LIST (163): the last GTID of every domain at the start of this file."""

    header: EventHeader
    gtids: tuple[tuple[int, int, int], ...]  # (domain_id, server_id, seq_no)
    flags: int  # the 4 high bits of the count field

    @property
    def gtid_list(self) -> str:
        return str(MariadbGtidState.of(self.gtids))


@dataclass(frozen=True, slots=True)
class StartEncryptionEvent:
    """MariaDB START_ENCRYPTION (164): every later event of the file is encrypted."""

    header: EventHeader
    scheme: int
    key_version: int
    nonce: bytes


Event = Any  # any of the dataclasses in this module
EventDecoder = Callable[[memoryview, DecodeContext, EventHeader], Event]


# =============================================================================
# control events
# =============================================================================

ROTATE_POST_HEADER = Layout("position:Q", "RotatePostHeader")
XID_BODY = Layout("xid:Q", "XidBody")
XA_PREPARE_BODY = Layout("one_phase:B format_id:I gtrid_length:I bqual_length:I", "XaPrepareBody")
INCIDENT_POST_HEADER = Layout("incident:H", "IncidentPostHeader")
INTVAR_BODY = Layout("type:B value:Q", "IntvarBody")
RAND_BODY = Layout("seed1:Q seed2:Q", "RandBody")
_XA_MAX_PART = 64  # MAXGTRIDSIZE / MAXBQUALSIZE


def decode_format_description(data, ctx, header) -> FormatDescriptionEvent:
    return FormatDescriptionEvent(header, parse_format_description(data))


def decode_rotate(data, ctx, header) -> RotateEvent:
    declared = _declared_post_header(ctx, EventType.ROTATE, ROTATE_POST_HEADER.size)
    if declared == 0:  # binlog v1: no post-header, position implied
        position, off = 4, 0
    else:
        ph, off = _post_header(data, ctx, EventType.ROTATE, ROTATE_POST_HEADER)
        position = ph.position
    name = bytes(data[off:])
    if not name:
        raise CorruptEvent("ROTATE event has no file name")
    return RotateEvent(header, position, _text(name))


def decode_stop(data, ctx, header) -> StopEvent:
    return StopEvent(header)


def decode_xid(data, ctx, header) -> XidEvent:
    off = _declared_post_header(ctx, EventType.XID, 0)
    return XidEvent(header, XID_BODY.unpack(data, off).xid)


def decode_xa_prepare(data, ctx, header) -> XaPrepareEvent:
    off = _declared_post_header(ctx, EventType.XA_PREPARE, 0)
    b = XA_PREPARE_BODY.unpack(data, off)
    if b.gtrid_length > _XA_MAX_PART or b.bqual_length > _XA_MAX_PART:
        raise CorruptEvent(f"XA_PREPARE with gtrid length {b.gtrid_length} and bqual length {b.bqual_length} (max 64 each)")
    off += XA_PREPARE_BODY.size
    n = b.gtrid_length + b.bqual_length
    need(data, off, n, "XA_PREPARE xid data")
    return XaPrepareEvent(header, bool(b.one_phase), b.format_id, b.gtrid_length, b.bqual_length, bytes(data[off : off + n]))


def decode_incident(data, ctx, header) -> IncidentEvent:
    ph, off = _post_header(data, ctx, EventType.INCIDENT, INCIDENT_POST_HEADER)
    msg = b""
    if off < len(data):
        msg, off = lstr8(data, off, "INCIDENT message")
    return IncidentEvent(header, ph.incident, _text(msg))


def decode_heartbeat(data, ctx, header) -> HeartbeatEvent:
    off = _declared_post_header(ctx, EventType.HEARTBEAT, 0)
    return HeartbeatEvent(header, _text(bytes(data[off:])), header.next_pos, 1)


_HB_END, _HB_FILENAME, _HB_POSITION = 0, 1, 2


def decode_heartbeat_v2(data, ctx, header) -> HeartbeatEvent:
    """TLV fields: type and length as packed integers; END mark = type 0."""
    off, end = 0, len(data)
    name, position = None, None
    while off < end:
        ftype, off = packed_int(data, off, "HEARTBEAT_V2 field type")
        if ftype == _HB_END:
            break
        length, off = packed_int(data, off, "HEARTBEAT_V2 field length")
        need(data, off, length, "HEARTBEAT_V2 field")
        if ftype == _HB_FILENAME:
            name = bytes(data[off : off + length])
        elif ftype == _HB_POSITION:
            position, _ = packed_int(data[off : off + length], 0, "HEARTBEAT_V2 log position")
        off += length  # unknown fields are skipped by their length
    if name is None or position is None:
        raise CorruptEvent("HEARTBEAT_V2 lacks its log file name or position field")
    return HeartbeatEvent(header, _text(name), position, 2)


def decode_ignorable(data, ctx, header) -> IgnorableEvent:
    return IgnorableEvent(header, bytes(data))


def decode_rows_query(data, ctx, header) -> RowsQueryEvent:
    # A 1-byte length precedes the text; the server ignores it (it overflows for
    # long statements) and reads to the end of the event.
    off = _declared_post_header(ctx, EventType.ROWS_QUERY, 0) + 1
    need(data, 0, off, "ROWS_QUERY length byte")
    q = bytes(data[off:])
    return RowsQueryEvent(header, _text(q), q)


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
    return _text(raw), off


def _sv_catalog_z(buf, off, end):
    """Q_CATALOG (MySQL 5.0.0-5.0.3): length, text, and a NUL not counted in the length."""
    raw, off = lstr8(buf[:end], off, "Q_CATALOG")
    need(buf[:end], off, 1, "Q_CATALOG terminator")
    return _text(raw), off + 1


def _sv_invoker(buf, off, end):
    user, off = lstr8(buf[:end], off, "Q_INVOKER user")
    host, off = lstr8(buf[:end], off, "Q_INVOKER host")
    return {"user": _text(user), "host": _text(host)}, off


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
        names.append(_text(raw))
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
    declared = _declared_post_header(ctx, code, layout.size)
    if declared == QUERY_POST_HEADER_PRE50.size and code == EventType.QUERY:
        ph = QUERY_POST_HEADER_PRE50.unpack(data, 0)  # binlog v3 (MySQL 4.x): no status variables
        sv_len = 0
    else:
        ph, declared = _post_header(data, ctx, code, layout)
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
    query = _maria_uncompress(data[off:], "QUERY_COMPRESSED statement") if compressed else bytes(data[off:])
    parts = _QueryParts(ph.thread_id, ph.exec_time, ph.error_code, _text(schema), query, status_vars)
    return parts, ph


def decode_query(data, ctx, header) -> QueryEvent:
    p, _ = _query_parts(data, ctx, EventType.QUERY, QUERY_POST_HEADER)
    return QueryEvent(header, p.thread_id, p.exec_time, p.error_code, p.schema,
                      _statement_text(p.query_bytes, p.status_vars), p.query_bytes, p.status_vars)


def decode_query_compressed(data, ctx, header) -> QueryEvent:
    p, _ = _query_parts(data, ctx, EventType.MARIA_QUERY_COMPRESSED, QUERY_POST_HEADER, compressed=True)
    return QueryEvent(
        header, p.thread_id, p.exec_time, p.error_code, p.schema, _statement_text(p.query_bytes, p.status_vars),
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
        header, p.thread_id, p.exec_time, p.error_code, p.schema, _statement_text(p.query_bytes, p.status_vars),
        p.query_bytes, p.status_vars, ph.file_id, ph.fn_pos_start, ph.fn_pos_end, ph.dup_handling,
    )


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
    off = _declared_post_header(ctx, EventType.INTVAR, 0)
    b = INTVAR_BODY.unpack(data, off)
    return IntvarEvent(header, b.type, b.value)


def decode_rand(data, ctx, header) -> RandEvent:
    off = _declared_post_header(ctx, EventType.RAND, 0)
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
    off = _declared_post_header(ctx, EventType.USER_VAR, 0)
    need(data, off, 4, "USER_VAR name length")
    name_len = U32.unpack_from(data, off)[0]
    off += 4
    need(data, off, name_len + 1, "USER_VAR name")
    name = _text(bytes(data[off : off + name_len]))
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
    ph, off = _post_header(data, ctx, EventType.BEGIN_LOAD_QUERY, FILE_ID_POST_HEADER)
    return BeginLoadQueryEvent(header, ph.file_id, bytes(data[off:]))


def decode_append_block(data, ctx, header) -> AppendBlockEvent:
    ph, off = _post_header(data, ctx, EventType.APPEND_BLOCK, FILE_ID_POST_HEADER)
    return AppendBlockEvent(header, ph.file_id, bytes(data[off:]))


def decode_exec_load(data, ctx, header) -> ExecLoadEvent:
    ph, _ = _post_header(data, ctx, EventType.EXEC_LOAD, FILE_ID_POST_HEADER)
    return ExecLoadEvent(header, ph.file_id)


def decode_delete_file(data, ctx, header) -> DeleteFileEvent:
    ph, _ = _post_header(data, ctx, EventType.DELETE_FILE, FILE_ID_POST_HEADER)
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
        cf, n = _post_header(data[off:], ctx, EventType.CREATE_FILE, FILE_ID_POST_HEADER)
        file_id, off = cf.file_id, off + n
    sql_ex, off = _sql_ex(data, off, new_format)
    need(data, off, ph.num_fields, "LOAD field lengths")
    lens = bytes(data[off : off + ph.num_fields])
    off += ph.num_fields
    fields = []
    for n in lens:
        need(data, off, n + 1, "LOAD field name")
        fields.append(_text(bytes(data[off : off + n])))
        off += n + 1
    need(data, off, ph.table_len + 1 + ph.db_len + 1, "LOAD table and database names")
    table = _text(bytes(data[off : off + ph.table_len]))
    off += ph.table_len + 1
    schema = _text(bytes(data[off : off + ph.db_len]))
    off += ph.db_len + 1
    end = len(data)
    cut = bytes(data[off:end]).find(b"\0")
    name_end = end if cut < 0 else off + cut
    file_name = _text(bytes(data[off:name_end]))
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


# =============================================================================
# TABLE_MAP
# =============================================================================

TABLE_MAP_POST_HEADER = Layout("table_id:u6 flags:H", "TableMapPostHeader")
TABLE_ID_4_POST_HEADER = Layout("table_id:I flags:H", "TableId4PostHeader")  # before MySQL 5.1.4

# Optional metadata field types (Table_map_event::Optional_metadata_field_type)
OPT_SIGNEDNESS = 1
OPT_DEFAULT_CHARSET = 2
OPT_COLUMN_CHARSET = 3
OPT_COLUMN_NAME = 4
OPT_SET_STR_VALUE = 5
OPT_ENUM_STR_VALUE = 6
OPT_GEOMETRY_TYPE = 7
OPT_SIMPLE_PRIMARY_KEY = 8
OPT_PRIMARY_KEY_WITH_PREFIX = 9
OPT_ENUM_AND_SET_DEFAULT_CHARSET = 10
OPT_ENUM_AND_SET_COLUMN_CHARSET = 11
OPT_COLUMN_VISIBILITY = 12
OPT_VECTOR_DIMENSIONALITY = 13

# Which real column types each optional-metadata list covers, in column order: what the
# servers write, not what their own readers assume. MySQL's writer and reader agree (its
# is_numeric_type / is_character_type / is_enum_or_set_type, sql/log_event.cc). MariaDB's
# writer (10.5+) puts YEAR in SIGNEDNESS, with an "unsigned" bit, because its YEAR field is a
# TINYINT underneath; its reader (mariadb-binlog, log_event_client.cc) skips YEAR, so it shifts
# every later bit by one. Established on a private MariaDB 10.11 for every column type
# (tests/test_table_map_lists.py): YEAR is the only type where writer and reader differ.
NUMERIC_TYPES = frozenset(
    {ColumnType.TINY, ColumnType.SHORT, ColumnType.INT24, ColumnType.LONG, ColumnType.LONGLONG,
     ColumnType.NEWDECIMAL, ColumnType.FLOAT, ColumnType.DOUBLE}
)
MYSQL_NUMERIC_TYPES = NUMERIC_TYPES
MARIADB_NUMERIC_TYPES = frozenset(NUMERIC_TYPES | {ColumnType.YEAR})
_CHARACTER_BASE = {ColumnType.STRING, ColumnType.VAR_STRING, ColumnType.VARCHAR, ColumnType.BLOB}
MYSQL_CHARACTER_TYPES = frozenset(_CHARACTER_BASE | {ColumnType.VECTOR})  # MySQL 9 counts VECTOR
MARIADB_CHARACTER_TYPES = frozenset(_CHARACTER_BASE | {ColumnType.GEOMETRY})  # "base class is blob"
ENUM_SET_TYPES = frozenset({ColumnType.ENUM, ColumnType.SET})
_STRING_LIKE = (ColumnType.STRING, ColumnType.ENUM, ColumnType.SET)


def _read_metadata(column_types, buf, off, end):
    """``columns.read_metadata``, imported when first needed (the column layer
    may be absent in a partial checkout; the error then says so)."""
    try:
        from .columns import read_metadata
    except ImportError as e:  # pragma: no cover - depends on the checkout
        raise UnsupportedType(f"TABLE_MAP column metadata needs pipelines.binlog.columns ({e})") from None
    return read_metadata(column_types, buf, off, end)


def _real_type(t: int, meta) -> int:
    """STRING columns hide ENUM and SET: the real type is the first metadata byte."""
    if t in _STRING_LIKE and isinstance(meta, tuple) and meta:
        return int(meta[0])
    return t


def _tlv_ints(raw: bytes, what: str) -> list[int]:
    out, off = [], 0
    while off < len(raw):
        v, off = packed_int(raw, off, what)
        out.append(v)
    return out


def _tlv_strings(raw: bytes, what: str) -> list[str]:
    out, off = [], 0
    while off < len(raw):
        n, off = packed_int(raw, off, what)
        need(raw, off, n, what)
        out.append(_text(raw[off : off + n]))
        off += n
    return out


def _tlv_string_lists(raw: bytes, what: str) -> list[tuple[bytes, ...]]:
    """Lists of member names as bytes (decoded later with the column's charset)."""
    out, off = [], 0
    while off < len(raw):
        count, off = packed_int(raw, off, what)
        values = []
        for _ in range(count):
            n, off = packed_int(raw, off, what)
            need(raw, off, n, what)
            values.append(bytes(raw[off : off + n]))
            off += n
        out.append(tuple(values))
    return out


def _decode_members(per_column: tuple, charsets) -> tuple:
    """ENUM/SET member names in each column's own charset (UTF-8 when unknown)."""
    from .charsets import codec_for_collation

    out = []
    for i, members in enumerate(per_column):
        if members is None:
            out.append(None)
            continue
        cid = charsets[i] if charsets else None
        codec = (codec_for_collation(cid) if cid is not None else None) or "utf-8"
        out.append(tuple(decode_text(m, codec) for m in members))
    return tuple(out)


def _tlv_default_charset(raw: bytes, what: str) -> tuple[int, dict[int, int]]:
    """Default collation, then (index among the covered columns, collation) pairs."""
    ints = _tlv_ints(raw, what)
    if not ints or len(ints) % 2 != 1:
        raise CorruptEvent(f"{what}: {len(ints)} numbers, expected a default and pairs")
    return ints[0], dict(zip(ints[1::2], ints[2::2]))


def _spread(values: list, indexes: list[int], n: int, what: str) -> tuple:
    """Place ``values`` (one per covered column) on their columns; None elsewhere."""
    if len(values) != len(indexes):
        raise CorruptEvent(f"{what} lists {len(values)} entries for {len(indexes)} columns of that kind")
    out: list = [None] * n
    for i, v in zip(indexes, values):
        out[i] = v
    return tuple(out)


def _charsets_for(
    fields: dict[int, bytes], default_code: int, column_code: int, indexes: list[int], what: str
) -> list[int] | None:
    if column_code in fields:
        cs = _tlv_ints(fields[column_code], what)
        if len(cs) != len(indexes):
            raise CorruptEvent(f"{what} lists {len(cs)} collations for {len(indexes)} columns")
        return cs
    if default_code in fields:
        default, pairs = _tlv_default_charset(fields[default_code], what)
        if any(i >= len(indexes) for i in pairs):
            raise CorruptEvent(f"{what} names column {max(pairs)} of only {len(indexes)}")
        return [pairs.get(k, default) for k in range(len(indexes))]
    return None


def _optional_metadata(raw: bytes, real_types: tuple[int, ...], mariadb: bool) -> dict[str, Any]:
    """Decode the optional-metadata TLVs (type byte, packed length, value) and
    map the per-kind lists onto columns."""
    fields: dict[int, bytes] = {}
    unknown: list[tuple[int, bytes]] = []
    off = 0
    while off < len(raw):
        ftype = raw[off]
        length, off = packed_int(raw, off + 1, "optional metadata length")
        need(raw, off, length, "optional metadata field")
        value = raw[off : off + length]
        off += length
        if 1 <= ftype <= OPT_VECTOR_DIMENSIONALITY:
            if ftype in fields:
                raise CorruptEvent(f"optional metadata field {ftype} appears twice")
            fields[ftype] = value
        else:
            unknown.append((ftype, value))

    n = len(real_types)
    character = MARIADB_CHARACTER_TYPES if mariadb else MYSQL_CHARACTER_TYPES
    numeric = MARIADB_NUMERIC_TYPES if mariadb else MYSQL_NUMERIC_TYPES
    idx_numeric = [i for i, t in enumerate(real_types) if t in numeric]
    idx_char = [i for i, t in enumerate(real_types) if t in character]
    idx_enum_set = [i for i, t in enumerate(real_types) if t in ENUM_SET_TYPES]
    idx_enum = [i for i, t in enumerate(real_types) if t == ColumnType.ENUM]
    idx_set = [i for i, t in enumerate(real_types) if t == ColumnType.SET]
    idx_geo = [i for i, t in enumerate(real_types) if t == ColumnType.GEOMETRY]
    idx_vec = [i for i, t in enumerate(real_types) if t == ColumnType.VECTOR]

    out: dict[str, Any] = {"unknown_metadata": tuple(unknown)}
    if OPT_SIGNEDNESS in fields:
        bits = _bits_msb(fields[OPT_SIGNEDNESS])
        if len(bits) < len(idx_numeric):
            raise CorruptEvent(f"SIGNEDNESS has {len(bits)} bits for {len(idx_numeric)} numeric columns")
        out["signedness"] = _spread(list(bits[: len(idx_numeric)]), idx_numeric, n, "SIGNEDNESS")
    char_cs = _charsets_for(fields, OPT_DEFAULT_CHARSET, OPT_COLUMN_CHARSET, idx_char, "character column charsets")
    es_cs = _charsets_for(
        fields, OPT_ENUM_AND_SET_DEFAULT_CHARSET, OPT_ENUM_AND_SET_COLUMN_CHARSET, idx_enum_set, "ENUM/SET charsets"
    )
    if char_cs is not None or es_cs is not None:
        cs: list = [None] * n
        for idx, values in ((idx_char, char_cs), (idx_enum_set, es_cs)):
            for i, v in zip(idx, values or ()):
                cs[i] = v
        out["column_charsets"] = tuple(cs)
    if OPT_COLUMN_NAME in fields:
        names = _tlv_strings(fields[OPT_COLUMN_NAME], "COLUMN_NAME")
        if len(names) != n:
            raise CorruptEvent(f"COLUMN_NAME lists {len(names)} names for {n} columns")
        out["column_names"] = tuple(names)
    if OPT_SET_STR_VALUE in fields:
        out["set_values"] = _spread(_tlv_string_lists(fields[OPT_SET_STR_VALUE], "SET_STR_VALUE"), idx_set, n, "SET_STR_VALUE")
    if OPT_ENUM_STR_VALUE in fields:
        out["enum_values"] = _spread(
            _tlv_string_lists(fields[OPT_ENUM_STR_VALUE], "ENUM_STR_VALUE"), idx_enum, n, "ENUM_STR_VALUE"
        )
    for key in ("set_values", "enum_values"):
        if key in out:
            out[key] = _decode_members(out[key], out.get("column_charsets"))
    if OPT_GEOMETRY_TYPE in fields:
        out["geometry_types"] = _spread(_tlv_ints(fields[OPT_GEOMETRY_TYPE], "GEOMETRY_TYPE"), idx_geo, n, "GEOMETRY_TYPE")
    pk: list[tuple[int, int]] = []
    if OPT_SIMPLE_PRIMARY_KEY in fields:
        pk += [(i, 0) for i in _tlv_ints(fields[OPT_SIMPLE_PRIMARY_KEY], "SIMPLE_PRIMARY_KEY")]
    if OPT_PRIMARY_KEY_WITH_PREFIX in fields:
        ints = _tlv_ints(fields[OPT_PRIMARY_KEY_WITH_PREFIX], "PRIMARY_KEY_WITH_PREFIX")
        if len(ints) % 2:
            raise CorruptEvent("PRIMARY_KEY_WITH_PREFIX has an odd count of numbers")
        pk += list(zip(ints[::2], ints[1::2]))
    if OPT_SIMPLE_PRIMARY_KEY in fields or OPT_PRIMARY_KEY_WITH_PREFIX in fields:
        if any(i >= n for i, _ in pk):
            raise CorruptEvent(f"primary key names a column beyond the {n} of the table")
        out["primary_key"] = tuple(pk)
    if OPT_COLUMN_VISIBILITY in fields:
        bits = _bits_msb(fields[OPT_COLUMN_VISIBILITY])
        if len(bits) < n:
            raise CorruptEvent(f"COLUMN_VISIBILITY has {len(bits)} bits for {n} columns")
        out["visibility"] = bits[:n]
    if OPT_VECTOR_DIMENSIONALITY in fields:
        out["vector_dimensions"] = _spread(
            _tlv_ints(fields[OPT_VECTOR_DIMENSIONALITY], "VECTOR_DIMENSIONALITY"), idx_vec, n, "VECTOR_DIMENSIONALITY"
        )
    return out


def decode_table_map(data, ctx, header) -> TableMapEvent:
    declared = _declared_post_header(ctx, EventType.TABLE_MAP, TABLE_MAP_POST_HEADER.size)
    layout = TABLE_ID_4_POST_HEADER if declared == TABLE_ID_4_POST_HEADER.size else TABLE_MAP_POST_HEADER
    ph, off = _post_header(data, ctx, EventType.TABLE_MAP, layout)
    schema, off = lstr8(data, off, "TABLE_MAP schema name")
    need(data, off, 1, "TABLE_MAP schema terminator")
    table, off = lstr8(data, off + 1, "TABLE_MAP table name")
    need(data, off, 1, "TABLE_MAP table terminator")
    ncols, off = packed_int(data, off + 1, "TABLE_MAP column count")
    need(data, off, ncols, "TABLE_MAP column types")
    types = tuple(data[off : off + ncols])
    off += ncols
    if off >= len(data):
        raise UnsupportedType("TABLE_MAP without column metadata (MySQL 5.1 before 5.1.18)")
    meta_len, off = packed_int(data, off, "TABLE_MAP metadata length")
    need(data, off, meta_len, "TABLE_MAP column metadata")
    metas, meta_end = _read_metadata(types, data, off, off + meta_len)
    if meta_end != off + meta_len:
        raise CorruptEvent(f"TABLE_MAP column metadata is {meta_len} bytes, the column types use {meta_end - off}")
    metas = tuple(metas)
    off += meta_len
    nbytes = (ncols + 7) // 8
    need(data, off, nbytes, "TABLE_MAP null bitmap")
    nullable = _bits_lsb(data, off, ncols)
    off += nbytes
    real_types = tuple(_real_type(t, m) for t, m in zip(types, metas))
    raw_opt = bytes(data[off:])
    opt = _optional_metadata(raw_opt, real_types, ctx.format.is_mariadb) if raw_opt else {}
    return TableMapEvent(
        header, ph.table_id, ph.flags, _text(schema), _text(table), ncols, types, metas, nullable,
        raw_optional_metadata=raw_opt, real_types=real_types, **opt,
    )


# =============================================================================
# rows events
# =============================================================================

ROWS_POST_HEADER_V1 = Layout("table_id:u6 flags:H", "RowsPostHeaderV1")
ROWS_POST_HEADER_V2 = Layout("table_id:u6 flags:H extra_len:H", "RowsPostHeaderV2")
_V2_KINDS = frozenset(
    {EventType.WRITE_ROWS, EventType.UPDATE_ROWS, EventType.DELETE_ROWS, EventType.PARTIAL_UPDATE_ROWS,
     EventType.MARIA_WRITE_ROWS_COMPRESSED, EventType.MARIA_UPDATE_ROWS_COMPRESSED,
     EventType.MARIA_DELETE_ROWS_COMPRESSED}
)
# MariaDB compressed kinds -> the uncompressed kind they decode as
_UNCOMPRESSED_KIND = {
    EventType.MARIA_WRITE_ROWS_COMPRESSED_V1: EventType.WRITE_ROWS_V1,
    EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1: EventType.UPDATE_ROWS_V1,
    EventType.MARIA_DELETE_ROWS_COMPRESSED_V1: EventType.DELETE_ROWS_V1,
    EventType.MARIA_WRITE_ROWS_COMPRESSED: EventType.WRITE_ROWS,
    EventType.MARIA_UPDATE_ROWS_COMPRESSED: EventType.UPDATE_ROWS,
    EventType.MARIA_DELETE_ROWS_COMPRESSED: EventType.DELETE_ROWS,
}
_EXTRA_NDB, _EXTRA_PART = 0, 1
_PART_ID = struct.Struct("<H")
# The "dummy" rows event that only carries STMT_END_F (no table behind it).
DUMMY_TABLE_IDS = frozenset({0x00FFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFF})


def _extra_row_info(raw, op: str) -> dict[str, Any]:
    """v2 extra data: (type byte, value) chunks. NDB info = [length incl. itself,
    format, data]; partition info = partition id (+ source partition id for updates)."""
    out: dict[str, Any] = {}
    off = 0
    while off < len(raw):
        kind = raw[off]
        off += 1
        if kind == _EXTRA_NDB:
            need(raw, off, 2, "NDB extra row info")
            n = raw[off]
            if n < 2:
                raise CorruptEvent(f"NDB extra row info of length {n}")
            need(raw, off, n, "NDB extra row info")
            if "ndb" not in out:  # the server keeps the first and skips the others
                out["ndb"] = {"format": raw[off + 1], "data": bytes(raw[off + 2 : off + n])}
            off += n
        elif kind == _EXTRA_PART:
            need(raw, off, 2, "partition extra row info")
            out["partition_id"] = _PART_ID.unpack_from(raw, off)[0]
            off += 2
            if op == "update":
                need(raw, off, 2, "source partition extra row info")
                out["source_partition_id"] = _PART_ID.unpack_from(raw, off)[0]
                off += 2
        else:
            out["_unparsed"] = bytes(raw[off - 1 :])
            break
    return out


def _decode_rows_kind(data, ctx, header, code: int, *, compressed: bool = False) -> RowsEvent:
    op = ROWS_EVENT_OPS[code]
    kind = _UNCOMPRESSED_KIND.get(code, code)
    v2 = code in _V2_KINDS
    declared = _declared_post_header(ctx, code, ROWS_POST_HEADER_V2.size if v2 else ROWS_POST_HEADER_V1.size)
    extra: dict[str, Any] = {}
    if v2:
        ph, off = _post_header(data, ctx, code, ROWS_POST_HEADER_V2)
        if ph.extra_len < 2:
            raise CorruptEvent(f"rows event extra-data length {ph.extra_len} (counts its own 2 bytes)")
        need(data, off, ph.extra_len - 2, "rows event extra data")
        extra = _extra_row_info(data[off : off + ph.extra_len - 2], op)
        off += ph.extra_len - 2
    else:
        layout = TABLE_ID_4_POST_HEADER if declared == TABLE_ID_4_POST_HEADER.size else ROWS_POST_HEADER_V1
        ph, off = _post_header(data, ctx, code, layout)
    width, off = packed_int(data, off, "rows event column count")
    nbytes = (width + 7) // 8
    need(data, off, nbytes, "rows event column bitmap")
    present = _bits_lsb(data, off, width)
    off += nbytes
    present_after = present
    if op == "update":
        need(data, off, nbytes, "rows event after-image bitmap")
        present_after = _bits_lsb(data, off, width)
        off += nbytes
    cols = tuple(i for i, p in enumerate(present) if p)
    cols_after = tuple(i for i, p in enumerate(present_after) if p)
    before, after = {"insert": ((), cols), "delete": (cols, ()), "update": (cols, cols_after)}[op]

    body = _maria_uncompress(data[off:], f"{event_type_name(code)} rows") if compressed else data[off:]
    partial = code == EventType.PARTIAL_UPDATE_ROWS

    table_map = ctx.table_maps.get(ph.table_id)
    if table_map is None:
        if ph.table_id in DUMMY_TABLE_IDS and ph.flags & ROWS_FLAG_STMT_END:
            return RowsEvent(
                header, op, ph.table_id, ph.flags, extra, width, before, after, None, (), partial, compressed, bytes(body)
            )
        raise CorruptEvent(f"rows event for table_id {ph.table_id} has no preceding TABLE_MAP")
    if width != table_map.column_count:
        raise CorruptEvent(
            f"rows event for table_id {ph.table_id} has {width} columns, its TABLE_MAP "
            f"({table_map.schema}.{table_map.table}) {table_map.column_count}"
        )
    if not ctx.decode_rows:
        return RowsEvent(
            header, op, ph.table_id, ph.flags, extra, width, before, after, table_map, (), partial, compressed, bytes(body)
        )
    try:
        from .rows import decode_rows
    except ImportError as e:  # pragma: no cover - depends on the checkout
        raise UnsupportedType(f"row images need pipelines.binlog.rows ({e}); decode with decode_rows=False") from None
    rows = tuple(decode_rows(op, table_map, body, before, after, partial=partial, event_type=kind))
    return RowsEvent(header, op, ph.table_id, ph.flags, extra, width, before, after, table_map, rows, partial, compressed)


def _rows_decoder(code: int, compressed: bool = False) -> EventDecoder:
    def decode(data, ctx, header):
        return _decode_rows_kind(data, ctx, header, code, compressed=compressed)

    decode.__name__ = f"decode_{EventType(code).name.lower()}"
    return decode


# =============================================================================
# MySQL GTIDs
# =============================================================================

GTID_POST_HEADER = Layout("gtid_flags:B sid:16s gno:q", "GtidPostHeader")
GTID_LOGICAL_CLOCK = Layout("last_committed:q sequence_number:q", "GtidLogicalClock")
_LOGICAL_TIMESTAMP_TYPECODE = 2
_TS_ORIGINAL_FLAG = 1 << 55
_VERSION_ORIGINAL_FLAG = 1 << 31
_MIN_GNO, _GNO_END = 1, (1 << 63) - 1


def decode_gtid(data, ctx, header) -> GtidEvent:
    """GTID / ANONYMOUS_GTID: fixed fields, then optional ones present when bytes remain.

    The declared post-header (25 in 5.6, 42 since 5.7) covers flags, SID, GNO and the
    logical clock; the reader goes field by field, as the server does."""
    g = GTID_POST_HEADER.unpack(data, 0)
    if header.type_code == EventType.GTID and not _MIN_GNO <= g.gno < _GNO_END:
        raise CorruptEvent(f"GTID with GNO {g.gno}")
    if header.type_code == EventType.ANONYMOUS_GTID and g.gno != 0:
        raise CorruptEvent(f"ANONYMOUS_GTID with GNO {g.gno} (must be 0)")
    off = GTID_POST_HEADER.size
    vals: dict[str, Any] = {}
    end = len(data)
    if off < end and data[off] == _LOGICAL_TIMESTAMP_TYPECODE:
        lc = GTID_LOGICAL_CLOCK.unpack(data, off + 1)
        vals.update(last_committed=lc.last_committed, sequence_number=lc.sequence_number)
        off += 1 + GTID_LOGICAL_CLOCK.size
        if end - off >= 7:
            ts = int.from_bytes(data[off : off + 7], "little")
            off += 7
            if ts & _TS_ORIGINAL_FLAG:
                need(data, off, 7, "GTID original commit timestamp")
                vals["immediate_commit_timestamp"] = ts & ~_TS_ORIGINAL_FLAG
                vals["original_commit_timestamp"] = int.from_bytes(data[off : off + 7], "little")
                off += 7
            else:
                vals["immediate_commit_timestamp"] = vals["original_commit_timestamp"] = ts
            if off < end:
                vals["transaction_length"], off = packed_int(data, off, "GTID transaction length")
            if end - off >= 4:
                v = U32.unpack_from(data, off)[0]
                off += 4
                if v & _VERSION_ORIGINAL_FLAG:
                    need(data, off, 4, "GTID original server version")
                    vals["immediate_server_version"] = v & ~_VERSION_ORIGINAL_FLAG
                    vals["original_server_version"] = U32.unpack_from(data, off)[0]
                    off += 4
                else:
                    vals["immediate_server_version"] = vals["original_server_version"] = v
                if end - off >= 8:
                    vals["commit_group_ticket"] = U64.unpack_from(data, off)[0]
    return GtidEvent(header, g.gtid_flags, _uuid(g.sid), g.gno, **vals)


# Field ids of the serialized GTID_TAGGED_LOG_EVENT (Gtid_event::define_fields).
_TAGGED_FIELDS = (
    "gtid_flags", "sid", "gno", "tag", "last_committed", "sequence_number",
    "immediate_commit_timestamp", "original_commit_timestamp", "transaction_length",
    "immediate_server_version", "original_server_version", "commit_group_ticket",
)
_SERIALIZATION_FORMAT_VERSION = 1
_TAG_MAX_LENGTH = 32


def decode_gtid_tagged(data, ctx, header) -> GtidEvent:
    """GTID_TAGGED (42): MySQL serialization library message.

    ``<format version> <message size> <last non-ignorable field id> {<field id> <value>}``,
    all variable-length integers (signed ones for gno, last_committed,
    sequence_number); the UUID is 16 one-byte integers, the tag a length-prefixed
    string. ``message size`` counts everything from the format version on.
    """
    version, off = varlen_uint(data, 0, "GTID_TAGGED format version")
    if version != _SERIALIZATION_FORMAT_VERSION:
        raise UnsupportedType(f"GTID_TAGGED serialization format version {version}")
    size, off = varlen_uint(data, off, "GTID_TAGGED message size")
    last_non_ignorable, off = varlen_uint(data, off, "GTID_TAGGED last non-ignorable field")
    if size < off or size > len(data):
        raise CorruptEvent(f"GTID_TAGGED message of {size} bytes in a {len(data)}-byte event")
    if last_non_ignorable > len(_TAGGED_FIELDS):
        raise UnsupportedType(f"GTID_TAGGED has non-ignorable field {last_non_ignorable - 1} this decoder does not know")
    vals: dict[str, Any] = {}
    end = size
    while off < end:
        fid, off = varlen_uint(data[:end], off, "GTID_TAGGED field id")
        if fid >= len(_TAGGED_FIELDS):
            break  # an ignorable field of a newer server; the message size bounds it
        name = _TAGGED_FIELDS[fid]
        if name == "sid":
            raw = bytearray()
            for _ in range(16):
                b, off = varlen_uint(data[:end], off, "GTID_TAGGED uuid")
                if b > 255:
                    raise CorruptEvent(f"GTID_TAGGED uuid byte {b}")
                raw.append(b)
            vals[name] = _uuid(raw)
        elif name == "tag":
            n, off = varlen_uint(data[:end], off, "GTID_TAGGED tag length")
            if n > _TAG_MAX_LENGTH:
                raise CorruptEvent(f"GTID_TAGGED tag of {n} bytes (max {_TAG_MAX_LENGTH})")
            need(data[:end], off, n, "GTID_TAGGED tag")
            vals[name] = _text(bytes(data[off : off + n]))
            off += n
        elif name in ("gno", "last_committed", "sequence_number"):
            vals[name], off = varlen_int(data[:end], off, f"GTID_TAGGED {name}")
        else:
            vals[name], off = varlen_uint(data[:end], off, f"GTID_TAGGED {name}")
    for f in ("gtid_flags", "sid", "gno"):
        if f not in vals:
            raise CorruptEvent(f"GTID_TAGGED lacks field {f}")
    if not _MIN_GNO <= vals["gno"] < _GNO_END:
        raise CorruptEvent(f"GTID_TAGGED with GNO {vals['gno']}")
    vals["tag"] = vals.get("tag") or None
    vals.setdefault("original_commit_timestamp", vals.get("immediate_commit_timestamp"))
    vals.setdefault("original_server_version", vals.get("immediate_server_version"))
    return GtidEvent(header, **vals)


def gtid_set_text(sids) -> str:
    """PREVIOUS_GTIDS' ``(uuid, tag, intervals)`` in MySQL's text form (:class:`MysqlGtidSet`)."""
    return str(MysqlGtidSet.of(((u, tag), ivs) for u, tag, ivs in sids))


_GTID_SET_TAGGED = 1


def decode_previous_gtids(data, ctx, header) -> PreviousGtidsEvent:
    """Gtid_set::encode: 8-byte header (untagged: n_sids; tagged: format in the top
    byte, n_sids in bits 8-55), then per source: UUID, [tag], n_intervals:8, and
    n_intervals [start, end) pairs of 8-byte integers."""
    off = _declared_post_header(ctx, EventType.PREVIOUS_GTIDS, 0)
    need(data, off, 8, "PREVIOUS_GTIDS header")
    head = U64.unpack_from(data, off)[0]
    off += 8
    fmt = head >> 56
    if fmt == 0:
        n_sids = head & ((1 << 56) - 1)
    elif fmt == _GTID_SET_TAGGED:
        n_sids = (head >> 8) & ((1 << 48) - 1)
    else:
        raise UnsupportedType(f"PREVIOUS_GTIDS encoding format {fmt}")
    sids = []
    for _ in range(n_sids):
        need(data, off, 16, "PREVIOUS_GTIDS uuid")
        u = _uuid(data[off : off + 16])
        off += 16
        tag = None
        if fmt == _GTID_SET_TAGGED:
            n, off = varlen_uint(data, off, "PREVIOUS_GTIDS tag length")
            need(data, off, n, "PREVIOUS_GTIDS tag")
            tag = _text(bytes(data[off : off + n])) or None
            off += n
        need(data, off, 8, "PREVIOUS_GTIDS interval count")
        n_iv = U64.unpack_from(data, off)[0]
        off += 8
        need(data, off, 16 * n_iv, "PREVIOUS_GTIDS intervals")
        ivs = []
        for k in range(n_iv):
            a, b = struct.unpack_from("<qq", data, off + 16 * k)
            if not 0 < a < b:
                raise CorruptEvent(f"PREVIOUS_GTIDS interval [{a}, {b})")
            ivs.append((a, b - 1))
        off += 16 * n_iv
        sids.append((u, tag, tuple(ivs)))
    if off != len(data):
        raise CorruptEvent(f"PREVIOUS_GTIDS has {len(data) - off} bytes after its GTID set")
    return PreviousGtidsEvent(header, tuple(sids), gtid_set_text(sids))


TRANSACTION_CONTEXT_POST_HEADER = Layout(
    "server_uuid_len:B thread_id:I gtid_specified:B snapshot_len:I write_set_len:I read_set_len:I",
    "TransactionContextPostHeader",
)
VIEW_CHANGE_POST_HEADER = Layout("view_id:40s seq_number:Q cert_info_len:I", "ViewChangePostHeader")


def _data_set(data, off: int, count: int, what: str) -> tuple[tuple[str, ...], int]:
    items = []
    for _ in range(count):
        need(data, off, 2, what)
        n = U16.unpack_from(data, off)[0]
        need(data, off + 2, n, what)
        items.append(_text(bytes(data[off + 2 : off + 2 + n])))
        off += 2 + n
    return tuple(items), off


def decode_transaction_context(data, ctx, header) -> TransactionContextEvent:
    ph, off = _post_header(data, ctx, EventType.TRANSACTION_CONTEXT, TRANSACTION_CONTEXT_POST_HEADER)
    need(data, off, ph.server_uuid_len + ph.snapshot_len, "TRANSACTION_CONTEXT uuid and snapshot")
    server_uuid = _text(bytes(data[off : off + ph.server_uuid_len]))
    off += ph.server_uuid_len
    snapshot = bytes(data[off : off + ph.snapshot_len])
    off += ph.snapshot_len
    write_set, off = _data_set(data, off, ph.write_set_len, "TRANSACTION_CONTEXT write set")
    read_set, off = _data_set(data, off, ph.read_set_len, "TRANSACTION_CONTEXT read set")
    return TransactionContextEvent(header, server_uuid, ph.thread_id, bool(ph.gtid_specified), snapshot, write_set, read_set)


def decode_view_change(data, ctx, header) -> ViewChangeEvent:
    ph, off = _post_header(data, ctx, EventType.VIEW_CHANGE, VIEW_CHANGE_POST_HEADER)
    view_id = _text(bytes(ph.view_id).split(b"\0", 1)[0])
    if not view_id:
        raise CorruptEvent("VIEW_CHANGE with an empty view id")
    cert: dict[str, str] = {}
    for _ in range(ph.cert_info_len):
        need(data, off, 2, "VIEW_CHANGE certification key")
        kn = U16.unpack_from(data, off)[0]
        need(data, off + 2, kn + 4, "VIEW_CHANGE certification key")
        key = _text(bytes(data[off + 2 : off + 2 + kn]))
        off += 2 + kn
        vn = U32.unpack_from(data, off)[0]
        need(data, off + 4, vn, "VIEW_CHANGE certification value")
        cert[key] = _text(bytes(data[off + 4 : off + 4 + vn]))
        off += 4 + vn
    return ViewChangeEvent(header, view_id, ph.seq_number, cert)


# =============================================================================
# TRANSACTION_PAYLOAD
# =============================================================================

_PAYLOAD_END, _PAYLOAD_SIZE, _PAYLOAD_COMPRESSION, _PAYLOAD_UNCOMPRESSED_SIZE = 0, 1, 2, 3


_ZSTD_CHUNK = 1 << 20


def _zstd_decompress(payload, size: int) -> bytes:
    """Stream-decompress into at most ``size`` bytes (+1 to notice a lie)."""
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(bytes(payload), read_across_frames=True)
    chunks, got = [], 0
    try:
        while got <= size:  # bounded chunks: a lying size must not allocate it up front
            chunk = reader.read(min(size + 1 - got, _ZSTD_CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    except zstandard.ZstdError as e:
        raise CorruptEvent(f"TRANSACTION_PAYLOAD zstd stream is damaged ({e})") from None
    out = b"".join(chunks)
    if len(out) != size:
        raise CorruptEvent(f"TRANSACTION_PAYLOAD declares {size} uncompressed bytes, zstd gives {len(out)}{'+' if got > size else ''}")
    return out


def _payload_events(buf: bytes, ctx: DecodeContext, header: EventHeader) -> tuple:
    """Frame the inner events (common header + body, no checksums) and decode them."""
    view = memoryview(buf)
    events = []
    off = 0
    while off < len(buf):
        if len(buf) - off < COMMON_HEADER_LEN:
            raise TruncatedEvent(COMMON_HEADER_LEN, len(buf) - off, f"event header inside the payload at {off}")
        h = EVENT_HEADER.unpack(buf, off)
        if h.event_length < COMMON_HEADER_LEN:
            raise CorruptEvent(f"event inside the payload at {off} has length {h.event_length}")
        if off + h.event_length > len(buf):
            raise TruncatedEvent(h.event_length, len(buf) - off, f"event inside the payload at {off}")
        if h.type_code == EventType.TRANSACTION_PAYLOAD:
            raise CorruptEvent(f"TRANSACTION_PAYLOAD nested inside a TRANSACTION_PAYLOAD at {off}")
        inner = EventHeader(
            header.file, header.pos, header.end_pos, h.timestamp, h.type_code, h.server_id,
            h.next_pos, h.flags, True, off,
        )
        events.append(decode_event(RawEvent(inner, view[off + COMMON_HEADER_LEN : off + h.event_length]), ctx))
        off += h.event_length
    return tuple(events)


def decode_transaction_payload(data, ctx, header) -> TransactionPayloadEvent:
    """TLV header (type, length, value as packed integers; END = type 0) and the payload.

    The post-header length MySQL 8.0 declares for this type is not one (its table
    holds the type code, 40); the server itself reads the TLVs right after the
    common header, and so does this decoder."""
    off = 0
    fields: dict[int, int] = {}
    while True:
        ftype, off = packed_int(data, off, "TRANSACTION_PAYLOAD field type")
        if ftype == _PAYLOAD_END:
            break
        length, off = packed_int(data, off, "TRANSACTION_PAYLOAD field length")
        need(data, off, length, "TRANSACTION_PAYLOAD field")
        if ftype in (_PAYLOAD_SIZE, _PAYLOAD_COMPRESSION, _PAYLOAD_UNCOMPRESSED_SIZE):
            fields[ftype], _ = packed_int(data[off : off + length], 0, "TRANSACTION_PAYLOAD field value")
        off += length  # unknown fields: skipped by their length, as the server does
    if _PAYLOAD_SIZE not in fields or _PAYLOAD_COMPRESSION not in fields:
        raise CorruptEvent("TRANSACTION_PAYLOAD lacks its payload size or compression type")
    size, ctype = fields[_PAYLOAD_SIZE], fields[_PAYLOAD_COMPRESSION]
    usize = fields.get(_PAYLOAD_UNCOMPRESSED_SIZE)
    if size != len(data) - off:
        raise CorruptEvent(f"TRANSACTION_PAYLOAD declares {size} payload bytes, the event holds {len(data) - off}")
    payload = data[off:]
    if ctype == TRANSACTION_PAYLOAD_NONE:
        buf = bytes(payload)
    elif ctype == TRANSACTION_PAYLOAD_ZSTD:
        if usize is None:
            raise CorruptEvent("zstd TRANSACTION_PAYLOAD without its uncompressed size")
        buf = _zstd_decompress(payload, usize)
    else:
        raise UnsupportedType(f"TRANSACTION_PAYLOAD compression type {ctype}")
    return TransactionPayloadEvent(header, size, ctype, usize, _payload_events(buf, ctx, header))


# =============================================================================
# MariaDB events
# =============================================================================

BINLOG_CHECKPOINT_POST_HEADER = Layout("file_len:I", "BinlogCheckpointPostHeader")
MARIA_GTID_POST_HEADER = Layout("seq_no:Q domain_id:I flags:B", "MariaGtidPostHeader")  # + 6 bytes
MARIA_GTID_POST_HEADER_LEN = 19
GTID_LIST_POST_HEADER = Layout("count:I", "GtidListPostHeader")
GTID_LIST_ENTRY = struct.Struct("<IIQ")
MARIA_XID_HEAD = Layout("format_id:I gtrid_length:B bqual_length:B", "MariaXidHead")
START_ENCRYPTION_BODY = Layout("scheme:B key_version:I nonce:12s", "StartEncryptionBody")


def decode_annotate_rows(data, ctx, header) -> AnnotateRowsEvent:
    off = _declared_post_header(ctx, EventType.MARIA_ANNOTATE_ROWS, 0)
    q = bytes(data[off:])
    return AnnotateRowsEvent(header, _text(q), q)


def decode_binlog_checkpoint(data, ctx, header) -> BinlogCheckpointEvent:
    ph, off = _post_header(data, ctx, EventType.MARIA_BINLOG_CHECKPOINT, BINLOG_CHECKPOINT_POST_HEADER)
    need(data, off, ph.file_len, "BINLOG_CHECKPOINT file name")
    return BinlogCheckpointEvent(header, _text(bytes(data[off : off + ph.file_len])))


def decode_maria_gtid(data, ctx, header) -> MariaGtidEvent:
    """seq_no, domain_id, flags2, then (reading on from offset 13, inside the
    19-byte post-header): commit_id (FL_GROUP_COMMIT_ID), XA xid
    (FL_PREPARED_XA|FL_COMPLETED_XA), and from 10.8 flags_extra with its fields."""
    declared = _declared_post_header(ctx, EventType.MARIA_GTID, MARIA_GTID_POST_HEADER_LEN)
    if declared < MARIA_GTID_POST_HEADER_LEN:
        raise CorruptEvent(f"MARIA_GTID post-header is declared as {declared} bytes, need {MARIA_GTID_POST_HEADER_LEN}")
    need(data, 0, declared, "MARIA_GTID post-header")
    g = MARIA_GTID_POST_HEADER.unpack(data, 0)
    off = MARIA_GTID_POST_HEADER.size
    vals: dict[str, Any] = {}
    if g.flags & MARIA_FL_GROUP_COMMIT_ID:
        need(data, off, 8, "MARIA_GTID commit id")
        vals["commit_id"] = U64.unpack_from(data, off)[0]
        off += 8
    if g.flags & (MARIA_FL_PREPARED_XA | MARIA_FL_COMPLETED_XA):
        x = MARIA_XID_HEAD.unpack(data, off)
        off += MARIA_XID_HEAD.size
        if x.gtrid_length > _XA_MAX_PART or x.bqual_length > _XA_MAX_PART:
            raise CorruptEvent(f"MARIA_GTID xid with gtrid length {x.gtrid_length}, bqual length {x.bqual_length}")
        need(data, off, x.gtrid_length + x.bqual_length, "MARIA_GTID xid data")
        vals["xa_format_id"] = x.format_id
        vals["xa_gtrid"] = bytes(data[off : off + x.gtrid_length])
        vals["xa_bqual"] = bytes(data[off + x.gtrid_length : off + x.gtrid_length + x.bqual_length])
        off += x.gtrid_length + x.bqual_length
    if off < len(data):  # flags_extra (zero in the post-header padding of older servers)
        extra = data[off]
        off += 1
        vals["flags_extra"] = extra
        if extra & MARIA_FL_EXTRA_MULTI_ENGINE:
            need(data, off, 1, "MARIA_GTID extra engines")
            vals["extra_engines"] = data[off]
            off += 1
        if extra & (MARIA_FL_COMMIT_ALTER | MARIA_FL_ROLLBACK_ALTER):
            need(data, off, 8, "MARIA_GTID start alter seq_no")
            vals["sa_seq_no"] = U64.unpack_from(data, off)[0]
    return MariaGtidEvent(header, g.seq_no, g.domain_id, g.flags, **vals)


def decode_gtid_list(data, ctx, header) -> GtidListEvent:
    ph, off = _post_header(data, ctx, EventType.MARIA_GTID_LIST, GTID_LIST_POST_HEADER)
    count = ph.count & ((1 << 28) - 1)
    need(data, off, count * GTID_LIST_ENTRY.size, "GTID_LIST entries")
    gtids = tuple(GTID_LIST_ENTRY.unpack_from(data, off + k * GTID_LIST_ENTRY.size) for k in range(count))
    return GtidListEvent(header, gtids, ph.count >> 28)


def decode_start_encryption(data, ctx, header) -> StartEncryptionEvent:
    off = _declared_post_header(ctx, EventType.MARIA_START_ENCRYPTION, 0)
    b = START_ENCRYPTION_BODY.unpack(data, off)
    if len(data) - off != START_ENCRYPTION_BODY.size:
        raise CorruptEvent(f"START_ENCRYPTION body of {len(data) - off} bytes (need {START_ENCRYPTION_BODY.size})")
    return StartEncryptionEvent(header, b.scheme, b.key_version, bytes(b.nonce))


# =============================================================================
# dispatch
# =============================================================================

EVENT_DECODERS: dict[int, EventDecoder] = {
    EventType.QUERY: decode_query,
    EventType.STOP: decode_stop,
    EventType.ROTATE: decode_rotate,
    EventType.INTVAR: decode_intvar,
    EventType.LOAD: decode_load,
    EventType.CREATE_FILE: decode_create_file,
    EventType.APPEND_BLOCK: decode_append_block,
    EventType.EXEC_LOAD: decode_exec_load,
    EventType.DELETE_FILE: decode_delete_file,
    EventType.NEW_LOAD: decode_new_load,
    EventType.RAND: decode_rand,
    EventType.USER_VAR: decode_user_var,
    EventType.FORMAT_DESCRIPTION: decode_format_description,
    EventType.XID: decode_xid,
    EventType.BEGIN_LOAD_QUERY: decode_begin_load_query,
    EventType.EXECUTE_LOAD_QUERY: decode_execute_load_query,
    EventType.TABLE_MAP: decode_table_map,
    EventType.INCIDENT: decode_incident,
    EventType.HEARTBEAT: decode_heartbeat,
    EventType.IGNORABLE: decode_ignorable,
    EventType.ROWS_QUERY: decode_rows_query,
    EventType.GTID: decode_gtid,
    EventType.ANONYMOUS_GTID: decode_gtid,
    EventType.PREVIOUS_GTIDS: decode_previous_gtids,
    EventType.TRANSACTION_CONTEXT: decode_transaction_context,
    EventType.VIEW_CHANGE: decode_view_change,
    EventType.XA_PREPARE: decode_xa_prepare,
    EventType.TRANSACTION_PAYLOAD: decode_transaction_payload,
    EventType.HEARTBEAT_V2: decode_heartbeat_v2,
    EventType.GTID_TAGGED: decode_gtid_tagged,
    EventType.MARIA_ANNOTATE_ROWS: decode_annotate_rows,
    EventType.MARIA_BINLOG_CHECKPOINT: decode_binlog_checkpoint,
    EventType.MARIA_GTID: decode_maria_gtid,
    EventType.MARIA_GTID_LIST: decode_gtid_list,
    EventType.MARIA_START_ENCRYPTION: decode_start_encryption,
    EventType.MARIA_QUERY_COMPRESSED: decode_query_compressed,
}
EVENT_DECODERS.update({code: _rows_decoder(code) for code in ROWS_EVENT_OPS if code not in _UNCOMPRESSED_KIND})
EVENT_DECODERS.update({code: _rows_decoder(code, compressed=True) for code in _UNCOMPRESSED_KIND})


def decode_event(raw: RawEvent, ctx: DecodeContext) -> Event:
    """Decode one framed event.

    An unknown type becomes :class:`UnknownEvent` (``ignorable`` from the
    header's LOG_EVENT_IGNORABLE_F). A decoded :class:`TableMapEvent` is recorded
    in ``ctx.table_maps``. Every error is a :class:`BinlogError` carrying the
    file and the event's offset; anything else a decoder raises is reported as
    :class:`CorruptEvent`.
    """
    header, data = raw
    decoder = EVENT_DECODERS.get(header.type_code)
    if decoder is None:
        return UnknownEvent(header, bytes(data), bool(header.flags & EventFlag.IGNORABLE))
    try:
        ev = decoder(data, ctx, header)
    except BinlogError as e:
        raise e.at(header.file, header.pos)
    except Exception as e:
        where = f" (inside the payload at {header.inner_pos})" if header.in_payload else ""
        raise CorruptEvent(
            f"{event_type_name(header.type_code)} event{where} could not be decoded: {type(e).__name__}: {e}",
            file=header.file,
            offset=header.pos,
        ) from e
    if type(ev) is TableMapEvent:
        if ctx.table_map_hook is not None:
            try:
                ev = ctx.table_map_hook(ev)
            except BinlogError as e:
                raise e.at(header.file, header.pos)
        ctx.table_maps[ev.table_id] = ev
    elif type(ev) is RowsEvent and ev.stmt_end:
        # Table maps live until the end of their statement (as on a replica): a later
        # rows event without its own TABLE_MAP must not borrow a stale one.
        ctx.table_maps.clear()
    return ev
