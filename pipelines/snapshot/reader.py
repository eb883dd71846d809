"""A dump's rows, with their tables' schemas and the session each INSERT ran in, as cells: what a
loader task does with the statements of its byte range (or of its whole compressed file).

>>> dump = (b"/*!40101 SET NAMES utf8mb4 */;\\nUSE `shop`;\\n"
...         b"CREATE TABLE `t` (`id` int NOT NULL, `v` varchar(5), PRIMARY KEY (`id`)) DEFAULT CHARSET=utf8mb4;\\n"
...         b"INSERT INTO `t` VALUES (1,'a'),(2,NULL);\\n")
>>> from pipelines.snapshot.statements import iter_statements
>>> reading = DumpReading(name="shop.sql")
>>> [(r.table, r.cells) for r in reading.rows(iter_statements(dump, state=reading.state))]
[('t', [(0, 'id', 'LONG', '1', None), (1, 'v', 'VARCHAR(5) utf8mb4', 'a', None)]), ('t', [(0, 'id', 'LONG', '2', None), (1, 'v', 'VARCHAR(5) utf8mb4', None, None)])]
>>> reading.skipped
Counter()
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Iterator

from pipelines.schema.model import TableSchema

from .cells import RowReader
from .tablemap import create_table
from .errors import CorruptDump, DumpError
from .session import DumpState
from .statements import Statement

# statements that only set up the session or the load; not counted as skipped
_SETUP = frozenset({"set", "use", "delimiter", "create_database", "position"})
_SETUP_HEADS = frozenset({"LOCK TABLES", "UNLOCK TABLES", "ALTER TABLE", "DROP TABLE", "START TRANSACTION", "COMMIT",
                          "SET", "FLUSH PRIVILEGES"})


@dataclass(frozen=True)
class SnapshotRow:
    """One dumped row: where its INSERT starts (``offset``; ``row`` its index in the statement), its
    table and its image cells ``(idx, name, type, text, bin)``; ``values`` are the decoder's values
    the cells were written from, for the columns ``idx`` (:meth:`RowReader.order` of the INSERT's
    column list, else all); ``reader`` is the table's :class:`RowReader` (its table map)."""

    offset: int
    row: int
    db: str
    table: str
    cells: list
    values: tuple
    idx: tuple = ()
    reader: RowReader | None = None


@dataclass(frozen=True)
class SnapshotInsert:
    """One INSERT of a dump: where it starts, its table, the table's :class:`RowReader`, the
    column index of each value (``idx``; ``columns`` the INSERT's column list, None: all) and the
    decoder's values of each of its rows."""

    offset: int
    db: str
    table: str
    reader: RowReader
    idx: tuple
    columns: tuple | None
    rows: list


class DumpReading:
    """The state of reading one dump (or one range of it, started from the outline's state and
    schemas): the session, the tables' schemas from their ``CREATE TABLE``, one
    :class:`~pipelines.snapshot.cells.RowReader` per table, charset and time zone, and the
    statements that were neither data nor session set-up, counted by their first words
    (``skipped``: views, triggers, routines, ``CREATE TABLE`` this reader cannot parse...)."""

    def __init__(self, state: DumpState | None = None, schemas: dict[tuple[str, str], TableSchema] | None = None,
                 *, name: str | None = None, flavor: str | None = None):
        self.state = state if state is not None else DumpState(flavor=flavor)
        self.schemas = dict(schemas or {})
        self.name = name
        self.skipped: Counter = Counter()
        self.unparsed: dict[tuple[str, str], str] = {}
        self._readers: dict[tuple, RowReader] = {}

    def table_schema(self, st: Statement) -> None:
        """Record the schema a ``CREATE TABLE`` declares (the current database as default)."""
        found = create_table(st.raw.decode("utf-8", "replace") if st.raw else st.sql, self.state.db,
                             self.state.db_charsets)
        if isinstance(found, tuple):
            db, table, schema = found
            self.schemas[(db, table)] = schema
            return
        self.skipped["CREATE TABLE (not understood)"] += 1
        name = st.name or ""
        self.unparsed[tuple(name.split(".", 1)) if "." in name else (self.state.db or "", name)] = found

    def reader(self, db: str, table: str) -> RowReader:
        state = self.state
        key = (db, table, state.client_charset, state.time_zone)
        r = self._readers.get(key)
        if r is None:
            schema = self.schemas.get((db, table))
            if schema is None:
                why = self.unparsed.get((db, table))
                raise CorruptDump(f"rows for {db}.{table}, whose CREATE TABLE " +
                                  (f"was not understood ({why})" if why else "is not in the dump before them"))
            r = self._readers[key] = RowReader(db, table, schema, client_charset=state.client_charset,
                                               time_zone=state.time_zone, flavor=state.flavor)
        return r

    def rows(self, statements: Iterable[Statement], *, cells: bool = True) -> Iterator[SnapshotRow]:
        """The rows of the INSERTs among ``statements`` (read with this reading's ``state``: pass
        ``iter_statements(..., state=reading.state)``), recording schemas and counting the rest.
        ``cells`` False leaves the cells out (``SnapshotRow.cells`` None)."""
        for ins in self.inserts(statements):
            r = ins.reader
            for k, values in enumerate(ins.rows):
                yield SnapshotRow(ins.offset, k, ins.db, ins.table, r.cells_of(values, ins.columns) if cells else None,
                                  values, ins.idx, r)

    def inserts(self, statements: Iterable[Statement]) -> Iterator[SnapshotInsert]:
        """The INSERTs among ``statements``, each with its rows' decoder values (what
        :meth:`rows` yields row by row): a loader builds bronze column-wise from them and the
        table map (:attr:`RowReader.table_map`), as bronze builds Arrow batches from rows events."""
        for st in statements:
            kind = st.kind
            if kind == "insert":
                ins = st.insert
                db = ins.db or self.state.db
                if db is None:
                    raise CorruptDump(f"INSERT INTO {ins.table} before any USE: its database is unknown",
                                      file=self.name, offset=st.offset)
                try:
                    r = self.reader(db, ins.table)
                    idx = r.order(ins.columns)
                    rows = r.values_of_rows(ins.rows, ins.columns)
                except DumpError as e:
                    raise e.at(self.name, st.offset)
                yield SnapshotInsert(st.offset, db, ins.table, r, idx, ins.columns, rows)
            elif kind == "create_table":
                self.table_schema(st)
            elif kind not in _SETUP and st.head not in _SETUP_HEADS:
                self.skipped[st.head or kind] += 1


def reading_at(outline_statements: Iterable[Statement], offset: int, initial: DumpState, *,
               name: str | None = None) -> DumpReading:
    """The reading a range that starts at ``offset`` begins with: ``initial`` (the header's state,
    :meth:`DumpState.from_header`) with every statement of the dump's outline before ``offset``
    applied (session changes, and the schemas of the ``CREATE TABLE`` statements)."""
    reading = DumpReading(initial.copy(), name=name)
    for st in outline_statements:
        if st.offset >= offset:
            break
        if st.kind == "create_table":
            reading.table_schema(st)
        reading.state.apply(st)
    reading.skipped.clear()
    return reading
