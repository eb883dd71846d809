"""The main job on a real Spark standalone cluster (a master and two one-core workers on
127.0.0.1), submitted the way docs/deploy.md says: ``spark-submit --master spark://...
--py-files dist/binlog_delta.zip jobs/run_pipeline.py``, with binlogs and warehouse on S3 (where a
cluster keeps them). The shipped configuration names ``spark.master: local[2]``; the submit command
must win: the master registers the application and both workers launch executors. Silver must
equal the source server: on delta-spark (what ``auto`` takes on a cluster), then, with more
binlogs, on delta-rs."""
from __future__ import annotations

import subprocess

import pytest
from spark_cluster import StandaloneCluster, cluster_env

from mariadb_server import MariaDBServer, mariadb_available
from pipelines import delta_jars
from soak import REPO, compare, run_workload, write_config

pytestmark = [pytest.mark.spark, pytest.mark.mariadb, pytest.mark.slow]


def _submit(cluster, package, config, *extra, jars: list[str] = ()) -> subprocess.CompletedProcess:
    delta = delta_jars.find_jars()
    assert delta, "the delta-spark jars are missing from jars/ (make setup fetches them)"
    cmd = [*cluster.submit_command(), "--jars", ",".join([*delta, *jars]), "--py-files", package,
           str(REPO / "jobs" / "run_pipeline.py"), "--config", str(config), "--no-progress", *extra]
    return subprocess.run(cmd, cwd=REPO, env=cluster_env(), capture_output=True, text=True, timeout=900)


def test_the_job_runs_on_the_cluster_it_is_submitted_to(tmp_path, package, s3_server, no_aws_env):
    """One cluster, two submits, binlogs and warehouse on S3 (the private S3 server; its settings
    only the config's ``spark.hadoop.fs.s3a.*``, hadoop-aws and its SDK with ``--jars``): first on
    delta-spark (what ``auto`` takes on a cluster), then, with more binlogs, on delta-rs (the
    executors' tasks stage bronze's files on S3 with pyarrow, the driver commits them with
    delta-rs). Silver equals the server each time."""
    from soak import upload

    from pipelines import storage

    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    s3a = delta_jars.find_s3a_jars()
    assert s3a, "hadoop-aws and the AWS SDK are missing from jars/ (make setup fetches them)"
    srv = MariaDBServer(tmp_path / "mariadb", row_metadata="FULL").start()
    try:
        bucket = s3_server.bucket("cluster")
        storage.use(storage.StorageSettings.of(s3_server.hadoop_options()))
        warehouse = f"s3a://{bucket}/warehouse"

        srv.flush_logs()
        sent = {f.name for f in srv.binlog_files()[:-1]}  # (the server's own set-up: not the workloads')

        def workload(seed: int, before: list):
            w = run_workload(srv, seed=seed, mode="full/full", steps=20)
            srv.flush_logs()
            closed = [f for f in srv.binlog_files()[:-1] if f.name not in sent]
            upload(closed, s3_server, bucket)
            sent.update(f.name for f in closed)
            return w, write_config([*before, w], tmp_path, "auto", s3=(s3_server, bucket))

        assert "local[2]" in (REPO / "conf" / "pipeline.yaml").read_text()  # what the job must not obey
        w1, config = workload(4242, [])
        with StandaloneCluster(tmp_path / "cluster", workers=2) as cluster:
            run = _submit(cluster, package, config, jars=s3a)
            assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
            # (spark-submit merges the Python driver's stderr into its stdout)
            assert "is not applied: this job was submitted with --master spark://127.0.0.1" in run.stdout + run.stderr
            apps = [a for a in cluster.applications() if a["name"] == "binlog-delta"]
            assert len(apps) == 1, cluster.master_state()
            executors = cluster.executor_dirs(apps[0]["id"])
            assert all(executors.values()), f"a worker launched no executor: {executors}"
            assert "silver run" in run.stdout and " ok:" in run.stdout.split("silver run", 1)[1]
            info = [line for line in run.stderr.splitlines() if " INFO " in line]
            assert len(info) < 30, f"{len(info)} INFO lines on the console:\n" + "\n".join(info[:40])
            problems = compare(srv, w1, warehouse)
            assert not problems, "\n".join(problems)

            w2, config = workload(4243, [w1])
            again = _submit(cluster, package, config, "--delta-backend", "rs", jars=s3a)
            assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-6000:]
            assert len([a for a in cluster.applications() if a["name"] == "binlog-delta"]) == 2
        problems = compare(srv, w1, warehouse) + compare(srv, w2, warehouse)
        assert not problems, "\n".join(problems)
    finally:
        srv.stop()
