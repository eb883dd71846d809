"""Reading tables: existence, schema, a DataFrame of the table (delta-spark, or Spark reading the
Parquet files delta-rs lists), small tables' rows on the driver, Arrow, and the commit history."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pipelines.delta_io.arrow import _check_columns, arrow_to_spark, delta_schema_to_spark
from pipelines.delta_io.backend import _rs_table, quote_ident, resolve_backend
from pipelines.delta_io.features import physical_names, strip_mapping_metadata, uses_column_mapping


def table_exists(path: str, *, spark: SparkSession | None = None, backend: str = "auto") -> bool:
    """True when ``path`` holds a Delta table.

    >>> table_exists(str(tmp_path / "nothing"))  # doctest: +SKIP
    False
    """
    if resolve_backend(spark, backend) == "spark":
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(spark, str(path)))
    import deltalake

    return bool(deltalake.DeltaTable.is_deltatable(str(path)))


def schema(path: str, *, spark: SparkSession | None = None, backend: str = "auto") -> T.StructType:
    """The current schema of the Delta table at ``path`` as a Spark StructType.

    >>> schema(str(tmp_path / "t")).fieldNames()  # doctest: +SKIP
    ['id', '_seq']
    """
    if resolve_backend(spark, backend) == "spark":
        return strip_mapping_metadata(spark.read.format("delta").load(str(path)).schema)
    return strip_mapping_metadata(delta_schema_to_spark(_rs_table(path).schema().to_json()))


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
    if resolve_backend(spark, backend) == "spark":
        df = spark.read.format("delta").load(str(path))
        if keep is not None:
            df = df.where(keep)
        if columns is not None:
            _check_columns(columns, df.columns, f"read({path})")
            df = df.select(*[F.col(quote_ident(c)) for c in columns])
    else:
        dt = _rs_table(path)
        full = strip_mapping_metadata(delta_schema_to_spark(dt.schema().to_json()))
        wanted = None
        if columns is not None:
            _check_columns(columns, full.fieldNames(), f"read({path})")
            wanted = list(columns)
            by_name = {f.name: f for f in full.fields}
            full = T.StructType([by_name[c] for c in dict.fromkeys([*columns, *([above[0]] if above else [])])])
        df = _read_rs_files(spark, dt, full, None if above is None else _rs_files_above(dt, *above))
        if df is None:
            df = arrow_to_spark(spark, _rs_query(dt, full.fieldNames()), full)
        if keep is not None:
            df = df.where(keep)
        if wanted is not None and len(wanted) != len(full.fields):
            df = df.select(*[F.col(quote_ident(c)) for c in wanted])
    if predicate is not None:
        df = df.where(F.expr(predicate) if isinstance(predicate, str) else predicate)
    return df


def nothing_above(spark: SparkSession | None, path: str, column: str, value, *, backend: str = "auto") -> bool:
    """True when the table's statistics prove that no row has ``column`` above ``value`` (on
    delta-rs, from its add actions, with no Spark job); False when some may (or when only a
    Spark job could tell: delta-spark)."""
    if resolve_backend(spark, backend) == "spark":
        return False
    return _rs_files_above(_rs_table(path), column, value) == set()


def _rs_files_above(dt, column: str, value) -> set[str] | None:
    """The table's files (relative paths, unescaped) that may hold a row with ``column`` above
    ``value``: those whose ``max`` statistic is above it, or that have none. ``None`` when the
    column has no statistics at all (every file is read)."""
    adds = pa.table(dt.get_add_actions(flatten=True))
    stat = f"max.{column}"
    if stat not in adds.column_names:
        return None
    return {unquote(p) for p, m in zip(adds.column("path").to_pylist(), adds.column(stat).to_pylist())
            if m is None or m > value}


def _read_rs_files(spark: SparkSession, dt, schema: T.StructType, only: set[str] | None = None) -> DataFrame | None:
    """Let Spark read the table's live Parquet files itself (distributed, nothing passes
    through the driver), as delta-rs lists them (``only``: those of these relative paths). A
    column-mapped table's files hold each column under its physical name: they are read by those
    and renamed. ``None`` when the table uses a feature a plain Parquet read would get wrong:
    partition columns, deletion vectors, or nested fields under column mapping."""
    meta = dt.metadata()
    features = set(dt.protocol().reader_features or ())
    if meta.partition_columns or "deletionVectors" in features:
        return None
    physical = None
    if uses_column_mapping(meta.configuration) or "columnMapping" in features:
        physical = physical_names(dt.schema().to_json())
        if physical is None:
            return None
    # delta-rs gives URIs with percent-escapes (a backtick, a space or any non-ASCII letter in a
    # database or table name); Hadoop takes a path string as it is and would look for "%60"
    uris = [unquote(u) for u in dt.file_uris()]
    if only is not None:  # a file's URI is the table's location, then its relative path
        root = unquote(urlparse(dt.table_uri).path).rstrip("/") + "/"
        uris = [u for u in uris if (i := u.find(root)) < 0 or u[i + len(root):] in only]  # unsure: read it
    if not uris:
        return spark.createDataFrame([], schema=schema)
    if physical is None:
        return spark.read.schema(schema).parquet(*uris)
    stored = T.StructType([T.StructField(physical[f.name], f.dataType, True) for f in schema.fields])
    files = spark.read.schema(stored).parquet(*uris)
    return files.select(*[F.col(quote_ident(physical[f.name])).alias(f.name) for f in schema.fields])


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
    if resolve_backend(spark, backend) == "spark":
        return read(spark, path, columns, backend="spark", above=above).collect()
    import pyarrow.compute as pc
    from pyspark.sql import Row

    wanted = None if columns is None else list(columns)
    table = read_arrow(path, None if wanted is None or above is None else list(dict.fromkeys([*wanted, above[0]])))
    if above is not None:
        table = table.filter(pc.greater(table.column(above[0]), pa.scalar(above[1], table.schema.field(above[0]).type)))
        if wanted is not None:
            table = table.select(wanted)
    return [Row(**r) for r in table.to_pylist()]


def read_arrow(path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """The table's rows as Arrow on the driver, with delta-rs and without Spark (small tables,
    tools, tests). Column-mapped tables are read by their logical names (a plain
    ``DeltaTable.to_pyarrow_table`` reads their columns as nulls).

    >>> read_arrow(str(tmp_path / "t"), ["id"]).to_pylist()  # doctest: +SKIP
    [{'id': 1}]
    """
    dt = _rs_table(path)
    if uses_column_mapping(dt.metadata().configuration):
        return _rs_query(dt, list(columns) if columns is not None else
                         [f.name for f in delta_schema_to_spark(dt.schema().to_json()).fields])
    return dt.to_pyarrow_table(columns=list(columns) if columns is not None else None)


def _rs_query(dt, columns: Sequence[str]) -> pa.Table:
    """The table's rows through delta-rs's own query engine, which knows every reader feature
    (column mapping, deletion vectors, partitions); the rows pass through the driver."""
    from deltalake import QueryBuilder

    select = ", ".join(f'"{c.replace(chr(34), chr(34) * 2)}"' for c in columns)
    return pa.table(QueryBuilder().register("t", dt).execute(f"SELECT {select} FROM t").read_all())


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
    if resolve_backend(spark, backend) == "spark":
        from delta.tables import DeltaTable

        rows = (
            DeltaTable.forPath(spark, str(path))
            .history(limit)
            .select(
                "version",
                F.unix_millis("timestamp").alias("timestamp_ms"),
                "operation",
                "operationParameters",
                "userMetadata",
            )
            .orderBy(F.col("version").desc())
            .collect()
        )
        return [
            Commit(
                version=int(r["version"]),
                timestamp_ms=int(r["timestamp_ms"]),
                operation=r["operation"],
                parameters=dict(r["operationParameters"] or {}),
                user_metadata=r["userMetadata"],
            )
            for r in rows
        ]
    entries = _rs_table(path).history(limit)
    return [
        Commit(
            version=int(e["version"]),
            timestamp_ms=int(e.get("timestamp", 0)),
            operation=str(e.get("operation", "")),
            parameters={k: str(v) for k, v in (e.get("operationParameters") or {}).items()},
            user_metadata=e.get("userMetadata"),
        )
        for e in sorted(entries, key=lambda e: -int(e["version"]))
    ]

