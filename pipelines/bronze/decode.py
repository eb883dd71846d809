"""The Spark tasks of a bronze batch: decode one byte range (or one whole file) into bronze rows,
statements and quarantine rows (:func:`decode_range`), the rows as Arrow record batches
(:func:`arrow_range`): staged as Parquet files (:func:`stage_range`, the delta-rs backend) or
handed to Spark as one DataFrame (:func:`frame_partition`, the delta-spark backend)."""
from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import os
from collections import Counter
from dataclasses import dataclass
from dataclasses import replace
from typing import Iterator
from urllib.parse import unquote

from pipelines.binlog.changes import is_ddl, RowChange, RowsBatch, StatementChange, iter_change_batches, iter_changes
from pipelines.binlog.columns import override_metas
from pipelines.binlog.constants import ColumnType, EventFlag
from pipelines.binlog.errors import BinlogError, ChecksumMismatch
from pipelines.binlog.events import EVENT_DECODERS, DecodeContext, decode_event
from pipelines.binlog.framing import BinlogFile
from pipelines.binlog.txindex import QUERY_TYPES, FileIndex, scan
from pipelines.binlog.values import InvalidText
from pipelines.bronze.arrow_rows import ArrowRowsBuilder
from pipelines.bronze.records import Quarantined, RangeError, RangeStat
from pipelines.bronze.rows import OPS, TableLayout, epoch_datetime, bronze_row
from pipelines.bronze.schema import BRONZE_LAYOUT, DECODER_VERSION, WRITTEN_LATER, seq_key
from pipelines.bronze.files import MAX_RAW_EVENT, task_bytes, as_buffer, cut_event
from pipelines.storage import NO_SETTINGS, StorageSettings

_OP = BRONZE_LAYOUT.names.index("op")  # (a bronze row's op, in bronze_row's tuple)


@dataclass(frozen=True)
class WorkRange:
    """One Spark task: decode ``[start, end)`` of one file."""

    name: str
    uri: str
    file_seq: int
    start: int
    end: int
    index: FileIndex | None  # the transactions of this range; None: the task indexes its range itself
    run_id: str
    ingested_at: _dt.datetime
    precision: "TemporalPrecision | None" = None  # MariaDB 5.3 temporal precision, when needed
    storage: StorageSettings = NO_SETTINGS  # how the task reads a remote file: the driver's settings


_LEGACY_TEMPORAL = (ColumnType.TIME, ColumnType.DATETIME, ColumnType.TIMESTAMP)


@dataclass(frozen=True)
class TemporalPrecision:
    """A ``table_map_hook``: the fractional-second digits of MariaDB 5.3 TIME/DATETIME/TIMESTAMP(n)
    columns (``mysql56_temporal_format=OFF``), which their table maps do not carry, from the
    schema history (``{(db, table): {column index: digits}}``). Only columns logged with the old
    type codes and no metadata are completed."""

    by_table: dict

    def __call__(self, tm):
        digits = self.by_table.get((tm.schema, tm.table))
        if not digits:
            return tm
        use = {i: d for i, d in digits.items()
               if i < tm.column_count and tm.column_types[i] in _LEGACY_TEMPORAL and not tm.column_metas[i]}
        return override_metas(tm, use) if use else tm

    @classmethod
    def of_history(cls, history) -> "TemporalPrecision":
        """The latest precision of every table of ``history`` with fractional temporal columns."""
        by_table = {}
        for db, table in history.tables():
            schema = history.current(db, table)
            if schema is None:
                continue
            digits = {i: c.decimals for i, c in enumerate(schema.columns)
                      if c.type in ("TIME", "DATETIME", "TIMESTAMP") and c.decimals}
            if digits:
                by_table[(db, table)] = digits
        return cls(by_table)


def _sub_index(idx: FileIndex, start: int, end: int) -> FileIndex:
    txs = [t for t in idx.transactions if start <= t.begin_pos < end]
    return FileIndex(idx.file, idx.size, idx.server_version, txs, complete_until=end)


def decode_range(w: WorkRange, batches: bool = False, buf=None) -> Iterator[tuple]:
    """Tagged records of one range: ``("row", bronze row)``, ``("stmt", ddl row)``,
    ``("quar", quarantine row)`` and, last, ``("stat", (name, start, end, events,
    {op: rows}, error, skipped, ignorable, invalid_text))``.

    * ``error`` is None or ``(offset, cut, reason, class)``: the range stopped at
      a bad event at ``offset``; nothing from ``cut`` (the start of its
      transaction) on may land.
    * ``skipped`` lists the ``(begin, end)`` of transactions that could not be
      decoded although their framing is sound: each has a quarantine row
      holding all its bytes, and none of its rows or statements may land
      (``{op: rows}`` already leaves them out).
    * ``ignorable`` counts the unknown events flagged ignorable that were skipped;
      an unknown event without the flag gets a quarantine row of its own.
    * ``invalid_text`` counts the statements and (``("row", ...)`` records only) row values
      whose bytes are not valid in their declared charset: they land with visible
      replacements in the text and the exact bytes beside it (``query_raw``, a cell's ``bin``).

    With ``batches``, each rows event comes as one ``("rows", (RowsBatch, layout))`` record
    instead of its ``("row", ...)`` records, its images as cells where the compiled decoder takes
    them (see :class:`ArrowRowsBuilder`).

    ``buf`` holds the file's bytes when the caller has them (a file Spark's ``binaryFile`` source read whole);
    otherwise the task reads what it needs (:func:`task_bytes`). Without ``w.index`` the task
    indexes its own range first (a quick pass over ``[start, end)``).

    Raises nothing for bad bytes: every :class:`BinlogError` becomes ``error``
    or a skipped transaction. Pure apart from reading the file.
    """
    layouts: dict[int, TableLayout] = {}
    err = None
    invalid_stmts = 0
    ops: Counter = Counter()
    skipped: list[tuple[int, int]] = []
    with contextlib.nullcontext(buf) if buf is not None else task_bytes(w.uri, w.start, w.end, w.storage) as buf:
        if w.index is None:
            w = replace(w, index=_range_index(buf, w))
        pos = w.start
        tx_begin, tx_ops = None, Counter()  # rows of the current transaction, counted once it is over
        while err is None:
            try:
                changes = functools.partial(iter_change_batches, row_cells=True) if batches else iter_changes
                for ch in changes(buf, w.index, pos, w.end, name=w.name, table_map_hook=w.precision):
                    if ch.tx.begin_pos != tx_begin:
                        ops.update(tx_ops)
                        tx_begin, tx_ops = ch.tx.begin_pos, Counter()
                    if type(ch) is not StatementChange:  # rows: the layout of their table map
                        lay = layouts.get(id(ch.table_map))
                        if lay is None or lay.tm is not ch.table_map:
                            lay = layouts[id(ch.table_map)] = TableLayout(ch.table_map)
                    if type(ch) is RowsBatch:
                        tx_ops[OPS[ch.op]] += ch.n
                        yield ("rows", (ch, lay))
                    elif type(ch) is RowChange:
                        row = bronze_row(ch, lay, w.file_seq, w.run_id, w.ingested_at)
                        tx_ops[row[_OP]] += 1
                        yield ("row", row)
                    elif type(ch) is StatementChange:
                        invalid_stmts += type(ch.query) is InvalidText
                        yield from _statement_records(w, ch, buf)
                break
            except BinlogError as e:
                off = e.offset if e.offset is not None else pos
                tx = w.index.tx_at(off)
                if tx is not None and tx.begin_pos >= pos and _skippable(e, tx):
                    # the quick pass verified this transaction's framing: skip it alone, keep all its bytes
                    skipped.append((tx.begin_pos, tx.end_pos))
                    if tx.begin_pos == tx_begin:
                        tx_ops = Counter()
                    yield _skipped_tx_record(w, e, tx, buf)
                    pos = tx.end_pos
                    if pos >= w.end:
                        break
                    continue
                cut = tx.begin_pos if tx is not None else off
                err = RangeError(off, cut, str(e), type(e).__name__)
        ops.update(tx_ops)  # (emptied when its transaction was skipped)
        events, ignorable = yield from _framing_pass(w, buf, err.cut if err else w.end, skipped)
    invalid = invalid_stmts + sum(lay.invalid_text for lay in layouts.values())
    yield ("stat", RangeStat(w.name, w.start, w.end, events, dict(ops), err, skipped, ignorable, invalid))


def _statement_records(w: WorkRange, ch: StatementChange, buf) -> Iterator[tuple]:
    """A statement's ``_pipeline/ddl`` row, and a quarantine row when it is a statement-format
    change (a row change logged as SQL, which bronze cannot replay as rows)."""
    raw = ch.query.raw if type(ch.query) is InvalidText else None
    yield ("stmt", (w.name, w.file_seq, ch.pos, seq_key(w.file_seq, ch.pos, 0), ch.db, str(ch.query),
                    epoch_datetime(ch.tx.commit_ts), ch.in_group, ch.tx.gtid, ch.server_id, w.run_id, raw))
    if ch.in_group and not is_ddl(ch.query):
        # (a DDL statement in a group is CREATE TABLE ... SELECT: its rows follow as row events)
        yield ("quar", Quarantined(w.name, w.file_seq, ch.pos,
                                   "statement-format change cannot be replayed as rows: " + ch.query[:500],
                                   "StatementFormat", DECODER_VERSION, cut_event(buf, ch.pos), None,
                                   w.run_id, w.ingested_at))


def _skipped_tx_record(w: WorkRange, e: BinlogError, tx, buf) -> tuple:
    """The quarantine row of a transaction skipped whole (its framing is sound): all its bytes."""
    reason = (f"{e} (transaction [{tx.begin_pos}, {tx.end_pos}) skipped and kept whole in this "
              f"row; the rest of the file lands)")
    return ("quar", Quarantined(w.name, w.file_seq, tx.begin_pos, reason, type(e).__name__, DECODER_VERSION,
                                bytes(buf[tx.begin_pos : tx.end_pos]), None, w.run_id, w.ingested_at))


def _framing_pass(w: WorkRange, buf, stop: int, skipped: list[tuple[int, int]]):
    """One framing pass over ``[w.start, stop)``: yields a quarantine row per unknown event not
    flagged ignorable (outside the skipped transactions), and returns ``(events, ignorable)``."""
    events = ignorable = 0
    try:
        with BinlogFile(buf, name=w.name, verify_checksums=False) as bf:
            for raw in bf.events(w.start, stop):
                h = raw.header
                events += 1
                if h.type_code in EVENT_DECODERS:
                    continue
                if h.flags & EventFlag.IGNORABLE:
                    ignorable += 1
                elif not any(b <= h.pos < e for b, e in skipped):
                    reason = (f"{w.name}: offset {h.pos}: unknown event type {h.type_code}, not flagged "
                              f"ignorable: kept here undecoded, the events around it land")
                    yield ("quar", Quarantined(w.name, w.file_seq, h.pos, reason, "UnknownEvent", DECODER_VERSION,
                                               bytes(buf[h.pos : min(h.end_pos, h.pos + MAX_RAW_EVENT)]), None,
                                               w.run_id, w.ingested_at))
    except BinlogError:
        pass
    return events, ignorable


def _range_index(buf, w: WorkRange) -> FileIndex:
    """The transactions of ``[w.start, w.end)``, found by the task itself."""
    try:
        return scan(buf, name=w.name, start=w.start, end=w.end)
    except BinlogError:  # no sound format description: the decode reports the same error
        return FileIndex(w.name, len(buf), "", [], complete_until=w.end)


def _skippable(e: BinlogError, tx) -> bool:
    """Can the bad event's transaction be skipped alone? Only when its framing is
    sound (it is a complete transaction of the index, which verified every
    checksum on the way) and it is small enough to be kept whole."""
    return not isinstance(e, ChecksumMismatch) and tx.end_pos - tx.begin_pos <= MAX_RAW_EVENT


@dataclass(frozen=True)
class StageTarget:
    """Where tasks write bronze Parquet files themselves (the delta-rs backend)."""

    table_uri: str
    schema: object  # pyarrow.Schema of the bronze table
    storage: StorageSettings = NO_SETTINGS  # the driver's storage settings, for the table's filesystem


STATS_COLUMNS = ("source_file", "file_seq", "event_pos", "_seq", "db", "table", "op", "_ingested_at")


def parquet_options(schema) -> dict:
    """Bronze Parquet: dictionaries for every column but the values (``text``/``bin``, mostly
    distinct), Parquet statistics for the columns Delta keeps statistics of, ``_shape`` and
    ``_zero_dates``. Smaller files (21 MB against 23 MB for the 1x bench file) written in a third
    less time."""
    import pyarrow as pa

    flat = [f.name for f in schema if not pa.types.is_list(f.type)]
    cells = [f"{f.name}.list.element.{c}" for f in schema if pa.types.is_list(f.type) for c in ("idx", "name", "type")]
    # their null counts let silver's "any row of an older bronze?" skip whole row groups
    return {"use_dictionary": flat + cells, "write_statistics": [*STATS_COLUMNS, *WRITTEN_LATER]}


def arrow_range(w: WorkRange, schema, buf=None, batch_rows: int = 20_000) -> Iterator[tuple]:
    """:func:`decode_range` with the bronze rows as Arrow record batches in ``schema`` (a pyarrow
    schema of the bronze table): ``("batch", RecordBatch)`` records of up to about ``batch_rows``
    rows, every row the range decoded (also those the driver will not land: past a bad event, in
    a skipped transaction); the other records as they are, the ``stat`` record's count of text not
    valid in its charset with the cells'."""
    builder = ArrowRowsBuilder(schema, w.file_seq, w.run_id, w.ingested_at)
    for rec in decode_range(w, batches=True, buf=buf):
        kind = rec[0]
        if kind == "rows":
            builder.add(*rec[1])
            if builder.rows >= batch_rows:
                yield ("batch", builder.take())
            continue
        if kind == "stat":
            if builder.rows:
                yield ("batch", builder.take())
            rec = ("stat", rec[1]._replace(invalid=rec[1].invalid + builder.invalid_text))
        yield rec


def stage_range(w: WorkRange, target: StageTarget, buf=None) -> Iterator[tuple]:
    """:func:`decode_range` with the bronze rows written to Parquet files in the bronze table's
    folder instead of returned: yields the small records, then ``("files", (name, start,
    [StagedFile, ...]))``; the ``stat`` record's op counts are those of the rows in the files.

    Rows that must not land (from the transaction of the range's bad event on, and those of
    skipped transactions) were written before the range knew; the files are rewritten without
    them at the end (rare: bad input only)."""
    import pyarrow.compute as pc

    from pipelines.delta_io import ParquetStager

    stager = ParquetStager(target.table_uri, target.schema, stats_columns=STATS_COLUMNS,
                           parquet_options=parquet_options(target.schema), settings=target.storage)
    ops: Counter = Counter()
    try:
        for rec in arrow_range(w, target.schema, buf, stager.batch_rows):
            kind = rec[0]
            if kind == "batch":
                counts = pc.value_counts(rec[1].column("op"))
                ops.update(dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist())))
                stager.add_batch(rec[1])
                continue
            if kind == "stat":
                stat = rec[1]
                drop = list(stat.skipped) + ([(stat.error.cut, 1 << 62)] if stat.error else [])
                files = stager.close()
                if drop and stager.drop_rows("event_pos", drop):
                    ops = Counter()
                    for f in stager.files:
                        ops.update(stager.read(f, ["op"]).column("op").to_pylist())
                    files = stager.files
                yield ("files", (stat.name, stat.start, files))
                rec = ("stat", stat._replace(ops=dict(ops)))
            yield rec
    except BaseException:
        stager.abort()
        raise


def stage_partition(target: StageTarget):
    def run(items):
        for w in items:
            yield from stage_range(w, target)

    return run


def whole_file_partition(works: dict[str, WorkRange], target: StageTarget | None):
    """Tasks over whole files, ``(path, content)`` records of Spark's ``binaryFile`` source or
    ``SparkContext.binaryFiles``: each is one whole file, decoded (or staged, with ``target``) from its content, as the
    ``binlog_changes`` SQL function decodes a ``binaryFile`` row (:mod:`pipelines.binlog_udf`)."""

    def run(rows):
        for path, content in rows:
            w = works[file_name(path)]
            buf = memoryview(content)
            yield from (stage_range(w, target, buf) if target is not None else decode_range(w, buf=buf))

    return run


SMALL_COLUMN = "_small"  # frame_partition's column of the records that are not rows (pickled)


def frame_partition(works: dict[str, WorkRange], schema):
    """The function for ``mapInArrow`` that decodes a batch into one DataFrame (the delta-spark
    backend): over rows of ``(work, path, content)``, each a byte range (``work``: a pickled
    :class:`WorkRange`) or one whole file (``path``, ``content``: a ``binaryFile`` row, its work in
    ``works`` by name), it yields the bronze rows of :func:`arrow_range` as they are, with
    :data:`SMALL_COLUMN` NULL, and the other records pickled in :data:`SMALL_COLUMN` of rows whose
    bronze columns are NULL."""
    import pickle

    import pyarrow as pa

    out = schema.append(pa.field(SMALL_COLUMN, pa.binary()))

    def run(batches):
        for b in batches:
            work, path, content = b.column("work"), b.column("path"), b.column("content")
            for i in range(b.num_rows):
                if work[i].is_valid:
                    w, buf = pickle.loads(work[i].as_py()), None
                else:
                    # (a pyarrow buffer's view is of signed bytes: read as unsigned ones)
                    w, buf = works[file_name(path[i].as_py())], memoryview(content[i].as_buffer()).cast("B")
                small = []
                for rec in arrow_range(w, schema, buf):
                    if rec[0] == "batch":
                        rows = rec[1]
                        yield pa.RecordBatch.from_arrays([*rows.columns, pa.nulls(rows.num_rows, pa.binary())], schema=out)
                    else:
                        small.append(pickle.dumps(rec))
                if small:
                    yield pa.RecordBatch.from_arrays([*(pa.nulls(len(small), f.type) for f in schema),
                                                      pa.array(small, pa.binary())], schema=out)

    return run


def file_name(path: str) -> str:
    """The base name of a whole-file record's path (a Hadoop path, possibly URI-escaped)."""
    return unquote(path.rstrip("/").rsplit("/", 1)[-1])


def batch_statements(source, file_seq: int, start: int, end: int) -> list[tuple[str, str | None, str]]:
    """``(query, default db, _seq)`` of the DDL-like QUERY events in ``[start, end)`` of a file
    (a local path or its bytes): a framing walk that decodes nothing but those events (bronze
    needs them before its tasks run, for :class:`TemporalPrecision`)."""
    out = []
    with as_buffer(source) as buf:
        if len(buf) < 4:
            return out
        try:
            with BinlogFile(buf, name=os.path.basename(source) if isinstance(source, str) else None,
                            verify_checksums=False) as bf:
                ctx = DecodeContext(bf.format, {}, False, None)
                for raw in bf.events(max(start, 4), end):
                    if raw.header.type_code not in QUERY_TYPES:
                        continue
                    ctx.format = bf.format
                    ev = decode_event(raw, ctx)
                    query = getattr(ev, "query", None)
                    if isinstance(query, str) and is_ddl(query):
                        out.append((query, getattr(ev, "schema", None) or None, seq_key(file_seq, raw.header.pos, 0)))
        except BinlogError:
            pass  # the tasks meet the same bad bytes and report them
    return out

