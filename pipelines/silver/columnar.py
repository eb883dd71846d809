"""The driver's typing and fold in Arrow, column by column: every segment the driver applies is
typed here (:func:`typed_images`), small (:mod:`pipelines.silver.driver_fold`) or big
(:mod:`pipelines.silver.big_segments`), and a keyed table's changes are folded here
(:func:`fold_keyed`, :func:`classify`); a keyless table's by :mod:`pipelines.silver.keyless`.

A segment of hundreds of thousands of changes costs Spark's path several passes (typing, key
events, latest per key, classification) and its MERGE. Here a segment's flat cells
(:mod:`pipelines.silver.segment_cells`) are:

* typed a column at a time (:func:`typed_column`) by Arrow's casts, where a cast gives exactly the
  value :mod:`pipelines.silver.typed_values` gives (ENUM numbers and signedness fixed first,
  :func:`_fixed`); a column Arrow cannot take that way (a SET number, BIT, a padded BINARY, a cast
  that fails) is typed by that module's converter, value by value;
* folded with Arrow's sort and group-by: per key, the change with the largest ``_seq`` (an upsert
  before a delete on a tie), classified against silver's stored ``_seq`` by a join
  (:func:`fold_keyed`, :func:`classify`), then written by :func:`pipelines.silver.driver_writes.write`.
  A big segment of any size is read, typed and folded in parts of bounded size, the parts' latest
  events folded again (:func:`latest_per_key`).

The semantics are :func:`pipelines.silver.driver_fold.apply_small`'s (which folds partial images
and keyless identities over this typing), and a value the converters would not take raises
:class:`~pipelines.silver.typed_values.NotCanonical` here too, before anything is written: the caller
then takes Spark's path. ``tests/test_columnar.py`` checks the casts against the converters value
for value, and big segments (whole and read by parts) against Spark's path table for table.
"""
from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.bronze.schema import INSERT_OPS, OPS, UPSERT_OPS
from pipelines.delta_io import spark_type_to_arrow
from pipelines.schema.typemap import ColumnSpec, decimal_type, spark_type, type_rule
from pipelines.silver.segment_cells import CellColumn, Cells, Segment, segment_of_rows
from pipelines.silver.columns import DELETE, UPSERT
from pipelines.silver.driver import cell_fix
from pipelines.silver.driver_writes import Target
from pipelines.silver import ranges
from pipelines.silver.typed_values import (
    DATE_TEXT, DATETIME_TEXT, DEC, FLOAT_TEXT, INT_SILVER, INT_TEXT, RANGES, NotCanonical, converter,
)

# -- typing ------------------------------------------------------------------------------

class _Fallback(Exception):
    """This column is typed value by value (typed_values' converter) instead."""


def _all(mask: pa.Array) -> bool:
    return pc.all(mask).as_py() in (True, None)  # (None: no value at all)


def _matches(text: pa.Array, pattern: re.Pattern) -> None:
    """Every value matches ``pattern`` (a ``re.match`` pattern ending in ``\\Z``), or :class:`_Fallback`."""
    if not _all(pc.match_substring_regex(text, "^" + pattern.pattern.removesuffix("\\Z") + "$")):
        raise _Fallback


def _cast(values: pa.Array, to: pa.DataType) -> pa.Array:
    try:
        return pc.cast(values, to)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise _Fallback from None


def _integer(text: pa.Array, kind: str) -> tuple[pa.Array, int]:
    _matches(text, INT_TEXT)
    if kind == "dec20":
        return _cast(text, pa.decimal128(20, 0)), 0
    values = _cast(text, pa.int64())
    lo, hi = RANGES[kind]
    bounds = pc.min_max(values)
    if bounds["min"].is_valid and (bounds["min"].as_py() < lo or bounds["max"].as_py() > hi):
        raise _Fallback  # (the converter names the value)
    return values, 0


def _decimal(spec: ColumnSpec, text: pa.Array) -> tuple[pa.Array, int]:
    dt = decimal_type(spec)
    if not hasattr(dt, "precision"):
        return text, 0
    _matches(text, DEC)
    return _cast(text, pa.decimal128(dt.precision, dt.scale)), 0  # (a text that needs rounding: value by value)


def _float(text: pa.Array) -> tuple[pa.Array, int]:
    _matches(text, FLOAT_TEXT)
    return _cast(text, pa.float64()), 0


def _zero_dated(text: pa.Array, pattern: re.Pattern, to: pa.DataType) -> tuple[pa.Array, int]:
    _matches(text, pattern)
    zero = pc.starts_with(text, "0000")
    zeros = pc.sum(zero).as_py() or 0
    kept = pc.if_else(zero, pa.scalar(None, pa.string()), text)
    return _cast(kept, to), zeros  # (an invalid date fails the cast: value by value, nulled and counted there)


def _year(text: pa.Array) -> tuple[pa.Array, int]:
    values, _ = _integer(text, "short")
    zero = pc.equal(values, 0)
    return pc.if_else(zero, pa.scalar(None, pa.int64()), values), pc.sum(zero).as_py() or 0


def _blob(text: pa.Array, data: pa.Array) -> tuple[pa.Array, int]:
    if not _all(pc.or_kleene(pc.is_null(text), pc.is_valid(data))):
        raise _Fallback  # (a text without bytes: the converter refuses it)
    return data, 0


def _padded(spec: ColumnSpec, text: pa.Array, data: pa.Array) -> tuple[pa.Array, int]:
    values, _ = _blob(text, data)
    if spec.length is not None and not _all(pc.greater_equal(pc.binary_length(values), spec.length)):
        raise _Fallback
    return values, 0


def _vectorized(spec: ColumnSpec, text: pa.Array, column: CellColumn) -> tuple[pa.Array, int]:
    """``text`` (the column's texts, fixed) typed; the cells' bytes read from ``column`` only
    by the types that take them."""
    name, rule = type_rule(spec)
    if name in INT_SILVER:
        signed, unsigned = INT_SILVER[name]
        return _integer(text, unsigned if spec.unsigned else signed)
    if name == "decimal":
        return _decimal(spec, text)
    if name in ("float", "double"):
        return _float(text)
    if name == "date":
        return _zero_dated(text, DATE_TEXT, pa.date32())
    if name == "datetime":
        return _zero_dated(text, DATETIME_TEXT, pa.timestamp("us"))
    if name == "timestamp":  # (the text is UTC)
        values, zeros = _zero_dated(text, DATETIME_TEXT, pa.timestamp("us"))
        return _cast(values, pa.timestamp("us", "UTC")), zeros
    if name == "year":
        return _year(text)
    if name == "binary":
        return _padded(spec, text, column.bin)
    if name == "bit":
        raise _Fallback
    return _blob(text, column.bin) if rule.from_bin else (text, 0)


_ASCII_DIGITS = "^[0-9]+$"


def _fixed(fix: tuple, column: CellColumn) -> pa.Array:
    """The column's texts completed by ``fix`` as :func:`pipelines.schema.resolve.apply_fix` completes them,
    for the fixes of ENUM numbers and of signedness; :class:`_Fallback` for the others, and for any
    text the two could read differently (value by value, the converter raises where it must)."""
    from pipelines.schema.resolve import FIX_ENUM, FIX_UNSIGNED

    kind, text = fix[0], column.text
    if kind == FIX_ENUM:  # (a cell with a name is a member already: FULL metadata)
        unnamed = pc.is_null(column.name)
        if not _all(pc.or_(pc.invert(unnamed), pc.fill_null(pc.string_is_ascii(text), True))):
            raise _Fallback  # (str.isdigit knows digits other than ASCII's: value by value)
        number = pc.and_(unnamed, pc.fill_null(pc.match_substring_regex(text, _ASCII_DIGITS), False))
        index = _cast(pc.if_else(number, text, pa.scalar("0")), pa.int64())
        if pc.max(index).as_py() is not None and pc.max(index).as_py() > len(fix[1]):
            raise _Fallback  # (out of the members: the fix raises)
        members = pa.array(["", *fix[1]], pa.string())
        return pc.if_else(number, members.take(index), text)
    if kind == FIX_UNSIGNED:
        negative = pc.fill_null(pc.starts_with(text, "-"), False)
        if not _all(pc.or_(pc.invert(negative), pc.fill_null(pc.match_substring_regex(text, "^-[0-9]{1,19}$"), False))):
            raise _Fallback
        shifted = pc.add(_cast(pc.if_else(negative, text, pa.scalar("0")), pa.decimal128(20, 0)),
                         pa.scalar(1 << fix[1], pa.decimal128(21, 0)))
        return pc.if_else(negative, pc.cast(shifted, pa.string()), text)
    raise _Fallback


VECTORIZE_FROM = 64  # changes of a segment from which typing takes Arrow's casts (fewer: value by value)


def typed_column(spec: ColumnSpec, to: pa.DataType, column: CellColumn, fix: tuple | None = None) -> tuple[pa.Array, int]:
    """One column's cells as silver's values of Arrow type ``to``, and the zero dates nulled:
    what the column's :func:`~pipelines.silver.typed_values.converter` gives for them, value for value
    (``fix``: the resolution's value fix of the column). Raises :class:`NotCanonical` where it would."""
    try:
        text = _fixed(fix, column) if fix is not None else column.text
        values, zeros = _vectorized(spec, text, column)
        return (values if values.type == to else pc.cast(values, to, safe=not pa.types.is_floating(to))), zeros
    except _Fallback:
        pass
    return _by_value(spec, to, column.text.to_pylist(), column.bin.to_pylist(), column.name.to_pylist(), fix)


def _by_value(spec: ColumnSpec, to: pa.DataType, texts: Sequence, data: Sequence, names: Sequence,
              fix: tuple | None) -> tuple[pa.Array, int]:
    """A column's cells (``texts``, ``data``, ``names``: per change, None where it has no cell)
    typed value by value by the converter."""
    convert, complete = converter(spec), (cell_fix(fix) if fix is not None else None)
    out, zeros = [], 0
    for t, b, named in zip(texts, data, names):
        if complete is not None and (t is not None or b is not None):
            t, b = complete(t, b, named is not None)
        value, zero = convert(t, b)
        out.append(value)
        zeros += zero
    try:
        return pa.array(out, type=to), zeros
    except (pa.ArrowException, TypeError, ValueError) as e:
        raise NotCanonical(f"column {spec.name!r}: {e}") from None


def _few_typed(cells: Cells, n: int, columns: dict[int, tuple]) -> dict[int, tuple[pa.Array, int]]:
    """The cells of a few changes typed value by value (:func:`_by_value`): ``columns`` maps a
    column's number to its ``(spec, ordinal, Arrow type, fix)``. The cells are read once into
    Python, not taken per column (each of Arrow's calls costs more than typing a value)."""
    slot = {ordinal: i for i, (_, ordinal, _, _) in columns.items()}
    at = {i: [None] * n for i in columns}
    for k, (row, ordinal) in enumerate(zip(cells.row.tolist(), cells.idx.to_pylist())):
        i = slot.get(ordinal)
        if i is not None:
            at[i][row] = k
    texts, data, names = cells.text.to_pylist(), cells.bin.to_pylist(), cells.name.to_pylist()
    out = {}
    for i, (spec, _, to, fix) in columns.items():
        ks = at[i]
        out[i] = _by_value(spec, to, [None if k is None else texts[k] for k in ks],
                           [None if k is None else data[k] for k in ks], [None if k is None else names[k] for k in ks], fix)
    return out


def typed_row(specs: Sequence[ColumnSpec], image: Sequence[dict] | None,
              fixes: dict[int, tuple] | None = None) -> tuple[tuple | None, int]:
    """One row image (its cells: ``idx``, ``text``, ``bin``, ``name``) typed as a segment's images
    are: its values in spec order (None: a column it lacks; no image: None), and the zero dates
    nulled. Raises :class:`NotCanonical` where a segment's typing would.

    >>> typed_row([ColumnSpec("id", "int"), ColumnSpec("d", "date")],
    ...           [{"idx": 0, "text": "7", "bin": None}, {"idx": 1, "text": "0000-00-00", "bin": None}])
    ((7, None), 1)
    """
    if image is None:
        return None, 0
    cells = segment_of_rows([{"_seq": "0", "op": "c", "after": list(image)}]).images["after"]
    ordinals = [i if spec.ordinal is None else spec.ordinal for i, spec in enumerate(specs)]
    typed = _few_typed(cells, 1, {i: (spec, o, spark_type_to_arrow(spark_type(spec)), (fixes or {}).get(o))
                                  for i, (spec, o) in enumerate(zip(specs, ordinals))})
    return tuple(typed[i][0][0].as_py() for i in range(len(specs))), sum(z for _, z in typed.values())


# -- folding -----------------------------------------------------------------------------

def _checked(seg: Segment) -> None:
    """What :func:`pipelines.silver.driver_fold._typed` refuses: an unknown op, a NULL ``_seq``, a
    change without the image it needs."""
    op = seg.op
    if not _all(pc.is_in(op, pa.array(OPS))) or op.null_count or seg.seq.null_count:
        raise NotCanonical("a change with an unknown op or without _seq")
    after, before = seg.images["after"].present, seg.images["before"].present
    is_c = pc.is_in(op, pa.array(INSERT_OPS)).to_numpy(zero_copy_only=False)
    is_d = pc.equal(op, "d").to_numpy(zero_copy_only=False)
    if not after[~is_d].all() or not before[~is_c].all():
        raise NotCanonical("a change without the image it needs")


def typed_images(seg: Segment, specs: Sequence[ColumnSpec], t: Target,
                 fixes: dict[int, tuple]) -> tuple[dict[str, dict[int, pa.Array]], int]:
    """Per image, per spec that a silver value column holds, its typed values for every change;
    and the zero dates nulled. Checks the changes first (:func:`_checked`); the segment's cells
    are released once typed (its ``images`` emptied)."""
    _checked(seg)
    zeros, typed = 0, {}
    arrow_types = [spark_type_to_arrow(f.dataType) for f in t.values.fields]
    wanted = {i for i in t.value_idx if i is not None}
    columns = {}
    for i in sorted(wanted):
        ordinal = i if specs[i].ordinal is None else specs[i].ordinal
        columns[i] = (specs[i], ordinal, arrow_types[t.value_idx.index(i)], fixes.get(ordinal))
    for image, cells in seg.images.items():
        if seg.n < VECTORIZE_FROM:
            done = _few_typed(cells, seg.n, columns)
        else:
            done = {i: typed_column(spec, to, cells.column(ordinal, seg.n), fix=fix)
                    for i, (spec, ordinal, to, fix) in columns.items()}
        typed[image] = {i: values for i, (values, _) in done.items()}
        zeros += sum(z for _, z in done.values())
    seg.images.clear()  # (typed: released before the events are built)
    return typed, zeros


def fold_keyed(seg: Segment, specs: Sequence[ColumnSpec], t: Target, fixes: dict[int, tuple]) -> tuple[pa.Table, int]:
    """The segment's latest event per key (``_seq`` order; an upsert before a delete on a tie),
    as a table of silver's value columns, ``_seq``, ``action``, ``op`` and ``commit_ts``; and the
    zero dates nulled in its typed images. The segment's cells are released once typed
    (:func:`typed_images`): a big segment's memory goes to one copy at a time. The latest
    events of a segment's parts, folded again by :func:`latest_per_key`, are the segment's."""
    n = seg.n
    typed, zeros = typed_images(seg, specs, t, fixes)
    op = seg.op
    upsert = pc.is_in(op, pa.array(UPSERT_OPS))
    changed = pa.array(np.zeros(n, bool))
    for k in t.key_spec:
        a, b = typed["after"][k], typed["before"][k]
        differs = pc.fill_null(pc.not_equal(a, b), pc.xor(pc.is_null(a), pc.is_null(b)))
        changed = pc.or_(changed, differs)
    delete = pc.or_(pc.equal(op, "d"), pc.and_(pc.equal(op, "u"), changed))

    def events(image: str, mask: pa.Array, action: str, ops: pa.Array) -> pa.Table:
        rows = image_rows(seg, typed[image], mask, t, ops)
        return rows.append_column("_action", pa.array([action] * rows.num_rows, pa.string()))
    ev = pa.concat_tables([events("after", upsert, UPSERT, op),
                           events("before", delete, DELETE, pa.array(["d"] * n, pa.string()))])
    typed.clear()  # (the images' typed columns are in the events now)
    return latest_events(ev, t), zeros


def image_rows(seg: Segment, typed: dict[int, pa.Array], mask: pa.Array, t: Target, ops: pa.Array) -> pa.Table:
    """The changes of ``mask`` as rows of one of their images (``typed``: :func:`typed_images`'
    columns of it): silver's value columns ``_v{j}`` (NULL where the specs lack one), ``_seq``,
    ``_op`` (``ops``) and ``_ts``."""
    k = _count(mask)
    columns = [pc.filter(typed[i], mask) if i is not None else pa.nulls(k, spark_type_to_arrow(f.dataType))
               for i, f in zip(t.value_idx, t.values.fields)]
    return pa.Table.from_arrays([*columns, pc.filter(seg.seq, mask), pc.filter(ops, mask), pc.filter(seg.commit_ts, mask)],
                                names=[*[f"_v{j}" for j in range(len(columns))], "_seq", "_op", "_ts"])


def key_columns(t: Target) -> list[str]:
    return [f"_v{t.values.fieldNames().index(k)}" for k in t.keys]


def events_table(events: Sequence[tuple], t: Target) -> pa.Table:
    """Events ``(seq, action, op, commit_ts, values in silver's value-column order)`` as
    :func:`fold_keyed` builds them from a segment's images."""
    arrow_types = [spark_type_to_arrow(f.dataType) for f in t.values.fields]
    columns = [pa.array([e[4][j] for e in events], to) for j, to in enumerate(arrow_types)]
    return pa.Table.from_arrays([*columns, *(pa.array([e[i] for e in events], to) for i, to in
                                             ((0, pa.string()), (1, pa.string()), (2, pa.string()),
                                              (3, pa.timestamp("us", "UTC"))))],
                                names=[*[f"_v{j}" for j in range(len(columns))], "_seq", "_action", "_op", "_ts"])


def latest_events(ev: pa.Table, t: Target) -> pa.Table:
    """Of a segment's events (:func:`fold_keyed`'s, :func:`events_table`'s), the latest per key
    (:func:`latest_per_key`); :class:`NotCanonical` for a NULL or floating-point key."""
    keys = key_columns(t)
    if any(ev.column(k).null_count for k in keys):
        raise NotCanonical("a change with a NULL key")  # (Spark's path names the error)
    if any(pa.types.is_floating(ev.schema.field(k).type) for k in keys):
        raise NotCanonical("a floating-point key (-0.0 and 0.0 are one key)")
    return latest_per_key(ev, t)


def latest_per_key(ev: pa.Table, t: Target) -> pa.Table:
    """Of events (:func:`fold_keyed`'s columns), the latest per key: the largest ``_seq``, a
    delete before an upsert on a tie; in ``_seq`` order."""
    keys = key_columns(t)
    # sorted and grouped: only the keys, the order and the event's number, not its values
    order = pa.table({**{k: ev.column(k) for k in keys}, "_seq": ev.column("_seq"), "_action": ev.column("_action"),
                      "_e": pa.array(np.arange(ev.num_rows))})
    order = order.take(pc.sort_indices(order, [("_seq", "ascending"), ("_action", "ascending")]))  # "delete" < "upsert"
    order = order.append_column("_i", pa.array(np.arange(order.num_rows)))
    last = order.group_by(keys, use_threads=False).aggregate([("_i", "max")]).column("_i_max")
    return ev.take(order.column("_e").take(last.take(pc.sort_indices(last))))


def classify(latest: pa.Table, t: Target, stored: pa.Table | None, delete_mode: str) -> tuple[pa.Table, dict]:
    """The MERGE source (:attr:`Target.source_schema`) of the latest events, classified against
    silver's stored ``(keys, _seq)`` as :func:`pipelines.silver.plan.plan_keyed` does; and the counts."""
    keys = key_columns(t)
    latest = latest.append_column("_i", pa.array(np.arange(latest.num_rows)))  # (its order, kept through the join)
    upsert = pc.equal(latest.column("_action"), UPSERT)
    if stored is None or not stored.num_rows:
        have = pa.array(np.zeros(latest.num_rows, bool))
        newer = pa.array(np.ones(latest.num_rows, bool))
    else:
        probe = pa.Table.from_arrays([*[stored.column(k).cast(latest.schema.field(c).type) for k, c in zip(t.keys, keys)],
                                      stored.column(t.own.seq).cast(pa.string()),  # (delta-rs may read string_view)
                                      pa.array(np.ones(stored.num_rows, bool))],
                                     names=[*keys, "_stored", "_have"])
        joined = latest.join(probe, keys=keys, join_type="left outer", use_threads=False)
        latest = joined.take(pc.sort_indices(joined, [("_i", "ascending")]))
        have = pc.is_valid(latest.column("_have"))
        stored_seq = latest.column("_stored")
        newer = pc.fill_null(pc.or_kleene(pc.is_null(stored_seq), pc.greater(latest.column("_seq"), stored_seq)), True)
        upsert = pc.equal(latest.column("_action"), UPSERT)
    missing = pc.invert(have)
    inserted = pc.and_(missing, upsert)
    deleted = pc.or_(pc.and_(missing, pc.and_(pc.invert(upsert), pa.scalar(delete_mode == "soft"))),
                     pc.and_(have, pc.and_(newer, pc.invert(upsert))))
    updated = pc.and_(have, pc.and_(newer, upsert))
    kept = pc.or_(inserted, pc.or_(deleted, updated))
    counts = {"inserted": _count(inserted), "updated": _count(updated), "deleted": _count(deleted)}
    counts["unchanged"] = latest.num_rows - sum(counts.values())
    return merge_source(latest.filter(kept), t), counts


def merge_source(latest: pa.Table, t: Target) -> pa.Table:
    """Latest events (:func:`fold_keyed`'s columns) as the MERGE source (:attr:`Target.source_schema`)."""
    action = latest.column("_action")
    schema = t.source_schema
    arrays = [*[latest.column(f"_v{j}") for j in range(len(t.values.fields))], latest.column("_seq"),
              latest.column("_op"), latest.column("_ts"), pc.equal(action, DELETE), action]
    arrow = pa.Table.from_arrays(arrays, names=schema.fieldNames())
    return arrow.cast(pa.schema([pa.field(f.name, spark_type_to_arrow(f.dataType)) for f in schema.fields]))


def _count(mask: pa.Array) -> int:
    return int(pc.sum(mask).as_py() or 0)


@contextlib.contextmanager
def arrow_refusals():
    """What Arrow refuses to do with a segment (a cast, group or join on a type it does not take
    there) raises :class:`NotCanonical`: Spark's path applies the segment."""
    try:
        yield
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise NotCanonical(f"Arrow cannot fold this segment: {e}") from None


def above_watermark(seg: Segment, mark: str | None) -> Segment:
    """The segment's changes above the table's watermark ``mark`` (:func:`pipelines.silver.ranges.arrow_above`)."""
    if mark is None or not seg.n:
        return seg
    keep = ranges.arrow_above(seg.seq, mark).to_numpy(zero_copy_only=False)
    return seg if keep.all() else _only(seg, keep)


def _only(seg: Segment, keep: np.ndarray) -> Segment:
    """The segment's changes where ``keep`` (the watermark passed those: the first ones are dropped)."""
    rank = np.cumsum(keep) - 1
    images = {}
    for image, cells in seg.images.items():
        mine = keep[cells.row]
        images[image] = Cells(rank[cells.row[mine]], cells.idx.filter(pa.array(mine)), cells.text.filter(pa.array(mine)),
                              cells.bin.filter(pa.array(mine)), cells.name.filter(pa.array(mine)), cells.present[keep])
    mask = pa.array(keep)
    return Segment(seg.seq.filter(mask), seg.op.filter(mask), seg.commit_ts.filter(mask), images)
