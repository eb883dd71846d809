"""The one module that touches Delta tables, behind one small interface with two backends.

* ``"spark"``: delta-spark on the JVM (clusters; locally when ``DELTA_JARS`` names the jars).
* ``"rs"``: delta-rs (the ``deltalake`` package) on the driver, with Arrow between it and Spark.
  Reads are Spark Parquet reads of the files delta-rs lists; MERGE sources and small appends pass
  through the driver as Arrow (rows the driver already holds, :func:`append_rows`, without a Spark
  job); big appends (bronze) are staged: Spark tasks write the Parquet files
  into the table folder (:class:`ParquetStager`) and the driver commits them (:func:`commit_staged`).
* ``"auto"``: ``"spark"`` on a cluster whose classpath has delta-spark
  (:func:`pipelines.spark_session.delta_spark_available`), else ``"rs"`` (see :func:`resolve_backend`).

Both backends write the same Delta protocol, so a table written by one is read by the other.
Types are kept exact across the Arrow hop: Spark ``TimestampType`` <-> Delta ``timestamp`` <->
Arrow ``timestamp[us, tz=UTC]``; ``TimestampNTZType`` <-> ``timestamp_ntz`` <-> ``timestamp[us]``;
decimals keep precision and scale; bytes stay bytes; nested arrays of structs are kept.

MERGE logic lives in :mod:`pipelines.silver`; this module only offers the MERGE primitive
(:func:`merge`, with :func:`merge_spark` and :func:`merge_rs`).  Predicates and expressions
handed to it are SQL text that both Spark SQL and delta-rs (DataFusion) parse the same way;
quote every column name with :func:`quote_ident` (source column names come from the binlog and
may contain spaces, dots, quotes, backticks, emoji or SQL keywords).

Every commit (append, merge, overwrite, create, add_columns) goes through :func:`_commit`:

* it passes the fault points of :mod:`pipelines.faults` (``<operation>.<table kind>.before`` /
  ``.after``, and ``append.<kind>.materialize`` before an append computes its DataFrame);
* a commit that loses a race with another writer (delta-rs ``CommitFailedError``, delta-spark
  ``Concurrent*Exception`` / ``MetadataChangedException``) is tried again, the whole operation,
  up to :data:`COMMIT_ATTEMPTS` times with a growing, jittered pause. Each retry first looks at the
  table again: an append with a transaction id that is now recorded is skipped, ``create`` finds
  the table, ``add_columns`` adds only what is still missing, a MERGE is evaluated against the
  new snapshot (silver's MERGE clauses only apply a change newer than the row's ``_seq``).

With delta-rs, a write with a transaction id checks the id on the very snapshot it commits
against, so a writer that commits the same id in between makes this commit conflict (and the
retry skip it); a table that does not exist yet is first created empty, because delta-rs does not
check two racing creating writes against each other.
"""
from __future__ import annotations

import datetime as _dt
import functools
import json
import random
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar
from urllib.parse import unquote, urlparse

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import faults
from pipelines.delta_features import (
    COLUMN_MAPPING_MODE,
    TIMESTAMP_NTZ_FEATURE,
    create_properties,
    needs_column_mapping,
    needs_timestamp_ntz,
    physical_names,
    strip_mapping_metadata,
    uses_column_mapping,
)

Backend = Literal["auto", "spark", "rs"]
BACKENDS = ("auto", "spark", "rs")
DELTA_LOG = "_delta_log"

# Spark SQL settings delta-spark reads for idempotent DML and for the commit's user metadata.
_SPARK_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_SPARK_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_SPARK_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


class DeltaIOError(RuntimeError):
    """A Delta table operation could not be carried out as asked."""


# ---------------------------------------------------------------------------------------------
# identifiers


def quote_ident(name: str) -> str:
    """Quote one column name for Spark SQL and delta-rs predicates: backticks, inner ones doubled.

    >>> quote_ident("select")
    '`select`'
    >>> quote_ident("we`ird.name")
    '`we``ird.name`'
    """
    if not isinstance(name, str) or name == "":
        raise ValueError(f"a column name must be a non-empty string, got {name!r}")
    return "`" + name.replace("`", "``") + "`"


def qualified(alias: str, name: str) -> str:
    """``alias.`name``` for MERGE predicates.

    >>> qualified("t", "a b")
    't.`a b`'
    """
    return f"{alias}.{quote_ident(name)}"


# ---------------------------------------------------------------------------------------------
# backend choice


def resolve_backend(spark: SparkSession | None, backend: str = "auto") -> str:
    """Turn ``"auto"`` into ``"spark"`` or ``"rs"``; check that ``"spark"`` can run.

    ``"auto"`` is delta-spark on a cluster (a master that is not local) whose classpath has it,
    and delta-rs everywhere else: on one machine delta-rs commits without Spark jobs and is the
    faster of the two. Ask for ``"spark"`` to use delta-spark locally.

    >>> resolve_backend(None, "rs")
    'rs'
    >>> resolve_backend(None, "auto")
    'rs'
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "rs":
        return "rs"
    from pipelines.spark_session import delta_spark_available, is_local_master

    available = spark is not None and delta_spark_available(spark)
    if backend == "spark":
        if not available:
            raise DeltaIOError(
                "backend='spark' needs delta-spark on the JVM classpath and a SparkSession: run make "
                "setup (it fetches the jars into jars/) and build the session with delta=True, set "
                "DELTA_JARS to local jar paths, or pass delta_packages to build_session()"
            )
        return "spark"
    return "spark" if available and not is_local_master(_master(spark)) else "rs"


def _master(spark: SparkSession) -> str | None:
    context = getattr(spark, "sparkContext", None)
    return None if context is None else context.master


# ---------------------------------------------------------------------------------------------
# Spark <-> Arrow <-> Delta types

_SIMPLE_TO_ARROW: dict[type, pa.DataType] = {
    T.NullType: pa.null(),
    T.BooleanType: pa.bool_(),
    T.ByteType: pa.int8(),
    T.ShortType: pa.int16(),
    T.IntegerType: pa.int32(),
    T.LongType: pa.int64(),
    T.FloatType: pa.float32(),
    T.DoubleType: pa.float64(),
    T.StringType: pa.string(),
    T.BinaryType: pa.binary(),
    T.DateType: pa.date32(),
    T.TimestampType: pa.timestamp("us", tz="UTC"),
    T.TimestampNTZType: pa.timestamp("us"),
}


def spark_type_to_arrow(dt: T.DataType, *, force_nullable: bool = False) -> pa.DataType:
    """The Arrow type that carries a Spark type exactly (and that delta-rs maps to the same Delta type).

    >>> spark_type_to_arrow(T.TimestampType())
    TimestampType(timestamp[us, tz=UTC])
    >>> spark_type_to_arrow(T.DecimalType(20, 0))
    Decimal128Type(decimal128(20, 0))
    """
    simple = _SIMPLE_TO_ARROW.get(type(dt))
    if simple is not None:
        return simple
    if isinstance(dt, T.DecimalType):
        return pa.decimal128(dt.precision, dt.scale)
    if isinstance(dt, T.ArrayType):
        element = spark_type_to_arrow(dt.elementType, force_nullable=force_nullable)
        return pa.list_(pa.field("element", element, nullable=force_nullable or dt.containsNull))
    if isinstance(dt, T.MapType):
        key = spark_type_to_arrow(dt.keyType, force_nullable=force_nullable)
        value = spark_type_to_arrow(dt.valueType, force_nullable=force_nullable)
        return pa.map_(key, pa.field("value", value, nullable=force_nullable or dt.valueContainsNull))
    if isinstance(dt, T.StructType):
        return pa.struct([spark_field_to_arrow(f, force_nullable=force_nullable) for f in dt.fields])
    raise TypeError(f"no Arrow mapping for Spark type {dt.simpleString()}")


def spark_field_to_arrow(f: T.StructField, *, force_nullable: bool = False) -> pa.Field:
    """One Spark field as an Arrow field (same name, exact type)."""
    return pa.field(
        f.name,
        spark_type_to_arrow(f.dataType, force_nullable=force_nullable),
        nullable=force_nullable or f.nullable,
    )


def spark_schema_to_arrow(schema: T.StructType, *, force_nullable: bool = False) -> pa.Schema:
    """A Spark schema as an Arrow schema.

    >>> spark_schema_to_arrow(T.StructType([T.StructField("ts", T.TimestampNTZType())]))
    ts: timestamp[us]
    """
    return pa.schema([spark_field_to_arrow(f, force_nullable=force_nullable) for f in schema.fields])


def arrow_schema_to_spark(arrow_schema: pa.Schema) -> T.StructType:
    """The inverse of :func:`spark_schema_to_arrow`: a zoned timestamp is ``TimestampType``, a
    naive one ``TimestampNTZType``.

    >>> arrow_schema_to_spark(pa.schema([("t", pa.timestamp("us"))]))
    StructType([StructField('t', TimestampNTZType(), True)])
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema, prefer_timestamp_ntz=True)


def delta_schema_to_spark(delta_schema_json: str) -> T.StructType:
    """A Delta schema (its JSON form, which is Spark's own schema JSON) as a Spark StructType.

    >>> delta_schema_to_spark('{"type":"struct","fields":[{"name":"t","type":"timestamp_ntz","nullable":true,"metadata":{}}]}')
    StructType([StructField('t', TimestampNTZType(), True)])
    """
    return T.StructType.fromJson(json.loads(delta_schema_json))


def _delta_field_json(f: T.StructField) -> str:
    """A Spark field as Delta field JSON (delta-rs ``Field.from_json``)."""
    return json.dumps(f.jsonValue())


def _check_columns(wanted: Iterable[str], present: Sequence[str], what: str) -> None:
    missing = [c for c in wanted if c not in present]
    if missing:
        raise DeltaIOError(f"{what}: missing columns {missing}; present columns: {list(present)}")


def arrow_to_spark(
    spark: SparkSession, table: pa.Table, schema: T.StructType | None = None
) -> DataFrame:
    """A pyarrow Table as a Spark DataFrame with an explicit, exact Spark schema.

    The table is first cast to the Arrow form of ``schema`` (columns by name, in schema order),
    so Arrow quirks such as string views, large types or naive-vs-zoned timestamps cannot leak
    into the Spark types.  An empty table gives an empty DataFrame with ``schema``.
    Without ``schema`` the Spark types follow the Arrow types.

    >>> df = arrow_to_spark(spark, pa.table({"a": pa.array([1], pa.int8())}),
    ...                     T.StructType([T.StructField("a", T.ByteType())]))  # doctest: +SKIP
    """
    if schema is None:
        return spark.createDataFrame(table)
    _check_columns(schema.fieldNames(), table.column_names, "arrow_to_spark")
    if table.num_rows == 0:  # pyspark's Arrow path cannot take chunk-less columns
        return spark.createDataFrame([], schema=schema)
    target = spark_schema_to_arrow(schema)
    columns = []
    for f in target:
        column = table.column(f.name)
        columns.append(column if column.type == f.type else column.cast(f.type))
    cast = pa.Table.from_arrays(columns, schema=target)
    return spark.createDataFrame(cast, schema=schema)


def spark_to_arrow(df: DataFrame, schema: T.StructType | None = None) -> pa.Table:
    """A Spark DataFrame as a pyarrow Table whose types delta-rs maps back to the same Delta types.

    ``schema`` (default: the DataFrame's) picks and orders the columns and fixes their types;
    every Arrow field is nullable, as Delta tables written from Spark are.
    """
    schema = df.schema if schema is None else schema
    _check_columns(schema.fieldNames(), df.columns, "spark_to_arrow")
    if len(set(df.columns)) != len(df.columns):
        raise DeltaIOError(f"spark_to_arrow: duplicate column names in {df.columns}")
    selected = df.select(*[F.col(quote_ident(f.name)).cast(f.dataType) for f in schema.fields])
    table = selected.toArrow()
    target = spark_schema_to_arrow(schema, force_nullable=True)
    columns = []
    for f in target:
        column = table.column(f.name)
        columns.append(column if column.type == f.type else column.cast(f.type))
    return pa.Table.from_arrays(columns, schema=target)


# ---------------------------------------------------------------------------------------------
# reading


def _rs_table(path: str):
    import deltalake

    return deltalake.DeltaTable(str(path))


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


# ---------------------------------------------------------------------------------------------
# transaction identifiers (idempotent writes)

def check_txn(txn_app_id: str | None, txn_version: int | None) -> None:
    """Fail fast unless the transaction identifier is complete (both parts) or absent.

    >>> check_txn("loader", 3)
    """
    if (txn_app_id is None) != (txn_version is None):
        raise ValueError(
            f"txn_app_id and txn_version go together: got txn_app_id={txn_app_id!r}, "
            f"txn_version={txn_version!r}"
        )
    if txn_app_id is not None:
        if not isinstance(txn_app_id, str) or not txn_app_id:
            raise ValueError(f"txn_app_id must be a non-empty string, got {txn_app_id!r}")
        if isinstance(txn_version, bool) or not isinstance(txn_version, int) or txn_version < 0:
            raise ValueError(f"txn_version must be an int >= 0, got {txn_version!r}")


def _spark_log_txn_version(spark: SparkSession, path: str, app_id: str) -> int | None:
    """The newest ``txn`` version for ``app_id`` in delta-spark's own snapshot of the table.

    The snapshot is the last checkpoint plus the commits after it (what Delta itself checks an
    idempotent write against), so the cost does not grow with the table's history and the ids
    survive log cleanup. Reached through the JVM (``DeltaLog.update().transactions()``): the
    Python API has no call for it.
    """
    found = spark_snapshot(spark, path).transactions().get(app_id)
    return int(found.get()) if found.isDefined() else None


def spark_delta_log(spark: SparkSession, path: str):
    """delta-spark's ``DeltaLog`` of the table (through the JVM: checkpoints and the snapshot's
    state have no Python API)."""
    return spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path))


def spark_snapshot(spark: SparkSession, path: str):
    """The table's current delta-spark snapshot: its last checkpoint plus the commits after it."""
    log = spark_delta_log(spark, path)
    return log.update(*[getattr(log, f"update$default${i}")() for i in (1, 2, 3)])


def last_txn_version(
    path: str, app_id: str, *, spark: SparkSession | None = None, backend: str = "auto"
) -> int | None:
    """The last transaction version recorded for ``app_id`` on the table, or None.

    >>> last_txn_version(str(tmp_path / "t"), "bronze-loader")  # doctest: +SKIP
    7
    """
    check_txn(app_id, 0)
    if not table_exists(path, spark=spark, backend=backend):
        return None
    if resolve_backend(spark, backend) == "spark":
        return _spark_log_txn_version(spark, path, app_id)
    return _rs_table(path).transaction_version(app_id)


def _rs_commit_properties(
    txn_app_id: str | None, txn_version: int | None, user_metadata: str | None
):
    from deltalake import CommitProperties, Transaction

    if txn_app_id is None and user_metadata is None:
        return None
    return CommitProperties(
        custom_metadata=None if user_metadata is None else {"userMetadata": user_metadata},
        app_transactions=None if txn_app_id is None else [Transaction(txn_app_id, txn_version)],
    )


_COMMIT_IDENTITY_KEYS = (_SPARK_TXN_APP_ID, _SPARK_TXN_VERSION, _SPARK_USER_METADATA)


def commit_session(spark: SparkSession, settings: Mapping[str, str | None] | None = None) -> SparkSession:
    """A session of its own for one delta-spark command: ``spark.newSession()`` (same SparkContext,
    its own SQL conf) with the caller's runtime settings copied over and ``settings`` on top.

    delta-spark takes a MERGE's transaction id and a commit's user metadata from SQL session
    settings. Set on the shared session they would reach every commit that any thread makes
    meanwhile (a CREATE on another thread once recorded a MERGE's transaction id, and the MERGE
    was then skipped as already applied). On a session of its own they reach this command only.
    The identity keys are never copied from ``spark``: a commit carries only what it was given.
    """
    own = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if key in _COMMIT_IDENTITY_KEYS or own.conf.get(key, None) == value:
            continue
        if own.conf.isModifiable(key):
            own.conf.set(key, value)
    for key, value in (settings or {}).items():
        if value is not None:
            own.conf.set(key, value)
    return own


# ---------------------------------------------------------------------------------------------
# commits: fault points and conflict retries

R = TypeVar("R")

COMMIT_ATTEMPTS = 5  # tries of one commit that keeps losing races with other writers
_BACKOFF_S = 0.25  # pause before the 2nd try; doubled each time, jittered x0.5..1.5

# delta-spark's conflict exceptions (delta.exceptions / io.delta.exceptions), by class name
_SPARK_CONFLICTS = (
    "ConcurrentModificationException", "ConcurrentAppendException", "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException", "ConcurrentTransactionException", "MetadataChangedException",
    "ProtocolChangedException",
)
_retry_lock = threading.Lock()
_retry_count = 0


def is_commit_conflict(error: BaseException) -> bool:
    """True when ``error`` says that another writer committed first (the commit did not happen).

    >>> is_commit_conflict(ValueError("bad predicate"))
    False
    """
    names = {c.__name__ for c in type(error).__mro__}
    if "CommitFailedError" in names or names.intersection(_SPARK_CONFLICTS):
        return True
    text = str(error)  # a Py4JJavaError names the Java class in its text
    return any(f"io.delta.exceptions.{n}" in text for n in _SPARK_CONFLICTS)


def conflict_retries() -> int:
    """How many commits this process has tried again after a conflict (logs, tests)."""
    return _retry_count


def _commit(op: str, path: str, attempt: Callable[[int], R]) -> R:
    """Run one commit ``attempt(n)`` (``n`` = 0 for the first try) between the fault points
    ``<op>.<kind>.before`` and ``.after``, trying again after commit conflicts.

    ``attempt`` must be safe to call again after a conflict: on a retry (``n > 0``) it looks at
    the table again before writing.
    """
    global _retry_count
    kind = faults.table_kind(path)
    faults.point(f"{op}.{kind}.before")
    for n in range(COMMIT_ATTEMPTS):
        try:
            result = attempt(n)
            break
        except Exception as e:  # noqa: BLE001 - only conflicts are tried again
            if not is_commit_conflict(e):
                raise
            if n + 1 == COMMIT_ATTEMPTS:
                raise DeltaIOError(
                    f"{op} {path}: lost {COMMIT_ATTEMPTS} commit races in a row to other writers; last: {e}"
                ) from e
            pause = _BACKOFF_S * (2 ** n) * (0.5 + random.random())
            first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"warning: delta_io: {op} {path}: commit conflict ({first_line}); trying again in "
                  f"{pause:.2f} s ({n + 2}/{COMMIT_ATTEMPTS})", file=sys.stderr, flush=True)
            with _retry_lock:
                _retry_count += 1
            time.sleep(pause)
    faults.point(f"{op}.{kind}.after")
    return result


def _rs_snapshot_for_txn(path: str, txn_app_id: str | None, arrow_schema: pa.Schema):
    """For an idempotent delta-rs write: the table's current snapshot, to check the transaction id
    on and to commit against (a commit made after it then conflicts, so two writers racing with one
    txn id cannot both land). A missing table is created first, empty: delta-rs does not check
    two racing creating writes against each other. None when there is no txn id."""
    if txn_app_id is None:
        return None
    import deltalake

    if not deltalake.DeltaTable.is_deltatable(str(path)):
        _rs_create(path, arrow_schema)
    return deltalake.DeltaTable(str(path))


def _rs_txn_recorded(table, txn_app_id: str | None, txn_version: int | None) -> bool:
    """True when the delta-rs snapshot ``table`` already holds ``txn_version`` for ``txn_app_id``."""
    if txn_app_id is None:
        return False
    last = table.transaction_version(txn_app_id)
    return last is not None and last >= txn_version


def _txn_recorded(path: str, txn_app_id: str | None, txn_version: int | None, spark, backend: str) -> bool:
    """True when the table already holds ``txn_version`` (or later) for ``txn_app_id``."""
    if txn_app_id is None:
        return False
    last = last_txn_version(path, txn_app_id, spark=spark, backend=backend)
    return last is not None and last >= txn_version


# ---------------------------------------------------------------------------------------------
# writing


def create_if_missing(
    path: str,
    table_schema: T.StructType,
    *,
    spark: SparkSession | None = None,
    backend: str = "auto",
) -> bool:
    """Create an empty Delta table with ``table_schema`` unless one exists; True when created.

    An existing table is left as it is (its schema is not compared: see :func:`add_columns`).

    A table whose names need column mapping is created with it, by either backend
    (:mod:`pipelines.delta_features`).

    >>> create_if_missing(str(tmp_path / "t"), T.StructType([T.StructField("id", T.IntegerType())]))  # doctest: +SKIP
    True
    """
    if not isinstance(table_schema, T.StructType) or not table_schema.fields:
        raise ValueError(f"create_if_missing needs a non-empty StructType, got {table_schema!r}")
    if table_exists(path, spark=spark, backend=backend):
        return False
    which = resolve_backend(spark, backend)
    table_schema = strip_mapping_metadata(table_schema)

    def attempt(n: int) -> bool:
        if n and table_exists(path, spark=spark, backend=which):
            return False
        if which == "spark":
            # SQL, not DeltaTable.createIfNotExists(): its builder puts the path between
            # backticks without doubling the backticks a path may hold
            cols = ", ".join(f"{quote_ident(f.name)} {_ddl_type(f.dataType)}" for f in table_schema.fields)
            props = ", ".join(f"'{k}' = '{v}'" for k, v in create_properties(table_schema).items())
            commit_session(spark).sql(f"CREATE TABLE IF NOT EXISTS delta.{quote_ident(str(path))} ({cols}) USING delta"
                                      + (f" TBLPROPERTIES ({props})" if props else ""))
            return True
        _rs_create(path, table_schema)
        return True

    return _commit("create", path, attempt)


def _rs_create(path: str, table_schema: T.StructType | pa.Schema) -> None:
    """Create an empty table with delta-rs (nothing when one exists), with the properties its
    names need; every column nullable."""
    from deltalake import DeltaTable, Schema

    if isinstance(table_schema, pa.Schema):
        table_schema = arrow_schema_to_spark(table_schema)
    nullable = T.StructType([T.StructField(f.name, f.dataType, True) for f in table_schema.fields])
    properties = create_properties(nullable)
    DeltaTable.create(str(path), Schema.from_json(nullable.json()), mode="ignore", configuration=properties or None)
    if properties:
        _rs_ensure_mapping_feature(path)


def create_with_rows_rs(path: str, table_schema: T.StructType, rows: Sequence[tuple], *,
                        user_metadata: str | None = None) -> bool:
    """Create a table with delta-rs and its first ``rows`` (tuples in ``table_schema`` order) in one
    commit, the same table :func:`create_if_missing` then an append would make. False (nothing
    done) when the table needs properties (column mapping): create it the usual way then.
    Raises when a table exists at ``path`` already.

    >>> create_with_rows_rs(str(tmp_path / "t"), T.StructType([T.StructField("id", T.IntegerType())]), [(1,)])  # doctest: +SKIP
    True
    """
    from deltalake import write_deltalake

    table_schema = strip_mapping_metadata(table_schema)
    if create_properties(table_schema):
        return False
    data = rows_to_arrow(rows, table_schema)

    def attempt(n: int) -> bool:
        write_deltalake(str(path), data, mode="error",
                        commit_properties=_rs_commit_properties(None, None, user_metadata))
        return True

    return _commit("create", path, attempt)


def _rs_ensure_mapping_feature(path: str) -> None:
    """Make a column-mapped table's protocol say so. deltalake 1.6 creates a table that has
    column mapping and another feature (a TIMESTAMP_NTZ column) with table-features protocol 3/7
    but without ``columnMapping`` among its features; its writers then put the logical names in
    the Parquet files, which delta-spark reads as NULLs. Done right after the create, and again
    before a write in case a run died in between."""
    from deltalake import TableFeatures

    dt = _rs_table(path)
    protocol = dt.protocol()
    if not uses_column_mapping(dt.metadata().configuration):
        return
    if protocol.min_writer_version >= 7 and "columnMapping" not in (protocol.writer_features or ()):
        dt.alter.add_feature(TableFeatures.ColumnMapping, allow_protocol_versions_increase=True)


def _ddl_type(dt: T.DataType) -> str:
    """Spark DDL text for a type, quoting nested field names (``simpleString`` does not)."""
    if isinstance(dt, T.StructType):
        return "STRUCT<" + ", ".join(f"{quote_ident(f.name)}: {_ddl_type(f.dataType)}" for f in dt.fields) + ">"
    if isinstance(dt, T.ArrayType):
        return f"ARRAY<{_ddl_type(dt.elementType)}>"
    if isinstance(dt, T.MapType):
        return f"MAP<{_ddl_type(dt.keyType)}, {_ddl_type(dt.valueType)}>"
    return dt.simpleString()


def add_columns(
    path: str,
    new_fields: Sequence[T.StructField] | T.StructType,
    *,
    spark: SparkSession | None = None,
    backend: str = "auto",
) -> list[str]:
    """Add nullable columns to the table (schema evolution); returns the names really added.

    Columns already present with the same type are skipped, so the call is idempotent; a column
    present with another type raises.  Names are compared case-insensitively, as MySQL and Spark do.

    >>> add_columns(str(tmp_path / "t"), [T.StructField("note", T.StringType())])  # doctest: +SKIP
    ['note']
    """
    fields = list(new_fields.fields if isinstance(new_fields, T.StructType) else new_fields)
    which = resolve_backend(spark, backend)

    def missing() -> list[T.StructField]:
        current = {f.name.lower(): f for f in schema(path, spark=spark, backend=which).fields}
        conflicts, to_add = [], []
        for f in fields:
            have = current.get(f.name.lower())
            if have is None:
                to_add.append(T.StructField(f.name, f.dataType, True))
            elif have.dataType != f.dataType:
                conflicts.append(
                    f"{f.name}: table has {have.dataType.simpleString()}, asked {f.dataType.simpleString()}")
        if conflicts:
            raise DeltaIOError(f"add_columns({path}): columns exist with other types: {conflicts}")
        return to_add

    to_add = missing()
    if not to_add:
        return []
    if which == "rs" and _rs_needs_spark_to_add(path, to_add):
        return _add_columns_rs_by_spark(path, to_add, spark)

    def attempt(n: int) -> list[str]:
        adding = missing() if n else to_add
        if not adding:
            return []
        if which == "spark":
            session = commit_session(spark)
            _enable_features_spark(session, path, adding)
            target = "delta." + quote_ident(str(path))
            cols = ", ".join(f"{quote_ident(f.name)} {_ddl_type(f.dataType)}" for f in adding)
            session.sql(f"ALTER TABLE {target} ADD COLUMNS ({cols})")
        else:
            from deltalake import Field

            _rs_table(path).alter.add_columns([Field.from_json(_delta_field_json(f)) for f in adding])
        return [f.name for f in adding]

    return _commit("add_columns", path, attempt)


def _enable_features_spark(session: SparkSession, path: str, adding: Sequence[T.StructField]) -> None:
    """Enable the protocol features that ``adding`` needs and the table lacks (delta-spark does
    not enable them by itself when columns are added): column mapping for names that need it,
    timestampNtz for TIMESTAMP_NTZ columns. Each is one commit, made only when missing."""
    wanted: dict[str, str] = {}
    detail = None
    if needs_column_mapping(adding) or needs_timestamp_ntz(adding):
        detail = session.sql(f"DESCRIBE DETAIL delta.{quote_ident(str(path))}").collect()[0].asDict()
    if detail is None:
        return
    properties = dict(detail.get("properties") or {})
    features = set(detail.get("tableFeatures") or ())
    if needs_column_mapping(adding) and not uses_column_mapping(properties):
        wanted[COLUMN_MAPPING_MODE] = "name"
    if needs_timestamp_ntz(adding) and "timestampNtz" not in features:
        wanted[TIMESTAMP_NTZ_FEATURE] = "supported"
    if wanted:
        pairs = ", ".join(f"'{k}' = '{v}'" for k, v in wanted.items())
        session.sql(f"ALTER TABLE delta.{quote_ident(str(path))} SET TBLPROPERTIES ({pairs})")


def _rs_needs_spark_to_add(path: str, adding: Sequence[T.StructField]) -> bool:
    """True when delta-rs cannot add ``adding``: it cannot change the schema of a column-mapped
    table (deltalake 1.6: "Schema evolution on column-mapped tables is not yet supported"), nor
    turn column mapping on for a table that has none."""
    dt = _rs_table(path)
    return uses_column_mapping(dt.metadata().configuration) or needs_column_mapping(adding)


def _add_columns_rs_by_spark(path: str, adding: Sequence[T.StructField], spark: SparkSession | None) -> list[str]:
    """Columns that delta-rs cannot add (see :func:`_rs_needs_spark_to_add`) are added by
    delta-spark, when this session has it: the table stays a table both backends write."""
    from pipelines.spark_session import delta_spark_available

    if spark is None or not delta_spark_available(spark):
        names = [f.name for f in adding]
        raise DeltaIOError(
            f"add_columns({path}): cannot add {names} with delta-rs: the table needs column mapping "
            "(a column name holds one of ' ,;{}()\\n\\t='), and deltalake 1.6 cannot change the schema of "
            "a column-mapped table. Run this step with delta-spark on the classpath (make setup "
            "fetches the jars; set delta.backend: spark, or --delta-backend spark)")
    return add_columns(path, adding, spark=spark, backend="spark")


def append(
    spark: SparkSession,
    df: DataFrame,
    path: str,
    *,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    schema_evolution: bool = True,
    backend: str = "auto",
) -> bool:
    """Append ``df`` to the table at ``path`` (created when missing); False when skipped.

    With ``txn_app_id``/``txn_version`` the append is idempotent: it is recorded as a Delta
    transaction identifier and skipped when the table already holds a version >= ``txn_version``
    for that app.  With ``schema_evolution`` new columns of ``df`` are added to the table.

    >>> append(spark, batch_df, str(tmp_path / "bronze"), txn_app_id="loader", txn_version=3)  # doctest: +SKIP
    True
    >>> append(spark, batch_df, str(tmp_path / "bronze"), txn_app_id="loader", txn_version=3)  # doctest: +SKIP
    False
    """
    if df is None:
        raise ValueError("'df' in append cannot be None")
    check_txn(txn_app_id, txn_version)
    which = resolve_backend(spark, backend)
    if _txn_recorded(path, txn_app_id, txn_version, spark, which):
        return False
    faults.point(f"append.{faults.table_kind(path)}.materialize")
    if which == "spark":
        # a table whose names need column mapping, and new columns, first: with the features
        # their names and types need (the write itself would refuse them)
        if not table_exists(path, spark=spark, backend=which):
            if create_properties(df.schema):
                create_if_missing(path, df.schema, spark=spark, backend=which)
        elif schema_evolution:
            add_columns(path, _new_fields(df.schema, schema(path, spark=spark, backend=which)), spark=spark,
                        backend=which)
        writer = df.write.format("delta").mode("append")
        if schema_evolution:
            writer = writer.option("mergeSchema", "true")
        if txn_app_id is not None:
            writer = writer.option("txnAppId", txn_app_id).option("txnVersion", str(txn_version))

        def attempt(n: int) -> bool:
            if n and _txn_recorded(path, txn_app_id, txn_version, spark, which):
                return False
            writer.save(str(path))
            return True

        return _commit("append", path, attempt)
    return _append_rs(path, spark_to_arrow(df), txn_app_id, txn_version, schema_evolution, spark)


def _new_fields(incoming: T.StructType, current: T.StructType) -> list[T.StructField]:
    """The fields of ``incoming`` that ``current`` lacks (names compared case-insensitively)."""
    have = {f.name.lower() for f in current.fields}
    return [f for f in incoming.fields if f.name.lower() not in have]


def append_rows(
    spark: SparkSession,
    rows: Sequence[tuple],
    schema: str | T.StructType,
    path: str,
    *,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    schema_evolution: bool = True,
    backend: str = "auto",
) -> bool:
    """:func:`append` for a few rows the driver holds (manifests, run logs, watermarks).

    ``schema`` is a Spark schema or its DDL string; every timestamp must carry a time zone. With
    delta-spark the rows become a DataFrame; with delta-rs they go straight to Arrow, without a
    Spark job (each one cost about 0.3 s, several per run).

    >>> append_rows(spark, [("a", 1)], "name STRING, n BIGINT", str(tmp_path / "log"))  # doctest: +SKIP
    True
    """
    check_txn(txn_app_id, txn_version)
    which = resolve_backend(spark, backend)
    struct = schema if isinstance(schema, T.StructType) else ddl_schema(schema)
    if which == "spark":
        return append(spark, spark.createDataFrame(list(rows), struct), path, txn_app_id=txn_app_id,
                      txn_version=txn_version, schema_evolution=schema_evolution, backend=which)
    if _txn_recorded(path, txn_app_id, txn_version, spark, which):
        return False
    faults.point(f"append.{faults.table_kind(path)}.materialize")
    return _append_rs(path, rows_to_arrow(rows, struct), txn_app_id, txn_version, schema_evolution, spark)


@functools.lru_cache(maxsize=64)
def ddl_schema(ddl: str) -> T.StructType:
    """A DDL string (``"a STRING, b BIGINT"``) as a Spark schema (parsed by Spark's own parser).

    >>> ddl_schema("a STRING, `b c` BIGINT")  # doctest: +SKIP
    StructType([StructField('a', StringType(), True), StructField('b c', LongType(), True)])
    """
    parsed = T._parse_datatype_string(ddl)
    if not isinstance(parsed, T.StructType):
        raise DeltaIOError(f"not a list of columns: {ddl!r}")
    return parsed


def rows_to_arrow(rows: Sequence[tuple], schema: T.StructType) -> pa.Table:
    """Python rows (tuples in ``schema`` order) as an Arrow table with the types
    :func:`spark_to_arrow` gives (every field nullable).

    >>> rows_to_arrow([("a", 1)], T.StructType([T.StructField("s", T.StringType()), T.StructField("n", T.LongType())])).num_rows
    1
    """
    target = spark_schema_to_arrow(schema, force_nullable=True)
    width = len(target)
    for i, row in enumerate(rows):
        if len(row) != width:
            raise DeltaIOError(f"row {i} has {len(row)} value(s), the schema {len(target)}: {schema.simpleString()}")
    columns = []
    for j, field in enumerate(target):
        values = [row[j] for row in rows]
        if pa.types.is_nested(field.type):  # Spark takes a struct as a list too, Arrow only a tuple
            values = [_for_arrow(v, schema[j].dataType) for v in values]
        if pa.types.is_timestamp(field.type) and field.type.tz is not None:
            naive = next((v for v in values if isinstance(v, _dt.datetime) and v.tzinfo is None), None)
            if naive is not None:
                raise DeltaIOError(f"column {field.name!r}: timestamp {naive} has no time zone")
        try:
            columns.append(pa.array(values, type=field.type))
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise DeltaIOError(f"column {field.name!r} ({schema[j].dataType.simpleString()}): {e}") from e
    return pa.Table.from_arrays(columns, schema=target)


def _for_arrow(value, dt: T.DataType):
    """A nested Python value in the form ``pa.array`` takes (structs as tuples or dicts)."""
    if value is None:
        return None
    if isinstance(dt, T.StructType):
        if isinstance(value, dict):
            return {f.name: _for_arrow(value.get(f.name), f.dataType) for f in dt.fields}
        if len(value) != len(dt.fields):
            raise DeltaIOError(f"struct value {value!r} has {len(value)} field(s), the type {len(dt.fields)}: "
                               f"{dt.simpleString()}")
        return tuple(_for_arrow(v, f.dataType) for v, f in zip(value, dt.fields))
    if isinstance(dt, T.ArrayType):
        return [_for_arrow(v, dt.elementType) for v in value]
    return value


def _append_rs(path: str, data: pa.Table, txn_app_id: str | None, txn_version: int | None,
               schema_evolution: bool, spark: SparkSession | None = None) -> bool:
    from deltalake import write_deltalake

    def attempt_rs(n: int) -> bool:
        target = _rs_snapshot_for_txn(path, txn_app_id, data.schema)
        if target is not None and _rs_txn_recorded(target, txn_app_id, txn_version):
            return False
        rows, mode = data, "merge" if schema_evolution else None
        if target is None and not deltalake_table_exists(path):
            if not needs_column_mapping(arrow_schema_to_spark(data.schema)):  # the write creates it
                write_deltalake(str(path), rows, mode="append", schema_mode=mode,
                                commit_properties=_rs_commit_properties(txn_app_id, txn_version, None))
                return True
            _rs_create(path, data.schema)  # with column mapping, which its names need
        table = target if target is not None else _rs_table(path)
        if uses_column_mapping(table.metadata().configuration):
            _rs_ensure_mapping_feature(path)
            table = _rs_table(path) if target is None else _rs_snapshot_for_txn(path, txn_app_id, data.schema)
            # delta-rs writes a column-mapped table only with its exact columns: new ones are
            # added first (by delta-spark, see add_columns), missing ones are written as nulls
            current = schema(path, backend="rs")
            new = _new_fields(arrow_schema_to_spark(data.schema), current)
            if new and schema_evolution:
                add_columns(path, new, spark=spark, backend="rs")
                current = schema(path, backend="rs")
                table = _rs_table(path) if target is None else _rs_snapshot_for_txn(path, txn_app_id, data.schema)
            rows, mode = _fit_columns(data, current), None
        write_deltalake(
            table,
            rows,
            mode="append",
            schema_mode=mode,
            commit_properties=_rs_commit_properties(txn_app_id, txn_version, None),
        )
        return True

    return _commit("append", path, attempt_rs)


def deltalake_table_exists(path: str) -> bool:
    import deltalake

    return bool(deltalake.DeltaTable.is_deltatable(str(path)))


def _fit_columns(data: pa.Table, table_schema: T.StructType) -> pa.Table:
    """``data`` with exactly the table's columns, in its order: columns it lacks are nulls."""
    columns = []
    for f in spark_schema_to_arrow(table_schema, force_nullable=True):
        if f.name in data.column_names:
            column = data.column(f.name)
            columns.append(column if column.type == f.type else column.cast(f.type))
        else:
            columns.append(pa.nulls(data.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=spark_schema_to_arrow(table_schema, force_nullable=True))


# ---------------------------------------------------------------------------------------------
# staged appends (delta-rs): Spark tasks write the Parquet files, the driver commits them
#
# With delta-rs every other write passes through the driver. For the big appends (bronze) the
# tasks instead write their rows straight into the table folder with :class:`ParquetStager`
# and hand back a small :class:`StagedFile` per file; :func:`commit_staged` then adds them all
# in one commit. Files of a task that fails, or of a run killed before the commit, are in no
# commit: readers never see them, and ``VACUUM`` removes them.

STAGED_BATCH_ROWS = 20_000  # rows held as Python tuples in a task before they become Arrow
STAGED_FILE_ROWS = 2_000_000  # rows per Parquet file, at most


@dataclass(frozen=True)
class StagedFile:
    """One Parquet file written into a table folder, not yet committed."""

    path: str  # relative to the table root
    size: int
    rows: int
    stats: str  # the add action's statistics (JSON)


def _stats_json(rows: int, lo: dict, hi: dict, nulls: dict) -> str:
    return json.dumps({"numRecords": rows, "minValues": {k: _stat_value(v, False) for k, v in lo.items()},
                       "maxValues": {k: _stat_value(v, True) for k, v in hi.items()}, "nullCount": nulls},
                      separators=(",", ":"))


def _stat_value(v, upper: bool):
    """A min/max statistic as Delta writes it: timestamps as UTC ISO text in milliseconds, the
    minimum rounded down and the maximum up (so a file is never skipped that holds a match)."""
    if not isinstance(v, _dt.datetime):
        return v
    if v.tzinfo is None:  # pyarrow gives tz-naive values for a timestamp without a zone: UTC
        v = v.replace(tzinfo=_dt.timezone.utc)
    v = v.astimezone(_dt.timezone.utc)
    ms = v.replace(microsecond=v.microsecond // 1000 * 1000)
    if upper and ms < v:
        ms += _dt.timedelta(milliseconds=1)
    return ms.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms.microsecond // 1000:03d}Z"


class ParquetStager:
    """Write rows (tuples in ``schema`` order) as Parquet files into the folder of the table at
    ``table_uri``, a few thousand rows at a time, so a task never holds more than
    :data:`STAGED_BATCH_ROWS` rows. ``stats_columns`` (top-level string, integer or timestamp columns) get
    min/max/null-count statistics in the add actions; every file gets its row count.
    ``parquet_options`` go to ``pyarrow.parquet.ParquetWriter`` (which columns get dictionaries
    and Parquet statistics, ...); whole record batches can be added with :meth:`add_batch`.

    Runs inside Spark tasks: it uses pyarrow only.

    >>> stager = ParquetStager("/wh/bronze/binlog_changes", arrow_schema, stats_columns=["_seq"])  # doctest: +SKIP
    >>> for row in rows: stager.add(row)  # doctest: +SKIP
    >>> files = stager.close()  # doctest: +SKIP
    """

    def __init__(self, table_uri: str, schema: pa.Schema, *, stats_columns: Sequence[str] = (),
                 batch_rows: int = STAGED_BATCH_ROWS, file_rows: int = STAGED_FILE_ROWS,
                 parquet_options: dict | None = None):
        self.uri, self.schema = str(table_uri), schema
        self.parquet_options = dict(parquet_options or {})  # for pyarrow.parquet.ParquetWriter
        self.batch_rows, self.file_rows = batch_rows, file_rows
        self._stat_idx = [(schema.get_field_index(c), c) for c in stats_columns]
        missing = [c for i, c in self._stat_idx if i < 0]
        if missing:
            raise DeltaIOError(f"ParquetStager: no column(s) {missing} for statistics in {schema.names}")
        self._fs, self._root = _arrow_fs(self.uri)
        self._rows: list[tuple] = []
        self._writer = None
        self._file: str | None = None
        self._file_rows = 0
        self._lo: dict = {}
        self._hi: dict = {}
        self._nulls: dict = {}
        self.files: list[StagedFile] = []

    def add(self, row: tuple) -> None:
        self._rows.append(row)
        if len(self._rows) >= self.batch_rows:
            self._flush()

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Write a record batch of rows (in ``schema``) after the rows added so far."""
        self._flush()
        if batch.schema != self.schema:
            raise DeltaIOError(f"ParquetStager: batch schema {batch.schema} is not the table's {self.schema}")
        self._write(batch)

    def _flush(self) -> None:
        if not self._rows:
            return
        columns = list(zip(*self._rows))
        self._rows = []
        self._write(pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(columns, self.schema)], schema=self.schema))

    def _write(self, batch: pa.RecordBatch) -> None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if self._writer is None:
            import uuid

            self._file = f"part-{len(self.files):05d}-{uuid.uuid4()}-c000.snappy.parquet"
            options = {"compression": "snappy", **self.parquet_options}
            self._writer = pq.ParquetWriter(f"{self._root}/{self._file}", self.schema, filesystem=self._fs, **options)
            self._file_rows, self._lo, self._hi, self._nulls = 0, {}, {}, {}
        self._writer.write_batch(batch)
        self._file_rows += batch.num_rows
        for i, name in self._stat_idx:
            col = batch.column(i)
            self._nulls[name] = self._nulls.get(name, 0) + col.null_count
            mm = pc.min_max(col).as_py()
            if mm["min"] is not None:
                self._lo[name] = mm["min"] if name not in self._lo else min(self._lo[name], mm["min"])
                self._hi[name] = mm["max"] if name not in self._hi else max(self._hi[name], mm["max"])
        if self._file_rows >= self.file_rows:
            self._close_file()

    def _close_file(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        size = self._fs.get_file_info(f"{self._root}/{self._file}").size
        self.files.append(StagedFile(self._file, size, self._file_rows,
                                     _stats_json(self._file_rows, self._lo, self._hi, self._nulls)))

    def close(self) -> list[StagedFile]:
        """Write what is left; the files written, to hand to :func:`commit_staged`."""
        self._flush()
        self._close_file()
        return list(self.files)

    def abort(self) -> None:
        """Delete every file this stager wrote (a task that cannot finish)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self.files.append(StagedFile(self._file, 0, 0, ""))
        for f in self.files:
            self._fs.delete_file(f"{self._root}/{f.path}")
        self.files = []

    def read(self, f: StagedFile, columns: Sequence[str] | None = None) -> pa.Table:
        """One staged file back as an Arrow table (to check or rewrite it)."""
        import pyarrow.parquet as pq

        return pq.read_table(f"{self._root}/{f.path}", columns=columns, filesystem=self._fs)

    def drop_rows(self, column: str, ranges: Sequence[tuple[int, int]]) -> int:
        """Rewrite the closed files without the rows whose integer ``column`` lies in one of the
        ``[lo, hi)`` ``ranges``; the number of rows dropped. Files left empty are deleted."""
        import pyarrow.compute as pc

        if not ranges:
            return 0
        self.close()
        kept, dropped = [], 0
        old = self.files
        self.files = []
        for f in old:
            table = self.read(f)
            values = table.column(column)
            bad = None
            for lo, hi in ranges:
                inside = pc.and_(pc.greater_equal(values, lo), pc.less(values, hi))
                bad = inside if bad is None else pc.or_(bad, inside)
            n_bad = pc.sum(bad.cast(pa.int64())).as_py() or 0
            if not n_bad:
                kept.append(f)
                continue
            dropped += n_bad
            remaining = table.filter(pc.invert(pc.fill_null(bad, False)))
            self._fs.delete_file(f"{self._root}/{f.path}")
            for batch in remaining.to_batches(max_chunksize=self.batch_rows):
                self._write(batch)
            self._close_file()
        self.files = kept + self.files
        return dropped


def _arrow_fs(uri: str):
    """(pyarrow filesystem, path in it) of a local path or a URI (s3a/s3n are read as s3)."""
    from urllib.parse import urlparse

    from pyarrow import fs as pafs

    u = urlparse(uri)
    if not u.scheme or u.scheme == "file":
        local = u.path if u.scheme == "file" else uri
        import os

        local = os.path.abspath(local)
        return pafs.LocalFileSystem(), local
    if u.scheme in ("s3a", "s3n"):
        uri = "s3" + uri[len(u.scheme):]
    return pafs.FileSystem.from_uri(uri)


def discard_staged(path: str, files: Sequence[StagedFile]) -> None:
    """Delete staged files that will not be committed (missing ones are ignored)."""
    fs, root = _arrow_fs(str(path))
    for f in files:
        try:
            fs.delete_file(f"{root}/{f.path}")
        except FileNotFoundError:
            pass


def prepare_staging(path: str, table_schema: T.StructType) -> pa.Schema:
    """The Arrow schema staged files of the table at ``path`` must have; creates the folder
    of a local table that does not exist yet."""
    arrow_schema = spark_schema_to_arrow(table_schema, force_nullable=True)
    fs, root = _arrow_fs(str(path))
    fs.create_dir(root, recursive=True)
    return arrow_schema


def commit_staged(
    path: str,
    files: Sequence[StagedFile],
    table_schema: T.StructType,
    *,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
) -> bool:
    """Append the staged ``files`` to the table at ``path`` (delta-rs, created when missing) in
    one commit; False when skipped because ``txn_app_id`` already holds ``txn_version``.

    The fault points are those of :func:`append`: ``append.<kind>.materialize`` (the rows are
    computed: here, staged), then ``before`` / ``after`` the commit.
    """
    check_txn(txn_app_id, txn_version)
    faults.point(f"append.{faults.table_kind(path)}.materialize")
    arrow_schema = spark_schema_to_arrow(table_schema, force_nullable=True)
    now = int(time.time() * 1000)

    def attempt(n: int) -> bool:
        import deltalake
        from deltalake.transaction import AddAction

        if not deltalake.DeltaTable.is_deltatable(str(path)):
            _rs_create(path, table_schema)
        table = deltalake.DeltaTable(str(path))
        if _rs_txn_recorded(table, txn_app_id, txn_version):
            return False
        actions = [AddAction(f.path, f.size, {}, now, True, f.stats) for f in files]
        table.create_write_transaction(
            actions, "append", table.schema(),
            commit_properties=_rs_commit_properties(txn_app_id, txn_version, None))
        return True

    return _commit("append", path, attempt)


def overwrite_rows(spark: SparkSession | None, rows: Sequence[tuple], schema: str | T.StructType, path: str, *,
                   backend: str = "auto") -> None:
    """Replace a small table's rows with ``rows`` the driver holds (:func:`append_rows`'s
    counterpart; one commit). Files added by a writer after the snapshot this commit replaces
    are kept: only the files of that snapshot are removed.

    >>> overwrite_rows(spark, [("a", 1)], "name STRING, n BIGINT", str(tmp_path / "log"))  # doctest: +SKIP
    """
    struct = schema if isinstance(schema, T.StructType) else ddl_schema(schema)
    if resolve_backend(spark, backend) == "spark":
        overwrite(spark, spark.createDataFrame(list(rows), struct), path, backend="spark")
        return
    from deltalake import write_deltalake

    data = rows_to_arrow(rows, struct)
    _commit("overwrite", path, lambda n: write_deltalake(str(path), data, mode="overwrite"))


def overwrite(
    spark: SparkSession,
    df: DataFrame,
    path: str,
    *,
    overwrite_schema: bool = False,
    backend: str = "auto",
) -> None:
    """Replace the table's rows with ``df`` (its schema too when ``overwrite_schema``).

    >>> overwrite(spark, df, str(tmp_path / "t"))  # doctest: +SKIP
    """
    if df is None:
        raise ValueError("'df' in overwrite cannot be None")
    if resolve_backend(spark, backend) == "spark":
        writer = df.write.format("delta").mode("overwrite")
        if overwrite_schema:
            writer = writer.option("overwriteSchema", "true")
        _commit("overwrite", path, lambda n: writer.save(str(path)))
        return
    from deltalake import write_deltalake

    data = spark_to_arrow(df)
    _commit("overwrite", path, lambda n: write_deltalake(
        str(path),
        data,
        mode="overwrite",
        schema_mode="overwrite" if overwrite_schema else None,
    ))


# ---------------------------------------------------------------------------------------------
# MERGE primitive (the MERGE logic itself lives in pipelines.silver)

MergeKind = Literal["update", "delete", "insert"]


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause: ``update`` and ``delete`` act on matched rows, ``insert`` on unmatched ones.

    ``condition`` and the values of ``assignments`` are SQL text over the aliases (default ``s``
    for the source, ``t`` for the target); the keys of ``assignments`` are raw target column names
    (quoted here).

    >>> MergeClause("update", "s.`_seq` > t.`_seq`", {"v": "s.`v`"}).kind
    'update'
    """

    kind: MergeKind
    condition: str | None = None
    assignments: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("update", "delete", "insert"):
            raise ValueError(f"MergeClause kind must be update, delete or insert, got {self.kind!r}")
        if self.kind == "delete" and self.assignments:
            raise ValueError("a delete MergeClause takes no assignments")
        if self.kind != "delete" and not self.assignments:
            raise ValueError(f"an {self.kind} MergeClause needs assignments")


@dataclass(frozen=True)
class MergeResult:
    """What a MERGE did: the backend's row counts (``inserted``, ``updated``, ``deleted``)."""

    inserted: int
    updated: int
    deleted: int
    backend: str


def _check_merge(on: str, clauses: Sequence[MergeClause]) -> None:
    if not on or not isinstance(on, str):
        raise ValueError(f"'on' in merge must be a non-empty SQL predicate, got {on!r}")
    if not clauses:
        raise ValueError("merge needs at least one MergeClause")


def merge_rs(
    path: str,
    source: pa.Table,
    on: str,
    clauses: Sequence[MergeClause],
    *,
    source_alias: str = "s",
    target_alias: str = "t",
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    user_metadata: str | None = None,
) -> MergeResult:
    """MERGE an Arrow table into the Delta table at ``path`` with delta-rs.

    >>> merge_rs(path, arrow, "t.`id` = s.`id`", [MergeClause("insert", None, {"id": "s.`id`"})])  # doctest: +SKIP
    MergeResult(inserted=1, updated=0, deleted=0, backend='rs')
    """
    if source is None:
        raise ValueError("'source' in merge cannot be None")
    _check_merge(on, clauses)
    check_txn(txn_app_id, txn_version)

    _rs_ensure_mapping_feature(path)

    def attempt(n: int) -> dict | None:
        target = _rs_table(path)
        if _rs_txn_recorded(target, txn_app_id, txn_version):
            return None
        builder = target.merge(
            source,
            on,
            source_alias=source_alias,
            target_alias=target_alias,
            commit_properties=_rs_commit_properties(txn_app_id, txn_version, user_metadata),
        )
        for clause in clauses:
            updates = (
                None
                if clause.assignments is None
                else {quote_ident(k): v for k, v in clause.assignments.items()}
            )
            if clause.kind == "update":
                builder = builder.when_matched_update(updates, predicate=clause.condition)
            elif clause.kind == "delete":
                builder = builder.when_matched_delete(predicate=clause.condition)
            else:
                builder = builder.when_not_matched_insert(updates, predicate=clause.condition)
        return builder.execute()

    metrics = _commit("merge", path, attempt) or {}
    return MergeResult(
        inserted=int(metrics.get("num_target_rows_inserted", 0)),
        updated=int(metrics.get("num_target_rows_updated", 0)),
        deleted=int(metrics.get("num_target_rows_deleted", 0)),
        backend="rs",
    )


def merge_spark(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    on: str,
    clauses: Sequence[MergeClause],
    *,
    source_alias: str = "s",
    target_alias: str = "t",
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    user_metadata: str | None = None,
) -> MergeResult:
    """MERGE a Spark DataFrame into the Delta table at ``path`` with delta-spark.

    The transaction identifier and user metadata go through delta-spark's session settings
    (``spark.databricks.delta.write.txnAppId``/``txnVersion``,
    ``spark.databricks.delta.commitInfo.userMetadata``), set on a session of this command's own
    (:func:`commit_session`), so MERGEs of different tables can run side by side.

    >>> merge_spark(spark, path, df, "t.`id` = s.`id`", [MergeClause("delete")])  # doctest: +SKIP
    MergeResult(inserted=0, updated=0, deleted=1, backend='spark')
    """
    if source is None:
        raise ValueError("'source' in merge cannot be None")
    _check_merge(on, clauses)
    check_txn(txn_app_id, txn_version)
    from delta.tables import DeltaTable

    settings = {
        _SPARK_TXN_APP_ID: txn_app_id,
        _SPARK_TXN_VERSION: None if txn_version is None else str(txn_version),
        _SPARK_USER_METADATA: user_metadata,
    }

    def attempt(n: int) -> DataFrame | None:
        if n and _txn_recorded(path, txn_app_id, txn_version, spark, "spark"):
            return None
        builder = (
            DeltaTable.forPath(commit_session(spark, settings), str(path))
            .alias(target_alias)
            .merge(source.alias(source_alias), on)
        )
        for clause in clauses:
            values = (
                None
                if clause.assignments is None
                else {quote_ident(k): v for k, v in clause.assignments.items()}
            )
            if clause.kind == "update":
                builder = builder.whenMatchedUpdate(condition=clause.condition, set=values)
            elif clause.kind == "delete":
                builder = builder.whenMatchedDelete(condition=clause.condition)
            else:
                builder = builder.whenNotMatchedInsert(condition=clause.condition, values=values)
        return builder.execute()

    metrics_df = _commit("merge", path, attempt)
    counts = {"inserted": 0, "updated": 0, "deleted": 0}
    if metrics_df is not None:
        rows = metrics_df.collect()
        if rows:
            row = rows[0].asDict()
            counts = {
                "inserted": int(row.get("num_inserted_rows") or 0),
                "updated": int(row.get("num_updated_rows") or 0),
                "deleted": int(row.get("num_deleted_rows") or 0),
            }
    return MergeResult(backend="spark", **counts)


MERGE_CHUNK_ROWS = 1_000_000  # delta-rs: source rows per MERGE commit (see merge)


def merge(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    on: str,
    clauses: Sequence[MergeClause],
    *,
    backend: str = "auto",
    source_alias: str = "s",
    target_alias: str = "t",
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    user_metadata: str | None = None,
    source_schema: T.StructType | None = None,
    split_by: Sequence[str] | None = None,
    source_rows: int | None = None,
) -> MergeResult:
    """MERGE ``source`` into the table at ``path`` with the chosen backend (same clauses for both).

    For delta-rs the source goes to the driver as Arrow, typed by ``source_schema`` (default: its
    own schema), which should carry the target's column types. A source of more than
    :data:`MERGE_CHUNK_ROWS` rows (``source_rows``, when the caller knows it) is MERGEd in parts
    that split it by a hash of the ``split_by`` columns (the MERGE key: a key's rows stay in one
    part), so the driver holds one part at a time. The parts are separate commits and only the
    last carries ``user_metadata`` and the transaction id: the clauses must be idempotent (silver's
    apply a change only when it is newer than the row), so that a run that dies between parts
    can simply be done again.

    >>> merge(spark, path, df, "t.`id` = s.`id`",
    ...       [MergeClause("update", "s.`_seq` > t.`_seq`", {"v": "s.`v`"}),
    ...        MergeClause("insert", None, {"id": "s.`id`", "v": "s.`v`"})])  # doctest: +SKIP
    """
    if resolve_backend(spark, backend) == "spark":
        return merge_spark(
            spark, path, source, on, clauses,
            source_alias=source_alias, target_alias=target_alias,
            txn_app_id=txn_app_id, txn_version=txn_version, user_metadata=user_metadata,
        )
    parts = 1
    if split_by and source_rows is not None and source_rows > MERGE_CHUNK_ROWS:
        parts = -(-source_rows // MERGE_CHUNK_ROWS)
    if parts == 1:
        return merge_rs(
            path, spark_to_arrow(source, source_schema), on, clauses,
            source_alias=source_alias, target_alias=target_alias,
            txn_app_id=txn_app_id, txn_version=txn_version, user_metadata=user_metadata,
        )
    if txn_app_id is not None and _txn_recorded(path, txn_app_id, txn_version, spark, "rs"):
        return MergeResult(0, 0, 0, "rs")
    bucket = F.pmod(F.xxhash64(*[F.col(quote_ident(c)) for c in split_by]), F.lit(parts))
    totals = [0, 0, 0]
    for part in range(parts):
        last = part == parts - 1
        r = merge_rs(
            path, spark_to_arrow(source.where(bucket == part), source_schema), on, clauses,
            source_alias=source_alias, target_alias=target_alias,
            txn_app_id=txn_app_id if last else None, txn_version=txn_version if last else None,
            user_metadata=user_metadata if last else None,
        )
        totals = [totals[0] + r.inserted, totals[1] + r.updated, totals[2] + r.deleted]
    return MergeResult(*totals, backend="rs")
