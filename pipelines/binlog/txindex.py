"""Transaction boundaries of one binlog file, found by a quick pass.

The pass decodes only the events that open or close a transaction (GTIDs,
QUERY, XID, XA_PREPARE, TRANSACTION_PAYLOAD) and looks at nothing else, so it
is cheap. Its index serves three purposes:

* which transactions are complete (a file the server is still writing may end
  mid-transaction; that tail waits for the next run),
* the GTID, XID and commit time of the transaction each row change belongs to,
  known before its rows are decoded,
* byte ranges that start on transaction boundaries, so workers can decode one
  file in parallel (each worker only needs the format description event).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from .constants import EventType
from .errors import BinlogError
from .events import DecodeContext, decode_event
from .framing import BinlogFile

_GTID_TYPES = frozenset({EventType.GTID, EventType.ANONYMOUS_GTID, EventType.GTID_TAGGED, EventType.MARIA_GTID})
QUERY_TYPES = frozenset({EventType.QUERY, EventType.MARIA_QUERY_COMPRESSED})
_ROWS_TYPES = frozenset(
    {
        EventType.PRE_GA_WRITE_ROWS, EventType.PRE_GA_UPDATE_ROWS, EventType.PRE_GA_DELETE_ROWS,
        EventType.WRITE_ROWS_V1, EventType.UPDATE_ROWS_V1, EventType.DELETE_ROWS_V1,
        EventType.WRITE_ROWS, EventType.UPDATE_ROWS, EventType.DELETE_ROWS, EventType.PARTIAL_UPDATE_ROWS,
        EventType.MARIA_WRITE_ROWS_COMPRESSED_V1, EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1,
        EventType.MARIA_DELETE_ROWS_COMPRESSED_V1, EventType.MARIA_WRITE_ROWS_COMPRESSED,
        EventType.MARIA_UPDATE_ROWS_COMPRESSED, EventType.MARIA_DELETE_ROWS_COMPRESSED,
    }
)
# Events that live between transactions.
_CONTROL_TYPES = frozenset(
    {
        EventType.FORMAT_DESCRIPTION, EventType.ROTATE, EventType.STOP, EventType.PREVIOUS_GTIDS,
        EventType.MARIA_GTID_LIST, EventType.MARIA_BINLOG_CHECKPOINT, EventType.HEARTBEAT,
        EventType.HEARTBEAT_V2, EventType.MARIA_START_ENCRYPTION, EventType.INCIDENT,
    }
)

# How a transaction ended.
COMMIT = "commit"  # XID or COMMIT
ROLLBACK = "rollback"  # ROLLBACK query (only non-transactional changes are logged)
DDL = "ddl"  # a standalone statement
XA_PREPARE = "xa_prepare"  # XA ... PREPARE: changes not committed yet
XA_COMMIT = "xa_commit"  # XA COMMIT 'xid' of an earlier prepared group
XA_ROLLBACK = "xa_rollback"


@dataclass(frozen=True, slots=True)
class TxInfo:
    """One transaction (event group) of a file."""

    begin_pos: int
    end_pos: int  # just past the event that ended it
    kind: str
    gtid: str | None = None
    xid: int | None = None
    xa_xid: str | None = None  # XA transaction id text, for XA groups
    commit_ts: int = 0  # header timestamp of the ending event (epoch seconds)
    server_id: int = 0
    has_rows: bool = False


@dataclass
class FileIndex:
    """What the quick pass found in one file."""

    file: str
    size: int
    server_version: str
    transactions: list[TxInfo] = field(default_factory=list)
    complete_until: int = 4  # offset just past the last complete transaction or control event
    incomplete_tail: int | None = None  # start of an unfinished transaction at the end, if any
    error: BinlogError | None = None  # why scanning stopped early (truncation, corruption)
    rotate_to: str | None = None  # next file named by a ROTATE event
    stopped: bool = False  # a STOP event: the server shut down cleanly
    first_gtid: str | None = None
    last_gtid: str | None = None
    server_id: int = 0  # the FORMAT_DESCRIPTION header's: the server that wrote the file
    _starts: list[int] = field(default_factory=list, repr=False)

    def tx_at(self, pos: int) -> TxInfo | None:
        """The complete transaction containing the event that starts at ``pos``."""
        if not self._starts:
            self._starts = [t.begin_pos for t in self.transactions]
        i = bisect.bisect_right(self._starts, pos) - 1
        if i >= 0:
            tx = self.transactions[i]
            if tx.begin_pos <= pos < tx.end_pos:
                return tx
        return None

    def split(self, parts: int, min_bytes: int = 1 << 20) -> list[tuple[int, int]]:
        """Cut ``[4, complete_until)`` into at most ``parts`` ranges of similar
        size, each starting on a transaction boundary."""
        end = self.complete_until
        if parts <= 1 or end - 4 <= min_bytes or not self.transactions:
            return [(4, end)]
        target = max(min_bytes, (end - 4) // parts)
        ranges, start = [], 4
        for tx in self.transactions:
            if tx.begin_pos - start >= target and len(ranges) < parts - 1:
                ranges.append((start, tx.begin_pos))
                start = tx.begin_pos
        ranges.append((start, end))
        return ranges


def query_kind(text: str) -> str | None:
    """BEGIN / COMMIT / ROLLBACK / XA verbs, or None for any other statement."""
    head = text.lstrip()[:24].upper()
    if head.startswith("BEGIN") or head.startswith("START TRANSACTION"):
        return "begin"
    if head.startswith("COMMIT"):
        return COMMIT
    if head.startswith("ROLLBACK"):
        # ROLLBACK TO SAVEPOINT stays inside the transaction
        return None if "TO" in head.split()[1:2] else ROLLBACK
    if head.startswith("XA "):
        verb = head.split()[1] if len(head.split()) > 1 else ""
        return {"START": "begin", "BEGIN": "begin", "END": "xa_end", "PREPARE": XA_PREPARE,
                "COMMIT": XA_COMMIT, "ROLLBACK": XA_ROLLBACK}.get(verb, "xa_other")
    if head.startswith("SAVEPOINT"):
        return None
    return "statement"


class _Open:
    __slots__ = ("begin", "gtid", "standalone", "begun", "has_rows", "xa_xid")

    def __init__(self, begin: int, gtid: str | None, standalone: bool):
        self.begin = begin
        self.gtid = gtid
        self.standalone = standalone
        self.begun = False
        self.has_rows = False
        self.xa_xid = None


def scan(source, *, name: str | None = None, verify_checksums: bool = True, start: int | None = None,
         end: int | None = None) -> FileIndex:
    """Index the transactions of one file. Never raises for bad bytes after the
    format description: the error is recorded in ``FileIndex.error`` and the
    index covers everything before it.

    With ``start``/``end``, only the events that begin in ``[start, end)`` are looked at:
    ``start`` must be a transaction boundary (a task indexes its own byte range this way)."""
    with BinlogFile(source, name=name, verify_checksums=verify_checksums) as bf:
        idx = FileIndex(bf.name, bf.size, bf.format.server_version, server_id=bf.server_id)
        if start is not None:
            idx.complete_until = start
        s = _Scan(idx, DecodeContext(bf.format, {}, decode_rows=False))
        handlers = _HANDLERS
        try:
            for raw in bf.events(start, end):
                code = raw.header.type_code
                if code in _ROWS_OR_MAP:  # (most events: inline)
                    cur = s.cur if s.cur is not None else s.open(raw.header.pos)
                    cur.has_rows = cur.has_rows or code in _ROWS_TYPES
                    continue
                s.ctx.format = bf.format
                handlers.get(code, _Scan.other)(s, raw)
        except BinlogError as e:
            idx.error = e
        if s.cur is not None:
            idx.incomplete_tail = s.cur.begin
        return idx


class _Scan:
    """One scan's state: the index it builds, and the group open at the current event (rows
    outside any group, as very old servers write them, open a group of their own)."""

    def __init__(self, idx: FileIndex, ctx: DecodeContext):
        self.idx, self.ctx = idx, ctx
        self.cur: _Open | None = None

    def open(self, pos: int, standalone: bool = False) -> _Open:
        if self.cur is None:
            self.cur = _Open(pos, None, standalone)
        return self.cur

    def close(self, h, kind: str, xid=None) -> None:
        cur, idx = self.cur, self.idx
        idx.transactions.append(TxInfo(cur.begin, h.end_pos, kind, cur.gtid, xid, cur.xa_xid, h.timestamp,
                                       h.server_id, cur.has_rows))
        if cur.gtid:
            idx.first_gtid = idx.first_gtid or cur.gtid
            idx.last_gtid = cur.gtid
        idx.complete_until = h.end_pos
        self.cur = None

    def gtid(self, raw) -> None:
        ev = decode_event(raw, self.ctx)
        # An unfinished group followed by a new GTID is dropped (nothing committed it).
        standalone = bool(getattr(ev, "standalone", False))
        cur = self.cur = _Open(raw.header.pos, getattr(ev, "gtid", None), standalone)
        cur.xa_xid = getattr(ev, "xa_xid", None)
        # A MariaDB GTID stands for BEGIN unless the group is a single statement.
        cur.begun = raw.header.type_code == EventType.MARIA_GTID and not standalone

    def query(self, raw) -> None:
        h = raw.header
        kind = query_kind(decode_event(raw, self.ctx).query)
        if kind == "begin":
            self.open(h.pos).begun = True
        elif kind in (COMMIT, ROLLBACK, XA_COMMIT, XA_ROLLBACK, XA_PREPARE):
            self.open(h.pos, standalone=True)
            self.close(h, kind)
        elif self.cur is None:  # XA END, other XA, or a statement on its own (DDL)
            self.open(h.pos, standalone=True)
            self.close(h, DDL)
        elif kind not in ("xa_end", "xa_other", None) and (self.cur.standalone or
                                                           not (self.cur.begun or self.cur.has_rows)):
            self.close(h, DDL)  # a statement: DDL on its own (statement-format DML stays in its group)

    def xid(self, raw) -> None:
        ev = decode_event(raw, self.ctx)
        self.open(raw.header.pos)
        self.close(raw.header, COMMIT, ev.xid)

    def xa_prepare(self, raw) -> None:
        self.open(raw.header.pos)
        self.close(raw.header, XA_PREPARE)

    def payload(self, raw) -> None:  # MySQL 8's compressed transaction: the whole group in one event
        ev = decode_event(raw, self.ctx)
        cur = self.open(raw.header.pos)
        xid = None
        for inner in ev.events:
            if inner.header.type_code in _ROWS_TYPES:
                cur.has_rows = True
            elif inner.header.type_code == EventType.XID:
                xid = inner.xid
        self.close(raw.header, COMMIT, xid)

    def other(self, raw) -> None:  # anything else (annotate, rows query, intvar, ...) belongs to the open group
        h = raw.header
        if h.type_code == EventType.ROTATE:
            self.idx.rotate_to = getattr(decode_event(raw, self.ctx), "next_file", None)
        elif h.type_code == EventType.STOP:
            self.idx.stopped = True
        if self.cur is None and h.type_code in _CONTROL_TYPES:
            self.idx.complete_until = h.end_pos


_ROWS_OR_MAP = frozenset(_ROWS_TYPES) | {EventType.TABLE_MAP}
_HANDLERS = {
    **dict.fromkeys(_GTID_TYPES, _Scan.gtid),
    **dict.fromkeys(QUERY_TYPES, _Scan.query),
    EventType.XID: _Scan.xid,
    EventType.XA_PREPARE: _Scan.xa_prepare,
    EventType.TRANSACTION_PAYLOAD: _Scan.payload,
}

