"""delta-rs commits (the ``deltalake`` package, on the driver): commit properties and transaction
ids, pins moved by a landed commit, creating a table, appending Arrow rows, and :func:`merge_rs`
(one MERGE commit; its chunks are
:class:`~pipelines.delta_io.rs_backend.RsBackend`'s). No reads but what a commit needs
(:mod:`~pipelines.delta_io.rs_tables`)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines.delta_io.arrow import fit_columns, arrow_schema_to_spark, as_arrow
from pipelines.delta_io import pins
from pipelines.delta_io.backend import NEW_TABLE_PROPERTIES, quote_ident
from pipelines.delta_io.commits import NO_COMMIT_INFO, CommitInfo, commit_retried
from pipelines.delta_io.features import (
    create_properties, needs_column_mapping, strip_mapping_metadata, uses_column_mapping,
)
from pipelines.delta_io.merging import SOURCE_ALIAS, TARGET_ALIAS, MergeClause, MergeResult, check_merge
from pipelines.delta_io.reads import schema, table_exists
from pipelines.delta_io.rs_tables import rs_options, rs_table, deltalake_table_exists
from pipelines.delta_io.writes import new_fields, add_columns


def rs_landed(path: str) -> None:
    """A commit of ours to ``path`` landed: a pin on it moves to the next version."""
    pin = pins.pin_of(path)
    if pin is not None:
        pin.landed()


def rs_create_mode(path: str, default: str) -> str:
    """The write mode of a write that may create the table: ``"error"`` when this thread pinned it
    as missing (another writer's table must not be written into), else ``default``."""
    pin = pins.pin_of(path)
    if pin is not None and pin.version is not None:
        raise pin.stale("create", "it was planned as a new table")
    return "error" if pin is not None else default


def rs_created_meanwhile(path: str, error: Exception) -> None:
    """Turn a failed creating write into :class:`~pipelines.delta_io.pins.StaleRead` when this thread
    pinned the table as missing and another writer made it; else let ``error`` stand."""
    pin = pins.pin_of(path)
    if pin is not None and deltalake_table_exists(path):
        raise pin.stale("create", "another writer created it") from error



# -- commits


def rs_commit_properties(
    txn_app_id: str | None, txn_version: int | None, user_metadata: str | None, path: str | None = None, *,
    creates: bool = False,
):
    """delta-rs commit properties: the transaction id, the user metadata, and for a table this thread
    pinned (``path``), no retry: the commit lands on the pinned version or fails. A commit pinned on
    a version also records the pin's transaction id, as delta-spark's pinned commits do
    (:mod:`pipelines.delta_io.pins`), so a delta-spark writer pinned on the same version fails or
    is skipped after it: the delta-spark backend commits the driver's small writes with delta-rs.

    A commit that ``creates`` the table is never retried either: when another writer's first
    commit wins version 0, delta-rs would land this one as version 1, whatever its write mode
    (``"error"`` included), so two runs that each found no table would both land their rows."""
    from deltalake import CommitProperties, Transaction

    pin = None if path is None else pins.pin_of(path)
    if txn_app_id is None and user_metadata is None and pin is None and not creates:
        return None
    txns = [] if txn_app_id is None else [Transaction(txn_app_id, txn_version)]
    if pin is not None and pin.version is not None:
        txns.append(Transaction(pins.PIN_APP_ID, pin.version + 1))
    return CommitProperties(
        custom_metadata=None if user_metadata is None else {"userMetadata": user_metadata},
        app_transactions=txns or None,
        max_commit_retries=0 if pin is not None or creates else None,
    )


def rs_txn_recorded(table, txn_app_id: str | None, txn_version: int | None) -> bool:
    """True when the delta-rs snapshot ``table`` already holds ``txn_version`` for ``txn_app_id``."""
    if txn_app_id is None:
        return False
    last = table.transaction_version(txn_app_id)
    return last is not None and last >= txn_version


# -- writes


def _rs_snapshot_for_txn(path: str, txn_app_id: str | None, arrow_schema: pa.Schema):
    """For an idempotent delta-rs write: the table's current snapshot, to check the transaction id
    on and to commit against (a commit made after it then conflicts, so two writers racing with one
    txn id cannot both land). A missing table is created first, empty: delta-rs does not check
    two racing creating writes against each other. None when there is no txn id."""
    if txn_app_id is None:
        return None
    if not deltalake_table_exists(path):
        rs_create(path, arrow_schema)
    return rs_table(path)


def rs_create(path: str, table_schema: T.StructType | pa.Schema, extra: Mapping[str, str] | None = None) -> None:
    """Create an empty table with delta-rs (nothing when one exists), with the properties its
    names need (and ``extra``); every column nullable."""
    from deltalake import DeltaTable, Schema

    if isinstance(table_schema, pa.Schema):
        table_schema = arrow_schema_to_spark(table_schema)
    nullable = T.StructType([T.StructField(f.name, f.dataType, True) for f in table_schema.fields])
    properties = {**NEW_TABLE_PROPERTIES, **create_properties(nullable), **(extra or {})}
    mode = rs_create_mode(path, "ignore")
    try:
        DeltaTable.create(str(path), Schema.from_json(nullable.json()), mode=mode, configuration=properties or None,
                          storage_options=rs_options(path),
                          commit_properties=rs_commit_properties(None, None, None, path, creates=True))
    except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
        rs_created_meanwhile(path, e)
        raise
    rs_landed(path)
    if uses_column_mapping(properties):
        rs_ensure_mapping_feature(path)


def create_with_rows_rs(path: str, table_schema: T.StructType, rows: Sequence[tuple] | pa.Table, *,
                        user_metadata: str | None = None, properties: Mapping[str, str] | None = None) -> bool:
    """Create a table with delta-rs and its first ``rows`` (tuples in ``table_schema`` order) in one
    commit, the same table :func:`~pipelines.delta_io.writes.create_if_missing` then an append would
    make, with ``properties`` beside the ones every table takes. False (nothing done) when the table
    needs column mapping: create it the usual way then. Raises when a table exists at ``path`` already.

    >>> create_with_rows_rs(str(tmp_path / "t"), T.StructType([T.StructField("id", T.IntegerType())]), [(1,)])  # doctest: +SKIP
    True
    """
    from deltalake import write_deltalake

    table_schema = strip_mapping_metadata(table_schema)
    if create_properties(table_schema):
        return False
    data = as_arrow(rows, table_schema)

    def attempt(n: int) -> bool:
        rs_create_mode(path, "error")
        try:
            write_deltalake(str(path), data, mode="error", storage_options=rs_options(path),
                            configuration={**NEW_TABLE_PROPERTIES, **(properties or {})},
                            commit_properties=rs_commit_properties(None, None, user_metadata, path, creates=True))
        except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
            rs_created_meanwhile(path, e)
            raise
        rs_landed(path)
        return True

    return commit_retried("create", path, attempt)


def rs_ensure_mapping_feature(path: str) -> None:
    """Make a column-mapped table's protocol say so. deltalake 1.6 creates a table that has
    column mapping and another feature (a TIMESTAMP_NTZ column) with table-features protocol 3/7
    but without ``columnMapping`` among its features; its writers then put the logical names in
    the Parquet files, which delta-spark reads as NULLs. Done right after the create, and again
    before a write in case a run died in between."""
    from deltalake import TableFeatures

    dt = rs_table(path)
    protocol = dt.protocol()
    if not uses_column_mapping(dt.metadata().configuration):
        return
    if protocol.min_writer_version >= 7 and "columnMapping" not in (protocol.writer_features or ()):
        dt.alter.add_feature(TableFeatures.ColumnMapping, allow_protocol_versions_increase=True,
                             commit_properties=rs_commit_properties(None, None, None, path))
        rs_landed(path)


def append_with_rows_rs(path: str, table_schema: T.StructType, rows: Sequence[tuple] | pa.Table, *,
                        user_metadata: str | None = None) -> bool:
    """delta-rs: ``rows`` (in ``table_schema``, the table's columns) appended to the table at
    ``path`` in one commit that records ``user_metadata``: the commit of a MERGE that inserts
    every source row, without the MERGE's read of the stored rows.

    >>> append_with_rows_rs(str(tmp_path / "t"), schema, [(2,)], user_metadata='{"w": "2"}')  # doctest: +SKIP
    True
    """
    return append_rs(path, as_arrow(rows, strip_mapping_metadata(table_schema)), None, None, False,
                      user_metadata=user_metadata)


def append_rs(path: str, data: pa.Table, txn_app_id: str | None, txn_version: int | None,
               schema_evolution: bool, spark: SparkSession | None = None, *,
               user_metadata: str | None = None) -> bool:
    from deltalake import write_deltalake

    def attempt_rs(n: int) -> bool:
        target = _rs_snapshot_for_txn(path, txn_app_id, data.schema)
        if target is not None and rs_txn_recorded(target, txn_app_id, txn_version):
            return False
        rows, mode = data, "merge" if schema_evolution else None
        if target is None and not table_exists(path, backend="rs"):
            if not needs_column_mapping(arrow_schema_to_spark(data.schema)):  # the write creates it
                try:
                    write_deltalake(str(path), rows, mode=rs_create_mode(path, "append"), schema_mode=mode,
                                    configuration=NEW_TABLE_PROPERTIES,
                                    storage_options=rs_options(path),
                                    commit_properties=rs_commit_properties(txn_app_id, txn_version, user_metadata,
                                                                           path, creates=True))
                except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
                    rs_created_meanwhile(path, e)
                    raise
                rs_landed(path)
                return True
            rs_create(path, data.schema)  # with column mapping, which its names need
        table = target if target is not None else rs_table(path)
        if uses_column_mapping(table.metadata().configuration):
            rs_ensure_mapping_feature(path)
            table = rs_table(path) if target is None else _rs_snapshot_for_txn(path, txn_app_id, data.schema)
            # delta-rs writes a column-mapped table only with its exact columns: new ones are
            # added first (by delta-spark, see add_columns), missing ones are written as nulls
            current = schema(path, backend="rs")
            new = new_fields(arrow_schema_to_spark(data.schema), current)
            if new and schema_evolution:
                add_columns(path, new, spark=spark, backend="rs")
                current = schema(path, backend="rs")
                table = rs_table(path) if target is None else _rs_snapshot_for_txn(path, txn_app_id, data.schema)
            rows, mode = fit_columns(data, current), None
        write_deltalake(
            table,
            rows,
            mode="append",
            schema_mode=mode,
            commit_properties=rs_commit_properties(txn_app_id, txn_version, user_metadata, path),
        )
        rs_landed(path)
        return True

    return commit_retried("append", path, attempt_rs)


# -- merging


def merge_rs(
    path: str,
    source: pa.Table,
    on: str,
    clauses: Sequence[MergeClause],
    commit: CommitInfo = NO_COMMIT_INFO,
) -> MergeResult:
    """MERGE an Arrow table into the Delta table at ``path`` with delta-rs.

    >>> merge_rs(path, arrow, "t.`id` = s.`id`", [MergeClause("insert", None, {"id": "s.`id`"})])  # doctest: +SKIP
    MergeResult(inserted=1, updated=0, deleted=0, backend='rs')
    """
    if source is None:
        raise ValueError("'source' in merge cannot be None")
    check_merge(on, clauses)
    txn_app_id, txn_version, user_metadata = commit.app_id, commit.version, commit.metadata

    rs_ensure_mapping_feature(path)

    def attempt(n: int) -> dict | None:
        target = rs_table(path)
        if rs_txn_recorded(target, txn_app_id, txn_version):
            return None
        builder = target.merge(
            source,
            on,
            source_alias=SOURCE_ALIAS,
            target_alias=TARGET_ALIAS,
            commit_properties=rs_commit_properties(txn_app_id, txn_version, user_metadata, path),
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
        metrics = builder.execute()
        rs_landed(path)
        return metrics

    metrics = commit_retried("merge", path, attempt) or {}
    return MergeResult(
        inserted=int(metrics.get("num_target_rows_inserted", 0)),
        updated=int(metrics.get("num_target_rows_updated", 0)),
        deleted=int(metrics.get("num_target_rows_deleted", 0)),
        backend="rs",
    )
