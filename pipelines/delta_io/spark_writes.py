"""delta-spark's commits of rows the driver holds and its MERGE: :func:`create_with_rows_spark`,
:func:`append_with_rows_spark` (one commit each, one Spark job) and :func:`merge_spark` with the
session settings of one MERGE command. The backend's other operations are
:class:`~pipelines.delta_io.spark_backend.SparkBackend`'s."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipelines.delta_io import pins
from pipelines.delta_io.arrow import as_arrow
from pipelines.delta_io.backend import NEW_TABLE_PROPERTIES, quote_ident
from pipelines.delta_io.commits import NO_COMMIT_INFO, CommitInfo, commit_retried, txn_recorded
from pipelines.delta_io.features import create_properties, strip_mapping_metadata
from pipelines.delta_io.merging import SOURCE_ALIAS, TARGET_ALIAS, MergeClause, MergeResult, check_merge
from pipelines.delta_io.spark_commits import (
    SPARK_TXN_APP_ID, SPARK_TXN_VERSION, SPARK_USER_METADATA, pin_after, pin_before, pin_created_meanwhile,
    pin_txn, pinned_writer, commit_session, spark_snapshot,
)


# delta-spark's MERGE settings that :func:`merge_spark` sets for one command (see there).
_SPARK_MERGE_MATERIALIZE = "spark.databricks.delta.merge.materializeSource"


_SPARK_MERGE_PERSISTENT_DVS = "spark.databricks.delta.merge.deletionVectors.persistent"


# A table of at most this many bytes: a MERGE rewrites the files it touches rather than writing
# deletion vectors for them (see :func:`merge_spark`).
REWRITE_BELOW_BYTES = 4 << 20


def _table_bytes(spark: SparkSession, path: str) -> int:
    """The bytes of the table's live files: from the checksum file of its current version (no
    Spark job), else from its snapshot's state (which a MERGE computes anyway)."""
    snapshot = spark_snapshot(spark, path)
    checksum = snapshot.checksumOpt()
    return int(checksum.get().tableSizeBytes() if checksum.isDefined() else snapshot.sizeInBytes())


def create_with_rows_spark(spark: SparkSession, path: str, table_schema: T.StructType, rows: Sequence[tuple] | pa.Table, *,
                           user_metadata: str | None = None, properties: Mapping[str, str] | None = None) -> bool:
    """delta-spark's :func:`~pipelines.delta_io.rs_backend.create_with_rows_rs`: a new table and its
    first ``rows`` (tuples in ``table_schema`` order) in one commit, with ``properties`` (e.g.
    deletion vectors) and ``user_metadata``; False (nothing done) when the table needs column
    mapping: create it the usual way then. Raises when a table exists at ``path`` already."""
    table_schema = strip_mapping_metadata(table_schema)
    if create_properties(table_schema):
        return False
    # (the rows are the driver's, a small table's: one file, not one per core)
    writer = (spark.createDataFrame(as_arrow(rows, table_schema), schema=table_schema).coalesce(1)
              .write.format("delta").mode("errorifexists"))
    for key, value in {**NEW_TABLE_PROPERTIES, **(properties or {})}.items():  # (a new table's, as options)
        writer = writer.option(key, value)

    def attempt(n: int) -> bool:
        pin = pin_before(spark, path, "create")
        try:
            pinned_writer(writer, pin, user_metadata).save(str(path))
        except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
            pin_created_meanwhile(spark, path, pin, "create", e)
            raise
        pin_after(spark, path, pin, "create", guarded=True)
        return True

    return commit_retried("create", path, attempt)


def append_with_rows_spark(spark: SparkSession, path: str, table_schema: T.StructType, rows: Sequence[tuple] | pa.Table,
                           *, user_metadata: str | None = None) -> bool:
    """delta-spark's :func:`~pipelines.delta_io.rs_backend.append_with_rows_rs`: ``rows`` (in
    ``table_schema``, the table's columns) appended in one commit that records ``user_metadata``,
    one Spark job, without a MERGE's scan of the stored rows."""
    table_schema = strip_mapping_metadata(table_schema)
    writer = (spark.createDataFrame(as_arrow(rows, table_schema), schema=table_schema).coalesce(1)
              .write.format("delta").mode("append"))

    def attempt(n: int) -> bool:
        pin = pin_before(spark, path, "append")
        pinned_writer(writer, pin, user_metadata).save(str(path))
        pin_after(spark, path, pin, "append", guarded=True)
        return True

    return commit_retried("append", path, attempt)


def merge_spark(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    on: str,
    clauses: Sequence[MergeClause],
    commit: CommitInfo = NO_COMMIT_INFO,
    *,
    local_source: bool = False,
) -> MergeResult:
    """MERGE a Spark DataFrame into the Delta table at ``path`` with delta-spark.

    The transaction identifier and user metadata go through delta-spark's session settings
    (``spark.databricks.delta.write.txnAppId``/``txnVersion``,
    ``spark.databricks.delta.commitInfo.userMetadata``), set on a session of this command's own
    (:func:`commit_session`), so MERGEs of different tables can run side by side.

    Two settings of that session make a small MERGE cheaper (on a tiny table: 14 Spark jobs -> 5):
    - a table of at most :data:`REWRITE_BELOW_BYTES` rewrites the files that have matches instead
      of writing deletion vectors for them (8 jobs fewer; a larger table keeps them, where they
      spare rewriting big files);
    - ``local_source`` (the caller's rows, held in the driver: deterministic) is read as it is,
      not copied first (materializeSource ``none``: one job fewer).

    >>> merge_spark(spark, path, df, "t.`id` = s.`id`", [MergeClause("delete")])  # doctest: +SKIP
    MergeResult(inserted=0, updated=0, deleted=1, backend='spark')
    """
    if source is None:
        raise ValueError("'source' in merge cannot be None")
    check_merge(on, clauses)
    txn_app_id, txn_version, user_metadata = commit.app_id, commit.version, commit.metadata
    from delta.tables import DeltaTable

    settings = {
        SPARK_TXN_APP_ID: txn_app_id,
        SPARK_TXN_VERSION: None if txn_version is None else str(txn_version),
        SPARK_USER_METADATA: user_metadata,
        _SPARK_MERGE_MATERIALIZE: "none" if local_source else None,
    }
    pin = pins.pin_of(path)

    def attempt(n: int) -> DataFrame | None:
        if n and txn_recorded(path, txn_app_id, txn_version, spark, "spark"):
            return None
        if pin is not None:  # (on the pinned version, recording the pin's id and token)
            pin_before(spark, path, "merge")
            app, version = pin_txn(pin, txn_app_id, txn_version)
            settings.update({SPARK_TXN_APP_ID: app, SPARK_TXN_VERSION: str(version),
                             SPARK_USER_METADATA: pin.tag(user_metadata)})
        if _table_bytes(spark, path) <= REWRITE_BELOW_BYTES:
            settings[_SPARK_MERGE_PERSISTENT_DVS] = "false"
        builder = (
            DeltaTable.forPath(commit_session(spark, settings), str(path))
            .alias(TARGET_ALIAS)
            .merge(source.alias(SOURCE_ALIAS), on)
        )
        metrics = _with_clauses(builder, clauses).execute()
        pin_after(spark, path, pin, "merge", guarded=True)
        return metrics

    return _merge_result(commit_retried("merge", path, attempt))


def _with_clauses(builder, clauses: Sequence[MergeClause]):
    """delta-spark's merge builder with each clause, in order."""
    for clause in clauses:
        values = None if clause.assignments is None else {quote_ident(k): v for k, v in clause.assignments.items()}
        if clause.kind == "update":
            builder = builder.whenMatchedUpdate(condition=clause.condition, set=values)
        elif clause.kind == "delete":
            builder = builder.whenMatchedDelete(condition=clause.condition)
        else:
            builder = builder.whenNotMatchedInsert(condition=clause.condition, values=values)
    return builder


def _merge_result(metrics_df: DataFrame | None) -> MergeResult:
    """The counts of delta-spark's MERGE metrics (none: the MERGE was recorded before)."""
    row = (metrics_df.collect() or [None])[0] if metrics_df is not None else None
    row = row.asDict() if row is not None else {}
    return MergeResult(backend="spark", inserted=int(row.get("num_inserted_rows") or 0),
                       updated=int(row.get("num_updated_rows") or 0), deleted=int(row.get("num_deleted_rows") or 0))
