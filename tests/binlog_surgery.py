"""Build damaged binlog files out of real ones, for the bad-input tests.

Every helper takes and returns the bytes of a whole file. Editing events keeps
the rest of the file consistent the way a server would have written it: after
an event is removed, inserted or resized, every later event's next-position
field is moved and, when the file has checksums, every CRC32 is recomputed
(the FORMAT_DESCRIPTION event never moves and is left as it is)::

    data = Path("binlog.000002").read_bytes()
    tm = next(e for e in events(data) if e.type_code == EventType.TABLE_MAP)
    broken = remove_events(data, lambda e: e.pos == tm.pos)
    damaged = flip_byte(data, 1000)                     # the CRC32 of that event no longer fits
    extra = insert_event(data, tm.pos, make_event(99, b"hello", crc=has_checksum(data)))
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Callable

from pipelines.binlog.constants import BINLOG_MAGIC, COMMON_HEADER_LEN, EventType
from pipelines.binlog.framing import BinlogFile

_HEADER = struct.Struct("<IBIIIH")  # timestamp, type_code, server_id, event_length, next_pos, flags
LENGTH_FIELD = 9  # offset of event_length inside the common header
NEXT_POS_FIELD = 13
IGNORABLE = 0x80  # LOG_EVENT_IGNORABLE_F


@dataclass(frozen=True)
class Event:
    """One framed event of a file: where it starts and its exact bytes (header to CRC)."""

    pos: int
    type_code: int
    flags: int
    raw: bytes

    @property
    def end(self) -> int:
        return self.pos + len(self.raw)


def has_checksum(data: bytes) -> bool:
    """Whether the file's FORMAT_DESCRIPTION says every event ends with a CRC32."""
    with BinlogFile(data, verify_checksums=False) as bf:
        return bf.format.has_checksum


def events(data: bytes) -> list[Event]:
    """The framed events of an undamaged file, in order (FORMAT_DESCRIPTION first)."""
    out, pos = [], len(BINLOG_MAGIC)
    while pos + COMMON_HEADER_LEN <= len(data):
        _ts, code, _sid, length, _next, flags = _HEADER.unpack_from(data, pos)
        if length < COMMON_HEADER_LEN or pos + length > len(data):
            raise ValueError(f"offset {pos}: event length {length} does not fit a file of {len(data)} bytes")
        out.append(Event(pos, code, flags, data[pos : pos + length]))
        pos += length
    if pos != len(data):
        raise ValueError(f"{len(data) - pos} byte(s) after the last complete event at {pos}")
    return out


def assemble(raws: list[bytes], crc: bool) -> bytes:
    """A file of these events (FORMAT_DESCRIPTION first) with next positions and
    CRC32s (when ``crc``) made right for where each event now lies."""
    out = bytearray(BINLOG_MAGIC)
    for i, raw in enumerate(raws):
        ev = bytearray(raw)
        if i == 0 or ev[4] == EventType.FORMAT_DESCRIPTION:
            out += ev
            continue
        struct.pack_into("<I", ev, LENGTH_FIELD, len(ev))
        struct.pack_into("<I", ev, NEXT_POS_FIELD, len(out) + len(ev))
        if crc:
            struct.pack_into("<I", ev, len(ev) - 4, zlib.crc32(bytes(ev[:-4])))
        out += ev
    return bytes(out)


def make_event(type_code: int, body: bytes, *, crc: bool, flags: int = 0, timestamp: int = 1_700_000_000,
               server_id: int = 1) -> bytes:
    """A well-formed event (its next position is set by :func:`assemble`)."""
    length = COMMON_HEADER_LEN + len(body) + (4 if crc else 0)
    raw = _HEADER.pack(timestamp, type_code, server_id, length, 0, flags) + body
    return raw + (struct.pack("<I", zlib.crc32(raw)) if crc else b"")


def remove_events(data: bytes, drop: Callable[[Event], bool]) -> bytes:
    """The file without the events ``drop`` selects, positions and CRCs fixed."""
    return assemble([e.raw for e in events(data) if not drop(e)], has_checksum(data))


def insert_event(data: bytes, at: int, raw: bytes) -> bytes:
    """The file with ``raw`` inserted before the event starting at offset ``at``
    (or at the end when ``at`` is the file size), positions and CRCs fixed."""
    evs = events(data)
    raws = [e.raw for e in evs]
    starts = [e.pos for e in evs]
    i = len(raws) if at == len(data) else starts.index(at)
    return assemble(raws[:i] + [raw] + raws[i:], has_checksum(data))


def replace_event(data: bytes, at: int, raw: bytes) -> bytes:
    """The file with the event at offset ``at`` replaced by ``raw`` (positions and CRCs fixed)."""
    raws = [raw if e.pos == at else e.raw for e in events(data)]
    return assemble(raws, has_checksum(data))


def flip_byte(data: bytes, offset: int, mask: int = 0xFF) -> bytes:
    """``data`` with the byte at ``offset`` XORed with ``mask`` (nothing else fixed)."""
    out = bytearray(data)
    out[offset] ^= mask
    return bytes(out)


def set_u32(data: bytes, offset: int, value: int) -> bytes:
    """``data`` with a little-endian 32-bit field overwritten (nothing else fixed)."""
    out = bytearray(data)
    struct.pack_into("<I", out, offset, value)
    return bytes(out)


def rotate_body(next_file: str, position: int = 4) -> bytes:
    """The post-header and body of a ROTATE event naming ``next_file``."""
    return struct.pack("<Q", position) + next_file.encode()


def with_rotate_to(data: bytes, next_file: str) -> bytes:
    """The file with its (last) ROTATE event naming ``next_file`` instead."""
    rot = [e for e in events(data) if e.type_code == EventType.ROTATE][-1]
    crc = has_checksum(data)
    header = rot.raw[:COMMON_HEADER_LEN]
    raw = header + rotate_body(next_file) + (b"\0\0\0\0" if crc else b"")
    return replace_event(data, rot.pos, raw)


def replace_bytes(data: bytes, old: bytes, new: bytes) -> bytes:
    """The file with ``old`` replaced by ``new`` (the same length) inside every event's body,
    CRCs fixed: values written by a real server, rewritten to bytes it would not have accepted
    from us (text in another charset than its column's or statement's)."""
    if len(old) != len(new):
        raise ValueError(f"replace_bytes keeps lengths: {len(old)} != {len(new)}")
    raws = [e.raw if e.type_code == EventType.FORMAT_DESCRIPTION else
            e.raw[:COMMON_HEADER_LEN] + e.raw[COMMON_HEADER_LEN:].replace(old, new) for e in events(data)]
    return assemble(raws, has_checksum(data))
