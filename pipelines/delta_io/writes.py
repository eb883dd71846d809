"""Writing tables: create (with the protocol features names and types need), add columns, append
(idempotent by transaction id), append the driver's rows, overwrite."""
from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from pipelines import faults
from pipelines.delta_io.arrow import (
    _delta_field_json, _fit_columns, arrow_schema_to_spark, ddl_schema, rows_to_arrow, spark_to_arrow,
)
from pipelines.delta_io.backend import (
    DeltaIOError, _rs_table, deltalake_table_exists, quote_ident, resolve_backend,
)
from pipelines.delta_io.commits import (
    _commit, _rs_commit_properties, _rs_txn_recorded, _txn_recorded, check_txn, commit_session,
)
from pipelines.delta_io.features import (
    COLUMN_MAPPING_MODE, TIMESTAMP_NTZ_FEATURE, create_properties, needs_column_mapping, needs_timestamp_ntz,
    strip_mapping_metadata, uses_column_mapping,
)
from pipelines.delta_io.reads import schema, table_exists


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
    (:mod:`pipelines.delta_io.features`).

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

