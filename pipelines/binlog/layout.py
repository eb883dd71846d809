"""Fixed binary layouts declared as tables, compiled once into ``struct.Struct``.

>>> QUERY = Layout("thread_id:I exec_time:I db_len:B error_code:H status_vars_len:H")
>>> QUERY.size
13

Field formats are ``struct`` codes (little-endian, no padding) plus ``uN`` for an
N-byte little-endian unsigned integer (``u3``, ``u6``), which ``struct`` lacks.
"""
from __future__ import annotations

import struct
from collections import namedtuple

from .errors import TruncatedEvent


class Layout:
    """A named, fixed-size, little-endian record."""

    __slots__ = ("names", "size", "_struct", "_wide", "_tuple", "spec")

    def __init__(self, spec: str, name: str = "Record"):
        self.spec = spec
        names, fmt, wide = [], "<", []
        for i, field in enumerate(spec.split()):
            fname, _, code = field.partition(":")
            if not code:
                raise ValueError(f"layout field {field!r} needs name:format")
            if code.startswith("u") and code[1:].isdigit():
                wide.append(i)
                code = f"{int(code[1:])}s"
            names.append(fname)
            fmt += code
        self.names = tuple(names)
        self._struct = struct.Struct(fmt)
        self.size = self._struct.size
        self._wide = tuple(wide)
        self._tuple = namedtuple(name, names)

    def unpack(self, buf, off: int = 0):
        """Decode the record at ``buf[off:]``; returns a namedtuple."""
        if len(buf) - off < self.size:
            raise TruncatedEvent(self.size, max(len(buf) - off, 0), "header")
        values = self._struct.unpack_from(buf, off)
        if self._wide:
            values = list(values)
            for i in self._wide:
                values[i] = int.from_bytes(values[i], "little")
        return self._tuple._make(values)

    def pack(self, *values) -> bytes:
        """Encode a record (used by tests to build events)."""
        if self._wide:
            values = list(values)
            for i in self._wide:
                width = int(self.spec.split()[i].partition(":")[2][1:])
                values[i] = int(values[i]).to_bytes(width, "little")
        return self._struct.pack(*values)

    def __repr__(self) -> str:
        return f"Layout({self.spec!r})"
