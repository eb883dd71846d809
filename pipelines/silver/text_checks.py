"""Whether every text of an Arrow string array has the form of a silver type's canonical text, by
NumPy over the array's bytes: the checks silver's typing runs before Arrow's casts
(:mod:`pipelines.silver.arrow_typing`), about two to four times faster than a regular
expression per value (RE2's ``match_substring_regex``) on millions of cells.

:func:`all_match` knows the integer, decimal, date and date-time forms of
:mod:`pipelines.silver.typed_values` and answers exactly what ``pattern.match`` answers for every
non-NULL value; for any other pattern it answers None (the caller then runs the expression).
Pure: values in, a bool out. ``tests/test_text_checks.py`` holds it to ``re.match``.
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa

from pipelines.silver.typed_values import DATE_TEXT, DATETIME_TEXT, DEC, INT_TEXT

_ZERO = ord("0")
_DASH, _DOT, _SPACE, _COLON = ord("-"), ord("."), ord(" "), ord(":")
# the date-time form's fixed punctuation: position -> byte (the other positions are digits)
_DATE_MARKS = {4: _DASH, 7: _DASH}
_TIME_MARKS = {**_DATE_MARKS, 10: _SPACE, 13: _COLON, 16: _COLON}


class _Bytes:
    """The non-NULL values of one string array: their start and end offsets into ``data``."""

    def __init__(self, array: pa.Array):
        wide = pa.types.is_large_string(array.type)
        _, offsets_buf, data_buf = array.buffers()
        offsets = np.frombuffer(offsets_buf, np.int64 if wide else np.int32, len(array) + 1,
                                array.offset * (8 if wide else 4)).astype(np.int64)
        first, last = int(offsets[0]), int(offsets[-1])
        self.data = np.frombuffer(data_buf, np.uint8, last - first, first) if last > first else np.zeros(0, np.uint8)
        offsets -= first
        if array.null_count:
            valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), bool)
            self.starts, self.ends = offsets[:-1][valid], offsets[1:][valid]
        else:
            self.starts, self.ends = offsets[:-1], offsets[1:]

    @property
    def lengths(self) -> np.ndarray:
        return self.ends - self.starts

    def per_value(self, flags: np.ndarray) -> np.ndarray:
        """How many bytes of each value have ``flags`` set (``flags``: one per byte of ``data``)."""
        cum = np.zeros(len(flags) + 1, np.int32 if len(flags) < 2**31 else np.int64)
        np.cumsum(flags, out=cum[1:])
        return cum[self.ends] - cum[self.starts]

    def first_bytes(self) -> np.ndarray:
        """Each value's first byte (0 for an empty value)."""
        if not len(self.data):
            return np.zeros(len(self.starts), np.uint8)
        return np.where(self.lengths > 0, self.data[np.minimum(self.starts, len(self.data) - 1)], 0)

    def place(self, flags: np.ndarray) -> np.ndarray:
        """The offset of each value's one byte with ``flags`` set (values with none or more: -1)."""
        where = np.full(len(self.starts), -1, np.int64)
        at = np.flatnonzero(flags)
        if not len(self.starts) or not len(at):
            return where
        owner = np.searchsorted(self.starts, at, "right") - 1
        kept = (owner >= 0) & (at < self.ends[np.maximum(owner, 0)])
        where[owner[kept]] = at[kept]
        return where


def _digits(data: np.ndarray) -> np.ndarray:
    return (data - _ZERO) <= 9  # (uint8: a byte below "0" wraps past 9)


def _integers(v: _Bytes) -> bool:
    minus = v.first_bytes() == _DASH
    digits = v.lengths - minus
    if not np.all((digits >= 1) & (digits <= 20)):
        return False
    others = ~_digits(v.data)
    if np.array_equal(np.flatnonzero(others), v.starts[minus]):  # (the only other bytes: the values' signs)
        return True
    return bool(np.all(v.per_value(others) == minus))  # (bytes under NULL slots: counted per value)


def _decimals(v: _Bytes) -> bool:
    lengths = v.lengths
    minus = v.first_bytes() == _DASH
    dots = v.data == _DOT
    others = ~_digits(v.data) & ~dots
    dot_count = v.per_value(dots)
    if not np.all((v.per_value(others) == minus) & (dot_count <= 1)):
        return False
    where = v.place(dots)  # (each value has one dot at most)
    whole = np.where(dot_count == 1, where - v.starts, lengths) - minus
    fraction = np.where(dot_count == 1, v.ends - where - 1, 1)
    return bool(np.all((whole >= 1) & (whole <= 65) & (fraction >= 1) & (fraction <= 38)))


_BLOCK_ROWS = 1 << 16  # values a check of scattered values gathers at a time (their bytes' offsets: 8 bytes each)


def _fixed_form(v: _Bytes, rows: np.ndarray, length: int, marks: dict[int, int]) -> bool:
    """The values at ``rows`` (each ``length`` bytes long) have ``marks`` where it says, digits elsewhere."""
    if not len(rows):
        return True
    is_mark = np.array([at in marks for at in range(length)])
    expected = np.array([marks.get(at, 0) for at in range(length)], np.uint8)
    if len(rows) == len(v.starts) and int(v.ends[-1] - v.starts[0]) == len(rows) * length:
        # (every value, back to back: their bytes are a matrix as they lie, nothing gathered)
        blocks = [v.data[v.starts[0]:v.ends[-1]].reshape(len(rows), length)]
    else:
        starts = v.starts[rows]
        blocks = (v.data[starts[at:at + _BLOCK_ROWS, None] + np.arange(length)] for at in range(0, len(rows), _BLOCK_ROWS))
    for block in blocks:  # (whole rows at a time: a digit where the form has no mark, the mark where it has one)
        ok = _digits(block)
        ok[:, is_mark] = block[:, is_mark] == expected[is_mark]
        if not ok.all():
            return False
    return True


def _dates(v: _Bytes) -> bool:
    if not np.all(v.lengths == 10):
        return False
    return _fixed_form(v, np.arange(len(v.starts)), 10, _DATE_MARKS)


def _datetimes(v: _Bytes) -> bool:
    lengths = v.lengths
    if not np.all((lengths == 19) | ((lengths >= 21) & (lengths <= 26))):
        return False
    for length in np.flatnonzero(np.bincount(lengths, minlength=27)).tolist():
        marks = _TIME_MARKS if length == 19 else {**_TIME_MARKS, 19: _DOT}
        if not _fixed_form(v, np.flatnonzero(lengths == length), length, marks):
            return False
    return True


_CHECKS = {INT_TEXT.pattern: _integers, DEC.pattern: _decimals, DATE_TEXT.pattern: _dates,
           DATETIME_TEXT.pattern: _datetimes}


def all_match(text: pa.Array | pa.ChunkedArray, pattern: re.Pattern) -> bool | None:
    """True when every non-NULL value of ``text`` (string or large_string) matches ``pattern``
    as ``pattern.match`` would, False when one does not; None for a pattern not known here."""
    check = _CHECKS.get(pattern.pattern)
    if check is None or not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
        return None
    chunks = text.chunks if isinstance(text, pa.ChunkedArray) else [text]
    return all(check(_Bytes(chunk)) for chunk in chunks if len(chunk) > chunk.null_count)
