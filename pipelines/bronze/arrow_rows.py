"""Bronze rows built column-wise into Arrow record batches, what the staging tasks use: the same
rows as the row-by-row reference of :mod:`pipelines.bronze.rows` (not here), whose table
layouts they take.

:class:`ArrowRowsBuilder` takes whole rows events (:class:`pipelines.binlog.changes.RowsBatch`),
whose rows share a table map and column set. The compiled decoder wrote most events' images
already as row-major text cells (:class:`~pipelines.binlog.rows.ImageCells`): their buffers become
the cells' arrays as they are. An event decoded to values (a zero date, text not valid in its
charset, a type the compiled decoder leaves to Python) has each column's values converted to text in
one go (Arrow casts for ints and datetimes, one Python pass for the rest), interleaved into
row-major cells with Arrow ``take``; values of unusual types take the per-value path of
:func:`~pipelines.bronze.rows.bronze_row`. :class:`SnapshotRowsBuilder` does the same
for a dump's INSERTs (op ``r``, :func:`~pipelines.bronze.rows.snapshot_row`).

>>> builder = ArrowRowsBuilder(arrow_schema, file_seq=1, run_id="r", ingested_at=now)  # doctest: +SKIP
>>> for batch in iter_change_batches(path, index): builder.add(batch, layout_of(batch.table_map))  # doctest: +SKIP
>>> record_batch = builder.take()  # doctest: +SKIP
"""
from __future__ import annotations

import datetime as _dt
import itertools
import json
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.binlog.changes import RowsBatch
from pipelines.binlog.jsonb import PartialJson
from pipelines.binlog.rows import ImageCells
from pipelines.binlog.values import InvalidText, canonical_text, decimal_text
from pipelines.bronze.rows import OPS, TableLayout, file_basename, is_zero_date
from pipelines.bronze.schema import DECODER_VERSION, PARTIAL_JSON_MARK, SEQ_ROW_DIGITS, seq_key, snapshot_seq

_NONE = type(None)


def _generic(values, fsp) -> tuple[list, list]:
    """(texts, bins) of ``values`` one by one, as :meth:`TableLayout.cell` spells them."""
    texts, bins = [], []
    for v in values:
        t = type(v)
        if t is bytes or t is bytearray or t is memoryview:
            texts.append(None)
            bins.append(bytes(v))
        elif t is InvalidText:
            texts.append(str(v))
            bins.append(v.raw)
        elif t is PartialJson:
            texts.append(json.dumps(v.as_json()))
            bins.append(PARTIAL_JSON_MARK)
        else:
            texts.append(canonical_text(v, fsp))
            bins.append(None)
    return texts, bins


def column_arrays(values, fsp: int | None) -> tuple[pa.Array, pa.Array]:
    """The ``text`` and ``bin`` arrays of one column's values (None = SQL NULL): equal to
    :func:`_generic` of the same values, but a column of one common type is converted at once."""
    n = len(values)
    kinds = set(map(type, values))
    kinds.discard(_NONE)
    no_text, no_bin = pa.nulls(n, pa.string()), pa.nulls(n, pa.binary())
    if not kinds:
        return no_text, no_bin
    if len(kinds) == 1:
        kind = kinds.pop()
        if kind is str:
            return pa.array(values, pa.string()), no_bin
        if kind is bytes:
            return no_text, pa.array(values, pa.binary())
        if kind is int:
            try:
                return pa.array(values, pa.int64()).cast(pa.string()), no_bin
            except (OverflowError, pa.ArrowException):
                pass  # above 2**63 - 1 (BIGINT UNSIGNED): one by one
        elif kind is _dt.datetime and fsp is not None:
            # Arrow prints microseconds always; the column's own digits are kept (UTC for aware values)
            text = pa.array(values, pa.timestamp("us")).cast(pa.string())
            return pc.utf8_slice_codeunits(text, 0, 20 + fsp if fsp else 19), no_bin
        elif kind is float:
            return pa.array([None if v is None else repr(v) for v in values], pa.string()), no_bin
        elif kind is Decimal:
            return pa.array([None if v is None else decimal_text(v) for v in values], pa.string()), no_bin
    texts, bins = _generic(values, fsp)
    return pa.array(texts, pa.string()), pa.array(bins, pa.binary())


class _Group:
    """The rows of one table layout, op and column sets (and image presence) in a chunk. Each
    image is a list of pieces in row order: value tuples gathered in a list, or an event's
    :class:`~pipelines.binlog.rows.ImageCells`."""

    __slots__ = ("layout", "op", "cols_before", "cols_after", "has_before", "has_after", "before", "after", "n",
                 "shape")

    def __init__(self, layout, op, cb, ca, has_before, has_after):
        self.layout, self.op, self.cols_before, self.cols_after = layout, op, cb, ca
        self.has_before, self.has_after = has_before, has_after
        self.shape = layout.shape(cb if has_before else None, ca if has_after else None)
        self.before: list = []
        self.after: list = []
        self.n = 0


def _add_rows(pieces: list, rows) -> None:
    """Add rows of values to an image's pieces (one list for consecutive ones)."""
    if pieces and type(pieces[-1]) is list:
        pieces[-1].extend(rows)
    else:
        pieces.append(list(rows))


def _value_cells(layout: "TableLayout", cols: tuple, rows: list, zeros: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """The row-major ``text`` and ``bin`` cells of rows of values; adds each row's zero dates (see
    :meth:`TableLayout.zero_dates`) to ``zeros``."""
    n, width = len(rows), len(cols)
    texts, bins = [], []
    for j, values in enumerate(zip(*rows)):
        t, b = column_arrays(values, layout.fsps[cols[j]])
        texts.append(t)
        bins.append(b)
        if cols[j] in layout.dates:
            kinds = set(map(type, values))
            if str in kinds or int in kinds:  # else all are dates (or NULL): no zero date
                zeros += np.fromiter(map(is_zero_date, values), dtype=np.int32, count=n)
    # column-major -> row-major: cell (row r, column j) is at j * n + r
    order = (np.arange(n)[:, None] + np.arange(width)[None, :] * n).ravel()
    return pa.concat_arrays(texts).take(order), pa.concat_arrays(bins).take(order)


def _buffer_array(typ: pa.DataType, lens: np.ndarray, data: bytes) -> pa.Array:
    """The array of cells of lengths ``lens`` (-1: NULL) over ``data``, without a copy of the data."""
    n = len(lens)
    valid = lens >= 0
    nulls = n - int(np.count_nonzero(valid))
    if nulls == n:
        return pa.nulls(n, typ)
    ends = np.cumsum(np.where(valid, lens, 0), dtype=np.int64)
    large = bool(n) and int(ends[-1]) > np.iinfo(np.int32).max
    offsets = np.zeros(n + 1, np.int64 if large else np.int32)
    offsets[1:] = ends
    mask = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
    kind = (pa.large_string() if typ == pa.string() else pa.large_binary()) if large else typ
    arr = pa.Array.from_buffers(kind, n, [mask, pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)
    return arr.cast(typ) if large else arr


def _decoded_cells(run: list[ImageCells]) -> tuple[pa.Array, pa.Array]:
    """The row-major ``text`` and ``bin`` cells of consecutive events' cells, as they are."""
    text_lens = np.frombuffer(b"".join(c.text_lens for c in run), dtype=np.int32)
    bin_lens = np.frombuffer(b"".join(c.bin_lens for c in run), dtype=np.int32)
    return (_buffer_array(pa.string(), text_lens, b"".join(c.text for c in run)),
            _buffer_array(pa.binary(), bin_lens, b"".join(c.bin for c in run)))


def _image_array(layout: "TableLayout", cols: tuple, pieces: list, n: int, present: bool,
                 list_type: pa.ListType, zeros: np.ndarray) -> tuple[pa.Array, pa.StructArray | None]:
    """The list array of one image for ``n`` rows (all NULL when not ``present``) and its cells;
    adds each row's zero dates (see :meth:`TableLayout.zero_dates`) to ``zeros``."""
    if not present:
        return pa.nulls(n, list_type), None
    width = len(cols)
    struct_type = list_type.value_type
    if width:
        texts, bins, at = [], [], 0
        for values, run in itertools.groupby(pieces, key=lambda piece: type(piece) is list):
            for rows in run if values else [list(run)]:
                if values:
                    t, b = _value_cells(layout, cols, rows, zeros[at : at + len(rows)])
                else:
                    t, b = _decoded_cells(rows)
                at += len(t) // width
                texts.append(t)
                bins.append(b)
        text = texts[0] if len(texts) == 1 else pa.concat_arrays(texts)
        binary = bins[0] if len(bins) == 1 else pa.concat_arrays(bins)
        tiles = np.tile(np.arange(width), n)
        idx = pa.array(np.asarray(cols, dtype=np.int32)).take(tiles)
        names = pa.array([layout.names[i] for i in cols], pa.string()).take(tiles)
        types = pa.array([layout.types[i] for i in cols], pa.string()).take(tiles)
        cells = pa.StructArray.from_arrays([idx, names, types, text, binary], fields=list(struct_type))
    else:
        cells = pa.StructArray.from_arrays([pa.array([], f.type) for f in struct_type], fields=list(struct_type))
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * np.int32(width))
    return pa.ListArray.from_arrays(offsets, cells, type=list_type), cells


def _with_bytes(cells: pa.StructArray | None) -> int:
    """Cells with both a text and bytes: values not valid in their charset (:class:`InvalidText`;
    the partial-JSON marker is not counted)."""
    if cells is None or not len(cells):
        return 0
    both = pc.and_(pc.is_valid(cells.field("text")), pc.is_valid(cells.field("bin")))
    if not pc.any(both).as_py():
        return 0
    marked = pc.equal(cells.field("bin"), pa.scalar(PARTIAL_JSON_MARK, pa.binary()))
    return int(pc.sum(pc.and_(both, pc.invert(pc.fill_null(marked, False)))).as_py() or 0)


def _key_array(g: _Group, n: int, before: pa.StructArray | None, after: pa.StructArray | None,
               list_type: pa.ListType) -> pa.Array:
    """The ``pk`` list of a group, as :func:`~pipelines.bronze.rows.bronze_row` picks it: each key
    column from the winning image (after for c/u, before for d), else from the other, else no ``pk``."""
    key = g.layout.key
    if key is None:
        return pa.nulls(n, list_type)
    # (cells, columns, where the cells start in before + after), the winning image first
    start_after = len(before) if before is not None else 0
    images = [(after, g.cols_after, start_after), (before, g.cols_before, 0)]
    if g.op == "delete":
        images.reverse()
    picks = []
    for c in key:
        for cells, cols, start in images:
            if cells is not None and c in cols:
                picks.append((start, len(cols), cols.index(c)))
                break
        else:
            return pa.nulls(n, list_type)
    k = len(picks)
    starts = np.array([p[0] + p[2] for p in picks], dtype=np.int64)
    widths = np.array([p[1] for p in picks], dtype=np.int64)
    order = (starts[None, :] + np.arange(n, dtype=np.int64)[:, None] * widths[None, :]).ravel()
    pool = pa.concat_arrays([x for x in (before, after) if x is not None])
    offsets = pa.array(np.arange(0, n * k + 1, k, dtype=np.int32))
    return pa.ListArray.from_arrays(offsets, pool.take(order), type=list_type)


# The fields of an entry of ``_ColumnarRows._ev`` (a plain tuple: one is made per rows event): its
# group, the entry's first row in the group, its rows, its source (a rows event's batch; a
# snapshot INSERT's offset), the index of its first row in that source; a snapshot's db and table.
GROUP, AT, COUNT, SOURCE, FIRST_ROW, DB, TABLE = range(7)


class _ColumnarRows:
    """What both column-wise builders share: rows gathered in groups of one table layout, op and
    column sets, their images and keys built per group at once, then put back in the order they
    were added. ``_ev`` holds one entry per run of added rows (fields: :data:`GROUP` ...)."""

    def __init__(self, schema: pa.Schema, run_id: str, ingested_at: _dt.datetime):
        self.schema, self.run_id, self.ingested_at = schema, run_id, ingested_at
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self.invalid_text = getattr(self, "invalid_text", 0)  # over the builder's life
        self._groups: dict[tuple, _Group] = {}
        self._ev: list[tuple] = []

    def _group(self, layout, op, cols_before, cols_after, has_before, has_after) -> _Group:
        key = (id(layout), op, cols_before, cols_after, has_before, has_after)
        g = self._groups.get(key)
        if g is None or g.layout is not layout:
            g = self._groups[key] = _Group(layout, op, cols_before, cols_after, has_before, has_after)
        return g

    def take(self) -> pa.RecordBatch | None:
        """The rows added since the last call (None when there are none)."""
        if not self.rows:
            return None
        try:
            return self._build()
        finally:
            self._reset()

    def _fields(self, ev: list, spread: np.ndarray, within: np.ndarray, total: int) -> dict:
        """The columns that are not the images, keys, shapes or run fields."""
        raise NotImplementedError

    def _build(self) -> pa.RecordBatch:
        schema = self.schema
        list_type = schema.field("before").type
        pk_type = schema.field("pk").type
        groups = list(self._groups.values())
        base, at = {}, 0
        befores, afters, pks, zeros = [], [], [], []
        for g in groups:
            base[id(g)] = at
            at += g.n
            z = np.zeros(g.n, dtype=np.int32)
            b, b_cells = _image_array(g.layout, g.cols_before, g.before, g.n, g.has_before, list_type, z)
            a, a_cells = _image_array(g.layout, g.cols_after, g.after, g.n, g.has_after, list_type, z)
            self.invalid_text += _with_bytes(b_cells) + _with_bytes(a_cells)
            befores.append(b)
            afters.append(a)
            pks.append(_key_array(g, g.n, b_cells, a_cells, pk_type))
            zeros.append(z)
        ev = self._ev
        counts = np.fromiter((e[COUNT] for e in ev), dtype=np.int64, count=len(ev))
        total = int(counts.sum())
        chunk_start = np.concatenate(([0], np.cumsum(counts)[:-1]))
        group_start = np.fromiter((base[id(e[GROUP])] + e[AT] for e in ev), dtype=np.int64, count=len(ev))
        spread = np.repeat(np.arange(len(ev)), counts)  # entry of each row
        within = np.arange(total) - chunk_start[spread]  # row number within its entry
        order = group_start[spread] + within  # row -> row of the groups' concatenation
        columns = self._fields(ev, spread, within, total)
        # (a batch of one table's inserts, say: the groups' rows are the batch's as they are, and
        # the lists are not copied)
        in_order = bool(np.array_equal(order, np.arange(total)))

        def placed(parts: list) -> pa.Array:
            whole = pa.concat_arrays(parts)
            return whole if in_order else whole.take(order)
        columns.update({
            "before": placed(befores),
            "after": placed(afters),
            "pk": placed(pks),
            "decoder_version": pa.repeat(pa.scalar(DECODER_VERSION, pa.string()), total),
            "_run_id": pa.repeat(pa.scalar(self.run_id, pa.string()), total),
            "_ingested_at": pa.repeat(pa.scalar(self.ingested_at), total),
            "_shape": pa.array([e[GROUP].shape for e in ev], pa.string()).take(spread),
            "_zero_dates": placed([pa.array(z) for z in zeros]),
        })
        arrays = []
        for f in schema:
            arr = columns[f.name]
            if arr.type != f.type:
                arr = arr.cast(f.type)
            arrays.append(arr)
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


class ArrowRowsBuilder(_ColumnarRows):
    """Bronze rows of whole rows events as Arrow record batches in the bronze ``schema``
    (rows in the order they were added). Equal to :func:`~pipelines.bronze.rows.bronze_row` of
    every row."""

    def __init__(self, schema: pa.Schema, file_seq: int, run_id: str, ingested_at: _dt.datetime):
        self.file_seq = file_seq
        super().__init__(schema, run_id, ingested_at)

    def add(self, batch: RowsBatch, layout: "TableLayout") -> int:
        """Add the rows of one rows event; returns how many."""
        cells = batch.cells
        if cells is not None:
            if not cells.rows:
                return 0
            hb, ha = cells.before is not None, cells.after is not None
            g = self._group(layout, batch.op, batch.columns_before, batch.columns_after, hb, ha)
            for has, pieces, image in ((hb, g.before, cells.before), (ha, g.after, cells.after)):
                if has:
                    pieces.append(image)
            self._ev.append((g, g.n, cells.rows, batch, batch.first_row))
            g.n += cells.rows
            self.rows += cells.rows
            return cells.rows
        rows = batch.rows
        if not rows:
            return 0
        befores, afters = zip(*rows)
        runs = [(0, len(rows))]
        if (None in befores and befores.count(None) != len(befores)) or \
                (None in afters and afters.count(None) != len(afters)):
            runs = _presence_runs(befores, afters)
        for lo, hi in runs:
            hb, ha = befores[lo] is not None, afters[lo] is not None
            g = self._group(layout, batch.op, batch.columns_before, batch.columns_after, hb, ha)
            if hb:
                _add_rows(g.before, befores[lo:hi])
            if ha:
                _add_rows(g.after, afters[lo:hi])
            self._ev.append((g, g.n, hi - lo, batch, batch.first_row + lo))
            g.n += hi - lo
            self.rows += hi - lo
        return len(rows)

    def _fields(self, ev: list, spread: np.ndarray, within: np.ndarray, total: int) -> dict:
        def per_event(values, typ):
            return pa.array(values, typ).take(spread)

        batches = [e[SOURCE] for e in ev]
        txs = [b.tx for b in batches]
        file_seq = self.file_seq
        row_idx = np.fromiter((e[FIRST_ROW] for e in ev), dtype=np.int64, count=len(ev))[spread] + within
        positions = [b.pos for b in batches]
        # seq_key, column-wise: the event's part once per event, the row's index padded per row
        prefix = per_event([seq_key(file_seq, p, 0)[:-SEQ_ROW_DIGITS] for p in positions], pa.string())
        padded = pc.utf8_lpad(pa.array(row_idx).cast(pa.string()), SEQ_ROW_DIGITS, "0")
        micros = np.int64(1_000_000)
        return {
            "source_file": per_event([file_basename(b.file) for b in batches], pa.string()),
            "file_seq": pa.array(np.full(total, file_seq, dtype=np.int64)),
            "event_pos": per_event(positions, pa.int64()),
            "row_idx": pa.array(row_idx.astype(np.int32)),
            "_seq": pc.binary_join_element_wise(prefix, padded, ""),
            "server_id": per_event([b.server_id for b in batches], pa.int64()),
            "gtid": per_event([t.gtid for t in txs], pa.string()),
            "xid": per_event([t.xid for t in txs], pa.uint64()),
            "commit_ts": pc.multiply(per_event([t.commit_ts for t in txs], pa.int64()), micros),
            "event_ts": pc.multiply(per_event([b.event_ts for b in batches], pa.int64()), micros),
            "db": per_event([b.table_map.schema for b in batches], pa.string()),
            "table": per_event([b.table_map.table for b in batches], pa.string()),
            "op": per_event([OPS[b.op] for b in batches], pa.string()),
        }


class SnapshotRowsBuilder(_ColumnarRows):
    """Bronze rows (op ``r``) of a snapshot's INSERTs as Arrow record batches in the bronze
    ``schema``, rows in the order they were added. Equal to
    :func:`~pipelines.bronze.rows.snapshot_row` of every row: all at the snapshot's
    ``source_file``, ``file_seq`` and ``event_pos``; a row's ``_seq`` is
    :func:`pipelines.bronze.schema.snapshot_seq` of ``seq_start``, its INSERT's offset and its
    index in the INSERT (``row_idx``)."""

    def __init__(self, schema: pa.Schema, *, source_file: str, file_seq: int, event_pos: int, seq_start: str,
                 run_id: str, ingested_at: _dt.datetime):
        self.source_file, self.file_seq, self.event_pos, self.seq_start = source_file, file_seq, event_pos, seq_start
        super().__init__(schema, run_id, ingested_at)

    def add(self, layout: "TableLayout", cols: tuple, rows: list, *, offset: int, db: str, table: str,
            first_row: int = 0) -> int:
        """Add the rows (decoder values of columns ``cols``) of one INSERT at ``offset`` (its rows
        from ``first_row`` on); returns how many."""
        if not rows:
            return 0
        g = self._group(layout, "insert", None, cols, False, True)
        _add_rows(g.after, rows)
        self._ev.append((g, g.n, len(rows), offset, first_row, db, table))
        g.n += len(rows)
        self.rows += len(rows)
        return len(rows)

    def _fields(self, ev: list, spread: np.ndarray, within: np.ndarray, total: int) -> dict:
        row_idx = np.fromiter((e[FIRST_ROW] for e in ev), dtype=np.int64, count=len(ev))[spread] + within
        prefix = pa.array([snapshot_seq(self.seq_start, e[SOURCE], 0)[:-SEQ_ROW_DIGITS] for e in ev],
                          pa.string()).take(spread)
        padded = pc.utf8_lpad(pa.array(row_idx).cast(pa.string()), SEQ_ROW_DIGITS, "0")
        nothing = pa.nulls(total)
        return {
            "source_file": pa.repeat(pa.scalar(self.source_file, pa.string()), total),
            "file_seq": pa.array(np.full(total, self.file_seq, dtype=np.int64)),
            "event_pos": pa.array(np.full(total, self.event_pos, dtype=np.int64)),
            "row_idx": pa.array(row_idx.astype(np.int32)),
            "_seq": pc.binary_join_element_wise(prefix, padded, ""),
            "server_id": nothing, "gtid": nothing, "xid": nothing, "commit_ts": nothing, "event_ts": nothing,
            "db": pa.array([e[DB] for e in ev], pa.string()).take(spread),
            "table": pa.array([e[TABLE] for e in ev], pa.string()).take(spread),
            "op": pa.repeat(pa.scalar("r", pa.string()), total),
        }


def _presence_runs(befores: tuple, afters: tuple) -> list[tuple[int, int]]:
    """Cut rows into runs of the same image presence (a rows event normally is one run)."""
    runs, lo = [], 0
    for i in range(1, len(befores) + 1):
        if i == len(befores) or (befores[i] is None) != (befores[lo] is None) \
                or (afters[i] is None) != (afters[lo] is None):
            runs.append((lo, i))
            lo = i
    return runs
