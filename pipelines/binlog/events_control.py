"""Control events: FORMAT_DESCRIPTION, ROTATE, STOP, XID, XA_PREPARE, INCIDENT, HEARTBEAT (v1, v2),
IGNORABLE and ROWS_QUERY (see :mod:`pipelines.binlog.events`)."""
from __future__ import annotations

from dataclasses import dataclass

from .constants import EventType
from .errors import CorruptEvent, need
from .framing import EventHeader, FormatDescription, parse_format_description
from .layout import Layout
from .wire import lstr8, packed_int
from .events_common import declared_post_header, name_text, post_header, xid_text


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
        return xid_text(self.gtrid, self.bqual, self.format_id)

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


# =============================================================================
# control events
# =============================================================================

ROTATE_POST_HEADER = Layout("position:Q", "RotatePostHeader")
XID_BODY = Layout("xid:Q", "XidBody")
XA_PREPARE_BODY = Layout("one_phase:B format_id:I gtrid_length:I bqual_length:I", "XaPrepareBody")
INCIDENT_POST_HEADER = Layout("incident:H", "IncidentPostHeader")
INTVAR_BODY = Layout("type:B value:Q", "IntvarBody")
RAND_BODY = Layout("seed1:Q seed2:Q", "RandBody")
XA_MAX_PART = 64  # MAXGTRIDSIZE / MAXBQUALSIZE


def decode_format_description(data, ctx, header) -> FormatDescriptionEvent:
    return FormatDescriptionEvent(header, parse_format_description(data))


def decode_rotate(data, ctx, header) -> RotateEvent:
    declared = declared_post_header(ctx, EventType.ROTATE, ROTATE_POST_HEADER.size)
    if declared == 0:  # binlog v1: no post-header, position implied
        position, off = 4, 0
    else:
        ph, off = post_header(data, ctx, EventType.ROTATE, ROTATE_POST_HEADER)
        position = ph.position
    name = bytes(data[off:])
    if not name:
        raise CorruptEvent("ROTATE event has no file name")
    return RotateEvent(header, position, name_text(name))


def decode_stop(data, ctx, header) -> StopEvent:
    return StopEvent(header)


def decode_xid(data, ctx, header) -> XidEvent:
    off = declared_post_header(ctx, EventType.XID, 0)
    return XidEvent(header, XID_BODY.unpack(data, off).xid)


def decode_xa_prepare(data, ctx, header) -> XaPrepareEvent:
    off = declared_post_header(ctx, EventType.XA_PREPARE, 0)
    b = XA_PREPARE_BODY.unpack(data, off)
    if b.gtrid_length > XA_MAX_PART or b.bqual_length > XA_MAX_PART:
        raise CorruptEvent(f"XA_PREPARE with gtrid length {b.gtrid_length} and bqual length {b.bqual_length} (max 64 each)")
    off += XA_PREPARE_BODY.size
    n = b.gtrid_length + b.bqual_length
    need(data, off, n, "XA_PREPARE xid data")
    return XaPrepareEvent(header, bool(b.one_phase), b.format_id, b.gtrid_length, b.bqual_length, bytes(data[off : off + n]))


def decode_incident(data, ctx, header) -> IncidentEvent:
    ph, off = post_header(data, ctx, EventType.INCIDENT, INCIDENT_POST_HEADER)
    msg = b""
    if off < len(data):
        msg, off = lstr8(data, off, "INCIDENT message")
    return IncidentEvent(header, ph.incident, name_text(msg))


def decode_heartbeat(data, ctx, header) -> HeartbeatEvent:
    off = declared_post_header(ctx, EventType.HEARTBEAT, 0)
    return HeartbeatEvent(header, name_text(bytes(data[off:])), header.next_pos, 1)


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
    return HeartbeatEvent(header, name_text(name), position, 2)


def decode_ignorable(data, ctx, header) -> IgnorableEvent:
    return IgnorableEvent(header, bytes(data))


def decode_rows_query(data, ctx, header) -> RowsQueryEvent:
    # A 1-byte length precedes the text; the server ignores it (it overflows for
    # long statements) and reads to the end of the event.
    off = declared_post_header(ctx, EventType.ROWS_QUERY, 0) + 1
    need(data, 0, off, "ROWS_QUERY length byte")
    q = bytes(data[off:])
    return RowsQueryEvent(header, name_text(q), q)
