"""Partial row images (binlog_row_image=MINIMAL/NOBLOB): silver merges the columns a change
carries and keeps the others, per key in _seq order, across key changes, with SCD2, on both
backends; keyless tables refuse them."""
from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import functions as F
from chispa import assert_df_equality
from pyspark.sql import types as T
from spark_fixtures import IMAGE_DDL, delta_backend, spark  # noqa: F401

from pipelines import delta_io
from pipelines.silver.columns import PRESENT
from pipelines.silver import (
    apply_changes,
    changes_from_bronze,
    fill_partial,
    key_events,
    silver_table_schema,
    working_changes,
)
from pipelines.schema.typemap import ColumnSpec, silver_schema

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
SPECS = [ColumnSpec("id", "int"), ColumnSpec("a", "int"), ColumnSpec("b", "varchar", length=20)]
VALUES = silver_schema(SPECS)
ALL = (True, True, True)


def ts(n: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=n)


def changes(spark, rows):
    """rows: (_seq, op, after | None, before | None, present flags | None); None flags: whole image."""
    flags = T.StructType([T.StructField(s.name, T.BooleanType()) for s in SPECS])
    schema = T.StructType([
        T.StructField("_seq", T.StringType()),
        T.StructField("op", T.StringType()),
        T.StructField("after", VALUES),
        T.StructField("before", VALUES),
        T.StructField("_commit_ts", T.TimestampType()),
        T.StructField(PRESENT, flags),
    ])
    data = [(s, op, a, b, ts(int(s)), p if p is not None or a is None else ALL) for s, op, a, b, p in rows]
    return spark.createDataFrame(data, schema)


def upd(seq, key, after, present, before_key=None):
    """A MINIMAL update: before image = the key only, after image = the changed columns."""
    return (seq, "u", after, (key if before_key is None else before_key, None, None), present)


def row(values, seq, op, deleted=False):
    return (*values, seq, op, ts(int(seq)), deleted)


def assert_table(spark, path, backend, rows, *, scd2=False):
    expected = spark.createDataFrame(rows, silver_table_schema(SPECS, scd2=scd2))
    assert_df_equality(delta_io.open_table(path, backend, spark).read_df(), expected, ignore_row_order=True)


@pytest.fixture()
def target(tmp_path):
    return str(tmp_path / "silver" / "shop" / "t_min")


def apply(spark, rows, target, backend, **kw):
    return apply_changes(spark, changes(spark, rows), SPECS, target, keys=["id"], backend=backend, **kw)


# ---------------------------------------------------------------------------------------------
# the combining rules on their own (DataFrame -> DataFrame)


def test_an_update_without_its_key_in_the_after_image_keeps_the_key(spark):
    batch = changes(spark, [upd("02", 1, (None, 5, None), (False, True, False))])
    actual = key_events(working_changes(batch), ["id"], VALUES).select("id", "a", "__silver_seq", "__silver_action",
                                                                       "__silver_moved")
    expected = spark.createDataFrame([(1, 5, "02", "upsert", False)], actual.schema)
    assert_df_equality(actual, expected)


def test_fill_partial_combines_updates_in_seq_order_over_the_stored_row(spark):
    stored = spark.createDataFrame([(1, 10, "x"), (2, 20, "y")], VALUES)
    batch = changes(spark, [
        upd("05", 1, (None, None, "z"), (False, False, True)),  # arrives first, applies last
        upd("03", 1, (None, 11, None), (False, True, False)),
        upd("04", 1, (None, 12, None), (False, True, False)),
        upd("06", 2, (None, None, None), (False, False, True)),  # a NULL that is present
    ])
    filled = fill_partial(key_events(working_changes(batch), ["id"], VALUES), stored, ["id"], VALUES)
    expected = spark.createDataFrame([(1, 11, "x", "03"), (1, 12, "x", "04"), (1, 12, "z", "05"), (2, 20, None, "06")],
                                     "id INT, a INT, b STRING, _seq STRING")
    assert_df_equality(filled.select("id", "a", "b", F.col("__silver_seq").alias("_seq")), expected, ignore_row_order=True)


def test_fill_partial_after_delete_and_insert_starts_from_the_insert(spark):
    stored = spark.createDataFrame([(1, 10, "x")], VALUES)
    batch = changes(spark, [
        ("02", "d", None, (1, None, None), None),
        ("03", "c", (1, 30, None), None, None),  # an insert is whole: b is NULL, not the old "x"
        upd("04", 1, (None, 31, None), (False, True, False)),
    ])
    filled = fill_partial(key_events(working_changes(batch), ["id"], VALUES), stored, ["id"], VALUES).where("__silver_action = 'upsert'")
    expected = spark.createDataFrame([(1, 30, None, "03"), (1, 31, None, "04")], "id INT, a INT, b STRING, _seq STRING")
    assert_df_equality(filled.select("id", "a", "b", F.col("__silver_seq").alias("_seq")), expected, ignore_row_order=True)


def test_fill_partial_moves_the_values_along_a_chain_of_key_changes(spark):
    stored = spark.createDataFrame([(1, 10, "x"), (2, 20, "y")], VALUES)
    batch = changes(spark, [
        upd("03", 1, (None, 11, None), (False, True, False)),
        upd("04", 1, (5, None, None), (True, False, False)),  # 1 -> 5
        upd("05", 5, (6, None, "w"), (True, False, True)),  # 5 -> 6, b changes too
        upd("06", 2, (1, None, None), (True, False, False)),  # 2 -> 1 (the freed key)
        upd("07", 6, (None, 66, None), (False, True, False)),
    ])
    filled = fill_partial(key_events(working_changes(batch), ["id"], VALUES), stored, ["id"], VALUES).where("__silver_action = 'upsert'")
    expected = spark.createDataFrame(
        [(1, 11, "x", "03"), (5, 11, "x", "04"), (6, 11, "w", "05"), (1, 20, "y", "06"), (6, 66, "w", "07")],
        "id INT, a INT, b STRING, _seq STRING")
    assert_df_equality(filled.select("id", "a", "b", F.col("__silver_seq").alias("_seq")), expected, ignore_row_order=True)


def test_changes_from_bronze_flags_columns_and_gives_inserts_their_defaults(spark):
    bronze = spark.createDataFrame(
        [("01", "c", [(0, "id", "LONG", "3", None), (1, "a", "LONG", "30", None)], None),
         ("02", "u", [(1, "a", "LONG", "31", None)], [(0, "id", "LONG", "3", None)]),
         ("03", "u", [(0, "id", "LONG", "3", None), (1, "a", "LONG", "1", None), (2, "b", "VARCHAR", "q", None)],
          [(0, "id", "LONG", "3", None), (1, "a", "LONG", "31", None), (2, "b", "VARCHAR", "dflt", None)])],
        f"_seq STRING, op STRING, after {IMAGE_DDL}, before {IMAGE_DDL}",
    ).selectExpr("*", "CAST(NULL AS TIMESTAMP) AS commit_ts")
    actual = changes_from_bronze(bronze, SPECS, {"b": "dflt"}).selectExpr(
        "_seq", "after.id", "after.a", "after.b", "_present.a AS pa", "_present.b AS pb")
    expected = spark.createDataFrame([("01", 3, 30, "dflt", True, True), ("02", None, 31, None, True, False),
                                      ("03", 3, 1, "q", True, True)], actual.schema)
    assert_df_equality(actual, expected, ignore_row_order=True)


# ---------------------------------------------------------------------------------------------
# through MERGE, on each backend


def test_partial_updates_keep_the_columns_they_lack(spark, delta_backend, target):
    apply(spark, [("01", "c", (1, 10, "x"), None, None), ("02", "c", (2, 20, "y"), None, None)], target, delta_backend)
    batch = [
        upd("03", 1, (None, 11, None), (False, True, False)),
        upd("04", 1, (None, None, "x2"), (False, False, True)),
        upd("05", 2, (None, None, None), (False, False, True)),
    ]
    stats = apply(spark, batch, target, delta_backend)
    assert (stats.inserted, stats.updated, stats.deleted) == (0, 2, 0)
    expected = [row((1, 11, "x2"), "04", "u"), row((2, 20, None), "05", "u")]
    assert_table(spark, target, delta_backend, expected)
    # the same batch again (also without the watermark's help): nothing changes
    apply(spark, batch, target, delta_backend)
    assert_table(spark, target, delta_backend, expected)
    # a later batch builds on the stored row
    apply(spark, [upd("06", 1, (None, 12, None), (False, True, False))], target, delta_backend)
    assert_table(spark, target, delta_backend, [row((1, 12, "x2"), "06", "u"), row((2, 20, None), "05", "u")])


def test_partial_key_change_and_delete_then_insert(spark, delta_backend, target):
    apply(spark, [("01", "c", (1, 10, "x"), None, None), ("02", "c", (2, 20, "y"), None, None)], target, delta_backend)
    batch = [
        upd("03", 1, (3, None, None), (True, False, False)),  # 1 -> 3 keeps a and b
        ("04", "d", None, (2, None, None), None),
        ("05", "c", (2, 21, None), None, None),
        upd("06", 2, (None, None, "y2"), (False, False, True)),
    ]
    stats = apply(spark, batch, target, delta_backend)
    assert (stats.inserted, stats.updated, stats.deleted) == (1, 1, 1)
    assert_table(spark, target, delta_backend, [row((3, 10, "x"), "03", "u"), row((2, 21, "y2"), "06", "u")])


def test_partial_update_of_a_row_silver_never_saw_leaves_the_rest_null(spark, delta_backend, target):
    apply(spark, [("01", "c", (1, 10, "x"), None, None)], target, delta_backend)
    apply(spark, [upd("02", 7, (None, 70, None), (False, True, False))], target, delta_backend)
    assert_table(spark, target, delta_backend, [row((1, 10, "x"), "01", "c"), row((7, 70, None), "02", "u")])


def test_scd2_versions_carry_the_columns_a_partial_image_lacks(spark, delta_backend, target):
    apply(spark, [("01", "c", (1, 10, "x"), None, None)], target, delta_backend, scd2=True)
    apply(spark, [upd("02", 1, (None, 11, None), (False, True, False)),
                  upd("03", 1, (None, None, "x3"), (False, False, True)),
                  upd("04", 1, (2, None, None), (True, False, False))], target, delta_backend, scd2=True)

    def version(values, seq, valid_to, current, op="u"):
        until = None if valid_to is None else ts(valid_to)
        return (*values, seq, op, ts(int(seq)), False, ts(int(seq)), until, current)

    assert_table(spark, target, delta_backend, [
        version((1, 10, "x"), "01", 2, False, "c"),
        version((1, 11, "x"), "02", 3, False),
        version((1, 11, "x3"), "03", 4, False),
        version((2, 11, "x3"), "04", None, True),
    ], scd2=True)


def test_soft_deletes_and_partial_updates(spark, delta_backend, target):
    apply(spark, [("01", "c", (1, 10, "x"), None, None), ("02", "c", (2, 20, "y"), None, None)], target, delta_backend,
          delete_mode="soft")
    batch = [
        upd("03", 1, (None, 11, None), (False, True, False)),
        ("04", "d", None, (2, None, None), None),
        ("05", "c", (2, 21, None), None, None),  # revives the tombstone as a whole row
        upd("06", 2, (None, None, "y2"), (False, False, True)),
        ("07", "d", None, (1, None, None), None),
    ]
    apply(spark, batch, target, delta_backend, delete_mode="soft")
    expected = [row((1, 10, "x"), "07", "d", deleted=True), row((2, 21, "y2"), "06", "u")]
    assert_table(spark, target, delta_backend, expected)
    apply(spark, batch, target, delta_backend, delete_mode="soft")
    assert_table(spark, target, delta_backend, expected)


def test_keyless_tables_refuse_partial_images(spark, delta_backend, target):
    batch = changes(spark, [("01", "c", (1, 10, "x"), None, None)])
    apply_changes(spark, batch, SPECS, target, keys=None, backend=delta_backend)
    partial = changes(spark, [("02", "u", (None, 11, None), (1, 10, "x"), (False, True, False))])
    with pytest.raises(ValueError, match="no key"):
        apply_changes(spark, partial, SPECS, target, keys=None, backend=delta_backend)


# ---------------------------------------------------------------------------------------------
# end to end: a MariaDB server logging MINIMAL and NOBLOB images -> bronze -> silver == SELECT *

E2E_DATABASES = {"p_min": ("MINIMAL", "MINIMAL"), "p_noblob": ("NOBLOB", "FULL")}  # db: (row image, row metadata)
E2E_TABLES = ("t_p", "t_cpk", "t_nopk")
E2E_DDL = """
CREATE TABLE t_p (id INT NOT NULL PRIMARY KEY, a INT, b VARCHAR(20) DEFAULT 'dflt', c TEXT, d BLOB,
  e DATETIME(3) DEFAULT '2001-01-01 00:00:00', n INT NOT NULL DEFAULT 7, ts TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP);
CREATE TABLE t_cpk (k1 INT NOT NULL, k2 VARCHAR(10) NOT NULL, v INT, w TEXT, PRIMARY KEY (k1, k2));
CREATE TABLE t_nopk (a INT, b TEXT, c VARCHAR(5) DEFAULT 'cd');
"""
E2E_PHASES = [
    E2E_DDL + """
INSERT INTO t_p VALUES (1, 10, 'b1', 'c1', X'D1', '2020-01-01 01:01:01.001', 1, '2020-01-01 00:00:00'),
                       (2, 20, 'b2', 'c2', X'D2', '2020-02-02 02:02:02.002', 2, '2020-01-01 00:00:00');
INSERT INTO t_p (id, a) VALUES (3, 30);
INSERT INTO t_p (id) VALUES (4);
START TRANSACTION;
UPDATE t_p SET a = 11 WHERE id = 1;
UPDATE t_p SET c = 'c1x' WHERE id = 1;
UPDATE t_p SET a = 12, d = NULL WHERE id = 1;
COMMIT;
UPDATE t_p SET id = 33 WHERE id = 3;
UPDATE t_p SET id = 300 WHERE id = 33;
UPDATE t_p SET b = 'moved' WHERE id = 300;
UPDATE t_p SET id = -1 WHERE id = 1;
UPDATE t_p SET id = 1 WHERE id = 2;
UPDATE t_p SET id = 2, e = '2022-02-22 22:22:22.222' WHERE id = -1;
DELETE FROM t_p WHERE id = 4;
INSERT INTO t_p (id, c) VALUES (4, 'again');
UPDATE t_p SET n = n + 1 WHERE id = 4;
UPDATE t_p SET c = REPEAT('x', 100) WHERE id IN (1, 2);
INSERT INTO t_cpk VALUES (1, 'a', 1, 'w1'), (1, 'b', 2, 'w2'), (2, 'a', 3, NULL);
UPDATE t_cpk SET v = v + 10 WHERE k1 = 1;
UPDATE t_cpk SET k2 = 'z' WHERE k1 = 2;
UPDATE t_cpk SET w = 'changed' WHERE k1 = 2 AND k2 = 'z';
DELETE FROM t_cpk WHERE k1 = 1 AND k2 = 'b';
INSERT INTO t_nopk VALUES (1, 'x', 'c'), (2, 'y', 'd'), (2, 'y', 'd');
UPDATE t_nopk SET b = 'yy' WHERE a = 2 LIMIT 1;
DELETE FROM t_nopk WHERE a = 1;
INSERT INTO t_nopk (a) VALUES (5);
""",
    """
UPDATE t_p SET a = a + 100 WHERE id = 1;
UPDATE t_p SET e = '2030-03-03 03:03:03.333' WHERE id = 1;
UPDATE t_p SET id = 10 WHERE id = 300;
UPDATE t_p SET d = X'BEEF' WHERE id = 10;
UPDATE t_p SET b = NULL, n = 0 WHERE id = 4;
UPDATE t_cpk SET v = NULL WHERE k1 = 1;
UPDATE t_cpk SET k1 = 5 WHERE k2 = 'z';
UPDATE t_nopk SET c = 'new' WHERE a = 5;
""",
]


def _e2e_phase(srv, script: str, first: bool) -> None:
    for db, (image, meta) in E2E_DATABASES.items():
        srv.sql(f"SET GLOBAL binlog_row_image = {image}; SET GLOBAL binlog_row_metadata = {meta}")  # next sessions
        if first:
            srv.sql(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
        srv.sql(script, db=db)
    srv.flush_logs()


def _e2e_differences(srv, warehouse) -> list[str]:
    from oracle import _diff, server_columns, server_rows, silver_rows

    problems = []
    for db in E2E_DATABASES:
        for table in E2E_TABLES:
            cols = server_columns(srv, db, table)
            want, got = server_rows(srv, db, table, cols), silver_rows(warehouse, db, table, cols) or []
            if got != want:
                problems.append(_diff(f"{db}.{table}", cols, want, got))
    return problems


@pytest.mark.slow
def test_minimal_and_noblob_images_reach_silver_equal_to_the_server(spark, tmp_path):  # noqa: F811
    from mariadb_server import MariaDBServer, mariadb_available
    from oracle import copy_binlogs
    from test_e2e_pipeline import _cfg

    from pipelines import bronze
    from pipelines.silver import step as silver_step

    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    binlogs, warehouse = tmp_path / "binlogs", tmp_path / "warehouse"
    with MariaDBServer(tmp_path / "mariadb", row_image="MINIMAL", row_metadata="MINIMAL") as srv:
        for i, script in enumerate(E2E_PHASES):
            _e2e_phase(srv, script, first=i == 0)
            copy_binlogs(srv, binlogs)
            cfg = _cfg(binlogs, warehouse)
            assert bronze.run(spark, cfg).quarantined == 0
            s = silver_step.run(spark, cfg)
            assert s.status == "ok" and s.quarantined == 0, s.summary()
            problems = _e2e_differences(srv, warehouse)
            assert not problems, f"after phase {i + 1}:\n" + "\n\n".join(problems)
        # the same input again: nothing to do
        bronze.run(spark, cfg)
        assert silver_step.run(spark, cfg).segments == 0
        assert not _e2e_differences(srv, warehouse)
