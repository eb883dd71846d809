"""The MERGE primitive: clauses as SQL text both Spark SQL and delta-rs (DataFusion) parse the same
way, run by delta-spark (:func:`merge_spark`) or delta-rs (:func:`merge_rs`, in chunks)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pipelines.delta_io.arrow import spark_to_arrow
from pipelines.delta_io.backend import (
    _SPARK_TXN_APP_ID, _SPARK_TXN_VERSION, _SPARK_USER_METADATA, _rs_table, quote_ident, resolve_backend,
)
from pipelines.delta_io.commits import (
    _commit, _rs_commit_properties, _rs_txn_recorded, _txn_recorded, check_txn, commit_session,
)
from pipelines.delta_io.writes import _rs_ensure_mapping_feature


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

