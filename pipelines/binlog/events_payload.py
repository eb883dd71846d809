"""TRANSACTION_PAYLOAD: a compressed group of events, each decoded by
:func:`pipelines.binlog.events.decode_event`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .constants import COMMON_HEADER_LEN, EventType
from .errors import CorruptEvent, TruncatedEvent, UnsupportedType, need
from .framing import EVENT_HEADER, EventHeader, RawEvent
from .wire import packed_int
from .events_common import DecodeContext


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


def _payload_events(buf: bytes, ctx: DecodeContext, header: EventHeader, decode_event: Callable) -> tuple:
    """Frame the inner events (common header + body, no checksums) and decode each with
    ``decode_event`` (the dispatch's, which passes itself in)."""
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


def decode_transaction_payload(data, ctx, header, decode_event: Callable) -> TransactionPayloadEvent:
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
    return TransactionPayloadEvent(header, size, ctype, usize, _payload_events(buf, ctx, header, decode_event))
