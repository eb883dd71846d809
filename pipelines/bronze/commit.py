"""One bronze batch: run its decode tasks, then commit bronze, ddl, xa and quarantine rows with
the write-ahead manifest around them (see "How a run goes", step 4, in
:mod:`pipelines.bronze.step`)."""
from __future__ import annotations

import datetime as _dt
from collections import Counter
from typing import TYPE_CHECKING, Callable

from pipelines.bronze.decode import (
    SMALL_COLUMN, StageTarget, TemporalPrecision, WorkRange, frame_partition, stage_partition, whole_file_partition,
)
from pipelines.bronze.plan import FilePlan
from pipelines.bronze.records import Quarantined
from pipelines.bronze.schema import BRONZE_TABLE, DECODER_VERSION
from pipelines.bronze.bookkeeping import (
    PENDING_APP_ID, QUARANTINED, TXN_APP_ID, BronzeError,
    BronzeStats, append_frame, append_rows, bronze_struct, delta_io_module, manifest_rows, xa_rows,
)
from pipelines.bronze.tasks import (
    GLOB, WHOLE_FILE_MAX, KeptFiles, TaskProgress, progress_enabled, prefix_facts, whole_files,
)
from pipelines import state
from pipelines import storage
from pipelines.lock import check_held
from pipelines.config import PipelineConfig

if TYPE_CHECKING:
    from pipelines.schema import SchemaHistory



def _precision_for(history: "SchemaHistory", plans: list) -> "TemporalPrecision | None":
    """MariaDB 5.3 temporal precision for this batch's tasks, from the schema history the step
    read (persisted, ``_pipeline/ddl``, seeds; earlier batches of the run applied) with the DDL of
    the batch itself (found by the survey tasks) applied to it, in ``_seq`` order; None when no
    table needs it."""
    stmts = sorted((st for p in plans for st in p.statements), key=lambda t: t[2])
    for query, db, seq in stmts:
        if seq > history.last_seq:
            history.apply_statement(query, db, seq)
    precision = TemporalPrecision.of_history(history)
    return precision if precision.by_table else None


def reads_whole(p: FilePlan, cfg: PipelineConfig) -> bool:
    """Does the one task that decodes ``p`` read the file whole, through Spark's ``binaryFile``
    source (or its ``binaryFiles`` RDD reader, as ``parallelism.whole_files`` says)? Yes when the
    batch reads the file from its first event in one range (else the task reads only its byte
    range), unless the file is over :data:`WHOLE_FILE_MAX` or its path has characters Hadoop's
    input paths would expand as a glob or split on (a comma)."""
    return (cfg.parallelism.whole_files != "ranges" and len(p.ranges) == 1 and p.ranges[0][0] <= 4
            and p.file.size <= WHOLE_FILE_MAX and not GLOB.search(p.file.uri))


def _split_work(cfg: PipelineConfig, plans: list[FilePlan], work: list[WorkRange], kept: KeptFiles | None) -> tuple:
    """The batch's work as ``(from_kept, to_read, ranged)``: files read whole from the run's kept
    copy (``kept``, :func:`pipelines.bronze.tasks.keep_whole`), files read whole by one whole-file
    read (:func:`pipelines.bronze.tasks.whole_files`), each ``{name: WorkRange}``; and the byte
    ranges of split files, a task each."""
    whole_names = {p.file.name for p in plans if reads_whole(p, cfg)}
    whole = {w.name: w for w in work if w.name in whole_names}
    from_kept = {n: w for n, w in whole.items() if kept is not None and n in kept.names}
    to_read = {n: w for n, w in whole.items() if n not in from_kept}
    return from_kept, to_read, [w for w in work if w.name not in whole_names]


def _task_records(spark, cfg: PipelineConfig, plans: list[FilePlan], work: list[WorkRange], target,
                  kept: KeptFiles | None = None):
    """The RDD of the batch's records of :func:`~pipelines.bronze.decode.stage_range` (the tasks
    write the bronze rows as Parquet files): see :func:`_split_work` for what each task reads."""
    from_kept, to_read, ranged = _split_work(cfg, plans, work, kept)
    sc = spark.sparkContext
    parts = []
    if from_kept:
        parts.append(kept.records(from_kept).mapPartitions(whole_file_partition(from_kept, target)))
    if to_read:
        files = whole_files(spark, cfg.parallelism.whole_files, [w.uri for w in to_read.values()])
        parts.append(files.mapPartitions(whole_file_partition(to_read, target)))
    if ranged:
        parts.append(sc.parallelize(ranged, len(ranged)).mapPartitions(stage_partition(target)))
    return parts[0] if len(parts) == 1 else sc.union(parts)


_FRAME_INPUT = "work BINARY, path STRING, content BINARY"


def _task_frame(spark, cfg: PipelineConfig, plans: list[FilePlan], work: list[WorkRange], kept: KeptFiles | None):
    """The DataFrame of the batch's decoded records (:func:`~pipelines.bronze.decode.frame_partition`):
    the bronze rows as the tasks' Arrow batches, and the other records in :data:`SMALL_COLUMN`. The
    tasks read what :func:`_split_work` says, each file read whole as one row of its bytes."""
    import pickle

    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from_kept, to_read, ranged = _split_work(cfg, plans, work, kept)
    sc = spark.sparkContext
    parts = []
    if from_kept:
        parts.append(spark.createDataFrame(kept.records(from_kept).map(lambda r: (None, r[0], bytes(r[1]))), _FRAME_INPUT))
    if to_read:
        uris = [w.uri for w in to_read.values()]
        if cfg.parallelism.whole_files == "binaryFiles":
            files = whole_files(spark, "binaryFiles", uris).map(lambda r: (None, r[0], bytes(r[1])))
            parts.append(spark.createDataFrame(files, _FRAME_INPUT))
        else:
            parts.append(spark.read.format("binaryFile").load(uris)
                         .select(F.lit(None).cast("binary").alias("work"), "path", "content"))
    if ranged:
        items = sc.parallelize([(pickle.dumps(w), None, None) for w in ranged], len(ranged))
        parts.append(spark.createDataFrame(items, _FRAME_INPUT))
    frame = parts[0]
    for part in parts[1:]:
        frame = frame.union(part)
    struct = bronze_struct()
    schema = delta_io_module().spark_schema_to_arrow(struct, force_nullable=True)
    out = T.StructType([T.StructField(f.name, f.dataType, True) for f in struct.fields]
                       + [T.StructField(SMALL_COLUMN, T.BinaryType(), True)])
    return frame.mapInArrow(frame_partition({**from_kept, **to_read}, schema), out)


def run_batch(spark, cfg: PipelineConfig, plans: list[FilePlan], batch: int, stats: BronzeStats, now,
               history: "Callable[[], SchemaHistory]", kept: KeptFiles | None = None) -> None:
    """Decode and commit one batch; ``history()`` is the run's schema history (read once, by the
    step, when a batch first needs it); ``kept``: the run's remote files read once (their decode
    reads that copy)."""
    cached: list = []
    try:
        _decode_and_commit(spark, cfg, plans, batch, stats, now, cached, history, kept)
    finally:
        for rdd in cached:
            rdd.unpersist()


def _decode_and_commit(spark, cfg: PipelineConfig, plans: list[FilePlan], batch: int, stats: BronzeStats, now,
                       cached: list, history: "Callable[[], SchemaHistory]", kept: KeptFiles | None = None) -> None:
    """Decode and commit one batch (see the module docs for the order of writes).

    Spark jobs: one that decodes every range and brings back the small
    records (per-range stats, statements, statement quarantine rows) while the
    bronze rows stay cached on the executors (or, with delta-rs, are staged as Parquet files by
    the tasks), then the bronze write.
    """
    run_id = stats.run_id
    settings = storage.current()  # shipped to the tasks with their work
    work = _work_ranges(plans, run_id, now, history, settings)
    by_name = {p.file.name: p for p in plans}
    d = delta_io_module()
    bronze_path = cfg.warehouse_path(BRONZE_TABLE)
    staged = d.backend_for(spark, cfg.delta.backend).on_driver  # tasks stage the Parquet files
    struct = bronze_struct()
    target = (StageTarget(bronze_path, d.prepare_staging(bronze_path, struct), settings)
              if staged and work else None)
    frame, small = _decode(spark, cfg, plans, work, target, batch, run_id, kept, cached)
    op_counts, skips, cuts, ranges = _fold_range_stats(small, by_name)
    if cfg.strict:
        _refuse_bad_input(cuts, by_name, small)
    _mark_cut_files(spark, cuts, by_name)
    keep, outside_skips = _row_filters(cuts, skips)

    bronze_df = None
    staged_files: list = []
    if target is not None:
        staged_files = _landing_files(d, bronze_path, small, cuts, op_counts, ranges)
    if frame is not None:
        bronze_df = _bronze_rows(frame, cuts, skips, op_counts)
    stmts = [rec for kind, rec in small if kind == "stmt" and keep((kind, rec)) and outside_skips((kind, rec))]
    quar_rows = [rec._replace(batch=batch) for kind, rec in small if kind == "quar" and keep((kind, rec))]
    # the bad events found by the survey or by the decode tasks
    for p in plans:
        if p.status == QUARANTINED and p.error:
            quar_rows.append(Quarantined(p.file.name, p.file.file_seq, p.error_offset, p.error, p.error_class,
                                         DECODER_VERSION, p.error_raw or b"", batch, run_id, now))

    # a. write-ahead manifest rows (not when this run lost its remote warehouse lock)
    check_held()
    append_rows(spark, cfg, manifest_rows(plans, batch, "pending", run_id, now), state.MANIFEST_LAYOUT,
                 state.path(cfg, state.MANIFEST), PENDING_APP_ID, batch)
    # b. the data, each append idempotent by (txnAppId, txnVersion)
    if bronze_df is not None:
        append_frame(spark, cfg, bronze_df, bronze_path, TXN_APP_ID, batch)
    elif target is not None:
        d.commit_staged(bronze_path, staged_files, struct, txn_app_id=TXN_APP_ID, txn_version=batch)
    for rows, ddl, table in ((stmts, state.DDL_TABLE_LAYOUT, state.DDL), (xa_rows(plans, run_id), state.XA_LAYOUT, state.XA),
                             (quar_rows, state.QUARANTINE_LAYOUT, state.QUARANTINE)):
        if rows:
            append_rows(spark, cfg, rows, ddl, state.path(cfg, table), TXN_APP_ID, batch)
    # c. the batch is done
    rows_by_file: Counter = Counter()
    for (name, op), n in op_counts.items():
        rows_by_file[name] += n
        stats.rows[op] += n
    committed_at = _dt.datetime.now(_dt.timezone.utc)  # (after the appends: silver.marks.late_since)
    append_rows(spark, cfg, manifest_rows(plans, batch, "committed", run_id, now, rows_by_file, committed_at),
                 state.MANIFEST_LAYOUT, state.path(cfg, state.MANIFEST), TXN_APP_ID, batch)
    _count_batch(stats, cfg, plans, stmts, quar_rows)


def _work_ranges(plans: list[FilePlan], run_id: str, now, history: "Callable[[], SchemaHistory]",
                 settings) -> list[WorkRange]:
    """One decode task's work per planned byte range of the batch's files."""
    precision = _precision_for(history(), plans) if any(p.ranges for p in plans) else None
    return [WorkRange(p.file.name, p.file.uri, p.file.file_seq, s, e, None, run_id, now, precision, settings)
            for p in plans for s, e in p.ranges]


def _decode(spark, cfg: PipelineConfig, plans: list[FilePlan], work: list[WorkRange], target, batch: int,
            run_id: str, kept: KeptFiles | None, cached: list) -> tuple:
    """Run the batch's decode tasks: ``(frame, small)``, the cached DataFrame of every record
    (:func:`_task_frame`; None when the tasks staged the bronze rows themselves, ``target``) and
    the small records brought back (per-range stats, statements, quarantine rows, staged files)."""
    if not work:
        return None, []
    import pickle

    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    frame = None
    if target is not None:
        job = _task_records(spark, cfg, plans, work, target, kept)
        tasks, collect = job.getNumPartitions(), job.collect
    else:
        frame = _task_frame(spark, cfg, plans, work, kept).persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(frame)
        smalls = frame.where(F.col(SMALL_COLUMN).isNotNull()).select(SMALL_COLUMN)
        tasks = len(work)

        def collect():
            return [pickle.loads(r[0]) for r in smalls.collect()]
    with TaskProgress(spark, f"bronze-{run_id}-{batch}", tasks, progress_enabled(cfg), f"bronze batch {batch}"):
        small = collect()
    missing = {(w.name, w.start) for w in work} - {(rec.name, rec.start) for kind, rec in small if kind == "stat"}
    if missing:  # e.g. a file Spark's file source would not list: nothing of this batch is written
        name, start = min(missing)
        raise BronzeError(f"{name}: the task that decodes bytes from offset {start} on returned nothing "
                          f"(not read by Spark's whole-file reader? set parallelism.whole_files: ranges); "
                          f"nothing of batch {batch} was written")
    return frame, small


def _fold_range_stats(small: list, by_name: dict[str, FilePlan]) -> tuple[Counter, dict, dict, list]:
    """The per-range stat records added up into their files' plans: ``(op_counts, skips, cuts,
    ranges)``: rows per ``(file, op)``, the transactions skipped whole (kept in quarantine) per file,
    the offset of each file's first bad event (its cut), and the stat records themselves."""
    op_counts: Counter = Counter()
    skips: dict[str, list[tuple[int, int]]] = {}
    cuts: dict[str, int] = {}
    ranges = [rec for kind, rec in small if kind == "stat"]
    for rec in ranges:
        name, err = rec.name, rec.error
        p = by_name[name]
        p.events += rec.events
        p.ignorable_skipped += rec.ignorable
        p.invalid_text += rec.invalid
        if rec.skipped:
            skips.setdefault(name, []).extend(rec.skipped)
        for op, n in rec.ops.items():
            op_counts[(name, op)] += n
        if err is not None and (name not in cuts or err.cut < cuts[name]):
            cuts[name] = err.cut
            p.error, p.error_class, p.error_offset = err.message, err.error_class, err.offset
    return op_counts, skips, cuts, ranges


def _refuse_bad_input(cuts: dict[str, int], by_name: dict[str, FilePlan], small: list) -> None:
    """Strict mode: any bad event or quarantined statement fails the batch before it writes."""
    bad = [by_name[n].error for n in sorted(cuts, key=lambda n: by_name[n].file.file_seq)]
    bad += [rec.reason for kind, rec in small if kind == "quar"]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise BronzeError(f"bad input (strict mode): {bad[0]}{more}")


def _mark_cut_files(spark, cuts: dict[str, int], by_name: dict[str, FilePlan]) -> None:
    """A file cut by a bad event ends there, quarantined, with the hash and bytes of what came before."""
    cut_plans = [by_name[name] for name in cuts]
    for p in cut_plans:
        p.end, p.status = min(p.end, cuts[p.file.name]), QUARANTINED
    facts = prefix_facts(spark, [(p.file.uri, p.end, p.error_class, p.error_offset) for p in cut_plans])
    for p, (sha, raw) in zip(cut_plans, facts):
        p.sha256, p.error_raw = sha, raw


def _row_filters(cuts: dict[str, int], skips: dict[str, list[tuple[int, int]]]) -> tuple[Callable, Callable]:
    """``(keep, outside_skips)`` of a tagged record: before its file's cut; outside the transactions
    skipped whole. Rows, statements and quarantine rows all start ``(file, file_seq, pos, ...)``."""
    def keep(rec) -> bool:
        file, _, pos = rec[1][:3]
        return pos < cuts.get(file, 1 << 62)

    def outside_skips(rec) -> bool:
        file, _, pos = rec[1][:3]
        return not any(b <= pos < e for b, e in skips.get(file, ()))

    return keep, outside_skips


def _forget_counts(op_counts: Counter, names) -> None:
    for name in names:
        for key in [k for k in op_counts if k[0] == name]:
            del op_counts[key]


def _landing_files(d, bronze_path: str, small: list, cuts: dict[str, int], op_counts: Counter,
                   ranges: list) -> list:
    """The staged Parquet files that land: a range from its file's cut on lands nothing (the range
    holding the bad event dropped its own rows past the cut), and is counted again without them;
    the rest are discarded."""
    _forget_counts(op_counts, cuts)
    for name, start, _e, _ev, ops, *_rest in ranges:
        if name in cuts and start < cuts[name]:
            for op, n in ops.items():
                op_counts[(name, op)] += n
    landing, dropped = [], []
    for kind, rec in small:
        if kind == "files":
            name, start, files = rec
            (dropped if start >= cuts.get(name, 1 << 62) else landing).extend(files)
    d.discard_staged(bronze_path, dropped)
    return landing


def _bronze_rows(frame, cuts: dict[str, int], skips: dict, op_counts: Counter):
    """The bronze rows of the cached ``frame`` that land: before their file's cut, outside the
    transactions skipped whole (:func:`_row_filters`' rule, as a filter); the rows of cut files
    are counted again."""
    from pyspark.sql import functions as F

    rows = frame.where(F.col(SMALL_COLUMN).isNull()).drop(SMALL_COLUMN)
    dropped = F.lit(False)
    for name, cut in cuts.items():
        dropped = dropped | ((F.col("source_file") == name) & (F.col("event_pos") >= cut))
    for name, spans in skips.items():
        for begin, end in spans:
            dropped = dropped | ((F.col("source_file") == name) & F.col("event_pos").between(begin, end - 1))
    if cuts or skips:
        rows = rows.where(~dropped)
    if cuts:
        _forget_counts(op_counts, cuts)  # the cut dropped rows counted by the tasks
        counted = rows.where(F.col("source_file").isin(list(cuts))).groupBy("source_file", "op").count().collect()
        op_counts.update({(r["source_file"], r["op"]): r["count"] for r in counted})
    return rows


def _count_batch(stats: BronzeStats, cfg: PipelineConfig, plans: list[FilePlan], stmts: list,
                 quar_rows: list) -> None:
    """The committed batch in the run's stats."""
    stats.statements += len(stmts)
    stats.quarantined += len(quar_rows)
    for rec in quar_rows:  # (said once at the run's end)
        if rec.error_class == "StatementFormat":
            stats.statement_format[rec.file] = stats.statement_format.get(rec.file, 0) + 1
    stats.ignorable_skipped += sum(p.ignorable_skipped for p in plans)
    stats.invalid_text += sum(p.invalid_text for p in plans)
    stats.events += sum(p.events for p in plans)
    stats.bytes += sum(p.end - p.start for p in plans)
    stats.batches += 1
    stats.read_whole += sum(reads_whole(p, cfg) for p in plans if p.ranges)
