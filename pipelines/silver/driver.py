"""Small batches folded on the driver: typed by Arrow, MERGEd from Arrow (delta-rs) or from a
local relation (delta-spark).

Most of a run's tables have a few changes each. Typing, "latest per key" and the classification
against silver's keys cost Spark several jobs per table (about 0.9 s a table), though the rows
fit in a list. A run instead fetches the rows of every small segment in one Spark job
(:func:`fetch`), and each table then costs only its writes
(:func:`pipelines.silver.driver_fold.apply_small`):

* delta-rs: its delta-rs calls, no Spark job: the cost follows the changes, not the tables;
* delta-spark: one job that reads the stored rows of the batch's keys, then delta-spark's MERGE
  of the folded rows (a new table: one write of its rows). That MERGE still costs delta-spark's
  own jobs per table (BENCHMARKS.md, "Many small tables on delta-spark").

The semantics are :func:`pipelines.silver.merge.apply_changes`'s for a non-SCD2 table with whole row
images, keyed or keyless, and the MERGE clauses are the same (:func:`pipelines.silver.plan.keyed_clauses`,
:func:`pipelines.silver.plan.keyless_clauses`). A segment takes this path only when nothing in it needs
more (:func:`eligible`): no partial images on a table without a key, no quarantined shapes, at
most :data:`SMALL_ROWS` changes. Partial
images (binlog_row_image MINIMAL/NOBLOB) are made whole rows first, by the rules of
:func:`pipelines.silver.changes.fill_partial` (in :mod:`pipelines.silver.driver_fold`). A
value that does not convert (:class:`~pipelines.silver.typed_values.NotCanonical`) sends the segment
back to the Spark path before anything is written (whose typing, the same, then fails naming it).

This module holds which segments take the path (:func:`eligible`, :func:`large_values`)
and their rows' fetch (:func:`within_bytes`, :func:`fetch`); the fold is :mod:`pipelines.silver.driver_fold`'s,
the write :mod:`pipelines.silver.driver_writes`'s.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines.schema.typemap import ColumnSpec
from pipelines.silver import ranges

SMALL_ROWS = 20_000  # changes of one segment at most, for this path
FETCH_ROWS = 200_000  # changes fetched to the driver per run at most (the other segments take Spark's path)
FETCH_BYTES = 256 * 2**20  # and their values' bytes, when a segment's columns may hold large values
COLUMNS = ("_seq", "op", "commit_ts", "before", "after")  # what a fetched row holds


def eligible(*, keys: Sequence[str], specs: Sequence[ColumnSpec], rejected: dict, partial: bool,
             scd2: bool, rows: int, limit: int | None = SMALL_ROWS) -> bool:
    """True when a segment can take this path (see the module doc: partial images only with a
    key), or with ``limit=None`` :mod:`pipelines.silver.columnar`'s (whole images only, any
    number of changes)."""
    return bool(specs) and not rejected \
        and (not partial or (bool(keys) and limit is not None and limit <= SMALL_ROWS)) and not scd2 \
        and 0 < rows <= (limit if limit is not None else rows)


# image types whose values can be large (TEXT is BLOB with a charset); TINYBLOB holds 255 bytes
_LARGE_TYPE = re.compile(r"\x1f(?:(?:MEDIUM|LONG)?BLOB|JSON|GEOMETRY|VECTOR)\b|\x1fVAR(?:CHAR|_STRING)\(\d{5,}\)|"
                         r"\x1fVAR(?:CHAR|_STRING)\(([2-9]\d{3})\)")


def large_values(shapes) -> bool:
    """True when an image shape (``_shape`` texts) has a column whose values may be large."""
    return any(_LARGE_TYPE.search("\x1f" + cell) for shape in shapes for cell in shape.split("\x1e"))


def _in_segments(bronze: DataFrame, segments: Sequence[tuple]) -> DataFrame:
    """``bronze``'s rows of the segments, each with its segment's index ``_f_i``."""
    segs = bronze.sparkSession.createDataFrame([(i, *s) for i, s in enumerate(segments)],
                                               "_f_i INT, _f_db STRING, _f_table STRING, _f_start STRING, _f_end STRING")
    return (bronze.join(F.broadcast(segs), (bronze["db"] == segs["_f_db"]) & (bronze["table"] == segs["_f_table"]))
            .where(ranges.spark_holds(F.col("_seq"), F.col("_f_start"), F.col("_f_end"))))


def _image_bytes(image: str):
    return F.aggregate(image, F.lit(0).cast("long"), lambda acc, x: acc + F.coalesce(F.octet_length(x["text"]), F.lit(0))
                       + F.coalesce(F.octet_length(x["bin"]), F.lit(0)))


def within_bytes(bronze: DataFrame, segments: Sequence[tuple], limit: int) -> list[tuple]:
    """The segments, in order, as long as their images' bytes add up to at most ``limit`` (one
    Spark job that sums them on the executors; nothing comes to the driver but the sums)."""
    if not segments:
        return []
    sums = dict(_in_segments(bronze, segments).groupBy("_f_i").agg(
        F.sum(F.coalesce(_image_bytes("before"), F.lit(0)) + F.coalesce(_image_bytes("after"), F.lit(0))).alias("b"))
        .collect())
    out, total = [], 0
    for i, segment in enumerate(segments):
        total += int(sums.get(i) or 0)
        if total > limit:
            break
        out.append(segment)
    return out


def fetch(bronze: DataFrame, segments: Sequence[tuple[str, str, str, str | None]]) -> dict[tuple, pa.Table]:
    """The rows of every segment ``(db, table, start, end)`` (``_seq`` above start, below end) of
    ``bronze`` (its ``db``, ``table`` and :data:`COLUMNS`; the images' cells need only ``idx``,
    ``text`` and ``bin``), in one Spark job: ``{segment: Arrow table of COLUMNS}``. They stay Arrow
    until their table is applied (:func:`pipelines.silver.driver_fold.apply_small`)."""
    if not segments:
        return {}
    table = _in_segments(bronze, segments).select("_f_i", *COLUMNS).toArrow()
    table = table.take(pc.sort_indices(table, [("_f_i", "ascending")]))
    counts = dict(zip(*(c.to_pylist() for c in pc.value_counts(table.column("_f_i")).flatten())))
    out, at = {}, 0
    for i, segment in enumerate(segments):
        n = counts.get(i, 0)
        out[tuple(segment)] = table.slice(at, n).drop_columns(["_f_i"])
        at += n
    return out
