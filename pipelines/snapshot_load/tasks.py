"""The Spark tasks of a snapshot load: each reads one byte range of a plain dump (or one compressed
dump whole, streaming; a ``--tab`` table's ``.txt``; a mydumper data chunk) and turns its rows into
bronze rows (op ``r``), written as Parquet files into the bronze table's folder (delta-rs:
:class:`~pipelines.delta_io.ParquetStager`) or returned to Spark's Delta writer (delta-spark). A
task never raises a dump's error: it returns it as a record (``("error", (offset, message,
class))``), so the driver can report the first one by its offset, once, and land nothing.

Plain values in, records out; what the driver does with them is :mod:`pipelines.snapshot_load.step`.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from pipelines.bronze.arrow_rows import SnapshotRowsBuilder
from pipelines.bronze.rows import TableLayout, snapshot_row
from pipelines.bronze.schema import snapshot_seq
from pipelines.config import TableFilter
from pipelines.snapshot.cells import RowReader
from pipelines.snapshot.errors import DumpError, UnsupportedDump
from pipelines.snapshot.mydumper import MydumperTable, iter_chunk
from pipelines.snapshot.reader import DumpReading, reading_at
from pipelines.snapshot.session import DumpState
from pipelines.snapshot.source import DumpFile
from pipelines.snapshot.split import delimiter_lines, next_statement_start, outline
from pipelines.snapshot.statements import iter_statements, iter_stream
from pipelines.snapshot.tab import TabTable, iter_tab_rows
from pipelines.storage import NO_SETTINGS, StorageSettings


@dataclass(frozen=True)
class LoadWork:
    """One task's share of a dump: ``[start, stop)`` of a plain file (``stop`` None: a compressed
    file, read whole as one stream), the session and schemas it starts with (``landmarks``: the
    outline's statements, :func:`pipelines.snapshot.split.outline`; ``initial``: the header's
    state), and where its rows go in bronze (``file_seq``/``event_pos``/``seq_start``: the
    snapshot's position, :func:`pipelines.bronze.schema.snapshot_start`)."""

    path: str
    name: str
    start: int
    stop: int | None
    landmarks: tuple
    initial: DumpState
    file_seq: int
    event_pos: int
    seq_start: str
    tables: TableFilter
    run_id: str
    ingested_at: object
    table_uri: str | None = None  # the bronze table's folder when the task stages Parquet (delta-rs)
    arrow_schema: object = None
    storage: StorageSettings = field(default=NO_SETTINGS)
    tab: TabTable | None = None  # a --tab folder's table: ``path`` is its .txt, read whole
    chunk_of: MydumperTable | None = None  # a mydumper folder's table: ``path`` is one of its chunks, read whole
    offset_base: int = 0  # added to a chunk's offsets in ``_seq``: its index in its table times CHUNK_SPAN


CHUNK_SPAN = 10 ** 10  # a mydumper chunk's share of the ``_seq`` offsets (10 GB of SQL; 10**5 chunks a table)


# -- the two planning passes over a plain file's ranges -------------------------------------------

def range_delimiters(item: tuple[str, int, int]) -> list[tuple]:
    """``DELIMITER`` lines of one range ``(path, start, stop)``
    (:func:`pipelines.snapshot.split.delimiter_lines`)."""
    path, start, stop = item
    with DumpFile(path).buffer() as buf:
        return delimiter_lines(buf, start, stop)


def range_outline(item: tuple[str, str, int, int, list]) -> tuple:
    """``(start, outline statements, error)`` of one range ``(path, name, start, stop, blocks)``:
    ``start`` moved to the first statement boundary at or after it (None: none in the range)."""
    path, name, start, stop, blocks = item
    with DumpFile(path).buffer() as buf:
        real = next_statement_start(buf, start, blocks) if start else 0
        if real is None or real >= stop:
            return None, [], None
        try:
            found, _inserts = outline(buf, real, stop, blocks=blocks, name=name)
        except DumpError as e:
            return real, [], _error(e, name)
        return real, found, None


def _error(e: DumpError, name: str) -> tuple:
    """``(offset, file, message, class name)`` of a dump's error, for the driver to raise again."""
    e.at(name)
    return (e.offset if e.offset is not None else -1, e.file, e.message, type(e).__name__)


# -- the rows -----------------------------------------------------------------------------------

def load_range(w: LoadWork):
    """The records of one task: its bronze rows (``("row", tuple)``, or staged: ``("files", [...])``),
    then ``("stat", {...})`` (rows per table, rows of excluded tables, statements skipped, and for a
    stream the ``CREATE TABLE`` statements it read: ``creates``), or ``("error", ...)`` instead of
    both when the dump is bad (its staged files deleted)."""
    stager = None
    if w.table_uri is not None:
        from pipelines.bronze.decode import STATS_COLUMNS, parquet_options
        from pipelines.delta_io import ParquetStager

        stager = ParquetStager(w.table_uri, w.arrow_schema, stats_columns=STATS_COLUMNS,
                               parquet_options=parquet_options(w.arrow_schema), settings=w.storage)
    rows: Counter = Counter()
    excluded: Counter = Counter()
    creates: list = []
    dump = DumpFile(w.path)
    reading = None
    try:
        if w.tab is not None:
            with dump.buffer() as buf:
                yield from _tab_rows(w, buf, rows, excluded, stager)
        elif w.chunk_of is not None:
            t = w.chunk_of
            reading = DumpReading(DumpState(db=t.db, flavor=w.initial.flavor), {(t.db, t.table): t.schema},
                                  name=w.name)
            statements = (st for st, _state in iter_chunk(t, w.path, state=reading.state))
            yield from _rows(w, reading, _within_span(statements, w.name), rows, excluded, stager, None)
        elif w.stop is not None:
            with dump.buffer() as buf:
                reading = reading_at(w.landmarks, w.start, w.initial, name=w.name)
                statements = iter_statements(buf, w.start, w.stop, reading.state, name=w.name)
                out = _rows(w, reading, statements, rows, excluded, stager, None)
                yield from out
        else:
            reading = DumpReading(w.initial.copy(), name=w.name)
            statements = iter_stream(dump.chunks(), reading.state, name=w.name)
            yield from _rows(w, reading, statements, rows, excluded, stager, creates)
    except DumpError as e:
        if stager is not None:
            stager.abort()
        yield ("error", _error(e, w.name))
        return
    except BaseException:
        if stager is not None:
            stager.abort()
        raise
    if stager is not None:
        yield ("files", stager.close())
    yield ("stat", {"start": w.start, "rows": dict(rows), "excluded": dict(excluded),
                    "skipped": dict(reading.skipped) if reading is not None else {}, "creates": creates})


def _rows(w: LoadWork, reading: DumpReading, statements, rows: Counter, excluded: Counter, stager, creates):
    """Bronze rows of ``statements``: built column-wise into ``stager`` when there is one, else
    yielded as records. ``creates`` (a stream) collects ``(offset, sql, database)`` of its
    ``CREATE TABLE`` statements."""
    if creates is not None:
        statements = _noting_creates(statements, reading, creates)
    out = _Out(w, stager)
    wanted: dict[tuple[str, str], bool] = {}
    for ins in reading.inserts(statements):
        key = (ins.db, ins.table)
        ok = wanted.get(key)
        if ok is None:
            ok = wanted[key] = w.tables.matches(*key)
        if not ok:
            excluded[key] += len(ins.rows)
            continue
        rows[key] += len(ins.rows)
        yield from out.add(ins.reader.table_map, ins.idx, ins.rows, w.offset_base + ins.offset, ins.db, ins.table)
    out.close()


def _tab_rows(w: LoadWork, buf, rows: Counter, excluded: Counter, stager):
    """Bronze rows of a ``--tab`` table's ``.txt`` (``buf``), as :func:`_rows` makes them (each
    row its own "statement": ``_seq`` from its line's offset)."""
    t = w.tab
    key = (t.db, t.table)
    reader = RowReader(t.db, t.table, t.schema, client_charset=t.txt_charset, time_zone=t.state.time_zone,
                       flavor=t.state.flavor)
    idx = reader.order(None)
    wanted = w.tables.matches(*key)
    out = _Out(w, stager)
    for offset, literals in iter_tab_rows(t, buf):
        if not wanted:
            excluded[key] += 1
            continue
        try:
            values = reader.values(literals)
        except DumpError as e:
            raise e.at(os.path.basename(w.path), offset)
        rows[key] += 1
        yield from out.add(reader.table_map, idx, [values], offset, t.db, t.table)
    out.close()


class _Out:
    """Where a task's rows go: column-wise into Arrow batches for the stager (delta-rs), or one
    ``("row", tuple)`` record each for Spark's Delta writer (delta-spark)."""

    def __init__(self, w: LoadWork, stager):
        self.w, self.stager = w, stager
        self.layouts: dict[int, TableLayout] = {}
        self.builder = None if stager is None else SnapshotRowsBuilder(
            w.arrow_schema, source_file=w.name, file_seq=w.file_seq, event_pos=w.event_pos, seq_start=w.seq_start,
            run_id=w.run_id, ingested_at=w.ingested_at)

    def add(self, tm, idx: tuple, values: list, offset: int, db: str, table: str):
        """The records of one statement's rows (none when they go to the stager)."""
        layout = self.layouts.get(id(tm))
        if layout is None:
            layout = self.layouts[id(tm)] = TableLayout(tm)
        w, builder = self.w, self.builder
        if builder is not None:
            builder.add(layout, idx, values, offset=offset, db=db, table=table)
            if builder.rows >= self.stager.batch_rows:
                self.stager.add_batch(builder.take())
            return
        for k, v in enumerate(values):
            yield ("row", snapshot_row(layout, idx, v, source_file=w.name, file_seq=w.file_seq, event_pos=w.event_pos,
                                       row_idx=k, seq=snapshot_seq(w.seq_start, offset, k), db=db, table=table,
                                       run_id=w.run_id, ingested_at=w.ingested_at))

    def close(self) -> None:
        if self.builder is not None and self.builder.rows:
            self.stager.add_batch(self.builder.take())


def _within_span(statements, name: str):
    """A chunk's statements, refusing one that starts past :data:`CHUNK_SPAN` (its ``_seq`` would
    run into the next chunk's)."""
    for st in statements:
        if st.offset >= CHUNK_SPAN:
            raise UnsupportedDump(f"a mydumper chunk of more than {CHUNK_SPAN} bytes: dump with smaller chunks "
                                  "(--chunk-filesize, --rows)", file=name, offset=st.offset)
        yield st


def _noting_creates(statements, reading: DumpReading, creates: list):
    for st in statements:
        if st.kind == "create_table":
            creates.append((st.offset, create_text(st), reading.state.db))
        yield st


def create_text(st) -> str:
    """A ``CREATE TABLE`` statement's text as the schema history parses it."""
    return st.raw.decode("utf-8", "replace") if st.raw else st.sql


def partition(works_by_index: dict):
    """The function Spark maps over a partition of work indexes."""
    def run(items):
        for i in items:
            yield from load_range(works_by_index[i])

    return run
