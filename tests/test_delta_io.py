"""delta_io: one interface, two backends; exact types across the Arrow hop; idempotent appends."""
from __future__ import annotations

import datetime as dt
import json
import os
import time
from decimal import Decimal
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T
from spark_fixtures import delta_backend, require_delta_spark, spark  # noqa: F401

from pipelines import delta_io
from pipelines.delta_io import spark_commits as delta_commits
from pipelines.delta_io import DeltaIOError, MergeClause, qualified, quote_ident
from pipelines.spark_settings import DELTA_CATALOG, DELTA_EXTENSION, session_conf

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
    # the suite's session is local: auto keeps delta-rs, the faster backend on one machine,
    # even though delta-spark is on its classpath; "spark" must be asked for
    assert delta_io.resolve_backend(spark, "auto") == "rs"
    require_delta_spark(spark)
    assert delta_io.resolve_backend(spark, "spark") == "spark"
    with pytest.raises(DeltaIOError, match="make setup"):
        delta_io.resolve_backend(None, "spark")


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


def test_session_conf_keeps_generated_classes_locally_and_on_clusters():
    # A silver run compiles ~120 classes: Spark's default cache of 100 made every run compile all again.
    for local in (True, False):
        conf = session_conf(env={}, local=local)
        assert int(conf["spark.sql.codegen.cache.maxEntries"]) >= 500
        assert conf["spark.sql.session.timeZone"] == "UTC"
    assert "spark.ui.enabled" not in session_conf(env={}, local=False)


def test_delta_spark_available_is_asked_once_per_context(spark):
    from pipelines import spark_session

    first = spark_session.delta_spark_available(spark)
    assert spark_session._DELTA_ON_JVM[spark.sparkContext] is first
    assert spark_session.delta_spark_available(spark) is first
    require_delta_spark(spark)  # the suite's session asks for delta-spark: it must have it
    assert first is True


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
    t = delta_io.open_table(str(tmp_path / "typed"), delta_backend, spark)
    assert t.append(_typed_df(spark))
    actual = t.read_df()
    assert_df_equality(actual, _typed_df(spark), ignore_row_order=True)


def test_read_columns_and_predicate(spark, delta_backend, tmp_path):
    t = delta_io.open_table(str(tmp_path / "typed"), delta_backend, spark)
    t.append(_typed_df(spark))
    actual = t.read_df(columns=["u64", "id"], predicate="id > 1")
    expected = spark.createDataFrame(
        [(None, 2)], T.StructType([T.StructField("u64", T.DecimalType(20, 0)), T.StructField("id", T.IntegerType())])
    )
    assert_df_equality(actual, expected, ignore_row_order=True)
    with pytest.raises(DeltaIOError, match=r"missing columns \['nope'\]"):
        t.read_df(columns=["nope"])


def test_read_above_a_mark_never_opens_the_files_below_it(spark, delta_backend, tmp_path):
    # an append-only table read above a high mark: the older files are not read at all (here
    # they are deleted from disk, so opening one would fail), on both backends, also under a
    # folder name that delta-rs escapes in its URIs
    path = str(tmp_path / "db`x ☕" / "t 日本")
    t = delta_io.open_table(path, delta_backend, spark)
    for batch in ((1, "a"), (2, "b")), ((3, "c"),), ((4, "d"), (5, None)):
        t.append(spark.createDataFrame(list(batch), "id INT, v STRING"))
    old = {p.name for p in Path(path).glob("*.parquet")}
    t.append(spark.createDataFrame([(6, "e")], "id INT, v STRING"))
    for name in old:
        os.remove(Path(path) / name)
    got = t.read_df(above=("id", 5))
    assert [tuple(r) for r in got.collect()] == [(6, "e")]
    # rows at or below the mark are filtered out of a file that is read
    t.append(spark.createDataFrame([(2, "x"), (7, "y")], "id INT, v STRING"))
    got = t.read_df(columns=["v", "id"], above=("id", 5))
    assert sorted(tuple(r) for r in got.collect()) == [("e", 6), ("y", 7)]


def test_nothing_above_a_mark_counts_the_millisecond_a_statistic_may_have_lost(spark, delta_backend, tmp_path):
    # delta-spark writes a timestamp's max statistic cut to the millisecond: a row 50 us above a
    # mark in that millisecond must still be found (silver would otherwise skip bronze's new rows)
    t = delta_io.open_table(str(tmp_path / "t"), delta_backend, spark)
    at = dt.datetime(2026, 11, 28, 3, 0, 0, 123456, tzinfo=UTC)
    t.append(spark.createDataFrame([(1, at)], "id INT, ts TIMESTAMP"))
    assert not t.nothing_above("ts", at - dt.timedelta(microseconds=50))
    assert t.nothing_above("ts", at + dt.timedelta(milliseconds=2))  # (its statistics prove it, on both backends)


def test_read_rows_gives_rows_on_the_driver_above_a_mark(spark, delta_backend, tmp_path):
    t = delta_io.open_table(str(tmp_path / "small"), delta_backend, spark)
    assert t.read_rows() == []  # no table: no rows
    t.append(spark.createDataFrame([("a", 1), ("b", 2), ("c", 3)], "k STRING, n INT"))
    rows = t.read_rows(["n"], above=("k", "a"))
    assert sorted(r.n for r in rows) == [2, 3] and all(list(r.asDict()) == ["n"] for r in rows)
    assert sorted((r["k"], r.n) for r in t.read_rows()) == [
        ("a", 1), ("b", 2), ("c", 3)]


def test_empty_table_reads_with_its_schema(spark, delta_backend, tmp_path):
    t = delta_io.open_table(str(tmp_path / "empty"), delta_backend, spark)
    assert not t.exists()
    assert t.create(TYPED)
    assert not t.create(TYPED)
    assert t.exists()
    actual = t.read_df()
    assert_df_equality(actual, spark.createDataFrame([], TYPED), ignore_row_order=True)


def test_append_with_transaction_id_is_idempotent(spark, delta_backend, tmp_path):
    t = delta_io.open_table(str(tmp_path / "bronze"), delta_backend, spark)
    df = _typed_df(spark).select("id")
    assert t.last_txn("loader") is None
    assert t.append(df, delta_io.CommitInfo(txn=("loader", 1)))
    assert not t.append(df, delta_io.CommitInfo(txn=("loader", 1)))
    assert not t.append(df, delta_io.CommitInfo(txn=("loader", 0)))
    assert t.append(df, delta_io.CommitInfo(txn=("loader", 2)))
    assert t.append(df, delta_io.CommitInfo(txn=("other", 1)))
    assert t.read_df().count() == 6
    assert t.last_txn("loader") == 2
    assert t.last_txn("other") == 1
    assert t.last_txn("never") is None


def _pipeline_table_rows():
    """(layout, rows) of every small table the jobs append from the driver, with real values."""
    from pipelines.schema import SchemaHistory, versions_to_rows
    from pipelines.state import (DDL_TABLE_LAYOUT, MANIFEST_LAYOUT, QUARANTINE_LAYOUT, RUNS_LAYOUT,
                                 SCHEMA_HISTORY_LAYOUT, WATERMARKS_LAYOUT, XA_LAYOUT)

    now = dt.datetime(2026, 11, 24, 6, 30, 1, 250000, tzinfo=UTC)
    history = SchemaHistory()
    for seq, sql in [("a1", "CREATE TABLE `we``ird`.t (id INT PRIMARY KEY, s ENUM('x','y') DEFAULT 'x', UNIQUE KEY u (s))"),
                     ("a2", "ALTER TABLE `we``ird`.t RENAME COLUMN s TO `😀`"),
                     ("a3", "DROP TABLE `we``ird`.t")]:
        history.apply_statement(sql, "we`ird", seq, source_file="bin.000001", pos=4)
    versions = history.all_versions()
    assert any(v.renamed for v in versions) and any(v.schema is None for v in versions)
    return [
        (MANIFEST_LAYOUT, [("bin.000001", 1, "/in/bin.000001", 4096, 1700000000, 4, 4096, "ab" * 32, "done", "committed",
                         3, 10, 20, None, None, None, "r1", now, "mariadb", "0-1-1", "0-1-9", None, 0, now,
                         "10.11.19-MariaDB-log", 1),
                        ("bin.000002", 2, "/in/bin.000002", 10, 1, 4, None, None, "quarantined", "pending",
                         3, 0, 0, "bad magic", "NotABinlog", 0, "r1", now, None, None, None, None, 2, None,
                         None, None)]),
        (QUARANTINE_LAYOUT, [("bin.000002", 2, 0, "bad magic", "NotABinlog", "1.0", b"\xfe\x00", 3, "r1", now)]),
        (DDL_TABLE_LAYOUT, [("bin.000001", 1, 120, "0000000001-0000000120-000000", "d", "CREATE TABLE t (a INT)",
                          now, False, "0-1-5", 1, "r1", None),
                         ("bin.000001", 1, 160, "0000000001-0000000160-000000", "d", "INSERT INTO t VALUES ('\ufffd')",
                          now, True, "0-1-6", 1, "r1", b"INSERT INTO t VALUES ('\xff')")]),
        (XA_LAYOUT, [("bin.000001", 1, 300, "0000000001-0000000300-000000", "prepare", "X'6162',X'',1", None, None, "r1")]),
        (RUNS_LAYOUT, [("r1", "bronze", now, now, 2, 0, 1, 121, 6250, 2000, 1000, 3, 1, 700000, 1.5, 0.47, 0, "ok", None, 2)]),
        (WATERMARKS_LAYOUT, [("we`ird", "😀", "0000000001-0000000300-000000", 12, "r1", now)]),
        (SCHEMA_HISTORY_LAYOUT, versions_to_rows(versions, {}, "r1", now)),
    ]


def test_our_tables_layouts_are_the_tables_they_always_were():
    """The Arrow layouts of our tables, as Spark schemas, are what their first DDL declared: an
    existing warehouse's tables take the rows of this version without a schema change."""
    from pipelines import state
    from pipelines.bronze.schema import BRONZE_LAYOUT

    declared = {
        "ddl": ("struct<file:string,file_seq:bigint,pos:bigint,_seq:string,db:string,query:string,"
               "commit_ts:timestamp,in_group:boolean,gtid:string,server_id:bigint,_run_id:string,"
               "query_raw:binary>"),
        "manifest": ("struct<name:string,file_seq:bigint,path:string,size:bigint,mtime:bigint,start_pos:bigint,"
               "complete_until:bigint,sha256:string,status:string,phase:string,batch:bigint,events:bigint,"
               "rows:bigint,error:string,error_class:string,error_offset:bigint,run_id:string,"
               "processed_at:timestamp,flavor:string,gtid_start:string,gtid_end:string,rotate_to:string,"
               "ignorable_skipped:bigint,committed_at:timestamp,server_version:string,server_id:bigint>"),
        "quarantine": ("struct<file:string,file_seq:bigint,offset:bigint,reason:string,error_class:string,"
               "decoder_version:string,raw:binary,batch:bigint,run_id:string,ts:timestamp>"),
        "runs": ("struct<run_id:string,step:string,started_at:timestamp,ended_at:timestamp,files:bigint,"
               "files_skipped:bigint,files_ignored:bigint,events:bigint,rows_c:bigint,rows_u:bigint,"
               "rows_d:bigint,statements:bigint,quarantined:bigint,bytes:bigint,seconds:double,"
               "mb_per_s:double,zero_dates:bigint,status:string,error:string,warnings:bigint>"),
        "schema_history": ("struct<db:string,table:string,valid_from:string,version:int,kind:string,"
               "columns:array<struct<name:string,type:string,length:int,decimals:int,unsigned:boolean,"
               "nullable:boolean,charset:string,values:array<string>,generated:string,invisible:boolean,"
               "default:string>>,primary_key:array<string>,unique_keys:array<struct<name:string,"
               "columns:array<string>>>,table_charset:string,peer_db:string,peer_table:string,"
               "renamed_columns:array<struct<old:string,new:string>>,statement:string,reason:string,"
               "source_file:string,pos:bigint,_run_id:string,recorded_at:timestamp>"),
        "silver_watermarks": "struct<db:string,table:string,max_seq:string,rows:bigint,run_id:string,updated_at:timestamp>",
        "snapshots": ("struct<dump_id:string,dump:string,phase:string,db:string,table:string,_seq:string,"
               "position:string,rows:bigint,run_id:string,loaded_at:timestamp>"),
        "xa": ("struct<file:string,file_seq:bigint,pos:bigint,_seq:string,kind:string,xa_xid:string,"
               "gtid:string,commit_ts:timestamp,_run_id:string>"),
        "bronze": ("struct<source_file:string,file_seq:bigint,event_pos:bigint,row_idx:int,_seq:string,"
               "server_id:bigint,gtid:string,xid:decimal(20,0),commit_ts:timestamp,event_ts:timestamp,"
               "db:string,table:string,op:string,before:array<struct<idx:int,name:string,type:string,"
               "text:string,bin:binary>>,after:array<struct<idx:int,name:string,type:string,text:string,"
               "bin:binary>>,pk:array<struct<idx:int,name:string,type:string,text:string,bin:binary>>,"
               "decoder_version:string,_run_id:string,_ingested_at:timestamp,_shape:string,_zero_dates:int>"),
    }
    layouts = {**state.LAYOUTS, "bronze": BRONZE_LAYOUT}
    assert sorted(layouts) == sorted(declared)
    for name, layout in layouts.items():
        assert delta_io.struct_of(layout).simpleString() == declared[name], name
    spark_schema = delta_io.struct_of(BRONZE_LAYOUT)
    assert delta_io.struct_of(spark_schema) is spark_schema
    with pytest.raises(DeltaIOError, match="a table layout is an Arrow or a Spark schema"):
        delta_io.struct_of("a STRING")


def test_rows_to_arrow_gives_what_spark_gives(spark):
    # The driver's small tables skip Spark with delta-rs: their Arrow must be the Spark path's.
    for layout, rows in _pipeline_table_rows():
        schema = delta_io.struct_of(layout)
        expected = delta_io.spark_to_arrow(spark.createDataFrame(rows, schema))
        actual = delta_io.rows_to_arrow(rows, schema)
        assert actual.schema == expected.schema, layout
        assert actual.to_pylist() == expected.to_pylist(), layout


def test_append_rows_lands_the_rows_of_each_pipeline_table(spark, delta_backend, tmp_path):
    for i, (layout, rows) in enumerate(_pipeline_table_rows()):
        t = delta_io.open_table(str(tmp_path / f"t{i}"), delta_backend, spark)
        assert t.append_rows(rows, layout, delta_io.CommitInfo(txn=("job", 1)))
        assert not t.append_rows(rows, layout, delta_io.CommitInfo(txn=("job", 1)))
        expected = spark.createDataFrame(rows, delta_io.struct_of(layout))
        actual = t.read_df()
        assert actual.count() == len(rows)
        assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_rows_to_arrow_rejects_what_spark_rejects():
    schema = delta_io.struct_of(pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")),
                                           ("pair", pa.struct([("a", pa.string()), ("b", pa.string())]))]))
    with pytest.raises(DeltaIOError, match="row 0 has 2 value"):
        delta_io.rows_to_arrow([(1, None)], schema)
    with pytest.raises(DeltaIOError, match="'ts': timestamp 2026-01-01 00:00:00 has no time zone"):
        delta_io.rows_to_arrow([(1, dt.datetime(2026, 1, 1), None)], schema)
    with pytest.raises(DeltaIOError, match=r"column 'id' \(bigint\)"):
        delta_io.rows_to_arrow([("one", None, None)], schema)
    with pytest.raises(DeltaIOError, match="has 3 field"):
        delta_io.rows_to_arrow([(1, None, ("a", "b", "c"))], schema)
    assert delta_io.rows_to_arrow([(1, None, ["a", "b"])], schema).to_pylist() == [
        {"id": 1, "ts": None, "pair": {"a": "a", "b": "b"}}]


def test_spark_snapshot_agrees_with_delta_rs_on_txn_versions(spark, tmp_path):
    # The delta-spark backend takes txn versions from Delta's snapshot (checkpoint + newer
    # commits): also after a checkpoint, with the commit files before it cleaned up.
    import deltalake

    require_delta_spark(spark)
    path = str(tmp_path / "t")
    df = spark.createDataFrame([(1,)], "id INT")
    t = delta_io.open_table(path, "rs", spark)
    for version in (3, 7):
        t.append(df, delta_io.CommitInfo(txn=("loader", version)))
    assert delta_commits.spark_log_txn_version(spark, path, "loader") == \
        delta_io.open_table(path, "rs").last_txn("loader") == 7
    assert delta_commits.spark_log_txn_version(spark, path, "nobody") is None
    deltalake.DeltaTable(path).create_checkpoint()  # at version 1
    t.append(df, delta_io.CommitInfo(txn=("other", 1)))
    (tmp_path / "t" / "_delta_log" / f"{0:020d}.json").unlink()  # what log cleanup removes
    for backend in ("spark", "rs"):
        assert delta_io.open_table(path, backend, spark).last_txn("loader") == 7
        assert delta_io.open_table(path, backend, spark).last_txn("other") == 1


def test_append_guards(spark, tmp_path):
    df = spark.createDataFrame([(1,)], "id INT")
    t = delta_io.open_table(str(tmp_path / "t"), "rs", spark)
    with pytest.raises(ValueError, match="go together"):
        t.append(df, delta_io.CommitInfo(txn=("x", None)))
    with pytest.raises(ValueError, match="int >= 0"):
        t.append(df, delta_io.CommitInfo(txn=("x", -1)))
    with pytest.raises(ValueError, match="cannot be None"):
        t.append(None)


def test_append_evolves_schema_older_rows_null(spark, delta_backend, tmp_path):
    t = delta_io.open_table(str(tmp_path / "t"), delta_backend, spark)
    t.append(spark.createDataFrame([(1,)], "id INT"))
    t.append(spark.createDataFrame([(2, "x")], "id INT, `new col` STRING"))
    expected = spark.createDataFrame([(1, None), (2, "x")], "id INT, `new col` STRING")
    assert_df_equality(t.read_df(), expected, ignore_row_order=True)


def test_add_columns_is_idempotent_and_rejects_type_changes(spark, delta_backend, tmp_path):
    t = delta_io.open_table(str(tmp_path / "t"), delta_backend, spark)
    t.append(spark.createDataFrame([(1,)], "id INT"))
    new = [T.StructField("we`ird.name", T.TimestampNTZType()), T.StructField("ID", T.IntegerType())]
    assert t.add_columns(new) == ["we`ird.name"]
    assert t.add_columns(new) == []
    expected = spark.createDataFrame([(1, None)], T.StructType([T.StructField("id", T.IntegerType()), new[0]]))
    assert_equal_sorted_by(t.read_df(), expected, "id")
    with pytest.raises(DeltaIOError, match="id: table has int, asked bigint"):
        t.add_columns([T.StructField("id", T.LongType())])


def test_overwrite_replaces_rows(spark, delta_backend, tmp_path):
    t = delta_io.open_table(str(tmp_path / "t"), delta_backend, spark)
    t.append(spark.createDataFrame([(1,), (2,)], "id INT"))
    t.overwrite(spark.createDataFrame([(3,)], "id INT"))
    assert_df_equality(t.read_df(), spark.createDataFrame([(3,)], "id INT"), ignore_row_order=True)


def test_merge_with_hostile_column_names(spark, delta_backend, tmp_path):
    t = delta_io.open_table(str(tmp_path / "t"), delta_backend, spark)
    schema = T.StructType([T.StructField(n, T.IntegerType()) for n in HOSTILE])
    key, value = HOSTILE[0], HOSTILE[1:]
    t.append(spark.createDataFrame([(1, 10, 10, 10, 10, 10), (2, 20, 20, 20, 20, 20)], schema))
    source = spark.createDataFrame(
        [(1, 11, 11, 11, 11, 11), (2, 0, 0, 0, 0, 0), (3, 30, 30, 30, 30, 30)], schema
    )
    on = f"{qualified('t', key)} = {qualified('s', key)}"
    everything = {n: qualified("s", n) for n in HOSTILE}
    result = t.merge(
        source,
        on,
        [
            MergeClause("delete", f"{qualified('s', '😀')} = 0"),
            MergeClause("update", f"{qualified('s', 'we`ird')} > {qualified('t', 'we`ird')}", everything),
            MergeClause("insert", None, everything),
        ],
        delta_io.CommitInfo(metadata=json.dumps({"k": "v"})),
    )
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 1)
    expected = spark.createDataFrame([(1, 11, 11, 11, 11, 11), (3, 30, 30, 30, 30, 30)], schema)
    assert_equal_sorted_by(t.read_df(), expected, key)
    newest = t.history(limit=1)[0]
    assert newest.operation == "MERGE" and json.loads(newest.user_metadata) == {"k": "v"}


def test_merge_records_transaction_id(spark, delta_backend, tmp_path):
    t = delta_io.open_table(str(tmp_path / "t"), delta_backend, spark)
    t.append(spark.createDataFrame([(1,)], "id INT"))
    t.merge(
        spark.createDataFrame([(2,)], "id INT"), "t.`id` = s.`id`",
        [MergeClause("insert", None, {"id": "s.`id`"})],
        delta_io.CommitInfo(txn=("silver", 5)),
    )
    assert t.last_txn("silver") == 5
    history = t.history()
    assert [c.version for c in history] == [1, 0]


def test_commit_session_keeps_a_commits_identity_to_itself(spark):
    # delta-spark reads txn ids and user metadata from SQL session settings: they go on a session
    # of the command's own, never on the shared one (where another thread's commit would take them)
    meta, app = "spark.databricks.delta.commitInfo.userMetadata", "spark.databricks.delta.write.txnAppId"
    spark.conf.set("spark.sql.shuffle.partitions", "3")
    spark.conf.set(meta, "the caller's own")
    try:
        own = delta_commits.commit_session(
            spark, {meta: "during", app: "app", "spark.databricks.delta.write.txnVersion": None})
        assert own is not spark and own.sparkContext is spark.sparkContext
        assert (own.conf.get(meta), own.conf.get(app)) == ("during", "app")
        assert own.conf.get("spark.sql.shuffle.partitions") == "3"  # the caller's runtime settings
        assert spark.conf.get(meta) == "the caller's own" and spark.conf.get(app, None) is None
        # no identity is copied from the caller: a plain commit session carries none
        plain = delta_commits.commit_session(spark)
        assert plain.conf.get(meta, None) is None and plain.conf.get(app, None) is None
    finally:
        spark.conf.unset(meta)
        spark.conf.set("spark.sql.shuffle.partitions", "1")


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
    assert not delta_io.open_table(path, "rs").exists()  # nothing visible before the commit
    assert delta_io.commit_staged(path, files, TYPED, txn_app_id="bronze", txn_version=0) is True
    assert_equal_sorted_by(delta_io.open_table(path, "rs", spark).read_df(), spark.createDataFrame(rows, TYPED),
                           "id")
    # a second commit of the same batch (a re-run after a crash) adds nothing
    again = _stage_in_tasks(spark, path, rows)
    assert delta_io.commit_staged(path, again, TYPED, txn_app_id="bronze", txn_version=0) is False
    assert delta_io.open_table(path, "rs", spark).read_df().count() == len(rows)
    import deltalake

    adds = pa.table(deltalake.DeltaTable(path).get_add_actions(flatten=True)).to_pylist()
    assert sum(a["num_records"] for a in adds) == len(rows)
    assert min(a["min.id"] for a in adds) == 1 and max(a["max.id"] for a in adds) == 7


def test_staged_timestamp_statistics_are_milliseconds_that_never_skip_a_match(spark, delta_backend, tmp_path):
    # Delta keeps timestamp min/max in milliseconds: the minimum rounds down, the maximum up, so
    # a read above a time inside the last millisecond still finds the row (both backends)
    path = str(tmp_path / "ts")
    os.makedirs(path)
    schema = pa.schema([("id", pa.int32()), ("at", pa.timestamp("us", tz="UTC"))])
    at = dt.datetime(2026, 11, 25, 10, 58, 5, 123456, tzinfo=dt.timezone.utc)
    stager = delta_io.ParquetStager(path, schema, stats_columns=["at"])
    stager.add_batch(pa.record_batch([pa.array([1, 2], pa.int32()), pa.array([at, at], schema.field("at").type)],
                                     schema=schema))
    files = stager.close()
    assert json.loads(files[0].stats)["minValues"] == {"at": "2026-11-25T10:58:05.123Z"}
    assert json.loads(files[0].stats)["maxValues"] == {"at": "2026-11-25T10:58:05.124Z"}
    assert delta_io.commit_staged(path, files, T.StructType([T.StructField("id", T.IntegerType()),
                                                             T.StructField("at", T.TimestampType())]))
    just_before = at - dt.timedelta(microseconds=1)
    assert delta_io.open_table(path, delta_backend, spark).read_df(above=("at", just_before)).count() == 2
    assert delta_io.open_table(path, delta_backend, spark).read_df(above=("at", at)).count() == 0


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


# ---------------------------------------------------------------------------------------------
# one table, both backends: column mapping and timestampNtz, whichever backend made the table

OTHER = {"rs": "spark", "spark": "rs"}


def test_a_table_of_one_backend_is_read_and_written_by_the_other(spark, delta_backend, tmp_path):
    require_delta_spark(spark)
    path, other = str(tmp_path / "t"), OTHER[delta_backend]
    names = ["id", "new col", "a=b", "x;y", "(p)"]
    schema = T.StructType([T.StructField(n, T.IntegerType()) for n in names])
    mine, others = delta_io.open_table(path, delta_backend, spark), delta_io.open_table(path, other, spark)
    mine.append(spark.createDataFrame([(1, 1, 1, 1, 1), (2, 2, 2, 2, 2)], schema))
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]
    assert detail["properties"]["delta.columnMapping.mode"] == "name"
    # the other backend merges, adds a DATETIME and a hostile column, and appends
    on = f"{qualified('t', 'id')} = {qualified('s', 'id')}"
    everything = {n: qualified("s", n) for n in names}
    others.merge(spark.createDataFrame([(2, 20, 20, 20, 20), (3, 3, 3, 3, 3)], schema), on,
                 [MergeClause("update", None, everything), MergeClause("insert", None, everything)],
                 delta_io.CommitInfo(txn=("silver", 1)))
    added = [T.StructField("at", T.TimestampNTZType()), T.StructField("{c}", T.StringType())]
    assert others.add_columns(added) == ["at", "{c}"]
    wide = T.StructType(schema.fields + added)
    at = dt.datetime(2024, 2, 29, 23, 59, 59, 999999)
    others.append(spark.createDataFrame([(4, 4, 4, 4, 4, at, "}{")], wide))
    # and the first backend reads it all, then writes on
    mine.append(spark.createDataFrame([(5, 5, 5, 5, 5, None, "five")], wide))
    expected = spark.createDataFrame(
        [(1, 1, 1, 1, 1, None, None), (2, 20, 20, 20, 20, None, None), (3, 3, 3, 3, 3, None, None),
         (4, 4, 4, 4, 4, at, "}{"), (5, 5, 5, 5, 5, None, "five")], wide)
    for backend in ("rs", "spark"):
        t = delta_io.open_table(path, backend, spark)
        assert_equal_sorted_by(t.read_df(), expected, "id")
        assert t.schema() == wide
        assert t.last_txn("silver") == 1


def test_a_plain_table_gains_column_mapping_when_a_name_needs_it(spark, delta_backend, tmp_path):
    require_delta_spark(spark)  # delta-rs hands this to delta-spark (it cannot turn mapping on)
    path = str(tmp_path / "t")
    t = delta_io.open_table(path, delta_backend, spark)
    t.append(spark.createDataFrame([(1,)], "id INT"))
    plain = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["properties"]
    assert "delta.columnMapping.mode" not in plain  # its Parquet files stay plain until needed
    wide = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("new col", T.StringType())])
    t.append(spark.createDataFrame([(2, "x")], wide))
    for backend in ("rs", "spark"):
        assert_equal_sorted_by(delta_io.open_table(path, backend, spark).read_df(),
                               spark.createDataFrame([(1, None), (2, "x")], wide), "id")


def test_delta_rs_alone_adds_columns_to_a_mapped_table(spark, tmp_path):
    """deltalake 1.6 cannot change a column-mapped table's schema; with no delta-spark to do it,
    the rows are written again with the new columns empty, in one commit, and both backends read
    the table (delta-spark then adds a column of its own: the column ids stay distinct)."""
    path = str(tmp_path / "t")
    t, alone = delta_io.open_table(path, "rs", spark), delta_io.open_table(path, "rs")  # (alone: no Spark session)
    t.append(spark.createDataFrame([(1, 1), (2, None)], "id INT, `a b` INT"))
    added = [T.StructField("c d", T.StringType()), T.StructField("at", T.TimestampNTZType())]
    assert alone.add_columns(added) == ["c d", "at"]
    assert alone.add_columns(added) == []
    wide = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("a b", T.IntegerType())] + added)
    at = dt.datetime(2024, 2, 29, 23, 59, 59, 999999)
    t.append(spark.createDataFrame([(3, 3, "x", at)], wide))
    expected = spark.createDataFrame([(1, 1, None, None), (2, None, None, None), (3, 3, "x", at)], wide)
    assert_equal_sorted_by(t.read_df(), expected, "id")
    assert max(t.read_arrow().to_pylist(), key=lambda r: r["id"]) == {"id": 3, "a b": 3, "c d": "x", "at": at}
    require_delta_spark(spark)
    on_spark = delta_io.open_table(path, "spark", spark)
    assert_equal_sorted_by(on_spark.read_df(), expected, "id")
    assert on_spark.add_columns([T.StructField("e;f", T.LongType())]) == ["e;f"]
    assert t.read_df().where("id = 3").select("`c d`", "`e;f`").collect() == [("x", None)]


def test_delta_rs_alone_says_why_it_cannot_turn_column_mapping_on(spark, tmp_path):
    path = str(tmp_path / "t")
    delta_io.open_table(path, "rs", spark).append(spark.createDataFrame([(1, 1)], "id INT, ab INT"))
    with pytest.raises(DeltaIOError, match=r"cannot add \['c d'\] with delta-rs.*column mapping.*delta-spark"):
        delta_io.open_table(path, "rs").add_columns([T.StructField("c d", T.StringType())])


def test_concurrent_commits_never_carry_another_tables_identity(spark, tmp_path):
    # Several threads at once, as silver's lanes run: MERGEs with a transaction id and watermark
    # on some tables while others are created, evolved and appended to. With the ids on the shared
    # session, a CREATE once took another table's MERGE id and the MERGE was skipped as done.
    require_delta_spark(spark)
    from concurrent.futures import ThreadPoolExecutor

    def lane(i: int) -> None:
        path = str(tmp_path / f"t{i}")
        for v in range(1, 4):
            t = delta_io.open_table(path, "spark", spark)
            if v == 1:
                t.create(T.StructType([T.StructField("id", T.IntegerType())]))
            if v == 2:
                t.add_columns([T.StructField("v", T.IntegerType())])
            source = spark.createDataFrame([(i * 10 + v, v)], "id INT, v INT")
            cols = ["id"] + (["v"] if v >= 2 else [])
            t.merge(source.select(*cols), "t.`id` = s.`id`",
                    [MergeClause("insert", None, {c: qualified("s", c) for c in cols})],
                    delta_io.CommitInfo(txn=(f"silver-{i}", v), metadata=json.dumps({"table": i, "v": v})))
            t.append(spark.createDataFrame([(-v, None)], "id INT, v INT").select(*cols))

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lane, range(8)))
    for i in range(8):
        t = delta_io.open_table(str(tmp_path / f"t{i}"), "spark", spark)
        assert sorted(r["id"] for r in t.read_df().collect()) == [
            -3, -2, -1, i * 10 + 1, i * 10 + 2, i * 10 + 3]
        for c in t.history():
            if c.operation == "MERGE":
                assert json.loads(c.user_metadata)["table"] == i, c
            else:
                assert c.user_metadata is None, c
        txns = {}
        for line in (tmp_path / f"t{i}" / "_delta_log").glob("*.json"):
            for action in map(json.loads, line.read_text().splitlines()):
                if "txn" in action:
                    txns.setdefault(action["txn"]["appId"], []).append(action["txn"]["version"])
        assert {k: sorted(v) for k, v in txns.items()} == {f"silver-{i}": [1, 2, 3]}


def test_delta_rs_files_under_names_that_need_escapes_are_read(spark, tmp_path):
    # delta-rs lists files as percent-escaped URIs: a folder named after a database with a
    # backtick, a space or a non-ASCII letter must still be found by Spark's Parquet reader
    for name, columns in (("plain", "id INT, v STRING"), ("mapped", "id INT, `a b` STRING")):
        t = delta_io.open_table(str(tmp_path / "silver" / "db`x ☕" / f"{name} 日本"), "rs", spark)
        t.append(spark.createDataFrame([(1, "a")], columns))
        t.append(spark.createDataFrame([(2, "b")], columns))
        got = t.read_df()
        assert sorted(tuple(r) for r in got.collect()) == [(1, "a"), (2, "b")]


def test_delta_rs_makes_a_mapped_table_with_a_datetime_that_delta_spark_reads(spark, tmp_path):
    # deltalake 1.6 alone gives such a table a protocol without columnMapping, then writes the
    # logical names into Parquet: delta-spark read every value as NULL (found by the soak)
    require_delta_spark(spark)
    path = str(tmp_path / "t")
    schema = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("a b", T.StringType()),
                           T.StructField("at", T.TimestampNTZType())])
    at = dt.datetime(2020, 1, 2, 3, 4, 5)
    assert delta_io.open_table(path, "rs").create(schema)
    t = delta_io.open_table(path, "rs", spark)
    t.append(spark.createDataFrame([(1, "x", at)], schema))
    t.merge(spark.createDataFrame([(1, "y", at), (2, "z", None)], schema), "t.`id` = s.`id`",
            [MergeClause("update", None, {n: qualified("s", n) for n in schema.fieldNames()}),
             MergeClause("insert", None, {n: qualified("s", n) for n in schema.fieldNames()})])
    features = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]["tableFeatures"]
    assert {"columnMapping", "timestampNtz"} <= set(features)
    expected = spark.createDataFrame([(1, "y", at), (2, "z", None)], schema)
    for backend in ("spark", "rs"):
        assert_equal_sorted_by(delta_io.open_table(path, backend, spark).read_df(), expected, "id")


def test_delta_rs_gives_a_column_mapped_table_a_new_schema_in_one_commit(spark, tmp_path):
    """delta-rs changes a column-mapped table's schema (types, columns) by one overwrite commit of
    rows staged as a table of their own; the table's protocol keeps what it had (here the
    table-features protocol its DATETIME column gave it) and gains what the new schema needs."""
    path = str(tmp_path / "t")
    old = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("a b", T.TimestampNTZType())])
    at = dt.datetime(2024, 2, 29, 23, 59, 59)
    t = delta_io.open_table(path, "rs", spark)
    t.append(spark.createDataFrame([(1, at), (2, None)], old))
    before = deltalake.DeltaTable(path).version()
    new = T.StructType([T.StructField("id", T.LongType()), T.StructField("a b", T.StringType()),
                        T.StructField("c", T.DecimalType(5, 1))])
    rows = spark.createDataFrame([(1, "x", Decimal("1.5")), (3, None, None)], new)
    t.overwrite(rows, overwrite_schema=True)
    # every version in between has the old schema and rows, and the last one the new: one commit
    seen = []
    for v in range(before, deltalake.DeltaTable(path).version() + 1):
        snap = deltalake.DeltaTable(path, version=v)
        fields = [f.name for f in delta_io.delta_schema_to_spark(snap.schema().to_json()).fields]
        seen.append((fields, sum(pa.table(snap.get_add_actions(flatten=True)).column("num_records").to_pylist())))
    assert seen[0] == (["id", "a b"], 2) and seen[-1] == (["id", "a b", "c"], 2), seen
    assert all(s in (seen[0], seen[-1]) for s in seen) and seen.index(seen[-1]) == len(seen) - 1, seen
    assert t.schema() == new
    assert_equal_sorted_by(t.read_df(), rows, "id")
    require_delta_spark(spark)
    assert_equal_sorted_by(delta_io.open_table(path, "spark", spark).read_df(), rows, "id")
    assert spark.sql(f"SELECT id FROM delta.`{path}` WHERE c > 1").collect() == [(1,)]


@pytest.mark.spark
def test_vacuum_removes_files_no_version_names_once_old_enough(spark, tmp_path, delta_backend):  # noqa: F811
    """A run killed before its commit leaves Parquet files in the table's folder that no version
    names; VACUUM removes them once they are older than the retention, on both backends."""
    import pyarrow.parquet as pq

    from pipelines.delta_io.upkeep import vacuum

    path = str(tmp_path / "t")
    schema = T.StructType([T.StructField("id", T.LongType())])
    t = delta_io.open_table(path, delta_backend, spark)
    t.create(schema)
    t.append(spark.createDataFrame([(1,), (2,)], schema))
    orphan = Path(path) / "part-00000-staged-by-a-killed-run.c000.snappy.parquet"
    pq.write_table(pa.table({"id": pa.array([9], pa.int64())}), orphan)
    assert vacuum(path, 24, spark=spark, backend=delta_backend) == 0 and orphan.exists()  # (too young)
    old = time.time() - 3 * 3600
    os.utime(orphan, (old, old))
    assert vacuum(path, 1, spark=spark, backend=delta_backend) == 1
    assert not orphan.exists()
    assert sorted(r["id"] for r in t.read_rows(["id"])) == [1, 2]


@pytest.mark.spark
def test_tables_checkpoint_as_they_commit(spark, tmp_path, delta_backend):  # noqa: F811
    """Every table delta_io creates checkpoints every 10 commits as it commits (delta-rs's own
    default is 100), so reading its state never replays a long log; a table made without the
    property gets it from maintenance (keep_properties)."""
    from pipelines.delta_io.backend import CHECKPOINT_INTERVAL
    from pipelines.delta_io.upkeep import keep_properties

    path = str(tmp_path / "t")
    schema = T.StructType([T.StructField("id", T.LongType())])
    t = delta_io.open_table(path, delta_backend, spark)
    t.create(schema)
    for i in range(11):
        t.append_rows([(i,)], schema)
    log = sorted(os.listdir(Path(path) / "_delta_log"))  # (12 versions: delta-rs writes version 9's, delta-spark 10's)
    assert [n for n in log if n.endswith(".checkpoint.parquet")], log

    old = str(tmp_path / "old")
    deltalake.write_deltalake(old, pa.table({"id": pa.array([1], pa.int64())}))  # (delta-rs's defaults)
    assert CHECKPOINT_INTERVAL not in deltalake.DeltaTable(old).metadata().configuration
    assert keep_properties(old, 720, spark=spark, backend=delta_backend)
    assert deltalake.DeltaTable(old).metadata().configuration[CHECKPOINT_INTERVAL] == "10"
    assert not keep_properties(old, 720, spark=spark, backend=delta_backend)  # (nothing to change: no commit)


@pytest.mark.spark
def test_a_far_timestamp_delta_spark_wrote_survives_a_merge_of_the_drivers_rows(spark, tmp_path):  # noqa: F811
    """On the delta-spark backend a small table's MERGE of the driver's rows is delta-rs's, which
    copies the rows it does not change out of the files it rewrites. Those files are delta-spark's:
    their TIMESTAMPs are written as microseconds (INT96, which delta-rs reads as nanoseconds, brought
    9999-12-31 back as 1816-03-30), and a TIMESTAMP and a TIMESTAMP_NTZ far from today come back as
    they went in."""
    import pyarrow.parquet as pq

    require_delta_spark(spark)
    path = str(tmp_path / "t")
    schema = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("ts", T.TimestampType()),
                           T.StructField("ntz", T.TimestampNTZType())])
    far = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    table = delta_io.open_table(path, "spark", spark)
    table.create(schema)
    table.append(spark.createDataFrame([(1, far.replace(tzinfo=dt.timezone.utc), far), (2, None, None)],
                                       schema).coalesce(1))
    (written,) = list(Path(path).glob("*.parquet"))
    assert pq.ParquetFile(written).schema_arrow.field("ts").type == pa.timestamp("us", "UTC")
    table.merge_rows(pa.table({"id": pa.array([2], pa.int32()), "ts": pa.array([None], pa.timestamp("us", "UTC")),
                               "ntz": pa.array([dt.datetime(2020, 1, 1)], pa.timestamp("us"))}),
                     "t.`id` = s.`id`", [MergeClause("update", None, {"ntz": "s.`ntz`"})], source_schema=schema)
    newest = sorted((Path(path) / "_delta_log").glob("*.json"))[-1].read_text()
    assert "delta-rs" in newest and '"remove"' in newest  # (the file with row 1 was rewritten by delta-rs)
    got = {r["id"]: (r["ts"], r["ntz"]) for r in table.read_df().selectExpr(
        "id", "CAST(ts AS STRING) AS ts", "CAST(ntz AS STRING) AS ntz").collect()}
    assert got == {1: ("9999-12-31 23:59:59.999999", "9999-12-31 23:59:59.999999"), 2: (None, "2020-01-01 00:00:00")}
