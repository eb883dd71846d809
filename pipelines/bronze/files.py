"""The bytes of a binlog file: prefix checksums, raw event cuts for quarantine, memory maps, and
the sparse range copies a task reads of a non-local file (through pyarrow, with the storage
settings the driver shipped to the task: :mod:`pipelines.storage`)."""
from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import tempfile
from typing import Iterator
from urllib.parse import unquote, urlparse

from pipelines.bronze.bookkeeping import BronzeError
from pipelines.storage import StorageSettings, arrow_filesystem

MAX_RAW_EVENT = 16 << 20  # quarantine keeps at most this many raw bytes of a bad event (or transaction)
MAX_RAW_HEAD = 4096  # ... and this many of a file that is not a binlog at all
_READ_CHUNK = 8 << 20


def local_path(uri: str) -> str | None:
    """The local filesystem path of ``uri`` (plain path or ``file:``), else None."""
    u = urlparse(uri)
    if u.scheme in ("", "file") or (len(u.scheme) == 1 and os.name == "nt"):
        return unquote(u.path) if u.scheme == "file" else uri
    return None


_IN_USE_FLAG_AT = 4 + 17  # low byte of the format description event's header flags


def sha256_prefixes(source, cuts: list[int]) -> dict[int, str]:
    """sha256 hex digests of ``source[0:cut]`` for every cut, in one pass (the
    format description's "file in use" flag does not count). ``source`` is a path
    or a buffer (a task's memory map, a file Spark's ``binaryFile`` source read)."""
    want = sorted(set(cuts))
    out: dict[int, str] = {}
    h = hashlib.sha256()
    pos = 0
    if not isinstance(source, (str, os.PathLike)):
        view = memoryview(source)
        for cut in want:
            if cut > len(view):
                raise BronzeError(f"ends at byte {len(view)}, expected at least {cut} bytes")
            if pos <= _IN_USE_FLAG_AT < cut:
                h.update(view[pos:_IN_USE_FLAG_AT])
                h.update(bytes([view[_IN_USE_FLAG_AT] & 0xFE]))
                pos = _IN_USE_FLAG_AT + 1
            if pos < cut:
                h.update(view[pos:cut])
                pos = cut
            out[cut] = h.copy().hexdigest()
        return out
    path = source
    with open(path, "rb") as fh:
        for cut in want:
            while pos < cut:
                chunk = fh.read(min(_READ_CHUNK, cut - pos))
                if not chunk:
                    raise BronzeError(f"{path}: ends at byte {pos}, expected at least {cut} bytes")
                if pos <= _IN_USE_FLAG_AT < pos + len(chunk):
                    # the server clears LOG_EVENT_BINLOG_IN_USE_F when it closes the file:
                    # that is not a change of content
                    chunk = bytearray(chunk)
                    chunk[_IN_USE_FLAG_AT - pos] &= 0xFE
                h.update(chunk)
                pos += len(chunk)
            out[cut] = h.copy().hexdigest()
    return out


def cut_event(buf, offset: int) -> bytes:
    """The raw bytes of the event at ``offset``: its header's length field,
    capped by what remains (and by ``MAX_RAW_EVENT``)."""
    remaining = len(buf) - offset
    if remaining <= 0:
        return b""
    n = remaining
    if remaining >= 13:
        length = int.from_bytes(bytes(buf[offset + 9 : offset + 13]), "little")
        n = min(max(length, 19), remaining)
    return bytes(buf[offset : offset + min(n, MAX_RAW_EVENT)])


def quarantine_raw(buf, error_class: str | None, offset: int) -> bytes:
    """The bytes a quarantine row keeps of a file stopped at ``offset``: the unfinished
    transaction from there, the head of a file that is not a binlog, else the bad event."""
    if error_class == "UnfinishedTransaction":
        return bytes(buf[offset : offset + MAX_RAW_EVENT])
    if error_class == "NotABinlog":
        return bytes(buf[:MAX_RAW_HEAD])
    return cut_event(buf, offset)


@contextlib.contextmanager
def _mapped(path: str) -> Iterator[memoryview]:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            yield memoryview(b"")
            return
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mm)
    try:
        yield view
    finally:
        view.release()
        try:
            mm.close()
        except BufferError:  # a decoded value still points into the map; it goes with it
            pass


@contextlib.contextmanager
def as_buffer(source) -> Iterator[memoryview]:
    """``source`` as a buffer: a path is memory-mapped, a buffer is used as it is."""
    if isinstance(source, (str, os.PathLike)):
        with _mapped(os.fspath(source)) as buf:
            yield buf
    else:
        yield memoryview(source)


@contextlib.contextmanager
def task_file(uri: str, settings: StorageSettings | None = None) -> Iterator[memoryview]:
    """All the bytes of the file at ``uri``, for a task that reads it whole: a local file is
    memory-mapped, any other is copied to a local temp file first (:func:`task_bytes`)."""
    with task_bytes(uri, 0, None, settings) as buf:
        yield buf


@contextlib.contextmanager
def task_bytes(uri: str, start: int, end: int | None, settings: StorageSettings | None = None) -> Iterator[memoryview]:
    """The bytes a task needs, at their file offsets: the whole file (mapped)
    for a local path; for other paths a sparse temp file holding the format
    description and ``[start, end)`` only (``end`` None: to the end of the file),
    read through pyarrow with ``settings`` (the driver's, shipped with the task)."""
    path = local_path(uri)
    if path is not None:
        with _mapped(path) as buf:
            yield buf
        return
    fs, fpath = arrow_filesystem(uri, settings)
    with tempfile.NamedTemporaryFile(prefix="binlog-range-", suffix=".bin") as tmp:
        with fs.open_input_file(fpath) as src:
            end = src.size() if end is None else end
            head = src.read_at(23, 0)
            fde_end = 4 + int.from_bytes(head[4 + 9 : 4 + 13], "little") if len(head) >= 23 else len(head)
            tmp.write(src.read_at(min(fde_end, start), 0))
            tmp.seek(start)
            pos = start
            while pos < end:
                chunk = src.read_at(min(_READ_CHUNK, end - pos), pos)
                if not chunk:
                    break
                tmp.write(chunk)
                pos += len(chunk)
        tmp.flush()
        with _mapped(tmp.name) as buf:
            yield buf
