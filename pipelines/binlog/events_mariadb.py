"""MariaDB's own events: ANNOTATE_ROWS, BINLOG_CHECKPOINT, GTID, GTID_LIST and START_ENCRYPTION
(see :mod:`pipelines.binlog.events`)."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .constants import EventType
from .errors import CorruptEvent, need
from .framing import EventHeader
from .gtid import MariadbGtidState
from .layout import Layout
from .wire import U64
from .events_common import declared_post_header, name_text, post_header, xid_text
from .events_control import XA_MAX_PART


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
        return xid_text(self.xa_gtrid, self.xa_bqual, self.xa_format_id)


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
    off = declared_post_header(ctx, EventType.MARIA_ANNOTATE_ROWS, 0)
    q = bytes(data[off:])
    return AnnotateRowsEvent(header, name_text(q), q)


def decode_binlog_checkpoint(data, ctx, header) -> BinlogCheckpointEvent:
    ph, off = post_header(data, ctx, EventType.MARIA_BINLOG_CHECKPOINT, BINLOG_CHECKPOINT_POST_HEADER)
    need(data, off, ph.file_len, "BINLOG_CHECKPOINT file name")
    return BinlogCheckpointEvent(header, name_text(bytes(data[off : off + ph.file_len])))


def decode_maria_gtid(data, ctx, header) -> MariaGtidEvent:
    """seq_no, domain_id, flags2, then (reading on from offset 13, inside the
    19-byte post-header): commit_id (FL_GROUP_COMMIT_ID), XA xid
    (FL_PREPARED_XA|FL_COMPLETED_XA), and from 10.8 flags_extra with its fields."""
    declared = declared_post_header(ctx, EventType.MARIA_GTID, MARIA_GTID_POST_HEADER_LEN)
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
        if x.gtrid_length > XA_MAX_PART or x.bqual_length > XA_MAX_PART:
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
    ph, off = post_header(data, ctx, EventType.MARIA_GTID_LIST, GTID_LIST_POST_HEADER)
    count = ph.count & ((1 << 28) - 1)
    need(data, off, count * GTID_LIST_ENTRY.size, "GTID_LIST entries")
    gtids = tuple(GTID_LIST_ENTRY.unpack_from(data, off + k * GTID_LIST_ENTRY.size) for k in range(count))
    return GtidListEvent(header, gtids, ph.count >> 28)


def decode_start_encryption(data, ctx, header) -> StartEncryptionEvent:
    off = declared_post_header(ctx, EventType.MARIA_START_ENCRYPTION, 0)
    b = START_ENCRYPTION_BODY.unpack(data, off)
    if len(data) - off != START_ENCRYPTION_BODY.size:
        raise CorruptEvent(f"START_ENCRYPTION body of {len(data) - off} bytes (need {START_ENCRYPTION_BODY.size})")
    return StartEncryptionEvent(header, b.scheme, b.key_version, bytes(b.nonce))
