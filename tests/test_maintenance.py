"""Maintenance (compact, checkpoint + log cleanup, VACUUM) on both backends, on a warehouse that a
private MariaDB's binlogs built over several runs: it never changes what bronze or silver return,
it shrinks what lies on disk, the pipeline's own state (bronze's transaction ids, silver's
watermarks) survives log cleanup, and the runs after it are still exactly-once (silver equals the
server; a re-run changes nothing)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from oracle import copy_binlogs, server_columns, server_rows, silver_rows
from spark_fixtures import require_delta_spark, spark  # noqa: F401  (the shared session fixture)

from pipelines import bronze, delta_io, maintenance, silver
from pipelines.silver import step as silver_step
from pipelines.config import load_config
from pipelines.delta_io.upkeep import storage
from pipelines.paths import silver_table_path
from pipelines.state import WATERMARKS

pytestmark = [pytest.mark.mariadb, pytest.mark.spark]

REPO = Path(__file__).resolve().parents[1]
TABLES = ("k", "bag")
SETUP = "CREATE TABLE k (id INT PRIMARY KEY, v VARCHAR(20), n INT); CREATE TABLE bag (a INT, b VARCHAR(10));"


def phase(i: int) -> str:
    ids = range(10 * i, 10 * i + 6)
    return (
        "INSERT INTO k VALUES " + ", ".join(f"({j}, 'v{j}', {j})" for j in ids) + ";"
        + f"UPDATE k SET n = n + 100, v = 'u{i}' WHERE id % 3 = {i % 3};"
        + f"DELETE FROM k WHERE id = {10 * i + 1};"
        + f"INSERT INTO bag VALUES ({i}, 'x'), ({i}, 'x'), ({i + 1}, 'y');"
        + f"DELETE FROM bag WHERE a = {i} LIMIT 1;"
    )


@pytest.fixture
def server(tmp_path):
    from mariadb_server import MariaDBServer, mariadb_available

    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    srv = MariaDBServer(tmp_path / "mariadb", row_metadata="FULL").start()
    srv.sql("CREATE DATABASE m")
    srv.sql(SETUP, db="m")
    yield srv
    srv.stop()


def _run(spark, cfg, srv, binlogs: Path, script: str | None) -> None:  # noqa: F811
    if script:
        srv.sql(script, db="m")
    srv.flush_logs()
    copy_binlogs(srv, binlogs)
    assert bronze.run(spark, cfg).status == "ok"
    assert silver_step.run(spark, cfg).status == "ok"


def _silver_equals_server(srv, warehouse: Path) -> dict:
    got = {}
    for t in TABLES:
        cols = server_columns(srv, "m", t)
        got[t] = silver_rows(warehouse, "m", t, cols)
        assert got[t] == server_rows(srv, "m", t, cols), t
    return got


def _bronze_rows(cfg) -> list[dict]:
    return sorted(delta_io.open_table(cfg.warehouse_path("bronze/binlog_changes")).read_arrow().to_pylist(),
                  key=lambda r: r["_seq"])


def _age_logs(warehouse: Path, days: float = 2) -> None:
    """Make every log file look ``days`` old (log cleanup goes by file age)."""
    past = time.time() - days * 86400
    for log in warehouse.rglob("_delta_log"):
        for f in log.iterdir():
            os.utime(f, (past, past))


@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_maintenance_keeps_results_and_runs_stay_exactly_once(spark, server, tmp_path, backend):  # noqa: F811
    if backend == "spark":
        require_delta_spark(spark)
    binlogs, warehouse = tmp_path / "binlogs", tmp_path / "wh"
    settings = {"input": str(binlogs), "warehouse": str(warehouse), "progress": False, "delta.backend": backend,
                "maintenance": {"retention_hours": 0, "log_retention_hours": 0, "compact_min_files": 1,
                                "every_runs": 2}}
    cfg = load_config(None, settings)
    for i in range(3):
        _run(spark, cfg, server, binlogs, phase(i) if i else None)
    silver_before = _silver_equals_server(server, warehouse)
    bronze_before = _bronze_rows(cfg)
    k_path = silver_table_path(str(warehouse), "m", "k")
    bronze_path = cfg.warehouse_path("bronze/binlog_changes")
    marks = {t: silver.read_watermark(silver_table_path(str(warehouse), "m", t)) for t in TABLES}
    txn = delta_io.open_table(bronze_path).last_txn(bronze.TXN_APP_ID)
    k_before, b_before = storage(k_path), storage(bronze_path)
    assert k_before.disk_files >= 2 and k_before.checkpoints == 0  # MERGEs leave old files behind
    assert b_before.files >= 2  # bronze: a small file per run with rows
    assert maintenance.due(spark, cfg)  # two silver runs since none
    wm_path = cfg.pipeline_path(WATERMARKS)
    wm_before = silver_step.read_watermarks(spark, cfg)
    wm_rows = len(delta_io.open_table(wm_path).read_arrow())
    assert wm_rows > 2 * len(wm_before)  # rows per table (and the read-through mark) per run

    _age_logs(warehouse)
    if backend == "rs":  # the job, as a schedule runs it
        conf = tmp_path / "maintain.yaml"
        conf.write_text(f"input: {binlogs}\nwarehouse: {warehouse}\nprogress: false\n"
                        "maintenance: {log_retention_hours: 0, compact_min_files: 1}\n")
        r = subprocess.run([sys.executable, str(REPO / "jobs" / "maintain.py"), "--config", str(conf),
                            "--delta-backend", "rs", "--retention-hours", "0"],
                           capture_output=True, text=True, timeout=600, cwd=REPO)
        assert r.returncode == 0, r.stderr[-3000:]
        line = next(x for x in r.stdout.splitlines() if x.startswith("maintenance run"))
    else:
        line = maintenance.run(spark, cfg).summary()
    assert " ok: " in line and "vacuumed" in line and "kept: every file of the current snapshots" in line, line
    assert f"silver watermarks folded to one row per table ({wm_rows - len(wm_before)} row(s) removed)" in line, line
    assert silver_step.read_watermarks(spark, cfg) == wm_before
    assert len(delta_io.open_table(wm_path).read_arrow()) == len(wm_before)

    # nothing a query returns changed
    assert _bronze_rows(cfg) == bronze_before
    assert _silver_equals_server(server, warehouse) == silver_before
    # what lies on disk shrank to what is live; the logs start at a checkpoint
    k_after = storage(k_path)
    assert k_after.files == 1 and k_after.disk_files == 1 and k_after.disk_bytes == k_after.live_bytes
    assert k_after.checkpoints >= 1
    b_after = storage(bronze_path)
    assert b_after.files == 1 and b_after.disk_files == 1  # compacted, the small files vacuumed
    assert not (Path(k_path) / "_delta_log" / "00000000000000000000.json").exists()
    assert not (Path(bronze_path) / "_delta_log" / "00000000000000000000.json").exists()
    # the pipeline's state is read from the snapshot: it survived log cleanup
    for b in ("rs", "spark") if backend == "spark" else ("rs",):
        assert delta_io.open_table(bronze_path, b, spark).last_txn(bronze.TXN_APP_ID) == txn
    assert {t: silver.read_watermark(silver_table_path(str(warehouse), "m", t)) for t in TABLES} == marks
    assert not maintenance.due(spark, cfg)

    # the runs after it are exactly-once: new changes land once, a re-run changes nothing
    _run(spark, cfg, server, binlogs, phase(3) + "UPDATE k SET v = 'late' WHERE id = 2;")
    after = _silver_equals_server(server, warehouse)
    assert bronze.run(spark, cfg).files == 0 and silver_step.run(spark, cfg).segments == 0
    assert _silver_equals_server(server, warehouse) == after
    assert maintenance.due(spark, cfg)  # every_runs: 2 (the re-run's silver step counts too)
