"""Which of a table's rows a ``_seq`` range holds, written once, for plain values, Arrow and Spark.

* A **segment** ``(start, end)``: ``_seq`` above ``start`` (its schema event's ``_seq``, or the
  table's watermark) and below ``end`` (the next event's); no ``end``: up to the last row. Both
  bounds exclude: the event's own row is not a change of the segment.
* **Above a watermark**: ``_seq`` above ``mark``; no mark (a table silver has not stamped): every row.

``_seq`` keys are fixed-width text (:func:`pipelines.bronze.schema.seq_key`), so each engine
compares them as strings.

>>> holds("0002", "0001", None), holds("0003", "0001", "0003"), holds(None, "", None)
(True, False, False)
>>> above("0002", None), above("0002", "0002")
(True, False)
>>> overlaps("0001", "0005", "0005", None), overlaps("0001", "0005", "0004", "0009")
(False, True)
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column
from pyspark.sql import functions as F

SEQ = "_seq"


# -- plain values --------------------------------------------------------------------------

def holds(seq: str | None, start: str, end: str | None) -> bool:
    """The segment ``(start, end)`` holds a row of ``_seq`` ``seq``."""
    return seq is not None and seq > start and (end is None or seq < end)


def above(seq: str | None, mark: str | None) -> bool:
    """A row of ``_seq`` ``seq`` is above the watermark ``mark``."""
    return mark is None or (seq is not None and seq > mark)


def overlaps(lo: str, hi: str, start: str, end: str | None) -> bool:
    """Rows whose ``_seq`` run from ``lo`` to ``hi`` may have some in the segment ``(start, end)``."""
    return hi > start and (end is None or lo < end)


# -- Arrow ---------------------------------------------------------------------------------

def arrow_filter(db: str, table: str, start: str, end: str | None) -> pc.Expression:
    """A dataset filter: ``db``.``table``'s rows in the segment."""
    where = (pc.field("db") == db) & (pc.field("table") == table) & (pc.field(SEQ) > start)
    return where if end is None else where & (pc.field(SEQ) < end)


def arrow_above_filter(mark: str) -> pc.Expression:
    """A dataset filter: the rows above ``mark`` (a scan's bound below its segments' starts)."""
    return pc.field(SEQ) > mark


def arrow_holds(seq: pa.Array, start, end) -> pa.Array:
    """Per row, the segment holds it (``start``/``end``: scalars, or arrays of each row's bounds,
    a null end open): :func:`holds` for arrays; false where ``seq`` is null."""
    inside = pc.greater(seq, start)
    if end is not None:
        inside = pc.and_kleene(inside, pc.or_kleene(pc.is_null(end), pc.less(seq, end))
                               if isinstance(end, (pa.Array, pa.ChunkedArray)) else pc.less(seq, end))
    return pc.fill_null(inside, False)


def arrow_above(seq: pa.Array, mark) -> pa.Array:
    """Per row, above the watermark (``mark``: a scalar or None, or an array of each row's, null:
    none): :func:`above` for arrays."""
    if mark is None:
        return pa.repeat(True, len(seq))
    if isinstance(mark, (pa.Array, pa.ChunkedArray)):
        return pc.fill_null(pc.or_kleene(pc.is_null(mark), pc.greater(seq, mark)), False)
    return pc.fill_null(pc.greater(seq, mark), False)


# -- Spark ---------------------------------------------------------------------------------

def spark_filter(db: str, table: str, start: str, end: str | None) -> Column:
    """``db``.``table``'s rows in the segment, as a Spark condition on bronze's columns."""
    where = (F.col("db") == db) & (F.col("table") == table) & (F.col(SEQ) > start)
    return where if end is None else where & (F.col(SEQ) < end)


def spark_holds(seq: Column, start: Column, end: Column) -> Column:
    """The segment holds the row, its bounds columns (of a joined table of segments; a null end open)."""
    return (seq > start) & (end.isNull() | (seq < end))


def spark_above(seq: Column, mark: Column) -> Column:
    """The row is above the watermark column ``mark`` (null: none)."""
    return mark.isNull() | (seq > mark)
