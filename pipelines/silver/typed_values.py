"""Bronze cells -> silver's Python values, one value at a time: the rules
:mod:`pipelines.silver.arrow_typing` types a column by when Arrow's casts do not take it (a SET
number, BIT, a padded BINARY, a text a cast refuses, a few changes), and the reference those casts
are tested against (``tests/test_columnar.py``).

Pure functions of a :class:`~pipelines.schema.typemap.ColumnSpec` and a cell's ``(text, bin)``; nothing here
imports Spark's session or Delta. A converter returns ``(value, zero)``: the Python value of the
silver type (``int``, ``Decimal``, ``float``, ``date``, ``datetime``, ``str``, ``bytes`` or None)
and 1 when a zero or invalid date was nulled, else 0.

Only the canonical texts that the decoder writes (see :mod:`pipelines.schema.typemap`) are converted.
Anything else (a text in another form, a value out of the type's range, a binary cell without
bytes) raises :class:`NotCanonical`, which :mod:`pipelines.silver.arrow_typing` names with the
column, its type and the text: the value does not convert, and the run says so.

>>> convert(ColumnSpec("n", "tinyint", unsigned=True), "255", None)
(255, 0)
>>> convert(ColumnSpec("d", "date"), "0000-00-00", None)
(None, 1)
"""
from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from pipelines.bronze.schema import PARTIAL_JSON_MARK
from pipelines.schema.model import DECIMAL_CONTEXT
from pipelines.schema.typemap import ColumnSpec, decimal_type, type_rule

Converter = Callable[[str | None, bytes | None], tuple[object, int]]
_UTC = _dt.timezone.utc


class NotCanonical(ValueError):
    """A cell that does not convert, or a batch the driver's fold does not take (Spark's path then)."""


INT_TEXT = re.compile(r"-?[0-9]{1,20}\Z")
DEC = re.compile(r"-?[0-9]{1,65}(\.[0-9]{1,38})?\Z")
DATE_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
DATETIME_TEXT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?\Z")
FLOAT_TEXT = re.compile(r"-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\Z")

# (lowest, highest) of the silver integer types (Spark's BYTE, SHORT, INT, LONG)
RANGES = {"byte": (-2**7, 2**7 - 1), "short": (-2**15, 2**15 - 1), "int": (-2**31, 2**31 - 1),
           "long": (-2**63, 2**63 - 1)}
INT_SILVER = {  # mysql type -> (silver type when signed, when unsigned); "dec20": DECIMAL(20,0)
    "tinyint": ("byte", "short"), "smallint": ("short", "int"), "mediumint": ("int", "int"),
    "int": ("int", "long"), "bigint": ("long", "dec20"), "serial": ("dec20", "dec20"),
}


def _integer(text: str) -> int:
    if not INT_TEXT.match(text):
        raise NotCanonical(f"not an integer text: {text[:80]!r}")
    return int(text)


def _in_range(value: int, kind: str) -> int:
    lo, hi = RANGES[kind] if kind != "dec20" else (-(10**20) + 1, 10**20 - 1)
    if not lo <= value <= hi:
        raise NotCanonical(f"{value} is out of the range of {kind}")
    return Decimal(value) if kind == "dec20" else value


def _int_converter(kind: str) -> Converter:
    def conv(t, b):
        return (None if t is None else _in_range(_integer(t), kind)), 0
    return conv


def _decimal_converter(spec: ColumnSpec) -> Converter:
    dt = decimal_type(spec)
    if not hasattr(dt, "precision"):  # DECIMAL(p > 38): its exact text
        return _text
    quantum, limit = Decimal(1).scaleb(-dt.scale), Decimal(1).scaleb(dt.precision - dt.scale)

    def conv(t, b):
        if t is None:
            return None, 0
        if not DEC.match(t):
            raise NotCanonical(f"not a decimal text: {t[:80]!r}")
        try:
            value = Decimal(t).quantize(quantum, rounding=ROUND_HALF_UP, context=DECIMAL_CONTEXT)  # (half up: Spark's cast)
        except InvalidOperation as e:
            raise NotCanonical(f"{t[:80]!r}: {e}") from None
        if value.copy_abs() >= limit:  # (exact: abs() would round to the default context's 28 digits)
            raise NotCanonical(f"{t[:80]!r} does not fit DECIMAL({dt.precision},{dt.scale})")
        return value, 0
    return conv


def _float(t, b):
    if t is None:
        return None, 0
    if not FLOAT_TEXT.match(t):  # (inf and nan: MySQL stores neither; Spark's own spellings differ)
        raise NotCanonical(f"not a float text: {t[:80]!r}")
    return float(t), 0


def _temporal(pattern: re.Pattern, parse: Callable[[str], object]) -> Converter:
    def conv(t, b):
        if t is None:
            return None, 0
        if not pattern.match(t):
            raise NotCanonical(f"not a canonical date/time text: {t[:80]!r}")
        if t.startswith("0000"):  # MySQL's zero date (or a partial zero date)
            return None, 1
        try:
            return parse(t), 0
        except ValueError:  # 2024-02-30, 2024-00-10: NULL, counted as Spark's try_cast does
            return None, 1
    return conv


def _year(t, b):
    if t is None:
        return None, 0
    value = _in_range(_integer(t), "short")
    return (None, 1) if value == 0 else (value, 0)


def _text(t, b):
    return t, 0


def _json(t, b):
    if b is not None and b == PARTIAL_JSON_MARK:  # diffs, not the document: Spark's path folds them
        raise NotCanonical("a JSON column logged as diffs (PARTIAL_JSON)")
    return t, 0


def _bin(t, b):
    if t is not None and b is None:
        raise NotCanonical("a binary cell without bytes")
    return (None if b is None else bytes(b)), 0


def _bin_padded(length: int | None) -> Converter:
    def conv(t, b):
        value, _ = _bin(t, b)
        if value is not None and length is not None and len(value) < length:
            value = value + b"\x00" * (length - len(value))  # the binlog drops BINARY(n)'s trailing zeros
        return value, 0
    return conv


def _bit(t, b):
    if t is None:
        return None, 0
    value = _integer(t)
    if not 0 <= value < 2**64:
        raise NotCanonical(f"{value} is not a BIT value")
    return (value - 2**64 if value > 2**63 - 1 else value), 0


def _datetime(t: str) -> _dt.datetime:
    return _dt.datetime.fromisoformat(t)


def _timestamp(t: str) -> _dt.datetime:
    return _dt.datetime.fromisoformat(t).replace(tzinfo=_UTC)  # the text is UTC


_BY_NAME: dict[str, Callable[[ColumnSpec], Converter]] = {
    "float": lambda s: _float,
    "double": lambda s: _float,
    "decimal": _decimal_converter,
    "date": lambda s: _temporal(DATE_TEXT, _dt.date.fromisoformat),
    "datetime": lambda s: _temporal(DATETIME_TEXT, _datetime),
    "timestamp": lambda s: _temporal(DATETIME_TEXT, _timestamp),
    "year": lambda s: _year,
    "binary": lambda s: _bin_padded(s.length),
    "bit": lambda s: _bit,
    "json": lambda s: _json,
}


def converter(spec: ColumnSpec) -> Converter:
    """The converter of one column (raises :class:`~pipelines.schema.typemap.UnsupportedColumnType`
    for a type silver has no mapping for, as :func:`pipelines.schema.typemap.spark_type` does)."""
    name, rule = type_rule(spec)
    if name in INT_SILVER:
        signed, unsigned = INT_SILVER[name]
        return _int_converter(unsigned if spec.unsigned else signed)
    if name in _BY_NAME:
        return _BY_NAME[name](spec)
    return _bin if rule.from_bin else _text


def convert(spec: ColumnSpec, text: str | None, data: bytes | None) -> tuple[object, int]:
    """One cell's silver value and zero-date count (see the module doc)."""
    return converter(spec)(text, data)
