"""The bronze step: decode the new bytes of a folder of binlog files into the
bronze change log ``<warehouse>/bronze/binlog_changes`` (schema:
:mod:`pipelines.bronze.schema`), exactly once.

>>> stats = run(spark, load_config("conf/pipeline.yaml"))  # doctest: +SKIP
>>> stats.rows  # doctest: +SKIP
{'c': 1200, 'u': 310, 'd': 45}

How a run goes
--------------
1. **List** the input folder through the Hadoop FileSystem of the driver's JVM
   (so ``hdfs://``, ``s3a://``, ``file:/`` and plain paths all work). Binlog
   files are ``<prefix>.<digits>``, ordered by the number (``file_seq``);
   ``*.index`` and every other name is ignored and counted (a name such as
   ``binlog.000002.bak`` is compared with ``binlog.000002`` and reported as a
   copy when the bytes are the same). Two files with the same number stop the run.
2. **Plan** each file against the manifest ``<warehouse>/_pipeline/manifest``:

   * same size and modification time as when it was last processed (and
     finished, quarantined, or still the newest file): skipped without reading it;
   * a file the manifest does not know yet must continue the sequence (see
     *Sequence integrity*); the first one that does not, and every file after
     it, is held back;
   * otherwise the file is *surveyed*: one Spark job reads every such file whole,
     in tasks side by side (:func:`pipelines.bronze.plan.survey_file`). A task checks
     that the sha256 of the bytes that were already processed is unchanged (else
     :class:`BronzeError` "content changed since it was processed", raised when
     the driver reaches the file), indexes the file's transactions
     (:func:`pipelines.binlog.txindex.scan`), cuts the new part ``[previous
     complete_until, complete_until)`` into byte ranges on transaction boundaries
     of about ``parallelism.target_bytes_per_task``, and hashes what the manifest
     will record. Only small findings come back: the plan, its DDL statements and
     XA groups, the GTID head, digests, the raw bytes of a bad event.

   The driver never reads a binlog file: it lists the folder, keeps the manifest
   and decides, in file order, what each finding means (sequence checks, copies,
   errors). A local file is memory-mapped by the task that reads it. A new remote
   file that one task will decode whole (at most ``target_bytes_per_task``) is read
   once, by Spark's whole-file reader (Hadoop's filesystem, with the session's
   S3/HDFS settings), and kept on the executors (memory, then local disk) until the
   run ends: the survey reads that copy, and so does its decode task
   (:class:`pipelines.bronze.tasks.KeptFiles`). Any other remote file (a grown one,
   one to split into ranges, an interrupted batch's) is read by the survey with
   ``pyarrow.fs`` (:mod:`pipelines.storage`) into the executor's temp space, and
   its ranges again by their decode tasks: reading only a range of a big file is
   what lets its tasks run side by side without each holding the whole file.
3. **Decode** in Spark tasks (:func:`pipelines.bronze.decode.decode_range`), each
   indexing its own range first:

   * a file the batch reads from its first event in *one* task (at most
     ``target_bytes_per_task`` of new bytes, or one transaction, up to
     :data:`pipelines.bronze.tasks.WHOLE_FILE_MAX`) is read whole by Spark's
     ``binaryFile`` source (or ``binaryFiles``, as ``parallelism.whole_files``
     says) and decoded from its content as the ``binlog_changes`` SQL function
     decodes a ``binaryFile`` row (``parallelism.whole_files: ranges`` turns this
     off);
   * every other range (a split file, or the new tail of a file that grew) is a
     task of its own that reads just its bytes: a local (or ``file:``) path is
     memory-mapped; any other path is read with ``pyarrow.fs`` (with the driver's
     storage settings, shipped in the task), and only the format description and the task's own range are
     written into a sparse local temp file, so offsets stay file offsets and an
     executor never holds more than one range.

   Each ``RowChange`` becomes one bronze row; each ``StatementChange`` one row of
   ``<warehouse>/_pipeline/ddl``.
4. **Commit** one batch (at most ``parallelism.max_batch_bytes`` of binlog) at
   a time, in this order:

   a. manifest rows with ``phase='pending'`` (write-ahead: the exact ranges),
   b. bronze, ddl, xa and quarantine appends, each with the Delta transaction
      id ``(txnAppId="bronze", txnVersion=<batch>)``,
   c. manifest rows with ``phase='committed'`` (txn id ``bronze`` as well).

   A run that finds pending rows without committed ones (a crash between a
   and c) first redoes exactly those ranges with the same batch number: the
   appends that had already committed are skipped by Delta's transaction id,
   the others happen now. Nothing is lost or applied twice, even when the file
   grew in the meantime (the redo stops at the recorded ``complete_until``).
5. **Bad input** goes to ``<warehouse>/_pipeline/quarantine`` (one row per bad
   piece: file, offset, reason naming file and offset, error class, decoder
   version and the raw bytes) while everything good lands; ``strict: true``
   raises :class:`BronzeError` instead, before anything of that batch is
   written. What each kind of damage does:

   * **framing damage** (not a binlog, empty, checksum mismatch, an impossible
     event length or next position, truncated in a file that is not the
     newest, an unfinished transaction at the end of a file that is not the
     newest, anything after a ROTATE or STOP event): the file *stops* there.
     The transactions before the bad event land, the manifest records the file
     as ``quarantined`` with ``complete_until`` at the start of the
     transaction holding the bad event, and the quarantine row keeps the
     event's bytes (its length field capped by what remains and by
     ``MAX_RAW_EVENT``; the first ``MAX_RAW_HEAD`` bytes of a file that is not
     a binlog). Nothing after the bad event lands from that file (later files
     do): the boundaries after it cannot be trusted. The tail is not lost: the
     manifest has not moved past it, and a corrected copy of the file (same
     good prefix) is read on from ``complete_until`` by the next run.
   * **a transaction that cannot be decoded although its framing is sound**
     (its checksums verified and the quick pass walked through it: a rows
     event without its TABLE_MAP, a column count that differs from the table
     map, a column type the decoder does not support, ...): only that
     transaction is skipped. Its quarantine row keeps the *whole transaction*
     (``offset`` = its first byte, ``raw`` = all its events, at most
     ``MAX_RAW_EVENT`` bytes), the reason names the offset of the event that
     failed, and the rest of the file lands. A larger transaction stops the
     file as above instead, so no row is ever lost.
   * **an unknown event type**: flagged ignorable (``LOG_EVENT_IGNORABLE_F``,
     0x80) it is skipped and counted (``ignorable_skipped`` in the manifest and
     the run summary); not ignorable it gets a quarantine row with its bytes
     (class ``UnknownEvent``) and everything around it lands: the decoder does
     not know what it means, so it cannot turn it into rows, and it must not
     vanish silently.
   * **statement-format DML** cannot be replayed as rows: its statement goes
     to the ddl table and a quarantine row (``StatementFormat``) says so.
   * **the newest file** may end in the middle of an event or a transaction
     (the server is writing it): that tail is left for the next run (status
     ``partial``) and lands once the file has grown. Only a believable cut
     waits: a tail after a ROTATE or STOP event, or an event header whose
     length runs past the end of the file while its next-position field does
     not agree, is damage and is quarantined even in the newest file.

   Without checksums (``binlog_checksum=NONE``) only damage to the framing and
   to the structure of events is detected; a flipped bit inside a value lands
   as a wrong value.
6. **Log** one row per run in ``<warehouse>/_pipeline/runs`` and print a summary. What the run
   did not do is a ``warning:`` line each, counted in the row's ``warnings``
   (:mod:`pipelines.bronze.notices`, docs/errors.md): no binlog files in the folder, a newest file
   whose tail waits (which file, from which byte), a file stopped at bad input, changes logged as
   statements (with the server setting), a server other than the previous file's in one run.

Sequence integrity
------------------
A file the manifest does not know yet is checked against the file before it
(the highest-numbered file of the folder or the manifest below it):

* **ROTATE**: when the previous file ends with a ROTATE event, the next file
  must be the one it names;
* **numbering**: otherwise the number must be the previous one plus 1;
* **GTIDs** (when both sides are known): the GTIDs the new file says were
  logged before it (MariaDB ``GTID_LIST``, MySQL ``PREVIOUS_GTIDS``) must all
  be known at the end of the previous file (its own list plus the GTIDs of its
  transactions). Only a definite gap counts: a MariaDB ``domain-server`` whose
  last ``seq_no`` is higher than where the previous file ended, or a MySQL GTID
  the previous file never had. Jumps of ``seq_no`` inside a file (``SET
  gtid_seq_no``) and domains that disappear are not gaps.
* **copies**: a new file with the same size and sha256 as a file processed
  before (a re-numbered copy) is never landed twice.

The first file that breaks the sequence and every file after it are *held
back*: the files before it land, then the run fails with a message naming the
missing piece ("binlog.000003 is missing between binlog.000002 and
binlog.000004 ..."). A file that arrives late (``000005`` before ``000004``)
therefore just waits: the next run after ``000004`` arrived lands both, in
order. ``accept_gaps: true`` turns each break into a warning and goes on (a
copy is still skipped, never landed). The first file the pipeline ever sees
starts the history: files before it are not a gap. A file older than files
already processed fails the run unless ``accept_gaps`` is set.

Decisions
---------
* Every complete event group lands, whatever ended it: ``commit``; ``ddl``
  (e.g. ``CREATE TABLE ... SELECT`` rows); ``rollback`` (a ROLLBACK-ended group
  only holds changes to non-transactional tables, which did happen);
  ``xa_prepare`` (the rows land where the server logged them, as a replica
  applies them). Every XA PREPARE / COMMIT / ROLLBACK is also recorded in
  ``<warehouse>/_pipeline/xa`` (``xa_xid``, ``gtid``, ``kind``) so the silver
  step can drop the rows of a prepared branch that was rolled back
  (bronze rows of the branch share its ``gtid``).
* Bronze lands every table; ``tables.include/exclude`` are the silver step's.
* Quarantined bytes can be decoded again after a decoder fix with
  ``python -m pipelines.quarantine redecode`` (:mod:`pipelines.quarantine`);
  landing them is not automatic.

Tables (all Delta, written through :mod:`pipelines.delta_io`): their layouts are in
:mod:`pipelines.state` (``MANIFEST_LAYOUT``, ``QUARANTINE_LAYOUT``, ``DDL_TABLE_LAYOUT``, ``XA_LAYOUT``,
``RUNS_LAYOUT``).
"""
from __future__ import annotations

import bisect
import datetime as _dt

from pipelines.bronze import notices
from pipelines.bronze.commit import run_batch
from pipelines.bronze.listing import SourceFile, copy_notes, list_folder
from pipelines.bronze.plan import FilePlan, Survey, SurveyRequest, latest_committed
from pipelines.bronze.schema import BRONZE_TABLE
from pipelines.bronze.sequence import Link, check_sequence, link_problem
from pipelines.bronze.bookkeeping import (
    DONE, PARTIAL, QUARANTINED, BronzeError, BronzeStats, bronze_struct, delta_io_module, last_txn,
)
from pipelines.bronze.tasks import file_digests, keep_whole, ship_package, survey
from pipelines import state
from pipelines.config import PipelineConfig
from pipelines.spark_session import job_description

_UTC = _dt.timezone.utc


def _redo_plans(spark, cfg, pending: list, files: dict[str, SourceFile]) -> list[FilePlan]:
    """Plans that redo an interrupted batch exactly (same ranges, same outcome)."""
    requests = []
    for r in pending:
        f = files.get(r.name)
        if f is None:
            raise BronzeError(f"{r.name}: batch {r.batch} was interrupted and the file is gone; cannot redo it")
        requests.append(SurveyRequest(f, None, False, redo=r))
    found = survey(spark, cfg, requests)
    for req in requests:
        if found[req.file.name].error is not None:
            raise BronzeError(found[req.file.name].error)
    return [found[req.file.name].plan for req in requests]


def run(spark, cfg: PipelineConfig) -> BronzeStats:
    """Ingest every new byte of ``cfg.input`` into bronze; returns what was done.

    Raises :class:`BronzeError` for changed input, a broken sequence, or bad
    input in strict mode (the run is logged as failed in ``_pipeline/runs``).

    >>> run(spark, cfg).summary()  # doctest: +SKIP
    'bronze run ... ok: 3 file(s) read, 0 skipped, 1 other name(s) ignored; ...'
    """
    now = _dt.datetime.now(_UTC)
    stats = BronzeStats(run_id=state.new_run_id(now), started_at=now)
    with job_description(spark, f"bronze {stats.run_id}"), state.logged_run(spark, cfg, stats):
        _run(spark, cfg, stats, now)  # (the job description: the Spark UI's name of the run's jobs)
    return stats


def _schema_history(spark, cfg: PipelineConfig):
    """The run's schema history, read (``_pipeline/schema_history``, ``_pipeline/ddl``, seeds) the
    first time a batch asks for it; each batch then applies its own DDL to it."""
    memo: list = []

    def history():
        if not memo:
            from pipelines.schema import store as schema_store

            memo.append(schema_store.build_history(spark, cfg)[0])
        return memo[0]

    return history


def _run(spark, cfg: PipelineConfig, stats: BronzeStats, now) -> None:
    ship_package(spark)
    history = _schema_history(spark, cfg)
    bronze = delta_io_module().open_table(cfg.warehouse_path(BRONZE_TABLE), cfg.delta.backend, spark)
    if bronze.exists():
        # a bronze table from an older version gains the columns added since (e.g. _shape); its
        # old rows have NULL there, and silver computes what they lack
        have = {n.lower() for n in bronze.schema().fieldNames()}
        new = [f for f in bronze_struct().fields if f.name.lower() not in have]
        if new:
            bronze.add_columns(new)
    files, others = list_folder(spark, cfg.input)
    stats.files_ignored = len(others)
    if not files:
        stats.warn(notices.no_binlogs(cfg.input, [o.name for o in others]))
    by_name = {f.name: f for f in files}
    newest_seq = files[-1].file_seq if files else -1
    manifest = state.read_rows(spark, cfg, state.MANIFEST)
    next_batch = max([r.batch for r in manifest] + [last_txn(spark, cfg, cfg.warehouse_path(BRONZE_TABLE))]) + 1

    # 1. an interrupted batch is redone first, exactly
    committed = {r.batch for r in manifest if r.phase == "committed"}
    interrupted: dict[int, list] = {}
    for r in manifest:
        if r.phase == "pending" and r.batch not in committed:
            interrupted.setdefault(r.batch, []).append(r)
    for batch in sorted(interrupted):
        run_batch(spark, cfg, _redo_plans(spark, cfg, interrupted[batch], by_name), batch, stats, now, history)
    if interrupted:
        manifest = state.read_rows(spark, cfg, state.MANIFEST)

    latest = latest_committed(manifest)
    check_sequence(files, {r.file_seq: r.name for r in latest.values()}, accept_gaps=True)  # one number, one file
    newest_done = max((r.file_seq for r in latest.values()), default=-1)
    if not cfg.accept_gaps:
        late = [f for f in files if f.name not in latest and f.file_seq < newest_done]
        if late:
            raise BronzeError(
                f"{late[0].name} is older than files already processed (up to number {newest_done}); "
                f"set accept_gaps: true to ingest it anyway"
            )
    for note in copy_notes(others, files, lambda pairs: file_digests(spark, pairs)):
        stats.warn(note)

    # 2. plan in file order, one batch at a time; a break in the sequence holds back the rest

    todo = []
    for f in files:
        prev = latest.get(f.name)
        newest = f.file_seq == newest_seq
        if prev is not None and f.size == prev.size and f.mtime == prev.mtime and (
            prev.status in (DONE, QUARANTINED) or (prev.status == PARTIAL and newest)
        ):
            stats.files_skipped += 1
            if prev.status == PARTIAL and prev.complete_until < f.size:  # still waiting for the rest
                stats.warn(notices.waiting_tail(f.name, prev.complete_until, f.size))
            continue
        todo.append((f, prev, newest))

    # a new remote file one task will decode whole is read once, and kept for its decode
    kept = keep_whole(spark, cfg, [f for f, prev, _newest in todo if prev is None])
    try:
        _land(spark, cfg, stats, now, history, todo, latest, next_batch, kept)
    finally:
        if kept is not None:
            kept.release()
    if stats.statement_format:
        stats.warn(notices.statement_format(sum(stats.statement_format.values()), sorted(stats.statement_format)))


def _server_before(latest: dict, file_seq: int) -> tuple[str, tuple[str, int]] | None:
    """The manifest's newest file before ``file_seq`` whose server is known, with that server."""
    known = [r for r in latest.values() if r.file_seq < file_seq and getattr(r, "server_version", None) is not None]
    if not known:
        return None
    r = max(known, key=lambda r: r.file_seq)
    return r.name, (r.server_version, r.server_id)


def _say_what_waits(stats: BronzeStats, plan: FilePlan, wrote: tuple[str, tuple[str, int]] | None) -> None:
    """The warnings of one planned file: a tail that waits, a file that stops at a bad event, a
    server other than the previous file's (:mod:`pipelines.bronze.notices`)."""
    if wrote is not None and plan.server is not None:
        change = notices.server_change(wrote[0], wrote[1], plan.file.name, plan.server)
        if change is not None:
            stats.warn(change)
    if plan.status == PARTIAL and plan.end < plan.file.size:
        stats.warn(notices.waiting_tail(plan.file.name, plan.end, plan.file.size))
    elif plan.status == QUARANTINED and plan.error:
        stats.warn(notices.quarantined_file(plan.error))


def _land(spark, cfg: PipelineConfig, stats: BronzeStats, now, history, todo: list, latest: dict, next_batch: int,
          kept) -> None:
    """Survey ``todo`` (``(file, prev, newest)``), plan in file order and land the batches."""
    # every new byte is read in Spark tasks side by side (the survey); the driver gets small
    # findings back and decides in file order what they mean
    found: dict[str, Survey] = survey(spark, cfg, [SurveyRequest(f, prev, newest) for f, prev, newest in todo], kept)
    links = {r.file_seq: Link.of_row(r) for r in latest.values()}
    known = sorted(links)
    finished = {(r.size, r.sha256): r.name for r in latest.values()
                if r.status != QUARANTINED and r.complete_until == r.size > 0}
    finished_sizes = {size for size, _sha in finished}
    broken: str | None = None
    wrote = _server_before(latest, todo[0][0].file_seq) if todo else None  # the file before and its server
    batch_plans: list[FilePlan] = []
    batch_bytes = 0
    for i, (f, prev, newest) in enumerate(todo):
        sv = found[f.name]
        if prev is None:
            twin = None
            if f.size in finished_sizes:
                twin = finished.get((f.size, sv.sha_listed))
            if twin is not None:
                problem = (f"{f.name} has the same content (size and sha256) as {twin}, which was read "
                           f"already: a copy under another name is never landed twice")
            else:
                i_before = bisect.bisect_left(known, f.file_seq)
                problem = link_problem(links[known[i_before - 1]] if i_before else None, f, sv.head)
            if problem is not None and not cfg.accept_gaps:
                broken = problem
                stats.held_back = [g.name for g, _p, _n in todo[i:]]
                break
            if problem is not None:
                stats.warn(f"{problem} (accept_gaps: true: going on" + (", the copy is skipped)" if twin else ")"))
                if twin is not None:
                    continue
        if sv.error is not None:
            raise BronzeError(sv.error)
        plan = sv.plan
        _say_what_waits(stats, plan, wrote)
        if plan.server is not None:
            wrote = (f.name, plan.server)
        if f.file_seq not in links:
            bisect.insort(known, f.file_seq)
        links[f.file_seq] = plan.link
        if plan.status != QUARANTINED and plan.end == f.size > 0:
            finished[(f.size, plan.sha256)] = f.name
            finished_sizes.add(f.size)
        stats.files += 1
        batch_plans.append(plan)
        batch_bytes += plan.end - plan.start
        if batch_bytes >= cfg.parallelism.max_batch_bytes:
            run_batch(spark, cfg, batch_plans, next_batch, stats, now, history, kept)
            next_batch += 1
            batch_plans, batch_bytes = [], 0
    if batch_plans:
        run_batch(spark, cfg, batch_plans, next_batch, stats, now, history, kept)
    if broken is not None:
        raise BronzeError(
            f"{broken}. Held back until the sequence is whole: {', '.join(stats.held_back)} "
            f"(the files before it landed); set accept_gaps: true to go on without it"
        )
