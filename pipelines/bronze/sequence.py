"""Sequence integrity: file numbering, ROTATE targets and GTID continuity between consecutive
binlog files (see "Sequence integrity" in :mod:`pipelines.bronze.step`). Pure functions of the
files' heads and the manifest's links (a file's head is read by
:func:`pipelines.bronze.plan.gtid_head`)."""
from __future__ import annotations

from dataclasses import dataclass

from pipelines.binlog.constants import EventType
from pipelines.binlog.gtid import MARIADB, MYSQL, MariadbGtidState, MysqlGtidSet, parse_gtid_set  # noqa: F401 (MYSQL: re-exported)
from pipelines.bronze.listing import SourceFile, BINLOG_NAME
from pipelines.bronze.bookkeeping import BronzeError


def check_sequence(files: list[SourceFile], known: dict[int, str], accept_gaps: bool) -> None:
    """Two files with one number, or a hole in the numbering, is an error
    (``known``: file_seq -> name of files the manifest already has)."""
    by_seq: dict[int, str] = dict(known)
    for f in files:
        other = by_seq.get(f.file_seq)
        if other is not None and other != f.name:
            raise BronzeError(
                f"{f.name} and {other} have the same number {f.file_seq}: one folder must hold one binlog series"
            )
        by_seq[f.file_seq] = f.name
    if accept_gaps or not by_seq:
        return
    seqs = sorted(by_seq)
    missing = [s for s in range(seqs[0], seqs[-1] + 1) if s not in by_seq]
    if missing:
        first = missing[0]
        before = by_seq[max(s for s in seqs if s < first)]
        after = by_seq[min(s for s in seqs if s > first)]
        raise BronzeError(
            f"{len(missing)} binlog file(s) missing from the sequence, the first between {before} and {after} "
            f"(number {first}); set accept_gaps: true to go on without them"
        )


HEAD_TYPES = frozenset({EventType.FORMAT_DESCRIPTION, EventType.MARIA_GTID_LIST, EventType.PREVIOUS_GTIDS,
                         EventType.MARIA_BINLOG_CHECKPOINT, EventType.MARIA_START_ENCRYPTION})


def advance_gtid_state(flavor: str, start: str, gtids) -> str:
    """The GTID state after a file: ``start`` (its GTID_LIST / PREVIOUS_GTIDS)
    plus the GTIDs of its transactions, in file order.

    >>> advance_gtid_state("mariadb", "0-1-3", ["0-1-4", "2-1-1"])
    '0-1-4,2-1-1'
    >>> advance_gtid_state("mysql", "a:1-3", ["a:4", "a:5", "b:t:9"])
    'a:1-5,b:t:9'
    """
    return str(parse_gtid_set(flavor, start).add(gtids))


def gtids_missing(flavor: str, end: str, next_start: str) -> str | None:
    """The GTIDs the next file says were logged before it that the previous
    file's end state ``end`` does not have (a definite gap), or None.

    >>> gtids_missing("mariadb", "0-1-4,2-1-1", "0-1-4,2-1-1")
    >>> gtids_missing("mariadb", "0-1-4", "0-1-9,1-1-2")
    '0-1-5..9, 1-1-..2'
    >>> gtids_missing("mysql", "a:1-5", "a:1-9")
    'a:6-9'
    """
    if flavor == MARIADB:
        return MariadbGtidState.parse(next_start).missing_from(MariadbGtidState.parse(end))
    return str(MysqlGtidSet.parse(next_start).minus(MysqlGtidSet.parse(end))) or None


@dataclass(frozen=True)
class Link:
    """What the next file of the sequence is checked against."""

    name: str
    file_seq: int
    flavor: str | None = None
    gtid_start: str | None = None
    gtid_end: str | None = None  # None: unknown (the file stopped at a bad event, or is unfinished)
    rotate_to: str | None = None

    @classmethod
    def of_row(cls, r) -> "Link":
        g = getattr
        return cls(r.name, r.file_seq, g(r, "flavor", None), g(r, "gtid_start", None), g(r, "gtid_end", None),
                   g(r, "rotate_to", None))


def link_problem(prev: Link | None, f: SourceFile, head: tuple[str | None, str | None]) -> str | None:
    """Why ``f`` cannot follow ``prev`` (see "Sequence integrity"), or None.

    ``head`` is :func:`gtid_head` of ``f``; ``prev`` None means ``f`` starts the history.
    """
    if prev is None:
        return None
    if prev.rotate_to:
        if prev.rotate_to != f.name:
            m = BINLOG_NAME.match(prev.rotate_to)
            hint = (f": {prev.rotate_to} is missing" if m and prev.file_seq < int(m.group("seq")) < f.file_seq
                    else "")
            return f"{prev.name} ends with a ROTATE to {prev.rotate_to}, but the next file here is {f.name}{hint}"
    elif f.file_seq != prev.file_seq + 1:
        n = f.file_seq - prev.file_seq - 1
        m = BINLOG_NAME.match(prev.name)
        width = len(m.group("seq")) if m else 6
        first = f"{m.group('prefix')}.{prev.file_seq + 1:0{width}d}" if m else f"number {prev.file_seq + 1}"
        if n == 1:
            return f"{first} is missing between {prev.name} and {f.name}"
        return f"{n} files are missing between {prev.name} and {f.name}, the first {first}"
    flavor, start = head
    if prev.gtid_end is not None and start is not None and flavor == prev.flavor:
        missing = gtids_missing(flavor, prev.gtid_end, start)
        if missing:
            event = "GTID_LIST" if flavor == MARIADB else "PREVIOUS_GTIDS"
            end = prev.gtid_end or "nothing"
            return (f"GTIDs {missing} were logged between {prev.name} and {f.name} but are in neither file "
                    f"({f.name} starts after {start} by its {event}, {prev.name} ends at {end}): "
                    f"a binlog file is missing")
    return None

