"""Silver reads only the bronze files ingested since its last finished run (the read-through
mark, ``pipelines.silver.marks.read_through_key``), so a run's cost follows its new changes, not bronze's
history; and nothing is missed by that: a late file (``accept_gaps``) and a table newly let in by
``tables`` land whole. The server's SELECT is the oracle, on both backends."""
from __future__ import annotations

import datetime as _dt
import os
import shutil

import pytest
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from oracle import _diff, server_columns, server_rows, silver_rows
from pipelines import bronze, delta_io
from pipelines.silver import marks as silver_marks
from pipelines.silver import step as silver_step
from pipelines.config import load_config

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

FILES = (  # one binlog file each
    """CREATE DATABASE rt;
    CREATE TABLE rt.a (id INT PRIMARY KEY, v VARCHAR(10));
    CREATE TABLE rt.b (id INT PRIMARY KEY, n INT);
    INSERT INTO rt.a VALUES (1, 'a1'), (2, 'a2'), (3, 'a3');
    INSERT INTO rt.b VALUES (1, 10), (2, 20);""",
    """UPDATE rt.a SET v = 'a2x' WHERE id = 2; DELETE FROM rt.b WHERE id = 1; INSERT INTO rt.b VALUES (3, 30);""",
    """CREATE TABLE rt.c (id INT PRIMARY KEY, w VARCHAR(10));
    INSERT INTO rt.c VALUES (1, 'c1'), (2, 'c2'); UPDATE rt.c SET w = 'c2x' WHERE id = 2;""",
    """INSERT INTO rt.a VALUES (4, 'a4'); UPDATE rt.b SET n = 31 WHERE id = 3; DELETE FROM rt.a WHERE id = 1;""",
)


def _check(srv, wh, tables):
    for t in tables:
        cols = server_columns(srv, "rt", t)
        want, got = server_rows(srv, "rt", t, cols), silver_rows(wh, "rt", t, cols)
        assert got == want, _diff(f"rt.{t}", cols, want, got or [])


@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_silver_reads_what_is_new_and_misses_nothing(spark, mariadb_factory, tmp_path, backend,  # noqa: F811
                                                     monkeypatch):
    if backend == "spark":
        from spark_fixtures import require_delta_spark

        require_delta_spark(spark)
    monkeypatch.setattr(silver_marks, "READ_THROUGH_MARGIN", _dt.timedelta(0))  # runs seconds apart here
    srv = mariadb_factory(row_metadata="FULL")
    srv.flush_logs()
    first = len(srv.binlog_files()) - 1
    for sql in FILES:
        srv.sql(sql)
        srv.flush_logs()
    f1, f2, f3, f4 = srv.binlog_files()[first:first + 4]
    folder, wh = tmp_path / "in", tmp_path / "wh"
    folder.mkdir()

    def run(**settings):
        cfg = load_config(None, {"input": str(folder), "warehouse": str(wh), "progress": False,
                                 "accept_gaps": True, "delta.backend": backend, **settings})
        bronze.run(spark, cfg)
        stats = silver_step.run(spark, cfg)
        assert stats.status == "ok", stats.summary()
        return stats

    # 1. rt.b is left out by the tables setting
    for f in (f1, f2):
        shutil.copy(f, folder / f.name)
    run(**{"tables.exclude": ["rt.b"]})
    assert not (wh / "silver" / "rt" / "b").exists()
    # 2. let in: no new file, yet rt.b lands whole (that setting has no read-through mark yet)
    stats = run()
    assert stats.tables.keys() == {"rt.b"}, stats.tables
    marks = silver_step.read_watermarks(spark, load_config(None, {"input": str(folder), "warehouse": str(wh)}))
    assert silver_step.read_through_key(load_config(None, {"input": str(folder), "warehouse": str(wh)})) in marks
    # 3. every bronze file so far is behind the mark: gone from disk, a run with a new file never
    # opens one (f3 is missing: accept_gaps goes on)
    bronze_dir = wh / "bronze" / "binlog_changes"
    gone = [p for p in bronze_dir.glob("*.parquet")]
    assert gone
    saved = tmp_path / "saved"
    saved.mkdir()
    for p in gone:
        shutil.move(str(p), saved / p.name)
    shutil.copy(f4, folder / f4.name)
    stats = run()
    assert stats.tables.keys() == {"rt.a", "rt.b"}, stats.tables
    for p in saved.iterdir():  # bronze whole again, for what follows
        shutil.move(str(p), bronze_dir / p.name)
    # 4. a late file: its changes are older than every mark, and rt.c lands all the same
    shutil.copy(f3, folder / f3.name)
    stats = run()
    assert stats.tables.keys() == {"rt.c"}, stats.tables
    _check(srv, wh, ("a", "b", "c"))
    # a run with nothing new writes no mark, and changes nothing
    watermarks = delta_io.open_table(str(wh / "_pipeline" / "silver_watermarks"))
    before = watermarks.read_arrow().num_rows
    stats = run()
    assert stats.tables == {} and watermarks.read_arrow().num_rows == before
    _check(srv, wh, ("a", "b", "c"))
    assert os.listdir(folder) and sorted(os.listdir(folder)) == sorted(f.name for f in (f1, f2, f3, f4))


@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_a_batch_that_lands_after_silver_read_bronze_is_not_left_behind(spark, mariadb_factory, tmp_path,  # noqa: F811
                                                                       backend, monkeypatch):
    """Runs that overlap (no lock keeps them apart): a long bronze run stamps all its batches with
    its start; one batch commits, a silver run applies it (its read-through mark is now later than
    the stamp), and only then does the next batch commit. The next silver run's mark would leave
    that batch behind for good; the manifest's ``committed_at`` brings it back."""
    import threading
    import time

    from pipelines import faults

    if backend == "spark":
        from spark_fixtures import require_delta_spark

        require_delta_spark(spark)
    monkeypatch.setattr(silver_marks, "READ_THROUGH_MARGIN", _dt.timedelta(seconds=1))
    srv = mariadb_factory(row_metadata="FULL")
    srv.flush_logs()
    first = len(srv.binlog_files()) - 1
    for sql in FILES[:3]:
        srv.sql(sql)
        srv.flush_logs()
    f1, f2, f3 = srv.binlog_files()[first:first + 3]
    folder, wh = tmp_path / "in", tmp_path / "wh"
    folder.mkdir()
    cfg = load_config(None, {"input": str(folder), "warehouse": str(wh), "progress": False, "delta.backend": backend,
                             "parallelism.max_batch_bytes": 1})  # (a batch per file)
    shutil.copy(f1, folder / f1.name)
    bronze.run(spark, cfg)
    assert silver_step.run(spark, cfg).status == "ok"

    for f in (f2, f3):
        shutil.copy(f, folder / f.name)
    go = tmp_path / "go"
    faults.configure(f"append.bronze.before#2:wait={go}")  # (f3's batch: stamped, not committed yet)
    long_run = threading.Thread(target=bronze.run, args=(spark, cfg))
    try:
        long_run.start()
        while not (tmp_path / "go.waiting").exists():
            assert long_run.is_alive()
            time.sleep(0.1)
        time.sleep(2.5)  # (past the margin: this silver run's mark is later than the batches' stamp)
        stats = silver_step.run(spark, cfg)  # (applies f2's batch, not f3's)
        assert stats.status == "ok" and "rt.b" in stats.tables and "rt.c" not in stats.tables, stats.summary()
        go.write_text("go")
        long_run.join(300)
    finally:
        faults.configure(None)
    stats = silver_step.run(spark, cfg)
    assert stats.status == "ok" and "rt.c" in stats.tables, stats.summary()
    _check(srv, wh, ("a", "b", "c"))
