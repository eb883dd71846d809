"""Crashes and failures at every commit point, then a re-run: bronze holds each row change exactly
once and silver equals the source database.

One private MariaDB server writes a workload into three binlog files (FLUSH BINARY LOGS; the last
one is still the server's current file): inserts, updates, deletes, primary-key changes, a keyless
table with duplicate rows, a multi-table transaction, ``ALTER TABLE ... ADD COLUMN`` and
``TRUNCATE``. The pipeline runs as ``jobs/run_pipeline.py`` subprocesses (a real Spark JVM each
time) with one bronze batch per file, so points are reached several times.

1. A clean run with ``BINLOG_DELTA_FAULT=trace:<file>`` lists every fault point the job reaches
   (:mod:`pipelines.faults`), and must itself be exact.
2. For each chosen ``<point>#<n>``, on a fresh warehouse: a run with the fault armed must die by
   SIGKILL (``kill``, exit -9) or fail (``raise``, exit 1, by ``InjectedFault``); a run without it
   must succeed; then :func:`check`: bronze has each ``(source_file, event_pos, row_idx)`` of the
   binlogs' row changes (:func:`pipelines.binlog.changes.iter_changes`) exactly once and nothing
   else, and every silver table equals the server's ``SELECT``.
3. Kills at random moments: the test SIGKILLs the job's driver after a random delay, several times
   in a row on one warehouse (each run resumes what the killed one left), then a clean run must
   converge.

CI runs a representative subset (:data:`CI_KILL`, :data:`CI_RAISE`: decode, bronze data, manifest
pending and committed rows, silver MERGE before and after, schema evolution, TRUNCATE, watermarks;
some at their 2nd/3rd occurrence, i.e. in later batches), two cases at a time.

Environment:

* ``FAULTS_FULL=1``: every point and every occurrence the trace lists, in both modes, and 8 random
  kills (about 180 cases: over an hour on two cores);
* ``FAULTS_MODES=kill,raise``: with ``FAULTS_FULL``, the modes to run (default both);
* ``FAULTS_SKIP=<n>``: with ``FAULTS_FULL``, leave out the first ``n`` cases of the full list (resume
  a long run that was stopped: its report names the cases done);
* ``FAULTS_JOBS=<n>``: cases run at a time (default 2);
* ``FAULTS_REPORT=<file>``: append the per-case report (exit codes, seconds, rows lost/duplicated);
* ``FAULTS_SEED=<n>``: the seed of the random kills (printed by every run).
"""
from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from mariadb_server import MariaDBServer, mariadb_available
from spark_fixtures import TEST_CONF

from pipelines import faults
from pipelines.binlog.changes import RowChange, iter_changes
from pipelines.bronze.schema import BRONZE_TABLE
from pipelines.paths import silver_table_path
from pipelines.delta_io import open_table

REPO = Path(__file__).resolve().parents[1]
JOB = REPO / "jobs" / "run_pipeline.py"
DB = "fx"
JOB_TIMEOUT = 600

# ---------------------------------------------------------------------------------------------------
# the fault points themselves (no Spark)


def test_parse_fault_specs():
    assert faults.parse("append.manifest.before#3:kill") == faults.FaultSpec("append.manifest.before", 3, "kill")
    assert faults.parse(" merge.*.after:raise ") == faults.FaultSpec("merge.*.after", 1, "raise")
    assert faults.parse("trace:/tmp/x:y.txt") == faults.FaultSpec(None, 0, "trace", "/tmp/x:y.txt")
    for bad in ("append.bronze.before", "append.bronze.before:explode", "x#0:kill", "x#two:kill", "#2:kill",
                ":kill", "trace:"):
        with pytest.raises(faults.FaultSpecError, match="BINLOG_DELTA_FAULT"):
            faults.parse(bad)


def test_table_kinds():
    wh = "/data/wh"
    assert [faults.table_kind(f"{wh}/{p}") for p in (
        "bronze/binlog_changes", "silver/shop/orders", "silver/_pipeline/manifest", "_pipeline/manifest",
        "_pipeline/silver_watermarks", "_pipeline/schema_history", "_pipeline/runs/")] == [
        "bronze", "silver", "silver", "manifest", "watermarks", "schema_history", "runs"]
    assert faults.table_kind("s3a://bucket/t") == "table"


def test_points_around_a_real_commit(tmp_path):
    """``before`` fails with nothing committed; ``after`` fails with the commit made; counts go per
    process; trace lists every point."""
    import deltalake
    import pyarrow as pa

    from pipelines import delta_io
    from pipelines.delta_io.rs_writes import merge_rs

    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pa.table({"k": pa.array([1], pa.int64())}))
    insert = [delta_io.MergeClause("insert", None, {"k": "s.`k`"})]

    def add(k: int):
        merge_rs(path, pa.table({"k": pa.array([k], pa.int64())}), "t.`k` = s.`k`", insert)

    def keys():
        return sorted(deltalake.DeltaTable(path).to_pyarrow_table().column("k").to_pylist())

    try:
        faults.configure("merge.table.before:raise")
        with pytest.raises(faults.InjectedFault, match=r"merge\.table\.before"):
            add(2)
        assert keys() == [1]
        faults.configure("merge.table.after#2:raise")
        add(3)  # the 1st time: goes through
        with pytest.raises(faults.InjectedFault):
            add(4)
        assert keys() == [1, 3, 4]
        faults.configure(f"trace:{tmp_path / 'trace.txt'}")
        add(5)
        lines = (tmp_path / "trace.txt").read_text().splitlines()
        assert [line.split("\t")[0] for line in lines] == ["merge.table.before", "merge.table.after"]
        assert all(line.split("\t")[2] == str(os.getpid()) for line in lines)
    finally:
        faults.configure(None)
    add(6)  # disarmed
    assert keys() == [1, 3, 4, 5, 6]


def test_kill_mode_sigkills_the_process_at_the_nth_time():
    code = "from pipelines import faults\nfor i in range(5):\n    print(i, flush=True)\n    faults.point('p.q.r')\n"
    env = {**os.environ, faults.ENV: "p.q.*#3:kill"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=str(REPO), env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert proc.stdout.split() == ["0", "1", "2"]
    assert "fault: SIGKILL at p.q.r (#3 of p.q.*)" in proc.stderr
    bad = subprocess.run([sys.executable, "-c", "import pipelines.faults"], cwd=str(REPO),
                         env={**os.environ, faults.ENV: "nonsense"}, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "FaultSpecError" in bad.stderr


# ---------------------------------------------------------------------------------------------------
# the workload: one list of SQL scripts per binlog file (FLUSH BINARY LOGS after each)

FILES = [
    f"""
CREATE DATABASE {DB};
CREATE TABLE {DB}.orders (id INT NOT NULL PRIMARY KEY, customer VARCHAR(40), amount DECIMAL(10,2),
                          created DATETIME, qty INT) ENGINE=InnoDB;
CREATE TABLE {DB}.events (kind VARCHAR(20), n INT, at DATETIME) ENGINE=InnoDB;
CREATE TABLE {DB}.counters (k INT NOT NULL PRIMARY KEY, v BIGINT) ENGINE=InnoDB;
INSERT INTO {DB}.orders VALUES
  (1,'ann',10.50,'2024-01-01 10:00:00',1),(2,'bob',20.00,'2024-01-02 11:00:00',2),
  (3,'cid',30.25,'2024-01-03 12:00:00',3),(4,'dee',40.00,'2024-01-04 13:00:00',4),
  (5,'eve',50.75,'2024-01-05 14:00:00',5),(6,'fay',60.00,'2024-01-06 15:00:00',6);
INSERT INTO {DB}.events VALUES ('click',1,'2024-01-01 00:00:01'),('click',1,'2024-01-01 00:00:01'),
  ('view',2,'2024-01-01 00:00:02'),('view',3,NULL),(NULL,NULL,NULL);
INSERT INTO {DB}.counters VALUES (1,0),(2,0),(3,0);
""",
    f"""
UPDATE {DB}.orders SET amount = amount + 1, qty = qty * 10 WHERE id IN (1, 2);
UPDATE {DB}.orders SET id = 30 WHERE id = 3;
DELETE FROM {DB}.orders WHERE id = 4;
UPDATE {DB}.events SET n = 10 WHERE kind = 'click' LIMIT 1;
DELETE FROM {DB}.events WHERE kind = 'view' AND n = 3;
UPDATE {DB}.counters SET v = v + 1 WHERE k = 1;
UPDATE {DB}.counters SET v = v + 1 WHERE k = 1;
UPDATE {DB}.counters SET v = v + 1 WHERE k = 2;
START TRANSACTION;
INSERT INTO {DB}.orders VALUES (7,'gus',70.00,'2024-01-07 16:00:00',7);
INSERT INTO {DB}.events VALUES ('buy',7,'2024-01-07 16:00:00');
COMMIT;
ALTER TABLE {DB}.orders ADD COLUMN note VARCHAR(30) NULL;
INSERT INTO {DB}.orders VALUES (8,'hal',80.00,'2024-01-08 17:00:00',8,'with a note');
UPDATE {DB}.orders SET note = 'later' WHERE id = 1;
UPDATE {DB}.orders SET id = 3, note = 'back to 3' WHERE id = 30;
INSERT INTO {DB}.events VALUES ('click',1,'2024-01-01 00:00:01'),('buy',8,'2024-01-08 17:00:00');
UPDATE {DB}.counters SET v = v + 5;
ALTER TABLE {DB}.orders ADD COLUMN region CHAR(2) NOT NULL DEFAULT 'eu';
UPDATE {DB}.orders SET region = 'us' WHERE id = 2;
""",
    f"""
TRUNCATE TABLE {DB}.counters;
INSERT INTO {DB}.counters VALUES (10,100),(11,110);
UPDATE {DB}.counters SET v = v - 1 WHERE k = 11;
DELETE FROM {DB}.orders WHERE id = 5;
UPDATE {DB}.orders SET customer = 'ann2', amount = 11.11, created = '2025-02-03 04:05:06' WHERE id = 1;
ALTER TABLE {DB}.orders MODIFY qty VARCHAR(10);
UPDATE {DB}.orders SET qty = 'ten' WHERE id = 6;
DELETE FROM {DB}.events WHERE kind IS NULL;
""",
]

# what is compared: table -> (columns, order by); every value as the server's text
COMPARE = {
    "orders": (["id", "customer", "amount", "created", "qty", "note", "region"], "id"),
    "events": (["kind", "n", "at"], "kind, n, at"),
    "counters": (["k", "v"], "k"),
}


@dataclass(frozen=True)
class Workload:
    server: MariaDBServer
    binlogs: Path  # a copy of the binlog files
    changes: frozenset  # (source_file, event_pos, row_idx) of every row change in the files
    expected: dict  # table -> sorted rows (tuples of text or None) from the server


def _server_rows(server: MariaDBServer, table: str) -> list[tuple]:
    cols, order = COMPARE[table]
    exprs = [f"DATE_FORMAT(`{c}`, '%Y-%m-%d %H:%i:%s')" if c in ("created", "at") else f"`{c}`" for c in cols]
    rows = server.query_rows(f"SELECT {', '.join(exprs)} FROM `{DB}`.`{table}` ORDER BY {order}")
    return sorted((tuple(r) for r in rows), key=_sort_key)


def _sort_key(row: tuple) -> tuple:
    return tuple((v is not None, v or "") for v in row)


def make_workload(basedir: Path) -> Workload:
    """Start a private server, write the workload into several binlog files, copy them."""
    server = MariaDBServer(basedir / "mariadb", server_id=7, row_image="FULL", checksum="CRC32")
    server.start()
    for i, script in enumerate(FILES):
        if i:
            server.flush_logs()
        server.sql(script)  # the last file stays the server's current one, as in production
    binlogs = basedir / "binlogs"
    binlogs.mkdir()
    changes = set()
    for f in server.binlog_files():
        target = binlogs / f.name
        target.write_bytes(f.read_bytes())
        for ch in iter_changes(str(target)):
            if isinstance(ch, RowChange):
                changes.add((Path(ch.file).name, ch.pos, ch.row_idx))
    expected = {t: _server_rows(server, t) for t in COMPARE}
    return Workload(server, binlogs, frozenset(changes), expected)


@pytest.fixture(scope="module")
def workload(tmp_path_factory) -> Workload:
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    w = make_workload(tmp_path_factory.mktemp("faults"))
    yield w
    w.server.stop()


# ---------------------------------------------------------------------------------------------------
# jobs


def write_config(folder: Path, binlogs: Path, warehouse: Path) -> Path:
    """A test configuration: one bronze batch per binlog file, a small fast Spark, delta-rs."""
    conf = {"spark.sql.session.timeZone": "UTC", **TEST_CONF, "spark.ui.enabled": "false"}
    text = {
        "input": str(binlogs),
        "warehouse": str(warehouse),
        "progress": False,
        "parallelism": {"max_batch_bytes": 1},
        "delta": {"backend": "rs"},
        "spark": {"master": "local[2]", "app_name": "binlog-delta-faults", "conf": conf},
    }
    path = folder / "pipeline.yaml"
    path.write_text(json.dumps(text, indent=2))  # JSON is YAML
    return path


@dataclass
class JobResult:
    rc: int
    seconds: float
    out: str
    err: str

    def tail(self, n: int = 3000) -> str:
        return f"exit {self.rc} after {self.seconds:.1f} s\n--- stdout ---\n{self.out[-n:]}\n--- stderr ---\n{self.err[-n:]}"


def start_job(config: Path, binlogs: Path | str, warehouse: Path | str, *, fault: str | None = None,
              extra: tuple[str, ...] = (), env: dict | None = None, job: Path = JOB) -> subprocess.Popen:
    """Start ``jobs/run_pipeline.py`` (or ``job``) in its own process group (so the test can kill all
    of it), in ``env`` (default: this process's environment)."""
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != faults.ENV}
    if fault:
        env[faults.ENV] = fault
    cmd = [sys.executable, str(job), "--config", str(config), "--binlog-dir", str(binlogs),
           "--warehouse", str(warehouse), "--no-progress", *extra]
    return subprocess.Popen(cmd, env=env, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL what is left of a job's process group (its Spark JVM, Python workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def finish(proc: subprocess.Popen, started: float, timeout: float = JOB_TIMEOUT) -> JobResult:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
    kill_group(proc)  # the JVM of a killed driver
    return JobResult(proc.returncode, time.monotonic() - started, out, err)


def run_job(config: Path, binlogs: Path, warehouse: Path, *, fault: str | None = None,
            extra: tuple[str, ...] = ()) -> JobResult:
    started = time.monotonic()
    return finish(start_job(config, binlogs, warehouse, fault=fault, extra=extra), started)


# ---------------------------------------------------------------------------------------------------
# checks


def _silver_rows(warehouse: Path | str, table: str) -> list[tuple]:
    cols, _order = COMPARE[table]
    path = silver_table_path(str(warehouse), DB, table)
    if not open_table(path, "rs").exists():
        return []
    data = open_table(path).read_arrow()  # (delta-rs, whichever backend wrote it: deletion vectors too)
    present = {c.lower(): c for c in data.column_names}
    out = []
    for r in data.to_pylist():
        out.append(tuple(_text(r[present[c]]) if c in present else None for c in cols))
    return sorted(out, key=_sort_key)


def _text(v) -> str | None:
    """A silver value as the server prints it."""
    if v is None:
        return None
    if hasattr(v, "strftime"):
        return v.strftime("%Y-%m-%d %H:%M:%S")
    return str(v)


@dataclass(frozen=True)
class Verdict:
    bronze_rows: int
    lost: int  # row changes of the binlogs missing from bronze
    duplicated: int  # bronze rows beyond the first of their (file, pos, row_idx)
    unknown: int  # bronze rows that are no row change of the binlogs
    silver_diff: dict  # table -> (missing from silver, extra in silver)

    @property
    def exact(self) -> bool:
        return not (self.lost or self.duplicated or self.unknown or self.silver_diff)


def check(workload: Workload, warehouse: Path | str) -> Verdict:
    """Compare bronze with the binlogs' row changes and silver with the server (``warehouse``: a
    folder, or a URI the process's storage settings reach)."""
    bronze_path = f"{str(warehouse).rstrip('/')}/{BRONZE_TABLE}"
    keys: collections.Counter = collections.Counter()
    if open_table(bronze_path, "rs").exists():
        data = open_table(bronze_path).read_arrow(["source_file", "event_pos", "row_idx"])
        keys.update(zip(*(data.column(c).to_pylist() for c in ("source_file", "event_pos", "row_idx"))))
    diff = {}
    for table, want in workload.expected.items():
        got = _silver_rows(warehouse, table)
        if got != want:
            missing = collections.Counter(want) - collections.Counter(got)
            extra = collections.Counter(got) - collections.Counter(want)
            diff[table] = (sorted(missing.elements(), key=_sort_key), sorted(extra.elements(), key=_sort_key))
    return Verdict(
        bronze_rows=sum(keys.values()),
        lost=len(workload.changes - set(keys)),
        duplicated=sum(n - 1 for n in keys.values() if n > 1),
        unknown=sum(n for k, n in keys.items() if k not in workload.changes),
        silver_diff=diff,
    )


def assert_exact(workload: Workload, warehouse: Path | str, context: str = "") -> Verdict:
    v = check(workload, warehouse)
    assert v.exact, (
        f"{context}: bronze {v.bronze_rows} rows for {len(workload.changes)} changes: lost {v.lost}, "
        f"duplicated {v.duplicated}, unknown {v.unknown}; silver differences {v.silver_diff}"
    )
    assert v.bronze_rows == len(workload.changes)
    return v


# ---------------------------------------------------------------------------------------------------
# the points a clean run reaches


@dataclass(frozen=True)
class Trace:
    points: tuple[str, ...]  # every point reached, in order
    seconds: float  # the clean run's duration

    def count(self, name: str) -> int:
        return self.points.count(name)

    def names(self) -> list[str]:
        return sorted(set(self.points))


@pytest.fixture(scope="module")
def trace(workload, tmp_path_factory) -> Trace:
    """One clean run with ``BINLOG_DELTA_FAULT=trace:<file>``: the points reached (and an exact result)."""
    tmp = tmp_path_factory.mktemp("trace")
    warehouse = tmp / "wh"
    config = write_config(tmp, workload.binlogs, warehouse)
    result = run_job(config, workload.binlogs, warehouse, fault=f"trace:{tmp / 'points.txt'}")
    assert result.rc == 0, result.tail()
    assert_exact(workload, warehouse, "clean run")
    points = tuple(line.split("\t", 1)[0] for line in (tmp / "points.txt").read_text().splitlines())
    return Trace(points, result.seconds)


# ---------------------------------------------------------------------------------------------------
# one fault, then a clean re-run

EXPECTED_RC = {"kill": -signal.SIGKILL, "raise": 1}


@dataclass(frozen=True)
class Case:
    point: str
    nth: int
    mode: str  # kill | raise

    @property
    def spec(self) -> str:
        return f"{self.point}#{self.nth}:{self.mode}"


@dataclass
class Outcome:
    case: Case
    faulted: JobResult
    rerun: JobResult | None
    verdict: Verdict | None
    problem: str | None

    def line(self) -> str:
        v = self.verdict
        rows = "-" if v is None else f"bronze {v.bronze_rows} lost {v.lost} dup {v.duplicated} silver_diff {len(v.silver_diff)}"
        rerun = "-" if self.rerun is None else f"{self.rerun.rc} ({self.rerun.seconds:.0f} s)"
        return (f"{self.case.spec:<40} faulted exit {self.faulted.rc} ({self.faulted.seconds:.0f} s), "
                f"re-run exit {rerun}; {rows}; {'OK' if self.problem is None else 'FAILED: ' + self.problem}")


def run_case(workload: Workload, case: Case, folder: Path) -> Outcome:
    """Fresh warehouse, a run with the fault armed, a clean re-run, then the exactness check."""
    folder.mkdir(parents=True)
    warehouse = folder / "wh"
    config = write_config(folder, workload.binlogs, warehouse)
    faulted = run_job(config, workload.binlogs, warehouse, fault=case.spec)
    if faulted.rc != EXPECTED_RC[case.mode]:
        return Outcome(case, faulted, None, None, f"faulted run: expected exit {EXPECTED_RC[case.mode]}\n"
                                                 f"{faulted.tail()}")
    if case.mode == "raise" and "InjectedFault" not in faulted.err:
        return Outcome(case, faulted, None, None, f"faulted run failed, but not by the fault\n{faulted.tail()}")
    rerun = run_job(config, workload.binlogs, warehouse)
    if rerun.rc != 0:
        return Outcome(case, faulted, rerun, None, f"re-run failed\n{rerun.tail()}")
    verdict = check(workload, warehouse)
    problem = None
    if not verdict.exact or verdict.bronze_rows != len(workload.changes):
        problem = (f"not exact: bronze {verdict.bronze_rows} rows for {len(workload.changes)} changes, lost "
                   f"{verdict.lost}, duplicated {verdict.duplicated}, unknown {verdict.unknown}; silver "
                   f"differences {verdict.silver_diff}")
    return Outcome(case, faulted, rerun, verdict, problem)


def run_cases(workload: Workload, cases: list[Case], folder: Path) -> list[Outcome]:
    """Run the cases, ``FAULTS_JOBS`` (default 2) at a time; report every outcome."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = max(1, int(os.environ.get("FAULTS_JOBS", "2")))
    started = time.monotonic()
    def one(i: int, case: Case) -> Outcome:
        outcome = run_case(workload, case, folder / f"case{i:03d}")
        if os.environ.get("FAULTS_REPORT"):  # as each case ends: a long run interrupted still reports
            report(f"[{i + 1}/{len(cases)}] {outcome.line()}")
        return outcome

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outcomes = list(pool.map(lambda ic: one(*ic), enumerate(cases)))
    lines = [o.line() for o in outcomes]
    lines.append(f"{len(cases)} case(s) ({sum(c.mode == 'kill' for c in cases)} kill, "
                 f"{sum(c.mode == 'raise' for c in cases)} raise) in {time.monotonic() - started:.0f} s, "
                 f"{jobs} at a time; {sum(o.problem is not None for o in outcomes)} failed")
    report("\n".join(lines))
    return outcomes


def report(text: str) -> None:
    print(text)
    path = os.environ.get("FAULTS_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n")


def assert_all_ok(outcomes: list[Outcome]) -> None:
    failed = [o for o in outcomes if o.problem is not None]
    assert not failed, "\n\n".join(f"{o.case.spec}: {o.problem}" for o in failed)


# The CI subset: (point, occurrence) per mode. One bronze batch per file, so with the workload's
# files: manifest #1/#2 are batch 1's pending/committed rows, #3/#4 batch 2's, ...
CI_KILL = [
    ("append.bronze.materialize", 1),  # the tasks staged their Parquet files, not yet committed
    ("append.bronze.after", 2),  # a later batch
    ("append.manifest.before", 1),  # the write-ahead (pending) rows of batch 1
    ("append.manifest.after", 4),  # batch 2's committed rows
    ("merge.silver.before", 1),
    ("merge.silver.after", 1),
    ("append.silver.after", 1),  # a segment of new rows only, appended to silver, no watermark row yet
    ("create.silver.after", 2),  # a new silver table created with its rows (the driver path), no watermark row yet
    ("add_columns.silver.after", 1),  # ALTER TABLE ... ADD COLUMN reached silver
    ("overwrite.silver.after", 1),  # TRUNCATE applied, its watermark not yet written
    ("append.watermarks.before", 1),
]
CI_RAISE = [
    ("append.bronze.before", 3),
    ("append.manifest.after", 2),
    ("merge.silver.after", 1),
]


def chosen_cases(trace: Trace) -> list[Case]:
    if os.environ.get("FAULTS_FULL") == "1":
        modes = os.environ.get("FAULTS_MODES", "kill,raise").split(",")
        unknown = set(modes) - set(EXPECTED_RC)
        assert not unknown, f"FAULTS_MODES: unknown modes {sorted(unknown)} (known: {sorted(EXPECTED_RC)})"
        every = [Case(name, n, mode) for mode in ("kill", "raise") for name in trace.names()
                 for n in range(1, trace.count(name) + 1)]
        return [c for c in every[int(os.environ.get("FAULTS_SKIP", "0")):] if c.mode in modes]
    cases = [Case(p, n, "kill") for p, n in CI_KILL] + [Case(p, n, "raise") for p, n in CI_RAISE]
    missing = [c.spec for c in cases if trace.count(c.point) < c.nth]
    assert not missing, f"the clean run never reached {missing}; points reached: {trace.names()}"
    return cases


@pytest.mark.spark
@pytest.mark.slow
def test_trace_lists_the_commit_points(trace):
    """The clean run reaches bronze, manifest and silver commit points (and is exact: see the fixture)."""
    names = trace.names()
    report(f"clean run {trace.seconds:.0f} s, {len(trace.points)} points reached, {len(names)} distinct: "
           + ", ".join(f"{n} x{trace.count(n)}" for n in names))
    for needed in ("append.bronze.materialize", "append.bronze.before", "append.bronze.after",
                   "append.manifest.before", "append.manifest.after", "merge.silver.before",
                   "merge.silver.after", "append.silver.after", "append.watermarks.after"):
        assert needed in names
    assert trace.count("append.bronze.before") == len(FILES), "one bronze batch per binlog file"


@pytest.mark.spark
@pytest.mark.slow
def test_kill_or_raise_at_each_commit_point_then_rerun(workload, trace, tmp_path):
    outcomes = run_cases(workload, chosen_cases(trace), tmp_path)
    assert_all_ok(outcomes)


@pytest.mark.spark
@pytest.mark.slow
def test_kill_at_random_moments(workload, trace, tmp_path):
    """SIGKILL the job after a random delay, several times in a row on one warehouse (each run resumes
    what the killed one left), then a clean run converges. Seeded: the seed is printed."""
    seed = int(os.environ.get("FAULTS_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    rounds = 8 if os.environ.get("FAULTS_FULL") == "1" else 2
    warehouse = tmp_path / "wh"
    config = write_config(tmp_path, workload.binlogs, warehouse)
    log = []
    for i in range(rounds):
        delay = rng.uniform(2.0, max(trace.seconds, 10.0))
        started = time.monotonic()
        proc = start_job(config, workload.binlogs, warehouse)
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)  # the driver, as a node or container loss would
        result = finish(proc, started)
        log.append(f"round {i + 1}: kill after {delay:.1f} s -> exit {result.rc}")
        assert result.rc in (0, -signal.SIGKILL), result.tail()
    final = run_job(config, workload.binlogs, warehouse)
    report(f"random kills (FAULTS_SEED={seed}): " + "; ".join(log) + f"; final run exit {final.rc}")
    assert final.rc == 0, final.tail()
    assert_exact(workload, warehouse, f"random kills, FAULTS_SEED={seed}")
