"""Silver's typing, in Arrow: bronze's cells -> silver's values, a column at a time. The one
typing of every change silver applies: on the driver (small and big segments,
:mod:`pipelines.silver.columnar`) and inside Spark's tasks (:mod:`pipelines.silver.spark_typing`
runs :func:`typed_batch` in ``mapInArrow``).

* :func:`typed_column`: one column's cells typed by Arrow's casts, where a cast gives exactly the
  value :mod:`pipelines.silver.typed_values` gives (ENUM numbers and signedness fixed first,
  :func:`_fixed`); a column Arrow cannot take that way (a SET number, BIT, a padded BINARY, a cast
  that fails) is typed by that module's converter, value by value (:func:`_by_value`), as are
  the columns of a few changes (fewer than :data:`VECTORIZE_FROM`: each Arrow call costs more
  than typing a value);
* :func:`typed_cells`: the columns of one image of a segment; :func:`typed_row`: one image;
* :func:`typed_batch`: the images of a record batch of bronze rows replaced by structs of their
  typed values, and the zero dates nulled counted per row.

A value that does not convert raises :class:`~pipelines.silver.typed_values.NotCanonical` naming
the column, its type and the text (never a silent NULL); a zero or invalid date becomes NULL
and is counted. ``tests/test_columnar.py`` checks the casts against the converters value for
value; ``tests/test_typemap.py`` every type of the mapping against hand-written values.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.arrow_pool import side_by_side
from pipelines.bronze.schema import PARTIAL_JSON_MARK
from pipelines.delta_io import spark_type_to_arrow
from pipelines.schema import resolve as schema_resolve
from pipelines.schema.typemap import ZERO_DATES_COL, ColumnSpec, decimal_type, silver_schema, spark_type, type_rule
from pipelines.silver.segment_cells import CellColumn, Cells, image_cells, segment_of_rows
from pipelines.silver.text_checks import all_match
from pipelines.silver.typed_values import (
    DATE_TEXT, DATETIME_TEXT, DEC, FLOAT_TEXT, INT_SILVER, INT_TEXT, RANGES, NotCanonical, converter,
)

class _Fallback(Exception):
    """This column is typed value by value (typed_values' converter) instead."""


def every(mask: pa.Array) -> bool:
    """True when ``mask`` holds no false (None: no value at all)."""
    return pc.all(mask).as_py() in (True, None)  # (None: no value at all)


def _matches(text: pa.Array, pattern: re.Pattern) -> None:
    """Every value matches ``pattern`` (a ``re.match`` pattern ending in ``\\Z``), or :class:`_Fallback`:
    checked over the bytes where :mod:`pipelines.silver.text_checks` knows the form, else by RE2."""
    known = all_match(text, pattern)
    if known is None:
        known = every(pc.match_substring_regex(text, "^" + pattern.pattern.removesuffix("\\Z") + "$"))
    if not known:
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
    if not every(pc.or_kleene(pc.is_null(text), pc.is_valid(data))):
        raise _Fallback  # (a text without bytes: the converter refuses it)
    return data, 0


def _padded(spec: ColumnSpec, text: pa.Array, data: pa.Array) -> tuple[pa.Array, int]:
    values, _ = _blob(text, data)
    if spec.length is not None and not every(pc.greater_equal(pc.binary_length(values), spec.length)):
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
    if name == "json" and pc.any(pc.equal(column.bin, pa.scalar(PARTIAL_JSON_MARK, pa.binary()))).as_py():
        raise _Fallback  # (diffs, not the document: the converter refuses them)
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
        if not every(pc.or_(pc.invert(unnamed), pc.fill_null(pc.string_is_ascii(text), True))):
            raise _Fallback  # (str.isdigit knows digits other than ASCII's: value by value)
        number = pc.and_(unnamed, pc.fill_null(pc.match_substring_regex(text, _ASCII_DIGITS), False))
        index = _cast(pc.if_else(number, text, pa.scalar("0")), pa.int64())
        if pc.max(index).as_py() is not None and pc.max(index).as_py() > len(fix[1]):
            raise _Fallback  # (out of the members: the fix raises)
        members = pa.array(["", *fix[1]], pa.string())
        return pc.if_else(number, members.take(index), text)
    if kind == FIX_UNSIGNED:
        negative = pc.fill_null(pc.starts_with(text, "-"), False)
        if not every(pc.or_(pc.invert(negative), pc.fill_null(pc.match_substring_regex(text, "^-[0-9]{1,19}$"), False))):
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
        try:
            if complete is not None and (t is not None or b is not None):
                t, b = complete(t, b, named is not None)
            value, zero = convert(t, b)
        except NotCanonical as e:
            raise NotCanonical(_cannot(spec, t, b, e)) from None
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
    typed = _few_typed(cells, 1, columns_of(specs, fixes))
    return tuple(typed[i][0][0].as_py() for i in range(len(specs))), sum(z for _, z in typed.values())


def columns_of(specs: Sequence[ColumnSpec], fixes: dict[int, tuple] | None = None) -> dict[int, tuple]:
    """What :func:`typed_cells` types, per spec's number: ``(spec, ordinal, Arrow type, fix)``
    (the ordinal: the cells' ``idx``, the spec's position when it has none; the type: silver's)."""
    return {i: (spec, i if spec.ordinal is None else spec.ordinal, spark_type_to_arrow(spark_type(spec)),
                (fixes or {}).get(i if spec.ordinal is None else spec.ordinal)) for i, spec in enumerate(specs)}


def typed_cells(cells: Cells, n: int, columns: dict[int, tuple], *,
                threads: bool = True) -> dict[int, tuple[pa.Array, int]]:
    """One image's cells of ``n`` changes typed: per column of ``columns`` (:func:`columns_of`),
    its values and the zero dates nulled; side by side (:func:`pipelines.arrow_pool.side_by_side`),
    unless not ``threads`` (inside a Spark task, whose cores the other tasks take)."""
    if n < VECTORIZE_FROM:
        return _few_typed(cells, n, columns)
    work = {i: (spec, to, cells.column(ordinal, n), fix) for i, (spec, ordinal, to, fix) in columns.items()}
    if not threads:
        return {i: typed_column(spec, to, column, fix=fix) for i, (spec, to, column, fix) in work.items()}
    done = side_by_side(lambda w: typed_column(w[0], w[1], w[2], fix=w[3]), list(work.values()), n)
    return dict(zip(work, done))


def cell_fix(fix: tuple) -> Callable[[str | None, bytes | None, bool], tuple]:
    """A cell's completion by ``fix`` (:func:`pipelines.schema.resolve.apply_fix`); raises
    :class:`NotCanonical` where it fails (an ENUM or SET number out of the members' range)."""
    kind = fix[0]

    def complete(text, data, named):
        try:
            return schema_resolve.apply_fix(fix, text, data, named)
        except ValueError as e:
            raise NotCanonical(f"{kind}: {e}") from None
    return complete


def _cannot(spec: ColumnSpec, text: str | None, data: bytes | None, why: Exception) -> str:
    what = f"text {text[:80]}" if text is not None else f"bytes {bytes(data[:40]).hex()}" if data is not None else "NULL"
    return f"typing: column {spec.name!r} ({spec.mysql_type}{' unsigned' if spec.unsigned else ''}): " \
           f"cannot convert {what} ({why})"


def _zero_rows(values: pa.Array, text: pa.Array) -> np.ndarray:
    """Per change, 1 where a temporal cell's text became NULL (a zero or invalid date)."""
    return pc.and_(pc.is_valid(text), pc.is_null(values)).to_numpy(zero_copy_only=False).astype(np.int32)


def typed_batch(batch: pa.RecordBatch, specs: Sequence[ColumnSpec], images: Sequence[str], *,
                fixes: dict[int, tuple] | None = None, guard: str | None = None,
                zero_dates_col: str = ZERO_DATES_COL) -> pa.RecordBatch:
    """A record batch of bronze rows with each of its ``images`` (a list of cells per row)
    replaced by a struct of the typed values (:func:`pipelines.schema.typemap.silver_schema`;
    NULL for a row without the image), and ``zero_dates_col`` (INT: added to the batch's own,
    when it has one) counting per row the zero dates nulled. ``guard`` names a BOOLEAN column:
    the rows where it is not true are not typed (NULL images, no zero dates), so only its own
    rows can raise. Raises :class:`NotCanonical` for a value that does not convert."""
    n = batch.num_rows
    struct = spark_type_to_arrow(silver_schema(specs))
    columns = columns_of(specs, fixes)
    temporal = {i for i, spec in enumerate(specs) if type_rule(spec)[1].temporal}
    mine = np.ones(n, bool) if guard is None else \
        pc.fill_null(batch.column(guard), False).to_numpy(zero_copy_only=False)
    zeros = np.zeros(n, np.int32)
    out = {name: batch.column(name) for name in batch.schema.names}
    for image in images:
        cells_of = batch.column(image)
        keep = np.flatnonzero(mine & cells_of.is_valid().to_numpy(zero_copy_only=False))
        if not len(keep):
            out[image] = pa.nulls(n, struct)
            continue
        cells = image_cells(cells_of if len(keep) == n else cells_of.take(pa.array(keep)))
        typed = typed_cells(cells, len(keep), columns, threads=False)  # (a Spark task: a core of its own)
        for i in temporal:
            zeros[keep] += _zero_rows(typed[i][0], cells.column(columns[i][1], len(keep)).text)
        values = pa.StructArray.from_arrays([typed[i][0] for i in range(len(specs))], fields=list(struct))
        if len(keep) < n:  # (back in the batch's rows: NULL where not typed)
            slot = np.full(n, -1, np.int64)
            slot[keep] = np.arange(len(keep))
            values = values.take(pa.array(slot, mask=slot < 0))
        out[image] = values
    counted = pa.array(zeros, pa.int32())
    if zero_dates_col in out:
        counted = pc.add(pc.fill_null(out[zero_dates_col].cast(pa.int32()), 0), counted)
    out[zero_dates_col] = counted
    return pa.RecordBatch.from_arrays(list(out.values()), names=list(out))
