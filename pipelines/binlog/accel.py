"""The optional compiled row decoder (``_speedups``, built from ``_speedups.c`` by
``make setup``) and the plans it decodes with.

:data:`ACCELERATED` is true when the extension is importable and the environment
does not say ``BINLOG_DECODER=python``; :mod:`.rows` then tries it first for every
rows event whose layout :func:`build_plan` supports, and re-decodes the event with
the Python decoders whenever it raises :data:`Fallback` (zero or invalid dates,
bytes invalid in the column's charset, truncated or corrupt bodies...), so the
results are always those of the Python decoders.

``BINLOG_DECODER``: ``auto`` (default) uses the extension when it is built,
``python`` never uses it, ``c`` requires it (ImportError when it is missing).

The C side handles every integer type, FLOAT/DOUBLE, NEWDECIMAL, YEAR, DATE, the
old TIME/DATETIME/TIMESTAMP without fractions, TIME2/DATETIME2/TIMESTAMP2, BIT,
ENUM/SET, and the VARCHAR/CHAR/BINARY/TEXT/BLOB family in any charset Python has a
codec for. A layout with any other column (JSON, GEOMETRY, VECTOR, pre-5.0 DECIMAL,
MariaDB 5.3 fractional temporals, MariaDB compressed columns) stays in Python.

``speedups.decode_cells`` reads the same bodies with the same plans but writes each value as its
canonical text (or bytes) straight into Arrow-ready buffers (:func:`.rows.decode_cells`, what
bronze's tasks use); it also declines text not valid in its charset and YEAR 0.

>>> plan = build_plan(column_specs(table_map), (0, 1, 2))   # doctest: +SKIP
>>> speedups.decode_rows(body, OPS["insert"], plan)         # doctest: +SKIP
((None, (1, 'ann', 30)), (None, (2, None, 255)))
"""
from __future__ import annotations

import codecs
import os
from typing import Sequence

from .charsets import LATIN1_DECODE
from .columns import ColumnDecoding, bit_size, decimal_meta, fsp_of
from .constants import ColumnType as CT
from .decimal import decimal_bin_size
from .errors import BinlogError

MODE = os.environ.get("BINLOG_DECODER", "auto").strip().lower() or "auto"
if MODE not in ("auto", "python", "c"):
    raise ValueError(f"BINLOG_DECODER={MODE!r}: expected auto, python or c")

try:
    from . import _speedups as speedups
except ImportError as e:  # not built (no compiler, or `make setup` not run)
    if MODE == "c":
        raise ImportError(f"BINLOG_DECODER=c but pipelines.binlog._speedups is not built ({e}); run make setup") from e
    speedups = None
    LOAD_ERROR: str | None = str(e)
else:
    LOAD_ERROR = None

#: Use the compiled decoder (tests switch it off to compare with the Python path).
ACCELERATED: bool = speedups is not None and MODE != "python"

#: Raised by ``speedups.decode_rows`` when the Python decoders must decode the body.
Fallback = speedups.Fallback if speedups is not None else type("Fallback", (Exception,), {})

OPS = {"insert": 0, "delete": 1, "update": 2}

_INT_SIZES = {CT.TINY: 1, CT.SHORT: 2, CT.INT24: 3, CT.LONG: 4, CT.LONGLONG: 8}


class Unsupported(Exception):
    """The column is left to the Python decoder (internal to :func:`build_plan`)."""


def _codec(spec: ColumnDecoding) -> tuple[int, object]:
    """``(codec kind, argument)``: exactly what ``raw.decode(spec.codec)`` does."""
    S = speedups
    if spec.codec is None:
        return S.C_BYTES, None
    if spec.codec == "utf-8":
        return S.C_UTF8, None
    if spec.codec == "mysql_latin1":  # the codec is codecs.charmap_decode over this table
        return S.C_CHARMAP, LATIN1_DECODE
    try:
        codecs.lookup(spec.codec)
    except LookupError:
        raise Unsupported(spec.codec) from None
    return S.C_CODEC, spec.codec


def _int(spec):
    return (speedups.K_INT, _INT_SIZES[spec.type], int(spec.unsigned), 0, None)


def _fixed(kind: str):
    def plan(spec):
        return (getattr(speedups, kind), 0, 0, 0, None)
    return plan


def _old_temporal(kind: str):
    def plan(spec):
        if fsp_of(spec):  # MariaDB 5.3 fractional formats
            raise Unsupported(spec.name)
        return (getattr(speedups, kind), 0, 0, 0, None)
    return plan


def _temporal2(kind: str):
    def plan(spec):
        return (getattr(speedups, kind), fsp_of(spec), 0, 0, None)
    return plan


def _newdecimal(spec):
    p, s = decimal_meta(spec)
    decimal_bin_size(p, s)  # checks the precision and scale
    return (speedups.K_NEWDECIMAL, p, s, 0, None)


def _bit(spec):
    return (speedups.K_BIT, bit_size(spec), 0, 0, None)


def _enum(spec):
    if spec.length not in (1, 2):
        raise Unsupported(spec.name)
    names = None if spec.enum_values is None else ("",) + tuple(spec.enum_values)
    return (speedups.K_ENUM, spec.length, 0, 0, names)


def _set(spec):
    if not 1 <= spec.length <= 8:
        raise Unsupported(spec.name)
    names = None if spec.set_values is None else tuple(spec.set_values)
    return (speedups.K_SET, spec.length, 0, 0, names)


def _varchar(spec):
    if not isinstance(spec.meta, int):
        raise Unsupported(spec.name)
    return (speedups.K_STR, 1 if spec.meta < 256 else 2, 0, *_codec(spec))


def _string(spec):
    prefix = 1 if spec.length < 256 else 2
    if spec.binary:  # BINARY(n): right-padded with \0 to n
        return (speedups.K_STR, prefix, spec.length, speedups.C_BYTES, None)
    return (speedups.K_STR, prefix, 0, *_codec(spec))


def _blob(spec):
    if spec.meta not in (1, 2, 3, 4):
        raise Unsupported(spec.name)
    return (speedups.K_STR, spec.meta, 0, *_codec(spec))


# ColumnDecoding.type -> plan; JSON, GEOMETRY, VECTOR, old DECIMAL and MariaDB compressed
# columns are missing on purpose: layouts with them stay in Python.
COLUMN_PLANS = {
    CT.TINY: _int, CT.SHORT: _int, CT.INT24: _int, CT.LONG: _int, CT.LONGLONG: _int,
    CT.FLOAT: _fixed("K_FLOAT"), CT.DOUBLE: _fixed("K_DOUBLE"), CT.YEAR: _fixed("K_YEAR"),
    CT.DATE: _fixed("K_DATE"), CT.NEWDATE: _fixed("K_DATE"), CT.NULL: _fixed("K_NULL"),
    CT.TIME: _old_temporal("K_TIME"), CT.DATETIME: _old_temporal("K_DATETIME"),
    CT.TIMESTAMP: _old_temporal("K_TIMESTAMP"),
    CT.TIME2: _temporal2("K_TIME2"), CT.DATETIME2: _temporal2("K_DATETIME2"),
    CT.TIMESTAMP2: _temporal2("K_TIMESTAMP2"),
    CT.NEWDECIMAL: _newdecimal, CT.BIT: _bit, CT.ENUM: _enum, CT.SET: _set,
    CT.VARCHAR: _varchar, CT.VAR_STRING: _varchar, CT.STRING: _string,
    CT.TINY_BLOB: _blob, CT.BLOB: _blob, CT.MEDIUM_BLOB: _blob, CT.LONG_BLOB: _blob,
}


def column_plan(spec: ColumnDecoding) -> tuple:
    """``(kind, a, b, c, obj)`` for the C decoder (see ``_speedups.c``): the same
    reading of the column as ``columns._plan``. Raises :class:`Unsupported` for the
    columns left to Python, :class:`BinlogError` for impossible metadata."""
    plan = COLUMN_PLANS.get(spec.type)
    if plan is None:
        raise Unsupported(spec.name)
    return plan(spec)


def build_plan(specs: Sequence[ColumnDecoding], present: tuple[int, ...]):
    """The ``speedups.Plan`` for one image with columns ``present``, or ``None`` when
    the extension is missing or any present column is not handled in C (the
    Python decoders then decode it, and raise whatever error the layout deserves)."""
    if speedups is None or not all(0 <= i < len(specs) for i in present):
        return None
    try:
        return speedups.Plan([column_plan(specs[i]) for i in present])
    except (Unsupported, BinlogError, IndexError, ValueError, TypeError):
        return None
