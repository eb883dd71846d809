"""``binlog_changes(content BINARY, path STRING)``: the decoder as a Spark SQL function. It takes
one whole binlog file's bytes (what Spark's ``binaryFile`` source gives) and returns its row
changes as an array of structs shaped like bronze's rows (:data:`pipelines.bronze.schema.BRONZE_COLUMNS`
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

from pipelines.binlog.changes import RowChange, iter_changes
from pipelines.binlog.errors import BinlogError
from pipelines.binlog.txindex import scan
from pipelines.bronze.rows import _TableLayout, bronze_row
from pipelines.bronze.schema import BRONZE_COLUMNS

UDF_NAME = "binlog_changes"
_RUN_FIELDS = ("_run_id", "_ingested_at")  # what a pipeline run adds; a query over files has none
FIELDS = [(n, t) for n, t in BRONZE_COLUMNS if n not in _RUN_FIELDS]
_KEEP = [i for i, (n, _t) in enumerate(BRONZE_COLUMNS) if n not in _RUN_FIELDS]
RESULT_DDL = "ARRAY<STRUCT<" + ", ".join(f"`{n}`: {t}" for n, t in FIELDS) + ">>"
_NUMBERED = re.compile(r"\.(\d+)$")


class BinlogChangesError(ValueError):
    """The bytes given to ``binlog_changes`` are not a sound binlog (the message names the file
    and the offset)."""


def file_changes(content: bytes | None, path: str | None) -> list[tuple] | None:
    """The row changes of one whole binlog file (``content``; ``path`` names it, and its number
    suffix is ``file_seq``), one tuple per change in :data:`FIELDS` order. NULL content: NULL."""
    if content is None:
        return None
    name = path or "<binlog>"
    m = _NUMBERED.search(os.path.basename(name))
    file_seq = int(m.group(1)) if m else 0
    data = bytes(content)
    try:
        index = scan(data, name=name)
        if index.error is not None:
            raise index.error
        layouts: dict[int, _TableLayout] = {}
        out = []
        for ch in iter_changes(data, index, name=name):
            if type(ch) is not RowChange:
                continue
            lay = layouts.get(id(ch.table_map))
            if lay is None or lay.tm is not ch.table_map:
                lay = layouts[id(ch.table_map)] = _TableLayout(ch.table_map)
            row = bronze_row(ch, lay, file_seq, None, None)
            out.append(tuple(row[i] for i in _KEEP))
        return out
    except BinlogError as e:
        where = f"offset {e.offset}" if getattr(e, "offset", None) is not None else "offset unknown"
        raise BinlogChangesError(f"{UDF_NAME}: {name}: {where}: {type(e).__name__}: {e}") from None


def register(spark) -> None:
    """Register ``binlog_changes`` on ``spark`` (any session: it needs no Delta)."""
    from pyspark.sql import functions as F

    spark.udf.register(UDF_NAME, F.udf(file_changes, RESULT_DDL))
