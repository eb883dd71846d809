"""Two runs at once without a lock (an object-store lease that expired, a warehouse no lock reaches):
no write may land on a plan that another run's commit made stale.

* ``Table.pinned``: a commit made against the version a writer read, on both backends: it lands
  when nothing came in between and moves the pin; it raises ``StaleRead`` and lands nothing when
  another writer committed first (a MERGE, an overwrite, an append, a create, an ALTER).
* The silver step: one run stopped just before one of its commits (the ``wait`` fault action)
  while a second run does everything; the first then goes on, finds its plan stale, plans again
  from what the second left, and silver still equals the source server, on both backends. Each
  kind of silver commit is the one stopped at: the issue's case was an ``ALTER TABLE ... ADD
  COLUMN`` whose rewrite of the table, planned before the other run's MERGE, wrote back the rows
  it had read.
"""
from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from pyspark.sql import types as T

from mariadb_server import mariadb_available
from spark_fixtures import require_delta_spark, spark  # noqa: F401  (the shared session fixture)
from test_faults import assert_exact, make_workload, write_config

from pipelines import delta_io, faults
from pipelines.config import load_config

SCHEMA = T.StructType([T.StructField("k", T.LongType()), T.StructField("v", T.LongType())])
UPSERT = [delta_io.MergeClause("update", None, {"v": "s.`v`"}),
          delta_io.MergeClause("insert", None, {"k": "s.`k`", "v": "s.`v`"})]


def _rows(path: str) -> list[tuple]:
    data = deltalake.DeltaTable(path).to_pyarrow_table()
    return sorted(zip(data.column("k").to_pylist(), data.column("v").to_pylist()))


def _table(spark, path: str, rows, backend: str) -> None:
    table = delta_io.open_table(path, backend, spark)
    table.create(SCHEMA)
    table.append(spark.createDataFrame(rows, SCHEMA))


def _other_writer(spark, path: str, rows, backend: str) -> None:
    """Another run's commit: its own thread, so it holds no pin of this one."""
    errors: list[BaseException] = []

    def body():
        try:
            delta_io.open_table(path, backend, spark).merge(spark.createDataFrame(rows, SCHEMA), "t.`k` = s.`k`",
                                                            UPSERT)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    assert not errors, errors


@pytest.fixture(params=["rs", "spark"])
def backend(request, spark):  # noqa: F811
    if request.param == "spark":
        require_delta_spark(spark)
    return request.param


@pytest.mark.spark
def test_pinned_commits_land_in_a_row_and_move_the_pin(spark, tmp_path, backend):  # noqa: F811
    path = str(tmp_path / "t")
    _table(spark, path, [(1, 10)], backend)
    table = delta_io.open_table(path, backend, spark)
    start = table.version()
    with table.pinned() as pin:
        assert pin.version == start
        table.add_columns([T.StructField("note", T.StringType())])
        table.merge(spark.createDataFrame([(1, 11), (2, 20)], SCHEMA), "t.`k` = s.`k`", UPSERT)
        table.overwrite(spark.createDataFrame([(3, 30)], SCHEMA),
                        delta_io.CommitInfo(metadata='{"silver_watermark": "0003"}'), overwrite_schema=True)
        assert pin.version == start + 3 == table.version()
    assert _rows(path) == [(3, 30)]
    newest = table.history(limit=1)[0]
    assert '"silver_watermark": "0003"' in newest.user_metadata


@pytest.mark.spark
@pytest.mark.parametrize("write", ["merge", "overwrite", "append", "add_columns"])
def test_a_commit_planned_before_another_writers_is_refused(spark, tmp_path, backend, write):  # noqa: F811
    path = str(tmp_path / "t")
    _table(spark, path, [(1, 10), (2, 20)], backend)
    table = delta_io.open_table(path, backend, spark)
    with table.pinned() as pin:
        planned_on = pin.version
        _other_writer(spark, path, [(2, 21), (5, 50)], backend)  # (lands: nothing pinned it)
        after_other = _rows(path)
        mine = spark.createDataFrame([(1, 99)], SCHEMA)
        with pytest.raises(delta_io.StaleRead, match="another writer committed first"):
            if write == "merge":
                table.merge(mine, "t.`k` = s.`k`", UPSERT)
            elif write == "overwrite":  # (the rewrite of an ALTER: the rows it read, written back)
                table.overwrite(mine)
            elif write == "append":
                table.append(mine, schema_evolution=False)
            else:
                table.add_columns([T.StructField("note", T.StringType())])
        assert pin.version == planned_on
    assert _rows(path) == after_other == [(1, 10), (2, 21), (5, 50)]
    assert table.version() == planned_on + 1


@pytest.mark.spark
def test_a_table_planned_as_new_is_not_written_into_once_another_made_it(spark, tmp_path, backend):  # noqa: F811
    path = str(tmp_path / "t")
    table = delta_io.open_table(path, backend, spark)
    with table.pinned() as pin:
        assert pin.version is None and not table.exists()
        made = threading.Thread(target=lambda: _table(spark, path, [(7, 70)], backend))
        made.start()
        made.join()
        with pytest.raises(delta_io.StaleRead):
            table.create_with_rows(SCHEMA, [(1, 10)], delta_io.CommitInfo(metadata='{"silver_watermark": "1"}'))
        with pytest.raises(delta_io.StaleRead):
            table.create(SCHEMA)
    assert _rows(path) == [(7, 70)]


def _at_once(calls) -> list:
    """Run each of ``calls`` in its own thread (no pin of this one), released together; what each
    returned, or the exception it raised."""
    gate = threading.Barrier(len(calls))
    out: list = [None] * len(calls)

    def body(i, call):
        gate.wait()
        try:
            out[i] = call()
        except BaseException as e:  # noqa: BLE001 - returned to the test
            out[i] = e

    threads = [threading.Thread(target=body, args=(i, c)) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


@pytest.mark.spark
@pytest.mark.parametrize("write", ["create_with_rows", "append_with_rows"])
def test_two_writers_that_found_no_table_land_their_rows_once(spark, tmp_path, backend, write):  # noqa: F811
    """Two runs' first commits to a table neither found, at the same moment (the CI failure of a
    keyless silver table holding every row twice): delta-rs lands a creating commit that lost
    version 0 as version 1, whatever its mode, unless told not to retry. One lands, the other
    plans again; the rows are in the table once."""
    for round_ in range(3):
        path = str(tmp_path / f"t{round_}")
        both_pinned = threading.Barrier(2)  # (without it, one writer can look after the other landed)

        def first_commit(v: int):
            table = delta_io.open_table(path, backend, spark)
            rows = pa.table({"k": pa.array([1, 2], pa.int64()), "v": pa.array([v, v], pa.int64())})
            with table.pinned() as pin:
                both_pinned.wait(timeout=120)
                assert pin.version is None
                if write == "create_with_rows":
                    return table.create_with_rows(SCHEMA, rows, delta_io.CommitInfo(metadata='{"silver_watermark": "1"}'))
                return table.append_with_rows(SCHEMA, rows, delta_io.CommitInfo(metadata='{"silver_watermark": "1"}'))

        out = _at_once([lambda: first_commit(10), lambda: first_commit(20)])
        landed = [o for o in out if o is True]
        stale = [o for o in out if isinstance(o, delta_io.StaleRead)]
        assert len(landed) == 1 and len(stale) == 1, out
        rows = _rows(path)
        assert rows in ([(1, 10), (2, 10)], [(1, 20), (2, 20)]), rows
        assert delta_io.open_table(path, "rs").version() == 0


@pytest.mark.spark
def test_two_creates_of_a_missing_table_make_one_commit(spark, tmp_path, backend):  # noqa: F811
    """``create`` unpinned (state tables, bronze) by two writers at once: one creates, the other
    finds the table made; the log holds one commit."""
    for round_ in range(8):  # (delta-spark's race below came once in ten rounds)
        path = str(tmp_path / f"t{round_}")
        out = _at_once([lambda: delta_io.open_table(path, backend, spark).create(SCHEMA)] * 2)
        assert True in out and not [o for o in out if isinstance(o, BaseException)], out
        assert delta_io.open_table(path, "rs").version() == 0
        assert delta_io.open_table(path, backend, spark).schema().fieldNames() == ["k", "v"]


@pytest.mark.spark
def test_a_delta_spark_create_that_finds_another_writers_log_begun_waits_for_its_first_commit(
        spark, tmp_path, monkeypatch):  # noqa: F811
    """The CI failure of the test above: another writer has begun the table's log (its directory)
    but not yet committed to it. delta-spark's ``CREATE TABLE IF NOT EXISTS`` then either takes the
    location for a table and does nothing, or (the directory made between its two looks) refuses
    it as "not empty and also not a Delta table". The create waits for that first commit and finds
    the table made; a log that no commit follows is said, naming the path, after the wait."""
    require_delta_spark(spark)
    monkeypatch.setattr("pipelines.delta_io.spark_commits.BEGUN_WAIT_S", 3.0)
    for committed in (True, False):
        path = tmp_path / f"t{committed}"
        (path / "_delta_log").mkdir(parents=True)
        timer = threading.Timer(1.0, lambda: deltalake.write_deltalake(
            str(path), pa.table({"k": pa.array([], pa.int64()), "v": pa.array([], pa.int64())})))
        table = delta_io.open_table(str(path), "spark", spark)
        if committed:
            timer.start()
            try:
                assert table.create(SCHEMA) is False
            finally:
                timer.join()
            assert delta_io.open_table(str(path), "rs").version() == 0
        else:
            started = time.monotonic()
            with pytest.raises(delta_io.DeltaIOError, match=f"{path}: its _delta_log holds no commit after 3 s"):
                table.create(SCHEMA)
            assert time.monotonic() - started >= 3.0
            assert not list((path / "_delta_log").iterdir())


@pytest.mark.spark
def test_delta_spark_skips_a_pinned_commit_another_pinned_writer_made_first(spark, tmp_path):  # noqa: F811
    """Two writers pinned on one version: the first records the pin's transaction id; delta-spark
    then skips the second as already done, which the missing token tells."""
    require_delta_spark(spark)
    path = str(tmp_path / "t")
    _table(spark, path, [(1, 10)], "spark")
    table = delta_io.open_table(path, "spark", spark)
    with table.pinned() as pin:
        first_done = threading.Event()

        def other():
            with table.pinned():
                table.merge(spark.createDataFrame([(1, 11)], SCHEMA), "t.`k` = s.`k`", UPSERT)
            first_done.set()

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert first_done.is_set()
        assert table.last_txn(delta_io.PIN_APP_ID) == pin.version + 1
        with pytest.raises(delta_io.StaleRead):
            table.merge(spark.createDataFrame([(1, 99)], SCHEMA), "t.`k` = s.`k`", UPSERT)
    assert _rows(path) == [(1, 11)]


@pytest.mark.spark
@pytest.mark.parametrize("first", ["driver rows", "dataframe"])
def test_on_delta_spark_writers_pinned_on_one_version_refuse_each_other_whichever_library_commits(
        spark, tmp_path, first):  # noqa: F811
    """On the delta-spark backend a small table's MERGE of the driver's rows is committed by
    delta-rs, a DataFrame's MERGE by delta-spark: of two writers pinned on one version, whichever
    library makes the first commit, the second is refused and lands nothing."""
    require_delta_spark(spark)
    path = str(tmp_path / "t")
    _table(spark, path, [(1, 10)], "spark")
    table = delta_io.open_table(path, "spark", spark)

    def by_rows(v: int) -> None:
        table.merge_rows(pa.table({"k": pa.array([1], pa.int64()), "v": pa.array([v], pa.int64())}),
                         "t.`k` = s.`k`", UPSERT, source_schema=SCHEMA)

    def by_frame(v: int) -> None:
        table.merge(spark.createDataFrame([(1, v)], SCHEMA), "t.`k` = s.`k`", UPSERT)

    mine, theirs = (by_frame, by_rows) if first == "driver rows" else (by_rows, by_frame)
    with table.pinned() as pin:
        def other():
            with table.pinned():
                theirs(11)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert table.last_txn(delta_io.PIN_APP_ID) == pin.version + 1
        with pytest.raises(delta_io.StaleRead):
            mine(99)
    assert _rows(path) == [(1, 11)]
    made = (Path(path) / "_delta_log" / f"{pin.version + 1:020d}.json").read_text()
    assert ("delta-rs" in made) == (first == "driver rows"), made  # (the library named is the one that committed)


# ---------------------------------------------------------------------------------------------------
# the silver step: two runs, one stopped before a commit while the other does everything


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    w = make_workload(tmp_path_factory.mktemp("stale"))
    yield w
    w.server.stop()


def _silver_run(spark, cfg, errors: list) -> None:
    from pipelines.silver import step as silver_step

    try:
        silver_step.run(spark, cfg)
    except BaseException as e:  # noqa: BLE001 - reported by the test
        errors.append(e)


# (the commit the first run stops before; the workload's ALTER TABLE orders ADD COLUMN region ...
# DEFAULT 'eu' and TRUNCATE TABLE counters rewrite their tables: overwrite.silver #1 and #2)
POINTS = ["overwrite.silver.before#1", "overwrite.silver.before#2", "merge.silver.before#1",
          "create.silver.before#1", "append.silver.before#1", "merge.silver.after#1"]
# delta-spark (a silver run costs it seconds a table): one commit of each kind its backend pins
# differently (the second overwrite is the first's code on another table; a wait after a commit
# is the backend-neutral step's; delta-spark MERGEs a keyed table with hard deletes, its metrics
# counting what each change did, so this workload makes no silver append there)
SPARK_POINTS = ["overwrite.silver.before#1", "merge.silver.before#1", "create.silver.before#1"]


@pytest.fixture(scope="module")
def bronze_of(workload, spark, tmp_path_factory):  # noqa: F811
    """``bronze_of(backend)``: a warehouse folder holding the workload's bronze (written once per
    backend, then copied into each test's warehouse)."""
    from pipelines import bronze

    made: dict[str, Path] = {}

    def of(backend: str) -> Path:
        if backend not in made:
            folder = tmp_path_factory.mktemp(f"bronze-{backend}")
            cfg = load_config(str(write_config(folder, workload.binlogs, folder / "wh")), {"delta.backend": backend})
            bronze.run(spark, cfg)
            made[backend] = folder / "wh"
        return made[backend]

    return of


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("which,point", [("rs", p) for p in POINTS] + [("spark", p) for p in SPARK_POINTS])
def test_a_silver_run_stopped_before_a_commit_plans_again_after_another_run(workload, spark, bronze_of, tmp_path,
                                                                             which, point, capsys):  # noqa: F811
    backend = which
    if backend == "spark":
        require_delta_spark(spark)

    warehouse = tmp_path / "wh"
    cfg = load_config(str(write_config(tmp_path, workload.binlogs, warehouse)), {"delta.backend": backend})
    shutil.copytree(bronze_of(backend), warehouse)  # (bronze as a run made it: silver's runs are the test)
    go = tmp_path / "go"
    faults.configure(f"{point}:wait={go}")
    try:
        first_errors: list = []
        first = threading.Thread(target=_silver_run, args=(spark, cfg, first_errors))
        first.start()
        deadline = time.monotonic() + 300
        while not Path(f"{go}.waiting").exists():
            assert first.is_alive(), first_errors
            assert time.monotonic() < deadline, f"the first run never reached {point}"
            time.sleep(0.1)
        second_errors: list = []
        _silver_run(spark, cfg, second_errors)  # (the point's count is past: it does not stop)
        assert not second_errors, second_errors
        assert_exact(workload, warehouse, f"the second run, while the first waits at {point}")
        go.write_text("go")
        first.join(600)
        assert not first.is_alive()
        assert not first_errors, first_errors
    finally:
        faults.configure(None)
    assert_exact(workload, warehouse, f"both runs, the first stopped at {point}")
    err = capsys.readouterr().err
    if not point.endswith(".after#1"):  # (after its own commit, the first run may find nothing stale)
        assert "another run committed to the table first" in err and "planning the segment again" in err, err[-3000:]
