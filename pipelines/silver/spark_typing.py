"""Silver's typing as a Spark transform (``DataFrame -> DataFrame``): :func:`typed_columns` runs
:func:`pipelines.silver.arrow_typing.typed_batch` inside Spark's tasks (``mapInArrow``), so the
rows Spark's path applies (:mod:`pipelines.silver.changes`) are typed by the same code as the
driver's: one typing, wherever it runs.
"""
from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from pipelines.schema.typemap import ZERO_DATES_COL, ColumnSpec, silver_schema


def _ordinals(specs: Sequence[ColumnSpec]) -> list[int]:
    ordinals = [i if s.ordinal is None else s.ordinal for i, s in enumerate(specs)]
    bad = [(s.name, o) for s, o in zip(specs, ordinals) if not isinstance(o, int) or o < 0]
    if bad:
        raise ValueError(f"column ordinals must be ints >= 0: {bad}")
    if len(set(ordinals)) != len(ordinals):
        raise ValueError(f"two specs share one column ordinal: {list(zip([s.name for s in specs], ordinals))}")
    return ordinals


def typed_columns(
    df: DataFrame,
    specs: Sequence[ColumnSpec],
    image_col: str | Sequence[str] = "after",
    *,
    zero_dates_col: str = ZERO_DATES_COL,
    fixes: dict[int, tuple] | None = None,
    guard: str | None = None,
) -> DataFrame:
    """Replace the generic image column ``image_col`` (or each of several) by a struct with one
    typed field per spec (:func:`pipelines.schema.typemap.silver_schema`).

    Each field is found by the column's ``idx`` (``spec.ordinal``, else its position in
    ``specs``); a column missing from the image is NULL, a NULL image gives a NULL struct.
    ``zero_dates_col`` (INT) counts per row the temporal values nulled (zero or invalid dates);
    when the column exists already (another image was typed first) the count is added to it.
    ``fixes`` (cell ``idx`` -> :func:`pipelines.schema.resolve.apply_fix`'s fix) complete a
    column's cells first: a charset's bytes decoded, ENUM/SET numbers named, signed made unsigned.
    ``guard`` names a BOOLEAN column: the images are typed only in rows where it is true
    (elsewhere NULL, no zero dates), so only there can a value that does not convert raise; a
    caller typing the rows of a filtered read sets it to the filter itself. A value that does not
    convert fails the Spark job with the column, its type and the text named.

    >>> bronze = spark.createDataFrame([("c", [(0, "id", "LONG", "7", None), (1, "d", "DATE", "0000-00-00", None)])],  # doctest: +SKIP
    ...     "op STRING, after ARRAY<STRUCT<idx INT, name STRING, type STRING, text STRING, bin BINARY>>")
    >>> typed_columns(bronze, [ColumnSpec("id", "int"), ColumnSpec("d", "date")]).collect()  # doctest: +SKIP
    [Row(op='c', after=Row(id=7, d=None), _zero_dates=1)]
    """
    images = [image_col] if isinstance(image_col, str) else list(image_col)
    missing = [c for c in images + ([guard] if guard is not None else []) if c not in df.columns]
    if missing:
        raise ValueError(f"typed_columns: no column {', '.join(map(repr, missing))}; columns: {df.columns}")
    struct = silver_schema(specs)  # (checks the names)
    _ordinals(specs)
    fields = [T.StructField(f.name, struct, True) if f.name in images else f for f in df.schema.fields]
    if zero_dates_col not in df.columns:
        fields.append(T.StructField(zero_dates_col, T.IntegerType(), True))
    else:
        fields = [T.StructField(f.name, T.IntegerType(), True) if f.name == zero_dates_col else f for f in fields]
    specs, fixes = list(specs), dict(fixes or {})
    # by position: mapInArrow reads its columns by name, and a dot in a name would mean a field
    names = [f.name for f in fields]
    at = {name: f"_c{i}" for i, name in enumerate(names)}
    mine = [at[i] for i in images]
    guard_at, zeros_at = (at[guard] if guard is not None else None), at[zero_dates_col]

    def typed(batches):
        from pipelines.silver.arrow_typing import typed_batch  # (imported in the Python worker)

        for batch in batches:
            yield typed_batch(batch, specs, mine, fixes=fixes, guard=guard_at, zero_dates_col=zeros_at)

    plain = df.toDF(*[at[c] for c in df.columns])
    out = T.StructType([T.StructField(at[f.name], f.dataType, f.nullable) for f in fields])
    return plain.mapInArrow(typed, out).toDF(*names)
