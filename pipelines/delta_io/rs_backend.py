"""The delta-rs backend (:class:`RsBackend`, the ``deltalake`` package): every operation done by
delta-rs on the driver, with Arrow between it and Spark. Reads are Spark Parquet reads of the files
delta-rs lists (or delta-rs's own query engine); writes, MERGE (:func:`merge_rs`, in chunks of
:data:`MERGE_CHUNK_ROWS`) and upkeep are delta-rs calls on the driver.

The operation modules (:mod:`~pipelines.delta_io.reads`, ``writes``, ``merging``, ``upkeep``,
``commits``) do the shared part of a call and reach this module through
:func:`pipelines.delta_io.backend.backend_for`; it imports them, never the other way round.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from urllib.parse import unquote, urlparse

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import faults, storage
from pipelines.delta_io.arrow import (
    _check_columns, _delta_field_json, _fit_columns, arrow_schema_to_spark, arrow_to_spark, delta_schema_to_spark,
    as_arrow, rows_to_arrow, spark_to_arrow,
)
from pipelines.delta_io import pins
from pipelines.delta_io.backend import NEW_TABLE_PROPERTIES, DeltaIOError, quote_ident
from pipelines.delta_io.commits import _commit, _txn_recorded, check_txn
from pipelines.delta_io.features import (
    DELETION_VECTORS, create_properties, needs_column_mapping, physical_names, strip_mapping_metadata,
    uses_column_mapping,
)
from pipelines.delta_io.merging import MergeClause, MergeResult, _check_merge
from pipelines.delta_io.reads import Commit, schema, table_exists
from pipelines.delta_io.writes import _new_fields, add_columns


def _rs_options(path: str) -> dict[str, str] | None:
    """delta-rs's storage options for the table at ``path``: the process's storage settings
    (:mod:`pipelines.storage`; the session's Hadoop options)."""
    return storage.delta_storage_options(str(path))


def _rs_table(path: str):
    """The table at ``path`` as delta-rs loads it: at the version this thread pinned, else the latest."""
    import deltalake

    pin = pins.pin_of(path)
    if pin is None:
        return deltalake.DeltaTable(str(path), storage_options=_rs_options(path))
    if pin.version is None:  # (pinned as missing: whoever reads it now reads another writer's table)
        raise pin.stale("read", "the table was created meanwhile")
    return deltalake.DeltaTable(str(path), version=pin.version, storage_options=_rs_options(path))


def _rs_landed(path: str) -> None:
    """A commit of ours to ``path`` landed: a pin on it moves to the next version."""
    pin = pins.pin_of(path)
    if pin is not None:
        pin.landed()


def _rs_create_mode(path: str, default: str) -> str:
    """The write mode of a write that may create the table: ``"error"`` when this thread pinned it
    as missing (another writer's table must not be written into), else ``default``."""
    pin = pins.pin_of(path)
    if pin is not None and pin.version is not None:
        raise pin.stale("create", "it was planned as a new table")
    return "error" if pin is not None else default


def _rs_created_meanwhile(path: str, error: Exception) -> None:
    """Turn a failed creating write into :class:`~pipelines.delta_io.pins.StaleRead` when this thread
    pinned the table as missing and another writer made it; else let ``error`` stand."""
    pin = pins.pin_of(path)
    if pin is not None and deltalake_table_exists(path):
        raise pin.stale("create", "another writer created it") from error


def _rs_arrow_filesystem(dt):
    """pyarrow's own filesystem rooted at a remote table, for reading its files (None for a local
    one: delta-rs's default). Reading a remote table through deltalake's default filesystem can
    abort the process at exit ("terminate called without an active exception",
    delta-io/delta-rs#2184): seen here on S3 in about half the runs."""
    if not storage.is_remote(dt.table_uri):
        return None
    from pyarrow import fs as pafs

    fs, root = storage.arrow_filesystem(dt.table_uri)
    return pafs.SubTreeFileSystem(root, fs)


def deltalake_table_exists(path: str) -> bool:
    import deltalake

    return bool(deltalake.DeltaTable.is_deltatable(str(path), storage_options=_rs_options(path)))


# -- reads


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
    if "deletionVectors" in set(dt.protocol().reader_features or ()):  # to_pyarrow_table refuses them
        return _rs_query(dt, list(columns) if columns is not None else
                         [f.name for f in delta_schema_to_spark(dt.schema().to_json()).fields])
    return dt.to_pyarrow_table(columns=list(columns) if columns is not None else None,
                               filesystem=_rs_arrow_filesystem(dt))


def read_arrow_in(path: str, columns: Sequence[str], column: str, values: Sequence[str]) -> pa.Table:
    """The rows of the table whose string ``column`` is one of ``values``, as Arrow, through delta-rs's
    query engine (its files' statistics skip the files that cannot hold them): a few rows of a big
    table (``pipelines.status`` looks up bronze's rows at silver's watermarks).

    >>> read_arrow_in(str(tmp_path / "bronze"), ["_seq", "gtid"], "_seq", ["0000000001..."])  # doctest: +SKIP
    """
    if not values:
        return _rs_query(_rs_table(path), columns, where="FALSE")
    listed = ", ".join("'" + str(v).replace("'", "''") + "'" for v in values)
    return _rs_query(_rs_table(path), columns, where=f"{_quoted(column)} IN ({listed})")


def exit_process(code: int) -> None:
    """End a command-line tool that read tables through delta-rs/pyarrow: flush, then leave without
    the interpreter's teardown, where their reader threads at times abort the process ("terminate
    called without an active exception", exit 134, after the tool's work and output are done:
    apache/arrow#34314, delta-io/delta-rs#2184; about 1 run in 6 of ``pipelines.quarantine`` here)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def count_rows(path: str) -> int:
    """The number of rows of the table's current snapshot (deletion vectors counted), through delta-rs."""
    from deltalake import QueryBuilder

    out = QueryBuilder().register("t", _rs_table(path)).execute("SELECT count(*) AS n FROM t").read_all()
    return int(out.column("n")[0].as_py()) if out.num_rows else 0


def _quoted(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def _rs_query(dt, columns: Sequence[str], where: str | None = None) -> pa.Table:
    """The table's rows through delta-rs's own query engine, which knows every reader feature
    (column mapping, deletion vectors, partitions); the rows pass through the driver."""
    from deltalake import QueryBuilder

    select = ", ".join(_quoted(c) for c in columns)
    sql = f"SELECT {select} FROM t" + (f" WHERE {where}" if where else "")
    return pa.table(QueryBuilder().register("t", dt).execute(sql).read_all())


# -- commits


def _rs_commit_properties(
    txn_app_id: str | None, txn_version: int | None, user_metadata: str | None, path: str | None = None
):
    """delta-rs commit properties: the transaction id, the user metadata, and for a table this thread
    pinned (``path``), no retry: the commit lands on the pinned version or fails."""
    from deltalake import CommitProperties, Transaction

    pinned = path is not None and pins.pin_of(path) is not None
    if txn_app_id is None and user_metadata is None and not pinned:
        return None
    return CommitProperties(
        custom_metadata=None if user_metadata is None else {"userMetadata": user_metadata},
        app_transactions=None if txn_app_id is None else [Transaction(txn_app_id, txn_version)],
        max_commit_retries=0 if pinned else None,
    )


def _rs_txn_recorded(table, txn_app_id: str | None, txn_version: int | None) -> bool:
    """True when the delta-rs snapshot ``table`` already holds ``txn_version`` for ``txn_app_id``."""
    if txn_app_id is None:
        return False
    last = table.transaction_version(txn_app_id)
    return last is not None and last >= txn_version


def _rs_properties(user_metadata: str | None, path: str | None = None):
    return _rs_commit_properties(None, None, user_metadata, path)


# -- writes


def _rs_snapshot_for_txn(path: str, txn_app_id: str | None, arrow_schema: pa.Schema):
    """For an idempotent delta-rs write: the table's current snapshot, to check the transaction id
    on and to commit against (a commit made after it then conflicts, so two writers racing with one
    txn id cannot both land). A missing table is created first, empty: delta-rs does not check
    two racing creating writes against each other. None when there is no txn id."""
    if txn_app_id is None:
        return None
    if not deltalake_table_exists(path):
        _rs_create(path, arrow_schema)
    return _rs_table(path)


def _rs_create(path: str, table_schema: T.StructType | pa.Schema, extra: Mapping[str, str] | None = None) -> None:
    """Create an empty table with delta-rs (nothing when one exists), with the properties its
    names need (and ``extra``); every column nullable."""
    from deltalake import DeltaTable, Schema

    if isinstance(table_schema, pa.Schema):
        table_schema = arrow_schema_to_spark(table_schema)
    nullable = T.StructType([T.StructField(f.name, f.dataType, True) for f in table_schema.fields])
    properties = {**NEW_TABLE_PROPERTIES, **create_properties(nullable), **(extra or {})}
    mode = _rs_create_mode(path, "ignore")
    try:
        DeltaTable.create(str(path), Schema.from_json(nullable.json()), mode=mode, configuration=properties or None,
                          storage_options=_rs_options(path))
    except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
        _rs_created_meanwhile(path, e)
        raise
    _rs_landed(path)
    if uses_column_mapping(properties):
        _rs_ensure_mapping_feature(path)


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
        _rs_create_mode(path, "error")
        try:
            write_deltalake(str(path), data, mode="error", storage_options=_rs_options(path),
                            configuration={**NEW_TABLE_PROPERTIES, **(properties or {})},
                            commit_properties=_rs_commit_properties(None, None, user_metadata))
        except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
            _rs_created_meanwhile(path, e)
            raise
        _rs_landed(path)
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
        dt.alter.add_feature(TableFeatures.ColumnMapping, allow_protocol_versions_increase=True,
                             commit_properties=_rs_commit_properties(None, None, None, path))
        _rs_landed(path)


def _rs_needs_spark_to_add(path: str, adding: Sequence[T.StructField]) -> bool:
    """True when delta-rs cannot add ``adding`` in place: it cannot change the schema of a
    column-mapped table (deltalake 1.6: "Schema evolution on column-mapped tables is not yet
    supported"), nor turn column mapping on for a table that has none."""
    dt = _rs_table(path)
    return uses_column_mapping(dt.metadata().configuration) or needs_column_mapping(adding)


def _add_columns_rs_elsewhere(path: str, adding: Sequence[T.StructField], spark: SparkSession | None) -> list[str]:
    """Columns that delta-rs cannot add in place (see :func:`_rs_needs_spark_to_add`) are added by
    delta-spark when this session has it (a change of the schema alone); else, to a column-mapped
    table, by writing its rows again with the new columns empty
    (:func:`~pipelines.delta_io.rs_reshape.reshape_rs`, one commit). Only turning column mapping
    on for a table without it needs delta-spark."""
    from pipelines.spark_session import delta_spark_available

    if spark is not None and delta_spark_available(spark):
        return add_columns(path, adding, spark=spark, backend="spark")
    if uses_column_mapping(_rs_table(path).metadata().configuration):
        from pipelines.delta_io.rs_reshape import reshape_rs

        def attempt(n: int) -> list[str]:
            current = schema(path, backend="rs")
            new = _new_fields(T.StructType(list(adding)), current)
            if new:
                reshape_rs(path, _fit_columns(read_arrow(path), T.StructType(current.fields + new)))
            return [f.name for f in new]

        return _commit("add_columns", path, attempt)
    names = [f.name for f in adding]
    raise DeltaIOError(
        f"add_columns({path}): cannot add {names} with delta-rs: their names need column mapping "
        "(a column name holds one of ' ,;{}()\\n\\t='), which deltalake 1.6 cannot turn on for a table "
        "created without it. Run this step with delta-spark on the classpath (make setup fetches the "
        "jars; set delta.backend: spark, or --delta-backend spark)")


def append_with_rows_rs(path: str, table_schema: T.StructType, rows: Sequence[tuple] | pa.Table, *,
                        user_metadata: str | None = None) -> bool:
    """delta-rs: ``rows`` (in ``table_schema``, the table's columns) appended to the table at
    ``path`` in one commit that records ``user_metadata``: the commit of a MERGE that inserts
    every source row, without the MERGE's read of the stored rows.

    >>> append_with_rows_rs(str(tmp_path / "t"), schema, [(2,)], user_metadata='{"w": "2"}')  # doctest: +SKIP
    True
    """
    return _append_rs(path, as_arrow(rows, strip_mapping_metadata(table_schema)), None, None, False,
                      user_metadata=user_metadata)


def _append_rs(path: str, data: pa.Table, txn_app_id: str | None, txn_version: int | None,
               schema_evolution: bool, spark: SparkSession | None = None, *,
               user_metadata: str | None = None) -> bool:
    from deltalake import write_deltalake

    def attempt_rs(n: int) -> bool:
        target = _rs_snapshot_for_txn(path, txn_app_id, data.schema)
        if target is not None and _rs_txn_recorded(target, txn_app_id, txn_version):
            return False
        rows, mode = data, "merge" if schema_evolution else None
        if target is None and not table_exists(path, backend="rs"):
            if not needs_column_mapping(arrow_schema_to_spark(data.schema)):  # the write creates it
                try:
                    write_deltalake(str(path), rows, mode=_rs_create_mode(path, "append"), schema_mode=mode,
                                    configuration=NEW_TABLE_PROPERTIES,
                                    storage_options=_rs_options(path), commit_properties=_rs_commit_properties(txn_app_id, txn_version, user_metadata))
                except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
                    _rs_created_meanwhile(path, e)
                    raise
                _rs_landed(path)
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
            commit_properties=_rs_commit_properties(txn_app_id, txn_version, user_metadata, path),
        )
        _rs_landed(path)
        return True

    return _commit("append", path, attempt_rs)


# -- merging


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
            commit_properties=_rs_commit_properties(txn_app_id, txn_version, user_metadata, path),
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
        _rs_landed(path)
        return metrics

    metrics = _commit("merge", path, attempt) or {}
    return MergeResult(
        inserted=int(metrics.get("num_target_rows_inserted", 0)),
        updated=int(metrics.get("num_target_rows_updated", 0)),
        deleted=int(metrics.get("num_target_rows_deleted", 0)),
        backend="rs",
    )


MERGE_CHUNK_ROWS = 1_000_000  # delta-rs: source rows per MERGE commit (see merge)


class RsBackend:
    """:class:`~pipelines.delta_io.backend.DeltaBackend` on delta-rs (each method is the delta-rs
    half of the operation of the same name)."""

    name = "rs"

    # -- reads

    def table_exists(self, spark: SparkSession | None, path: str) -> bool:
        return deltalake_table_exists(path)

    def schema(self, spark: SparkSession | None, path: str) -> T.StructType:
        return strip_mapping_metadata(delta_schema_to_spark(_rs_table(path).schema().to_json()))

    def version(self, spark: SparkSession | None, path: str) -> int:
        import deltalake

        # (the latest, whatever this thread pinned: what a pin is checked against)
        return int(deltalake.DeltaTable(str(path), storage_options=_rs_options(path)).version())

    def read(self, spark: SparkSession, path: str, columns: Sequence[str] | None,
             above: tuple[str, object] | None, keep: Column | None) -> DataFrame:
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
        return df

    def nothing_above(self, spark: SparkSession | None, path: str, column: str, value) -> bool:
        return _rs_files_above(_rs_table(path), column, value) == set()

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

    # -- commits

    def last_txn_version(self, spark: SparkSession | None, path: str, app_id: str) -> int | None:
        return _rs_table(path).transaction_version(app_id)

    # -- writes

    def create(self, spark: SparkSession | None, path: str, table_schema: T.StructType,
               properties: Mapping[str, str] | None = None) -> None:
        if properties and properties.get(DELETION_VECTORS, "false").lower() == "true":
            raise DeltaIOError(f"{path}: delta-rs cannot create a table with deletion vectors; "
                               "create it with delta-spark (delta.backend: spark)")
        _rs_create(path, table_schema, properties)

    def add_columns_elsewhere(self, spark: SparkSession | None, path: str,
                              adding: Sequence[T.StructField]) -> list[str] | None:
        if _rs_needs_spark_to_add(path, adding):
            return _add_columns_rs_elsewhere(path, adding, spark)
        return None

    def add_columns(self, spark: SparkSession | None, path: str, adding: Sequence[T.StructField]) -> None:
        from deltalake import Field

        _rs_table(path).alter.add_columns([Field.from_json(_delta_field_json(f)) for f in adding],
                                          commit_properties=_rs_commit_properties(None, None, None, path))
        _rs_landed(path)

    def append(self, spark: SparkSession, df: DataFrame, path: str, txn_app_id: str | None,
               txn_version: int | None, schema_evolution: bool) -> bool:
        return _append_rs(path, spark_to_arrow(df), txn_app_id, txn_version, schema_evolution, spark)

    def append_rows(self, spark: SparkSession | None, rows: Sequence[tuple], struct: T.StructType, path: str,
                    txn_app_id: str | None, txn_version: int | None, schema_evolution: bool) -> bool:
        if _txn_recorded(path, txn_app_id, txn_version, spark, self.name):
            return False
        faults.point(f"append.{faults.table_kind(path)}.materialize")
        return _append_rs(path, rows_to_arrow(rows, struct), txn_app_id, txn_version, schema_evolution, spark)

    def overwrite(self, spark: SparkSession, df: DataFrame, path: str, overwrite_schema: bool,
                  user_metadata: str | None = None) -> None:
        from deltalake import write_deltalake

        data = spark_to_arrow(df)

        def attempt(n: int) -> None:
            exists = table_exists(path, backend="rs")
            if overwrite_schema and exists and uses_column_mapping(_rs_table(path).metadata().configuration):
                from pipelines.delta_io.rs_reshape import reshape_rs

                return reshape_rs(path, data, user_metadata)  # (which delta-rs's write cannot do)
            try:
                write_deltalake(_rs_table(path) if exists else str(path), data,
                                storage_options=None if exists else _rs_options(path),
                                configuration=None if exists else NEW_TABLE_PROPERTIES,
                                mode="overwrite" if exists else _rs_create_mode(path, "overwrite"),
                                schema_mode="overwrite" if overwrite_schema else None,
                                commit_properties=_rs_commit_properties(None, None, user_metadata, path))
            except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
                if not exists:
                    _rs_created_meanwhile(path, e)
                raise
            _rs_landed(path)

        _commit("overwrite", path, attempt)

    def overwrite_rows(self, spark: SparkSession | None, rows: Sequence[tuple], struct: T.StructType,
                       path: str) -> None:
        from deltalake import write_deltalake

        data = rows_to_arrow(rows, struct)
        _commit("overwrite", path, lambda n: write_deltalake(str(path), data, mode="overwrite",
                                                             storage_options=_rs_options(path)))

    # -- merging

    def merge(self, spark: SparkSession, path: str, source: DataFrame, on: str, clauses: Sequence[MergeClause], *,
              source_alias: str, target_alias: str, txn_app_id: str | None, txn_version: int | None,
              user_metadata: str | None, source_schema: T.StructType | None, split_by: Sequence[str] | None,
              source_rows: int | None, local_source: bool = False) -> MergeResult:
        """The source to the driver as Arrow, in parts of at most :data:`MERGE_CHUNK_ROWS` rows
        split by a hash of ``split_by`` (see :func:`pipelines.delta_io.merging.merge`)."""
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

    def create_with_rows(self, spark: SparkSession | None, path: str, table_schema: T.StructType, rows,
                         user_metadata: str | None, properties: Mapping[str, str] | None) -> bool:
        return create_with_rows_rs(path, table_schema, rows, user_metadata=user_metadata, properties=properties)

    def append_with_rows(self, spark: SparkSession | None, path: str, table_schema: T.StructType, rows,
                         user_metadata: str | None) -> bool:
        return append_with_rows_rs(path, table_schema, rows, user_metadata=user_metadata)

    def merge_rows(self, spark: SparkSession | None, path: str, source: pa.Table, source_schema: T.StructType | None,
                   on: str, clauses: Sequence[MergeClause], user_metadata: str | None) -> MergeResult:
        return merge_rs(path, source, on, clauses, user_metadata=user_metadata)

    # -- upkeep

    def snapshot_size(self, spark: SparkSession | None, path: str) -> tuple[int, int, int]:
        table = _rs_table(path)
        adds = table.get_add_actions(flatten=True)
        files = adds.num_rows
        live = sum(v or 0 for v in adds.column("size_bytes").to_pylist()) if files else 0
        version = table.version()
        return files, live, version

    def compact(self, spark: SparkSession | None, path: str, target_bytes: int,
                user_metadata: str | None) -> tuple[int, int]:
        metrics = _rs_table(path).optimize.compact(target_size=target_bytes,
                                                   commit_properties=_rs_properties(user_metadata))
        return int(metrics.get("numFilesRemoved", 0)), int(metrics.get("numFilesAdded", 0))

    def checkpoint(self, spark: SparkSession | None, path: str) -> None:
        table = _rs_table(path)
        table.create_checkpoint()
        _rs_table(path).cleanup_metadata()

    def set_properties(self, spark: SparkSession | None, path: str, wanted: Mapping[str, str],
                       user_metadata: str | None) -> bool:
        table = _rs_table(path)
        have = table.metadata().configuration
        changed = {k: v for k, v in wanted.items() if have.get(k) != v}
        if not changed:
            return False
        table.alter.set_table_properties(changed, commit_properties=_rs_properties(user_metadata))
        return True

    def vacuum(self, spark: SparkSession | None, path: str, retention_hours: int, user_metadata: str | None) -> int:
        # full: also the files no version names (the Parquet files of a run killed before its
        # commit, a reshape that never committed) once older than the retention, as delta-spark's does
        removed = _rs_table(path).vacuum(retention_hours=int(retention_hours), dry_run=False,
                                         enforce_retention_duration=False, full=True,
                                         commit_properties=_rs_properties(user_metadata))
        # on S3 the folder's own marker object ('', made by a create_dir) goes too: not a file
        return sum(1 for name in removed if name and not name.endswith("/"))


BACKEND = RsBackend()
