"""pipelines.status: the state of a warehouse built by the real bronze and silver steps from the
sample binlogs (real MariaDB files), on each Delta backend, read back with delta-rs and no Spark.

Issue 36, finding 9: there was no status command; ``_pipeline/manifest`` shows each file two to
four times; ``_pipeline/runs`` reuses bronze's columns for silver (``files`` counts tables).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import deltalake
import pytest

from spark_fixtures import delta_backend, spark  # noqa: F401  (the shared session fixture)

from pipelines import bronze, faults, state, status
from pipelines.config import load_config
from pipelines.silver import step as silver_step

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "binlogs"
UTC = dt.timezone.utc


def _rows(path) -> list[dict]:
    return deltalake.DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def test_status_of_a_warehouse(spark, delta_backend, tmp_path):  # noqa: F811
    folder = tmp_path / "binlogs"
    folder.mkdir()
    for name in ("binlog.000001", "binlog.000002", "binlog.000003"):
        shutil.copyfile(SAMPLES / name, folder / name)
    cfg = load_config(None, {"input": str(folder), "warehouse": str(tmp_path / "wh"), "progress": False,
                             "delta.backend": delta_backend})
    b = bronze.run(spark, cfg)
    s = silver_step.run(spark, cfg)
    assert b.status == s.status == "ok"

    now = dt.datetime(2030, 1, 1, tzinfo=UTC)
    st = status.gather(cfg.warehouse, input=str(folder), now=now)

    # per source table: the last change applied is bronze's last row of the table (found here
    # from bronze itself), with its position, GTID, source commit time and the lag to `now`
    last: dict[str, dict] = {}
    for r in _rows(cfg.warehouse_path("bronze/binlog_changes")):
        key = f"{r['db']}.{r['table']}"
        if key not in last or r["_seq"] > last[key]["_seq"]:
            last[key] = r
    assert [t.name for t in st.tables] == ["shop.customers", "shop.event_log", "shop.orders"]
    for t in st.tables:
        want = last[t.name]
        assert t.seq == want["_seq"], t
        assert t.position == f"{want['source_file']}:{want['event_pos']}"
        assert (t.gtid, t.commit_ts) == (want["gtid"], want["commit_ts"]) and t.gtid.startswith("0-1-")
        assert t.lag_seconds == (now - want["commit_ts"]).total_seconds()
        assert (t.run_id, t.run_status) == (s.run_id, "ok") and t.quarantine == {}
    # the samples' rows after binlog.000003 (samples/README.md: the first three steps of the shop)
    assert {t.name: t.rows for t in st.tables} == {"shop.customers": 5, "shop.event_log": 3, "shop.orders": 4}
    assert [t.position for t in st.tables] == ["binlog.000003:1568", "binlog.000002:1978", "binlog.000003:2246"]

    # the runs, with silver's counts under their own names (its row keeps tables in `files`)
    runs = {r.step: r for r in st.runs}
    assert set(runs) == {"bronze", "silver"}
    assert runs["bronze"].counts["file(s) read"] == 3 and runs["bronze"].status == "ok"
    silver_row = next(r for r in state.rows_in(cfg.warehouse, state.RUNS) if r["step"] == "silver")
    assert silver_row["files"] == 3 and silver_row["events"] == s.segments  # (the layout status explains)
    assert runs["silver"].counts["table(s)"] == 3 and runs["silver"].counts["segment(s)"] == s.segments
    assert "file(s) read" not in runs["silver"].counts

    # the manifest holds a pending and a committed row per file; status shows each file once
    manifest = state.rows_in(cfg.warehouse, state.MANIFEST)
    assert len(manifest) == 6
    assert st.files.by_status == {"done": 3} and st.files.last == "binlog.000003" and st.files.waiting == []

    # a new file waits; a file that is not a binlog lands in quarantine, by class
    shutil.copyfile(SAMPLES / "binlog.000004", folder / "binlog.000004")
    assert status.gather(cfg.warehouse, input=str(folder)).files.waiting == [{"name": "binlog.000004", "why": "new"}]
    assert status.gather(cfg.warehouse).files.waiting is None  # no input: unknown, and said so
    (folder / "binlog.000005").write_bytes(b"-- not a binlog\n" * 10)
    assert bronze.run(spark, cfg).quarantined == 1
    st = status.gather(cfg.warehouse, input=str(folder))
    assert st.files.by_status == {"done": 4, "quarantined": 1} and st.files.waiting == []
    assert st.quarantine == {"binlog": {"NotABinlog": 1}} and st.resolved == 0

    # the command line: the human table and the JSON, with no Spark
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert status.main(["--warehouse", cfg.warehouse, "--input", str(folder)]) == 0
    text = out.getvalue()
    assert "shop.orders" in text and "binlog.000003:2246" in text and "3 table(s)" in text
    assert "files: 5 in the manifest (newest binlog.000005): 4 done, 1 quarantined" in text
    assert "quarantine: 1 open row(s), 0 resolved; binlog: NotABinlog 1" in text
    env = {k: v for k, v in os.environ.items() if k != "BINLOG_DELTA_WAREHOUSE"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in [env.get("PYTHONPATH")] if p])
    done = subprocess.run([sys.executable, "-m", "pipelines.status", "--warehouse", cfg.warehouse, "--format", "json",
                           "--input", str(folder)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert [t["gtid"] for t in got["tables"]] == [t.gtid for t in st.tables]
    assert got["files"]["by_status"] == {"done": 4, "quarantined": 1}


def test_status_takes_the_watermark_the_merge_committed(spark, delta_backend, tmp_path):  # noqa: F811
    """A silver run that stops after its MERGEs committed and before ``_pipeline/silver_watermarks``
    was written: the tables hold the changes (and their watermark in the MERGE's commit), so status
    shows them applied; the failed run is the latest silver run, with its error."""
    folder = tmp_path / "binlogs"
    folder.mkdir()
    shutil.copyfile(SAMPLES / "binlog.000001", folder / "binlog.000001")
    cfg = load_config(None, {"input": str(folder), "warehouse": str(tmp_path / "wh"), "progress": False,
                             "delta.backend": delta_backend})
    bronze.run(spark, cfg)
    try:  # (the 1st write: a schema event's mark, written at once in its lane; the 2nd: the run's marks)
        faults.configure("append.watermarks.before#2:raise")
        with pytest.raises(faults.InjectedFault, match=r"append\.watermarks\.before \(#2"):
            silver_step.run(spark, cfg)
    finally:
        faults.configure(None)
    marks = {(r["db"], r["table"]): r["max_seq"] for r in state.rows_in(cfg.warehouse, state.WATERMARKS)}

    st = status.gather(cfg.warehouse)
    last: dict[str, str] = {}
    for r in _rows(cfg.warehouse_path("bronze/binlog_changes")):
        last[f"{r['db']}.{r['table']}"] = max(last.get(f"{r['db']}.{r['table']}", ""), r["_seq"])
    # the tables with rows: their last row, which no watermark row holds (the MERGE's commit does);
    # a table with none: its CREATE, the mark written at once (found in _pipeline/ddl: its GTID)
    expected = {f"{db}.{table}": seq for (db, table), seq in marks.items()}
    expected.update(last)
    assert {t.name: t.seq for t in st.tables} == expected and all(t.gtid for t in st.tables)
    assert last and all(marks.get(tuple(name.split(".")), "") < seq for name, seq in last.items())
    assert {t.name: t.rows for t in st.tables if t.name in last} == {"shop.customers": 4, "shop.event_log": 1}
    silver = next(r for r in st.runs if r.step == "silver")
    assert silver.status == "failed" and "InjectedFault" in silver.error


def test_status_of_what_is_not_a_warehouse(tmp_path):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert status.main(["--warehouse", str(tmp_path / "nowhere")]) == 2
    assert err.getvalue().startswith(f"error: warehouse {tmp_path / 'nowhere'} is not a folder")
