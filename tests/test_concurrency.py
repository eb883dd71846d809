"""Two runs at once on one warehouse (an Airflow retry racing a manual run): nothing is duplicated
or lost.

* The warehouse lock (:mod:`pipelines.lock`): a second holder is refused with a message naming
  the first, or waits for it; the lock goes away with a SIGKILLed holder.
* Real jobs: two ``jobs/run_pipeline.py`` processes started together on the same warehouse and
  binlog folder; one runs and the other refuses (``--lock-timeout 0``, exit code 3) or waits and
  then finds nothing to do. Then bronze and silver are exact (the checks of ``test_faults.py``).
* Without the lock (object stores): racing commits through :mod:`pipelines.delta_io` lose
  races, are tried again, and an append with a transaction id still lands once.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

from mariadb_server import mariadb_available
from spark_fixtures import require_delta_spark, spark  # noqa: F401  (the shared session fixture)
from test_faults import assert_exact, finish, make_workload, run_job, start_job, write_config

from pipelines import delta_io, lock
from pipelines.delta_io.rs_writes import merge_rs
from pipelines.lock import EXIT_LOCKED, WarehouseLocked, warehouse_lock

# ---------------------------------------------------------------------------------------------------
# the lock itself (in this process: two flock()s on two opens conflict, as between processes)


def test_second_holder_is_refused_with_the_holder_named(tmp_path):
    wh = str(tmp_path / "wh")
    with warehouse_lock(wh) as owner:
        assert owner.pid == os.getpid()
        assert lock.read_owner(wh) == owner
        with pytest.raises(WarehouseLocked) as e:
            with warehouse_lock(wh):
                pass
        text = str(e.value)
        assert f"warehouse {wh} is locked by pid {os.getpid()} on host {owner.host} since {owner.started_at}" in text
        assert "another run is in progress" in text
    with warehouse_lock(wh):  # released at the end of the block
        pass


def test_waiting_holder_gets_the_lock_when_it_is_released(tmp_path):
    wh = str(tmp_path / "wh")
    held, release = threading.Event(), threading.Event()

    def first():
        with warehouse_lock(wh):
            held.set()
            release.wait(30)

    t = threading.Thread(target=first)
    t.start()
    try:
        assert held.wait(30)
        with pytest.raises(WarehouseLocked, match=r"waited"):
            with warehouse_lock(wh, timeout=0.6, poll=0.1):
                pass
        threading.Timer(0.5, release.set).start()
        started = time.monotonic()
        with warehouse_lock(wh, timeout=30, poll=0.1) as owner:
            assert owner.pid == os.getpid()
        assert time.monotonic() - started < 20
    finally:
        release.set()
        t.join()


def test_lock_of_file_uri_and_remote_warehouses(tmp_path, capsys):
    with warehouse_lock(f"file://{tmp_path}/wh"):
        assert (tmp_path / "wh" / "_pipeline" / ".lock").is_file()
        with pytest.raises(WarehouseLocked):
            with warehouse_lock(str(tmp_path / "wh")):
                pass
    with warehouse_lock("abfss://container@account.dfs.core.windows.net/wh") as owner:  # (S3, HDFS: a lease)
        assert owner is None
    assert "no warehouse lock for abfss://container@account.dfs.core.windows.net/wh" in capsys.readouterr().err
    with pytest.raises(ValueError, match="lock timeout"):
        with warehouse_lock(str(tmp_path / "wh"), timeout=-1):
            pass


# ---------------------------------------------------------------------------------------------------
# real jobs


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    w = make_workload(tmp_path_factory.mktemp("concurrency"))
    yield w
    w.server.stop()


def _two_at_once(workload, folder: Path, extra: tuple[str, ...]):
    warehouse = folder / "wh"
    config = write_config(folder, workload.binlogs, warehouse)
    started = time.monotonic()
    procs = [start_job(config, workload.binlogs, warehouse, extra=extra) for _ in range(2)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # each one's own duration
        results = list(pool.map(lambda p: finish(p, started), procs))
    return warehouse, procs, results


@pytest.mark.spark
@pytest.mark.slow
def test_two_jobs_at_once_one_refuses(workload, tmp_path):
    warehouse, procs, results = _two_at_once(workload, tmp_path, ("--lock-timeout", "0"))
    codes = sorted(r.rc for r in results)
    assert codes == [0, EXIT_LOCKED], "\n\n".join(r.tail() for r in results)
    ran = next(i for i, r in enumerate(results) if r.rc == 0)
    refused = results[1 - ran]
    assert f"is locked by pid {procs[ran].pid} on host" in refused.err, refused.tail()
    assert "another run is in progress" in refused.err
    assert refused.seconds < results[ran].seconds / 2, refused.tail()  # refused before starting Spark
    assert_exact(workload, warehouse, "two jobs at once, one refused")


@pytest.mark.spark
@pytest.mark.slow
def test_two_jobs_at_once_second_waits_then_finds_nothing_to_do(workload, tmp_path):
    warehouse, _procs, results = _two_at_once(workload, tmp_path, ("--lock-timeout", "600"))
    assert [r.rc for r in results] == [0, 0], "\n\n".join(r.tail() for r in results)
    waited = [r for r in results if "waiting up to 600 s" in r.err]
    assert len(waited) == 1, "\n\n".join(r.tail() for r in results)
    n_files = len(list(workload.binlogs.iterdir()))
    assert f"0 file(s) read, {n_files} skipped" in waited[0].out, waited[0].tail()
    assert_exact(workload, warehouse, "two jobs at once, one waited")


@pytest.mark.spark
@pytest.mark.slow
def test_lock_is_released_when_the_holder_is_killed(workload, tmp_path):
    warehouse = tmp_path / "wh"
    config = write_config(tmp_path, workload.binlogs, warehouse)
    started = time.monotonic()
    holder = start_job(config, workload.binlogs, warehouse)
    deadline = time.monotonic() + 120
    while (lock.read_owner(str(warehouse)) or lock.LockOwner("", -1, "")).pid != holder.pid:
        assert holder.poll() is None, finish(holder, started).tail()
        assert time.monotonic() < deadline, "the job never took the warehouse lock"
        time.sleep(0.1)
    refused = run_job(config, workload.binlogs, warehouse, extra=("--lock-timeout", "0"))
    assert refused.rc == EXIT_LOCKED, refused.tail()
    assert f"is locked by pid {holder.pid}" in refused.err
    time.sleep(3)  # let it get into the pipeline (Spark started, maybe a commit or two)
    os.kill(holder.pid, signal.SIGKILL)
    killed = finish(holder, started)
    assert killed.rc == -signal.SIGKILL, killed.tail()
    with warehouse_lock(str(warehouse)):  # free at once: the kernel dropped the dead holder's flock
        pass
    after = run_job(config, workload.binlogs, warehouse, extra=("--lock-timeout", "0"))
    assert after.rc == 0, after.tail()
    assert_exact(workload, warehouse, "after the lock holder was killed")


# ---------------------------------------------------------------------------------------------------
# without the lock: Delta commit races through delta_io


def _racing(n_threads: int, fn) -> list[BaseException]:
    """Run ``fn(i)`` in ``n_threads`` threads released together; the exceptions raised."""
    barrier = threading.Barrier(n_threads)
    errors: list[BaseException] = []

    def body(i):
        barrier.wait()
        try:
            fn(i)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def test_racing_merges_are_retried_and_all_land(tmp_path):
    import deltalake

    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pa.table({"k": pa.array([0], pa.int64()), "v": pa.array([0], pa.int64())}))
    clauses = [delta_io.MergeClause("update", None, {"v": "s.`v`"}),
               delta_io.MergeClause("insert", None, {"k": "s.`k`", "v": "s.`v`"})]
    before = delta_io.conflict_retries()
    rounds = 6
    for r in range(rounds):
        def upsert(i, r=r):
            source = pa.table({"k": pa.array([0, 100 * r + i + 1], pa.int64()),
                               "v": pa.array([r, 100 * r + i + 1], pa.int64())})
            merge_rs(path, source, "t.`k` = s.`k`", clauses)

        errors = _racing(2, upsert)
        assert not errors, errors
    rows = sorted(deltalake.DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["k"])
    want = [{"k": 0, "v": rounds - 1}] + [{"k": 100 * r + i + 1, "v": 100 * r + i + 1}
                                          for r in range(rounds) for i in range(2)]
    assert rows == want
    assert delta_io.conflict_retries() > before, "two MERGEs of one row released together never conflicted"


@pytest.mark.spark
def test_racing_appends_with_one_txn_id_land_once(spark, tmp_path):  # noqa: F811
    import deltalake

    path = str(tmp_path / "t")
    before = delta_io.conflict_retries()
    rounds = 5
    for version in range(rounds):
        df = spark.createDataFrame([(version, i) for i in range(3)], "batch INT, i INT")
        errors = _racing(2, lambda _i: delta_io.open_table(path, "rs", spark).append(
            df, delta_io.CommitInfo(txn=("bronze", version))))
        assert not errors, errors
    data = deltalake.DeltaTable(path).to_pyarrow_table()
    assert sorted(zip(data.column("batch").to_pylist(), data.column("i").to_pylist())) == [
        (v, i) for v in range(rounds) for i in range(3)]
    assert deltalake.DeltaTable(path).transaction_version("bronze") == rounds - 1
    # Either the loser saw the winner's txn id in its snapshot and skipped, or both committed from
    # one snapshot and the loser's commit conflicted, was tried again and then skipped.
    print(f"racing appends: {delta_io.conflict_retries() - before} commit conflict(s) tried again")


@pytest.mark.spark
def test_a_commit_conflict_is_known_by_its_class_on_each_backend(spark):  # noqa: F811
    """What ``commit_retried`` tries again: delta-rs's ``CommitFailedError``, and each of
    delta-spark's conflict exceptions (Java classes), thrown by the commit or as the cause of the
    exception a job wrapped it in. Nothing else, whatever its text says."""
    from deltalake.exceptions import CommitFailedError, DeltaError
    from py4j.protocol import Py4JJavaError

    require_delta_spark(spark)
    jvm, gateway = spark._jvm, spark.sparkContext._gateway

    def java(name: str, message: str, cause=None):
        cls = jvm.org.apache.spark.util.Utils.classForName(name, True, False)
        ctor = next(c for c in cls.getConstructors() if [p.getName() for p in c.getParameterTypes()]
                    == ["java.lang.String"] + (["java.lang.Throwable"] if cause is not None else []))
        args = gateway.new_array(jvm.java.lang.Object, 2 if cause is not None else 1)
        args[0] = message
        if cause is not None:
            args[1] = cause
        return ctor.newInstance(args)

    assert delta_io.is_commit_conflict(CommitFailedError("version 3 already exists"))
    assert not delta_io.is_commit_conflict(DeltaError("Generic error: version 3 already exists"))
    for name in ("ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
                 "ConcurrentTransactionException", "MetadataChangedException", "ProtocolChangedException",
                 "ConcurrentWriteException"):
        conflict = java(f"io.delta.exceptions.{name}", "a concurrent update")
        assert delta_io.is_commit_conflict(Py4JJavaError("An error occurred while calling o42.save", conflict)), name
        wrapped = java("org.apache.spark.SparkException", "job aborted", conflict)
        assert delta_io.is_commit_conflict(Py4JJavaError("An error occurred while calling o42.sql", wrapped)), name
    other = java("java.lang.IllegalStateException", "io.delta.exceptions.ConcurrentAppendException (only a text)")
    assert not delta_io.is_commit_conflict(Py4JJavaError("An error occurred while calling o42.save", other))
    assert not delta_io.is_commit_conflict(RuntimeError("io.delta.exceptions.ProtocolChangedException"))
