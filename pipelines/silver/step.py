"""The silver step: apply the new bronze row changes to ``<warehouse>/silver/<database>/<table>``.

>>> stats = run(spark, load_config("conf/pipeline.yaml"))  # doctest: +SKIP
>>> stats.summary()  # doctest: +SKIP
'silver run 20240101T000000-1a2b3c4d ok: 3 table(s), 5 segment(s); rows c=12 u=4 d=2; ...'

How a run goes
--------------
1. **Schema history** (:func:`pipelines.schema.store.update_history`): the DDL statements
   bronze found since the last run (``_pipeline/ddl``) and any seed files become schema
   versions in ``_pipeline/schema_history``.
2. **What is new**: per table, the largest ``_seq`` already applied is in
   ``_pipeline/silver_watermarks`` (layout :data:`pipelines.state.WATERMARKS_DDL`; append-only, the
   max per table counts). Only the bronze files ingested since the last run that finished are
   read (:func:`pipelines.silver.marks.read_through_key`: the older ones are never opened, so a run costs what is new,
   not bronze's history). Bronze rows above their table's watermark are counted per segment
   (step 3) and image shape (:func:`shape_counts`: narrow columns only; one shape can hold rows
   on both sides of a segment), then each segment reads its own; rows
   of XA branches that were prepared and then rolled back (``_pipeline/xa``) are
   dropped; tables outside ``tables.include``/``exclude`` are skipped.
3. **Segments**: each table's new rows are cut at its schema events (DDL positions), so an
   ``ADD COLUMN`` mid-stream, a ``TRUNCATE`` or a ``DROP``/``CREATE`` apply in order. All
   segments of all tables run in ``_seq`` order of their starting events, so a
   ``RENAME TABLE a TO b`` first finishes ``a``, then copies its silver rows to ``b``.
4. **Per segment**: the distinct image shapes (``idx``/``name``/``type`` of the logged
   columns) are matched to the schema (:func:`pipelines.schema.resolve.resolve_columns`:
   table-map names > DDL > seed; keys: config > table-map PK > DDL PK > none = keyless).
   Shapes that do not fit go to ``_pipeline/quarantine`` (same layout as bronze's) with
   the reason. Values the decoder could not finish without the schema (no table-map
   metadata: charsets, signedness, ENUM/SET names; INET6/INET4/UUID) are completed, then
   :func:`pipelines.silver.changes.changes_from_bronze` types them and
   :func:`pipelines.silver.merge.apply_changes` MERGEs them. Partial row images
   (``binlog_row_image=MINIMAL``/``NOBLOB``) are merged column by column; the columns a
   MINIMAL INSERT leaves out take their DDL ``DEFAULT``; on a table without a key, updates
   and deletes with partial images go to quarantine (``PartialRowImage``).
5. **Schema events** at a segment start: ``truncate``/``drop``/``create``/``rename_to``
   empty the silver table (``create`` also replaces its schema); ``rename_from`` copies
   the old name's silver rows. Each is done once: not when silver already holds a later
   change, and the table's watermark is written right after it.
6. **Watermarks** are written after the MERGEs committed; a replay of changes silver
   already holds is harmless (silver keeps ``_seq`` per row and its own watermark).
7. **Run log**: one row in ``_pipeline/runs`` (``step = 'silver'``, zero dates nulled,
   quarantined rows) and a printed summary.

Silver paths come from :func:`pipelines.paths.silver_table_path` (names escaped, never
outside the warehouse).
"""
from __future__ import annotations

import datetime as _dt
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines import delta_io
from pipelines.arrow_pool import use_fast_pool
from pipelines import state
from pipelines.schema import resolve as schema_resolve
from pipelines.schema import store as schema_store
from pipelines.bronze.schema import BRONZE_TABLE, INSERT_OPS
from pipelines.config import PipelineConfig
from pipelines.paths import silver_table_path
from pipelines.schema import UNPARSED, Resolution, SchemaVersion
from pipelines.delta_io.rs_scan import RsScan
from pipelines.silver import bronze_scan, columnar, driver, schema_events, segment_cells, snapshots
from pipelines.silver import properties as silver_properties
from pipelines.silver.changes import changes_from_bronze
from pipelines.silver.columns import DEFAULT_PREFIX, SilverStepError
from pipelines.silver.marks import (READ_THROUGH_DB, above_marks, drop_rolled_back_xa, late_since,
                                    read_through_key, read_through_since, write_watermarks)
from pipelines.silver.merge import apply_changes, read_watermark
from pipelines.silver.segments import SEG, SegmentPlan, lanes_of, plan_segments, segments_of, with_segment
from pipelines.silver.shapes import parse_shape, shape_key, shape_rows_of, slim_image, with_shape
from pipelines.silver.stats import SilverStats
from pipelines.silver.typed_values import ImageTyper, NotCanonical
from pipelines.silver.value_fixes import cell_fixes, complete_values
from pipelines.spark_session import job_description
from pipelines.state import read_watermarks
from pipelines.logs import get_logger

_log = get_logger(__name__)

_UTC = _dt.timezone.utc


_IMAGES = ("before", "after")
_IN_SEGMENT = "_in_segment"  # a segment row's test of its own segment filter (see _Run.run_segment)
_NAMED_FIXES = frozenset({schema_resolve.FIX_ENUM, schema_resolve.FIX_SET})  # they look at a cell's name


# Session settings while the step runs (restored after): typing a wide table builds one large
# expression per column, and Catalyst's constraint propagation grows without bound on such plans
# (minutes for a 300-column table); it only serves filter inference, which silver does not need.
_SESSION_CONF = {"spark.sql.constraintPropagation.enabled": "false"}



# ---------------------------------------------------------------------------------------------
# the run


def run(spark: SparkSession, cfg: PipelineConfig) -> SilverStats:
    """Apply every bronze change above the per-table watermarks to silver; returns what was done.

    >>> run(spark, cfg).summary()  # doctest: +SKIP
    """
    use_fast_pool()  # (big segments are typed and folded in Arrow on the driver)
    now = _dt.datetime.now(_UTC)
    stats = SilverStats(run_id=state.new_run_id(now), started_at=now)
    with job_description(spark, f"silver {stats.run_id}"):  # (the Spark UI's name of the run's jobs)
        saved = {k: spark.conf.get(k, None) for k in _SESSION_CONF}

        def ended(stats: SilverStats) -> None:  # (the session's settings back as they were, then the log)
            for k, v in saved.items():
                if v is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)
            stats.ended_at = _dt.datetime.now(_UTC)

        with state.logged_run(spark, cfg, stats, ended=ended):
            for k, v in _SESSION_CONF.items():
                spark.conf.set(k, v)
            _run(spark, cfg, stats)
    return stats



def _run(spark: SparkSession, cfg: PipelineConfig, stats: SilverStats) -> None:
    history, added = schema_store.update_history(spark, cfg, stats.run_id)
    stats.schema_versions = len(added)
    stats.unparsed_ddl = [f"{v.db}.{v.table or '*'} at {v.valid_from}: {v.reason}" for v in added if v.kind == UNPARSED]
    marks, since, snaps = _starting_marks(spark, cfg, history)
    bronze, shape_rows, written, segmented, scan = _bronze_shapes(spark, cfg, history, marks, since)
    tables, pk_idx = _tables_and_keys(cfg, history, marks, shape_rows, segmented)
    steps = plan_segments(history, tables, marks, shape_rows, segmented)
    work = _Run(spark, cfg, history, bronze, shape_rows, pk_idx, stats, written)
    work.scan = scan
    finished = False
    try:
        lanes = lanes_of(steps)
        _fetch_small(work, lanes, scan, bronze)
        _run_lanes(work, lanes)
        finished = True
    finally:
        if work.quarantine or work.set_aside:
            n, handled = _write_quarantine(spark, cfg, bronze, work.quarantine, list(work.set_aside.values()),
                                           stats.run_id)
            stats.quarantined += n
            for key, seq in handled.items():  # quarantined rows are dealt with: not again next run
                work.marks[key] = max(work.marks.get(key, ""), seq)
        if finished and bronze is not None and (shape_rows or since is None):  # with the tables' marks
            work.marks[read_through_key(cfg)] = stats.started_at.astimezone(_UTC).isoformat()
        if finished:  # the snapshots this run applied: not rebuilt again
            work.marks.update(snaps.new)
        write_watermarks(spark, cfg, work.marks, work.rows, stats.run_id)


def _starting_marks(spark: SparkSession, cfg: PipelineConfig, history) -> tuple[dict, str | None, object]:
    """``(marks, since, snaps)``: each table's watermark, the ingestion time bronze is read from
    (None: all of it) and the snapshots pending (:func:`snapshots.pending`); the tables rebuilt
    from their snapshot are rewound to it, and bronze is then read whole."""
    marks = read_watermarks(spark, cfg)
    since = read_through_since(marks.get(read_through_key(cfg)))
    if since is not None:  # (batches that landed after the last run read bronze, begun before it)
        since = late_since(spark, cfg, since)
    snaps = snapshots.pending(spark, cfg, marks)
    marks = {k: v for k, v in marks.items() if k[0] != READ_THROUGH_DB}
    if snaps.rebuild:  # tables rebuilt from their snapshot: bronze is read whole, from just before it
        since = None
        snapshots.follow_renames(history, snaps.rebuild)
        marks.update(snaps.rebuild)
        for (db, table), mark in sorted(snaps.rebuild.items()):
            snapshots.rewind(spark, cfg, silver_table_path(cfg.warehouse, db, table), mark)
    return marks, since, snaps


def _bronze_shapes(spark: SparkSession, cfg: PipelineConfig, history, marks: dict, since) -> tuple:
    """``(bronze, shape_rows, written, segmented, scan)``: bronze above the marks, its rows counted
    per table, segment and shape, the shape columns bronze wrote, the tables cut into segments, and
    delta-rs's scan of it (None on Spark's path); all empty when bronze has nothing new."""
    backend = cfg.delta.backend
    bronze_path = cfg.warehouse_path(BRONZE_TABLE)
    has_new = delta_io.table_exists(bronze_path, spark=spark, backend=backend) and not (
        since is not None and delta_io.nothing_above(spark, bronze_path, "_ingested_at", since, backend=backend))
    if not has_new:  # (nothing new: no Spark job at all, only the schema events)
        return None, [], frozenset(), set(), None
    # only what was ingested since the last run that finished (the files before are not read)
    bronze = delta_io.read(spark, bronze_path, backend=backend,
                           above=None if since is None else ("_ingested_at", since))
    bronze = above_marks(bronze, marks)
    xa = state.read_frame(spark, cfg, state.XA)
    # Not cached: the aggregate reads only narrow columns and the images' idx/name/type fields
    # from Parquet (nested pruning; images may hold 100 MB values), and each segment reads its
    # own rows (with pushed-down filters), each pass only the columns it needs.
    bronze = drop_rolled_back_xa(bronze, xa)
    # grouped by segment too: one shape may hold rows on both sides of a segment (an ALTER
    # that adds a column, then one that drops it), and each segment resolves its own shapes
    cuts = segments_of(history, marks)
    segmented = {(db, table) for db, table, _, _ in cuts}
    # delta-rs: bronze's rows read on the driver by delta-rs and Arrow (no Spark job for the
    # segments the driver's paths take); not with rolled-back XA branches, which only Spark's read drops
    scan = RsScan.open(bronze_path, above=None if since is None else ("_ingested_at", since)) \
        if delta_io.resolve_backend(spark, backend) == "rs" and xa is None else None
    counted = bronze_scan.shape_rows(scan, marks, cuts) if scan is not None else None
    shape_rows, written = counted if counted is not None else \
        shape_rows_of(with_segment(bronze, cuts), by=(SEG,))
    if "_shape" not in written:  # rows of an older bronze: computed per row (read where shapes are filtered)
        bronze, scan = with_shape(bronze), None
    return bronze, shape_rows, written, segmented, scan


def _tables_and_keys(cfg: PipelineConfig, history, marks: dict, shape_rows: list, segmented: set) -> tuple:
    """``(tables, pk_idx)``: the tables the run applies (rows or schema events above their mark,
    and selected by the config), and each segment's and shape's key positions."""
    tables = {(r["db"], r["table"]) for r in shape_rows}
    for v in history.all_versions():  # tables with schema events above their watermark (e.g. TRUNCATE)
        if v.table and v.valid_from > marks.get((v.db, v.table), ""):
            tables.add((v.db, v.table))
    tables = sorted(t for t in tables if cfg.tables.matches(*t))
    pk_idx = {}  # per segment and shape: an ALTER ... ADD COLUMN ... FIRST moves the key within one batch
    for r in shape_rows:
        if r["pk_idx"]:
            seg = (r[SEG] or "") if (r["db"], r["table"]) in segmented else None
            pk_idx.setdefault((r["db"], r["table"], seg, r["_shape"]), list(r["pk_idx"]))
    return tables, pk_idx


def _fetch_small(work: "_Run", lanes: list, scan, bronze) -> None:
    """The small segments' rows, fetched for the driver's fold: in one delta-rs scan (and the big
    segments' reads beside it), or in one Spark job."""
    if scan is not None:
        segments, large = work.small_segments(lanes)
        work.small = bronze_scan.fetch(scan, segments, large, driver.FETCH_BYTES)
        reads = work.big_reads(lanes)
        if len(reads) > 1:  # (over the bytes they may take together: each read by itself)
            work.big = {(r.db, r.table, r.start, r.end): seg
                        for r, seg in (segment_cells.read_segments(scan, reads) or {}).items()}
    elif bronze is not None:
        slim = bronze.select("db", "table", *[slim_image(c, with_name=True).alias(c) if c in _IMAGES else c
                                              for c in driver.COLUMNS])
        segments, large = work.small_segments(lanes)
        if large:  # columns that may hold large values: only as many bytes as the driver takes
            fits = set(driver.within_bytes(slim, large, driver.FETCH_BYTES))
            segments = [s for s in segments if s not in large or s in fits]
        work.small = driver.fetch(slim, segments)


def _run_lanes(work: "_Run", lanes: list) -> None:
    """Apply every lane (independent tables side by side, SILVER_THREADS at once); every failed
    table is named, and the others are applied."""
    workers = max(1, min(len(lanes), SILVER_THREADS))
    errors: list[BaseException] = []
    if workers == 1:
        for lane in lanes:
            try:
                work.lane(lane)
            except SilverStepError as e:
                errors.append(e)
    else:  # Spark runs the tables' small jobs concurrently
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="silver") as pool:
            for future in [pool.submit(work.lane, lane) for lane in lanes]:
                try:
                    future.result()
                except SilverStepError as e:
                    errors.append(e)
    if errors:
        raise SilverStepError(f"{len(errors)} table(s) failed:\n" + "\n".join(f"  - {e}" for e in errors)) \
            from errors[0]


# The bronze columns a segment reads: the change itself, and where it came from (for quarantine).
_SEGMENT_COLUMNS = ("source_file", "file_seq", "event_pos", "_seq", "db", "table", "op", "commit_ts", "before",
                    "after", "decoder_version")
SILVER_THREADS = 2  # tables applied at once (Spark jobs of small MERGEs are CPU-bound on the driver)
REPLANS = 8  # plans of one segment, each made stale by another run's commit to its table (see _Run.run_segment)



class _Run:
    """The state of one run shared by the lanes (updates under a lock)."""

    def __init__(self, spark, cfg, history, bronze, shape_rows, pk_idx, stats, written=frozenset()):
        self.spark, self.cfg, self.history, self.bronze, self.stats = spark, cfg, history, bronze, stats
        self.backend = delta_io.resolve_backend(spark, cfg.delta.backend)
        self.properties = silver_properties.for_new_table(cfg.silver, self.backend)  # (of the tables it creates)
        # bronze's zero-date counts, when every new row has one; else silver counts while typing
        self.columns = _SEGMENT_COLUMNS + (("_zero_dates",) if "_zero_dates" in written else ())
        self.pk_idx = pk_idx
        self.first_seq: dict[tuple[str, str], str] = {}
        for r in shape_rows:
            k = (r["db"], r["table"])
            self.first_seq[k] = min(self.first_seq.get(k, r["min_seq"]), r["min_seq"])
        self.marks: dict[tuple[str, str], str] = {}
        self.rows: Counter = Counter()
        self.quarantine: list[tuple] = []  # (db, table, start, end, shape key, reason)
        self.set_aside: dict[tuple, DataFrame] = {}  # segment -> its bronze rows + _q_reason
        self.lock = threading.Lock()
        self.small: dict[tuple, pa.Table] = {}  # segment -> its rows (driver.fetch)
        # bronze as delta-rs reads it (the delta-rs backend): big segments are read from it and
        # folded in Arrow (silver.columnar), one at a time (read in one pass first: big_reads)
        self.scan: RsScan | None = None
        self.big_lock = threading.Lock()
        self.big: dict[tuple, segment_cells.Segment] = {}  # segment -> its rows, read together (big_reads)

    def lane(self, steps: list[SegmentPlan]) -> None:
        for seg in steps:
            try:
                # (a thread's jobs: named by their table in the Spark UI, not by the run's last label)
                with job_description(self.spark, f"silver {self.stats.run_id} {seg.db}.{seg.table}"):
                    self.run_segment(seg)
            except Exception as e:
                where = f"_seq {seg.start or 'start'} .. {seg.end or 'end'}"
                raise SilverStepError(f"silver {seg.db}.{seg.table} ({where}): {type(e).__name__}: {e}") from e

    def resolution_of(self, seg: SegmentPlan) -> tuple[SchemaVersion | None, Resolution | None]:
        """The schema version a segment's rows follow, and how its image shapes map to columns."""
        key = (seg.db, seg.table)
        at = seg.start if seg.events else self.first_seq.get(key, seg.start)
        version = self.history.version_at(seg.db, seg.table, at)
        resolution = None
        if seg.shapes:
            resolution = schema_resolve.resolve_columns(
                seg.db, seg.table, version, [parse_shape(s) for s in seg.shapes],
                key_override=self.cfg.key_override(seg.db, seg.table),
                table_map_key_idx=next((self.pk_idx[(*key, seg.segment, s)] for s in seg.shapes
                                        if (*key, seg.segment, s) in self.pk_idx), None),
                db_charset=self.history.db_charset(seg.db))
        return version, resolution

    def small_segments(self, lanes: list[list[SegmentPlan]]) -> tuple[list[tuple], list[tuple]]:
        """The segments that :mod:`pipelines.silver.driver` applies on the driver (the steps of a
        lane of one table, i.e. no rename links it to another, that :func:`driver.eligible`
        accepts), up to :data:`driver.FETCH_ROWS` changes in all. Their schema events are
        applied first, as for any segment (:func:`schema_events.apply_events`). Also: those of them whose columns
        may hold large values (:func:`driver.large_values`), whose bytes are counted first."""
        out, budget = [], driver.FETCH_ROWS
        for lane in lanes:
            if len({(seg.db, seg.table) for seg in lane}) != 1:
                continue
            for seg in lane:
                segment = self._small_segment(seg, budget)
                if segment is not None:
                    out.append(segment)
                    budget -= sum(seg.shapes.values())
        steps = {(seg.db, seg.table, seg.start, seg.end): seg for lane in lanes for seg in lane}
        return out, [s for s in out if driver.large_values(steps[s].shapes)]

    def big_reads(self, lanes: list[list[SegmentPlan]]) -> list[segment_cells.SegmentRead]:
        """The segments :meth:`apply_big` will read (those not fetched as small ones that
        :meth:`_big` accepts): read in one pass first (:func:`segment_cells.read_segments`), as the
        big tables' changes interleave in bronze's row groups."""
        out = []
        for seg in (seg for lane in lanes for seg in lane):
            if not seg.shapes or (seg.db, seg.table, seg.start, seg.end) in self.small:
                continue
            version, resolution = self.resolution_of(seg)
            applied = None if resolution is None else _applied(seg, version, resolution)
            if applied is None:
                continue
            _, resolution, n_rows, partial = applied
            if self._big(seg, resolution, n_rows, partial):
                out.append(segment_cells.SegmentRead(seg.db, seg.table, seg.start, seg.end, bool(resolution.fixes)))
        return out

    def _small_segment(self, seg: SegmentPlan, budget: int) -> tuple | None:
        if not seg.shapes:
            return None
        version, resolution = self.resolution_of(seg)
        if resolution is None:
            return None
        resolution = _with_unlogged_columns(resolution, version)
        n = sum(seg.shapes.values())
        partial = seg.min_image is not None and seg.min_image < len(resolution.specs)
        if n <= budget and driver.eligible(
                keys=resolution.keys, specs=resolution.specs, fixes=resolution.fixes, rejected=resolution.rejected,
                partial=partial, scd2=self.cfg.is_scd2(seg.db, seg.table), rows=n):
            return (seg.db, seg.table, seg.start, seg.end)
        return None

    def apply_with_spark(self, seg: SegmentPlan, path: str, resolution: Resolution, version: SchemaVersion | None,
                         good: list[str], partial: bool):
        """MERGE the segment's rows of the shapes ``good`` with Spark (:func:`_apply_segment`)."""
        segment = (F.col("db") == seg.db) & (F.col("table") == seg.table) & (F.col("_seq") > seg.start)
        if len(good) < len(seg.shapes):  # some shapes go to quarantine
            segment = segment & F.col("_shape").isin(good)
        if seg.end is not None:
            segment = segment & (F.col("_seq") < seg.end)
        # What silver and its quarantine use (not pk, gtid, _shape ...); of the images only the fields
        # typing reads. Not cached: each pass reads what it needs from Parquet (the overview only
        # narrow columns). The row's own segment test goes along: typing raises on a value that does
        # not convert only where it holds, so a row of another table never raises, whatever order
        # Spark evaluates later filters in.
        with_name = any(f[0] in _NAMED_FIXES for f in resolution.fixes.values())
        rows = self.bronze.where(segment).select(
            *[c for c in self.columns if c not in _IMAGES], *[slim_image(i, with_name).alias(i) for i in _IMAGES],
            segment.alias(_IN_SEGMENT))
        ncols = len(resolution.specs)
        if partial and not resolution.keys:
            # binlog_row_image=MINIMAL/NOBLOB on a table without a key: its rows are identified by all
            # their values, so an update or delete that lacks columns matches no row: set aside, loudly.
            lacks = (((F.col("op") == "u") & (F.size("after") < ncols))
                     | ((F.col("op") != "c") & (F.size("before") < ncols)))
            with self.lock:  # (by segment: once, whatever its plans)
                self.set_aside[(seg.db, seg.table, seg.start, seg.end)] = rows.where(lacks).withColumns({
                    "_q_reason": F.lit(f"partial row image (binlog_row_image=MINIMAL or NOBLOB) on a table "
                                       f"without a key: the change lacks some of the {ncols} columns, and a "
                                       f"keyless row is identified by all of them"),
                    "_q_class": F.lit("PartialRowImage")})
            rows = rows.where(~lacks)
        defaults = schema_events.insert_defaults(self.spark, version, resolution.specs) if partial else {}
        return _apply_segment(self.spark, self.cfg, seg, path, rows, resolution, defaults, partial=partial)

    def _applied_past(self, path: str, end: str) -> bool:
        """True when the table's watermark is at or past ``end``: a later segment of it was applied
        (by another run, whose commits this run's plan did not see), so this one is done."""
        exists = delta_io.table_exists(path, spark=self.spark, backend=self.backend)
        mark = read_watermark(path, spark=self.spark, backend=self.backend) if exists else None
        return mark is not None and mark >= end

    def _big(self, seg: SegmentPlan, resolution: Resolution, n_rows: int, partial: bool) -> bool:
        """A segment :mod:`pipelines.silver.columnar` applies: delta-rs, a keyed table or inserts
        only (an append-only log without a key), nothing :func:`driver.eligible` refuses (its
        bytes are counted as it is read)."""
        return self.scan is not None and (bool(resolution.keys) or set(seg.ops) <= set(INSERT_OPS)) \
            and driver.eligible(keys=resolution.keys, specs=resolution.specs, fixes=resolution.fixes,
                                rejected=resolution.rejected, partial=partial,
                                scd2=self.cfg.is_scd2(seg.db, seg.table), rows=n_rows, limit=columnar.BIG_ROWS)

    def apply_big(self, seg: SegmentPlan, path: str, resolution: Resolution, n_rows: int):
        """Apply a segment with :func:`columnar.apply_big`; None when Spark's path must: bronze
        read otherwise than Spark reads it (e.g. another count of rows), or a value it must judge."""
        with self.big_lock:
            segment = self.big.pop((seg.db, seg.table, seg.start, seg.end), None)
            if segment is None:
                segment = segment_cells.read_segment(self.scan, seg.db, seg.table, seg.start, seg.end,
                                                with_name=bool(resolution.fixes))
            if segment is None or segment.n != n_rows:
                return None
            try:
                return columnar.apply_big(path, segment, resolution.specs, resolution.keys, fixes=resolution.fixes,
                                          delete_mode=self.cfg.delete_mode,
                                          column_prefix=self.cfg.silver.prefix_for(seg.db, seg.table),
                                          spark=self.spark, properties=self.properties)
            except NotCanonical:
                return None

    def run_segment(self, seg: SegmentPlan) -> None:
        """Apply one segment, planned from the silver table as it is and committed only on that
        version (:func:`delta_io.pinned`): when another run commits to the table first, the plan
        is stale; the segment is planned again from the table as that run left it (its watermark
        then says what is still to do), up to :data:`REPLANS` times."""
        path = silver_table_path(self.cfg.warehouse, seg.db, seg.table)
        with self.lock:
            first = f"{seg.db}.{seg.table}" not in self.stats.tables  # (the table's first step this run)
            info = self.stats.tables.setdefault(f"{seg.db}.{seg.table}", {"path": path, "segments": 0, "rows": 0})
        if first:
            self._gain_properties(path)
        for attempt in range(1, REPLANS + 1):
            try:
                with delta_io.pinned(path, spark=self.spark, backend=self.backend):
                    return self._run_segment(seg, path, first, info)
            except delta_io.StaleRead as e:
                if attempt == REPLANS:
                    raise SilverStepError(f"{seg.db}.{seg.table}: {REPLANS} plans in a row were made stale by "
                                          f"other writers' commits; last: {e}") from e
                _log.info(f"silver: {seg.db}.{seg.table}: another run committed to the table first ({e}); "
                          f"planning the segment again ({attempt + 1}/{REPLANS})")
                with self.lock:
                    self.stats.replans += 1

    def _gain_properties(self, path: str) -> None:
        """A table that exists takes what it lacks of :func:`silver_properties.to_gain` (the change
        data feed turned on later), in one commit before the table's segments are planned. The
        commit claims no watermark (``read_watermark`` passes over it to the last one): a watermark
        read first could be older than another run's MERGE landing in between."""
        wanted = silver_properties.to_gain(self.cfg.silver)
        if wanted and delta_io.table_exists(path, spark=self.spark, backend=self.backend):
            delta_io.set_properties(path, wanted, spark=self.spark, backend=self.backend)

    def _run_segment(self, seg: SegmentPlan, path: str, first: bool, info: dict) -> None:
        spark, cfg, history, stats = self.spark, self.cfg, self.history, self.stats
        key = (seg.db, seg.table)
        version, resolution = self.resolution_of(seg)
        if first and (cfg.silver.column_prefix != DEFAULT_PREFIX or cfg.silver.table_column_prefix):
            schema_events.give_own_columns_their_prefix(spark, cfg, seg, path)
        if seg.events:
            done = schema_events.apply_events(spark, cfg, seg, path, resolution, version, history)
            with self.lock:
                self.marks[key] = max(self.marks.get(key, ""), seg.start)
                if done:
                    stats.resets += done == "reset"
                    stats.copies += done == "copy"
                    # written at once: a replay must not empty or copy the table again
                    write_watermarks(spark, cfg, {key: seg.start}, {}, stats.run_id)
        if resolution is None:
            return
        with self.lock:  # (once, whatever the plans of the segment)
            for shape, reason in resolution.rejected.items():
                item = (seg.db, seg.table, seg.start, seg.end, shape_key(shape), reason)
                if item not in self.quarantine:
                    self.quarantine.append(item)
        applied = _applied(seg, version, resolution)
        if applied is None:
            return
        good, resolution, n_rows, partial = applied
        if seg.end is not None and self._applied_past(path, seg.end):
            return  # (its changes, and later ones, are in silver: its column types must not come back)
        retyped = schema_events.retype(spark, cfg, path, resolution.specs)
        result, applied_by = None, "spark"
        small = self.small.get((seg.db, seg.table, seg.start, seg.end))
        if small is not None:  # fetched: folded on the driver (silver.driver)
            try:
                defaults = schema_events.insert_defaults(spark, version, resolution.specs, typer=ImageTyper) \
                    if partial else None
                result = driver.apply_small(spark, path, driver.rows_of(small), resolution.specs,
                                            resolution.keys, fixes=resolution.fixes, delete_mode=cfg.delete_mode,
                                            column_prefix=cfg.silver.prefix_for(seg.db, seg.table),
                                            backend=self.backend, properties=self.properties, partial=partial,
                                            defaults=defaults)
                applied_by = "driver"
            except NotCanonical:  # a value only Spark's typing takes (or names): that path instead
                result = None
        if result is None and small is None and self._big(seg, resolution, n_rows, partial):
            result = self.apply_big(seg, path, resolution, n_rows)
            applied_by = "arrow" if result is not None else applied_by
        if result is None:
            result = self.apply_with_spark(seg, path, resolution, version, good, partial)
        with self.lock:
            if retyped:
                info.setdefault("retyped", []).extend(retyped)
            stats.rows.update(seg.ops)
            stats.segments += 1
            stats.inserted += result.inserted
            stats.updated += result.updated
            stats.deleted += result.deleted
            stats.zero_dates += result.zero_dates_nulled
            stats.missing_deletes += result.missing_deletes
            info["segments"] += 1
            info["rows"] += n_rows
            info.setdefault("applied_by", []).append(applied_by)
            info.update(keys=list(resolution.keys), key_source=resolution.key_source,
                        name_source=resolution.name_source, columns=resolution.names)
            self.rows[key] += n_rows
            if result.watermark is not None:
                self.marks[key] = max(self.marks.get(key, ""), result.watermark)


def _applied(seg: SegmentPlan, version: SchemaVersion | None,
             resolution: Resolution) -> tuple[list[str], Resolution, int, bool] | None:
    """How a segment's rows are applied: its shapes not rejected, the resolution (with the columns
    its images do not log), their count of changes and whether their images are partial; None
    when nothing of it is."""
    good = [s for s in seg.shapes if parse_shape(s) not in resolution.rejected]
    if not good or not resolution.specs:
        return None
    resolution = _with_unlogged_columns(resolution, version)
    partial = seg.min_image is not None and seg.min_image < len(resolution.specs)
    return good, resolution, sum(seg.shapes[s] for s in good), partial


def _with_unlogged_columns(resolution: Resolution, version: SchemaVersion | None) -> Resolution:
    """Partial images named by the table map show only the columns they logged: add the columns
    the DDL declares that no image of the segment carried (so an INSERT gets their defaults and
    silver has them), when the DDL agrees with every logged column's name at its position."""
    if resolution.name_source != "table_map" or version is None or version.schema is None:
        return resolution
    columns = version.schema.columns
    by_idx = {s.ordinal: s for s in resolution.specs}
    if None in by_idx or any(i >= len(columns) or columns[i].name.lower() != s.name.lower()
                             for i, s in by_idx.items()):
        return resolution
    added = {i: schema_resolve.spec_from_ddl(c, i) for i, c in enumerate(columns) if i not in by_idx}
    if not added:
        return resolution
    return replace(resolution, specs=tuple(({**by_idx, **added})[i] for i in sorted({**by_idx, **added})))


def _apply_segment(spark, cfg: PipelineConfig, seg: SegmentPlan, path: str, rows: DataFrame, resolution: Resolution,
                   defaults: dict | None = None, partial: bool = True):
    """MERGE one segment's rows (``defaults``: see :func:`schema_events.insert_defaults`; ``partial``: some
    image lacks columns); returns :class:`pipelines.silver.merge.ApplyStats`."""
    scd2 = cfg.is_scd2(seg.db, seg.table)
    keys = list(resolution.keys) or None
    if scd2 and keys is None:
        raise SilverStepError(
            f"{seg.db}.{seg.table} is configured as SCD2 (scd2: {list(cfg.scd2)}) but has no key: "
            f"add one under 'keys:' in {cfg.source}")
    cells, rest = cell_fixes(resolution.fixes)
    changes = changes_from_bronze(complete_values(rows, rest), resolution.specs, defaults, cells,
                                         partial=partial, guard=F.col(_IN_SEGMENT))
    return apply_changes(spark, changes, resolution.specs, path, keys=keys, delete_mode=cfg.delete_mode,
                                scd2=scd2, backend=cfg.delta.backend,
                                column_prefix=cfg.silver.prefix_for(seg.db, seg.table),
                                properties=silver_properties.for_new_table(
                                    cfg.silver, delta_io.resolve_backend(spark, cfg.delta.backend)))


def _write_quarantine(spark, cfg: PipelineConfig, bronze: DataFrame, items: list[tuple], set_aside: list[DataFrame],
                      run_id: str) -> tuple[int, dict[tuple[str, str], str]]:
    """Rows silver cannot apply -> ``_pipeline/quarantine`` (bronze's layout), each with its reason:
    ``items`` name image shapes that do not fit their schema (``SchemaMismatch``), ``set_aside``
    are bronze rows with ``_q_reason`` and ``_q_class`` columns. Returns the number of rows and
    the largest quarantined ``_seq`` per table."""

    parts = list(set_aside)
    if items:
        reasons = spark.createDataFrame(items, "_q_db STRING, _q_table STRING, _q_start STRING, _q_end STRING, "
                                               "_q_shape STRING, _q_reason STRING")
        cond = ((bronze["db"] == reasons["_q_db"]) & (bronze["table"] == reasons["_q_table"])
                & (bronze["_shape"] == reasons["_q_shape"]) & (bronze["_seq"] > reasons["_q_start"])
                & (reasons["_q_end"].isNull() | (bronze["_seq"] < reasons["_q_end"])))
        parts.append(bronze.join(F.broadcast(reasons), cond, "inner")
                     .select(*bronze.columns, "_q_reason", F.lit("SchemaMismatch").alias("_q_class")))
    now = _dt.datetime.now(_UTC)
    rows = []
    for part in parts:
        rows += part.select(
            F.col("source_file").alias("file"), "file_seq", F.col("event_pos").alias("offset"),
            F.concat(F.lit("silver: "), F.col("db"), F.lit("."), F.col("table"), F.lit(" _seq "), F.col("_seq"),
                     F.lit(": "), F.col("_q_reason")).alias("reason"),
            F.col("_q_class").alias("error_class"), "decoder_version", "db", "table", "_seq",
        ).collect()
    if not rows:
        return 0, {}
    handled: dict[tuple[str, str], str] = {}
    for r in rows:
        key = (r["db"], r["table"])
        handled[key] = max(handled.get(key, ""), r["_seq"])
    data = [(r["file"], r["file_seq"], r["offset"], r["reason"], r["error_class"], r["decoder_version"], None, None,
             run_id, now) for r in rows]
    state.append(spark, cfg, state.QUARANTINE, data)
    return len(data), handled

