"""The delta-spark backend (:class:`SparkBackend`): every operation done by delta-spark on the JVM,
the session settings its commits carry (:func:`commit_session`), its log and snapshot through the
JVM (:func:`spark_delta_log`, :func:`spark_snapshot`), the protocol features it must be told to
enable, and its MERGE (:func:`merge_spark`).

The operation modules (:mod:`~pipelines.delta_io.reads`, ``writes``, ``merging``, ``upkeep``,
``commits``) do the shared part of a call and reach this module through
:func:`pipelines.delta_io.backend.backend_for`; it imports them, never the other way round.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.delta_io import pins
from pipelines.delta_io.arrow import _check_columns, as_arrow
from pipelines.delta_io.backend import NEW_TABLE_PROPERTIES, DeltaIOError, quote_ident
from pipelines.delta_io.commits import _commit, _txn_recorded, check_txn
from pipelines.delta_io.features import (
    COLUMN_MAPPING_MODE, TIMESTAMP_NTZ_FEATURE, create_properties, needs_column_mapping, needs_timestamp_ntz,
    strip_mapping_metadata, uses_column_mapping,
)
from pipelines.delta_io.merging import MergeClause, MergeResult, _check_merge
from pipelines.delta_io.reads import Commit, read, schema, table_exists
from pipelines.delta_io.upkeep import storage
from pipelines.delta_io.writes import _new_fields, add_columns, append, create_if_missing, overwrite


# Spark SQL settings delta-spark reads for idempotent DML and for the commit's user metadata.
_SPARK_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"


_SPARK_TXN_VERSION = "spark.databricks.delta.write.txnVersion"


_SPARK_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


# delta-spark's MERGE settings that :func:`merge_spark` sets for one command (see there).
_SPARK_MERGE_MATERIALIZE = "spark.databricks.delta.merge.materializeSource"


_SPARK_MERGE_PERSISTENT_DVS = "spark.databricks.delta.merge.deletionVectors.persistent"


# A table of at most this many bytes: a MERGE rewrites the files it touches rather than writing
# deletion vectors for them (see :func:`merge_spark`).
REWRITE_BELOW_BYTES = 4 << 20


_SPARK_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"


_SPARK_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"


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


def _table_bytes(spark: SparkSession, path: str) -> int:
    """The bytes of the table's live files: from the checksum file of its current version (no
    Spark job), else from its snapshot's state (which a MERGE computes anyway)."""
    snapshot = spark_snapshot(spark, path)
    checksum = snapshot.checksumOpt()
    return int(checksum.get().tableSizeBytes() if checksum.isDefined() else snapshot.sizeInBytes())


_COMMIT_IDENTITY_KEYS = (_SPARK_TXN_APP_ID, _SPARK_TXN_VERSION, _SPARK_USER_METADATA)


# -- pinned commits (pipelines.delta_io.pins): checked before, and found in the history after


_PIN_LOOKBACK = 20  # commits of the history searched for a pinned commit's token


def _pin_before(spark: SparkSession, path: str, what: str) -> "pins.Pin | None":
    """The pin this thread holds on ``path``, checked against the table as it is now: a table that
    moved since raises :class:`~pipelines.delta_io.pins.StaleRead` before anything is written."""
    pin = pins.pin_of(path)
    if pin is None:
        return None
    from delta.tables import DeltaTable

    exists = bool(DeltaTable.isDeltaTable(spark, str(path)))
    now = spark_snapshot(spark, path).version() if exists else None
    if now != pin.version:
        raise pin.stale(what, "it is at " + ("no table" if now is None else f"version {now}") + " now")
    return pin


def _pin_txn(pin: "pins.Pin | None", txn_app_id: str | None, txn_version: int | None) -> tuple[str | None, int | None]:
    """The transaction id a commit records: a pinned one records :data:`pins.PIN_APP_ID` at the version
    it must make, which delta-spark checks against any writer committing the same id meanwhile."""
    if pin is None or pin.version is None:
        return txn_app_id, txn_version
    if txn_app_id is not None:
        raise DeltaIOError(f"{pin.path}: a pinned commit records its own transaction id; got {txn_app_id!r}")
    return pins.PIN_APP_ID, pin.version + 1


def _pin_after(spark: SparkSession, path: str, pin: "pins.Pin | None", what: str, *, guarded: bool) -> None:
    """Find the pinned commit just made (its token in the user metadata) and move the pin to it.
    Not found: delta-spark skipped it, another writer's commit having recorded the pin's transaction
    id first. Found after commits of others: allowed only for a commit ``guarded`` by the transaction
    id (delta-spark let through only commits that change neither rows nor schema); an unguarded
    one (ALTER TABLE) is stale then."""
    if pin is None:
        return
    first = 0 if pin.version is None else pin.version + 1
    found = _versions_with_token(spark, path, pin.token, first)
    if not found:
        raise pin.stale(what, "delta-spark skipped it: another writer's commit came first")
    at = max(found)
    if at != first and not guarded:
        raise pin.stale(what, f"it landed at version {at}, after another writer's version {first}")
    pin.landed(at)


def _versions_with_token(spark: SparkSession, path: str, token: str, first: int) -> list[int]:
    """The versions from ``first`` on (at most :data:`_PIN_LOOKBACK` of them, up to the log's last)
    whose commit's user metadata carries the pin ``token``, read from the commit files through
    the session's Hadoop file system: a few small reads, where the table's history is a Spark job."""
    jvm = spark._jvm
    log = spark_delta_log(spark, path)
    fs = log.logPath().getFileSystem(log.newDeltaHadoopConf())
    found = []
    for version in range(first, first + _PIN_LOOKBACK):
        file = jvm.org.apache.hadoop.fs.Path(log.logPath(), f"{version:020d}.json")
        if not fs.exists(file):
            break
        stream = fs.open(file)
        try:
            text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
        for line in text.splitlines():
            action = json.loads(line) if '"commitInfo"' in line else {}
            if "commitInfo" in action:
                if pins.token_of(action["commitInfo"].get("userMetadata")) == token:
                    found.append(version)
                break
    return found


_EXISTS_ERRORS = ("TABLE_OR_VIEW_ALREADY_EXISTS", "DELTA_PATH_EXISTS")  # a create that found a table there


def _pin_created_meanwhile(spark: SparkSession, path: str, pin: "pins.Pin | None", what: str, error: Exception) -> None:
    """Turn a failed create of a table pinned as missing into :class:`~pipelines.delta_io.pins.StaleRead`
    when another writer made it (or is making it: delta-spark refuses a path whose log has begun)."""
    from delta.tables import DeltaTable

    if pin is None or pin.version is not None:
        return
    if any(code in str(error) for code in _EXISTS_ERRORS) or DeltaTable.isDeltaTable(spark, str(path)):
        raise pin.stale(what, "another writer created it") from error


def _pinned_writer(writer, pin: "pins.Pin | None", user_metadata: str | None, txn_app_id: str | None = None,
                   txn_version: int | None = None):
    """A DataFrameWriter with the commit's identity: its transaction id and user metadata, the pin's
    (a table pinned as missing is created, never written into: ``errorifexists``)."""
    app, version = _pin_txn(pin, txn_app_id, txn_version)
    if app is not None:
        writer = writer.option("txnAppId", app).option("txnVersion", str(version))
    meta = pin.tag(user_metadata) if pin is not None else user_metadata
    if meta is not None:
        writer = writer.option("userMetadata", meta)
    if pin is not None and pin.version is None:
        writer = writer.mode("errorifexists")
    return writer


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


def _ddl_type(dt: T.DataType) -> str:
    """Spark DDL text for a type, quoting nested field names (``simpleString`` does not)."""
    if isinstance(dt, T.StructType):
        return "STRUCT<" + ", ".join(f"{quote_ident(f.name)}: {_ddl_type(f.dataType)}" for f in dt.fields) + ">"
    if isinstance(dt, T.ArrayType):
        return f"ARRAY<{_ddl_type(dt.elementType)}>"
    if isinstance(dt, T.MapType):
        return f"MAP<{_ddl_type(dt.keyType)}, {_ddl_type(dt.valueType)}>"
    return dt.simpleString()


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
        pin = _pin_before(spark, path, "create")
        try:
            _pinned_writer(writer, pin, user_metadata).save(str(path))
        except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
            _pin_created_meanwhile(spark, path, pin, "create", e)
            raise
        _pin_after(spark, path, pin, "create", guarded=True)
        return True

    return _commit("create", path, attempt)


def append_with_rows_spark(spark: SparkSession, path: str, table_schema: T.StructType, rows: Sequence[tuple] | pa.Table,
                           *, user_metadata: str | None = None) -> bool:
    """delta-spark's :func:`~pipelines.delta_io.rs_backend.append_with_rows_rs`: ``rows`` (in
    ``table_schema``, the table's columns) appended in one commit that records ``user_metadata``,
    one Spark job, without a MERGE's scan of the stored rows."""
    table_schema = strip_mapping_metadata(table_schema)
    writer = (spark.createDataFrame(as_arrow(rows, table_schema), schema=table_schema).coalesce(1)
              .write.format("delta").mode("append"))

    def attempt(n: int) -> bool:
        pin = _pin_before(spark, path, "append")
        _pinned_writer(writer, pin, user_metadata).save(str(path))
        _pin_after(spark, path, pin, "append", guarded=True)
        return True

    return _commit("append", path, attempt)


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
    pin = _pin_before(spark, path, "alter")
    if pin is None:
        spark.sql(sql)
        return
    commit_session(spark, {_SPARK_USER_METADATA: pin.tag(None)}).sql(sql)
    _pin_after(spark, path, pin, "alter", guarded=False)


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
    _check_merge(on, clauses)
    check_txn(txn_app_id, txn_version)
    from delta.tables import DeltaTable

    settings = {
        _SPARK_TXN_APP_ID: txn_app_id,
        _SPARK_TXN_VERSION: None if txn_version is None else str(txn_version),
        _SPARK_USER_METADATA: user_metadata,
        _SPARK_MERGE_MATERIALIZE: "none" if local_source else None,
    }
    pin = pins.pin_of(path)

    def attempt(n: int) -> DataFrame | None:
        if n and _txn_recorded(path, txn_app_id, txn_version, spark, "spark"):
            return None
        if pin is not None:  # (on the pinned version, recording the pin's id and token)
            _pin_before(spark, path, "merge")
            app, version = _pin_txn(pin, txn_app_id, txn_version)
            settings.update({_SPARK_TXN_APP_ID: app, _SPARK_TXN_VERSION: str(version),
                             _SPARK_USER_METADATA: pin.tag(user_metadata)})
        if _table_bytes(spark, path) <= REWRITE_BELOW_BYTES:
            settings[_SPARK_MERGE_PERSISTENT_DVS] = "false"
        builder = (
            DeltaTable.forPath(commit_session(spark, settings), str(path))
            .alias(target_alias)
            .merge(source.alias(source_alias), on)
        )
        metrics = _with_clauses(builder, clauses).execute()
        _pin_after(spark, path, pin, "merge", guarded=True)
        return metrics

    return _merge_result(_commit("merge", path, attempt))


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


class SparkBackend:
    """:class:`~pipelines.delta_io.backend.DeltaBackend` on delta-spark (each method is the
    delta-spark half of the operation of the same name)."""

    name = "spark"

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
            _check_columns(columns, df.columns, f"read({path})")
            df = df.select(*[F.col(quote_ident(c)) for c in columns])
        return df

    def nothing_above(self, spark: SparkSession, path: str, column: str, value) -> bool:
        return False

    def read_rows(self, spark: SparkSession, path: str, columns: Sequence[str] | None,
                  above: tuple[str, object] | None) -> list:
        return read(spark, path, columns, backend="spark", above=above).collect()

    def history(self, spark: SparkSession, path: str, limit: int | None) -> list[Commit]:
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

    # -- commits

    def last_txn_version(self, spark: SparkSession, path: str, app_id: str) -> int | None:
        return _spark_log_txn_version(spark, path, app_id)

    # -- writes

    def create(self, spark: SparkSession, path: str, table_schema: T.StructType,
               properties: Mapping[str, str] | None = None) -> None:
        # SQL, not DeltaTable.createIfNotExists(): its builder puts the path between
        # backticks without doubling the backticks a path may hold
        cols = ", ".join(f"{quote_ident(f.name)} {_ddl_type(f.dataType)}" for f in table_schema.fields)
        wanted = {**NEW_TABLE_PROPERTIES, **create_properties(table_schema), **(properties or {})}
        props = ", ".join(f"'{k}' = '{v}'" for k, v in wanted.items())
        pin = _pin_before(spark, path, "create")
        # (pinned: a plain CREATE TABLE, which fails when another writer made the table meanwhile)
        sql = (f"CREATE TABLE {'' if pin is not None else 'IF NOT EXISTS '}delta.{quote_ident(str(path))} ({cols}) "
               "USING delta" + (f" TBLPROPERTIES ({props})" if props else ""))
        try:
            commit_session(spark, {_SPARK_USER_METADATA: None if pin is None else pin.tag(None)}).sql(sql)
        except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
            _pin_created_meanwhile(spark, path, pin, "create", e)
            raise
        _pin_after(spark, path, pin, "create", guarded=False)

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
            add_columns(path, _new_fields(df.schema, schema(path, spark=spark, backend=which)), spark=spark,
                        backend=which)
        writer = df.write.format("delta").mode("append")
        if schema_evolution:
            writer = writer.option("mergeSchema", "true")

        def attempt(n: int) -> bool:
            if n and _txn_recorded(path, txn_app_id, txn_version, spark, which):
                return False
            pin = _pin_before(spark, path, "append")
            try:
                _pinned_writer(writer, pin, None, txn_app_id, txn_version).save(str(path))
            except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
                if pin is not None and pin.version is None:
                    _pin_created_meanwhile(spark, path, pin, "append", e)
                raise
            _pin_after(spark, path, pin, "append", guarded=True)
            return True

        return _commit("append", path, attempt)

    def append_rows(self, spark: SparkSession, rows: Sequence[tuple], struct: T.StructType, path: str,
                    txn_app_id: str | None, txn_version: int | None, schema_evolution: bool) -> bool:
        return append(spark, spark.createDataFrame(list(rows), struct), path, txn_app_id=txn_app_id,
                      txn_version=txn_version, schema_evolution=schema_evolution, backend=self.name)

    def overwrite(self, spark: SparkSession, df: DataFrame, path: str, overwrite_schema: bool,
                  user_metadata: str | None = None) -> None:
        writer = df.write.format("delta").mode("overwrite")
        if overwrite_schema:
            writer = writer.option("overwriteSchema", "true")

        def attempt(n: int) -> None:
            if overwrite_schema and table_exists(path, spark=spark, backend="spark"):  # the new names' features first
                _enable_features_spark(commit_session(spark), path, df.schema.fields)
            pin = _pin_before(spark, path, "overwrite")
            try:
                _pinned_writer(writer, pin, user_metadata).save(str(path))
            except Exception as e:  # noqa: BLE001 - only another writer's table is a stale plan
                if pin is not None and pin.version is None:
                    _pin_created_meanwhile(spark, path, pin, "overwrite", e)
                raise
            _pin_after(spark, path, pin, "overwrite", guarded=True)

        _commit("overwrite", path, attempt)

    def overwrite_rows(self, spark: SparkSession, rows: Sequence[tuple], struct: T.StructType, path: str) -> None:
        overwrite(spark, spark.createDataFrame(list(rows), struct), path, backend="spark")

    # -- merging

    def merge(self, spark: SparkSession, path: str, source: DataFrame, on: str, clauses: Sequence[MergeClause], *,
              source_alias: str, target_alias: str, txn_app_id: str | None, txn_version: int | None,
              user_metadata: str | None, source_schema: T.StructType | None, split_by: Sequence[str] | None,
              source_rows: int | None, local_source: bool = False) -> MergeResult:
        return merge_spark(
            spark, path, source, on, clauses,
            source_alias=source_alias, target_alias=target_alias,
            txn_app_id=txn_app_id, txn_version=txn_version, user_metadata=user_metadata,
            local_source=local_source,
        )

    def create_with_rows(self, spark: SparkSession, path: str, table_schema: T.StructType, rows,
                         user_metadata: str | None, properties: Mapping[str, str] | None) -> bool:
        return create_with_rows_spark(spark, path, table_schema, rows, user_metadata=user_metadata,
                                      properties=properties)

    def append_with_rows(self, spark: SparkSession, path: str, table_schema: T.StructType, rows,
                         user_metadata: str | None) -> bool:
        return append_with_rows_spark(spark, path, table_schema, rows, user_metadata=user_metadata)

    def merge_rows(self, spark: SparkSession, path: str, source: pa.Table, source_schema: T.StructType | None,
                   on: str, clauses: Sequence[MergeClause], user_metadata: str | None) -> MergeResult:
        # (a local relation: the rows are the driver's; delta-spark's MERGE metrics count them)
        return merge_spark(spark, path, spark.createDataFrame(source, schema=source_schema), on, clauses,
                           user_metadata=user_metadata, local_source=True)

    # -- upkeep

    def snapshot_size(self, spark: SparkSession, path: str) -> tuple[int, int, int]:
        detail = spark.sql(f"DESCRIBE DETAIL delta.{quote_ident(str(path))}").collect()[0]
        files, live = int(detail["numFiles"] or 0), int(detail["sizeInBytes"] or 0)
        version = spark_snapshot(spark, path).version()
        return files, live, version

    def compact(self, spark: SparkSession, path: str, target_bytes: int, user_metadata: str | None) -> tuple[int, int]:
        session = commit_session(spark, {_SPARK_USER_METADATA: user_metadata, _SPARK_MAX_FILE_SIZE: str(target_bytes)})
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
        commit_session(spark, {_SPARK_USER_METADATA: user_metadata}).sql(
            f"ALTER TABLE delta.{quote_ident(str(path))} SET TBLPROPERTIES ({pairs})")
        return True

    def vacuum(self, spark: SparkSession, path: str, retention_hours: int, user_metadata: str | None) -> int:
        before = storage(path, spark=spark, backend="spark").disk_files
        session = commit_session(spark, {_SPARK_USER_METADATA: user_metadata, _SPARK_RETENTION_CHECK: "false"})
        session.sql(f"VACUUM delta.{quote_ident(str(path))} RETAIN {int(retention_hours)} HOURS").collect()
        return before - storage(path, spark=spark, backend="spark").disk_files


BACKEND = SparkBackend()
