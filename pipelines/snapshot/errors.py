"""One error hierarchy for everything the dump reader rejects; every message names the file and the
byte offset (in the decompressed stream for gzip/zstd dumps, in the file for plain ones).

Pure readers raise these without knowing the file name when they work on a bare buffer; the caller
that knows it fills it in with :meth:`DumpError.at`, as the decoder's errors do.
"""
from __future__ import annotations

from pipelines.binlog.errors import BinlogError


class DumpError(BinlogError):
    """Root of every dump-reader error. ``file`` and ``offset`` say where. A dump is input as a
    binlog is: its errors are the decoder's kind (:class:`~pipelines.binlog.errors.BinlogError`:
    the location filled in by :meth:`at`, picklable across Spark workers), read as a dump's."""

    def __str__(self) -> str:
        where = [str(self.file) if self.file is not None else "<dump>"]
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return ": ".join(where + [self.message])


class NoPosition(DumpError):
    """The dump records no binlog position (made without ``--master-data``/``--source-data``/
    ``--dump-slave``/``--gtid``): the loader cannot know where the binlogs take over."""

    def __init__(self, *, file: str | None = None, offset: int | None = None):
        super().__init__(
            "the dump records no binlog position (it was written without --master-data / --source-data, "
            "--dump-slave / --dump-replica or --gtid); give the snapshot's position yourself: "
            "--position FILE:POS (e.g. --position binlog.000004:56962) or --gtid SET "
            "(e.g. --gtid 0-1-42, or a MySQL uuid:1-100 set)", file=file, offset=offset)


class TruncatedDump(DumpError):
    """The dump ends inside a statement (an interrupted mysqldump, a partial copy)."""


class CorruptDump(DumpError):
    """The bytes are there but are not the SQL a dump tool writes (unbalanced quotes, a malformed
    VALUES list, a literal that cannot be the column's value)."""


class UnsupportedDump(DumpError):
    """A form the reader does not handle (a connection character set whose multi-byte characters
    can hide a quote or a backslash, a column type without a binlog counterpart, ...)."""
