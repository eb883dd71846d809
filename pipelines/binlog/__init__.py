"""Pure-Python decoder for MySQL (5.0–9.x) and MariaDB (10.x–11.x) binary logs.

Layers: :mod:`.framing` (magic, headers, checksums, event boundaries),
:mod:`.events` (one decoder per event type), :mod:`.columns` and friends (column
values), :mod:`.rows` (row images), :mod:`.stream` (typed events of a file),
:mod:`.txindex` (transaction boundaries), :mod:`.changes` (row changes of
committed transactions). Never imports Spark or Delta.
"""
from .errors import (  # noqa: F401
    BinlogError,
    ChecksumMismatch,
    CorruptEvent,
    NotABinlog,
    TruncatedEvent,
    UnsupportedType,
)

__version__ = "0.1.0"
