"""The tools over a warehouse on S3: ``python -m pipelines.sql --engine rs``, ``python -m
pipelines.quarantine`` and ``python -m pipelines.status`` reach a private S3 server (moto's) with the Hadoop options of the
configuration's ``spark.conf`` alone: their environment has no ``AWS_*`` variable.

(``--engine spark`` over S3 needs the hadoop-aws jars on Spark's classpath, which this suite's
Spark does not have yet: it is not run here.)
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from pipelines import delta_io, sql, state, storage
from pipelines.binlog.txindex import scan
from s3_server import environment_without_aws

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "samples" / "binlogs" / "binlog.000001"

ID_OP = pa.schema([("id", pa.int64()), ("op", pa.string())])  # a small table's layout
ID_V = pa.schema([("id", pa.int64()), ("v", pa.string())])  # a small table's layout


@pytest.fixture
def s3_wh(s3_server, tmp_path, no_aws_env, monkeypatch):
    """``(server, s3a warehouse URI, config file)``: a new bucket, and a configuration whose
    ``spark.conf`` holds the S3A options that reach it; this process uses the same settings."""
    monkeypatch.setattr(storage, "_current", [storage.NO_SETTINGS])
    storage.use(storage.from_spark_conf(s3_server.spark_conf()))
    bucket = s3_server.bucket()
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump({"input": "binlogs", "warehouse": "wh", "delta": {"backend": "rs"},
                                      "spark": {"conf": s3_server.spark_conf()}}))
    return s3_server, f"s3a://{bucket}/wh", config


def _tool(module: str, *args: str) -> subprocess.CompletedProcess:
    env = environment_without_aws()
    env["PYTHONPATH"] = str(REPO)
    env.pop(sql.WAREHOUSE_ENV, None)
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=180)


def _rows(layout, **values) -> list[tuple]:
    """One row of a table's layout: the named columns, None elsewhere."""
    return [tuple(values.get(name) for name in layout.names)]


def test_sql_rs_engine_lists_and_queries_an_s3_warehouse(s3_wh):
    _server, wh, config = s3_wh
    delta_io.open_table(f"{wh}/bronze/binlog_changes", "rs").append_rows([(1, "c"), (2, "u")], ID_OP)
    delta_io.open_table(f"{wh}/silver/shop/orders", "rs").append_rows([(1, "ok")], ID_V)

    listed = _tool("pipelines.sql", "--config", str(config), "--warehouse", wh, "--list")
    assert listed.returncode == 0, listed.stderr
    assert f"{wh}/silver/shop/orders" in listed.stdout and "silver_shop_orders" in listed.stdout

    r = _tool("pipelines.sql", "--config", str(config), "--warehouse", wh, "--engine", "rs", "--format", "csv",
              "SELECT b.op, s.v FROM bronze_binlog_changes b JOIN `silver.shop.orders` s ON b.id = s.id")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "op,v\nc,ok\n"


def test_sql_in_process_over_s3_uses_the_process_settings(s3_wh):
    _server, wh, _config = s3_wh
    delta_io.open_table(f"{wh}/_pipeline/runs", "rs").append_rows([(7,)], pa.schema([("n", pa.int64())]))
    assert [t.qualified for t in sql.discover_tables(wh)] == ["_pipeline.runs"]
    assert sql.query("SELECT n FROM _pipeline_runs", wh, engine="rs").to_pylist() == [{"n": 7}]


def test_sql_on_a_missing_s3_warehouse_fails_in_one_line(s3_wh):
    _server, wh, config = s3_wh
    r = _tool("pipelines.sql", "--config", str(config), "--warehouse", wh + "-none", "--list")
    assert r.returncode == 2 and r.stderr.startswith("error: warehouse ") and r.stderr.count("\n") == 1


def test_quarantine_lists_and_redecodes_from_s3(s3_wh):
    server, wh, config = s3_wh
    data = SAMPLE.read_bytes()
    bucket = wh.split("/")[2]
    server.client().put_object(Bucket=bucket, Key="binlogs/binlog.000001", Body=data)
    tx = scan(data).transactions[1]
    delta_io.open_table(f"{wh}/_pipeline/quarantine", "rs").append_rows(
        _rows(state.QUARANTINE_LAYOUT, file="binlog.000001", file_seq=1, offset=tx.begin_pos,
              reason="binlog.000001: offset 1: made up", error_class="CorruptEvent",
              decoder_version="0", raw=data[tx.begin_pos:tx.end_pos], batch=1),
        state.QUARANTINE_LAYOUT)
    delta_io.open_table(f"{wh}/_pipeline/manifest", "rs").append_rows(
        _rows(state.MANIFEST_LAYOUT, name="binlog.000001", file_seq=1, batch=1,
              path=f"s3a://{bucket}/binlogs/binlog.000001", phase="committed"),
        state.MANIFEST_LAYOUT)

    listed = _tool("pipelines.quarantine", "list", "--config", str(config), "--warehouse", wh)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"CorruptEvent\tbinlog\t1 row(s)\n"
                                    f"  binlog.000001\t{tx.begin_pos}\tCorruptEvent\t0\t{tx.end_pos - tx.begin_pos} B")

    again = _tool("pipelines.quarantine", "redecode", "--config", str(config), "--warehouse", wh)
    assert again.returncode == 0, again.stderr  # the format description was read from S3
    assert f"binlog.000001\t{tx.begin_pos}\tCorruptEvent\tok\t" in again.stdout


def test_quarantine_without_the_settings_cannot_reach_s3(s3_wh, tmp_path):
    _server, wh, _config = s3_wh
    bare = tmp_path / "bare.yaml"
    bare.write_text("input: binlogs\nwarehouse: wh\n")
    r = _tool("pipelines.quarantine", "list", "--config", str(bare), "--warehouse", wh)
    assert r.returncode == 2 and r.stderr.startswith(f"error: warehouse {wh} ")


def test_status_of_an_s3_warehouse(s3_wh):
    """``python -m pipelines.status`` over S3, with the config's settings alone: the table's last
    change (watermark, then bronze's row at it), the manifest, and the input's files waiting."""
    import datetime as dt
    import json

    from pipelines.bronze.schema import BRONZE_LAYOUT, seq_key
    from pipelines.paths import silver_table_path

    server, wh, config = s3_wh
    bucket = wh.split("/")[2]
    for name in ("binlog.000001", "binlog.000002"):
        server.client().put_object(Bucket=bucket, Key=f"binlogs/{name}", Body=SAMPLE.read_bytes())
    seq, ts = seq_key(1, 1234, 0), dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
    delta_io.open_table(f"{wh}/bronze/binlog_changes", "rs").append_rows(
        _rows(BRONZE_LAYOUT, source_file="binlog.000001", file_seq=1, event_pos=1234, _seq=seq,
              gtid="0-1-7", commit_ts=ts, db="shop", table="orders", op="c"),
        BRONZE_LAYOUT)
    delta_io.open_table(f"{wh}/_pipeline/silver_watermarks", "rs").append_rows(
        _rows(state.WATERMARKS_LAYOUT, db="shop", table="orders", max_seq=seq, rows=1, run_id="r1", updated_at=ts),
        state.WATERMARKS_LAYOUT)
    delta_io.open_table(f"{wh}/_pipeline/manifest", "rs").append_rows(
        _rows(state.MANIFEST_LAYOUT, name="binlog.000001", file_seq=1, batch=0, status="done",
              phase="committed", size=SAMPLE.stat().st_size, complete_until=SAMPLE.stat().st_size),
        state.MANIFEST_LAYOUT)
    delta_io.open_table(silver_table_path(wh, "shop", "orders"), "rs").append_rows([(1, "ok")], ID_V)

    r = _tool("pipelines.status", "--config", str(config), "--warehouse", wh, "--input", f"s3a://{bucket}/binlogs",
              "--format", "json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert [(t["name"], t["position"], t["gtid"], t["commit_ts"], t["rows"]) for t in got["tables"]] == [
        ("shop.orders", "binlog.000001:1234", "0-1-7", "2026-01-02T03:04:05+00:00", 1)]
    assert got["files"]["by_status"] == {"done": 1}
    assert got["files"]["waiting"] == [{"name": "binlog.000002", "why": "new"}]
