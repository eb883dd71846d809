"""Writing tables: create (with the protocol features names and types need), add columns, append
(idempotent by transaction id), append the driver's rows, overwrite. The argument checks, the
column checks, the transaction id check and the retried commit are here; each try's write is the
backend's (:func:`~pipelines.delta_io.backend.backend_for`)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipelines import faults
import pyarrow as pa

from pipelines.delta_io.arrow import struct_of
from pipelines.delta_io.backend import DeltaIOError, backend_for
from pipelines.delta_io.commits import commit_retried, txn_recorded, check_txn
from pipelines.delta_io.features import strip_mapping_metadata
from pipelines.delta_io.reads import schema, table_exists


def create_if_missing(
    path: str,
    table_schema: T.StructType,
    *,
    spark: SparkSession | None = None,
    backend: str = "auto",
    properties: Mapping[str, str] | None = None,
) -> bool:
    """Create an empty Delta table with ``table_schema`` unless one exists; True when created.

    An existing table is left as it is (its schema is not compared: see :func:`add_columns`).

    A table whose names need column mapping is created with it, by either backend
    (:mod:`pipelines.delta_io.features`). ``properties`` are further table properties (e.g.
    ``delta.enableDeletionVectors``: only delta-spark creates a table with that one).

    >>> create_if_missing(str(tmp_path / "t"), T.StructType([T.StructField("id", T.IntegerType())]))  # doctest: +SKIP
    True
    """
    if not isinstance(table_schema, T.StructType) or not table_schema.fields:
        raise ValueError(f"create_if_missing needs a non-empty StructType, got {table_schema!r}")
    if table_exists(path, spark=spark, backend=backend):
        return False
    impl = backend_for(spark, backend)
    which = impl.name
    table_schema = strip_mapping_metadata(table_schema)

    def attempt(n: int) -> bool:
        if n and table_exists(path, spark=spark, backend=which):
            return False
        return impl.create(spark, path, table_schema, dict(properties or {}))

    return commit_retried("create", path, attempt)


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
    impl = backend_for(spark, backend)
    which = impl.name

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
    elsewhere = impl.add_columns_elsewhere(spark, path, to_add)
    if elsewhere is not None:
        return elsewhere

    def attempt(n: int) -> list[str]:
        adding = missing() if n else to_add
        if not adding:
            return []
        impl.add_columns(spark, path, adding)
        return [f.name for f in adding]

    return commit_retried("add_columns", path, attempt)


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
    impl = backend_for(spark, backend)
    if txn_recorded(path, txn_app_id, txn_version, spark, impl.name):
        return False
    faults.point(f"append.{faults.table_kind(path)}.materialize")
    return impl.append(spark, df, path, txn_app_id, txn_version, schema_evolution)


def new_fields(incoming: T.StructType, current: T.StructType) -> list[T.StructField]:
    """The fields of ``incoming`` that ``current`` lacks (names compared case-insensitively)."""
    have = {f.name.lower() for f in current.fields}
    return [f for f in incoming.fields if f.name.lower() not in have]


def append_rows(
    spark: SparkSession,
    rows: Sequence[tuple],
    schema: pa.Schema | T.StructType,
    path: str,
    *,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    schema_evolution: bool = True,
    backend: str = "auto",
) -> bool:
    """:func:`append` for a few rows the driver holds (manifests, run logs, watermarks).

    ``schema`` is the table's layout, Arrow or Spark; every timestamp must carry a time zone. With
    delta-spark the rows become a DataFrame; with delta-rs they go straight to Arrow, without a
    Spark job (each one cost about 0.3 s, several per run).

    >>> append_rows(spark, [("a", 1)], pa.schema([("name", pa.string()), ("n", pa.int64())]), path)  # doctest: +SKIP
    True
    """
    check_txn(txn_app_id, txn_version)
    impl = backend_for(spark, backend)
    struct = struct_of(schema)
    return impl.append_rows(spark, rows, struct, path, txn_app_id, txn_version, schema_evolution)


def overwrite_rows(spark: SparkSession | None, rows: Sequence[tuple], schema: pa.Schema | T.StructType, path: str, *,
                   backend: str = "auto") -> None:
    """Replace a small table's rows with ``rows`` the driver holds (:func:`append_rows`'s
    counterpart; one commit). Files added by a writer after the snapshot this commit replaces
    are kept: only the files of that snapshot are removed.

    >>> overwrite_rows(spark, [("a", 1)], pa.schema([("name", pa.string()), ("n", pa.int64())]), path)  # doctest: +SKIP
    """
    struct = struct_of(schema)
    backend_for(spark, backend).overwrite_rows(spark, rows, struct, path)


def overwrite(
    spark: SparkSession,
    df: DataFrame,
    path: str,
    *,
    overwrite_schema: bool = False,
    backend: str = "auto",
    user_metadata: str | None = None,
) -> None:
    """Replace the table's rows with ``df`` (its schema too when ``overwrite_schema``), in a commit
    that records ``user_metadata``.

    >>> overwrite(spark, df, str(tmp_path / "t"))  # doctest: +SKIP
    """
    if df is None:
        raise ValueError("'df' in overwrite cannot be None")
    backend_for(spark, backend).overwrite(spark, df, path, overwrite_schema, user_metadata)


# -- the driver's rows: a small table's folded batch (pipelines.silver.driver)

def create_with_rows(path: str, table_schema: T.StructType, rows, *, spark: SparkSession | None = None,
                     backend: str = "auto", user_metadata: str | None = None,
                     properties: Mapping[str, str] | None = None) -> bool:
    """A new table and its first ``rows`` (Arrow, or tuples in ``table_schema`` order) in one commit
    that records ``user_metadata``, with ``properties``; False (nothing done) when the table needs
    column mapping: create it the usual way then. Raises when a table exists at ``path`` already."""
    return backend_for(spark, backend).create_with_rows(spark, path, table_schema, rows, user_metadata, properties)


def append_with_rows(path: str, table_schema: T.StructType, rows, *, spark: SparkSession | None = None,
                     backend: str = "auto", user_metadata: str | None = None) -> bool:
    """``rows`` (in ``table_schema``, the table's columns) appended in one commit that records
    ``user_metadata``: what a MERGE that inserts every source row commits, without its read of
    the stored rows."""
    return backend_for(spark, backend).append_with_rows(spark, path, table_schema, rows, user_metadata)
