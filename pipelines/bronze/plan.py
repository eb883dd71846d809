"""Planning one file: what a batch reads of it (``[start, end)``, cut into ranges on transaction
boundaries), given its bytes and its latest manifest row."""
from __future__ import annotations


import os
from dataclasses import dataclass, field

from pipelines.binlog.constants import COMMON_HEADER_LEN
from pipelines.binlog.errors import BinlogError, TruncatedEvent
from pipelines.binlog.txindex import FileIndex, scan
from pipelines.config import PipelineConfig
from pipelines.bronze.files import _mapped, sha256_prefixes
from pipelines.bronze.listing import SourceFile
from pipelines.bronze.sequence import Link, advance_gtid_state, gtid_head
from pipelines.bronze.state import BronzeError, DONE, PARTIAL, QUARANTINED


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

    @property
    def link(self) -> Link:
        return Link(self.file.name, self.file.file_seq, self.flavor, self.gtid_start, self.gtid_end, self.rotate_to)


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


def _latest(rows: list) -> dict[str, object]:
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


def plan_file(f: SourceFile, prev, path: str, newest: bool, cfg: PipelineConfig,
              head: tuple[str | None, str | None] | None = None) -> FilePlan:
    """Index ``f`` (a local copy at ``path``) and decide what to process.

    ``head`` is :func:`gtid_head` of the file when the caller has it already.
    Raises :class:`BronzeError` when bytes that were processed before changed,
    or (strict mode) when the file is bad.
    """
    start = prev.complete_until if prev is not None else 0
    size = os.path.getsize(path)
    if prev is not None:
        if size < prev.complete_until:
            raise BronzeError(
                f"{f.name}: content changed since it was processed at {prev.processed_at}: it is now {size} bytes, "
                f"{prev.complete_until} were processed"
            )
        got = sha256_prefixes(path, [prev.complete_until])[prev.complete_until]
        if got != prev.sha256:
            raise _content_changed(f, prev, got)
    plan = FilePlan(f, start, start, DONE)
    plan.flavor, plan.gtid_start = head if head is not None else gtid_head(path)
    try:
        idx = scan(path, name=f.name)
    except BinlogError as e:
        idx = None
        error = e
    else:
        error = idx.error
    if idx is not None:
        plan.index = idx
        plan.end = max(idx.complete_until, start)
        plan.rotate_to = idx.rotate_to
        if idx.error is None and idx.incomplete_tail is None and plan.gtid_start is not None:
            plan.gtid_end = advance_gtid_state(plan.flavor, plan.gtid_start,
                                               (t.gtid for t in idx.transactions if t.gtid))
    cls = type(error).__name__ if error is not None else None
    msg = str(error) if error is not None else None
    if isinstance(error, TruncatedEvent) and error.offset is not None:
        with _mapped(path) as buf:
            why = _not_a_cut(buf, error.offset, idx)
        if why is not None:
            cls, msg = "CorruptEvent", f"{f.name}: offset {error.offset}: {why}"
    if error is not None and newest and (cls == "TruncatedEvent" or (cls == "NotABinlog" and _magic_prefix(path))):
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
    if plan.status == QUARANTINED and cfg.strict:
        raise BronzeError(f"bad input (strict mode): {plan.error}")
    if idx is not None:
        plan.ranges = split_range(idx, start, plan.end, cfg.parallelism.target_bytes_per_task)
    return plan


def _magic_prefix(path: str) -> bool:
    """A file shorter than the magic that could still become a binlog (the newest one, being written)."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    return len(head) < 4 and b"\xfebin".startswith(head)


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

