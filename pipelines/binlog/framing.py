"""Framing: the magic, the format description, the common header, checksums and
event boundaries. Nothing here looks inside an event's body.

A :class:`BinlogFile` maps a file (or wraps a buffer) and yields :class:`RawEvent`
records whose ``data`` is a zero-copy ``memoryview`` of the event's post-header
and body, without the 19-byte common header and without the trailing CRC32.
"""
from __future__ import annotations

import mmap
import os
import re
import zlib
from dataclasses import dataclass
from typing import Iterator, NamedTuple

from .constants import (
    BINLOG_MAGIC,
    CHECKSUM_LEN,
    COMMON_HEADER_LEN,
    ChecksumAlg,
    EventFlag,
    EventType,
)
from .errors import (
    BinlogError,
    ChecksumMismatch,
    CorruptEvent,
    NotABinlog,
    TruncatedEvent,
    UnsupportedType,
)
from .layout import Layout

EVENT_HEADER = Layout(
    "timestamp:I type_code:B server_id:I event_length:I next_pos:I flags:H", "CommonHeader"
)
FDE_POST_HEADER = Layout(
    "binlog_version:H server_version:50s create_timestamp:I header_length:B",
    "FormatDescriptionPostHeader",
)
_HEADER_UNPACK = EVENT_HEADER._struct.unpack_from
_KNOWN_TYPES = frozenset(int(t) for t in EventType)
_CRC_LEN = CHECKSUM_LEN
_ALG_LEN = 1

# Checksums exist from MySQL 5.6.1 and MariaDB 5.3.0 on.
_MYSQL_CHECKSUM_SINCE = (5, 6, 1)
_MARIADB_CHECKSUM_SINCE = (5, 3, 0)


class EventHeader(NamedTuple):
    """Where an event is and what its common header says."""

    file: str
    pos: int  # offset of the event's first byte in the file
    end_pos: int  # offset just past the event (checksum included)
    timestamp: int
    type_code: int
    server_id: int
    next_pos: int
    flags: int
    in_payload: bool = False  # unpacked from a TRANSACTION_PAYLOAD event
    inner_pos: int = 0  # offset inside the uncompressed payload, when in_payload


class RawEvent(NamedTuple):
    header: EventHeader
    data: memoryview  # post-header + body, checksum stripped


def version_tuple(server_version: str) -> tuple[int, int, int]:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", server_version)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class FormatDescription:
    """What the FORMAT_DESCRIPTION event says about every later event."""

    binlog_version: int
    server_version: str
    create_timestamp: int
    header_length: int
    post_header_lengths: bytes
    checksum_alg: int

    @property
    def is_mariadb(self) -> bool:
        return "mariadb" in self.server_version.lower()

    @property
    def flavor(self) -> str:
        return "mariadb" if self.is_mariadb else "mysql"

    @property
    def version(self) -> tuple[int, int, int]:
        return version_tuple(self.server_version)

    @property
    def has_checksum(self) -> bool:
        return self.checksum_alg == ChecksumAlg.CRC32

    def post_header_len(self, type_code: int, default: int | None = None) -> int | None:
        """Post-header length the server declared for ``type_code`` (1-based table)."""
        i = type_code - 1
        if 0 <= i < len(self.post_header_lengths):
            return self.post_header_lengths[i]
        return default


def _supports_checksum(server_version: str) -> bool:
    v = version_tuple(server_version)
    since = _MARIADB_CHECKSUM_SINCE if "mariadb" in server_version.lower() else _MYSQL_CHECKSUM_SINCE
    return v >= since


def parse_format_description(data) -> FormatDescription:
    """Decode a FORMAT_DESCRIPTION event from the bytes after its common header
    (``data`` still includes the trailing checksum-algorithm byte and CRC, if any)."""
    ph = FDE_POST_HEADER.unpack(data, 0)
    version = bytes(ph.server_version).split(b"\0", 1)[0].decode("ascii", "replace")
    if ph.binlog_version != 4:
        raise UnsupportedType(f"binlog version {ph.binlog_version} is not supported (need 4)")
    if ph.header_length < COMMON_HEADER_LEN:
        raise CorruptEvent(f"format description declares a {ph.header_length}-byte header")
    rest = bytes(data[FDE_POST_HEADER.size:])
    alg = ChecksumAlg.UNDEF
    if _supports_checksum(version) and len(rest) >= _ALG_LEN + _CRC_LEN:
        alg = rest[-(_ALG_LEN + _CRC_LEN)]
        rest = rest[: -(_ALG_LEN + _CRC_LEN)]
        if alg not in (ChecksumAlg.OFF, ChecksumAlg.CRC32):
            raise CorruptEvent(f"unknown checksum algorithm {alg} in format description")
    return FormatDescription(
        binlog_version=ph.binlog_version,
        server_version=version,
        create_timestamp=ph.create_timestamp,
        header_length=ph.header_length,
        post_header_lengths=rest,
        checksum_alg=int(alg),
    )


def _open_buffer(source, name: str | None):
    """Return (buffer, name, closer) for a path, bytes-like or memoryview."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        name = name or path
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size == 0:
                raise NotABinlog("empty file, not a binlog", file=name, offset=0)
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        return memoryview(mm), name, mm.close
    buf = memoryview(source)
    if buf.ndim != 1 or buf.itemsize != 1:
        buf = buf.cast("B")
    return buf, name or "<buffer>", None


class BinlogFile:
    """One binlog file: checks the magic, reads the format description and
    iterates over complete events.

    >>> with BinlogFile("samples/binlogs/binlog.000001") as f:
    ...     [(raw.header.pos, raw.header.type_code) for raw in f.events()][:2]
    [(4, 15), (256, 163)]
    """

    def __init__(self, source, *, name: str | None = None, verify_checksums: bool = True):
        self.buf, self.name, self._closer = _open_buffer(source, name)
        self.size = len(self.buf)
        self.verify_checksums = verify_checksums
        self.encrypted_from: int | None = None
        # Offset of the first event whose next position is not where its length ends it, when
        # the event after it is sound: the file's positions count in another file (relay logs
        # keep the source's positions; so did some 5.0/5.1 servers). Events are framed by length.
        self.foreign_positions_from: int | None = None
        self.server_id = 0  # the server_id in the FORMAT_DESCRIPTION's header: the server that wrote the file
        try:
            self._check_magic()
            self.format = self._read_format_description()
        except BaseException:
            self.close()
            raise

    # -- context manager -------------------------------------------------
    def __enter__(self) -> "BinlogFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self._closer is not None:
            buf, self.buf = self.buf, memoryview(b"")
            buf.release()
            try:
                self._closer()
            except BufferError:  # a caller still holds a view; the map goes with it
                pass
            self._closer = None

    # -- framing -----------------------------------------------------------
    def _check_magic(self) -> None:
        if self.size == 0:
            raise NotABinlog("empty file, not a binlog", file=self.name, offset=0)
        head = bytes(self.buf[:4])
        if head != BINLOG_MAGIC:
            raise NotABinlog(
                f"not a binlog: starts with {head.hex(' ')}, expected fe 62 69 6e",
                file=self.name,
                offset=0,
            )

    def _read_format_description(self) -> FormatDescription:
        pos = len(BINLOG_MAGIC)
        h = self._header_at(pos)
        code, length = h[1], h[3]
        if code == EventType.START_V3:
            raise UnsupportedType(
                "binlog version 1/3 (MySQL < 5.0) is not supported", file=self.name, offset=pos
            )
        if code != EventType.FORMAT_DESCRIPTION:
            raise NotABinlog(
                f"first event has type {code}, expected FORMAT_DESCRIPTION (15)",
                file=self.name,
                offset=pos,
            )
        self._check_length(pos, length)
        self.server_id = h[2]
        try:
            fmt = parse_format_description(self.buf[pos + COMMON_HEADER_LEN : pos + length])
        except BinlogError as e:
            raise e.at(self.name, pos)
        if fmt.has_checksum and self.verify_checksums:
            self._verify(pos, length)
        return fmt

    def _header_at(self, pos: int):
        remaining = self.size - pos
        if remaining < COMMON_HEADER_LEN:
            raise TruncatedEvent(COMMON_HEADER_LEN, remaining, "event header", file=self.name, offset=pos)
        return _HEADER_UNPACK(self.buf, pos)

    def _check_length(self, pos: int, length: int) -> None:
        if length < COMMON_HEADER_LEN:
            raise CorruptEvent(
                f"event length {length} is shorter than the {COMMON_HEADER_LEN}-byte header",
                file=self.name,
                offset=pos,
            )
        remaining = self.size - pos
        if length > remaining:
            raise TruncatedEvent(length, remaining, "event", file=self.name, offset=pos)

    def _verify(self, pos: int, length: int) -> None:
        end = pos + length
        stored = int.from_bytes(self.buf[end - _CRC_LEN : end], "little")
        actual = zlib.crc32(self.buf[pos : end - _CRC_LEN])
        if stored != actual and self.buf[pos + 4] == EventType.FORMAT_DESCRIPTION:
            # The server computes the FDE's CRC with LOG_EVENT_BINLOG_IN_USE_F clear,
            # and sets the flag afterwards while the file is open.
            ev = bytearray(self.buf[pos : end - _CRC_LEN])
            ev[17] &= ~EventFlag.BINLOG_IN_USE & 0xFF
            actual = zlib.crc32(ev)
        if stored != actual:
            raise ChecksumMismatch(stored, actual, file=self.name, offset=pos)

    def _event_starts_at(self, at: int) -> bool:
        """Whether a sound event header starts at ``at`` (or the file ends there): a known type,
        a length of at least a header that fits in the file, a next position 0 or past it."""
        if at == self.size:
            return True
        if self.size - at < COMMON_HEADER_LEN:
            return False
        _ts, code, _sid, length, next_pos, _flags = _HEADER_UNPACK(self.buf, at)
        return (code in _KNOWN_TYPES and COMMON_HEADER_LEN <= length <= self.size - at
                and (next_pos == 0 or next_pos >= length))

    def events(self, start: int | None = None, end: int | None = None) -> Iterator[RawEvent]:
        """Yield every complete event whose first byte is in ``[start, end)``.

        Raises :class:`TruncatedEvent` at the first incomplete event (a file
        cut mid-event), after yielding everything before it.
        """
        pos = len(BINLOG_MAGIC) if start is None else start
        stop = self.size if end is None else min(end, self.size)
        buf, name, size = self.buf, self.name, self.size
        fmt = self.format
        crc = fmt.has_checksum
        verify = crc and self.verify_checksums
        trailer = _CRC_LEN if crc else 0
        unpack = _HEADER_UNPACK
        hlen = fmt.header_length
        while pos < stop:
            if size - pos < COMMON_HEADER_LEN:
                raise TruncatedEvent(COMMON_HEADER_LEN, size - pos, "event header", file=name, offset=pos)
            if self.encrypted_from is not None:
                raise UnsupportedType(
                    f"the binlog is encrypted from offset {self.encrypted_from} on (START_ENCRYPTION event); "
                    "decrypt it through the server first (mariadb-binlog --read-from-remote-server)",
                    file=name,
                    offset=pos,
                )
            ts, code, server_id, length, next_pos, flags = unpack(buf, pos)
            if length < COMMON_HEADER_LEN + trailer or length > size - pos:
                self._check_length(pos, length)
                raise CorruptEvent(f"event length {length} too short for its checksum", file=name, offset=pos)
            end_pos = pos + length
            if verify:
                stored = int.from_bytes(buf[end_pos - 4 : end_pos], "little")
                if stored != zlib.crc32(buf[pos : end_pos - 4]):
                    self._verify(pos, length)
            elif next_pos and next_pos != end_pos and code != EventType.FORMAT_DESCRIPTION \
                    and self.foreign_positions_from is None:
                # Without checksums a damaged length field is caught here: it ends the event where
                # no event starts. A sound event there means the positions count in another file.
                if not self._event_starts_at(end_pos):
                    raise CorruptEvent(
                        f"event of type {code} says the next event is at {next_pos}, "
                        f"but its length {length} ends it at {end_pos}, where no event starts",
                        file=name,
                        offset=pos,
                    )
                self.foreign_positions_from = pos
            if code == EventType.FORMAT_DESCRIPTION and pos != len(BINLOG_MAGIC):
                try:
                    fmt = self.format = parse_format_description(buf[pos + COMMON_HEADER_LEN : end_pos])
                except BinlogError as e:
                    raise e.at(name, pos)
                crc = fmt.has_checksum
                verify = crc and self.verify_checksums
                trailer = _CRC_LEN if crc else 0
                hlen = fmt.header_length
            if code == EventType.MARIA_START_ENCRYPTION:
                self.encrypted_from = end_pos  # every later event is encrypted (header fields too)
            body_end = end_pos - trailer if code != EventType.FORMAT_DESCRIPTION else end_pos
            yield RawEvent(
                EventHeader(name, pos, end_pos, ts, code, server_id, next_pos, flags),
                buf[pos + hlen : body_end],
            )
            pos = end_pos
