"""The delta-spark backend (:class:`SparkBackend`): delta-spark on the JVM, and the protocol features
it must be told to enable; what the driver reads or writes itself goes to delta-rs (small reads,
history, the ``_pipeline`` tables' rows, the driver's rows into a small table: :func:`_by_delta_rs`).
The session settings its commits carry, its log and snapshot and the pinned commits' checks are in
:mod:`~pipelines.delta_io.spark_commits`; its MERGE and the driver's rows' commits in
:mod:`~pipelines.delta_io.spark_writes`.

The operation modules (:mod:`~pipelines.delta_io.reads`, ``writes``, ``merging``, ``upkeep``,
``commits``) do the shared part of a call and reach this module through
:func:`pipelines.delta_io.backend.backend_for`; it imports them, never the other way round.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.delta_io.arrow import check_columns
from pipelines.delta_io.backend import NEW_TABLE_PROPERTIES, DeltaIOError, named, quote_ident
from pipelines.delta_io.commits import CommitInfo, commit_retried, txn_recorded
from pipelines.delta_io.features import (
    COLUMN_MAPPING_MODE, TIMESTAMP_NTZ_FEATURE, create_properties, needs_column_mapping, needs_timestamp_ntz,
    strip_mapping_metadata, uses_column_mapping,
)
from pipelines.delta_io.merging import MergeClause, MergeResult
from pipelines.delta_io.reads import Commit, schema, table_exists
from pipelines.delta_io.rs_tables import rs_history, rs_latest, rs_size, rs_table
from pipelines.delta_io.spark_commits import (
    SPARK_USER_METADATA, created_meanwhile, first_commit_seen, pin_after, pin_before,
    pin_created_meanwhile, pinned_writer, commit_session, spark_delta_log, spark_snapshot,
)
from pipelines.delta_io import spark_commits, spark_writes
from pipelines.delta_io.spark_writes import append_with_rows_spark, create_with_rows_spark, merge_spark
from pipelines.delta_io.upkeep import storage
from pipelines.delta_io.writes import new_fields, add_columns, create_if_missing


_SPARK_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


_SPARK_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"


# A DataFrame MERGE source of at most this many rows (when the caller counted them), into a table
# :func:`_by_delta_rs` takes, is collected to the driver and MERGEd by delta-rs (silver's Spark
# path counts its source rows: ``merging.merge``'s ``source_rows``).
RS_MERGE_ROWS = 20_000


def _by_delta_rs(path: str, *, up_to_bytes: int | None = None) -> bool:
    """Whether rows the driver holds go into the table at ``path`` by delta-rs, which makes the
    commit delta-spark would make without a Spark job or a JVM snapshot (0.1 s against 2-4 s):
    a table without column mapping (delta-rs 1.6 writes such a table's files with the logical
    names) and, for a MERGE, of at most ``up_to_bytes`` live bytes, where delta-spark rewrites the
    files a MERGE touches rather than marking rows in deletion vectors (:func:`merge_spark`). Its
    protocol, deletion vectors and change data feed stay as delta-spark made them. Creates stay
    delta-spark's: delta-rs 1.6 gives a table with deletion vectors a ``variantType`` reader
    feature, which readers that do not know it refuse."""
    table = rs_table(path)
    if uses_column_mapping(table.metadata().configuration):
        return False
    return up_to_bytes is None or rs_size(table)[1] <= up_to_bytes


def _ddl_type(dt: T.DataType) -> str:
    """Spark DDL text for a type, quoting nested field names (``simpleString`` does not)."""
    if isinstance(dt, T.StructType):
        return "STRUCT<" + ", ".join(f"{quote_ident(f.name)}: {_ddl_type(f.dataType)}" for f in dt.fields) + ">"
    if isinstance(dt, T.ArrayType):
        return f"ARRAY<{_ddl_type(dt.elementType)}>"
    if isinstance(dt, T.MapType):
        return f"MAP<{_ddl_type(dt.keyType)}, {_ddl_type(dt.valueType)}>"
    return dt.simpleString()


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
        _alter(session, path, f"ALTER TABLE delta.{quote_ident(str(path))} SET TBLPROPERTIES ({pairs})")


def _alter(spark: SparkSession, path: str, sql: str) -> None:
    """Run one ALTER TABLE on ``path``; pinned, it must land on the pinned version (no transaction
    id guards an ALTER: one that lands after another writer's commit is stale)."""
    pin = pin_before(spark, path, "alter")
    if pin is None:
        spark.sql(sql)
        return
    commit_session(spark, {SPARK_USER_METADATA: pin.tag(None)}).sql(sql)
    pin_after(spark, path, pin, "alter", guarded=False)


class SparkBackend:
    """:class:`~pipelines.delta_io.backend.DeltaBackend` on delta-spark (each method is the
    delta-spark half of the operation of the same name)."""

    name = "spark"
    on_driver = False
    deletion_vectors = True

    # -- reads

    def table_exists(self, spark: SparkSession, path: str) -> bool:
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(spark, str(path)))

    def schema(self, spark: SparkSession, path: str) -> T.StructType:
        return strip_mapping_metadata(spark.read.format("delta").load(str(path)).schema)

    def version(self, spark: SparkSession, path: str) -> int:
        return int(spark_snapshot(spark, path).version())

    def read(self, spark: SparkSession, path: str, columns: Sequence[str] | None,
             above: tuple[str, object] | None, keep: Column | None) -> DataFrame:
        df = spark.read.format("delta").load(str(path))
        if keep is not None:
            df = df.where(keep)
        if columns is not None:
            check_columns(columns, df.columns, f"read({path})")
            df = df.select(*[F.col(quote_ident(c)) for c in columns])
        return df

    # What the driver reads or writes itself goes by delta-rs, without a Spark job: the statistics
    # of a table's files, a small table's rows, the history and transaction ids in its log, and the
    # few rows of the _pipeline tables (manifest, run log, watermarks...). Through delta-spark each
    # of these was a snapshot or a commit of 0.5-2.5 s of driver time for a handful of rows (bronze's
    # bookkeeping took 17 s of the bronze step's 28.6 s on the samples); both libraries read and write the
    # same protocol, and commit a version only where none exists (on S3: pipelines/log_store.py).
    # Bronze's batches, silver's tables (deletion vectors) and every DataFrame stay with delta-spark.

    def nothing_above(self, spark: SparkSession, path: str, column: str, value) -> bool:
        return named("rs").nothing_above(spark, path, column, value)

    def read_rows(self, spark: SparkSession, path: str, columns: Sequence[str] | None,
                  above: tuple[str, object] | None) -> list:
        return named("rs").read_rows(spark, path, columns, above)

    def history(self, spark: SparkSession, path: str, limit: int | None) -> list[Commit]:
        return rs_history(rs_latest(path), limit)  # (the latest, as delta-spark reads it, pinned or not)

    # -- commits

    def last_txn_version(self, spark: SparkSession, path: str, app_id: str) -> int | None:
        return rs_latest(path).transaction_version(app_id)

    # -- writes

    def create(self, spark: SparkSession, path: str, table_schema: T.StructType,
               properties: Mapping[str, str] | None = None) -> bool:
        # SQL, not DeltaTable.createIfNotExists(): its builder puts the path between
        # backticks without doubling the backticks a path may hold
        cols = ", ".join(f"{quote_ident(f.name)} {_ddl_type(f.dataType)}" for f in table_schema.fields)
        wanted = {**NEW_TABLE_PROPERTIES, **create_properties(table_schema), **(properties or {})}
        props = ", ".join(f"'{k}' = '{v}'" for k, v in wanted.items())
        pin = pin_before(spark, path, "create")
        # (pinned: a plain CREATE TABLE, which fails when another writer made the table meanwhile)
        sql = (f"CREATE TABLE {'' if pin is not None else 'IF NOT EXISTS '}delta.{quote_ident(str(path))} ({cols}) "
               "USING delta" + (f" TBLPROPERTIES ({props})" if props else ""))
        try:
            commit_session(spark, {SPARK_USER_METADATA: None if pin is None else pin.tag(None)}).sql(sql)
        except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
            pin_created_meanwhile(spark, path, pin, "create", e)
            if pin is None and created_meanwhile(spark, path, e):
                return False  # (IF NOT EXISTS did not see it: it was being made)
            raise
        if pin is None and spark_snapshot(spark, path).version() < 0:
            # IF NOT EXISTS took a log begun by another writer, not yet committed to, for a table
            if first_commit_seen(spark, path, spark_commits.BEGUN_WAIT_S):
                return False
            raise DeltaIOError(f"{path}: its _delta_log holds no commit after {spark_commits.BEGUN_WAIT_S:.0f} s (a writer stopped "
                               "while creating the table?), and delta-spark creates no table there; if nothing "
                               f"else writes to {path}, remove its _delta_log and run again")
        pin_after(spark, path, pin, "create", guarded=False)
        return True

    def add_columns_elsewhere(self, spark: SparkSession, path: str,
                              adding: Sequence[T.StructField]) -> list[str] | None:
        return None  # delta-spark adds every column itself

    def add_columns(self, spark: SparkSession, path: str, adding: Sequence[T.StructField]) -> None:
        session = commit_session(spark)
        _enable_features_spark(session, path, adding)
        target = "delta." + quote_ident(str(path))
        cols = ", ".join(f"{quote_ident(f.name)} {_ddl_type(f.dataType)}" for f in adding)
        _alter(session, path, f"ALTER TABLE {target} ADD COLUMNS ({cols})")

    def append(self, spark: SparkSession, df: DataFrame, path: str, txn_app_id: str | None,
               txn_version: int | None, schema_evolution: bool) -> bool:
        which = self.name
        # a table whose names need column mapping, and new columns, first: with the features
        # their names and types need (the write itself would refuse them)
        if not table_exists(path, spark=spark, backend=which):
            if create_properties(df.schema):
                create_if_missing(path, df.schema, spark=spark, backend=which)
        elif schema_evolution:
            add_columns(path, new_fields(df.schema, schema(path, spark=spark, backend=which)), spark=spark,
                        backend=which)
        writer = df.write.format("delta").mode("append")
        if schema_evolution:
            writer = writer.option("mergeSchema", "true")

        def attempt(n: int) -> bool:
            if n and txn_recorded(path, txn_app_id, txn_version, spark, which):
                return False
            pin = pin_before(spark, path, "append")
            try:
                pinned_writer(writer, pin, None, txn_app_id, txn_version).save(str(path))
            except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
                if pin is not None and pin.version is None:
                    pin_created_meanwhile(spark, path, pin, "append", e)
                raise
            pin_after(spark, path, pin, "append", guarded=True)
            return True

        return commit_retried("append", path, attempt)

    def append_rows(self, spark: SparkSession, rows: Sequence[tuple], struct: T.StructType, path: str,
                    txn_app_id: str | None, txn_version: int | None, schema_evolution: bool) -> bool:
        return named("rs").append_rows(spark, rows, struct, path, txn_app_id, txn_version, schema_evolution)

    def overwrite(self, spark: SparkSession, df: DataFrame, path: str, overwrite_schema: bool,
                  user_metadata: str | None = None) -> None:
        writer = df.write.format("delta").mode("overwrite")
        if overwrite_schema:
            writer = writer.option("overwriteSchema", "true")

        def attempt(n: int) -> None:
            if overwrite_schema and table_exists(path, spark=spark, backend="spark"):  # the new names' features first
                _enable_features_spark(commit_session(spark), path, df.schema.fields)
            pin = pin_before(spark, path, "overwrite")
            try:
                pinned_writer(writer, pin, user_metadata).save(str(path))
            except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
                if pin is not None and pin.version is None:
                    pin_created_meanwhile(spark, path, pin, "overwrite", e)
                raise
            pin_after(spark, path, pin, "overwrite", guarded=True)

        commit_retried("overwrite", path, attempt)

    def overwrite_rows(self, spark: SparkSession, rows: Sequence[tuple], struct: T.StructType, path: str) -> None:
        named("rs").overwrite_rows(spark, rows, struct, path)

    # -- merging

    def merge(self, spark: SparkSession, path: str, source: DataFrame, on: str, clauses: Sequence[MergeClause],
              commit: CommitInfo, *, source_schema: T.StructType | None, split_by: Sequence[str] | None,
              source_rows: int | None, local_source: bool = False) -> MergeResult:
        if source_rows is not None and source_rows <= RS_MERGE_ROWS \
                and _by_delta_rs(path, up_to_bytes=spark_writes.REWRITE_BELOW_BYTES):  # (its rows to the driver, one commit)
            return named("rs").merge(spark, path, source, on, clauses, commit, source_schema=source_schema,
                                     split_by=None, source_rows=source_rows)
        return merge_spark(spark, path, source, on, clauses, commit, local_source=local_source)

    def create_with_rows(self, spark: SparkSession, path: str, table_schema: T.StructType, rows,
                         user_metadata: str | None, properties: Mapping[str, str] | None) -> bool:
        return create_with_rows_spark(spark, path, table_schema, rows, user_metadata=user_metadata,
                                      properties=properties)

    def append_with_rows(self, spark: SparkSession, path: str, table_schema: T.StructType, rows,
                         user_metadata: str | None) -> bool:
        if table_exists(path, spark=spark, backend="rs") and _by_delta_rs(path):  # (a new table: delta-spark's)
            return named("rs").append_with_rows(spark, path, table_schema, rows, user_metadata)
        return append_with_rows_spark(spark, path, table_schema, rows, user_metadata=user_metadata)

    def merge_rows(self, spark: SparkSession, path: str, source: pa.Table, source_schema: T.StructType | None,
                   on: str, clauses: Sequence[MergeClause], commit: CommitInfo) -> MergeResult:
        if _by_delta_rs(path, up_to_bytes=spark_writes.REWRITE_BELOW_BYTES):
            return named("rs").merge_rows(spark, path, source, source_schema, on, clauses, commit)
        # (a local relation: the rows are the driver's; delta-spark's MERGE metrics count them)
        return merge_spark(spark, path, spark.createDataFrame(source, schema=source_schema), on, clauses, commit,
                           local_source=True)

    # -- upkeep

    def snapshot_size(self, spark: SparkSession, path: str) -> tuple[int, int, int]:
        detail = spark.sql(f"DESCRIBE DETAIL delta.{quote_ident(str(path))}").collect()[0]
        files, live = int(detail["numFiles"] or 0), int(detail["sizeInBytes"] or 0)
        version = spark_snapshot(spark, path).version()
        return files, live, version

    def compact(self, spark: SparkSession, path: str, target_bytes: int, user_metadata: str | None) -> tuple[int, int]:
        session = commit_session(spark, {SPARK_USER_METADATA: user_metadata, _SPARK_MAX_FILE_SIZE: str(target_bytes)})
        row = session.sql(f"OPTIMIZE delta.{quote_ident(str(path))}").collect()[0]
        metrics = row["metrics"]
        return int(metrics["numFilesRemoved"] or 0), int(metrics["numFilesAdded"] or 0)

    def checkpoint(self, spark: SparkSession, path: str) -> None:
        spark_delta_log(spark, path).checkpoint()  # delta-spark cleans up expired log files after it

    def set_properties(self, spark: SparkSession, path: str, wanted: Mapping[str, str],
                       user_metadata: str | None) -> bool:
        detail = spark.sql(f"DESCRIBE DETAIL delta.{quote_ident(str(path))}").collect()[0]
        have = detail["properties"] or {}
        changed = {k: v for k, v in wanted.items() if have.get(k) != v}
        if not changed:
            return False
        pairs = ", ".join(f"'{k}' = '{v}'" for k, v in changed.items())
        commit_session(spark, {SPARK_USER_METADATA: user_metadata}).sql(
            f"ALTER TABLE delta.{quote_ident(str(path))} SET TBLPROPERTIES ({pairs})")
        return True

    def vacuum(self, spark: SparkSession, path: str, retention_hours: int, user_metadata: str | None) -> int:
        before = storage(path, spark=spark, backend="spark").disk_files
        session = commit_session(spark, {SPARK_USER_METADATA: user_metadata, _SPARK_RETENTION_CHECK: "false"})
        session.sql(f"VACUUM delta.{quote_ident(str(path))} RETAIN {int(retention_hours)} HOURS").collect()
        return before - storage(path, spark=spark, backend="spark").disk_files


BACKEND = SparkBackend()
