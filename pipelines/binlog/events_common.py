"""What every event family shares: the decode context, the unknown event, post-header checks against
the FORMAT_DESCRIPTION, text and UUID helpers and MariaDB's compressed records (see :mod:`pipelines.binlog.events`)."""
from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .charsets import codec_for_collation
from .constants import event_type_name
from .errors import CorruptEvent, UnsupportedType, need
from .framing import EventHeader, FormatDescription
from .layout import Layout
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
    # Rows events' images as canonical-text cells where the compiled accelerator takes them
    # (RowsEvent.cells; rows.decode_cells), values otherwise.
    row_cells: bool = False


# =============================================================================
# small pure readers (each returns the value and the next offset)
# =============================================================================

# the wire-format readers are in wire.py


def name_text(raw: bytes) -> str:
    """Identifiers and file names: UTF-8; an :class:`.values.InvalidText` (the exact bytes kept)
    where the bytes are not UTF-8."""
    return decode_text(raw, "utf-8")


def statement_text(raw: bytes, status_vars: Mapping[str, Any]) -> str:
    """A statement in the client character set its ``Q_CHARSET`` names (UTF-8 without one, or
    for ``binary``); an :class:`.values.InvalidText` where the bytes are not valid there (the
    server stores whatever bytes the client sent: cp1251 text on a utf8 connection is common)."""
    charset = status_vars.get("Q_CHARSET")
    try:
        codec = codec_for_collation(charset["client"]) if charset is not None else None
    except UnsupportedType:  # a collation id newer than our table: the text, as UTF-8
        codec = None
    return decode_text(raw, codec or "utf-8")


def uuid_text(raw) -> str:
    return str(uuid.UUID(bytes=bytes(raw)))


def bits_lsb(buf, off: int, count: int) -> tuple[bool, ...]:
    """``count`` bits, bit i in byte i//8 at position i%8 (rows-event bitmaps, null bits)."""
    return tuple(bool(buf[off + (i >> 3)] >> (i & 7) & 1) for i in range(count))


def bits_msb(raw: bytes) -> tuple[bool, ...]:
    """Every bit of ``raw``, most significant first (optional metadata bit fields)."""
    return tuple(bool(b >> (7 - k) & 1) for b in raw for k in range(8))


def declared_post_header(ctx: DecodeContext, code: int, default: int) -> int:
    """Post-header length the format description declares for ``code``
    (``default`` when its table is too short to say)."""
    n = ctx.format.post_header_len(code)
    return default if n is None else n


def post_header(data, ctx: DecodeContext, code: int, layout: Layout):
    """Unpack ``layout`` at the start of ``data`` and return (record, body offset).

    A longer declared post-header has its unknown tail skipped; a shorter one
    cannot hold the fields and is a :class:`CorruptEvent`.
    """
    declared = declared_post_header(ctx, code, layout.size)
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


def maria_uncompress(buf, what: str) -> bytes:
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


def xid_text(gtrid: bytes, bqual: bytes, format_id: int) -> str:
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


Event = Any  # any of the dataclasses in this module
EventDecoder = Callable[[memoryview, DecodeContext, EventHeader], Event]
