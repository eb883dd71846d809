"""The pipeline where clusters keep their data: binlogs and warehouse on S3 (a private S3 API
server, moto's, on 127.0.0.1), configured the Spark way only (``spark.hadoop.fs.s3a.*`` in the
job's config, no ``AWS_*`` variable anywhere), on both backends, as a data engineer would run it:

1. the newest binlog still being written (cut mid-file), then grown;
2. a run SIGKILLed before its bronze commit (delta-rs leaves staged Parquet files no commit names);
3. two runs started at once: the S3 lease lets one in and refuses the other (exit 3, holder named);
4. maintenance, whose VACUUM removes the killed run's staged files;
5. SQL over the warehouse;

and after each, bronze holds every row change once and every silver table equals the server's
``SELECT``. The lease of a killed run frees the warehouse after ``lock.lease_seconds`` (short here).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mariadb_server import mariadb_available
from s3_server import environment_without_aws
from test_faults import JOB, REPO, assert_exact, finish, make_workload, start_job, write_config

from pipelines import storage
from pipelines.lock import EXIT_LOCKED

LEASE_SECONDS = 8  # a killed run's lease: the next run waits this long at most (--lock-timeout)


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    w = make_workload(tmp_path_factory.mktemp("s3-pipeline"))
    yield w
    w.server.stop()


def _config(folder: Path, s3, bucket: str, backend: str) -> Path:
    """The test config with binlogs and warehouse on S3 and the S3 settings in ``spark.conf`` only."""
    path = write_config(folder, Path("unused"), Path("unused"))
    cfg = json.loads(path.read_text())
    cfg.update(input=f"s3a://{bucket}/binlogs", warehouse=f"s3a://{bucket}/wh", lock={"lease_seconds": LEASE_SECONDS})
    cfg["delta"]["backend"] = backend
    cfg["spark"]["conf"].update(s3.spark_conf())
    path.write_text(json.dumps(cfg, indent=2))
    return path


def _upload(s3, bucket: str, files: list[Path], cut: int | None = None) -> None:
    """Put the binlog files under ``binlogs/``; ``cut``: the last one only up to that byte."""
    client = s3.client()
    for i, f in enumerate(files):
        data = f.read_bytes()
        if cut is not None and i == len(files) - 1:
            data = data[:cut]
        client.put_object(Bucket=bucket, Key=f"binlogs/{f.name}", Body=data)


def _job(config: Path, bucket: str, *, fault: str | None = None, extra: tuple[str, ...] = (), job: Path = JOB):
    started = time.monotonic()
    env = environment_without_aws()
    proc = start_job(config, f"s3a://{bucket}/binlogs", f"s3a://{bucket}/wh", fault=fault, extra=extra, env=env,
                     job=job)
    return proc, started


def _run(config: Path, bucket: str, **kw):
    proc, started = _job(config, bucket, **kw)
    return finish(proc, started)


def _staged_files(s3, bucket: str) -> list[str]:
    """Parquet files under bronze's folder that no version of bronze names: a killed run's."""
    from urllib.parse import unquote

    import deltalake
    import pyarrow as pa

    client = s3.client()
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="wh/bronze/")
            for o in page.get("Contents", []) if o["Key"].endswith(".parquet") and "/_delta_log/" not in o["Key"]]
    table = deltalake.DeltaTable(f"s3a://{bucket}/wh/bronze/binlog_changes",
                                 storage_options=storage.delta_storage_options(f"s3a://{bucket}/wh"))
    live = {f"wh/bronze/binlog_changes/{unquote(p)}"
            for p in pa.table(table.get_add_actions(flatten=True)).column("path").to_pylist()}
    return sorted(k for k in keys if k not in live)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_pipeline_on_s3_grown_killed_concurrent_maintained(workload, s3_server, no_aws_env, tmp_path, backend):
    bucket = s3_server.bucket()
    config = _config(tmp_path, s3_server, bucket, backend)
    storage.use(storage.StorageSettings.of(s3_server.hadoop_options()))  # (this process's checks read S3)
    warehouse = f"s3a://{bucket}/wh"
    files = sorted(workload.binlogs.iterdir())

    # 1. the newest file still being written, then grown
    _upload(s3_server, bucket, files, cut=files[-1].stat().st_size // 2)
    first = _run(config, bucket)
    assert first.rc == 0, first.tail()
    assert "no warehouse lock" not in first.err
    _upload(s3_server, bucket, files)

    # 2. killed before its bronze commit (delta-rs: its tasks' Parquet files are staged on S3)
    killed = _run(config, bucket, fault="append.bronze.materialize#1:kill")
    assert killed.rc == -9, killed.tail()
    staged = _staged_files(s3_server, bucket)
    if backend == "rs":
        assert staged, "the killed run staged no file"

    # 3. two runs at once, once the killed run's lease has expired: one runs, the other refuses
    time.sleep(LEASE_SECONDS + 1)
    procs = [_job(config, bucket, extra=("--lock-timeout", "0")) for _ in range(2)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda p: finish(*p), procs))
    assert sorted(r.rc for r in results) == [0, EXIT_LOCKED], "\n\n".join(r.tail() for r in results)
    ran = next(i for i, r in enumerate(results) if r.rc == 0)
    refused = results[1 - ran]
    assert f"is locked by pid {procs[ran][0].pid} on host" in refused.err, refused.tail()
    assert_exact(workload, warehouse, f"{backend}: grown, killed, then two runs at once on S3")

    # 4. maintenance: VACUUM with no retention removes the killed run's staged files
    maintained = _run(config, bucket, extra=("--retention-hours", "0"), job=REPO / "jobs" / "maintain.py")
    assert maintained.rc == 0, maintained.tail()
    assert _staged_files(s3_server, bucket) == []
    assert_exact(workload, warehouse, f"{backend}: after maintenance on S3")

    # 5. SQL over the warehouse, with the same config's S3 settings
    sql = subprocess.run([sys.executable, "-m", "pipelines.sql", "--config", str(config), "--warehouse", warehouse,
                          "--format", "csv", "SELECT count(*) AS n FROM bronze_binlog_changes"],
                         cwd=REPO, capture_output=True, text=True, timeout=600, env=environment_without_aws())
    assert sql.returncode == 0, sql.stderr[-3000:]
    assert sql.stdout == f"n\n{len(workload.changes)}\n"
