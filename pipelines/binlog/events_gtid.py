"""MySQL's GTID events: GTID, ANONYMOUS_GTID, GTID_TAGGED, PREVIOUS_GTIDS, TRANSACTION_CONTEXT and
VIEW_CHANGE (GTID sets as text: :mod:`pipelines.binlog.gtid`; see :mod:`pipelines.binlog.events`)."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .constants import EventType
from .errors import CorruptEvent, UnsupportedType, need
from .framing import EventHeader
from .gtid import MysqlGtidSet, mysql_gtid
from .layout import Layout
from .wire import U16, U32, U64, packed_int, varlen_int, varlen_uint
from .events_common import declared_post_header, name_text, post_header, uuid_text


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
    return GtidEvent(header, g.gtid_flags, uuid_text(g.sid), g.gno, **vals)


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
            vals[name] = uuid_text(raw)
        elif name == "tag":
            n, off = varlen_uint(data[:end], off, "GTID_TAGGED tag length")
            if n > _TAG_MAX_LENGTH:
                raise CorruptEvent(f"GTID_TAGGED tag of {n} bytes (max {_TAG_MAX_LENGTH})")
            need(data[:end], off, n, "GTID_TAGGED tag")
            vals[name] = name_text(bytes(data[off : off + n]))
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
    off = declared_post_header(ctx, EventType.PREVIOUS_GTIDS, 0)
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
        u = uuid_text(data[off : off + 16])
        off += 16
        tag = None
        if fmt == _GTID_SET_TAGGED:
            n, off = varlen_uint(data, off, "PREVIOUS_GTIDS tag length")
            need(data, off, n, "PREVIOUS_GTIDS tag")
            tag = name_text(bytes(data[off : off + n])) or None
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
        items.append(name_text(bytes(data[off + 2 : off + 2 + n])))
        off += 2 + n
    return tuple(items), off


def decode_transaction_context(data, ctx, header) -> TransactionContextEvent:
    ph, off = post_header(data, ctx, EventType.TRANSACTION_CONTEXT, TRANSACTION_CONTEXT_POST_HEADER)
    need(data, off, ph.server_uuid_len + ph.snapshot_len, "TRANSACTION_CONTEXT uuid and snapshot")
    server_uuid = name_text(bytes(data[off : off + ph.server_uuid_len]))
    off += ph.server_uuid_len
    snapshot = bytes(data[off : off + ph.snapshot_len])
    off += ph.snapshot_len
    write_set, off = _data_set(data, off, ph.write_set_len, "TRANSACTION_CONTEXT write set")
    read_set, off = _data_set(data, off, ph.read_set_len, "TRANSACTION_CONTEXT read set")
    return TransactionContextEvent(header, server_uuid, ph.thread_id, bool(ph.gtid_specified), snapshot, write_set, read_set)


def decode_view_change(data, ctx, header) -> ViewChangeEvent:
    ph, off = post_header(data, ctx, EventType.VIEW_CHANGE, VIEW_CHANGE_POST_HEADER)
    view_id = name_text(bytes(ph.view_id).split(b"\0", 1)[0])
    if not view_id:
        raise CorruptEvent("VIEW_CHANGE with an empty view id")
    cert: dict[str, str] = {}
    for _ in range(ph.cert_info_len):
        need(data, off, 2, "VIEW_CHANGE certification key")
        kn = U16.unpack_from(data, off)[0]
        need(data, off + 2, kn + 4, "VIEW_CHANGE certification key")
        key = name_text(bytes(data[off + 2 : off + 2 + kn]))
        off += 2 + kn
        vn = U32.unpack_from(data, off)[0]
        need(data, off + 4, vn, "VIEW_CHANGE certification value")
        cert[key] = name_text(bytes(data[off + 4 : off + 4 + vn]))
        off += 4 + vn
    return ViewChangeEvent(header, view_id, ph.seq_number, cert)
