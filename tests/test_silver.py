"""silver.apply_changes: latest change per key, key changes, deletes, idempotency, keyless
tables, schema evolution, SCD2, every type, hostile names; identical on both backends."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T
from spark_fixtures import IMAGE_DDL, delta_backend, spark  # noqa: F401

from pipelines import delta_io
from pipelines.delta_io import rs_backend as delta_merging
from pipelines.delta_io import quote_ident
from pipelines.delta_io.rs_writes import merge_rs
from pipelines.silver import (
    SilverSchemaError,
    apply_changes,
    changes_from_bronze,
    key_events,
    latest_per_key,
    read_watermark,
    silver_table_schema,
    working_changes,
)
from pipelines.schema.typemap import ColumnSpec, silver_schema

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
SPECS = [ColumnSpec("id", "int"), ColumnSpec("name", "varchar", length=20)]


def ts(n: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=n)


def changes(spark, rows, specs=SPECS):
    """rows: (_seq, op, after tuple | None, before tuple | None); _commit_ts = ts(int(_seq))."""
    image = silver_schema(specs)
    schema = T.StructType(
        [
            T.StructField("_seq", T.StringType()),
            T.StructField("op", T.StringType()),
            T.StructField("after", image),
            T.StructField("before", image),
            T.StructField("_commit_ts", T.TimestampType()),
        ]
    )
    return spark.createDataFrame([(s, op, a, b, ts(int(s))) for s, op, a, b in rows], schema)


def silver(spark, rows, specs=SPECS, *, scd2=False, extra: list[T.StructField] | None = None):
    """Expected silver rows: values..., _seq, _op, _commit_ts, _deleted[, scd2 columns][, extra]."""
    schema = silver_table_schema(specs, scd2=scd2)
    return spark.createDataFrame(rows, T.StructType(schema.fields + (extra or [])))


def row(values, seq, op, deleted=False):
    return (*values, seq, op, ts(int(seq)), deleted)


def read(spark, path, backend):
    return delta_io.open_table(path, backend, spark).read_df()


def assert_table(spark, path, backend, expected):
    assert_df_equality(read(spark, path, backend), expected, ignore_row_order=True)


@pytest.fixture()
def target(tmp_path):
    return str(tmp_path / "silver" / "shop" / "customers")


# ---------------------------------------------------------------------------------------------
# the change logic on its own (DataFrame -> DataFrame)


def test_key_events_split_a_key_change_into_delete_and_upsert(spark):
    batch = changes(spark, [("01", "c", (1, "a"), None), ("02", "u", (2, "a"), (1, "a")), ("03", "u", (2, "b"), (2, "a")), ("04", "d", None, (2, "b"))])
    actual = key_events(working_changes(batch), ["id"], silver_schema(SPECS)).drop("__silver_commit_ts")
    schema = "id INT, name STRING, __silver_seq STRING, __silver_op STRING, __silver_deleted BOOLEAN, __silver_action STRING"
    expected = spark.createDataFrame(
        [
            (1, "a", "01", "c", False, "upsert"),
            (2, "a", "02", "u", False, "upsert"),
            (1, "a", "02", "d", True, "delete"),
            (2, "b", "03", "u", False, "upsert"),
            (2, "b", "04", "d", True, "delete"),
        ],
        schema,
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_latest_per_key_orders_by_seq_not_by_arrival(spark):
    batch = changes(spark, [("03", "u", (1, "c"), (1, "b")), ("01", "c", (1, "a"), None), ("02", "u", (1, "b"), (1, "a")), ("04", "c", (2, "x"), None)])
    events = key_events(working_changes(batch), ["id"], silver_schema(SPECS))
    actual = latest_per_key(events, ["id"]).select("id", "name", "__silver_seq")
    expected = spark.createDataFrame([(1, "c", "03"), (2, "x", "04")], "id INT, name STRING, __silver_seq STRING")
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_latest_per_key_takes_any_name_and_minus_zero(spark):
    """A key named with a dot; a DOUBLE key whose -0.0 and 0.0 are one key (MySQL's equality, and
    arrow_fold.latest_rows'); NULL keys as one key."""
    events = spark.createDataFrame(
        [(0.0, "a", "01", "upsert"), (-0.0, "b", "03", "upsert"), (0.0, "c", "02", "upsert"), (1.5, "d", "04", "delete"),
         (1.5, "e", "04", "upsert"), (None, "f", "05", "upsert"), (None, "g", "06", "delete")],
        "`k.ey` DOUBLE, `v.al` STRING, __silver_seq STRING, __silver_action STRING")
    got = sorted((r["v.al"], r["__silver_seq"]) for r in latest_per_key(events.repartition(3), ["k.ey"]).collect())
    assert got == [("b", "03"), ("e", "04"), ("g", "06")]  # (ties: the upsert; NULL keys are one key)


# ---------------------------------------------------------------------------------------------
# tables with a key


def test_latest_change_per_key_out_of_order_batch(spark, delta_backend, target):
    batch = changes(spark, [("03", "u", (1, "c"), (1, "b")), ("01", "c", (1, "a"), None), ("04", "c", (2, "x"), None), ("02", "u", (1, "b"), (1, "a"))])
    stats = apply_changes(spark, batch, SPECS, target, keys=["id"], backend=delta_backend)
    assert_table(spark, target, delta_backend, silver(spark, [row((1, "c"), "03", "u"), row((2, "x"), "04", "c")]))
    assert (stats.inserted, stats.updated, stats.deleted, stats.changes, stats.watermark) == (2, 0, 0, 4, "04")


def test_key_change_chain_and_key_reuse(spark, delta_backend, target):
    apply_changes(spark, changes(spark, [("01", "c", (1, "a"), None), ("02", "c", (5, "e"), None)]), SPECS, target, keys=["id"], backend=delta_backend)
    batch = changes(
        spark,
        [("03", "u", (2, "a"), (1, "a")), ("04", "u", (3, "a"), (2, "a")), ("05", "u", (1, "e"), (5, "e"))],
    )
    stats = apply_changes(spark, batch, SPECS, target, keys=["id"], backend=delta_backend)
    assert_table(spark, target, delta_backend, silver(spark, [row((3, "a"), "04", "u"), row((1, "e"), "05", "u")]))
    assert (stats.inserted, stats.updated, stats.deleted, stats.unchanged) == (1, 1, 1, 1)


def test_key_swap_through_a_temporary_key(spark, delta_backend, target):
    apply_changes(spark, changes(spark, [("01", "c", (1, "a"), None), ("02", "c", (2, "b"), None)]), SPECS, target, keys=["id"], backend=delta_backend)
    swap = changes(spark, [("03", "u", (0, "a"), (1, "a")), ("04", "u", (1, "b"), (2, "b")), ("05", "u", (2, "a"), (0, "a"))])
    apply_changes(spark, swap, SPECS, target, keys=["id"], backend=delta_backend)
    assert_table(spark, target, delta_backend, silver(spark, [row((1, "b"), "04", "u"), row((2, "a"), "05", "u")]))


def test_hard_delete(spark, delta_backend, target):
    apply_changes(spark, changes(spark, [("01", "c", (1, "a"), None), ("02", "c", (2, "b"), None)]), SPECS, target, keys=["id"], backend=delta_backend)
    stats = apply_changes(
        spark, changes(spark, [("03", "d", None, (1, "a")), ("04", "d", None, (9, "z"))]), SPECS, target, keys=["id"], backend=delta_backend
    )
    assert_table(spark, target, delta_backend, silver(spark, [row((2, "b"), "02", "c")]))
    assert (stats.deleted, stats.unchanged) == (1, 1)


def test_soft_delete_keeps_a_tombstone_and_a_later_insert_revives_it(spark, delta_backend, target):
    apply_changes(
        spark, changes(spark, [("01", "c", (1, "a"), None), ("02", "c", (2, "b"), None)]), SPECS, target,
        keys=["id"], delete_mode="soft", backend=delta_backend,
    )
    stats = apply_changes(
        spark, changes(spark, [("03", "d", None, (1, "a")), ("04", "d", None, (9, "z"))]), SPECS, target,
        keys=["id"], delete_mode="soft", backend=delta_backend,
    )
    assert stats.deleted == 2
    assert_table(
        spark, target, delta_backend,
        silver(spark, [row((1, "a"), "03", "d", True), row((2, "b"), "02", "c"), row((9, "z"), "04", "d", True)]),
    )
    apply_changes(
        spark, changes(spark, [("05", "c", (1, "again"), None)]), SPECS, target,
        keys=["id"], delete_mode="soft", backend=delta_backend,
    )
    assert_table(
        spark, target, delta_backend,
        silver(spark, [row((1, "again"), "05", "c"), row((2, "b"), "02", "c"), row((9, "z"), "04", "d", True)]),
    )


def test_rerun_of_the_same_batch_changes_nothing(spark, delta_backend, target):
    batch = changes(spark, [("01", "c", (1, "a"), None), ("02", "u", (2, "a"), (1, "a")), ("03", "c", (3, "c"), None), ("04", "d", None, (3, "c"))])
    first = apply_changes(spark, batch, SPECS, target, keys=["id"], backend=delta_backend)
    version = delta_io.open_table(target, delta_backend, spark).history(limit=1)[0].version
    second = apply_changes(spark, batch, SPECS, target, keys=["id"], backend=delta_backend)
    assert_table(spark, target, delta_backend, silver(spark, [row((2, "a"), "02", "u")]))
    assert first.committed and not second.committed
    assert (second.skipped_by_watermark, second.watermark) == (4, "04")
    assert delta_io.open_table(target, delta_backend, spark).history(limit=1)[0].version == version


def test_merge_only_applies_changes_newer_than_the_row(spark, delta_backend, target):
    # A table without a watermark in its commits (e.g. loaded by a snapshot): row _seq guards alone.
    delta_io.open_table(target, delta_backend, spark).create(silver_table_schema(SPECS))
    delta_io.open_table(target, delta_backend, spark).append(silver(spark, [row((1, "new"), "50", "u")]))
    assert read_watermark(target, spark=spark, backend=delta_backend) is None
    batch = changes(spark, [("10", "u", (1, "old"), (1, "older")), ("11", "c", (2, "b"), None), ("12", "d", None, (1, "old"))])
    stats = apply_changes(spark, batch, SPECS, target, keys=["id"], backend=delta_backend)
    assert_table(spark, target, delta_backend, silver(spark, [row((1, "new"), "50", "u"), row((2, "b"), "11", "c")]))
    assert (stats.inserted, stats.updated, stats.deleted, stats.unchanged) == (1, 0, 0, 1)


def test_replayed_older_insert_does_not_resurrect_a_hard_deleted_row(spark, delta_backend, target):
    insert = changes(spark, [("01", "c", (1, "a"), None)])
    apply_changes(spark, insert, SPECS, target, keys=["id"], backend=delta_backend)
    apply_changes(spark, changes(spark, [("02", "d", None, (1, "a"))]), SPECS, target, keys=["id"], backend=delta_backend)
    replay = apply_changes(spark, insert, SPECS, target, keys=["id"], backend=delta_backend)
    assert_table(spark, target, delta_backend, silver(spark, []))
    assert (replay.skipped_by_watermark, replay.committed) == (1, False)


def test_transaction_id_skips_a_batch_already_applied(spark, delta_backend, target):
    apply_changes(
        spark, changes(spark, [("01", "c", (1, "a"), None)]), SPECS, target, keys=["id"],
        backend=delta_backend, txn_app_id="silver-job", txn_version=7,
    )
    stats = apply_changes(
        spark, changes(spark, [("02", "c", (2, "b"), None)]), SPECS, target, keys=["id"],
        backend=delta_backend, txn_app_id="silver-job", txn_version=7,
    )
    assert stats.skipped_by_txn and not stats.committed
    assert delta_io.open_table(target, delta_backend, spark).last_txn("silver-job") == 7
    assert_table(spark, target, delta_backend, silver(spark, [row((1, "a"), "01", "c")]))


# ---------------------------------------------------------------------------------------------
# tables without a key


def test_keyless_duplicates_are_kept_and_deleted_one_at_a_time(spark, delta_backend, target):
    first = changes(spark, [("01", "c", (1, "x"), None), ("02", "c", (1, "x"), None), ("03", "c", (2, "y"), None)])
    apply_changes(spark, first, SPECS, target, keys=None, backend=delta_backend)
    assert_table(spark, target, delta_backend, silver(spark, [row((1, "x"), "01", "c"), row((1, "x"), "02", "c"), row((2, "y"), "03", "c")]))
    second = changes(spark, [("04", "d", None, (1, "x")), ("05", "u", (2, "z"), (2, "y")), ("06", "d", None, (7, "q"))])
    stats = apply_changes(spark, second, SPECS, target, keys=None, backend=delta_backend)
    expected = silver(spark, [row((1, "x"), "02", "c"), row((2, "z"), "05", "u")])
    assert_table(spark, target, delta_backend, expected)
    assert (stats.inserted, stats.deleted, stats.missing_deletes) == (1, 2, 1)
    rerun = apply_changes(spark, second, SPECS, target, keys=None, backend=delta_backend)
    assert not rerun.committed
    assert_table(spark, target, delta_backend, expected)


def test_keyless_insert_then_delete_within_one_batch(spark, delta_backend, target):
    batch = changes(spark, [("01", "c", (1, "x"), None), ("02", "c", (1, "x"), None), ("03", "d", None, (1, "x"))])
    apply_changes(spark, batch, SPECS, target, keys=None, backend=delta_backend)
    assert_table(spark, target, delta_backend, silver(spark, [row((1, "x"), "02", "c")]))


def test_keyless_soft_delete_flags_one_copy(spark, delta_backend, target):
    apply_changes(spark, changes(spark, [("01", "c", (1, "x"), None), ("02", "c", (1, "x"), None)]), SPECS, target, keys=None, delete_mode="soft", backend=delta_backend)
    apply_changes(spark, changes(spark, [("03", "d", None, (1, "x"))]), SPECS, target, keys=None, delete_mode="soft", backend=delta_backend)
    expected = silver(spark, [(1, "x", "01", "d", ts(3), True), row((1, "x"), "02", "c")])
    assert_table(spark, target, delta_backend, expected)


# ---------------------------------------------------------------------------------------------
# schema evolution


def test_add_column_then_drop_column(spark, delta_backend, target):
    apply_changes(spark, changes(spark, [("01", "c", (1, "a"), None)]), SPECS, target, keys=["id"], backend=delta_backend)
    wider = [*SPECS, ColumnSpec("score", "int")]
    stats = apply_changes(spark, changes(spark, [("02", "c", (2, "b", 7), None)], wider), wider, target, keys=["id"], backend=delta_backend)
    assert stats.columns_added == ("score",)
    score = [T.StructField("score", T.IntegerType())]
    assert_table(spark, target, delta_backend, silver(spark, [row((1, "a"), "01", "c") + (None,), row((2, "b"), "02", "c") + (7,)], extra=score))
    # `name` dropped; `id` renamed to `ID` (MySQL names are case-insensitive: same silver column)
    narrower = [ColumnSpec("ID", "int"), ColumnSpec("score", "int")]
    batch = changes(spark, [("03", "u", (2, 8), (2, 7)), ("04", "c", (3, 9), None)], narrower)
    apply_changes(spark, batch, narrower, target, keys=["ID"], backend=delta_backend)
    expected = silver(
        spark,
        [row((1, "a"), "01", "c") + (None,), row((2, None), "03", "u") + (8,), row((3, None), "04", "c") + (9,)],
        extra=score,
    )
    assert_table(spark, target, delta_backend, expected)


def test_changed_column_type_is_refused(spark, delta_backend, target):
    apply_changes(spark, changes(spark, [("01", "c", (1, "a"), None)]), SPECS, target, keys=["id"], backend=delta_backend)
    bigger = [ColumnSpec("id", "bigint"), SPECS[1]]
    with pytest.raises(SilverSchemaError, match="id: silver has int, specs give bigint"):
        apply_changes(spark, changes(spark, [("02", "c", (2, "b"), None)], bigger), bigger, target, keys=["id"], backend=delta_backend)


# ---------------------------------------------------------------------------------------------
# SCD2


def scd2_row(values, seq, op, valid_to, current, deleted=False):
    return (*values, seq, op, ts(int(seq)), deleted, ts(int(seq)), None if valid_to is None else ts(valid_to), current)


def test_scd2_keeps_every_version(spark, delta_backend, target):
    apply_changes(spark, changes(spark, [("01", "c", (1, "a"), None), ("02", "c", (2, "b"), None)]), SPECS, target, keys=["id"], scd2=True, backend=delta_backend)
    batch = changes(
        spark,
        [("03", "u", (1, "a2"), (1, "a")), ("04", "u", (1, "a3"), (1, "a2")), ("05", "d", None, (2, "b")), ("06", "c", (3, "c"), None)],
    )
    stats = apply_changes(spark, batch, SPECS, target, keys=["id"], scd2=True, backend=delta_backend)
    expected = silver(
        spark,
        [
            scd2_row((1, "a"), "01", "c", 3, False),
            scd2_row((1, "a2"), "03", "u", 4, False),
            scd2_row((1, "a3"), "04", "u", None, True),
            scd2_row((2, "b"), "02", "c", 5, False),
            scd2_row((3, "c"), "06", "c", None, True),
        ],
        scd2=True,
    )
    assert_table(spark, target, delta_backend, expected)
    assert (stats.inserted, stats.updated, stats.deleted) == (3, 2, 1)
    apply_changes(spark, batch, SPECS, target, keys=["id"], scd2=True, backend=delta_backend)
    assert_table(spark, target, delta_backend, expected)


def test_scd2_versions_of_one_second_are_ordered_by_seq(spark, delta_backend, target):
    # (issue 36) binlog commit times have one-second resolution: three versions of a key committed
    # in the same second share _valid_from; _seq orders them, and each version's _valid_to is the
    # next one's _valid_from (docs/sql.md, "A key's history in an SCD2 table")
    same = ts(10)
    rows = [("11", "c", (1, "a"), None), ("12", "u", (1, "a2"), (1, "a")), ("13", "u", (1, "a3"), (1, "a2"))]
    schema = changes(spark, []).schema
    batch = spark.createDataFrame([(s, op, a, b, same) for s, op, a, b in rows], schema)
    apply_changes(spark, batch, SPECS, target, keys=["id"], scd2=True, backend=delta_backend)
    history = [r.asDict() for r in read(spark, target, delta_backend).where("id = 1").orderBy("_seq").collect()]
    assert [r["name"] for r in history] == ["a", "a2", "a3"]
    naive = same.replace(tzinfo=None)  # (as Spark returns it, in the session's UTC)
    assert {r["_valid_from"] for r in history} == {naive}  # the commit time alone cannot order them
    assert [r["_valid_to"] for r in history] == [naive, naive, None]
    assert [r["_is_current"] for r in history] == [False, False, True]


def test_scd2_soft_delete_adds_a_tombstone_version(spark, delta_backend, target):
    apply_changes(spark, changes(spark, [("01", "c", (1, "a"), None)]), SPECS, target, keys=["id"], scd2=True, delete_mode="soft", backend=delta_backend)
    apply_changes(spark, changes(spark, [("02", "d", None, (1, "a"))]), SPECS, target, keys=["id"], scd2=True, delete_mode="soft", backend=delta_backend)
    expected = silver(
        spark,
        [scd2_row((1, "a"), "01", "c", 2, False), scd2_row((1, "a"), "02", "d", None, True, deleted=True)],
        scd2=True,
    )
    assert_table(spark, target, delta_backend, expected)


# ---------------------------------------------------------------------------------------------
# types and names end to end (bronze -> changes_from_bronze -> silver)

TYPE_SPECS = [
    ColumnSpec("id", "int"),
    ColumnSpec("u64", "bigint", unsigned=True),
    ColumnSpec("big", "decimal", precision=65, scale=30),
    ColumnSpec("price", "decimal", precision=10, scale=2),
    ColumnSpec("f", "float"),
    ColumnSpec("t", "time"),
    ColumnSpec("d", "date"),
    ColumnSpec("dtm", "datetime"),
    ColumnSpec("ts", "timestamp"),
    ColumnSpec("bin4", "binary", length=4),
    ColumnSpec("flags", "bit", length=64),
    ColumnSpec("tags", "set", set_values=("a", "b")),
    ColumnSpec("y", "year"),
]
BIG = "-" + "9" * 35 + "." + "9" * 30


def _bronze(spark, rows):
    ddl = f"_seq STRING, op STRING, commit_ts TIMESTAMP, after {IMAGE_DDL}, before {IMAGE_DDL}"
    return spark.createDataFrame(rows, ddl)


def _image(values):
    return [(i, spec.name, spec.mysql_type.upper(), text, data) for i, (spec, (text, data)) in enumerate(zip(TYPE_SPECS, values))]


def test_every_type_reaches_silver_exactly(spark, delta_backend, target):
    values = [
        ("1", None), ("18446744073709551615", None), (BIG, None), ("-0.01", None), ("1.5", None),
        ("-12:00:00.5", None), ("0000-00-00", None), ("2020-01-02 03:04:05.000001", None),
        ("2038-01-19 03:14:07", None), (None, b"ab"), ("18446744073709551615", None), ("a,b", None), ("0000", None),
    ]
    bronze = _bronze(spark, [("01", "c", ts(1), _image(values), None)])
    stats = apply_changes(spark, changes_from_bronze(bronze, TYPE_SPECS), TYPE_SPECS, target, keys=["id"], backend=delta_backend)
    expected = silver(
        spark,
        [(
            1, Decimal("18446744073709551615"), BIG, Decimal("-0.01"), 1.5, "-12:00:00.5", None,
            dt.datetime(2020, 1, 2, 3, 4, 5, 1), dt.datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC),
            bytearray(b"ab\x00\x00"), -1, "a,b", None, "01", "c", ts(1), False,
        )],
        TYPE_SPECS,
    )
    assert_table(spark, target, delta_backend, expected)
    assert stats.zero_dates_nulled == 2


def test_changes_from_bronze_options_change_no_value(spark):
    """``partial=False`` (whole images) drops only the ``_present`` flags; a bronze ``_zero_dates``
    column is taken as the count instead of typing's own; a ``guard`` leaves the rows it holds for
    as they were and types no other row (a bad value there does not raise)."""
    values = [(str(i), None) if s.name == "id" else ("2024-02-30", None) if s.name == "d" else (None, None)
              for i, s in zip(range(1, 99), TYPE_SPECS)]
    rows = [("01", "c", ts(1), _image(values), None), ("02", "u", ts(2), _image(values), _image(values))]
    bronze = _bronze(spark, rows)
    plain = changes_from_bronze(bronze, TYPE_SPECS)
    assert plain.columns == ["_seq", "op", "_commit_ts", "after", "before", "_present", "_zero_dates"]
    assert [r["_zero_dates"] for r in plain.orderBy("_seq").collect()] == [1, 2]

    whole = changes_from_bronze(bronze, TYPE_SPECS, partial=False)
    assert whole.columns == ["_seq", "op", "_commit_ts", "after", "before", "_zero_dates"]
    assert_df_equality(whole, plain.drop("_present"), ignore_row_order=True)

    counted = changes_from_bronze(bronze.withColumn("_zero_dates", F.lit(7)), TYPE_SPECS)
    assert [r["_zero_dates"] for r in counted.collect()] == [7, 7]
    assert_df_equality(counted.drop("_zero_dates"), plain.drop("_zero_dates"), ignore_row_order=True)

    bad = [("not a number", None) if s.name == "id" else v for s, v in zip(TYPE_SPECS, values)]
    other = _bronze(spark, [("03", "c", ts(3), _image(bad), None)])
    mixed = bronze.unionByName(other)
    guarded = changes_from_bronze(mixed, TYPE_SPECS, guard=F.col("_seq") != "03")
    assert_df_equality(guarded.where("_seq != '03'"), plain, ignore_row_order=True)
    assert guarded.where("_seq = '03'").select("after", "_zero_dates").collect() == [(None, 0)]
    with pytest.raises(Exception, match=r"column 'id' \(int\): cannot convert text not a number"):
        changes_from_bronze(mixed, TYPE_SPECS).collect()


HOSTILE = [ColumnSpec("select", "int"), ColumnSpec("a b", "varchar"), ColumnSpec("x.y", "int"),
           ColumnSpec("we`ird", "varchar"), ColumnSpec('q"uo\'te', "int"), ColumnSpec("😀", "varchar")]


def test_hostile_column_names_with_a_key_change_and_delete(spark, delta_backend, target):
    batch = changes(
        spark,
        [
            ("01", "c", (1, "a", 1, "`", 1, "🙂"), None),
            ("02", "c", (2, "b", 2, "``", 2, "🙃"), None),
            ("03", "u", (3, "a", 1, "`", 1, "🙂"), (1, "a", 1, "`", 1, "🙂")),
            ("04", "d", None, (2, "b", 2, "``", 2, "🙃")),
        ],
        HOSTILE,
    )
    stats = apply_changes(spark, batch, HOSTILE, target, keys=["select"], backend=delta_backend)
    expected = silver(spark, [row((3, "a", 1, "`", 1, "🙂"), "03", "u")], HOSTILE)
    key = F.col(quote_ident("select"))
    assert_df_equality(read(spark, target, delta_backend).orderBy(key), expected.orderBy(key))
    assert stats.inserted == 1
    keyless = target + "_keyless"
    apply_changes(spark, batch, HOSTILE, keyless, keys=None, backend=delta_backend)
    assert_df_equality(read(spark, keyless, delta_backend).orderBy(key), expected.orderBy(key))


# ---------------------------------------------------------------------------------------------
# guards


def test_contract_violations_are_reported_together(spark, target):
    bad = spark.createDataFrame([("01", "c", (1,), None)], "_seq STRING, op STRING, after STRUCT<id: BIGINT>, before STRUCT<id: INT>")
    with pytest.raises(SilverSchemaError) as err:
        apply_changes(spark, bad, SPECS, target, keys=["id"], backend="rs")
    message = str(err.value)
    assert "'after' lacks fields ['name']" in message and "id: bigint (silver type int)" in message
    assert "Columns present: ['_seq', 'op', 'after', 'before']" in message


def test_argument_guards(spark, target):
    batch = changes(spark, [("01", "c", (1, "a"), None)])
    with pytest.raises(ValueError, match="delete_mode"):
        apply_changes(spark, batch, SPECS, target, keys=["id"], delete_mode="archive", backend="rs")
    with pytest.raises(ValueError, match="scd2=True needs a key"):
        apply_changes(spark, batch, SPECS, target, keys=None, scd2=True, backend="rs")
    with pytest.raises(SilverSchemaError, match=r"key columns \['nope'\]"):
        apply_changes(spark, batch, SPECS, target, keys=["nope"], backend="rs")
    with pytest.raises(SilverSchemaError, match=r"collide with silver's own columns.*silver\.table_column_prefix"):
        apply_changes(spark, batch, [ColumnSpec("_seq", "int")], target, keys=None, backend="rs")


# ---------------------------------------------------------------------------------------------
# source columns named like silver's own: another prefix for the table's own columns

OWNISH = [ColumnSpec("_seq", "int"), ColumnSpec("_op", "varchar", length=5), ColumnSpec("_deleted", "int")]


@pytest.mark.parametrize("mode", ["keyed-hard", "keyed-soft", "keyless", "scd2"])
def test_source_columns_named_like_silvers_own_land_under_another_prefix(spark, delta_backend, target, mode):
    kw = dict(keys=None if mode == "keyless" else ["_seq"], delete_mode="soft" if mode == "keyed-soft" else "hard",
              scd2=mode == "scd2", backend=delta_backend, column_prefix="_cdc_")
    first = [("01", "c", (1, "a", 7), None), ("02", "c", (2, "b", 8), None), ("03", "c", (3, "c", 9), None)]
    apply_changes(spark, changes(spark, first, OWNISH), OWNISH, target, **kw)
    second = [("04", "u", (1, "z", 70), (1, "a", 7)), ("05", "d", None, (2, "b", 8))]
    # the next run may name another prefix: the table keeps the one it has
    apply_changes(spark, changes(spark, second, OWNISH), OWNISH, target, **{**kw, "column_prefix": "_"})
    got = read(spark, target, delta_backend)
    own = ["_cdc_seq", "_cdc_op", "_cdc_commit_ts", "_cdc_deleted"] + (
        ["_cdc_valid_from", "_cdc_valid_to", "_cdc_is_current"] if mode == "scd2" else [])
    assert got.columns == ["_seq", "_op", "_deleted", *own]
    live = {"keyed-soft": "NOT _cdc_deleted", "scd2": "_cdc_is_current"}.get(mode, "true")
    rows = sorted(tuple(r) for r in got.where(live).select("_seq", "_op", "_deleted", "_cdc_seq").collect())
    assert rows == [(1, "z", 70, "04"), (3, "c", 9, "03")]
    # a replay changes nothing: the watermark is in the table's own column
    again = apply_changes(spark, changes(spark, second, OWNISH), OWNISH, target, **kw)
    assert again.changes == 0


def test_null_key_and_bad_op_fail_fast(spark, delta_backend, target):
    with pytest.raises(ValueError, match="NULL in key columns"):
        apply_changes(spark, changes(spark, [("01", "c", (None, "a"), None)]), SPECS, target, keys=["id"], backend=delta_backend)
    with pytest.raises(ValueError, match="op other than c/u/d/r"):
        apply_changes(spark, changes(spark, [("02", "x", (1, "a"), None)]), SPECS, target, keys=["id"], backend=delta_backend)


def test_big_batch_merges_in_parts_by_key_and_a_crash_between_parts_is_harmless(spark, target, monkeypatch):
    """delta-rs: a source above MERGE_CHUNK_ROWS goes in parts (bounded driver memory); only the
    last part records the watermark, so a run that dies after some parts is simply done again."""
    apply_changes(spark, changes(spark, [(f"{i:02d}", "c", (i, "old"), None) for i in range(1, 9)]), SPECS, target,
                  keys=["id"], backend="rs")
    before = delta_io.open_table(target, "rs").history(limit=1)[0].version
    batch = changes(spark, [(f"{10 + i}", "u", (i, "new"), (i, "old")) for i in range(1, 7)]
                    + [("20", "d", None, (7, "old")), ("21", "c", (9, "nine"), None), ("22", "u", (10, "old"), (8, "old"))])
    expected = silver(spark, [row((i, "new"), f"{10 + i}", "u") for i in range(1, 7)]
                      + [row((9, "nine"), "21", "c"), row((10, "old"), "22", "u")])
    monkeypatch.setattr(delta_merging, "MERGE_CHUNK_ROWS", 3)
    real_merge_rs, calls = merge_rs, []

    def dies_after_two_parts(path, source, on, clauses, commit):
        calls.append(commit.metadata)
        if len(calls) == 3:
            raise RuntimeError("killed between parts")
        return real_merge_rs(path, source, on, clauses, commit)

    monkeypatch.setattr(delta_merging, "merge_rs", dies_after_two_parts)
    with pytest.raises(RuntimeError, match="between parts"):
        apply_changes(spark, batch, SPECS, target, keys=["id"], backend="rs")
    assert calls[:2] == [None, None]  # the parts before the last carry no watermark
    assert read_watermark(target, backend="rs") == "08"
    monkeypatch.setattr(delta_merging, "merge_rs", real_merge_rs)
    stats = apply_changes(spark, batch, SPECS, target, keys=["id"], backend="rs")  # the re-run
    assert_table(spark, target, "rs", expected)
    assert stats.watermark == "22" and read_watermark(target, backend="rs") == "22"
    assert delta_io.open_table(target, "rs").history(limit=1)[0].version - before >= 4  # 2 + 4 parts (11 rows / 3)
