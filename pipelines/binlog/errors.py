"""One error hierarchy for everything the decoder can reject.

Pure decoders raise these without knowing where they are; the framing layer
adds the file name and the byte offset of the event with :meth:`BinlogError.at`.
"""
from __future__ import annotations


class BinlogError(Exception):
    """Root of every decoder error. ``file`` and ``offset`` say where."""

    def __init__(self, message: str, *, file: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.message = message
        self.file = file
        self.offset = offset

    def at(self, file: str | None, offset: int | None = None) -> "BinlogError":
        """Fill in the location if it is not known yet; returns self for ``raise e.at(...)``."""
        if self.file is None:
            self.file = file
        if self.offset is None:
            self.offset = offset
        return self

    def __str__(self) -> str:
        where = []
        if self.file is not None:
            where.append(str(self.file))
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return ": ".join(where + [self.message]) if where else self.message

    def __reduce__(self):  # picklable across Spark workers
        return (_rebuild, (type(self), self.__dict__.copy()))


def _rebuild(cls, state):
    obj = cls.__new__(cls)
    Exception.__init__(obj, state.get("message", ""))
    obj.__dict__.update(state)
    return obj


class NotABinlog(BinlogError):
    """The file is empty, or does not start with the binlog magic ``fe 62 69 6e``."""


class TruncatedEvent(BinlogError):
    """Fewer bytes remain than the event (or a field inside it) needs."""

    def __init__(self, need: int, got: int, what: str = "event", **kw):
        super().__init__(f"truncated {what}: need {need} bytes but got {got}", **kw)
        self.need = need
        self.got = got


class ChecksumMismatch(BinlogError):
    """The CRC32 stored in the event differs from the one computed over its bytes."""

    def __init__(self, expected: int, actual: int, **kw):
        super().__init__(
            f"CRC32 mismatch: event says 0x{expected:08x}, bytes give 0x{actual:08x}", **kw
        )
        self.expected = expected
        self.actual = actual


class CorruptEvent(BinlogError):
    """The bytes are there but make no sense (bad lengths, impossible values)."""


class UnsupportedType(BinlogError):
    """A column type, event layout or feature this decoder does not handle."""


def need(buf, off: int, n: int, what: str = "field") -> None:
    """Raise :class:`TruncatedEvent` unless ``buf[off:off+n]`` is complete."""
    have = len(buf) - off
    if have < n:
        raise TruncatedEvent(n, max(have, 0), what)
