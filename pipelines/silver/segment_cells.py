"""A big segment's bronze rows on the driver, as flat cells (:mod:`pipelines.silver.columnar`
types and folds them).

* :func:`read_segments`: the segments of a run's big tables read from bronze by delta-rs and
  pyarrow in one pass over its row groups (tables' changes interleave there), no Spark job; of
  each image only the cells' ``idx``, ``text``, ``bin`` (and ``name``, for value fixes), kept as
  chunks of the read buffers with each cell's change (:class:`Cells`);
* :func:`read_parts`: one segment too big for that, read as a series of segments of about
  :data:`CHUNK_BYTES` of cells each (the fold takes them one at a time: no limit of size);
* :meth:`Cells.column`: one column's cells for every change (:class:`CellColumn`), found by
  stride when every image holds the same columns in the same order, else by one sort of the
  cells by ordinal (:func:`by_ordinal`); its texts, bytes and names taken only when read.

>>> seg = read_segments(scan, [SegmentRead("shop", "orders", "")])[SegmentRead("shop", "orders", "")]  # doctest: +SKIP
>>> seg.images["after"].column(0, seg.n).text  # doctest: +SKIP
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.delta_io import Scan
from pipelines.silver import ranges

BIG_BYTES = 768 * 2**20  # bytes of the cells kept of a read's segments, at most (more: each read by parts)
CHUNK_BYTES = BIG_BYTES  # bytes of the cells of one part of a segment read by parts (read_parts), about
_IMAGES = ("before", "after")


@dataclass
class Cells:
    """One image's cells of a segment, flat: ``row`` (the change's position), ``idx``, ``text``,
    ``bin``, ``name``; ``present``: per change, whether it has the image."""
    row: np.ndarray
    idx: pa.ChunkedArray
    text: pa.ChunkedArray
    bin: pa.ChunkedArray
    name: pa.ChunkedArray
    present: np.ndarray

    def __post_init__(self) -> None:
        self._by_ordinal: Callable[[int], np.ndarray] | None = None  # (by_ordinal's, once)

    def _positions(self, ordinal: int) -> np.ndarray:
        """The positions of the cells of ``ordinal``, ascending (:func:`by_ordinal`, once)."""
        if self._by_ordinal is None:
            idx = pc.fill_null(self.idx, -1).to_numpy()
            self._by_ordinal = by_ordinal(idx, int(np.searchsorted(self.row, self.row[0], "right")) if len(idx) else 0)
        return self._by_ordinal(ordinal)

    def column(self, ordinal: int, n: int) -> CellColumn:
        """Cell ``ordinal`` of every change (null where it has none)."""
        at = self._positions(ordinal)
        rows = self.row[at]
        if len(at) == n and (rows == np.arange(n)).all():  # (every change has it: a full image)
            return CellColumn(self, at, None)
        slot = np.full(n, -1, dtype=np.int64)
        slot[rows] = np.arange(len(at))
        return CellColumn(self, at, pa.array(slot, mask=slot < 0))


_NO_ORDINAL = (1 << 15) - 1  # ordinals are below it (a table has at most 4,096 columns)


def by_ordinal(idx: np.ndarray, width: int) -> Callable[[int], np.ndarray]:
    """``ordinal -> the positions in idx of its cells, ascending`` (``idx``: the cells' ordinals,
    -1 for none; ``width``: how many cells the first image holds).

    When ``idx`` repeats one block of ``width`` distinct ordinals (every image holds the same
    columns in the same order: the common case), an ordinal's positions are a stride and nothing
    is sorted; otherwise the cells are grouped by ordinal once, by a stable radix sort, and each
    ordinal's positions are a slice of that order (1.4M images of 9 columns: 0.01 s against 0.45 s).

    >>> [by_ordinal(np.array([3, 5, 3, 5]), 2)(o).tolist() for o in (3, 5, 4)]
    [[0, 2], [1, 3], []]
    >>> [by_ordinal(np.array([3, 5, 5, -1]), 2)(o).tolist() for o in (3, 5, -1)]
    [[0], [1, 2], []]
    """
    block = idx[:width]
    if 0 < width <= len(idx) and len(idx) % width == 0 and block.min() >= 0 and block.max() < _NO_ORDINAL \
            and len(np.unique(block)) == width and (idx.reshape(-1, width) == block).all():
        place, n = {int(o): k for k, o in enumerate(block)}, len(idx)
        return lambda ordinal: np.arange(place[ordinal], n, width) if ordinal in place else np.zeros(0, np.int64)
    if len(idx) and (idx.min() < 0 or idx.max() >= _NO_ORDINAL):  # (no column has such an ordinal)
        idx = np.where((idx >= 0) & (idx < _NO_ORDINAL), idx, _NO_ORDINAL)
    order = np.argsort(idx.astype(np.int16), kind="stable")
    starts = np.concatenate([[0], np.cumsum(np.bincount(idx, minlength=_NO_ORDINAL + 1))])
    return lambda ordinal: order[starts[ordinal]:starts[ordinal + 1]] if 0 <= ordinal < _NO_ORDINAL else order[:0]


def _take_ascending(values: pa.ChunkedArray, at: np.ndarray) -> pa.Array:
    """``values[at]`` for ascending positions ``at``, chunk by chunk: Arrow's take on a chunked
    array of strings concatenates all its chunks first, at every call."""
    bounds = np.cumsum([0, *(len(c) for c in values.chunks)])
    cut = np.searchsorted(at, bounds)
    parts = [chunk.take(pa.array(at[cut[i]:cut[i + 1]] - bounds[i]))
             for i, chunk in enumerate(values.chunks) if cut[i + 1] > cut[i]]
    return pa.concat_arrays(parts) if parts else pa.array([], values.type)


class CellColumn:
    """One cell of every change: its ``text``, ``bin`` and ``name``, each taken from the
    segment's cells when first read (a take over all the segment's cells costs about as much as
    typing the column, and most columns need only their texts)."""

    def __init__(self, cells: Cells, at: np.ndarray, slot: pa.Array | None) -> None:
        # (at: the cells' positions, ascending; slot: per change, its cell's place in them, None:
        # each change has one, in order)
        self._cells, self._at, self._slot, self._taken = cells, at, slot, {}

    def _field(self, field: str) -> pa.Array:
        if field not in self._taken:
            values = _take_ascending(getattr(self._cells, field), self._at)
            self._taken[field] = values if self._slot is None else values.take(self._slot)
        return self._taken[field]

    @property
    def text(self) -> pa.Array:
        return self._field("text")

    @property
    def bin(self) -> pa.Array:
        return self._field("bin")

    @property
    def name(self) -> pa.Array:
        return self._field("name")


@dataclass
class Segment:
    """A segment's bronze rows (:func:`read_segments`, :func:`read_parts`), in bronze's order (not always ``_seq``'s)."""
    seq: pa.ChunkedArray
    op: pa.ChunkedArray
    commit_ts: pa.ChunkedArray
    images: dict[str, Cells]

    @property
    def n(self) -> int:
        return len(self.seq)


_CELL_FIELDS = (("idx", pa.int32()), ("text", pa.string()), ("bin", pa.binary()), ("name", pa.string()))


class _ImageParts:
    """One image's cells of a segment, batch by batch as they are read: only the fields typing
    reads are kept (not the cells' type texts; their names only ``with_name``), so a batch's
    other buffers are freed as the next is read."""

    def __init__(self, with_name: bool) -> None:
        self.fields = [(f, t) for f, t in _CELL_FIELDS if with_name or f != "name"]
        self.rows: list[np.ndarray] = []
        self.present: list[np.ndarray] = []
        self.parts: dict[str, list[pa.Array]] = {f: [] for f, _ in self.fields}

    def add(self, images: pa.Array, base: int) -> int:
        """Take a batch's images (its first row is change ``base``); the bytes kept."""
        self.rows.append(pc.list_parent_indices(images).to_numpy() + base)
        self.present.append(images.is_valid().to_numpy(zero_copy_only=False))
        flat = pc.list_flatten(images)
        kept = self.rows[-1].nbytes
        for f, typ in self.fields:
            part = flat.field(f) if flat.type.get_field_index(f) >= 0 else pa.nulls(len(flat), typ)
            self.parts[f].append(part)
            kept += part.nbytes
        return kept

    def cells(self) -> Cells:
        """The cells read (chunks of the batches' buffers: nothing is copied)."""
        columns = {f: pa.chunked_array(self.parts[f], type=t) for f, t in self.fields}
        rows = np.concatenate(self.rows) if self.rows else np.zeros(0, np.int64)
        name = columns.get("name", pa.chunked_array([pa.nulls(len(rows), pa.string())]))
        return Cells(rows, columns["idx"], columns["text"], columns["bin"], name,
                     np.concatenate(self.present) if self.present else np.zeros(0, bool))


def image_cells(images: pa.Array) -> Cells:
    """The cells of one image column (a list of cells per change, e.g. a record batch's
    ``after``), every field kept."""
    parts = _ImageParts(with_name=True)
    parts.add(images, 0)
    return parts.cells()


@dataclass(frozen=True)
class SegmentRead:
    """Which rows of bronze a segment is: ``db``.``table``'s with ``_seq`` above ``start`` (and
    below ``end``); ``with_name``: its cells' names are kept too (for value fixes)."""
    db: str
    table: str
    start: str
    end: str | None = None
    with_name: bool = True

    @property
    def where(self) -> pc.Expression:
        return ranges.arrow_filter(self.db, self.table, self.start, self.end)


class Unreadable(Exception):
    """Bronze's files lay the images' lists out otherwise than this module reads them (Spark's
    path then)."""


def _columns(reads: Sequence[SegmentRead]) -> list[str]:
    """The leaf columns a read of ``reads`` takes: the filter's, the change's, the cells' fields."""
    fields = [f for f, _ in _CELL_FIELDS if f != "name" or any(r.with_name for r in reads)]
    return ["db", "table", "_seq", "op", "commit_ts", *[f"{i}.list.element.{f}" for i in _IMAGES for f in fields]]


def read_segments(scan: Scan, reads: Sequence[SegmentRead], max_bytes: int | None = None) -> dict | None:
    """``{read: Segment}``: the rows of ``scan`` (bronze as the silver step reads it) of each
    segment, of their cells only the fields typing reads, in one pass over bronze's row groups:
    a row group that holds rows of several segments (tables' changes interleave in a binlog) is
    read once, not once per segment. None when their cells take more than ``max_bytes``
    (:data:`BIG_BYTES`) in all, or the files lay the lists out otherwise: each read by parts then
    (:func:`read_parts`), or Spark's path."""
    if not reads:
        return {}
    max_bytes = BIG_BYTES if max_bytes is None else max_bytes
    where = reads[0].where
    for r in reads[1:]:
        where = where | r.where
    columns = _columns(reads)
    parts, size = {r: _SegmentParts(r.with_name) for r in reads}, 0
    try:
        # (several segments: the row groups are chosen by any of them, each segment's rows kept
        # from them by its own filter, not by the union's first)
        for part in scan.parts(columns, where, rows=len(reads) == 1):
            if not set(_IMAGES) <= set(part.column_names):  # (a leaf path that names nothing is left out)
                return None
            for r, kept in parts.items():
                mine = part.filter(r.where) if len(reads) > 1 else part
                size += sum(kept.add(batch) for batch in mine.to_batches() if batch.num_rows)
            if size > max_bytes:
                return None
    except (KeyError, pa.ArrowInvalid):  # (lists laid out otherwise in the files)
        return None
    return {r: kept.segment() for r, kept in parts.items()}


def read_parts(scan: Scan, read: SegmentRead, part_bytes: int | None = None) -> Iterator[Segment]:
    """The rows of one segment as a series of segments, in bronze's order, each of whole record
    batches holding about ``part_bytes`` (:data:`CHUNK_BYTES`) of cells, more only when one batch
    does; what :func:`read_segments` gives for it, cut in parts. The next part is read in a
    thread while the caller folds this one (Parquet's decoding and the fold's NumPy work release
    the GIL), so the default part is half :data:`CHUNK_BYTES`: two are held at once. Raises
    :class:`Unreadable` as that returns None for the files' layout."""
    try:
        yield from read_ahead(segment_parts(_batches(scan, _columns([read]), read.where),
                                            part_bytes or CHUNK_BYTES // 2, with_name=read.with_name))
    except (KeyError, pa.ArrowInvalid) as e:  # (lists laid out otherwise in the files)
        raise Unreadable(f"bronze's image lists: {e}") from None


_END = object()


def read_ahead(items: Iterator) -> Iterator:
    """``items``, each next one taken in a thread while the caller works on the one given (what
    taking it raises is raised where the caller asks for it)."""
    with ThreadPoolExecutor(1, thread_name_prefix="silver-read-ahead") as pool:
        coming = pool.submit(next, items, _END)
        while (item := coming.result()) is not _END:
            coming = pool.submit(next, items, _END)
            yield item


def _batches(scan: Scan, columns: list[str], where: pc.Expression) -> Iterator[pa.RecordBatch]:
    for part in scan.parts(columns, where):
        if not set(_IMAGES) <= set(part.column_names):  # (a leaf path that names nothing is left out)
            raise Unreadable("bronze's files hold no image lists at the leaves read")
        yield from part.to_batches()


class _SegmentParts:
    """A segment's rows, batch by batch as they are read (see :func:`segment_of`)."""

    def __init__(self, with_name: bool) -> None:
        self.seqs: list[pa.Array] = []
        self.ops: list[pa.Array] = []
        self.stamps: list[pa.Array] = []
        self.images = {i: _ImageParts(with_name) for i in _IMAGES}
        self.n = 0

    def add(self, batch: pa.RecordBatch) -> int:
        """Take a batch of rows; the bytes kept."""
        size = 0
        for name, kept in (("_seq", self.seqs), ("op", self.ops), ("commit_ts", self.stamps)):
            kept.append(batch.column(name))
            size += kept[-1].nbytes
        size += sum(self.images[i].add(batch.column(i), self.n) for i in _IMAGES)
        self.n += batch.num_rows
        return size

    def segment(self) -> Segment:
        return Segment(pa.chunked_array(self.seqs, pa.string()), pa.chunked_array(self.ops, pa.string()),
                       pa.chunked_array(self.stamps, pa.timestamp("us", "UTC")),
                       {i: self.images[i].cells() for i in _IMAGES})


def segment_parts(batches, part_bytes: int, *, with_name: bool = True) -> Iterator[Segment]:
    """:func:`segment_of` of the batches, cut into segments of whole batches that hold about
    ``part_bytes`` of cells each (the last may hold less; none of no rows)."""
    kept, size = _SegmentParts(with_name), 0
    for batch in batches:
        if batch.num_rows:
            size += kept.add(batch)
            if size >= part_bytes:
                yield kept.segment()
                kept, size = _SegmentParts(with_name), 0
    if kept.n:
        yield kept.segment()


_CELL = pa.struct([(f, t) for f, t in _CELL_FIELDS])
ROWS = pa.schema([("_seq", pa.string()), ("op", pa.string()), ("commit_ts", pa.timestamp("us", "UTC")),
                  ("before", pa.list_(_CELL)), ("after", pa.list_(_CELL))])  # what segment_of_rows takes


def segment_of_rows(rows: pa.Table | Sequence[dict]) -> Segment:
    """A :class:`Segment` of bronze's rows (an Arrow table with :data:`ROWS`' columns, e.g.
    :func:`pipelines.silver.driver.fetch`'s, or those rows as dicts), every cell's field kept."""
    if not isinstance(rows, pa.Table):
        rows = pa.Table.from_pylist(list(rows), schema=ROWS)
    return segment_of(rows.select(list(ROWS.names)).to_batches(), with_name=True)


def segment_of(batches, max_bytes: int | None = None, *, with_name: bool = True) -> Segment | None:
    """A :class:`Segment` of record batches of bronze's ``_seq``, ``op``, ``commit_ts``,
    ``before`` and ``after``, in any order (the fold orders changes by ``_seq`` itself), keeping
    of the cells ``idx``, ``text``, ``bin`` (and ``name``: ``with_name``, for value fixes); None
    when that takes more than ``max_bytes``."""
    kept, size = _SegmentParts(with_name), 0
    for batch in batches:
        if batch.num_rows:
            size += kept.add(batch)
            if max_bytes is not None and size > max_bytes:
                return None
    return kept.segment()
