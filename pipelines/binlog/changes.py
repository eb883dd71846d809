"""Row changes and statements of committed transactions, in file order, each
tagged with its transaction (GTID, XID, commit time) from the file's index.

This is what the pipeline consumes:

>>> path = "samples/binlogs/binlog.000001"
>>> rows = [ch for ch in iter_changes(path, scan(path)) if type(ch) is RowChange]
>>> rows[0].op, rows[0].db, rows[0].table, rows[0].after[:3]
('insert', 'shop', 'customers', (1, 'Ada Lovelace', 'ada@example.com'))
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

from .constants import EventType
from .events import RowsEvent, TableMapEvent
from .stream import EventStream
from .txindex import FileIndex, TxInfo, QUERY_TYPES, query_kind, scan


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row change: before/after images aligned with ``columns_before`` /
    ``columns_after`` (column indexes)."""

    file: str
    pos: int  # start of the rows event (of the payload event, when in a payload)
    row_idx: int  # index of this row within the event at ``pos``
    op: str  # insert | update | delete
    table_map: TableMapEvent
    columns_before: tuple[int, ...]
    before: tuple | None
    columns_after: tuple[int, ...]
    after: tuple | None
    event_ts: int
    server_id: int
    tx: TxInfo

    @property
    def db(self) -> str:
        return self.table_map.schema

    @property
    def table(self) -> str:
        return self.table_map.table


_DDL_VERB = re.compile(r"(?:CREATE|ALTER|RENAME|DROP|TRUNCATE)\b", re.IGNORECASE)
_EXECUTABLE_COMMENT = re.compile(r"/\*M?!\d*")


def is_ddl(sql: str) -> bool:
    """Does a logged statement define, change or empty something (``CREATE``, ``ALTER``, ``RENAME``,
    ``DROP``, ``TRUNCATE``) rather than change rows? Leading comments are skipped; an executable
    comment's body counts (the server runs it). The one test for DDL: bronze's and the schema
    history's (:func:`pipelines.schema.statement_kind` names the kind of the schema ones).

    >>> is_ddl("/* app */ TRUNCATE TABLE t"), is_ddl("/*!40000 ALTER TABLE t DISABLE KEYS */"), is_ddl("INSERT INTO t VALUES (1)")
    (True, True, False)
    """
    s = sql
    while True:
        s = s.lstrip()
        if s.startswith("/*"):
            m = _EXECUTABLE_COMMENT.match(s)
            if m:
                s = s[m.end():]
                continue
            end = s.find("*/")
            if end < 0:
                return False
            s = s[end + 2:]
        elif s.startswith("--") or s.startswith("#"):
            nl = s.find("\n")
            if nl < 0:
                return False
            s = s[nl + 1:]
        else:
            return _DDL_VERB.match(s) is not None


@dataclass(frozen=True, slots=True)
class StatementChange:
    """A statement logged as text: DDL, or statement-format DML inside a group."""

    file: str
    pos: int
    db: str
    query: str
    event_ts: int
    server_id: int
    tx: TxInfo
    in_group: bool  # inside a multi-event transaction (statement-format DML), not standalone DDL


@dataclass(frozen=True, slots=True)
class RowsBatch:
    """The rows of one rows event: ``rows`` holds ``(before, after)`` value tuples aligned with
    ``columns_before`` / ``columns_after``; row ``i`` has ``row_idx = first_row + i``. Every row
    of a batch has the same op, table map and column sets, so a consumer can work column-wise.
    With ``row_cells`` (:func:`iter_change_batches`), ``rows`` may be empty and ``cells`` hold the
    images as canonical-text cells instead (:class:`~pipelines.binlog.rows.RowCells`); ``n``
    counts the rows either way."""

    file: str
    pos: int
    first_row: int
    op: str
    table_map: TableMapEvent
    columns_before: tuple[int, ...]
    columns_after: tuple[int, ...]
    rows: list
    event_ts: int
    server_id: int
    tx: TxInfo
    cells: Any = None

    @property
    def n(self) -> int:
        return self.cells.rows if self.cells is not None else len(self.rows)


def iter_changes(source, index: FileIndex | None = None, start: int | None = None, end: int | None = None,
                 **options) -> Iterator[RowChange | StatementChange]:
    """Yield the changes of complete transactions that start in ``[start, end)``.

    ``end`` is capped at ``index.complete_until``: an unfinished transaction at
    the end of a file is left for the next run. ``options``: ``name``,
    ``verify_checksums``, ``table_map_hook`` (see :func:`iter_change_batches`); not ``row_cells``:
    a row change holds its values.
    """
    if "row_cells" in options:
        raise TypeError("iter_changes yields values: row_cells is iter_change_batches' option")
    for ch in iter_change_batches(source, index, start, end, **options):
        if type(ch) is RowsBatch:
            op, tm, cb, ca = ch.op, ch.table_map, ch.columns_before, ch.columns_after
            file, pos, ts, sid, tx = ch.file, ch.pos, ch.event_ts, ch.server_id, ch.tx
            for i, (b, a) in enumerate(ch.rows, ch.first_row):
                yield RowChange(file, pos, i, op, tm, cb, b, ca, a, ts, sid, tx)
        else:
            yield ch


def iter_change_batches(
    source,
    index: FileIndex | None = None,
    start: int | None = None,
    end: int | None = None,
    *,
    name: str | None = None,
    verify_checksums: bool = True,
    table_map_hook=None,
    row_cells: bool = False,
) -> Iterator[RowsBatch | StatementChange]:
    """:func:`iter_changes` one rows event at a time: a :class:`RowsBatch` per rows event
    (statements as in :func:`iter_changes`). ``name`` names the file in errors (default: its
    path); ``verify_checksums`` checks each event's CRC32; ``table_map_hook`` may replace each
    table map as it is read (e.g. to complete column metadata); ``row_cells`` gives rows events'
    images as cells where the compiled decoder takes them (:attr:`RowsBatch.cells`)."""
    with EventStream(source, name=name, verify_checksums=verify_checksums, table_map_hook=table_map_hook,
                     row_cells=row_cells) as stream:
        if index is None:
            index = scan(stream.file.buf, name=stream.name, verify_checksums=verify_checksums)
        stop = index.complete_until if end is None else min(end, index.complete_until)
        txs = index.transactions
        ti = 0
        tx: TxInfo | None = None
        last_pos, next_row = -1, 0  # rows of one payload event share its pos
        for ev in stream.events(start, stop):
            h = ev.header
            pos = h.pos
            if tx is None or not tx.begin_pos <= pos < tx.end_pos:
                while ti < len(txs) and txs[ti].end_pos <= pos:
                    ti += 1
                tx = txs[ti] if ti < len(txs) and txs[ti].begin_pos <= pos else None
                if tx is None:
                    continue  # control events between transactions
            if type(ev) is RowsEvent:
                if ev.table_map is None:
                    continue  # the dummy end-of-statement event carries no rows
                if pos != last_pos:
                    last_pos, next_row = pos, 0
                yield RowsBatch(h.file, pos, next_row, ev.op, ev.table_map, ev.columns_before, ev.columns_after,
                                ev.rows, h.timestamp, h.server_id, tx, ev.cells)
                next_row += ev.row_count
            elif h.type_code in QUERY_TYPES:
                kind = query_kind(ev.query)
                if kind == "statement":
                    yield StatementChange(
                        h.file, pos, ev.schema, ev.query, h.timestamp, h.server_id, tx, tx.kind != "ddl"
                    )
