"""``binlog_changes(content BINARY, path STRING)``: the decoder as a Spark SQL function. It takes
one whole binlog file's bytes (what Spark's ``binaryFile`` source gives) and returns its row
changes as an array of structs shaped like bronze's rows (:data:`pipelines.bronze.schema.BRONZE_LAYOUT`
without the run's own ``_run_id``/``_ingested_at``), so SQL over raw files needs no pipeline run
and no Delta::

    SELECT c.op, count(*) FROM (SELECT explode(binlog_changes(content, path)) AS c
      FROM binaryFile.`/data/binlogs`) GROUP BY c.op

Only complete transactions are returned (an unfinished one at the end of a file the server is
still writing is left out, as bronze leaves it for the next run). Bytes that are not a sound
binlog raise an error that names the file and the byte offset (:class:`BinlogChangesError`): a
query over files is strict, where bronze quarantines.

>>> register(spark)  # doctest: +SKIP
>>> spark.sql("SELECT size(binlog_changes(content, path)) FROM binaryFile.`/data/binlogs`")  # doctest: +SKIP
"""
from __future__ import annotations

import os
import re

from pipelines.errors import PipelineError
from pipelines.binlog.errors import BinlogError
from pipelines.binlog.txindex import scan
from pipelines.bronze.decode import WorkRange, decode_range
from pipelines.bronze.schema import BRONZE_LAYOUT

UDF_NAME = "binlog_changes"
_RUN_FIELDS = ("_run_id", "_ingested_at")  # what a pipeline run adds; a query over files has none
FIELDS = [n for n in BRONZE_LAYOUT.names if n not in _RUN_FIELDS]
_KEEP = [i for i, n in enumerate(BRONZE_LAYOUT.names) if n not in _RUN_FIELDS]
_NUMBERED = re.compile(r"\.(\d+)$")


class BinlogChangesError(PipelineError, ValueError):
    """The bytes given to ``binlog_changes`` are not a sound binlog (the message names the file
    and the offset)."""

    report = True


def file_changes(content: bytes | None, path: str | None) -> list[tuple] | None:
    """The row changes of one whole binlog file (``content``; ``path`` names it, and its number
    suffix is ``file_seq``), one tuple per change in :data:`FIELDS` order. NULL content: NULL.

    The decode is bronze's own (:func:`pipelines.bronze.decode.decode_range`, what bronze's
    tasks run on the files Spark's ``binaryFile`` source reads whole), made strict: where bronze
    quarantines a bad event or transaction, this raises."""
    if content is None:
        return None
    name = path or "<binlog>"
    m = _NUMBERED.search(os.path.basename(name))
    file_seq = int(m.group(1)) if m else 0
    data = bytes(content)
    try:
        index = scan(data, name=name)
    except BinlogError as e:
        raise _error(name, e.offset, type(e).__name__, e) from None
    if index.error is not None:
        e = index.error
        raise _error(name, e.offset, type(e).__name__, e)
    out = []
    work = WorkRange(name, name, file_seq, 4, index.complete_until, index, None, None)
    for kind, rec in decode_range(work, buf=data):
        if kind == "row":
            out.append(tuple(rec[i] for i in _KEEP))
        elif kind == "quar" and rec.error_class not in _NOT_ERRORS:  # a transaction bronze would skip
            raise _error(name, rec.offset, rec.error_class, rec.reason)
        elif kind == "stat" and rec.error is not None:  # the event that stops bronze's range
            raise _error(name, rec.error.offset, rec.error.error_class, rec.error.message)
    return out


_NOT_ERRORS = ("StatementFormat", "UnknownEvent")  # kept in bronze's quarantine; no row change is lost


def _error(name: str, offset: int | None, cls: str, message) -> BinlogChangesError:
    where = f"offset {offset}" if offset is not None else "offset unknown"
    return BinlogChangesError(f"{UDF_NAME}: {name}: {where}: {cls}: {message}")


def register(spark) -> None:
    """Register ``binlog_changes`` on ``spark`` (any session: it needs no Delta)."""
    from pyspark.sql import functions as F

    from pyspark.sql import types as T

    from pipelines.delta_io import struct_of

    row = T.StructType([f for f in struct_of(BRONZE_LAYOUT).fields if f.name not in _RUN_FIELDS])
    spark.udf.register(UDF_NAME, F.udf(file_changes, T.ArrayType(row)))
