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
   ``_pipeline/silver_watermarks`` (layout :data:`pipelines.state.WATERMARKS_LAYOUT`; append-only, the
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

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipelines import delta_io
from pipelines.arrow_pool import use_fast_pool
from pipelines import state
from pipelines.schema import store as schema_store
from pipelines.bronze.schema import BRONZE_TABLE
from pipelines.config import PipelineConfig
from pipelines.paths import silver_table_path
from pipelines.schema import UNPARSED
from pipelines.silver import bronze_scan, ranges, snapshots
from pipelines.silver.lanes import SilverRun, fetch_small, run_lanes
from pipelines.silver.marks import (READ_THROUGH_DB, above_marks, drop_rolled_back_xa, late_since,
                                    read_through_key, read_through_since)
from pipelines.silver.segments import SEG, lanes_of, plan_segments, segments_of, with_segment
from pipelines.silver.shapes import shape_rows_of, with_shape
from pipelines.silver.stats import SilverStats
from pipelines.silver.watermarks import read_watermarks, write_watermarks
from pipelines.spark_session import job_description

_UTC = _dt.timezone.utc


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
    work = SilverRun(spark, cfg, history, bronze, shape_rows, pk_idx, stats, written)
    work.scan = scan
    finished = False
    try:
        lanes = lanes_of(steps)
        fetch_small(work, lanes, scan, bronze)
        run_lanes(work, lanes)
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
    table = delta_io.open_table(cfg.warehouse_path(BRONZE_TABLE), cfg.delta.backend, spark)
    above = None if since is None else ("_ingested_at", since)
    has_new = table.exists() and not (above is not None and table.nothing_above(*above))
    if not has_new:  # (nothing new: no Spark job at all, only the schema events)
        return None, [], frozenset(), set(), None
    # only what was ingested since the last run that finished (the files before are not read)
    bronze = table.read_df(above=above)
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
    scan = table.scan_arrow(above) if table.backend.on_driver and xa is None else None
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
                & (bronze["_shape"] == reasons["_q_shape"])
                & ranges.spark_holds(bronze["_seq"], reasons["_q_start"], reasons["_q_end"]))
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

