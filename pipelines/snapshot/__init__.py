"""Reading logical dumps (mysqldump, mariadb-dump, mydumper) as the binlog decoder reads row
images: plain values in and out, like :mod:`pipelines.binlog`; no Spark, no Delta, no storage.

Layers (each module imports only those above it):

* ``errors``      one root, :class:`DumpError`; every message names the file and byte offset
* ``position``    the snapshot's binlog position from a dump's header, mydumper's ``metadata``, or
  the user (``--position FILE:POS``, ``--gtid SET``)
* ``values``      an INSERT's ``VALUES`` list -> rows of raw literals
* ``source``      a dump file's bytes: plain by byte range, gzip/zstd as one stream
* ``session``     the session state a dump sets (database, charset, time zone, delimiter, flavor)
* ``statements``  SQL text -> statements, as the ``mysql`` client splits them
* ``split``       a plain file in byte ranges: statement boundaries, routine blocks, the outline
* ``tablemap``    a ``CREATE TABLE`` -> the table map the server logs for it (FULL metadata)
* ``cells``       a dumped row -> the decoder's values and bronze image cells for its table
* ``reader``      statements -> rows with their schemas (what one loader task does)
* ``tab``         ``mysqldump --tab`` folders
* ``mydumper``    mydumper folders

It imports :mod:`pipelines.binlog` (values, charsets, type text) and the pure parts of
:mod:`pipelines.schema` (``ddl``, ``model``), the standard library, ``zstandard`` and ``sqlglot``.
"""
from .errors import CorruptDump, DumpError, NoPosition, TruncatedDump, UnsupportedDump  # noqa: F401
from .position import SnapshotPosition, dump_position, mydumper_position, parse_user_gtid, parse_user_position  # noqa: F401
