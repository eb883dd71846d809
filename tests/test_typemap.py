"""typemap: the MySQL -> silver type contract and the Spark-side value conversion."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from chispa import assert_df_equality
from pyspark.sql import types as T
from spark_fixtures import IMAGE_DDL, spark  # noqa: F401

from pipelines.schema.typemap import (
    ColumnSpec,
    UnsupportedColumnType,
    silver_schema,
    spark_type,
)
from pipelines.silver.spark_typing import typed_columns

BRONZE_DDL = f"_seq STRING, op STRING, after {IMAGE_DDL}, before {IMAGE_DDL}"
UTC = dt.timezone.utc


@pytest.mark.parametrize(
    "spec, expected",
    [
        (ColumnSpec("a", "tinyint"), T.ByteType()),
        (ColumnSpec("a", "tinyint", unsigned=True), T.ShortType()),
        (ColumnSpec("a", "bool"), T.ByteType()),
        (ColumnSpec("a", "smallint"), T.ShortType()),
        (ColumnSpec("a", "smallint", unsigned=True), T.IntegerType()),
        (ColumnSpec("a", "mediumint"), T.IntegerType()),
        (ColumnSpec("a", "mediumint", unsigned=True), T.IntegerType()),
        (ColumnSpec("a", "int"), T.IntegerType()),
        (ColumnSpec("a", "integer", unsigned=True), T.LongType()),
        (ColumnSpec("a", "bigint"), T.LongType()),
        (ColumnSpec("a", "bigint", unsigned=True), T.DecimalType(20, 0)),
        (ColumnSpec("a", "serial"), T.DecimalType(20, 0)),
        (ColumnSpec("a", "float"), T.FloatType()),
        (ColumnSpec("a", "float", precision=53), T.DoubleType()),
        (ColumnSpec("a", "float", precision=30, scale=2), T.FloatType()),
        (ColumnSpec("a", "double"), T.DoubleType()),
        (ColumnSpec("a", "decimal", precision=10, scale=2), T.DecimalType(10, 2)),
        (ColumnSpec("a", "decimal"), T.DecimalType(10, 0)),
        (ColumnSpec("a", "numeric", precision=38, scale=30), T.DecimalType(38, 30)),
        (ColumnSpec("a", "decimal", precision=38, scale=38), T.DecimalType(38, 38)),  # MariaDB
        (ColumnSpec("a", "decimal", precision=39, scale=0), T.StringType()),
        (ColumnSpec("a", "decimal", precision=65, scale=30), T.StringType()),
        (ColumnSpec("a", "date"), T.DateType()),
        (ColumnSpec("a", "datetime"), T.TimestampNTZType()),
        (ColumnSpec("a", "timestamp"), T.TimestampType()),
        (ColumnSpec("a", "time"), T.StringType()),
        (ColumnSpec("a", "year"), T.ShortType()),
        (ColumnSpec("a", "char", length=3), T.StringType()),
        (ColumnSpec("a", "varchar", length=40), T.StringType()),
        (ColumnSpec("a", "longtext"), T.StringType()),
        (ColumnSpec("a", "enum", enum_values=("s", "m")), T.StringType()),
        (ColumnSpec("a", "set", set_values=("a", "b")), T.StringType()),
        (ColumnSpec("a", "json"), T.StringType()),
        (ColumnSpec("a", "inet6"), T.StringType()),
        (ColumnSpec("a", "uuid"), T.StringType()),
        (ColumnSpec("a", "vector", length=3), T.StringType()),
        (ColumnSpec("a", "binary", length=4), T.BinaryType()),
        (ColumnSpec("a", "varbinary", length=4), T.BinaryType()),
        (ColumnSpec("a", "blob"), T.BinaryType()),
        (ColumnSpec("a", "bit", length=64), T.LongType()),
        (ColumnSpec("a", "geometry"), T.BinaryType()),
        (ColumnSpec("a", "point"), T.BinaryType()),
        (ColumnSpec("a", "DOUBLE PRECISION"), T.DoubleType()),
    ],
    ids=lambda v: repr(v) if isinstance(v, T.DataType) else f"{v.mysql_type}{'-u' if v.unsigned else ''}-{v.precision}-{v.scale}",
)
def test_spark_type_follows_the_contract(spec, expected):
    assert spark_type(spec) == expected


def test_unknown_type_is_rejected_with_the_column_named():
    with pytest.raises(UnsupportedColumnType, match=r"'v'.*'hyperloglog'"):
        spark_type(ColumnSpec("v", "hyperloglog"))


def test_decimal_outside_mysql_range_is_rejected():
    with pytest.raises(UnsupportedColumnType, match="DECIMAL\\(66,0\\)"):
        spark_type(ColumnSpec("d", "decimal", precision=66, scale=0))


def test_silver_schema_rejects_duplicate_names_case_insensitively():
    with pytest.raises(ValueError, match="duplicate column names"):
        silver_schema([ColumnSpec("Id", "int"), ColumnSpec("id", "int")])


def test_silver_schema_keeps_names_and_order_all_nullable():
    schema = silver_schema([ColumnSpec("z", "int", nullable=False), ColumnSpec("a b", "date")])
    assert schema == T.StructType([T.StructField("z", T.IntegerType(), True), T.StructField("a b", T.DateType(), True)])


# ---------------------------------------------------------------------------------------------
# typed_columns: every type of the mapping, one row

ALL_TYPES: list[tuple[ColumnSpec, str | None, bytes | None, object]] = [
    (ColumnSpec("ti", "tinyint"), "-128", None, -128),
    (ColumnSpec("tiu", "tinyint", unsigned=True), "255", None, 255),
    (ColumnSpec("si", "smallint"), "-32768", None, -32768),
    (ColumnSpec("siu", "smallint", unsigned=True), "65535", None, 65535),
    (ColumnSpec("mi", "mediumint"), "-8388608", None, -8388608),
    (ColumnSpec("miu", "mediumint", unsigned=True), "16777215", None, 16777215),
    (ColumnSpec("i", "int"), "-2147483648", None, -2147483648),
    (ColumnSpec("iu", "int", unsigned=True), "4294967295", None, 4294967295),
    (ColumnSpec("bi", "bigint"), "-9223372036854775808", None, -9223372036854775808),
    (ColumnSpec("biu", "bigint", unsigned=True), "18446744073709551615", None, Decimal("18446744073709551615")),
    (ColumnSpec("f", "float"), "0.10000000149011612", None, 0.10000000149011612),
    (ColumnSpec("d", "double"), "-1.5e+300", None, -1.5e300),
    (ColumnSpec("dec", "decimal", precision=10, scale=2), "-12345678.91", None, Decimal("-12345678.91")),
    (
        ColumnSpec("dec65", "decimal", precision=65, scale=30),
        "-" + "9" * 35 + "." + "0" * 29 + "1",
        None,
        "-" + "9" * 35 + "." + "0" * 29 + "1",
    ),
    (ColumnSpec("dt", "date"), "2024-02-29", None, dt.date(2024, 2, 29)),
    (ColumnSpec("dz", "date"), "0000-00-00", None, None),
    (ColumnSpec("dbad", "date"), "2023-02-30", None, None),
    (ColumnSpec("dtm", "datetime"), "2020-01-02 03:04:05.123456", None, dt.datetime(2020, 1, 2, 3, 4, 5, 123456)),
    (ColumnSpec("dtz", "datetime"), "0000-00-00 00:00:00", None, None),
    (ColumnSpec("ts", "timestamp"), "2038-01-19 03:14:07.999999", None, dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC)),
    (ColumnSpec("tm", "time"), "-12:00:00.5", None, "-12:00:00.5"),
    (ColumnSpec("y", "year"), "2155", None, 2155),
    (ColumnSpec("yz", "year"), "0", None, None),
    (ColumnSpec("c", "char", length=3), "ab", None, "ab"),
    (ColumnSpec("vc", "varchar", length=10), "héllo ☃", None, "héllo ☃"),
    (ColumnSpec("e", "enum", enum_values=("s", "m")), "m", None, "m"),
    (ColumnSpec("st", "set", set_values=("a", "b")), "a,b", None, "a,b"),
    (ColumnSpec("js", "json"), '{"a": [1, 2.5]}', None, '{"a": [1, 2.5]}'),
    (ColumnSpec("ip", "inet6"), "::1", None, "::1"),
    (ColumnSpec("u", "uuid"), "123e4567-e89b-12d3-a456-426614174000", None, "123e4567-e89b-12d3-a456-426614174000"),
    (ColumnSpec("vec", "vector", length=2), "[1.5, -2.0]", None, "[1.5, -2.0]"),
    (ColumnSpec("bn", "binary", length=4), None, b"ab", bytearray(b"ab\x00\x00")),
    (ColumnSpec("vb", "varbinary", length=4), None, b"\x00\xff", bytearray(b"\x00\xff")),
    (ColumnSpec("bl", "blob"), None, b"", bytearray(b"")),
    (ColumnSpec("bit64", "bit", length=64), "18446744073709551615", None, -1),
    (ColumnSpec("bit8", "bit", length=8), "5", None, 5),
    (ColumnSpec("g", "geometry"), None, b"\x00\x00\x00\x00\x01\x01", bytearray(b"\x00\x00\x00\x00\x01\x01")),
    (ColumnSpec("n", "int"), None, None, None),
]
ZERO_DATES_IN_ALL_TYPES = 4  # dz, dbad, dtz, yz


def _image(entries, reverse=False):
    image = [(i, spec.name, spec.mysql_type.upper(), text, data) for i, (spec, text, data, _) in enumerate(entries)]
    return list(reversed(image)) if reverse else image


def test_typed_columns_converts_every_type_of_the_mapping(spark):
    specs = [e[0] for e in ALL_TYPES]
    bronze = spark.createDataFrame(
        [("01", "c", _image(ALL_TYPES), None)], BRONZE_DDL
    )
    actual = typed_columns(bronze, specs).select("after", "_zero_dates")
    image_type = silver_schema(specs)
    expected = spark.createDataFrame(
        [(tuple(e[3] for e in ALL_TYPES), ZERO_DATES_IN_ALL_TYPES)],
        T.StructType([T.StructField("after", image_type), T.StructField("_zero_dates", T.IntegerType(), False)]),
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_timestamp_text_is_utc_whatever_the_session_time_zone(spark):
    specs = [ColumnSpec("ts", "timestamp"), ColumnSpec("dtm", "datetime")]
    bronze = spark.createDataFrame(
        [("01", "c", [(0, "ts", "TIMESTAMP", "1970-01-01 00:00:01.5", None), (1, "dtm", "DATETIME", "1970-01-01 00:00:01", None)], None)],
        BRONZE_DDL,
    )
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        row = typed_columns(bronze, specs).selectExpr(
            "unix_micros(after.ts) AS micros", "CAST(after.dtm AS STRING) AS local"
        ).collect()[0]
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)
    assert (row.micros, row.local) == (1_500_000, "1970-01-01 00:00:01")


def test_columns_found_by_idx_when_out_of_order_or_missing(spark):
    specs = [ColumnSpec("a", "int"), ColumnSpec("b", "varchar"), ColumnSpec("c", "int", ordinal=5)]
    bronze = spark.createDataFrame(
        [
            ("01", "u", [(5, "c", "LONG", "50", None), (0, "a", "LONG", "1", None)], [(1, "b", "VARCHAR", "x", None)]),
            ("02", "d", None, [(0, "a", "LONG", "2", None), (1, "b", "VARCHAR", "y", None), (5, "c", "LONG", "7", None)]),
        ],
        BRONZE_DDL,
    )
    actual = typed_columns(typed_columns(bronze, specs, "after"), specs, "before").select("_seq", "after", "before")
    image = silver_schema(specs)
    expected = spark.createDataFrame(
        [("01", (1, None, 50), (None, "x", None)), ("02", None, (2, "y", 7))],
        T.StructType([T.StructField("_seq", T.StringType()), T.StructField("after", image), T.StructField("before", image)]),
    )
    assert_df_equality(actual, expected, ignore_row_order=True)


def test_zero_dates_of_both_images_add_up(spark):
    specs = [ColumnSpec("id", "int"), ColumnSpec("d", "date")]
    bronze = spark.createDataFrame(
        [
            ("01", "u", [(0, "id", "LONG", "1", None), (1, "d", "DATE", "2024-00-10", None)],
             [(0, "id", "LONG", "1", None), (1, "d", "DATE", "0000-00-00", None)]),
            ("02", "c", [(0, "id", "LONG", "2", None), (1, "d", "DATE", "2024-01-10", None)], None),
        ],
        BRONZE_DDL,
    )
    actual = typed_columns(typed_columns(bronze, specs, "after"), specs, "before").select("_seq", "_zero_dates")
    expected = spark.createDataFrame(
        [("01", 2), ("02", 0)],
        T.StructType([T.StructField("_seq", T.StringType()), T.StructField("_zero_dates", T.IntegerType(), False)]),
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_text_that_does_not_convert_fails_naming_the_column(spark):
    bronze = spark.createDataFrame(
        [("01", "c", [(0, "qty", "TINY", "300", None)], None)], BRONZE_DDL
    )
    with pytest.raises(Exception, match=r"column 'qty' \(tinyint\): cannot convert text 300"):
        typed_columns(bronze, [ColumnSpec("qty", "tinyint")]).collect()


def test_a_guard_types_only_its_own_rows(spark):
    """With ``guard``, rows where it is false are not typed (NULL image, no zero dates) and so never
    raise, even when a filter on the typed values runs first; rows where it is true still raise."""
    from pyspark.sql import functions as F

    specs = [ColumnSpec("qty", "tinyint"), ColumnSpec("d", "date")]
    bronze = spark.createDataFrame(
        [("01", "c", [(0, "qty", "TINY", "7", None), (1, "d", "DATE", "0000-00-00", None)], None, True),
         ("02", "c", [(0, "qty", "LONG", "300000", None), (1, "d", "DATE", "0000-00-00", None)], None, False)],
        BRONZE_DDL + ", mine BOOLEAN",
    )
    typed = typed_columns(bronze, specs, guard="mine")
    # the filter on the typed value is evaluated before anything drops row 02: no error
    actual = typed.where(F.col("after.qty").isNull() | (F.col("after.qty") > 0)).select("_seq", "after", "_zero_dates")
    expected = spark.createDataFrame(
        [("01", (7, None), 1), ("02", None, 0)],
        T.StructType([T.StructField("_seq", T.StringType()), T.StructField("after", silver_schema(specs)),
                      T.StructField("_zero_dates", T.IntegerType())]),
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    with pytest.raises(Exception, match=r"column 'qty' \(tinyint\): cannot convert text 300000"):
        typed_columns(bronze.withColumn("mine", F.lit(True)), specs, guard="mine").collect()


def test_hostile_column_names_pass_through(spark):
    names = ["select", "a b", "x.y", "we`ird", 'q"uo\'te', "😀"]
    specs = [ColumnSpec(n, "int") for n in names]
    bronze = spark.createDataFrame(
        [("01", "c", [(i, n, "LONG", str(i), None) for i, n in enumerate(names)], None)], BRONZE_DDL
    )
    actual = typed_columns(bronze, specs).select("after")
    expected = spark.createDataFrame(
        [(tuple(range(len(names))),)], T.StructType([T.StructField("after", silver_schema(specs))])
    )
    assert_df_equality(actual, expected, ignore_row_order=True)


def test_top_level_names_with_dots_pass_through(spark):
    """The typing runs in Spark's tasks (mapInArrow), which read a DataFrame's columns by name: a
    dot in a column's name (an image's, the guard's, another's) must not be read as a field."""
    bronze = spark.createDataFrame([(1, [(0, "i.d", "LONG", "7", None)], True)],
                                   f"`a.b` INT, `im.age` {IMAGE_DDL}, `g.uard` BOOLEAN")
    actual = typed_columns(bronze, [ColumnSpec("i.d", "int")], "im.age", guard="g.uard").collect()
    assert [tuple(r) for r in actual] == [(1, (7,), True, 0)]


def test_typed_columns_guards(spark):
    bronze = spark.createDataFrame([("01", "c", None, None)], BRONZE_DDL)
    with pytest.raises(ValueError, match="no column 'image'"):
        typed_columns(bronze, [ColumnSpec("a", "int")], "image")
    with pytest.raises(ValueError, match="share one column ordinal"):
        typed_columns(bronze, [ColumnSpec("a", "int"), ColumnSpec("b", "int", ordinal=0)])
