"""pipelines.sql: SQL over a warehouse's Delta tables, in-process and as ``python -m pipelines.sql``.

The warehouses are small real Delta tables written with delta-rs under ``tmp_path``.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from spark_fixtures import in_ci, require_delta_spark, spark  # noqa: F401  (the shared session fixture)

from pipelines import delta_jars, sql
from pipelines.paths import silver_table_path

REPO = Path(__file__).resolve().parents[1]
UTC = dt.timezone.utc
VALUE = pa.struct([("name", pa.string()), ("text", pa.string()), ("bin", pa.binary())])


def _write(path, table: pa.Table) -> None:
    write_deltalake(str(path), table, mode="overwrite")


@pytest.fixture
def warehouse(tmp_path) -> Path:
    """bronze/binlog_changes, two silver tables (one with an escaped name) and a _pipeline table."""
    wh = tmp_path / "wh"
    _write(wh / "bronze" / "binlog_changes", pa.table({
        "_seq": ["00000000010000000000004000000000", "00000000010000000000004000000001",
                 "00000000010000000000009000000000"],
        "db": ["shop", "shop", "shop"],
        "table": ["orders", "orders", "orders"],
        "op": ["c", "c", "u"],
        "after": pa.array([
            [{"name": "id", "text": "1", "bin": None}],
            [{"name": "id", "text": "2", "bin": None}],
            [{"name": "id", "text": "1", "bin": b"\x00\xff"}],
        ], pa.list_(VALUE)),
    }))
    _write(silver_table_path(wh, "shop", "orders"), pa.table({
        "id": pa.array([1, 2], pa.int64()),
        "total": pa.array([Decimal("9.50"), None], pa.decimal128(10, 2)),
        "updated_at": pa.array([dt.datetime(2024, 5, 1, 12, 0, tzinfo=UTC), dt.datetime(2024, 5, 1, 12, 30, tzinfo=UTC)],
                               pa.timestamp("us", tz="UTC")),
    }))
    _write(silver_table_path(wh, "shop", "order/items"), pa.table({
        "order_id": pa.array([1, 1, 2], pa.int64()),
        "sku": ["a", "b", "a"],
    }))
    _write(wh / "_pipeline" / "offsets", pa.table({"file": ["binlog.000001"], "pos": pa.array([4], pa.int64())}))
    return wh


@pytest.fixture
def config(tmp_path, warehouse) -> Path:
    """A config whose warehouse is the fixture's and which names no Delta jars (so: delta-rs)."""
    cfg = tmp_path / "conf" / "pipeline.yaml"
    cfg.parent.mkdir()
    cfg.write_text("input: ../binlogs\nwarehouse: ../wh\ndelta:\n  backend: auto\n  packages: []\n")
    return cfg


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (sql.WAREHOUSE_ENV, sql.DELTA_JARS_ENV)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    env.update(extra)
    return env


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines.sql", *args], cwd=REPO, env=env or _env(),
                          capture_output=True, text=True, timeout=120)


# -- names -------------------------------------------------------------------------


def test_discover_tables_names_every_table_two_ways(warehouse):
    got = [(t.name, t.qualified, os.path.relpath(t.path, warehouse)) for t in sql.discover_tables(warehouse)]
    assert got == [
        ("_pipeline_offsets", "_pipeline.offsets", "_pipeline/offsets"),
        ("bronze_binlog_changes", "bronze.binlog_changes", "bronze/binlog_changes"),
        ("silver_shop_order_items", "silver.shop.order/items", "silver/shop/order~2Fitems"),
        ("silver_shop_orders", "silver.shop.orders", "silver/shop/orders"),
    ]


def test_plain_name_clash_leaves_only_the_qualified_names(tmp_path):
    wh = tmp_path / "wh"
    _write(silver_table_path(wh, "a_b", "c"), pa.table({"v": [1]}))
    _write(silver_table_path(wh, "a", "b_c"), pa.table({"v": [2]}))
    tables = sql.discover_tables(wh)
    assert [(t.name, t.qualified) for t in tables] == [(None, "silver.a.b_c"), (None, "silver.a_b.c")]
    assert sql.query("SELECT v FROM `silver.a_b.c`", wh, engine="rs").to_pylist() == [{"v": 1}]
    assert sql.query("SELECT v FROM `silver.a.b_c`", wh, engine="rs").to_pylist() == [{"v": 2}]


def test_names_differing_only_in_case_keep_their_case(tmp_path):
    wh = tmp_path / "wh"
    _write(silver_table_path(wh, "Shop", "t"), pa.table({"v": [1]}))
    _write(silver_table_path(wh, "shop", "t"), pa.table({"v": [2]}))
    assert [(t.name, t.qualified) for t in sql.discover_tables(wh)] == [(None, "silver.Shop.t"), (None, "silver.shop.t")]
    assert sql.query("SELECT v FROM `silver.Shop.t`", wh, engine="rs").to_pylist() == [{"v": 1}]
    assert sql.query("SELECT v FROM `silver.shop.t`", wh, engine="rs").to_pylist() == [{"v": 2}]


def test_upper_case_mysql_names_are_queried_in_lower_case(tmp_path):
    wh = tmp_path / "wh"
    _write(silver_table_path(wh, "Shop", "Orders"), pa.table({"v": [7]}))
    assert sql.query("SELECT v FROM silver_shop_orders", wh, engine="rs").to_pylist() == [{"v": 7}]
    assert sql.query("SELECT v FROM `silver.shop.orders`", wh, engine="rs").to_pylist() == [{"v": 7}]


def test_remote_warehouse_is_not_a_local_folder():  # (it is listed through pyarrow: test_remote_warehouse.py)
    assert sql.local_warehouse("s3a://bucket/wh") is None and sql.local_warehouse("hdfs://nn:8020/wh") is None


def test_file_uri_warehouse_is_a_local_folder(warehouse):
    assert len(sql.discover_tables(f"file://{warehouse}")) == 4


# -- queries with delta-rs -----------------------------------------------------------


def test_plain_and_qualified_names_read_the_same_table(warehouse):
    plain = sql.query("SELECT id, total FROM silver_shop_orders ORDER BY id", warehouse, engine="rs")
    qualified = sql.query("SELECT id, total FROM `silver.shop.orders` ORDER BY id", warehouse, engine="rs")
    assert plain.to_pylist() == [{"id": 1, "total": Decimal("9.50")}, {"id": 2, "total": None}]
    assert qualified.equals(plain)


def test_join_across_bronze_silver_and_escaped_names(warehouse):
    result = sql.query(
        "SELECT o.id, count(*) AS items, max(b._seq) AS last_seq "
        "FROM silver_shop_orders o "
        "JOIN `silver.shop.order/items` i ON i.order_id = o.id "
        "JOIN bronze_binlog_changes b ON b.`table` = 'orders' AND b.db = 'shop' "
        "GROUP BY o.id ORDER BY o.id",
        warehouse, engine="rs",
    )
    assert result.to_pylist() == [
        {"id": 1, "items": 2 * 3, "last_seq": "00000000010000000000009000000000"},
        {"id": 2, "items": 1 * 3, "last_seq": "00000000010000000000009000000000"},
    ]


def test_bronze_nested_values_come_back_intact(warehouse):
    result = sql.query("SELECT after FROM `bronze.binlog_changes` WHERE op = 'u'", warehouse, engine="rs")
    assert result.to_pylist() == [{"after": [{"name": "id", "text": "1", "bin": b"\x00\xff"}]}]


def test_auto_without_delta_jars_uses_delta_rs(warehouse, monkeypatch):
    monkeypatch.delenv(sql.DELTA_JARS_ENV, raising=False)
    assert sql.query("SELECT count(*) AS n FROM _pipeline_offsets", warehouse).to_pylist() == [{"n": 1}]


def test_bad_arguments_fail_fast(warehouse):
    with pytest.raises(ValueError, match="engine must be one of auto | spark | rs, got 'duck'"):
        sql.query("SELECT 1", warehouse, engine="duck")
    with pytest.raises(ValueError, match="needs an SQL statement"):
        sql.query("  ", warehouse, engine="rs")
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        sql.query("SELECT 1", warehouse / "missing", engine="rs")


# -- rendering ---------------------------------------------------------------------


RESULT = pa.table({
    "id": pa.array([1, 22], pa.int64()),
    "name": ["a,b", None],
    "amount": pa.array([Decimal("1.50"), Decimal("-3.00")], pa.decimal128(5, 2)),
    "raw": pa.array([b"\x01", None], pa.binary()),
    "at": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), None], pa.timestamp("us", tz="UTC")),
})


def test_render_table_aligns_columns_and_shows_nulls():
    assert sql.render(RESULT, "table") == (
        "id | name | amount | raw  | at\n"
        "---+------+--------+------+--------------------------\n"
        " 1 | a,b  |   1.50 | 0x01 | 2024-01-02T03:04:05+00:00\n"
        "22 | NULL |  -3.00 | NULL | NULL\n"
        "(2 rows)\n"
    )


def test_render_csv_quotes_and_leaves_nulls_empty():
    assert sql.render(RESULT, "csv") == (
        "id,name,amount,raw,at\n"
        '1,"a,b",1.50,0x01,2024-01-02T03:04:05+00:00\n'
        "22,,-3.00,,\n"
    )


def test_render_json_keeps_exact_values():
    rows = [{"id": 1, "name": "a,b", "amount": "1.50", "raw": {"hex": "01"}, "at": "2024-01-02T03:04:05+00:00"},
            {"id": 22, "name": None, "amount": "-3.00", "raw": None, "at": None}]
    assert json.loads(sql.render(RESULT, "json")) == rows
    assert [json.loads(line) for line in sql.render(RESULT, "jsonl").splitlines()] == rows


def test_render_empty_result_keeps_the_header():
    assert sql.render(RESULT.slice(0, 0), "table").splitlines()[-1] == "(0 rows)"
    assert sql.render(RESULT.slice(0, 0), "csv") == "id,name,amount,raw,at\n"


# -- command line --------------------------------------------------------------------


def test_cli_subprocess_csv(warehouse):
    r = _cli("--warehouse", str(warehouse), "--engine", "rs", "--format", "csv",
             "SELECT id, total, updated_at FROM `silver.shop.orders` ORDER BY id")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "id,total,updated_at\n1,9.50,2024-05-01T12:00:00+00:00\n2,,2024-05-01T12:30:00+00:00\n"


def test_cli_auto_engine_never_imports_pyspark(config):
    code = ("import sys; from pipelines.sql import main; "
            f"rc = main(['--config', {str(config)!r}, 'SELECT count(*) AS n FROM bronze_binlog_changes']); "
            "assert 'pyspark' not in sys.modules, 'pyspark was imported'; sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "n\n-\n3\n(1 row)\n"


def test_cli_warehouse_from_environment(warehouse, config):
    r = _cli("--config", str(config), "--format", "jsonl", "SELECT pos FROM `_pipeline.offsets`",
             env=_env(**{sql.WAREHOUSE_ENV: str(warehouse)}))
    assert r.returncode == 0, r.stderr
    assert r.stdout == '{"pos": 4}\n'


def test_cli_flag_wins_over_environment(tmp_path, warehouse, config):
    other = tmp_path / "other"
    _write(other / "bronze" / "binlog_changes", pa.table({"op": ["d"]}))
    r = _cli("--config", str(config), "--warehouse", str(other), "--format", "csv",
             "SELECT op FROM bronze_binlog_changes", env=_env(**{sql.WAREHOUSE_ENV: str(warehouse)}))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "op\nd\n"


def test_cli_in_process_list_and_config_warehouse(config, capsys, monkeypatch):
    monkeypatch.delenv(sql.WAREHOUSE_ENV, raising=False)
    assert sql.main(["--config", str(config), "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split(" | ")[:2] == ["name                   ", "qualified                "]
    assert [line.split(" | ")[0].strip() for line in lines[2:-1]] == [
        "_pipeline_offsets", "bronze_binlog_changes", "silver_shop_order_items", "silver_shop_orders"]
    assert lines[-1] == "(4 rows)"


def test_cli_in_process_query(warehouse, capsys):
    rc = sql.main(["--warehouse", str(warehouse), "--engine", "rs",
                   "SELECT op, count(*) AS n FROM bronze_binlog_changes GROUP BY op ORDER BY op"])
    assert rc == 0
    assert capsys.readouterr().out == "op | n\n---+--\nc  | 2\nu  | 1\n(2 rows)\n"


def test_cli_errors_have_exit_codes_and_messages(warehouse, tmp_path):
    r = _cli("--warehouse", str(warehouse), "--engine", "rs", "SELECT * FROM nope")
    assert (r.returncode, r.stdout) == (1, "")
    assert "nope" in r.stderr and r.stderr.startswith("error: ")
    r = _cli("--warehouse", str(tmp_path / "missing"), "SELECT 1")
    assert r.returncode == 2 and "is not a folder" in r.stderr
    r = _cli("--warehouse", str(warehouse))
    assert r.returncode == 2 and "give an SQL statement" in r.stderr
    r = _cli("--warehouse", "s3a://bucket/wh", "SELECT 1")  # (no S3 settings, no network: one line)
    assert r.returncode == 2 and r.stderr.startswith("error: cannot list the warehouse's tables: ")
    assert r.stderr.count("\n") == 1


def test_cli_name_clash_warns_on_stderr(tmp_path):
    wh = tmp_path / "wh"
    _write(silver_table_path(wh, "a_b", "c"), pa.table({"v": [1]}))
    _write(silver_table_path(wh, "a", "b_c"), pa.table({"v": [2]}))
    r = _cli("--warehouse", str(wh), "--engine", "rs", "--format", "csv", "SELECT v FROM `silver.a.b_c`")
    assert (r.returncode, r.stdout) == (0, "v\n2\n")
    assert "warning: `silver.a.b_c` has no plain name: another table maps to 'silver_a_b_c'" in r.stderr


# -- Spark SQL -----------------------------------------------------------------------


@pytest.mark.spark
def test_spark_engine_with_delta_spark(warehouse, spark):
    require_delta_spark(spark)
    tables = sql.discover_tables(warehouse)
    plain = sql.run("SELECT id, total FROM silver_shop_orders ORDER BY id", tables, engine="spark", spark=spark)
    qualified = sql.run("SELECT id, total FROM `silver.shop.orders` ORDER BY id", tables, engine="spark", spark=spark)
    assert plain.to_pylist() == [{"id": 1, "total": Decimal("9.50")}, {"id": 2, "total": None}]
    assert qualified.to_pylist() == plain.to_pylist()


_PLAIN_SESSION = """
import sys
from pipelines import sql
from pipelines.spark_session import build_session, delta_spark_available
spark = build_session(app_name="test-sql-plain")          # no delta=True: plain Spark
assert not delta_spark_available(spark), "a plain session has delta-spark"
tables = sql.discover_tables(sys.argv[1])
print(sql.run("SELECT count(*) AS n FROM silver_shop_orders", tables, engine="auto", spark=spark).to_pylist())
try:
    sql.run("SELECT 1", tables, engine="spark", spark=spark)
except RuntimeError as e:
    print("refused:", e)
spark.stop()
"""


@pytest.mark.spark
def test_session_without_delta_spark(warehouse):
    # its own process: the suite's session has delta-spark, and a JVM's classpath is fixed
    r = subprocess.run([sys.executable, "-c", _PLAIN_SESSION, str(warehouse)], cwd=REPO, env=_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert lines[0] == "[{'n': 2}]"  # answered by delta-rs
    assert "no delta-spark on its classpath" in lines[1]


@pytest.mark.spark
def test_cli_spark_engine_finds_the_fetched_jars(warehouse, config):
    # no DELTA_JARS, no delta.packages: the jars make setup fetched into jars/ are used
    if not delta_jars.find_jars():
        if in_ci():
            pytest.fail("CI=true: the delta-spark jars are missing from jars/ (make setup fetches them)")
        pytest.skip("the delta-spark jars are missing from jars/ (run make setup)")
    r = _cli("--config", str(config), "--engine", "spark", "--format", "csv",
             "SELECT id FROM `silver.shop.orders` ORDER BY id", env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == "id\n1\n2\n"
