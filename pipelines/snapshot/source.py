"""A dump file's bytes: plain, gzip or zstd, told apart by their magic bytes (never the name).

A plain file is read by byte ranges (a memory map): a task takes ``[start, stop)``, moves to
:func:`~pipelines.snapshot.statements.next_statement_start` and reads the statements that start
in its range. A compressed file cannot be entered in the middle, so it is read as **one task
per file**, streaming: :meth:`DumpFile.chunks` decompresses as it goes and
:func:`~pipelines.snapshot.statements.iter_stream` parses the chunks, never holding the whole
file. A single compressed file too big for one task is decompressed once to a plain copy
(:meth:`DumpFile.decompress_to`, streaming too) and that copy is split like any plain file; the
loader chooses by size. mydumper's chunked folders are many compressed files: one task each.

Offsets are in the decompressed stream for gzip and zstd files, in the file for plain ones.

>>> import gzip, io
>>> compression_of(gzip.compress(b"-- MariaDB dump")), compression_of(b"-- MariaDB dump")
('gzip', 'plain')
"""
from __future__ import annotations

import gzip
import mmap
import os
from contextlib import contextmanager
from typing import BinaryIO, Iterator

import zstandard

from .errors import DumpError, TruncatedDump
from .position import HEAD_BYTES, TAIL_BYTES, SnapshotPosition, dump_position

PLAIN, GZIP, ZSTD = "plain", "gzip", "zstd"
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
CHUNK = 8 << 20


def compression_of(head: bytes) -> str:
    """``gzip``, ``zstd`` or ``plain``, from a file's first bytes."""
    if head[:2] == _GZIP_MAGIC:
        return GZIP
    if head[:4] == _ZSTD_MAGIC:
        return ZSTD
    return PLAIN


class DumpFile:
    """One dump file on a local (or mounted) file system.

    >>> DumpFile("shop.sql.zst").compression  # doctest: +SKIP
    'zstd'
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.name = os.path.basename(self.path)
        self.size = os.path.getsize(self.path)
        with open(self.path, "rb") as f:
            self.compression = compression_of(f.read(4))

    @property
    def seekable(self) -> bool:
        """Plain files can be read from any byte; compressed ones only from the start."""
        return self.compression == PLAIN

    @contextmanager
    def buffer(self) -> Iterator[mmap.mmap | bytes]:
        """The whole plain file as a read-only memory map (the OS pages in what is read)."""
        if not self.seekable:
            raise DumpError(f"a {self.compression} file cannot be read by byte range: read it as one stream "
                            "(chunks()) or decompress it once (decompress_to())", file=self.name)
        if self.size == 0:
            yield b""
            return
        with open(self.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            yield m

    @contextmanager
    def open_stream(self) -> Iterator[BinaryIO]:
        """A reader of the decompressed bytes."""
        with open(self.path, "rb") as raw:
            if self.compression == GZIP:
                with gzip.GzipFile(fileobj=raw) as g:
                    yield g
            elif self.compression == ZSTD:
                with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as z:
                    yield z
            else:
                yield raw

    def chunks(self, size: int = CHUNK) -> Iterator[bytes]:
        """The decompressed bytes in chunks of about ``size``. A compressed stream cut short (an
        interrupted ``mysqldump | gzip``) raises :class:`TruncatedDump` with the offset reached."""
        done = 0
        with self.open_stream() as f:
            while True:
                try:
                    chunk = f.read(size)
                except (EOFError, OSError, zstandard.ZstdError) as e:
                    raise TruncatedDump(f"the {self.compression} stream ends early or is damaged ({e})",
                                        file=self.name, offset=done) from None
                if not chunk:
                    return
                done += len(chunk)
                yield chunk

    def head(self, n: int = HEAD_BYTES) -> bytes:
        """The first ``n`` decompressed bytes."""
        out = bytearray()
        for chunk in self.chunks(min(n, CHUNK)):
            out += chunk
            if len(out) >= n:
                break
        return bytes(out[:n])

    def tail(self, n: int = TAIL_BYTES) -> tuple[int, bytes] | None:
        """``(offset, bytes)`` of the last ``n`` bytes of a plain file; None for a compressed one
        (its end is only reached by reading it all)."""
        if not self.seekable:
            return None
        start = max(0, self.size - n)
        with open(self.path, "rb") as f:
            f.seek(start)
            return start, f.read()

    def decompress_to(self, dest: str | os.PathLike) -> "DumpFile":
        """A plain copy at ``dest`` (streaming), for splitting a big compressed dump in ranges."""
        tmp = os.fspath(dest) + ".partial"
        with open(tmp, "wb") as out:
            for chunk in self.chunks():
                out.write(chunk)
        os.replace(tmp, dest)
        return DumpFile(dest)


def read_position(dump: DumpFile, *, whole: bool = False) -> SnapshotPosition:
    """The snapshot position a dump records (:func:`~pipelines.snapshot.position.dump_position`):
    its head always, its tail when the file is plain; ``whole`` reads a compressed file to its end
    for the tail too (MariaDB writes ``gtid_slave_pos`` after the data)."""
    head = dump.head()
    tail = dump.tail()
    if tail is None and whole:
        keep = b""
        done = 0
        for chunk in dump.chunks():
            keep = (keep + chunk)[-TAIL_BYTES:]
            done += len(chunk)
        tail = (done - len(keep), keep)
    if tail is not None and tail[0] < len(head):  # the tail overlaps the head: only what is beyond it
        tail = (len(head), tail[1][len(head) - tail[0]:]) if tail[0] + len(tail[1]) > len(head) else None
    return dump_position(head, tail[1] if tail else b"", tail_offset=tail[0] if tail else None, name=dump.name)
