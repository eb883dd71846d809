"""Image shapes: which columns (``idx``, name, type) a bronze row's images logged. Silver groups
a table's rows by shape to resolve their columns once per shape (:func:`shape_counts`), and reads
only the cell fields it needs (:func:`slim_image`). ``DataFrame -> DataFrame`` and pure functions.
"""
from __future__ import annotations

import functools
from typing import Iterable, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipelines.schema import resolve as schema_resolve
from pipelines.bronze.schema import SHAPE_NO_NAME, SHAPE_SEP_COL, SHAPE_SEP_FIELD, WRITTEN_LATER, shape_text
from pipelines.schema import ImageColumn

_SEP_FIELD, _SEP_COL, _NO_NAME = SHAPE_SEP_FIELD, SHAPE_SEP_COL, SHAPE_NO_NAME

def with_shape(bronze: DataFrame) -> DataFrame:
    """Add ``_shape``: the sorted ``idx``/``name``/``type`` of every logged column of the row
    (both images), as one string; rows of one table map share it.

    >>> with_shape(bronze).select("_shape").distinct().count()  # doctest: +SKIP
    2
    """
    shape = shape_column()
    if "_shape" in bronze.columns:  # what bronze wrote, where it did
        shape = F.coalesce(F.col("_shape"), shape)
    return bronze.withColumn("_shape", shape)


def shape_column(before: tuple[str, str, str] = ("before.idx", "before.name", "before.type"),
                 after: tuple[str, str, str] = ("after.idx", "after.name", "after.type")) -> Column:
    """The ``_shape`` expression of :func:`with_shape`, from the images' ``idx``, ``name`` and
    ``type`` arrays (SQL expressions; by default the images' own fields, ``before.idx`` ...).
    Only those fields are read, never a whole element, so Spark's nested schema pruning leaves
    the values (``text``/``bin``, up to 1 GB a cell) unread."""
    def cells(idx: str, name: str, typ: str) -> str:
        named = f"zip_with({idx}, {name}, (i, n) -> concat(cast(i AS STRING), '{_SEP_FIELD}', coalesce(n, '{_NO_NAME}')))"
        return f"coalesce(zip_with({named}, {typ}, (c, t) -> concat(c, '{_SEP_FIELD}', t)), array())"
    return F.expr(f"array_join(array_sort(array_distinct(concat({cells(*before)}, {cells(*after)}))), "
                  f"'{_SEP_COL}')")


_SHAPE_FIELDS = [(image, field) for image in ("before", "after") for field in ("idx", "name", "type")]


def written_columns(bronze: DataFrame) -> frozenset[str]:
    """The bronze columns added after the first release (``WRITTEN_LATER``: ``_shape``,
    ``_zero_dates``) that every row of ``bronze`` has; rows an older version wrote have NULL
    there. One small job: only those columns are read, and the Parquet null counts skip the
    row groups without a NULL.

    >>> written_columns(bronze)  # doctest: +SKIP
    frozenset({'_shape', '_zero_dates'})
    """
    names = [n for n in WRITTEN_LATER if n in bronze.columns]
    if not names:
        return frozenset()
    lacking = functools.reduce(lambda a, b: a | b, [F.col(n).isNull() for n in names])
    row = bronze.where(lacking).select(*[F.max(F.col(n).isNull()).alias(n) for n in names]).collect()[0]
    return frozenset(n for n in names if not row[n])


def shape_rows_of(bronze: DataFrame, by: Sequence[str] = ()) -> tuple[list, frozenset[str]]:
    """:func:`shape_counts`'s rows (also grouped ``by`` those columns of ``bronze``), and which
    ``WRITTEN_LATER`` columns every row has (as :func:`written_columns` says), in one Spark job
    when bronze wrote every row's shape (a second one, by the images' arrays, when some rows come
    from an older bronze)."""
    later = [n for n in WRITTEN_LATER if n in bronze.columns]
    if "_shape" not in later:
        return shape_counts(bronze, by_shape=False, by=by).collect(), written_columns(bronze)
    rows = shape_counts(bronze, by_shape=True, lacking=later, by=by).collect()
    written = frozenset(n for n in later if not any(r[f"_lacks{n}"] for r in rows))
    if "_shape" not in written:
        rows = shape_counts(bronze, by_shape=False, by=by).collect()
    return rows, written


def shape_counts(bronze: DataFrame, by_shape: bool | None = None, lacking: Sequence[str] = (),
                 by: Sequence[str] = ()) -> DataFrame:
    """Per ``db``, ``table``, ``_shape`` (see :func:`with_shape`) and ``op``: ``min_seq``, ``max_seq``,
    ``n`` rows, the fewest columns of an after (``min_after``) and before image (``min_before``), and
    the table map's key column indexes (``pk_idx``).

    When every row has the ``_shape`` bronze wrote (``by_shape``; None: find out with
    :func:`written_columns`), rows are grouped by it. Otherwise (rows of an older bronze, or a
    DataFrame without the column) they are first grouped by their images' ``idx``/``name``/``type``
    arrays themselves, so the shape text is built once per group, not once per row. Either way
    only those fields and narrow columns are read (nested schema pruning: the values stay on disk).

    ``lacking`` (with ``by_shape``): columns whose NULLs each group counts, as ``_lacks<name>``
    (true when some row of the group has none).

    >>> shape_counts(bronze).collect()  # doctest: +SKIP
    """
    aggregates = [F.min("_seq").alias("min_seq"), F.max("_seq").alias("max_seq"), F.count(F.lit(1)).alias("n"),
                  F.min("_n_after").alias("min_after"), F.min("_n_before").alias("min_before"),
                  F.first("_pk_idx", ignorenulls=True).alias("pk_idx")]
    if by_shape is None:
        by_shape = "_shape" in written_columns(bronze)
    if by_shape:
        # bronze wrote every row's shape (rows of older versions have none): group by the text
        return bronze.select(
            "db", "table", "op", "_seq", "_shape", F.size("after.idx").alias("_n_after"),
            F.size("before.idx").alias("_n_before"), F.col("pk.idx").alias("_pk_idx"), *by,
            *[F.col(n).isNull().alias(f"_null{n}") for n in lacking if n != "_shape"],
        ).groupBy("db", "table", "_shape", "op", *by).agg(
            *aggregates, *[(F.col("_shape").isNull() if n == "_shape" else F.max(f"_null{n}")).alias(f"_lacks{n}")
                           for n in lacking])
    arrays = {f"_s_{i}_{f}": F.col(f"{i}.{f}") for i, f in _SHAPE_FIELDS}
    rows = bronze.select(
        "db", "table", "op", "_seq", F.size("after.idx").alias("_n_after"), F.size("before.idx").alias("_n_before"),
        F.col("pk.idx").alias("_pk_idx"), *by, *[c.alias(n) for n, c in arrays.items()])
    groups = rows.groupBy("db", "table", "op", *by, *arrays).agg(*aggregates)
    names = list(arrays)
    shaped = groups.withColumn("_shape", shape_column(tuple(names[:3]), tuple(names[3:])))
    return shaped.groupBy("db", "table", "_shape", "op", *by).agg(
        F.min("min_seq").alias("min_seq"), F.max("max_seq").alias("max_seq"), F.sum("n").alias("n"),
        F.min("min_after").alias("min_after"), F.min("min_before").alias("min_before"),
        F.first("pk_idx", ignorenulls=True).alias("pk_idx"))




def slim_image(image: str, with_name: bool = False) -> Column:
    """The bronze ``image`` with only the cell fields silver reads per row: ``idx``, ``text``,
    ``bin`` (and ``name``). Spark reads just those fields from Parquet (nested schema pruning),
    not the type text and name repeated in every cell. A NULL image stays NULL.

    >>> bronze.select(slim_image("after").alias("after")).schema["after"].simpleString()  # doctest: +SKIP
    'array<struct<idx:int,text:string,bin:binary>>'
    """
    fields = ("idx", "name", "text", "bin") if with_name else ("idx", "text", "bin")
    return F.arrays_zip(*[F.col(f"{image}.{f}").alias(f) for f in fields])


def shape_key(shape: Iterable[ImageColumn]) -> str:
    """The ``_shape`` string of a shape (see :func:`with_shape`)."""
    return shape_text((c.idx, c.name, c.type) for c in shape)


def parse_shape(key: str) -> tuple[ImageColumn, ...]:
    """The columns of a ``_shape`` string."""
    if not key:
        return ()
    out = []
    for cell in key.split(_SEP_COL):
        idx, name, typ = cell.split(_SEP_FIELD, 2)
        out.append(ImageColumn(int(idx), None if name == _NO_NAME else name, typ))
    return schema_resolve.sorted_shape(out)


