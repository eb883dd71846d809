"""A run's lanes: the state they share (:class:`SilverRun`), the small segments' rows fetched for
them, and each segment applied in turn: its schema events, then its changes by the driver's fold,
Arrow or Spark's MERGE. Not here: what the run reads and plans, its watermarks' final write,
quarantine and run log (:mod:`pipelines.silver.step`)."""
from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines import delta_io
from pipelines.schema import resolve as schema_resolve
from pipelines.config import PipelineConfig
from pipelines.errors import worker_error
from pipelines.paths import silver_table_path
from pipelines.schema import Resolution, SchemaVersion
from pipelines.silver import (bronze_scan, big_segments, driver, driver_fold, ranges, schema_events,
                              segment_cells)
from pipelines.silver import properties as silver_properties
from pipelines.silver.changes import changes_from_bronze
from pipelines.silver.columns import DEFAULT_PREFIX, SilverStepError
from pipelines.silver.merge import apply_changes
from pipelines.silver.segments import SegmentPlan
from pipelines.silver.shapes import parse_shape, shape_key, slim_image
from pipelines.silver.typed_values import NotCanonical
from pipelines.silver.watermarks import read_watermark, write_watermarks
from pipelines.spark_session import job_description
from pipelines.logs import get_logger

_log = get_logger(__name__)


_IMAGES = ("before", "after")
_IN_SEGMENT = "_in_segment"  # a segment row's test of its own segment filter (see SilverRun.run_segment)
_NAMED_FIXES = frozenset({schema_resolve.FIX_ENUM, schema_resolve.FIX_SET})  # they look at a cell's name


def fetch_small(work: "SilverRun", lanes: list, scan, bronze) -> None:
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


def run_lanes(work: "SilverRun", lanes: list) -> None:
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
REPLANS = 8  # plans of one segment, each made stale by another run's commit to its table (see SilverRun.run_segment)



class SilverRun:
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
        # folded in Arrow (silver.columnar), one at a time (read in one pass first: big_reads,
        # when they fit; else each by parts)
        self.scan: delta_io.Scan | None = None
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
                what = worker_error(str(e)) or f"{type(e).__name__}: {e}"  # (a task's: its Python error)
                raise SilverStepError(f"silver {seg.db}.{seg.table} ({where}): {what}") from e

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
                keys=resolution.keys, specs=resolution.specs, rejected=resolution.rejected,
                partial=partial, scd2=self.cfg.is_scd2(seg.db, seg.table), rows=n):
            return (seg.db, seg.table, seg.start, seg.end)
        return None

    def apply_with_spark(self, seg: SegmentPlan, path: str, resolution: Resolution, version: SchemaVersion | None,
                         good: list[str], partial: bool):
        """MERGE the segment's rows of the shapes ``good`` with Spark (:func:`_apply_segment`)."""
        segment = ranges.spark_filter(seg.db, seg.table, seg.start, seg.end)
        if len(good) < len(seg.shapes):  # some shapes go to quarantine
            segment = segment & F.col("_shape").isin(good)
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
        defaults = schema_events.insert_defaults(version, resolution.specs) if partial else {}
        return _apply_segment(self.spark, self.cfg, seg, path, rows, resolution, defaults, partial=partial)

    def _applied_past(self, path: str, end: str) -> bool:
        """True when the table's watermark is at or past ``end``: a later segment of it was applied
        (by another run, whose commits this run's plan did not see), so this one is done."""
        exists = delta_io.open_table(path, self.backend, self.spark).exists()
        mark = read_watermark(path, spark=self.spark, backend=self.backend) if exists else None
        return mark is not None and mark >= end

    def _big(self, seg: SegmentPlan, resolution: Resolution, n_rows: int, partial: bool) -> bool:
        """A segment :mod:`pipelines.silver.big_segments` applies: delta-rs, nothing
        :func:`driver.eligible` refuses (its bytes are counted as it is read)."""
        return self.scan is not None and driver.eligible(
            keys=resolution.keys, specs=resolution.specs, rejected=resolution.rejected,
            partial=partial, scd2=self.cfg.is_scd2(seg.db, seg.table), rows=n_rows, limit=None)

    def apply_big(self, seg: SegmentPlan, path: str, resolution: Resolution, n_rows: int):
        """Apply a segment with :func:`big_segments.apply_big`: as read with the run's other big
        segments, else read by parts (:func:`segment_cells.read_parts`); None when Spark's path
        must: bronze read otherwise than Spark reads it (e.g. another count of rows), or a value
        it must judge."""
        with self.big_lock:
            segment = self.big.pop((seg.db, seg.table, seg.start, seg.end), None)
            if segment is None:
                segment = segment_cells.read_parts(self.scan, segment_cells.SegmentRead(
                    seg.db, seg.table, seg.start, seg.end, with_name=bool(resolution.fixes)))
            try:
                return big_segments.apply_big(path, segment, resolution.specs, resolution.keys, rows=n_rows,
                                              fixes=resolution.fixes, delete_mode=self.cfg.delete_mode,
                                              column_prefix=self.cfg.silver.prefix_for(seg.db, seg.table),
                                              spark=self.spark, properties=self.properties)
            except (NotCanonical, segment_cells.Unreadable):
                return None

    def run_segment(self, seg: SegmentPlan) -> None:
        """Apply one segment, planned from the silver table as it is and committed only on that
        version (:meth:`delta_io.Table.pinned`): when another run commits to the table first, the plan
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
                with delta_io.open_table(path, self.backend, self.spark).pinned():
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
        table = delta_io.open_table(path, self.backend, self.spark)
        if wanted and table.exists():
            table.set_properties(wanted)

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
                defaults = schema_events.insert_defaults(version, resolution.specs) \
                    if partial else None
                result = driver_fold.apply_small(spark, path, small, resolution.specs,
                                                 resolution.keys, fixes=resolution.fixes, delete_mode=cfg.delete_mode,
                                                 column_prefix=cfg.silver.prefix_for(seg.db, seg.table),
                                                 backend=self.backend, properties=self.properties, partial=partial,
                                                 defaults=defaults)
                applied_by = "driver"
            except NotCanonical:  # a value that does not convert, or a fold the driver refuses: Spark's path
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
    changes = changes_from_bronze(rows, resolution.specs, defaults, resolution.fixes, partial=partial,
                                  guard=F.col(_IN_SEGMENT))
    return apply_changes(spark, changes, resolution.specs, path, keys=keys, delete_mode=cfg.delete_mode,
                                scd2=scd2, backend=cfg.delta.backend,
                                column_prefix=cfg.silver.prefix_for(seg.db, seg.table),
                                properties=silver_properties.for_new_table(
                                    cfg.silver, delta_io.resolve_backend(spark, cfg.delta.backend)))
