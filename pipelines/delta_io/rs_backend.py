"""The delta-rs backend (:class:`RsBackend`, the ``deltalake`` package): every operation done by
delta-rs on the driver, with Arrow between it and Spark. Reads are Spark Parquet reads of the files
delta-rs lists (or delta-rs's own query engine); writes, MERGE (in chunks of :data:`MERGE_CHUNK_ROWS`)
and upkeep are delta-rs calls on the driver. Opening and reading the tables are in
:mod:`~pipelines.delta_io.rs_tables`, the commits (:func:`~pipelines.delta_io.rs_writes.merge_rs`...)
in :mod:`~pipelines.delta_io.rs_writes`; this module holds the backend object that calls them.

The operation modules (:mod:`~pipelines.delta_io.reads`, ``writes``, ``merging``, ``upkeep``,
``commits``) do the shared part of a call and reach this module through
:func:`pipelines.delta_io.backend.backend_for`; it imports them, never the other way round.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import unquote, urlparse

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import faults
from pipelines.delta_io.arrow import (
    check_columns, delta_field_json, arrow_to_spark, delta_schema_to_spark, rows_to_arrow, spark_to_arrow,
)
from pipelines.delta_io.backend import NEW_TABLE_PROPERTIES, DeltaIOError, quote_ident
from pipelines.delta_io.commits import NO_COMMIT_INFO, CommitInfo, commit_retried, txn_recorded
from pipelines.delta_io.features import DELETION_VECTORS, physical_names, strip_mapping_metadata, uses_column_mapping
from pipelines.delta_io.merging import MergeClause, MergeResult
from pipelines.delta_io.reads import Commit, table_exists
from pipelines.delta_io.rs_reshape import add_columns_rs_elsewhere, rs_needs_spark_to_add, reshape_rs
from pipelines.delta_io.rs_tables import (
    rs_files_above, rs_history, rs_latest, rs_options, rs_query, rs_size, rs_table, deltalake_table_exists, read_arrow,
)
from pipelines.delta_io.rs_writes import (
    append_rs, rs_commit_properties, rs_create, rs_create_mode, rs_created_meanwhile,
    rs_landed, append_with_rows_rs, create_with_rows_rs, merge_rs,
)


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


def _rs_properties(user_metadata: str | None, path: str | None = None):
    return rs_commit_properties(None, None, user_metadata, path)


MERGE_CHUNK_ROWS = 1_000_000  # delta-rs: source rows per MERGE commit (see merge)


class RsBackend:
    """:class:`~pipelines.delta_io.backend.DeltaBackend` on delta-rs (each method is the delta-rs
    half of the operation of the same name)."""

    name = "rs"
    on_driver = True
    deletion_vectors = False  # (delta-rs 1.x writes none)

    # -- reads

    def table_exists(self, spark: SparkSession | None, path: str) -> bool:
        return deltalake_table_exists(path)

    def schema(self, spark: SparkSession | None, path: str) -> T.StructType:
        return strip_mapping_metadata(delta_schema_to_spark(rs_table(path).schema().to_json()))

    def version(self, spark: SparkSession | None, path: str) -> int:
        return int(rs_latest(path).version())

    def read(self, spark: SparkSession, path: str, columns: Sequence[str] | None,
             above: tuple[str, object] | None, keep: Column | None) -> DataFrame:
        dt = rs_table(path)
        full = strip_mapping_metadata(delta_schema_to_spark(dt.schema().to_json()))
        wanted = None
        if columns is not None:
            check_columns(columns, full.fieldNames(), f"read({path})")
            wanted = list(columns)
            by_name = {f.name: f for f in full.fields}
            full = T.StructType([by_name[c] for c in dict.fromkeys([*columns, *([above[0]] if above else [])])])
        df = _read_rs_files(spark, dt, full, None if above is None else rs_files_above(dt, *above))
        if df is None:
            df = arrow_to_spark(spark, rs_query(dt, full.fieldNames()), full)
        if keep is not None:
            df = df.where(keep)
        if wanted is not None and len(wanted) != len(full.fields):
            df = df.select(*[F.col(quote_ident(c)) for c in wanted])
        return df

    def nothing_above(self, spark: SparkSession | None, path: str, column: str, value) -> bool:
        return rs_files_above(rs_table(path), column, value) == set()

    def read_rows(self, spark: SparkSession | None, path: str, columns: Sequence[str] | None,
                  above: tuple[str, object] | None) -> list:
        import pyarrow.compute as pc
        from pyspark.sql import Row

        wanted = None if columns is None else list(columns)
        table = read_arrow(path, None if wanted is None or above is None else list(dict.fromkeys([*wanted, above[0]])))
        if above is not None:
            table = table.filter(pc.greater(table.column(above[0]), pa.scalar(above[1], table.schema.field(above[0]).type)))
            if wanted is not None:
                table = table.select(wanted)
        return [Row(**r) for r in table.to_pylist()]

    def history(self, spark: SparkSession | None, path: str, limit: int | None) -> list[Commit]:
        return rs_history(rs_table(path), limit)

    # -- commits

    def last_txn_version(self, spark: SparkSession | None, path: str, app_id: str) -> int | None:
        return rs_table(path).transaction_version(app_id)

    # -- writes

    def create(self, spark: SparkSession | None, path: str, table_schema: T.StructType,
               properties: Mapping[str, str] | None = None) -> bool:
        if properties and properties.get(DELETION_VECTORS, "false").lower() == "true":
            raise DeltaIOError(f"{path}: delta-rs cannot create a table with deletion vectors; "
                               "create it with delta-spark (delta.backend: spark)")
        rs_create(path, table_schema, properties)
        return True

    def add_columns_elsewhere(self, spark: SparkSession | None, path: str,
                              adding: Sequence[T.StructField]) -> list[str] | None:
        if rs_needs_spark_to_add(path, adding):
            return add_columns_rs_elsewhere(path, adding, spark)
        return None

    def add_columns(self, spark: SparkSession | None, path: str, adding: Sequence[T.StructField]) -> None:
        from deltalake import Field

        rs_table(path).alter.add_columns([Field.from_json(delta_field_json(f)) for f in adding],
                                          commit_properties=rs_commit_properties(None, None, None, path))
        rs_landed(path)

    def append(self, spark: SparkSession, df: DataFrame, path: str, txn_app_id: str | None,
               txn_version: int | None, schema_evolution: bool) -> bool:
        return append_rs(path, spark_to_arrow(df), txn_app_id, txn_version, schema_evolution, spark)

    def append_rows(self, spark: SparkSession | None, rows: Sequence[tuple], struct: T.StructType, path: str,
                    txn_app_id: str | None, txn_version: int | None, schema_evolution: bool) -> bool:
        if txn_recorded(path, txn_app_id, txn_version, spark, self.name):
            return False
        faults.point(f"append.{faults.table_kind(path)}.materialize")
        return append_rs(path, rows_to_arrow(rows, struct), txn_app_id, txn_version, schema_evolution, spark)

    def overwrite(self, spark: SparkSession, df: DataFrame, path: str, overwrite_schema: bool,
                  user_metadata: str | None = None) -> None:
        from deltalake import write_deltalake

        data = spark_to_arrow(df)

        def attempt(n: int) -> None:
            exists = table_exists(path, backend="rs")
            if overwrite_schema and exists and uses_column_mapping(rs_table(path).metadata().configuration):
                return reshape_rs(path, data, user_metadata)  # (which delta-rs's write cannot do)
            try:
                write_deltalake(rs_table(path) if exists else str(path), data,
                                storage_options=None if exists else rs_options(path),
                                configuration=None if exists else NEW_TABLE_PROPERTIES,
                                mode="overwrite" if exists else rs_create_mode(path, "overwrite"),
                                schema_mode="overwrite" if overwrite_schema else None,
                                commit_properties=rs_commit_properties(None, None, user_metadata, path,
                                                                     creates=not exists))
            except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
                if not exists:
                    rs_created_meanwhile(path, e)
                raise
            rs_landed(path)

        commit_retried("overwrite", path, attempt)

    def overwrite_rows(self, spark: SparkSession | None, rows: Sequence[tuple], struct: T.StructType,
                       path: str) -> None:
        from deltalake import write_deltalake

        data = rows_to_arrow(rows, struct)
        commit_retried("overwrite", path, lambda n: write_deltalake(str(path), data, mode="overwrite",
                                                             storage_options=rs_options(path)))

    # -- merging

    def merge(self, spark: SparkSession, path: str, source: DataFrame, on: str, clauses: Sequence[MergeClause],
              commit: CommitInfo, *, source_schema: T.StructType | None, split_by: Sequence[str] | None,
              source_rows: int | None, local_source: bool = False) -> MergeResult:
        """The source to the driver as Arrow, in parts of at most :data:`MERGE_CHUNK_ROWS` rows
        split by a hash of ``split_by`` (see :func:`pipelines.delta_io.merging.merge`)."""
        parts = 1
        if split_by and source_rows is not None and source_rows > MERGE_CHUNK_ROWS:
            parts = -(-source_rows // MERGE_CHUNK_ROWS)
        if parts == 1:
            return merge_rs(path, spark_to_arrow(source, source_schema), on, clauses, commit)
        if commit.txn is not None and txn_recorded(path, commit.app_id, commit.version, spark, "rs"):
            return MergeResult(0, 0, 0, "rs")
        bucket = F.pmod(F.xxhash64(*[F.col(quote_ident(c)) for c in split_by]), F.lit(parts))
        totals = [0, 0, 0]
        for part in range(parts):
            last = part == parts - 1
            r = merge_rs(path, spark_to_arrow(source.where(bucket == part), source_schema), on, clauses,
                         commit if last else NO_COMMIT_INFO)
            totals = [totals[0] + r.inserted, totals[1] + r.updated, totals[2] + r.deleted]
        return MergeResult(*totals, backend="rs")

    def create_with_rows(self, spark: SparkSession | None, path: str, table_schema: T.StructType, rows,
                         user_metadata: str | None, properties: Mapping[str, str] | None) -> bool:
        return create_with_rows_rs(path, table_schema, rows, user_metadata=user_metadata, properties=properties)

    def append_with_rows(self, spark: SparkSession | None, path: str, table_schema: T.StructType, rows,
                         user_metadata: str | None) -> bool:
        return append_with_rows_rs(path, table_schema, rows, user_metadata=user_metadata)

    def merge_rows(self, spark: SparkSession | None, path: str, source: pa.Table, source_schema: T.StructType | None,
                   on: str, clauses: Sequence[MergeClause], commit: CommitInfo) -> MergeResult:
        return merge_rs(path, source, on, clauses, commit)

    # -- upkeep

    def snapshot_size(self, spark: SparkSession | None, path: str) -> tuple[int, int, int]:
        table = rs_table(path)
        return (*rs_size(table), table.version())

    def compact(self, spark: SparkSession | None, path: str, target_bytes: int,
                user_metadata: str | None) -> tuple[int, int]:
        metrics = rs_table(path).optimize.compact(target_size=target_bytes,
                                                   commit_properties=_rs_properties(user_metadata))
        return int(metrics.get("numFilesRemoved", 0)), int(metrics.get("numFilesAdded", 0))

    def checkpoint(self, spark: SparkSession | None, path: str) -> None:
        table = rs_table(path)
        table.create_checkpoint()
        rs_table(path).cleanup_metadata()

    def set_properties(self, spark: SparkSession | None, path: str, wanted: Mapping[str, str],
                       user_metadata: str | None) -> bool:
        table = rs_table(path)
        have = table.metadata().configuration
        changed = {k: v for k, v in wanted.items() if have.get(k) != v}
        if not changed:
            return False
        table.alter.set_table_properties(changed, commit_properties=_rs_properties(user_metadata))
        return True

    def vacuum(self, spark: SparkSession | None, path: str, retention_hours: int, user_metadata: str | None) -> int:
        # full: also the files no version names (the Parquet files of a run killed before its
        # commit, a reshape that never committed) once older than the retention, as delta-spark's does
        removed = rs_table(path).vacuum(retention_hours=int(retention_hours), dry_run=False,
                                         enforce_retention_duration=False, full=True,
                                         commit_properties=_rs_properties(user_metadata))
        # on S3 the folder's own marker object ('', made by a create_dir) goes too: not a file
        return sum(1 for name in removed if name and not name.endswith("/"))


BACKEND = RsBackend()
