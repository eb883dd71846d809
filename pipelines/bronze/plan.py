"""Planning one file: what a batch reads of it (``[start, end)``, cut into ranges on transaction
boundaries), given its bytes and its latest manifest row."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace

from pipelines.binlog.constants import COMMON_HEADER_LEN
from pipelines.binlog.errors import BinlogError, TruncatedEvent
from pipelines.binlog.events import GtidListEvent, PreviousGtidsEvent
from pipelines.binlog.gtid import MariadbGtidState
from pipelines.binlog.stream import EventStream
from pipelines.binlog.txindex import XA_COMMIT, XA_PREPARE, XA_ROLLBACK, FileIndex, scan
from pipelines.bronze.decode import batch_statements
from pipelines.bronze.files import as_buffer, quarantine_raw, sha256_prefixes, task_file
from pipelines.bronze.listing import SourceFile
from pipelines.bronze.sequence import MARIADB, MYSQL, HEAD_TYPES, Link, advance_gtid_state
from pipelines.bronze.bookkeeping import DONE, PARTIAL, QUARANTINED, BronzeError
from pipelines.config import PipelineConfig

_XA_KINDS = frozenset({XA_PREPARE, XA_COMMIT, XA_ROLLBACK})


@dataclass
class FilePlan:
    """What one batch does with one file."""

    file: SourceFile
    start: int  # first byte not processed before (0 for a new file)
    end: int  # complete_until after this batch
    status: str
    sha256: str = ""
    index: FileIndex | None = None
    error: str | None = None
    error_class: str | None = None
    error_offset: int | None = None
    ranges: list[tuple[int, int]] = field(default_factory=list)
    events: int = 0
    ignorable_skipped: int = 0
    invalid_text: int = 0
    flavor: str | None = None
    gtid_start: str | None = None
    gtid_end: str | None = None
    rotate_to: str | None = None
    # what the survey task read for the driver, so that it never reads the file itself:
    statements: list = field(default_factory=list)  # (query, db, _seq) of the DDL in [start, end)
    xa: list = field(default_factory=list)  # (begin_pos, kind, xa_xid, gtid, commit_ts) of XA groups in [start, end)
    error_raw: bytes | None = None  # the bytes the quarantine row of ``error`` keeps
    server: tuple[str, int] | None = None  # (server version, server_id) of the FORMAT_DESCRIPTION; None: unknown

    @property
    def link(self) -> Link:
        return Link(self.file.name, self.file.file_seq, self.flavor, self.gtid_start, self.gtid_end, self.rotate_to)


def gtid_head(path: str) -> tuple[str | None, str | None]:
    """``(flavor, GTID state at the start)`` of a binlog file: MariaDB's
    GTID_LIST or MySQL's PREVIOUS_GTIDS as text; the state is None when the
    file has neither (old servers) or cannot be read."""
    flavor = None
    try:
        with EventStream(path, decode_rows=False) as st:
            flavor = MARIADB if st.format.is_mariadb else MYSQL
            for ev in st.events():
                if type(ev) is GtidListEvent:
                    return MARIADB, str(MariadbGtidState.of(ev.gtids))
                if type(ev) is PreviousGtidsEvent:
                    return MYSQL, ev.gtid_set
                if ev.header.type_code not in HEAD_TYPES:
                    break
    except BinlogError:
        pass
    return flavor, None


def split_range(idx: FileIndex, start: int, end: int, target: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut on transaction boundaries into ranges of about ``target`` bytes."""
    start = max(start, 4)
    if end <= start:
        return []
    ranges, s = [], start
    for tx in idx.transactions:
        b = tx.begin_pos
        if b >= end:
            break
        if b > s and b - s >= target:
            ranges.append((s, b))
            s = b
    ranges.append((s, end))
    return ranges


def latest_committed(rows: list) -> dict[str, object]:
    """Per file name, its latest committed manifest row."""
    out: dict[str, object] = {}
    for r in rows:
        if r.phase != "committed":
            continue
        cur = out.get(r.name)
        if cur is None or (r.batch, r.complete_until) > (cur.batch, cur.complete_until):
            out[r.name] = r
    return out


def _content_changed(f: SourceFile, prev, actual: str) -> BronzeError:
    when = prev.processed_at.isoformat() if prev.processed_at else "an earlier run"
    return BronzeError(
        f"{f.name}: content changed since it was processed at {when} "
        f"(sha256 of bytes [0, {prev.complete_until}) {actual} != {prev.sha256})"
    )


def plan_file(f: SourceFile, prev, source, newest: bool, cfg: PipelineConfig,
              head: tuple[str | None, str | None] | None = None) -> FilePlan:
    """Index ``f`` (its bytes: a local path or a buffer) and decide what to process.

    ``head`` is :func:`gtid_head` of the file when the caller has it already.
    Raises :class:`BronzeError` when bytes that were processed before changed,
    or (strict mode) when the file is bad.
    """
    with as_buffer(source) as buf:
        return _plan(f, prev, buf, newest, cfg.strict, cfg.parallelism.target_bytes_per_task, head)


def _plan(f: SourceFile, prev, buf, newest: bool, strict: bool, target: int, head) -> FilePlan:
    start = prev.complete_until if prev is not None else 0
    size = len(buf)
    if prev is not None:
        if size < prev.complete_until:
            raise BronzeError(
                f"{f.name}: content changed since it was processed at {prev.processed_at}: it is now {size} bytes, "
                f"{prev.complete_until} were processed"
            )
        got = sha256_prefixes(buf, [prev.complete_until])[prev.complete_until]
        if got != prev.sha256:
            raise _content_changed(f, prev, got)
    plan = FilePlan(f, start, start, DONE)
    plan.flavor, plan.gtid_start = head if head is not None else gtid_head(buf)
    try:
        idx = scan(buf, name=f.name)
    except BinlogError as e:
        idx = None
        error = e
    else:
        error = idx.error
    if idx is not None:
        plan.index = idx
        plan.server = (idx.server_version, idx.server_id)
        plan.end = max(idx.complete_until, start)
        plan.rotate_to = idx.rotate_to
        if idx.error is None and idx.incomplete_tail is None and plan.gtid_start is not None:
            plan.gtid_end = advance_gtid_state(plan.flavor, plan.gtid_start,
                                               (t.gtid for t in idx.transactions if t.gtid))
    cls = type(error).__name__ if error is not None else None
    msg = str(error) if error is not None else None
    if isinstance(error, TruncatedEvent) and error.offset is not None:
        why = _not_a_cut(buf, error.offset, idx)
        if why is not None:
            cls, msg = "CorruptEvent", f"{f.name}: offset {error.offset}: {why}"
    if error is not None and newest and (cls == "TruncatedEvent" or (cls == "NotABinlog" and _magic_prefix(buf))):
        plan.status = PARTIAL  # cut where the server is still writing: the rest comes with the next run
    elif error is not None:
        plan.status = QUARANTINED
        plan.error, plan.error_class = msg, cls
        plan.error_offset = error.offset if error.offset is not None else plan.end
    elif idx is not None and idx.incomplete_tail is not None and not newest:
        plan.status = QUARANTINED
        plan.error_class = "UnfinishedTransaction"
        plan.error_offset = idx.incomplete_tail
        plan.error = (f"{f.name}: offset {idx.incomplete_tail}: unfinished transaction at the end of a file that is "
                      f"not the newest (never committed)")
    elif error is None and idx is not None and not newest:
        plan.end = size  # finished; what follows the last transaction are events outside any (e.g. unknown ones)
    elif plan.end < size:
        plan.status = PARTIAL
    if plan.status == QUARANTINED and strict:
        raise BronzeError(f"bad input (strict mode): {plan.error}")
    if idx is not None:
        plan.ranges = split_range(idx, start, plan.end, target)
    return plan


def _magic_prefix(buf) -> bool:
    """A file shorter than the magic that could still become a binlog (the newest one, being written)."""
    head = bytes(buf[:4])
    return len(head) < 4 and b"\xfebin".startswith(head)


# -- the survey: one task per file reads it whole, so that the driver never does ------------------


@dataclass(frozen=True)
class SurveyRequest:
    """One file for a survey task: its latest committed manifest row (``prev``; None for a new
    file), or the pending row of an interrupted batch to redo exactly (``redo``)."""

    file: SourceFile
    prev: object | None
    newest: bool
    redo: object | None = None


@dataclass
class Survey:
    """What a task found in one file: all the driver needs of its bytes (small)."""

    name: str
    head: tuple[str | None, str | None] = (None, None)  # :func:`gtid_head`
    sha_listed: str | None = None  # a new file: sha256 of its listed size (is it a copy of a file read before?)
    plan: FilePlan | None = None  # without its index: each decode task indexes its own range
    error: str | None = None  # a BronzeError the driver raises when it reaches this file


def survey_file(req: SurveyRequest, strict: bool, target: int, settings=None, content=None) -> Survey:
    """The survey task of one file: its head, its plan (:func:`plan_file`), the sha256 of what
    it is planned to hold, its DDL statements and XA groups, and the raw bytes of its bad
    event; or the error that stops the run when the driver reaches it. Never raises for bad
    input: the driver decides, in file order, what each finding means. The file's bytes are
    ``content`` when the caller has them (Spark's whole-file reader read it), else read here
    (``settings``: the storage settings of a remote file, :mod:`pipelines.storage`)."""
    f = req.file
    sv = Survey(f.name)
    try:
        with contextlib.nullcontext(memoryview(content)) if content is not None else task_file(f.uri, settings) as buf:
            if req.redo is not None:
                sv.plan = _finish(_redo_plan(f, req.redo, buf, target), buf)
                return sv
            sv.head = gtid_head(buf)
            try:
                plan = _plan(f, req.prev, buf, req.newest, strict, target, sv.head)
            except BronzeError as e:
                sv.error, plan = str(e), None
            listed = min(f.size, len(buf))
            cuts = ([plan.end] if plan is not None else []) + ([listed] if req.prev is None else [])
            hashes = sha256_prefixes(buf, cuts) if cuts else {}
            if req.prev is None:
                sv.sha_listed = hashes[listed]
            if plan is not None:
                plan.sha256 = hashes[plan.end]
                sv.plan = _finish(plan, buf)
    except BronzeError as e:
        sv.error, sv.plan = str(e), None
    except OSError as e:
        sv.error, sv.plan = f"{f.name}: cannot be read: {type(e).__name__}: {e}", None
    return sv


def _redo_plan(f: SourceFile, r, buf, target: int) -> FilePlan:
    """The plan that redoes pending manifest row ``r`` exactly (same ranges, same outcome)."""
    got = sha256_prefixes(buf, [r.complete_until])[r.complete_until] if len(buf) >= r.complete_until else None
    if got != r.sha256:
        raise _content_changed(f, r, got or f"(only {len(buf)} bytes now)")
    try:
        idx = scan(buf, name=f.name)
    except BinlogError:
        idx = FileIndex(f.name, f.size, "", [], complete_until=r.complete_until)
    p = FilePlan(replace(f, size=r.size, mtime=r.mtime), r.start_pos, r.complete_until, r.status, r.sha256, idx,
                 r.error, r.error_class, r.error_offset)
    link = Link.of_row(r)
    p.flavor, p.gtid_start, p.gtid_end, p.rotate_to = link.flavor, link.gtid_start, link.gtid_end, link.rotate_to
    version = getattr(r, "server_version", None)  # (NULL in rows of older versions)
    p.server = (version, r.server_id) if version is not None else None
    p.ranges = split_range(idx, r.start_pos, r.complete_until, target)
    return p


def _finish(plan: FilePlan, buf) -> FilePlan:
    """Keep what the driver needs of the file's bytes in ``plan``, and drop its index."""
    idx = plan.index
    for s, e in plan.ranges:
        plan.statements += batch_statements(buf, plan.file.file_seq, s, e)
    if idx is not None:
        plan.xa = [(t.begin_pos, t.kind, t.xa_xid, t.gtid, t.commit_ts) for t in idx.transactions
                   if t.kind in _XA_KINDS and plan.start <= t.begin_pos < plan.end]
    if plan.status == QUARANTINED and plan.error and plan.error_offset is not None:
        plan.error_raw = quarantine_raw(buf, plan.error_class, plan.error_offset)
    plan.index = None
    return plan


def _not_a_cut(buf, offset: int, idx: FileIndex | None) -> str | None:
    """Why a file that ends in an incomplete event at ``offset`` is damaged
    rather than still being written, or None when it may just be cut there."""
    if idx is not None and (idx.rotate_to is not None or idx.stopped):
        last = f"a ROTATE to {idx.rotate_to}" if idx.rotate_to is not None else "a STOP event"
        return (f"{len(buf) - offset} byte(s) after {last}, which ends a binlog file: garbage appended to a "
                f"finished file")
    remaining = len(buf) - offset
    if remaining < COMMON_HEADER_LEN:
        return None
    length = int.from_bytes(bytes(buf[offset + 9 : offset + 13]), "little")
    next_pos = int.from_bytes(bytes(buf[offset + 13 : offset + 17]), "little")
    if next_pos not in (0, offset + length):
        return (f"event length {length} runs past the end of the file ({remaining} bytes left) and disagrees "
                f"with the event's next position {next_pos}: a damaged header, not a file still being written")
    return None

