"""A silver run's Spark jobs do not grow with the number of tables (issue 14): small tables are
typed and MERGEd on the driver (``pipelines.silver.driver``); on delta-rs their rows and shape
counts are read from bronze by delta-rs and Arrow (``pipelines.silver.bronze_scan``), so such a run
issues no Spark job at all. Counts jobs, not seconds (speed is measured by ``make bench``); silver
is checked against the server."""
from __future__ import annotations

import shutil

import pytest
from spark_fixtures import delta_backend, spark  # noqa: F401  (the shared fixtures)

from oracle import _diff, server_columns, server_rows, ship_and_run, silver_rows
from pipelines import bronze, delta_io
from pipelines.config import load_config
from pipelines.paths import silver_table_path
from pipelines.silver import step as silver_step
from pipelines.silver.watermarks import read_watermark

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]


def _workload(n: int) -> str:
    """``n`` keyed tables and one keyless, three changes each (an insert of two rows, an update and a delete)."""
    sql = [f"CREATE DATABASE cost{n};"]
    for t in range(n):
        sql.append(f"CREATE TABLE cost{n}.t{t} (id INT PRIMARY KEY, v VARCHAR(20), d DATE, e ENUM('x','y'));"
                   f"INSERT INTO cost{n}.t{t} VALUES (1, 'a', '2024-01-01', 'x'), (2, 'b', '0000-00-00', 'y');"
                   f"UPDATE cost{n}.t{t} SET v = 'c', id = 3 WHERE id = 2; DELETE FROM cost{n}.t{t} WHERE id = 1;")
    sql.append(f"CREATE TABLE cost{n}.log (at INT, msg TEXT);"  # (TEXT: its bytes are counted before the fetch)
               f"INSERT INTO cost{n}.log VALUES (1, 'same'), (1, 'same'), (2, 'other');"
               f"DELETE FROM cost{n}.log WHERE msg = 'same' LIMIT 1;")
    return "\n".join(sql)


def _jobs(spark) -> int:
    # the newest job id (ids count up from 0 per SparkContext): the tracker keeps only the last
    # spark.ui.retainedJobs jobs, so in a long test session their number stops growing
    return max(spark.sparkContext.statusTracker().getJobIdsForGroup(), default=-1) + 1


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
def test_silver_spark_jobs_do_not_grow_with_tables(spark, mariadb_factory, tmp_path, metadata):  # noqa: F811
    srv = mariadb_factory(row_metadata=metadata)
    jobs = {}
    for n in (2, 24):
        srv.flush_logs()
        first = len(srv.binlog_files()) - 1
        srv.sql(_workload(n))
        srv.flush_logs()
        folder, wh = tmp_path / f"in{n}", tmp_path / f"wh{n}"
        folder.mkdir()
        for f in srv.binlog_files()[first:-1]:
            shutil.copy(f, folder / f.name)
        cfg = load_config(None, {"input": str(folder), "warehouse": str(wh), "progress": False, "delta.backend": "rs"})
        bronze.run(spark, cfg)
        before = _jobs(spark)
        stats = silver_step.run(spark, cfg)
        jobs[n] = _jobs(spark) - before
        assert stats.status == "ok", stats.summary()
        assert {k: v["applied_by"] for k, v in stats.tables.items()} == {
            **{f"cost{n}.t{t}": ["driver"] for t in range(n)}, f"cost{n}.log": ["driver"]}
        assert stats.zero_dates == 3 * n  # row 2's DATE: its insert's image, its update's two images
        for t in [f"t{i}" for i in range(n)] + ["log"]:
            cols = server_columns(srv, f"cost{n}", t)
            want, got = server_rows(srv, f"cost{n}", t, cols), silver_rows(wh, f"cost{n}", t, cols)
            assert got == want, _diff(f"cost{n}.{t}", cols, want, got or [])
    assert jobs[24] == jobs[2] == 0, jobs  # (delta-rs: bronze read by delta-rs and Arrow)


def _second_batch(db: str, n: int) -> str:
    """Changes to rows silver already holds: updates, a key change, deletes, re-inserts, and the
    keyless table's stored copies deleted (one of two equal copies, and a lone one)."""
    sql = []
    for t in range(n):
        sql.append(f"UPDATE {db}.t{t} SET v = 'u{t}' WHERE id = 3; INSERT INTO {db}.t{t} VALUES (4, 'new', NULL, 'y');"
                   f"UPDATE {db}.t{t} SET id = 5 WHERE id = 4; DELETE FROM {db}.t{t} WHERE id = 3;"
                   f"INSERT INTO {db}.t{t} VALUES (3, 'back', '2024-02-29', 'x');")
    sql.append(f"INSERT INTO {db}.log VALUES (2, 'other'), (3, 'third');"
               f"DELETE FROM {db}.log WHERE msg = 'other' LIMIT 1; DELETE FROM {db}.log WHERE msg = 'same';")
    return "\n".join(sql)


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_small_tables_take_the_driver_path_on_both_backends_run_after_run(spark, delta_backend, mariadb_factory,  # noqa: F811
                                                                          tmp_path, delete_mode):
    """Small segments are folded on the driver on either backend (delta-spark: a local-relation
    MERGE per table, no typing or classification jobs; a new table is written with its rows in one
    commit): a first run creates the tables, a second changes the rows they hold. Silver equals
    the server after each, and the counts are the changes' outcomes."""
    srv = mariadb_factory()
    n, db = 3, "cost3"
    wh, folder = tmp_path / "wh", tmp_path / "in"
    folder.mkdir()
    cfg = load_config(None, {"input": str(folder), "warehouse": str(wh), "progress": False,
                             "delta.backend": delta_backend, "delete_mode": delete_mode})
    soft = delete_mode == "soft"
    # run 1, per keyed table: key 3 inserted; keys 1 and 2 end deleted, absent from silver (soft: a
    # tombstone each); the keyless table keeps one 'same' and the 'other'. Run 2, per keyed table:
    # key 3 updated, key 5 inserted, key 4 ends deleted (soft: a tombstone); keyless: a new
    # 'other' and 'third' inserted, the stored 'other' (the older copy) and 'same' deleted.
    expected = [dict(inserted=n + 2, updated=0, deleted=2 * n if soft else 0),
                dict(inserted=n + 2, updated=n, deleted=2 + (n if soft else 0))]
    for run, sql in enumerate((_workload(n), _second_batch(db, n))):
        stats = ship_and_run(spark, srv, sql, folder, cfg)
        assert {k: v["applied_by"] for k, v in stats.tables.items()} == {
            **{f"{db}.t{t}": ["driver"] for t in range(n)}, f"{db}.log": ["driver"]}
        assert dict(inserted=stats.inserted, updated=stats.updated, deleted=stats.deleted) == expected[run], \
            stats.summary()
        for t in [f"t{i}" for i in range(n)] + ["log"]:
            cols = server_columns(srv, db, t)
            want, got = server_rows(srv, db, t, cols), silver_rows(wh, db, t, cols)
            assert got == want, _diff(f"run {run + 1}: {db}.{t}", cols, want, got or [])


def _descriptions(spark, since: int) -> dict[int, str]:
    """The description of each job with an id from ``since`` on (Spark's status store: the
    same list the Spark UI shows)."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    out = {}
    for i in range(jobs.size()):
        job = jobs.apply(i)
        if job.jobId() >= since:
            out[job.jobId()] = job.description().get() if job.description().isDefined() else None
    return out


def test_silver_s_jobs_are_described_by_their_table_not_by_bronze_s_last_batch(spark, mariadb_factory,  # noqa: F811
                                                                               tmp_path):
    """On delta-spark, where silver MERGEs with Spark jobs: each job is described in the Spark UI
    as the silver run's and its table's; bronze's batch label is gone from the thread once
    bronze ends."""
    srv = mariadb_factory()
    srv.sql(_workload(2))
    srv.flush_logs()
    folder, wh = tmp_path / "in", tmp_path / "wh"
    folder.mkdir()
    for f in srv.binlog_files()[:-1]:
        shutil.copy(f, folder / f.name)
    cfg = load_config(None, {"input": str(folder), "warehouse": str(wh), "progress": False,
                             "delta.backend": "spark"})
    bronze.run(spark, cfg)
    context = spark.sparkContext
    assert [context.getLocalProperty(k) for k in ("spark.job.description", "spark.jobGroup.id")] == [None, None]
    before = _jobs(spark)
    stats = silver_step.run(spark, cfg)
    assert stats.status == "ok", stats.summary()
    described = _descriptions(spark, before)
    # (delta-spark puts "Delta: " and its own words around the description it finds)
    tables = {t: [d for d in described.values() if d and f"silver {stats.run_id} cost2.{t}" in d]
              for t in ("t0", "t1", "log")}
    assert all(tables.values()), described  # (each table's MERGE: jobs of its own)
    assert [d for d in described.values() if not d or f"silver {stats.run_id}" not in d or "bronze" in d] == []
    assert context.getLocalProperty("spark.job.description") is None


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_a_run_that_only_inserts_new_rows_appends_them_on_both_backends(spark, delta_backend, mariadb_factory,  # noqa: F811
                                                                        tmp_path, delete_mode):
    """A run whose changes to a table are only new rows (a keyless log's inserts; a keyed table's
    inserts of keys silver does not hold, where the stored keys are read first: delta-rs) appends
    them in one commit that records the watermark, without a MERGE; a re-inserted key whose
    tombstone silver keeps (soft deletes) is MERGEd; a run with nothing new changes nothing.
    Silver equals the server after each run."""
    srv = mariadb_factory()
    db = "ins"
    wh, folder = tmp_path / "wh", tmp_path / "in"
    folder.mkdir()
    cfg = load_config(None, {"input": str(folder), "warehouse": str(wh), "progress": False,
                             "delta.backend": delta_backend, "delete_mode": delete_mode})
    first = (f"CREATE DATABASE {db}; CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20));"
             f"CREATE TABLE {db}.log (at INT, msg TEXT);"
             f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b'); DELETE FROM {db}.t WHERE id = 2;"
             f"INSERT INTO {db}.log VALUES (1, 'same'), (1, 'same');")
    second = (f"INSERT INTO {db}.t VALUES (2, 'again'), (3, 'c'); INSERT INTO {db}.t VALUES (4, 'd');"
              f"INSERT INTO {db}.log VALUES (1, 'same'), (2, 'other');")
    # (delta-spark, hard deletes: the MERGE counts, the stored keys are not read; soft: key 2's
    # tombstone is a stored row the insert updates)
    appended = {"log"} if delta_backend == "spark" or delete_mode == "soft" else {"t", "log"}
    for run, sql in enumerate((first, second, "")):
        stats = ship_and_run(spark, srv, sql, folder, cfg)
        for t in ("t", "log"):
            cols = server_columns(srv, db, t)
            want, got = server_rows(srv, db, t, cols), silver_rows(wh, db, t, cols)
            assert got == want, _diff(f"run {run + 1}: {db}.{t}", cols, want, got or [])
        if run == 1:
            for t in ("t", "log"):
                path = silver_table_path(str(wh), db, t)
                last = delta_io.open_table(path, delta_backend, spark).history(limit=1)[0]
                assert (last.operation == "WRITE") == (t in appended), (t, last.operation)
                newest = max(delta_io.open_table(path).read_arrow(["_seq"]).column("_seq").to_pylist())
                assert read_watermark(path, spark=spark, backend=delta_backend) == newest  # (the commit's own)
            assert dict(inserted=stats.inserted, updated=stats.updated, deleted=stats.deleted) == \
                dict(inserted=4 if delete_mode == "soft" else 5, updated=1 if delete_mode == "soft" else 0,
                     deleted=0), stats.summary()
        if run == 2:
            assert stats.inserted == stats.updated == stats.deleted == 0, stats.summary()
