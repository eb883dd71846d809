"""Row images of a rows event body: insert/update/delete, and MySQL 8's
PARTIAL_UPDATE_ROWS (``binlog_row_value_options=PARTIAL_JSON``).

``decode_rows`` gets the body *after* the present-columns bitmaps and returns one
``(before, after)`` pair per row change: ``(None, after)`` for inserts,
``(before, None)`` for deletes, both for updates. Each image is a tuple of values
for the listed columns (see :mod:`.columns` for the value conventions).

Decoding first tries the optional C accelerator (:mod:`.accel`) when it is built
and handles every column of the layout, then the compiled decoders of
:mod:`.columns`; both are cached per table layout and present-column set. When the
accelerator declines an event (an odd value, bad bytes) the compiled decoder decodes
it; if that fails in any way, the event is decoded again with the reference
decoder, which raises the precise :class:`BinlogError`.

A partial update's after image (``sql/rpl_record.cc`` ``pack_row``/``unpack_row``)
starts with ``value_options`` (a packed integer, 0 or 1); when its
``PARTIAL_JSON_UPDATES`` bit is set a bitmap follows with one bit for every JSON
column of the table (in column order), set when that column is logged as a diff
vector (:func:`.jsonb.read_diff_vector`) instead of a value. The diffs are applied
to the JSON value of the before image; when the before image does not hold the
column, the value is a :class:`.jsonb.PartialJson` for the caller to apply.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, NamedTuple

from . import accel
from .columns import ColumnDecoding, column_specs, compile_row_decoder, decode_column, decode_row_reference, null_bitmap
from .constants import OP_DELETE, OP_INSERT, OP_UPDATE, ColumnType
from .errors import BinlogError, CorruptEvent, TruncatedEvent
from .wire import packed_int
from .jsonb import PartialJson, apply_diffs, parse_binary, read_diff_vector, to_text

PARTIAL_JSON_UPDATES = 1
_LEGACY_TEMPORAL = (ColumnType.TIME, ColumnType.DATETIME, ColumnType.TIMESTAMP)

_MAX_LAYOUTS = 512
_MAX_MAPS = 256


class _LayoutCache:
    """``build(table_map, present)`` results, cached on two levels: by the table map
    object (a strong reference is kept, so its id cannot be reused while cached) and
    by its layout, since servers log a fresh but identical TABLE_MAP before every
    statement."""

    def __init__(self, build: Callable):
        self.build = build
        self.by_layout: OrderedDict = OrderedDict()  # layout key -> {present: value}
        self.by_map: OrderedDict = OrderedDict()  # (id(table_map), present) -> (table_map, value)

    def get(self, table_map, present: tuple[int, ...]):
        key = (id(table_map), present)
        hit = self.by_map.get(key)
        if hit is not None and hit[0] is table_map:
            return hit[1]
        layout = _layout_key(table_map)
        per_present = self.by_layout.get(layout)
        if per_present is None:
            per_present = self.by_layout[layout] = {}
            if len(self.by_layout) > _MAX_LAYOUTS:
                self.by_layout.popitem(last=False)
        else:
            self.by_layout.move_to_end(layout)
        if present in per_present:
            value = per_present[present]
        else:
            value = per_present[present] = self.build(table_map, present)
        self.by_map[key] = (table_map, value)
        if len(self.by_map) > _MAX_MAPS:
            self.by_map.popitem(last=False)
        return value

    def clear(self) -> None:
        self.by_layout.clear()
        self.by_map.clear()


def _layout_key(tm) -> tuple:
    return (
        tm.column_types, tm.column_metas, tm.signedness, tm.column_charsets,
        tm.enum_values, tm.set_values,
    )


def _build_plan(table_map, present: tuple[int, ...]):
    try:
        specs = column_specs(table_map)
    except BinlogError:
        return None  # the Python decoders raise it, with the table named
    return accel.build_plan(specs, present)


_decoders = _LayoutCache(compile_row_decoder)
_plans = _LayoutCache(_build_plan)


def row_decoder(table_map, present: tuple[int, ...]) -> Callable:
    """The compiled decoder for ``table_map`` and ``present`` (cached)."""
    return _decoders.get(table_map, present)


def row_plan(table_map, present: tuple[int, ...]):
    """The plan of the compiled accelerator (:mod:`.accel`) for ``table_map`` and
    ``present``, or ``None`` when it does not handle that layout (cached)."""
    return _plans.get(table_map, present)


def clear_cache() -> None:
    _decoders.clear()
    _plans.clear()


_LOOPS: dict[tuple[str, tuple[int, ...]], Callable] = {}


def _loop(op: str, null_bytes: tuple[int, ...]) -> Callable:
    """The row loop for one op and null-bitmap sizes, compiled once: it reads each
    image's bitmap inline and calls the compiled body for that null pattern."""
    key = (op, null_bytes)
    fn = _LOOPS.get(key)
    if fn is not None:
        return fn
    lines = ["def loop(buf, end, gets, makes):", "    out = []", "    append = out.append", "    off = 0"]
    for j in range(len(null_bytes)):
        lines.append(f"    g{j} = gets[{j}]")
        lines.append(f"    m{j} = makes[{j}]")
    lines.append("    while off < end:")
    for j, nb in enumerate(null_bytes):
        bits = {0: "0", 1: "buf[off]", 2: "buf[off] | buf[off + 1] << 8"}.get(
            nb, f"int.from_bytes(buf[off:off + {nb}], 'little')")
        lines.append(f"        b = {bits}")
        lines.append(f"        r{j}, off = (g{j}(b) or m{j}(b))(buf, off + {nb})" if nb else
                     f"        r{j}, off = (g{j}(0) or m{j}(0))(buf, off)")
    pair = {OP_INSERT: "(None, r0)", OP_DELETE: "(r0, None)"}.get(op, "(r0, r1)")
    lines.append(f"        append({pair})")
    lines.append("    return out, off")
    ns: dict = {}
    exec(compile("\n".join(lines), f"<row loop {op} {null_bytes}>", "exec"), ns)
    fn = _LOOPS[key] = ns["loop"]
    return fn


def _fast_images(decoders: tuple[Callable, ...], buf: bytes, end: int, op: str) -> list[tuple]:
    """Decode consecutive row images into ``(before, after)`` pairs: one decoder for
    insert/delete, two (before, after) for update. No length checks (see module doc)."""
    null_bytes = tuple(d.null_bytes for d in decoders)
    if not any(null_bytes):
        raise CorruptEvent("row images with no columns")
    out, off = _loop(op, null_bytes)(
        buf, end, tuple(d.paths.get for d in decoders), tuple(d.make_path for d in decoders))
    if off != end:
        raise TruncatedEvent(off, end, "row images")
    return out


def _reference_images(decoders: tuple[Callable, ...], buf: bytes, end: int) -> list:
    out: list = []
    off = 0
    while off < end:
        start = off
        images = []
        for d in decoders:
            img, off = d.reference(buf, off)
            images.append(img)
        if off == start:
            raise CorruptEvent("row image with no columns")
        out.append(images[0] if len(images) == 1 else tuple(images))
    return out


def decode_rows(
    op: str,
    table_map,
    body,
    columns_before: tuple[int, ...],
    columns_after: tuple[int, ...],
    *,
    partial: bool = False,
    event_type: int,
) -> tuple[tuple[tuple | None, tuple | None], ...]:
    """All row changes of a rows event body (the bytes after the column bitmaps).

    ``op`` is ``"insert"``, ``"update"`` or ``"delete"``; ``partial`` is True for
    PARTIAL_UPDATE_ROWS (type 39). ``event_type`` is only used in error messages.
    """
    if not len(body):
        return ()
    try:
        if partial:
            if op != OP_UPDATE:
                raise CorruptEvent(f"partial rows event (type {event_type}) for a {op}")
            return _decode_partial(table_map, bytes(body), columns_before, columns_after)
        if op == OP_INSERT:
            presents = (columns_after,)
        elif op == OP_DELETE:
            presents = (columns_before,)
        elif op == OP_UPDATE:
            presents = (columns_before, columns_after)
        else:
            raise CorruptEvent(f"unknown row operation {op!r}")
        if accel.ACCELERATED:
            plans = tuple(_plans.get(table_map, p) for p in presents)
            if None not in plans:
                try:
                    return accel.speedups.decode_rows(body, accel.OPS[op], *plans)
                except accel.Fallback:
                    pass  # the Python decoders give the value or the precise error
        buf = bytes(body)
        end = len(buf)
        decoders = tuple(row_decoder(table_map, p) for p in presents)
        try:
            return tuple(_fast_images(decoders, buf, end, op))
        except UnicodeDecodeError:  # text not valid in its charset: kept as InvalidText there
            return tuple(_as_pairs(_reference_images(decoders, buf, end), op))
        except Exception as first:  # struct.error, IndexError, ...
            _retry(decoders, buf, end, first)
    except BinlogError as e:
        e.message = f"{e.message} (rows event type {event_type}, table {table_map.schema}.{table_map.table})"
        if any(t in _LEGACY_TEMPORAL and m == 0 for t, m in zip(table_map.column_types, table_map.column_metas)):
            e.message += (
                "; the table has TIME/DATETIME/TIMESTAMP columns of the old type codes, which may be "
                "MariaDB 5.3 fractional formats (mysql56_temporal_format=OFF) whose precision the table "
                "map does not carry: pass it with columns.override_metas()"
            )
        e.args = (e.message,)
        raise


class ImageCells(NamedTuple):
    """One image of every row of a rows event as cells, row-major (row ``r``, column ``j`` is cell
    ``r * width + j``), in Arrow-ready buffers: ``text_lens``/``bin_lens`` are int32 lengths per
    cell, -1 where the cell has no text (bytes) or no bytes (text); both -1 is SQL NULL. ``text``
    is the cells' UTF-8 :func:`~.values.canonical_text` (the column's fractional digits)
    concatenated, ``bin`` their bytes."""

    text_lens: bytes
    text: bytes
    bin_lens: bytes
    bin: bytes


class RowCells(NamedTuple):
    """The row images of a rows event as cells (:func:`decode_cells`); an absent image is None."""

    rows: int
    before: ImageCells | None
    after: ImageCells | None


def decode_cells(op: str, table_map, body, columns_before: tuple[int, ...],
                 columns_after: tuple[int, ...]) -> RowCells | None:
    """The rows of a (not partial) rows event body as :class:`RowCells`, written by the compiled
    accelerator without a Python value per cell; None when it does not take the event (not built,
    a layout it leaves to Python, or a value it declines: a zero date, YEAR 0, text not valid in its
    charset, bad bytes): :func:`decode_rows` then gives the values, or the precise error."""
    if not accel.ACCELERATED or not len(body) or op not in accel.OPS:
        return None
    presents = {OP_INSERT: (columns_after,), OP_DELETE: (columns_before,)}.get(op, (columns_before, columns_after))
    plans = tuple(_plans.get(table_map, p) for p in presents)
    if None in plans:
        return None
    try:
        rows, before, after = accel.speedups.decode_cells(body, accel.OPS[op], *plans)
    except accel.Fallback:
        return None
    return RowCells(rows, None if before is None else ImageCells(*before), None if after is None else ImageCells(*after))


def _as_pairs(images: list, op: str) -> list[tuple]:
    """:func:`_reference_images` in :func:`_fast_images`' form: ``(before, after)`` pairs."""
    if op == OP_INSERT:
        return [(None, img) for img in images]
    if op == OP_DELETE:
        return [(img, None) for img in images]
    return images


def _retry(decoders, buf: bytes, end: int, first: Exception) -> None:
    """Re-decode with the reference decoders: they raise the precise error. If they
    succeed where the fast path failed, the two disagree: report it, never guess."""
    _reference_images(decoders, buf, end)
    raise CorruptEvent(f"compiled row decoder failed where the reference decoder did not: {first!r}") from first


# -- PARTIAL_UPDATE_ROWS ---------------------------------------------------------------


def _decode_partial(table_map, buf: bytes, columns_before, columns_after) -> tuple:
    dec_b = row_decoder(table_map, columns_before)
    dec_a = row_decoder(table_map, columns_after)
    specs: tuple[ColumnDecoding, ...] = dec_b.specs
    json_cols = [s.index for s in specs if s.type == ColumnType.JSON]
    out = []
    off, end = 0, len(buf)
    while off < end:
        raw_json: dict[int, bytes] = {}

        def keep_json(spec, b, start, stop, _raw=raw_json):
            if spec.type == ColumnType.JSON:
                n = spec.meta
                _raw[spec.index] = bytes(b[start + n:stop])

        before, off = decode_row_reference(specs, columns_before, buf, off, hook=keep_json)
        options, off = packed_int(buf, off, "value_options")
        if options > PARTIAL_JSON_UPDATES:
            raise CorruptEvent(f"unknown value_options {options} in a partial update")
        partial_cols: set[int] = set()
        if options & PARTIAL_JSON_UPDATES:
            bits, off = null_bitmap(buf, off, len(json_cols), "partial JSON bitmap")
            partial_cols = {c for k, c in enumerate(json_cols) if bits >> k & 1}
        if partial_cols:
            after, off = _partial_after(specs, columns_after, buf, off, partial_cols,
                                        dict(zip(columns_before, before)), raw_json)
        else:
            after, off = decode_row_reference(specs, columns_after, buf, off)
        if off > end:
            raise TruncatedEvent(off - end, 0, "row image")
        out.append((before, after))
    return tuple(out)


def _partial_after(specs, present, buf: bytes, off: int, partial_cols: set[int],
                   before_values: dict[int, Any], raw_json: dict[int, bytes]) -> tuple[tuple, int]:
    nulls, off = null_bitmap(buf, off, len(present))
    values = []
    for k, i in enumerate(present):
        if nulls >> k & 1:
            values.append(None)
            continue
        spec = specs[i]
        if i not in partial_cols:
            v, off = decode_column(spec, buf, off)
            values.append(v)
            continue
        diffs, off = read_diff_vector(buf, off)
        if i in raw_json:
            values.append(to_text(apply_diffs(parse_binary(raw_json[i]), diffs)))
        elif i in before_values:  # the before image logged NULL: MySQL rejects the diff
            raise CorruptEvent(f"{spec.name}: JSON diff for a NULL before value")
        else:
            values.append(PartialJson(diffs))
    return tuple(values), off


def image_as_dict(table_map, columns: tuple[int, ...], values) -> dict | None:
    """A row image keyed by column name (``table_map.column_names``), or ``"@1"``,
    ``"@2"``… (1-based, as mysqlbinlog prints them) when names are unknown.

    >>> image_as_dict(tm, (0, 2), (1, "x"))   # doctest: +SKIP
    {'id': 1, 'name': 'x'}
    """
    if values is None:
        return None
    names = table_map.column_names
    return {
        (names[i] if names and i < len(names) and names[i] else f"@{i + 1}"): v
        for i, v in zip(columns, values)
    }
