"""The snapshot load: a logical dump's rows into bronze at the dump's binlog position, its tables'
``CREATE TABLE`` into the schema history there, all or nothing per dump.

>>> stats = run(spark, cfg, ["/backups/shop.sql.gz"])  # doctest: +SKIP
>>> stats.summary()  # doctest: +SKIP
'snapshot load 20260101T000000-1a2b3c4d ok: 1 dump(s) loaded, 0 already; 3 table(s), rows r=1200; ...'

How one dump goes
-----------------
1. **Position**: from the dump's header (``--master-data``, ``--source-data``, ``--dump-slave``;
   :func:`pipelines.snapshot.source.read_position`) unless the user gives it (``--position
   FILE:POS``, ``--gtid SET``); a GTID set alone is found among bronze's changes
   (:mod:`pipelines.snapshot_load.position`); a dump without any is refused, saying how to give it. Its ``_seq`` start is
   :func:`pipelines.bronze.schema.snapshot_start`: after every change before the position, before
   every change at or after it. A mydumper folder's position is its ``metadata``'s. The dump's
   identity (its name, size, first and last 64 KiB and the position) makes the transaction ids of
   every write: loading the same dump again changes nothing.
2. **Tasks** (:mod:`pipelines.snapshot_load.tasks`): a plain file is cut into byte ranges of
   ``parallelism.target_bytes_per_task``; one Spark job finds their ``DELIMITER`` lines (routine
   bodies, stepped over when a range looks for its first statement), one their outline (the
   statements that are not data: the session and the ``CREATE TABLE`` each range starts with),
   then one reads the rows, each task from the first statement boundary in its range. A gzip or
   zstd file is one task, streaming; so is each table of a ``--tab`` folder and each data chunk of a
   mydumper folder. The driver only joins outlines; it never reads the data.
   On delta-rs the tasks write bronze's Parquet files themselves; on delta-spark the rows are
   kept on the executors until the write.
3. **All or nothing**: a task that meets a bad statement (a dump cut mid-statement, a value that
   cannot be its column's) returns its error; the driver raises the first one by offset, naming
   the file and the byte offset, after deleting the staged files: nothing of the dump lands.
4. **Writes**, in this order, each with the Delta transaction id ``snapshot-<dump id>``:

   a. ``_pipeline/snapshots``: the dump's ``pending`` row;
   b. bronze: every row, op ``r``, in one commit;
   c. ``_pipeline/ddl``: the ``CREATE TABLE`` of each table loaded, at the snapshot's start;
   d. ``_pipeline/schema_history`` made again from seeds and ``_pipeline/ddl``
      (:func:`pipelines.schema.store.rebuild_history`): the snapshot's schemas, and every later
      ``ALTER`` of its tables applied to them;
   e. ``_pipeline/snapshots``: ``committed`` rows, one per table (its rows) and one for the dump.

   A crash anywhere leaves a pending row without its committed ones: the silver step refuses to
   run until the load is run again, which redoes what is missing (the done appends are skipped by
   their transaction ids). What silver does with a snapshot: :mod:`pipelines.silver.snapshots`.

Tables the configuration excludes (``tables``) are not loaded (their rows are counted); statements
that are neither data nor set-up (views, triggers, routines, ...) are counted by kind in the summary.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

from pipelines import delta_io, storage
from pipelines import state
from pipelines.bronze.listing import BINLOG_NAME
from pipelines.bronze.schema import BRONZE_LAYOUT, BRONZE_TABLE, snapshot_start
from pipelines.bronze.tasks import ship_package
from pipelines.config import PipelineConfig
from pipelines.lock import check_held
from pipelines.schema.store import rebuild_history
from pipelines.snapshot import errors as dump_errors
from pipelines.snapshot.errors import DumpError, NoPosition
from pipelines.snapshot.mydumper import MydumperFolder, is_mydumper_folder, not_loaded, read_mydumper_folder
from pipelines.snapshot.position import SnapshotPosition, parse_user_gtid, parse_user_position
from pipelines.snapshot.session import DumpState
from pipelines.snapshot.source import DumpFile, read_position
from pipelines.snapshot.split import delimiter_blocks
from pipelines.snapshot.statements import iter_statements
from pipelines.snapshot.tab import TabTable, read_tab_folder
from pipelines.snapshot.tablemap import create_table
from pipelines.snapshot_load.position import locate
from pipelines.snapshot_load.tasks import (CHUNK_SPAN, LoadWork, create_text, partition, range_delimiters,
                                           range_outline)

_UTC = _dt.timezone.utc
APP_PREFIX = "snapshot-"  # the transaction id of a dump's writes: APP_PREFIX + its id
ID_BYTES = 64 * 1024  # the dump's identity reads this much of its start and of its end


@dataclass
class LoadStats:
    """What one load did (also its row in ``_pipeline/runs``, ``step = 'snapshot'``)."""

    run_id: str
    started_at: _dt.datetime
    ended_at: _dt.datetime | None = None
    dumps: int = 0  # loaded by this run
    already: int = 0  # loaded before (nothing written)
    bytes: int = 0
    rows: Counter = field(default_factory=Counter)  # (db, table) -> rows loaded
    excluded: Counter = field(default_factory=Counter)  # (db, table) -> rows not loaded (tables)
    skipped: Counter = field(default_factory=Counter)  # statements neither data nor set-up, by kind
    status: str = "running"
    error: str | None = None

    @property
    def seconds(self) -> float:
        end = self.ended_at or _dt.datetime.now(_UTC)
        return max((end - self.started_at).total_seconds(), 1e-9)

    def summary(self) -> str:
        skipped = ", ".join(f"{k} x{n}" for k, n in sorted(self.skipped.items()))
        return (f"snapshot load {self.run_id} {self.status}: {self.dumps} dump(s) loaded, {self.already} loaded "
                f"before; {len(self.rows)} table(s), rows r={sum(self.rows.values())}; "
                + (f"{len(self.excluded)} table(s) excluded by the configuration "
                   f"({sum(self.excluded.values())} rows); " if self.excluded else "")
                + (f"{sum(self.skipped.values())} statement(s) not loaded ({skipped}); " if self.skipped else "")
                + f"{self.bytes / 1e6:.2f} MB in {self.seconds:.1f} s")

    def run_row(self) -> tuple:
        return (self.run_id, "snapshot", self.started_at, self.ended_at, self.dumps, self.already, 0, 0,
                sum(self.rows.values()), 0, 0, sum(self.skipped.values()), 0, self.bytes, self.seconds,
                self.bytes / 1e6 / self.seconds, None, self.status, self.error)


def run(spark, cfg: PipelineConfig, dumps: Sequence[str], *, position: str | None = None,
        gtid: str | None = None) -> LoadStats:
    """Load each dump of ``dumps`` (paths of plain, gzip or zstd SQL files, ``--tab`` folders or
    mydumper folders) into the warehouse;
    ``position`` (``FILE:POS``) or ``gtid`` stand for the position the dumps do not record."""
    now = _dt.datetime.now(_UTC)
    stats = LoadStats(run_id=state.new_run_id(now), started_at=now)
    user = parse_user_position(position) if position else parse_user_gtid(gtid) if gtid else None
    with state.logged_run(spark, cfg, stats):
        ship_package(spark)
        for path in dumps:
            check_held()
            load_dump(spark, cfg, path, stats, user)
    return stats


# -- one dump -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class DumpPlan:
    """One dump to load: its file (or ``--tab`` folder: ``tabs``, its tables; or mydumper folder:
    ``mydumper``), position, identity and where its rows go in bronze."""

    name: str
    files: tuple[DumpFile, ...]  # the SQL file; a --tab folder's .txt files; a mydumper folder's schemas and chunks
    position: SnapshotPosition
    dump_id: str
    file_seq: int
    seq_start: str
    tabs: tuple[TabTable, ...] = ()
    mydumper: MydumperFolder | None = None

    @property
    def app_id(self) -> str:
        return APP_PREFIX + self.dump_id

    @property
    def dump(self) -> DumpFile:
        return self.files[0]

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def schema_files(self) -> list[tuple[str, DumpState, str]]:
        """``(path, session, database)`` of each table's own schema file: a ``--tab`` table's
        ``.sql``, a mydumper table's ``-schema.sql`` (a plain dump has none: its outline holds them)."""
        tables = self.mydumper.tables if self.mydumper is not None else ()
        return ([(t.sql_path, t.state, t.db) for t in self.tabs]
                + [(t.schema_path, DumpState(flavor=self.mydumper.flavor), t.db) for t in tables])


def plan_dump(cfg: PipelineConfig, path: str, user: SnapshotPosition | None) -> DumpPlan:
    """The dump at ``path`` with its position (``user``'s, else the one it records; a GTID set
    alone is found in bronze: :func:`pipelines.snapshot_load.position.locate`). A folder with a
    ``metadata`` file is mydumper's: its tables' ``-schema.sql`` and chunks, the position from
    ``metadata`` unless given. Another folder is a ``--tab`` dump: its tables' ``.sql`` and
    ``.txt``, the position from a ``.sql`` without a ``.txt`` (the command's output saved in the
    folder) unless given."""
    tabs: tuple[TabTable, ...] = ()
    folder = None
    if os.path.isdir(path) and is_mydumper_folder(path):
        name = os.path.basename(os.path.normpath(path))
        folder = read_mydumper_folder(path)
        files = tuple(DumpFile(p) for t in folder.tables for p in (t.schema_path, *t.chunks))
        found = user or folder.position()
    elif os.path.isdir(path):
        name = os.path.basename(os.path.normpath(path))
        tabs = tuple(read_tab_folder(path))
        if not tabs:
            raise DumpError("a folder without --tab tables (a .sql with a .txt beside it)", file=name)
        files = tuple(DumpFile(t.txt_path) for t in tabs)
        headers = sorted(e for e in os.listdir(path) if e.endswith(".sql") and
                         not os.path.exists(os.path.join(path, e[:-4] + ".txt")))
        if user is None and not headers:
            raise NoPosition(file=name)
        found = user or read_position(DumpFile(os.path.join(path, headers[0])))
    else:
        files = (DumpFile(path),)
        name = files[0].name
        found = user if user is not None else read_position(files[0], whole=not files[0].seekable)
    pos = locate(cfg, found, name)
    m = BINLOG_NAME.match(pos.file)
    if m is None:
        raise DumpError(f"the position's binlog file {pos.file!r} has no number (expected a name like binlog.000004)",
                        file=name)
    digest = hashlib.sha256(f"{name}\0{pos.file}:{pos.pos}\0".encode())
    for dump in files:
        digest.update(f"{dump.name}\0{dump.size}\0".encode())
        with open(dump.path, "rb") as f:
            digest.update(f.read(ID_BYTES))
            f.seek(max(0, dump.size - ID_BYTES))
            digest.update(f.read(ID_BYTES))
    file_seq = int(m.group("seq"))
    return DumpPlan(name, files, pos, digest.hexdigest()[:24], file_seq, snapshot_start(file_seq, pos.pos), tabs,
                    folder)


def _committed(spark, cfg: PipelineConfig, dump_id: str) -> bool:
    rows = state.read_rows(spark, cfg, state.SNAPSHOTS, ["dump_id", "phase", "table"])
    return any(r["dump_id"] == dump_id and r["phase"] == "committed" and r["table"] is None for r in rows)


def load_dump(spark, cfg: PipelineConfig, path: str, stats: LoadStats, user: SnapshotPosition | None) -> None:
    """Load one dump (see the module docs); nothing when it was loaded before."""
    plan = plan_dump(cfg, path, user)
    if _committed(spark, cfg, plan.dump_id):
        stats.already += 1
        print(f"{plan.name}: loaded before (at {plan.position.text()}): nothing to do", flush=True)
        return
    bronze_path = cfg.warehouse_path(BRONZE_TABLE)
    staged = delta_io.backend_for(spark, cfg.delta.backend).on_driver  # tasks stage the Parquet files
    struct = delta_io.struct_of(BRONZE_LAYOUT)
    arrow_schema = delta_io.prepare_staging(bronze_path, struct) if staged else None
    settings = storage.current()
    base = dict(file_seq=plan.file_seq, event_pos=plan.position.pos - 1, seq_start=plan.seq_start,
                tables=cfg.tables, run_id=stats.run_id, ingested_at=stats.started_at,
                table_uri=bronze_path if staged else None, arrow_schema=arrow_schema, storage=settings)
    folder_skipped = Counter()
    if plan.tabs:  # a task per table's .txt
        initial, landmarks = DumpState(), ()
        works = {i: LoadWork(path=t.txt_path, name=os.path.basename(t.txt_path), start=0, stop=None, landmarks=(),
                             initial=initial, tab=t, **base) for i, t in enumerate(plan.tabs)}
    elif plan.mydumper is not None:  # a task per data chunk
        initial, landmarks = DumpState(flavor=plan.mydumper.flavor), ()
        folder_skipped = not_loaded(plan.mydumper)
        chunks = [(t, k, c) for t in plan.mydumper.tables for k, c in enumerate(t.chunks)]
        works = {i: LoadWork(path=c, name=os.path.basename(c), start=0, stop=None, landmarks=(), initial=initial,
                             chunk_of=t, offset_base=k * CHUNK_SPAN, **base) for i, (t, k, c) in enumerate(chunks)}
    else:
        initial = DumpState.from_header(plan.dump.head())
        if plan.dump.seekable:
            ranges, landmarks = _outline(spark, cfg, plan)
        else:
            ranges, landmarks = [(0, None)], ()
        works = {i: LoadWork(path=plan.dump.path, name=plan.dump.name, start=a, stop=b, landmarks=tuple(landmarks),
                             initial=initial, **base) for i, (a, b) in enumerate(ranges)}
    sc = spark.sparkContext
    records = sc.parallelize(list(works), max(1, len(works))).mapPartitions(partition(works))
    cached = None
    if not staged:
        from pyspark import StorageLevel

        cached = records.persist(StorageLevel.MEMORY_AND_DISK)
        small = cached.filter(lambda r: r[0] != "row").collect()
    else:
        small = records.collect()
    try:
        files = [f for kind, rec in small if kind == "files" for f in rec]
        errors = sorted(rec for kind, rec in small if kind == "error")
        if errors:
            if staged:
                delta_io.discard_staged(bronze_path, files)
            offset, file, message, cls = errors[0]
            raise getattr(dump_errors, cls, DumpError)(message + "; nothing of this dump was loaded", file=file,
                                                       offset=None if offset < 0 else offset)
        done = [rec for kind, rec in small if kind == "stat"]
        rows, excluded, skipped = Counter(), Counter(), Counter(folder_skipped)
        for rec in done:
            rows.update(rec["rows"])
            excluded.update(rec["excluded"])
            skipped.update(rec["skipped"])
        creates = [c for rec in done for c in rec["creates"]] + [c for p, session, db in plan.schema_files
                                                                 for c in _schema_create(p, session.copy(), db)]
        ddl = _ddl_rows(plan, initial, landmarks, creates, cfg, stats.run_id)
        loaded = sorted({(db, table) for *_x, db, table in ddl} | set(rows))
        _write(spark, cfg, plan, stats, ddl, loaded, rows, files if staged else None,
               cached.filter(lambda r: r[0] == "row").map(lambda r: r[1]) if cached is not None else None)
        stats.rows.update(rows)
        stats.excluded.update(excluded)
        stats.skipped.update(skipped)
        stats.dumps += 1
        stats.bytes += plan.size
    finally:
        if cached is not None:
            cached.unpersist()


def _outline(spark, cfg: PipelineConfig, plan: DumpPlan) -> tuple[list[tuple[int, int]], list]:
    """The ranges a plain dump is read in (each from its first statement boundary) and its outline
    (two small Spark jobs; the driver joins what they find)."""
    size, step = plan.dump.size, cfg.parallelism.target_bytes_per_task
    cuts = list(range(0, size, step)) or [0]
    bounds = [(a, min(size, a + step)) for a in cuts]
    sc = spark.sparkContext
    n = len(bounds)
    path, name = plan.dump.path, plan.dump.name
    lines = sc.parallelize([(path, a, b) for a, b in bounds], n).map(range_delimiters).collect()
    blocks = delimiter_blocks([line for ls in lines for line in ls])
    found = sc.parallelize([(path, name, a, b, blocks) for a, b in bounds], n).map(range_outline).collect()
    bad = sorted(err for _s, _f, err in found if err is not None)
    if bad:
        offset, file, message, cls = bad[0]
        raise getattr(dump_errors, cls, DumpError)(message + "; nothing of this dump was loaded", file=file,
                                                   offset=None if offset < 0 else offset)
    landmarks = [st for _s, f, _e in found for st in f]
    # a task reads the statements that start from its range's first boundary to the next range's
    # (None: a range inside one statement, read by the task before it)
    starts = [s for s, _f, _e in found if s is not None]
    return list(zip(starts, starts[1:] + [size])), landmarks


def _schema_create(path: str, session: DumpState, db: str) -> list[tuple]:
    """The ``CREATE TABLE`` of a table's own schema file (a ``--tab`` table's ``.sql``, a mydumper
    table's ``-schema.sql``, plain or compressed), as :func:`_ddl_rows` takes it."""
    session.db = db
    text = b"".join(DumpFile(path).chunks())
    return [(0, create_text(st), db) for st in iter_statements(text, state=session, name=os.path.basename(path))
            if st.kind == "create_table"][:1]


def _ddl_rows(plan: DumpPlan, initial: DumpState, landmarks, stream_creates, cfg: PipelineConfig,
              run_id: str) -> list[tuple]:
    """Rows of ``_pipeline/ddl`` (layout :data:`pipelines.state.DDL_TABLE_LAYOUT`): each included
    table's ``CREATE TABLE`` at the snapshot's start, with the database in force where it is."""
    creates = []
    sql_state = initial.copy()
    for st in landmarks:
        if st.kind == "create_table":
            creates.append((st.offset, create_text(st), sql_state.db))
        sql_state.apply(st)
    creates += stream_creates
    out = {}
    for _offset, sql, db in sorted(creates, key=lambda c: c[0]):
        found = create_table(sql, db, sql_state.db_charsets)
        if not isinstance(found, tuple) or not cfg.tables.matches(found[0], found[1]):
            continue
        out[(found[0], found[1])] = (plan.name, plan.file_seq, plan.position.pos - 1, plan.seq_start, db, sql,
                                     None, False, None, None, run_id, None, found[0], found[1])
    return [row for _k, row in sorted(out.items())]


def _write(spark, cfg: PipelineConfig, plan: DumpPlan, stats: LoadStats, ddl: list[tuple], loaded, rows: Counter,
           files, row_rdd) -> None:
    """The writes of one dump, in order, each at most once (see the module docs, step 4)."""
    app, now = plan.app_id, _dt.datetime.now(_UTC)
    where = plan.position.text()

    def snapshot_rows(phase: str, per_table: bool) -> list[tuple]:
        head = [(plan.dump_id, plan.name, phase, None, None, plan.seq_start, where, sum(rows.values()),
                 stats.run_id, now)]
        tables = [(plan.dump_id, plan.name, phase, db, table, plan.seq_start, where, rows.get((db, table), 0),
                   stats.run_id, now) for db, table in loaded] if per_table else []
        return tables + head

    check_held()
    state.append(spark, cfg, state.SNAPSHOTS, snapshot_rows("pending", False),
                          app_id=APP_PREFIX + "pending-" + plan.dump_id, version=0)
    bronze_path = cfg.warehouse_path(BRONZE_TABLE)
    if files is not None:
        delta_io.commit_staged(bronze_path, files, delta_io.struct_of(BRONZE_LAYOUT), txn_app_id=app, txn_version=0)
    elif row_rdd is not None:
        df = spark.createDataFrame(row_rdd, delta_io.struct_of(BRONZE_LAYOUT))
        delta_io.open_table(bronze_path, cfg.delta.backend, spark).append(df, delta_io.CommitInfo(txn=(app, 0)))
    if ddl:
        state.append(spark, cfg, state.DDL, [r[:12] for r in ddl], app_id=app, version=0)
    rebuild_history(spark, cfg, stats.run_id)
    state.append(spark, cfg, state.SNAPSHOTS, snapshot_rows("committed", True), app_id=app,
                          version=0)
