"""delta_io: one interface, two backends; exact types across the Arrow hop; idempotent appends."""
from __future__ import annotations

import datetime as dt
import json
import os
from decimal import Decimal

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T
from spark_fixtures import delta_backend, spark  # noqa: F401

from pipelines import delta_io
from pipelines.delta_io import DeltaIOError, MergeClause, qualified, quote_ident
from pipelines.spark_session import DELTA_CATALOG, DELTA_EXTENSION, session_conf

UTC = dt.timezone.utc
HOSTILE = ["select", "a b", "x.y", "we`ird", 'q"uo\'te', "😀"]

ELEMENT = T.StructType(
    [
        T.StructField("idx", T.IntegerType()),
        T.StructField("name", T.StringType()),
        T.StructField("bin", T.BinaryType()),
    ]
)
TYPED = T.StructType(
    [
        T.StructField("id", T.IntegerType()),
        T.StructField("b8", T.ByteType()),
        T.StructField("s16", T.ShortType()),
        T.StructField("u64", T.DecimalType(20, 0)),
        T.StructField("amount", T.DecimalType(38, 10)),
        T.StructField("ts", T.TimestampType()),
        T.StructField("ntz", T.TimestampNTZType()),
        T.StructField("day", T.DateType()),
        T.StructField("raw", T.BinaryType()),
        T.StructField("f", T.FloatType()),
        T.StructField("image", T.ArrayType(ELEMENT)),
    ]
)
TYPED_ROWS = [
    (
        1, -128, -32768, Decimal("18446744073709551615"), Decimal("-1234567890123456789012345678.0123456789"),
        dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC), dt.datetime(1000, 1, 1, 0, 0, 0),
        dt.date(9999, 12, 31), b"\x00\xff", 0.5, [(0, "a", b"\x01"), (1, "b", None)],
    ),
    (2, None, None, None, None, None, None, None, None, None, None),
]


def _typed_df(spark):
    return spark.createDataFrame(TYPED_ROWS, TYPED)


def assert_equal_sorted_by(actual, expected, key: str):
    """chispa's ignore_row_order sorts by unquoted names, which hostile names break: sort first."""
    by = F.col(quote_ident(key))
    assert_df_equality(actual.orderBy(by), expected.orderBy(by))


# ---------------------------------------------------------------------------------------------
# identifiers, backend choice, session settings (no Spark needed)


def test_quote_ident_doubles_backticks():
    assert [quote_ident(n) for n in ["select", "a b", "we`ird"]] == ["`select`", "`a b`", "`we``ird`"]
    assert qualified("t", "x.y") == "t.`x.y`"
    with pytest.raises(ValueError, match="non-empty"):
        quote_ident("")


def test_resolve_backend_guards(spark):
    assert delta_io.resolve_backend(spark, "rs") == "rs"
    with pytest.raises(ValueError, match="backend must be one of"):
        delta_io.resolve_backend(spark, "duckdb")
    if not os.environ.get("DELTA_JARS"):
        assert delta_io.resolve_backend(spark, "auto") == "rs"
        with pytest.raises(DeltaIOError, match="delta-spark"):
            delta_io.resolve_backend(spark, "spark")


def test_session_conf_delta_jars_win_over_packages(tmp_path):
    jar = tmp_path / "delta-spark_2.13-4.0.0.jar"
    jar.write_bytes(b"")
    conf = session_conf(
        delta_packages="io.delta:delta-spark_2.13:4.0.0", env={"DELTA_JARS": str(jar)}, local=True
    )
    assert conf["spark.jars"] == str(jar)
    assert "spark.jars.packages" not in conf
    assert (conf["spark.sql.extensions"], conf["spark.sql.catalog.spark_catalog"]) == (DELTA_EXTENSION, DELTA_CATALOG)


def test_session_conf_packages_plain_and_missing_jars(tmp_path):
    conf = session_conf(delta_packages="io.delta:delta-spark_2.13:4.0.0", env={}, local=True)
    assert conf["spark.jars.packages"] == "io.delta:delta-spark_2.13:4.0.0"
    plain = session_conf(env={}, local=True, extra_conf={"spark.sql.shuffle.partitions": "8"})
    assert "spark.sql.extensions" not in plain and plain["spark.sql.shuffle.partitions"] == "8"
    assert plain["spark.sql.session.timeZone"] == "UTC" and plain["spark.ui.enabled"] == "false"
    with pytest.raises(FileNotFoundError, match="nope.jar"):
        session_conf(env={"DELTA_JARS": str(tmp_path / "nope.jar")}, local=True)


# ---------------------------------------------------------------------------------------------
# Arrow <-> Spark


def test_arrow_to_spark_keeps_exact_types_and_casts_arrow_quirks(spark):
    table = pa.table(
        {
            "s": pa.array(["x", None], pa.string_view()),
            "big": pa.array([1, 2], pa.int64()),
            "ts": pa.array([1_000_000, None], pa.timestamp("us")),  # naive: taken as UTC
        }
    )
    schema = T.StructType(
        [T.StructField("s", T.StringType()), T.StructField("big", T.IntegerType()), T.StructField("ts", T.TimestampType())]
    )
    expected = spark.createDataFrame([("x", 1, dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)), (None, 2, None)], schema)
    assert_df_equality(delta_io.arrow_to_spark(spark, table, schema), expected, ignore_row_order=True)


def test_arrow_to_spark_reports_missing_columns(spark):
    with pytest.raises(DeltaIOError, match=r"missing columns \['b'\]; present columns: \['a'\]"):
        delta_io.arrow_to_spark(spark, pa.table({"a": [1]}), T.StructType([T.StructField("b", T.IntegerType())]))


def test_spark_to_arrow_maps_timestamps_for_delta(spark):
    table = delta_io.spark_to_arrow(_typed_df(spark))
    assert table.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("ntz").type == pa.timestamp("us")
    assert table.schema.field("u64").type == pa.decimal128(20, 0)
    assert table.schema.field("b8").type == pa.int8()
    assert all(f.nullable for f in table.schema)


# ---------------------------------------------------------------------------------------------
# tables


def test_append_and_read_round_trip_exact_types(spark, delta_backend, tmp_path):
    path = str(tmp_path / "typed")
    assert delta_io.append(spark, _typed_df(spark), path, backend=delta_backend)
    actual = delta_io.read(spark, path, backend=delta_backend)
    assert_df_equality(actual, _typed_df(spark), ignore_row_order=True)


def test_read_columns_and_predicate(spark, delta_backend, tmp_path):
    path = str(tmp_path / "typed")
    delta_io.append(spark, _typed_df(spark), path, backend=delta_backend)
    actual = delta_io.read(spark, path, columns=["u64", "id"], predicate="id > 1", backend=delta_backend)
    expected = spark.createDataFrame(
        [(None, 2)], T.StructType([T.StructField("u64", T.DecimalType(20, 0)), T.StructField("id", T.IntegerType())])
    )
    assert_df_equality(actual, expected, ignore_row_order=True)
    with pytest.raises(DeltaIOError, match=r"missing columns \['nope'\]"):
        delta_io.read(spark, path, columns=["nope"], backend=delta_backend)


def test_empty_table_reads_with_its_schema(spark, delta_backend, tmp_path):
    path = str(tmp_path / "empty")
    assert not delta_io.table_exists(path, spark=spark, backend=delta_backend)
    assert delta_io.create_if_missing(path, TYPED, spark=spark, backend=delta_backend)
    assert not delta_io.create_if_missing(path, TYPED, spark=spark, backend=delta_backend)
    assert delta_io.table_exists(path, spark=spark, backend=delta_backend)
    actual = delta_io.read(spark, path, backend=delta_backend)
    assert_df_equality(actual, spark.createDataFrame([], TYPED), ignore_row_order=True)


def test_append_with_transaction_id_is_idempotent(spark, delta_backend, tmp_path):
    path = str(tmp_path / "bronze")
    df = _typed_df(spark).select("id")
    assert delta_io.last_txn_version(path, "loader", spark=spark, backend=delta_backend) is None
    assert delta_io.append(spark, df, path, txn_app_id="loader", txn_version=1, backend=delta_backend)
    assert not delta_io.append(spark, df, path, txn_app_id="loader", txn_version=1, backend=delta_backend)
    assert not delta_io.append(spark, df, path, txn_app_id="loader", txn_version=0, backend=delta_backend)
    assert delta_io.append(spark, df, path, txn_app_id="loader", txn_version=2, backend=delta_backend)
    assert delta_io.append(spark, df, path, txn_app_id="other", txn_version=1, backend=delta_backend)
    assert delta_io.read(spark, path, backend=delta_backend).count() == 6
    assert delta_io.last_txn_version(path, "loader", spark=spark, backend=delta_backend) == 2
    assert delta_io.last_txn_version(path, "other", spark=spark, backend=delta_backend) == 1
    assert delta_io.last_txn_version(path, "never", spark=spark, backend=delta_backend) is None


def test_spark_log_reader_agrees_with_delta_rs_on_txn_versions(spark, tmp_path):
    # The delta-spark backend reads txn versions from the log with plain Spark readers.
    # Also after a checkpoint, with the commit files it covers cleaned up.
    import deltalake

    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1,)], "id INT")
    for version in (3, 7):
        delta_io.append(spark, df, path, txn_app_id="loader", txn_version=version, backend="rs")
    assert delta_io._spark_log_txn_version(spark, path, "loader") == delta_io.last_txn_version(path, "loader", backend="rs") == 7
    assert delta_io._spark_log_txn_version(spark, path, "nobody") is None
    deltalake.DeltaTable(path).create_checkpoint()
    for commit in (tmp_path / "t" / "_delta_log").glob("*.json"):
        commit.unlink()
    assert delta_io._spark_log_txn_version(spark, path, "loader") == delta_io.last_txn_version(path, "loader", backend="rs") == 7


def test_append_guards(spark, tmp_path):
    df = spark.createDataFrame([(1,)], "id INT")
    with pytest.raises(ValueError, match="go together"):
        delta_io.append(spark, df, str(tmp_path / "t"), txn_app_id="x", backend="rs")
    with pytest.raises(ValueError, match="int >= 0"):
        delta_io.append(spark, df, str(tmp_path / "t"), txn_app_id="x", txn_version=-1, backend="rs")
    with pytest.raises(ValueError, match="cannot be None"):
        delta_io.append(spark, None, str(tmp_path / "t"), backend="rs")


def test_append_evolves_schema_older_rows_null(spark, delta_backend, tmp_path):
    path = str(tmp_path / "t")
    delta_io.append(spark, spark.createDataFrame([(1,)], "id INT"), path, backend=delta_backend)
    delta_io.append(spark, spark.createDataFrame([(2, "x")], "id INT, `new col` STRING"), path, backend=delta_backend)
    expected = spark.createDataFrame([(1, None), (2, "x")], "id INT, `new col` STRING")
    assert_df_equality(delta_io.read(spark, path, backend=delta_backend), expected, ignore_row_order=True)


def test_add_columns_is_idempotent_and_rejects_type_changes(spark, delta_backend, tmp_path):
    path = str(tmp_path / "t")
    delta_io.append(spark, spark.createDataFrame([(1,)], "id INT"), path, backend=delta_backend)
    new = [T.StructField("we`ird.name", T.TimestampNTZType()), T.StructField("ID", T.IntegerType())]
    assert delta_io.add_columns(path, new, spark=spark, backend=delta_backend) == ["we`ird.name"]
    assert delta_io.add_columns(path, new, spark=spark, backend=delta_backend) == []
    expected = spark.createDataFrame([(1, None)], T.StructType([T.StructField("id", T.IntegerType()), new[0]]))
    assert_equal_sorted_by(delta_io.read(spark, path, backend=delta_backend), expected, "id")
    with pytest.raises(DeltaIOError, match="id: table has int, asked bigint"):
        delta_io.add_columns(path, [T.StructField("id", T.LongType())], spark=spark, backend=delta_backend)


def test_overwrite_replaces_rows(spark, delta_backend, tmp_path):
    path = str(tmp_path / "t")
    delta_io.append(spark, spark.createDataFrame([(1,), (2,)], "id INT"), path, backend=delta_backend)
    delta_io.overwrite(spark, spark.createDataFrame([(3,)], "id INT"), path, backend=delta_backend)
    assert_df_equality(
        delta_io.read(spark, path, backend=delta_backend), spark.createDataFrame([(3,)], "id INT"), ignore_row_order=True
    )


def test_merge_with_hostile_column_names(spark, delta_backend, tmp_path):
    path = str(tmp_path / "t")
    schema = T.StructType([T.StructField(n, T.IntegerType()) for n in HOSTILE])
    key, value = HOSTILE[0], HOSTILE[1:]
    delta_io.append(spark, spark.createDataFrame([(1, 10, 10, 10, 10, 10), (2, 20, 20, 20, 20, 20)], schema), path, backend=delta_backend)
    source = spark.createDataFrame(
        [(1, 11, 11, 11, 11, 11), (2, 0, 0, 0, 0, 0), (3, 30, 30, 30, 30, 30)], schema
    )
    on = f"{qualified('t', key)} = {qualified('s', key)}"
    everything = {n: qualified("s", n) for n in HOSTILE}
    result = delta_io.merge(
        spark,
        path,
        source,
        on,
        [
            MergeClause("delete", f"{qualified('s', '😀')} = 0"),
            MergeClause("update", f"{qualified('s', 'we`ird')} > {qualified('t', 'we`ird')}", everything),
            MergeClause("insert", None, everything),
        ],
        backend=delta_backend,
        user_metadata=json.dumps({"k": "v"}),
    )
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 1)
    expected = spark.createDataFrame([(1, 11, 11, 11, 11, 11), (3, 30, 30, 30, 30, 30)], schema)
    assert_equal_sorted_by(delta_io.read(spark, path, backend=delta_backend), expected, key)
    newest = delta_io.history(path, spark=spark, backend=delta_backend, limit=1)[0]
    assert newest.operation == "MERGE" and json.loads(newest.user_metadata) == {"k": "v"}


def test_merge_records_transaction_id(spark, delta_backend, tmp_path):
    path = str(tmp_path / "t")
    delta_io.append(spark, spark.createDataFrame([(1,)], "id INT"), path, backend=delta_backend)
    delta_io.merge(
        spark, path, spark.createDataFrame([(2,)], "id INT"), "t.`id` = s.`id`",
        [MergeClause("insert", None, {"id": "s.`id`"})],
        backend=delta_backend, txn_app_id="silver", txn_version=5,
    )
    assert delta_io.last_txn_version(path, "silver", spark=spark, backend=delta_backend) == 5
    history = delta_io.history(path, spark=spark, backend=delta_backend)
    assert [c.version for c in history] == [1, 0]


def test_spark_commit_settings_are_set_for_one_command_then_restored(spark):
    # merge_spark passes txn ids and user metadata to delta-spark through session settings.
    spark.conf.set("spark.databricks.delta.commitInfo.userMetadata", "before")
    try:
        with delta_io._SparkCommitConf(
            spark,
            {"spark.databricks.delta.commitInfo.userMetadata": "during", "spark.databricks.delta.write.txnAppId": "app",
             "spark.databricks.delta.write.txnVersion": None},
        ):
            assert spark.conf.get("spark.databricks.delta.commitInfo.userMetadata") == "during"
            assert spark.conf.get("spark.databricks.delta.write.txnAppId") == "app"
        assert spark.conf.get("spark.databricks.delta.commitInfo.userMetadata") == "before"
        assert spark.conf.get("spark.databricks.delta.write.txnAppId", None) is None
    finally:
        spark.conf.unset("spark.databricks.delta.commitInfo.userMetadata")


def test_merge_clause_guards():
    with pytest.raises(ValueError, match="kind must be"):
        MergeClause("upsert")
    with pytest.raises(ValueError, match="needs assignments"):
        MergeClause("insert")
    with pytest.raises(ValueError, match="takes no assignments"):
        MergeClause("delete", None, {"a": "s.`a`"})


# ---------------------------------------------------------------------------------------------
# staged appends: tasks write Parquet files, the driver commits them (delta-rs)


def _stage_in_tasks(spark, path: str, rows: list, *, file_rows: int = 2, batch_rows: int = 1):
    """Stage ``rows`` from two Spark tasks, as bronze does; the StagedFiles they return."""
    arrow_schema = delta_io.prepare_staging(path, TYPED)

    def task(part):
        stager = delta_io.ParquetStager(path, arrow_schema, stats_columns=["id"], batch_rows=batch_rows,
                                        file_rows=file_rows)
        for row in part:
            stager.add(row)
        yield from stager.close()

    return spark.sparkContext.parallelize(rows, 2).mapPartitions(task).collect()


def test_staged_files_commit_once_with_exact_types_and_stats(spark, tmp_path):
    path = str(tmp_path / "staged")
    rows = TYPED_ROWS + [(i, i, i, None, None, None, None, None, None, None, []) for i in range(3, 8)]
    files = _stage_in_tasks(spark, path, rows)
    assert len(files) >= 4 and sum(f.rows for f in files) == len(rows)  # files rolled at 2 rows
    assert not delta_io.table_exists(path, backend="rs")  # nothing visible before the commit
    assert delta_io.commit_staged(path, files, TYPED, txn_app_id="bronze", txn_version=0) is True
    assert_equal_sorted_by(delta_io.read(spark, path, backend="rs"), spark.createDataFrame(rows, TYPED), "id")
    # a second commit of the same batch (a re-run after a crash) adds nothing
    again = _stage_in_tasks(spark, path, rows)
    assert delta_io.commit_staged(path, again, TYPED, txn_app_id="bronze", txn_version=0) is False
    assert delta_io.read(spark, path, backend="rs").count() == len(rows)
    import deltalake

    adds = pa.table(deltalake.DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    assert sum(a["num_records"] for a in adds) == len(rows)
    assert min(a["min.id"] for a in adds) == 1 and max(a["max.id"] for a in adds) == 7


def test_staged_drop_rows_rewrites_files_and_abort_deletes_them(tmp_path):
    path = str(tmp_path / "staged")
    schema = T.StructType([T.StructField("pos", T.LongType()), T.StructField("image", T.ArrayType(ELEMENT))])
    arrow_schema = delta_io.prepare_staging(path, schema)
    stager = delta_io.ParquetStager(path, arrow_schema, stats_columns=["pos"], batch_rows=3, file_rows=4)
    for pos in range(10):
        stager.add((pos, [(0, "a", bytes([pos]))]))
    assert stager.drop_rows("pos", [(2, 4), (8, 1 << 62)]) == 4  # 2, 3, 8, 9
    kept = sorted(v for f in stager.files for v in stager.read(f, ["pos"]).column("pos").to_pylist())
    assert kept == [0, 1, 4, 5, 6, 7]
    assert delta_io.commit_staged(path, stager.files, schema) is True
    import deltalake

    table = deltalake.DeltaTable(path).to_pyarrow_table()
    assert sorted(table.column("pos").to_pylist()) == kept
    assert {r["pos"]: r["image"][0]["bin"] for r in table.to_pylist()}[7] == b"\x07"
    on_disk = {n for n in os.listdir(path) if n.endswith(".parquet")}
    assert on_disk == {f.path for f in stager.files}  # the rewritten originals are gone
    other = delta_io.ParquetStager(path, arrow_schema)
    other.add((1, None))
    other.close()
    other.abort()
    assert {n for n in os.listdir(path) if n.endswith(".parquet")} == on_disk
