"""The pipeline's non-Spark I/O over HDFS, on a private MiniDFSCluster (``hdfs_server``): pyarrow
through hdfs-native (no libhdfs), delta-rs (hdfs-native inside), the bronze tasks' reads, the
staged bronze files and their commit, upkeep, the tools, and the warehouse lock's lease.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs as pafs

from pipelines import delta_io, lock, storage
from pipelines.binlog.txindex import scan
from pipelines.lock import LockLost, WarehouseLocked, check_held, remote_lock, warehouse_lock
from test_remote_lock import SHORT, race_for_the_lock

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "binlogs"

ID_V = pa.schema([("id", pa.int64()), ("v", pa.string())])  # a small table's layout


@pytest.fixture
def hdfs(hdfs_server, monkeypatch):
    """``(server, a new folder's URI)``; no storage settings in this process (none are needed)."""
    monkeypatch.setattr(storage, "_current", [storage.NO_SETTINGS])
    return hdfs_server, hdfs_server.uri(f"/t-{uuid.uuid4().hex[:10]}")


def _put(uri: str, data: bytes) -> None:
    fs, path = storage.arrow_filesystem(uri)
    fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    with fs.open_output_stream(path) as out:
        out.write(data)


def test_pyarrow_through_hdfs_native_writes_lists_reads_and_deletes(hdfs):
    _server, root = hdfs
    fs, path = storage.arrow_filesystem(f"{root}/t")
    fs.create_dir(path, recursive=True)
    pq.write_table(pa.table({"a": [1, 2]}), f"{path}/part-0.parquet", filesystem=fs)
    assert [i.base_name for i in fs.get_file_info(pafs.FileSelector(path))] == ["part-0.parquet"]
    assert pq.read_table(f"{path}/part-0.parquet", filesystem=fs).column("a").to_pylist() == [1, 2]
    fs.delete_file(f"{path}/part-0.parquet")
    assert fs.get_file_info(f"{path}/part-0.parquet").type == pafs.FileType.NotFound


def test_delta_rs_tables_on_hdfs_through_delta_io(hdfs):
    _server, root = hdfs
    path = f"{root}/wh/_pipeline/runs"
    runs = delta_io.open_table(path, "rs")
    runs.append_rows([(1, "a")], ID_V, delta_io.CommitInfo(txn=("t", 1)))
    assert not runs.append_rows([(1, "a")], ID_V, delta_io.CommitInfo(txn=("t", 1)))
    assert delta_io.open_table(path).read_arrow().to_pylist() == [{"id": 1, "v": "a"}]


def test_staged_bronze_files_committed_and_maintained_on_hdfs(hdfs):
    from pipelines.delta_io import upkeep
    from pipelines.maintenance import find_tables

    _server, root = hdfs
    wh = f"{root}/wh"
    path = f"{wh}/bronze/binlog_changes"
    struct = delta_io.struct_of(pa.schema([("_seq", pa.int64()), ("op", pa.string())]))
    schema = delta_io.prepare_staging(path, struct)
    files = []
    for part in range(2):
        stager = delta_io.ParquetStager(path, schema, stats_columns=["_seq"], settings=storage.NO_SETTINGS)
        stager.add((part, "c"))
        files += stager.close()
    assert delta_io.commit_staged(path, files, struct, txn_app_id="bronze", txn_version=1)
    assert find_tables(wh) == [path]
    assert upkeep.compact(path, backend="rs", target_bytes=1 << 20) == (2, 1)
    upkeep.checkpoint(path, backend="rs")
    assert upkeep.vacuum(path, 0, backend="rs") == 2
    after = upkeep.storage(path, backend="rs")
    assert (after.files, after.disk_files, after.checkpoints) == (1, 1, 1)
    assert sorted(r["_seq"] for r in delta_io.open_table(path).read_arrow().to_pylist()) == [0, 1]


def test_bronze_tasks_read_and_survey_an_hdfs_binlog(hdfs):
    from pipelines.bronze.files import task_bytes, task_file
    from pipelines.bronze.listing import SourceFile
    from pipelines.bronze.plan import SurveyRequest, survey_file

    _server, root = hdfs
    data = (SAMPLES / "binlog.000001").read_bytes()
    uri = f"{root}/binlogs/binlog.000001"
    _put(uri, data)
    with task_file(uri, storage.NO_SETTINGS) as buf:
        assert bytes(buf) == data
    with task_bytes(uri, 1000, 2000, storage.NO_SETTINGS) as buf:
        assert bytes(buf[1000:2000]) == data[1000:2000]
    local = SourceFile("binlog.000001", f"file:{SAMPLES / 'binlog.000001'}", len(data), 0, 1)
    got, want = (survey_file(SurveyRequest(f, None, True), False, 1 << 24, storage.NO_SETTINGS)
                 for f in (SourceFile("binlog.000001", uri, len(data), 0, 1), local))
    assert got.error is None and (got.sha_listed, got.plan.sha256, got.plan.ranges) == \
        (want.sha_listed, want.plan.sha256, want.plan.ranges)


def _tool(module: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=180, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})


def test_sql_and_quarantine_tools_over_an_hdfs_warehouse(hdfs, tmp_path):
    from pipelines import state

    _server, root = hdfs
    wh = f"{root}/wh"
    config = tmp_path / "pipeline.yaml"
    config.write_text("input: binlogs\nwarehouse: wh\n")
    data = (SAMPLES / "binlog.000001").read_bytes()
    tx = scan(data).transactions[1]
    row = {name: None for name in state.QUARANTINE_LAYOUT.names}
    row.update(file="binlog.000001", file_seq=1, offset=tx.begin_pos, error_class="CorruptEvent", decoder_version="0",
               raw=data[tx.begin_pos:tx.end_pos], reason="made up")
    delta_io.open_table(f"{wh}/_pipeline/quarantine", "rs").append_rows([tuple(row.values())], state.QUARANTINE_LAYOUT)

    r = _tool("pipelines.sql", "--config", str(config), "--warehouse", wh, "--engine", "rs", "--format", "csv",
              "SELECT file, \"offset\" FROM _pipeline_quarantine")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"file,offset\nbinlog.000001,{tx.begin_pos}\n"
    listed = _tool("pipelines.quarantine", "list", "--config", str(config), "--warehouse", wh)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"CorruptEvent\tbinlog\t1 row(s)\n  binlog.000001\t{tx.begin_pos}\tCorruptEvent\t")


# -- the lock's lease on HDFS


def _lock_record(root: str) -> dict | None:
    client = storage.hdfs_client(root)
    path = urlparse(f"{root}/wh/{lock.LOCK_FILE}").path
    try:
        with client.read(path) as r:
            return json.loads(r.read())
    except FileNotFoundError:
        return None


def test_hdfs_lock_refuses_a_second_holder_and_is_deleted_on_release(hdfs):
    _server, root = hdfs
    wh = f"{root}/wh"
    with warehouse_lock(wh, lease=SHORT) as owner:
        assert lock.read_owner(wh) == owner
        with pytest.raises(WarehouseLocked, match=f"locked by pid {owner.pid} on host {owner.host} since"):
            with warehouse_lock(wh, lease=SHORT):
                pass
        time.sleep(2 * SHORT.seconds)  # renewed all along
        with pytest.raises(WarehouseLocked):
            with warehouse_lock(wh, lease=SHORT):
                pass
    assert _lock_record(root) is None


def test_hdfs_expired_lease_is_taken_over_by_one_of_two_racing_runs(hdfs):
    _server, root = hdfs
    wh = f"{root}/wh"
    stale = {"host": "gone", "pid": 1, "started_at": "2020-01-01T00:00:00+00:00", "command": "x",
             "lease_expires": "2020-01-01T00:02:00.000+00:00", "lease_seconds": 120, "token": "t0"}
    _put(f"{wh}/{lock.LOCK_FILE}", json.dumps(stale).encode())
    won, refused = race_for_the_lock(wh, 3, SHORT)
    assert (len(won), len(refused)) == (1, 2) and not won[0].lost
    assert _lock_record(root) is None


def test_hdfs_lease_changed_behind_its_holder_is_lost(hdfs):
    _server, root = hdfs
    wh = f"{root}/wh"
    with remote_lock(wh, lease=SHORT) as held:
        other = {"host": "other", "pid": 2, "token": "theirs", "lease_expires": "2999-01-01T00:00:00+00:00"}
        client = storage.hdfs_client(root)
        path = urlparse(f"{wh}/{lock.LOCK_FILE}").path
        from hdfs_native import WriteOptions

        with client.create(path, WriteOptions(overwrite=True)) as w:
            w.write(json.dumps(other).encode())
        deadline = time.monotonic() + 10
        while not held.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(LockLost):
            check_held()
    assert _lock_record(root)["token"] == "theirs"  # put back, not deleted: it is not this run's


# -- Spark in the loop: Spark's own Hadoop client speaks HDFS (S3 would need hadoop-aws)


def _local_copy(tmp_path: Path, names: list[str]) -> Path:
    folder = tmp_path / "local-in"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_bytes((SAMPLES / name).read_bytes())
    return folder


def _bronze_values(path: str) -> list[tuple]:
    rows = delta_io.open_table(path).read_arrow(["_seq", "db", "table", "op", "source_file"]).to_pylist()
    return sorted((r["_seq"], r["db"], r["table"], r["op"], r["source_file"]) for r in rows)


@pytest.mark.spark
@pytest.mark.parametrize("reader", ["binaryFile", "binaryFiles"])
def test_bronze_reads_each_new_hdfs_binlog_once(spark, hdfs, tmp_path, monkeypatch, reader):  # noqa: F811
    """The survey reads a new remote file through Spark's whole-file reader and the decode reads
    that kept copy: with the files deleted from HDFS right after the survey, the batch still lands
    every row, the same rows as from local files."""
    from pipelines import bronze
    from pipelines.bronze import step as bronze_step
    from pipelines.config import load_config

    _server, root = hdfs
    names = ["binlog.000001", "binlog.000002", "binlog.000003"]
    for name in names:
        _put(f"{root}/in/{name}", (SAMPLES / name).read_bytes())
    real = bronze_step.survey
    surveyed = []

    def survey_then_delete(spark, cfg, requests, kept=None):
        found = real(spark, cfg, requests, kept)
        surveyed.append(sorted(kept.names) if kept is not None else [])
        fs, path = storage.arrow_filesystem(f"{root}/in")
        fs.delete_dir_contents(path)  # nothing can read them again
        return found

    monkeypatch.setattr(bronze_step, "survey", survey_then_delete)
    over = {"progress": False, "delta.backend": "rs", "parallelism.whole_files": reader}
    cfg = load_config(None, {**over, "input": f"{root}/in", "warehouse": str(tmp_path / "wh")})
    stats = bronze.run(spark, cfg)
    assert surveyed == [names] and (stats.files, stats.read_whole) == (3, 3)

    monkeypatch.setattr(bronze_step, "survey", real)
    local = load_config(None, {**over, "input": str(_local_copy(tmp_path, names)), "warehouse": str(tmp_path / "local")})
    bronze.run(spark, local)
    got = _bronze_values(cfg.warehouse_path("bronze/binlog_changes"))
    assert got == _bronze_values(local.warehouse_path("bronze/binlog_changes")) and len(got) == 17


@pytest.mark.spark
@pytest.mark.slow
def test_pipeline_job_on_hdfs_input_and_warehouse(hdfs, tmp_path):
    """jobs/run_pipeline.py with --binlog-dir and --warehouse on HDFS (delta-rs backend): Spark
    lists and reads the binlogs, pyarrow stages bronze's files there, delta-rs commits, the lease
    is taken and released; silver equals a run on local folders; a second run lands nothing; SQL
    with delta-spark reads the HDFS warehouse with the same Hadoop client."""
    from pipelines import sql

    _server, root = hdfs
    names = ["binlog.000001", "binlog.000002", "binlog.000003"]
    for name in names:
        _put(f"{root}/in/{name}", (SAMPLES / name).read_bytes())
    wh, local = f"{root}/wh", str(tmp_path / "wh")

    def job(binlogs: str, warehouse: str) -> str:
        r = subprocess.run([sys.executable, str(REPO / "jobs" / "run_pipeline.py"), "--binlog-dir", binlogs,
                            "--warehouse", warehouse, "--no-progress", "--delta-backend", "rs"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=900,
                           env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "HOME": str(Path.home())})
        assert r.returncode == 0, r.stderr[-3000:]
        assert "no warehouse lock" not in r.stderr
        return r.stdout

    assert "3 file(s) read" in job(f"{root}/in", wh)
    assert _lock_record(root) is None  # released
    job(str(_local_copy(tmp_path, names)), local)
    remote_tables, local_tables = sql.discover_tables(wh), sql.discover_tables(local)
    assert [t.qualified for t in remote_tables] == [t.qualified for t in local_tables]
    for t in remote_tables:
        if t.qualified.startswith("silver."):
            query = f"SELECT * FROM `{t.qualified}`"
            drop = {"_commit_ts"}
            strip = lambda rows: sorted(tuple(v for k, v in sorted(r.items()) if k not in drop) for r in rows)  # noqa: E731
            assert strip(sql.run(query, [t], engine="rs").to_pylist()) == \
                strip(sql.run(query, [u for u in local_tables if u.qualified == t.qualified], engine="rs").to_pylist())
    assert "0 file(s) read, 3 skipped" in job(f"{root}/in", wh)

    r = subprocess.run([sys.executable, "-m", "pipelines.sql", "--warehouse", wh, "--engine", "spark", "--format",
                        "csv", "SELECT count(*) AS n FROM bronze_binlog_changes"], cwd=REPO, capture_output=True,
                       text=True, timeout=600, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                                    "HOME": str(Path.home())})
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout == "n\n17\n"


from spark_fixtures import spark  # noqa: E402,F401  (the shared session fixture)
