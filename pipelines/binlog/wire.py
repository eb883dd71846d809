"""MySQL's wire-format primitives, each a pure reader returning ``(value, next offset)``: the
length-encoded integer (``net_field_length``), the serialization library's variable-length integers
and the short string forms. The event decoders, the row decoder (PARTIAL_UPDATE_ROWS' value options)
and the partial-JSON reader all read them here.

>>> packed_int(b"\\xfc\\x10\\x27", 0)
(10000, 3)
>>> varlen_uint(bytes([0b00000110]), 0), varlen_int(bytes([0b00000110]), 0)
((3, 1), (-2, 1))
"""
from __future__ import annotations

import struct

from .errors import CorruptEvent, TruncatedEvent, need

U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")

_PACKED_WIDTHS = {252: 2, 253: 3, 254: 8}


def packed_int(buf, off: int, what: str = "packed integer", end: int | None = None) -> tuple[int, int]:
    """MySQL length-encoded integer (``net_field_length``): one byte below 251, else 0xfc, 0xfd or
    0xfe followed by 2, 3 or 8 little-endian bytes. ``end`` bounds the read (default: the buffer).

    >>> packed_int(b"\\x05", 0), packed_int(b"\\xfe" + (2**40).to_bytes(8, "little"), 0)
    ((5, 1), (1099511627776, 9))
    """
    end = len(buf) if end is None else end
    if off >= end:
        raise TruncatedEvent(1, 0, what)
    first = buf[off]
    if first < 251:
        return first, off + 1
    width = _PACKED_WIDTHS.get(first)
    if width is None:
        raise CorruptEvent(f"invalid {what}: first byte 0x{first:02x} at offset {off}")
    if off + 1 + width > end:
        raise TruncatedEvent(width, max(end - off - 1, 0), what)
    return int.from_bytes(buf[off + 1 : off + 1 + width], "little"), off + 1 + width


def varlen_uint(buf, off: int, what: str = "variable-length integer") -> tuple[int, int]:
    """MySQL serialization-library integer (``read_varlen_bytes_unsigned``): the number
    of trailing one bits of the first byte plus one is the byte count (1..9)."""
    need(buf, off, 1, what)
    first = buf[off]
    n = 1
    while n <= 8 and (first >> (n - 1)) & 1:
        n += 1
    need(buf, off, n, what)
    if n == 1:
        return first >> 1, off + 1
    rest = int.from_bytes(buf[off + 1 : off + n], "little")
    if n == 9:
        return rest, off + 9
    return (first >> n) | (rest << (8 - n)), off + n


def varlen_int(buf, off: int, what: str = "variable-length integer") -> tuple[int, int]:
    """Signed variant: the least significant bit is the sign (zig-zag like)."""
    u, off = varlen_uint(buf, off, what)
    return (-(u >> 1) - 1 if u & 1 else u >> 1), off


def lstr8(buf, off: int, what: str) -> tuple[bytes, int]:
    """A string preceded by its 1-byte length."""
    need(buf, off, 1, what)
    n = buf[off]
    need(buf, off + 1, n, what)
    return bytes(buf[off + 1 : off + 1 + n]), off + 1 + n


def cstr(buf, off: int, end: int, what: str) -> tuple[bytes, int]:
    """A NUL-terminated string inside ``buf[off:end]``; returns the text and the offset after the NUL."""
    raw = bytes(buf[off:end])
    cut = raw.find(b"\0")
    if cut < 0:
        raise CorruptEvent(f"{what} is not NUL-terminated")
    return raw[:cut], off + cut + 1
