"""Reading tables: existence, schema, a DataFrame of the table, small tables' rows on the driver,
and the commit history. The argument checks and what both backends share are here; the rest is
the backend's (:func:`~pipelines.delta_io.backend.backend_for`)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pipelines.delta_io import pins
from pipelines.delta_io.backend import backend_for, quote_ident


def table_exists(path: str, *, spark: SparkSession | None = None, backend: str = "auto") -> bool:
    """True when ``path`` holds a Delta table (inside :func:`pinned`: when it did at the pinned version).

    >>> table_exists(str(tmp_path / "nothing"))  # doctest: +SKIP
    False
    """
    pin = pins.pin_of(path)
    if pin is not None:
        return pin.version is not None
    return backend_for(spark, backend).table_exists(spark, path)


def version(path: str, *, spark: SparkSession | None = None, backend: str = "auto") -> int | None:
    """The table's current version (the latest, also inside :func:`pinned`); None when ``path``
    holds no Delta table.

    >>> version(str(tmp_path / "t"))  # doctest: +SKIP
    3
    """
    impl = backend_for(spark, backend)
    return impl.version(spark, path) if impl.table_exists(spark, path) else None


@contextlib.contextmanager
def pinned(path: str, *, spark: SparkSession | None = None, backend: str = "auto") -> Iterator[pins.Pin]:
    """Make every commit to ``path`` in the ``with`` block (this thread) conditional on the table's
    version now (:mod:`pipelines.delta_io.pins`): one that finds it moved raises
    :class:`~pipelines.delta_io.pins.StaleRead` and lands nothing.

    >>> with pinned(path, spark=spark) as pin:  # doctest: +SKIP
    ...     merge(spark, path, source, on, clauses)
    """
    with pins.pinned(path, version(path, spark=spark, backend=backend), spark=spark, backend=backend) as pin:
        yield pin


def schema(path: str, *, spark: SparkSession | None = None, backend: str = "auto") -> T.StructType:
    """The current schema of the Delta table at ``path`` as a Spark StructType.

    >>> schema(str(tmp_path / "t")).fieldNames()  # doctest: +SKIP
    ['id', '_seq']
    """
    return backend_for(spark, backend).schema(spark, path)


def read(
    spark: SparkSession,
    path: str,
    columns: Sequence[str] | None = None,
    predicate: str | Column | None = None,
    *,
    backend: str = "auto",
    above: tuple[str, object] | None = None,
) -> DataFrame:
    """Read the Delta table at ``path`` as a Spark DataFrame.

    ``columns`` selects (and orders) columns; ``predicate`` is a Spark SQL boolean expression (text
    or Column) applied in Spark after the read, identically for both backends. ``above``
    ``(column, value)`` keeps the rows whose column is greater than ``value``, and the files whose
    statistics say they hold no such row are not read at all (delta-spark's data skipping; on
    delta-rs the file list is pruned by the add actions' ``max`` statistics): an append-only
    table read above a high mark costs what is above it, not its whole history.

    >>> read(spark, str(tmp_path / "t"), columns=["id"], predicate="id > 1").collect()  # doctest: +SKIP
    [Row(id=2)]
    """
    keep = None if above is None else F.col(quote_ident(above[0])) > F.lit(above[1])
    df = backend_for(spark, backend).read(spark, path, columns, above, keep)
    if predicate is not None:
        df = df.where(F.expr(predicate) if isinstance(predicate, str) else predicate)
    return df


def nothing_above(spark: SparkSession | None, path: str, column: str, value, *, backend: str = "auto") -> bool:
    """True when the table's statistics prove that no row has ``column`` above ``value`` (on
    delta-rs, from its add actions, with no Spark job); False when some may (or when only a
    Spark job could tell: delta-spark)."""
    return backend_for(spark, backend).nothing_above(spark, path, column, value)


def read_rows(spark: SparkSession | None, path: str, columns: Sequence[str] | None = None, *,
              backend: str = "auto", above: tuple[str, object] | None = None) -> list:
    """The rows of a small table (the ``_pipeline`` tables) on the driver, as ``Row`` objects
    (``r.name`` and ``r["name"]``; nested structs as dicts on delta-rs). On delta-rs they come
    as Arrow with no Spark job (a run reads several such tables: each Spark job costs a second
    or more in a new process); on delta-spark through Spark. A missing table has no rows.
    ``above`` as in :func:`read`: only those rows leave the table's files.

    >>> [r.name for r in read_rows(spark, "/wh/_pipeline/manifest", ["name"])]  # doctest: +SKIP
    ['binlog.000001']
    """
    if not table_exists(path, spark=spark, backend=backend):
        return []
    return backend_for(spark, backend).read_rows(spark, path, columns, above)


@dataclass(frozen=True)
class Commit:
    """One entry of a table's history (newest first in :func:`history`)."""

    version: int
    timestamp_ms: int
    operation: str
    parameters: Mapping[str, str] = field(default_factory=dict)
    user_metadata: str | None = None


def history(
    path: str, *, spark: SparkSession | None = None, backend: str = "auto", limit: int | None = None
) -> list[Commit]:
    """The table's commits, newest first (``limit`` of them, default all that the log still has).

    >>> [c.operation for c in history(str(tmp_path / "t"))]  # doctest: +SKIP
    ['MERGE', 'WRITE']
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be >= 1 or None, got {limit}")
    return backend_for(spark, backend).history(spark, path, limit)
