"""The compiled accelerator (``pipelines/binlog/_speedups.c`` through :mod:`.accel`)
against the Python decoders: the same rows (same types, values, tzinfo, str/bytes)
or the same ``BinlogError`` for random tables of every type, random values, NULLs,
column subsets, update images, and truncated or corrupted bodies; every corpus file
decoded both ways; the row tests of test_rows.py with the accelerator off.

The extension is built by ``make setup``; when it is missing these tests fail
rather than skip, so a broken build cannot pass unnoticed.
"""
from __future__ import annotations

import array
import csv
import datetime as dt
import gc
import inspect
import os
import struct
import subprocess
import sys
import tracemalloc
from contextlib import ExitStack, contextmanager
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

import test_rows
from pipelines.binlog import accel, rows as R
from pipelines.binlog.constants import ColumnType as CT
from pipelines.binlog.decimal import decimal_bin_size
from pipelines.binlog.errors import BinlogError
from pipelines.binlog.events import RowsEvent
from pipelines.binlog.stream import EventStream
from pipelines.binlog.typetext import column_fsp
from pipelines.binlog.values import InvalidText, canonical_text
from test_columns import (
    BINARY,
    LATIN1,
    UCS2,
    UTF8MB4,
    Col,
    _col_and_values,
    bit,
    char,
    datetime2,
    encode_row,
    enum,
    int_col,
    newdecimal,
    prefixed,
    set_col,
    string_meta,
    table_map,
    time2,
    timestamp2,
    varchar,
)
from test_decimal import encode_newdecimal

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
REPO = Path(__file__).resolve().parents[1]
BUILD_HINT = "run make setup to build pipelines/binlog/_speedups"
CP1251 = 51
UTC = dt.timezone.utc


def speedups():
    """The extension module; a missing build fails the test (it does not skip)."""
    if accel.speedups is None:
        pytest.fail(f"{BUILD_HINT} ({accel.LOAD_ERROR})")
    return accel.speedups


@contextmanager
def decoder_path(accelerated: bool):
    """Decode with the accelerator (when it handles the layout) or with Python only,
    as ``BINLOG_DECODER=python`` does."""
    old = accel.ACCELERATED
    accel.ACCELERATED = accelerated
    try:
        yield
    finally:
        accel.ACCELERATED = old


def typed(v):
    """A value with its exact type: floats by their bits (NaN payloads, -0.0), the
    rest by type and repr (Decimal scale and sign, datetime tzinfo)."""
    if type(v) is tuple:
        return tuple(typed(x) for x in v)
    if type(v) is float:
        return ("float", struct.pack("<d", v))
    return (type(v).__name__, repr(v))


def outcome(fn):
    try:
        return ("rows", typed(fn()))
    except BinlogError as e:
        return ("error", type(e).__name__, str(e))


PRESENTS = {"insert": lambda b, a: (a,), "delete": lambda b, a: (b,), "update": lambda b, a: (b, a)}


def decode_both_ways(op, tm, body, before, after):
    """(accelerated outcome, Python outcome, direct C result or "fallback"/None)."""
    S = speedups()

    def run():
        return R.decode_rows(op, tm, body, before, after, event_type=30)

    with decoder_path(True):
        fast = outcome(run)
    with decoder_path(False):
        slow = outcome(run)
    plans = tuple(R.row_plan(tm, p) for p in PRESENTS[op](before, after))
    direct = None
    if None not in plans:
        try:
            direct = ("rows", typed(S.decode_rows(body, accel.OPS[op], *plans)))
        except S.Fallback:
            direct = "fallback"
    return fast, slow, direct


def reference(op, tm, body, before, after):
    decoders = tuple(R.row_decoder(tm, p) for p in PRESENTS[op](before, after))
    images = R._reference_images(decoders, body, len(body))
    return tuple((None, r) if op == "insert" else (r, None) if op == "delete" else r for r in images)


# -- random tables ------------------------------------------------------------------------

def _unsupported(col: Col) -> bool:
    return col.type in (CT.JSON, CT.VECTOR, CT.GEOMETRY) or (col.type == CT.TIME and col.meta != 0)


def _extra_column(draw):
    """Columns test_columns does not draw: other charsets (charmap and generic
    codecs, invalid bytes included), NULL, VAR_STRING, NEWDATE, float bit patterns,
    negative zero DECIMAL."""
    kind = draw(st.sampled_from([
        "latin1", "latin1_blob", "ucs2", "cp1251", "utf8_bytes", "unknown_charset", "null",
        "var_string", "newdate", "float_bits", "double_bits", "decimal_neg_zero", "char_padded",
    ]))
    if kind == "latin1":
        return Col(CT.VARCHAR, 40, None, LATIN1, encode=prefixed(1)), st.binary(max_size=40)
    if kind == "latin1_blob":
        return Col(CT.BLOB, 2, None, LATIN1, encode=prefixed(2)), st.binary(max_size=300)
    if kind == "ucs2":
        return (Col(CT.VARCHAR, 80, None, UCS2, encode=prefixed(1)),
                st.text(max_size=20).map(lambda s: s.encode("utf-16-be")) | st.binary(max_size=7))
    if kind == "cp1251":  # 0x98 is undefined in cp1251
        return Col(CT.STRING, string_meta(CT.STRING, 30), None, CP1251, encode=prefixed(1)), st.binary(max_size=30)
    if kind == "utf8_bytes":  # valid and invalid UTF-8
        return (Col(CT.VARCHAR, 300, None, UTF8MB4, encode=prefixed(2)),
                st.text(max_size=30).map(str.encode) | st.binary(max_size=12))
    if kind == "unknown_charset":
        return Col(CT.VARCHAR, 20, None, 9999, encode=prefixed(1)), st.binary(max_size=20)
    if kind == "null":
        return Col(CT.NULL, 0, encode=lambda v: b""), st.just(0)
    if kind == "var_string":
        return (Col(CT.VAR_STRING, 300, None, UTF8MB4, encode=lambda s: prefixed(2)(s.encode())),
                st.text(max_size=40))
    if kind == "newdate":
        return (Col(CT.NEWDATE, encode=lambda v: (v[0] << 9 | v[1] << 5 | v[2]).to_bytes(3, "little")),
                st.tuples(st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31)))
    if kind == "float_bits":
        return Col(CT.FLOAT, 4, encode=bytes), st.binary(min_size=4, max_size=4)
    if kind == "double_bits":
        return Col(CT.DOUBLE, 8, encode=bytes), st.binary(min_size=8, max_size=8)
    if kind == "decimal_neg_zero":
        p, s = draw(st.sampled_from([(1, 0), (5, 2), (12, 2), (30, 10), (65, 30)]))
        return (Col(CT.NEWDECIMAL, (p, s), encode=lambda neg: encode_newdecimal(Decimal(0), p, s, negative=neg)),
                st.booleans())
    n = draw(st.sampled_from([4, 300]))  # BINARY(n) given shorter values: padded back to n
    return char(n, BINARY), st.binary(max_size=n)


def _raw_column(draw):
    """Fixed-width columns given arbitrary bytes: zero and invalid dates, digit groups
    and ENUM/SET values out of range, bad fractions."""
    kind = draw(st.sampled_from([
        "date", "time", "datetime", "timestamp", "time2", "datetime2", "timestamp2", "decimal",
        "enum", "set", "year", "bit",
    ]))
    fsp = draw(st.integers(0, 6))
    p = draw(st.integers(1, 65))
    s = draw(st.integers(0, min(p, 30)))
    col, size = {
        "date": (Col(CT.DATE), 3),
        "time": (Col(CT.TIME), 3),
        "datetime": (Col(CT.DATETIME), 8),
        "timestamp": (Col(CT.TIMESTAMP), 4),
        "time2": (Col(CT.TIME2, fsp), 3 + (fsp + 1) // 2),
        "datetime2": (Col(CT.DATETIME2, fsp), 5 + (fsp + 1) // 2),
        "timestamp2": (Col(CT.TIMESTAMP2, fsp), 4 + (fsp + 1) // 2),
        "decimal": (Col(CT.NEWDECIMAL, (p, s)), decimal_bin_size(p, s)),
        "enum": (Col(CT.STRING, string_meta(CT.ENUM, 1), enum_values=("a", "b")), 1),
        "set": (Col(CT.STRING, string_meta(CT.SET, 1), set_values=("x", "y", "z")), 1),
        "year": (Col(CT.YEAR), 1),
        "bit": (Col(CT.BIT, (3, 1)), 2),
    }[kind]
    return col._replace(encode=bytes), st.binary(min_size=size, max_size=size)


@st.composite
def tables_and_bodies(draw):
    """(table map, op, before columns, after columns, body, cols)."""
    mode = draw(st.sampled_from(["clean", "clean", "clean", "raw", "unsupported"]))
    ncols = draw(st.integers(1, 14))
    cols, strategies = [], []
    for _ in range(ncols):
        source = draw(st.integers(0, 9))
        if mode == "raw" and source >= 8:
            c, s = _raw_column(draw)
        elif source >= 7:
            c, s = _extra_column(draw)
        else:
            while True:
                c, s = _col_and_values(draw)
                if mode == "unsupported" or not _unsupported(c):
                    break
        cols.append(c)
        strategies.append(s)
    tm = table_map(cols)
    op = draw(st.sampled_from(["insert", "delete", "update"]))

    def subset():
        return tuple(i for i in range(ncols) if draw(st.booleans()) or i == 0)

    before = subset() if op != "insert" else ()
    after = subset() if op != "delete" else ()
    nrows = draw(st.integers(1, 4))
    body = b""
    for _ in range(nrows):
        for present in PRESENTS[op](before, after):
            values = draw(st.tuples(*[st.none() | strategies[i] for i in present]).map(list))
            body += encode_row(cols, present, values)
    return tm, op, before, after, body


SETTINGS = settings(max_examples=400, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(tables_and_bodies())
def test_accelerated_equals_python_equals_reference(case):
    tm, op, before, after, body = case
    fast, slow, direct = decode_both_ways(op, tm, body, before, after)
    event(f"C decoder: {'layout not supported' if direct is None else direct if direct == 'fallback' else 'rows'}")
    assert fast == slow
    if direct not in (None, "fallback"):
        assert direct == slow
    try:
        ref = ("rows", typed(reference(op, tm, body, before, after)))
    except BinlogError as e:
        assert slow[0] == "error" and slow[1] == type(e).__name__
    else:
        assert slow == ref


@SETTINGS
@given(tables_and_bodies(), st.data())
def test_truncated_and_corrupted_bodies_same_outcome(case, data):
    tm, op, before, after, body = case
    buf = bytearray(body)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        what = data.draw(st.sampled_from(["cut", "flip", "byte", "insert", "extend"]))
        i = data.draw(st.integers(0, max(len(buf) - 1, 0)))
        if what == "cut":
            del buf[i:]
        elif what == "flip" and buf:
            buf[i] ^= 1 << data.draw(st.integers(0, 7))
        elif what == "byte" and buf:
            buf[i] = data.draw(st.sampled_from([0, 0xFF, 0x80, 0x7F]))
        elif what == "insert":
            buf[i:i] = data.draw(st.binary(min_size=1, max_size=4))
        else:
            buf += data.draw(st.binary(min_size=1, max_size=3))
    fast, slow, direct = decode_both_ways(op, tm, bytes(buf), before, after)
    assert fast == slow
    if direct not in (None, "fallback"):
        assert direct == slow


def test_every_truncation_of_a_supported_body_falls_back():
    S = speedups()
    cols = [int_col(CT.LONGLONG, 8, False), enum(("a", "b"), 1), newdecimal(12, 2), datetime2(6),
            timestamp2(0), varchar(64, UTF8MB4), int_col(CT.TINY, 1, True), int_col(CT.SHORT, 2, False),
            Col(CT.DOUBLE, 8, encode=lambda v: struct.pack("<d", v)), time2(3), bit(10), set_col(("x", "y"), 1),
            Col(CT.BLOB, 3, None, LATIN1, encode=prefixed(3))]
    tm = table_map(cols)
    present = tuple(range(len(cols)))
    values = [-5, 2, Decimal("-0.50"), (2024, 2, 29, 23, 59, 59, 123456), (1700000000, 0), "h\u00e9 \U0001f600",
              255, -2, 0.1, (True, 1, 2, 3, 500000), 1000, 3, b"\x80\x81caf\xe9"]
    first = encode_row(cols, present, values)
    body = first + encode_row(cols, present, [None] * 5 + values[5:])
    plan = R.row_plan(tm, present)
    rows = S.decode_rows(body, 0, plan)
    assert rows == R.decode_rows("insert", tm, body, (), present, event_type=30)
    assert rows[0][1][3:6] == (dt.datetime(2024, 2, 29, 23, 59, 59, 123456),
                               dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC), "h\u00e9 \U0001f600")
    assert rows[0][1][4].tzinfo is UTC
    assert rows[0][1][12] == "\u20ac\x81caf\u00e9"
    for cut in range(1, len(body)):
        if cut == len(body) - len(first):  # just the first row: valid
            continue
        with pytest.raises(S.Fallback):
            S.decode_rows(body[:-cut], 0, plan)
        fast, slow, _ = decode_both_ways("insert", tm, body[:-cut], (), present)
        assert fast == slow and fast[0] == "error"


def test_layouts_with_unsupported_columns_stay_in_python():
    speedups()
    json_col = Col(CT.JSON, 4, encode=prefixed(4))
    tm = table_map([int_col(CT.LONG, 4, False), json_col, Col(CT.GEOMETRY, 4), Col(CT.VECTOR, 4)])
    assert R.row_plan(tm, (0, 1)) is None and R.row_plan(tm, (0, 2)) is None and R.row_plan(tm, (0, 3)) is None
    assert R.row_plan(tm, (0,)) is not None  # only the present columns count
    hires = table_map([Col(CT.TIME, 3), Col(CT.DATETIME, 0), Col(CT.DECIMAL, 8)])
    assert R.row_plan(hires, (0,)) is None and R.row_plan(hires, (1,)) is not None
    assert R.row_plan(hires, (2,)) is None


def test_plan_rejects_what_it_cannot_read():
    S = speedups()
    for bad in [(S.K_INT, 5, 0, 0, None), (S.K_TIME2, 7, 0, 0, None), (S.K_NEWDECIMAL, 10, 11, 0, None),
                (S.K_STR, 5, 0, S.C_BYTES, None), (S.K_STR, 1, 0, S.C_CHARMAP, "short"),
                (S.K_STR, 1, 4, S.C_UTF8, None), (S.K_ENUM, 3, 0, 0, None), (99, 0, 0, 0, None), (S.K_INT, 1)]:
        with pytest.raises((ValueError, TypeError)):
            S.Plan([bad])
    plan = S.Plan([(S.K_INT, 4, 0, 0, None)])
    with pytest.raises(S.Fallback, match="no columns"):
        S.decode_rows(b"\0", 0, S.Plan([]))
    with pytest.raises(TypeError):
        S.decode_rows(b"\0", 2, plan)  # an update needs two plans
    with pytest.raises(ValueError):
        S.decode_rows(b"\0", 3, plan)


def test_no_leaks_on_success_and_fallback_paths():
    S = speedups()
    member, flag = "member-" + "a" * 20, "flag-" + "x" * 20  # referenced by the plan only
    cols = [int_col(CT.LONG, 4, False), varchar(20, UTF8MB4), newdecimal(10, 2), set_col((flag, "y"), 1),
            datetime2(3), timestamp2(2), enum((member, "b"), 1)]
    tm = table_map(cols)
    present = tuple(range(len(cols)))
    row = [1, "abc", Decimal("1.25"), 3, (2020, 1, 2, 3, 4, 5, 6000), (5, 10000), 1]
    good = (encode_row(cols, present, row) + encode_row(cols, present, [None] * 3 + row[3:])) * 10
    bad_utf8 = good + b"\x00" + struct.pack("<I", 7) + b"\x02\xc3\x28" + bytes(30)
    plan = R.row_plan(tm, present)
    cases = [(good, 0), (good, 2), (good[:-3], 0), (bad_utf8, 0), (good + b"\x01", 2), (good + b"\x00", 1)]

    def run():
        for body, op in cases:
            try:
                S.decode_rows(body, op, plan, plan)
            except S.Fallback:
                pass

    run()
    refs = sys.getrefcount(member), sys.getrefcount(flag)
    assert_no_growth(run)
    assert (sys.getrefcount(member), sys.getrefcount(flag)) == refs


def assert_no_growth(run) -> None:
    """1,500 more calls of ``run`` after 300 keep less than 16 KiB (tracemalloc)."""
    def traced_after(rounds: int) -> int:
        for _ in range(rounds):
            run()
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    tracemalloc.start()
    try:
        base = traced_after(300)
        grown = traced_after(1500) - base
    finally:
        tracemalloc.stop()
    assert grown < 16 * 1024, f"{grown} bytes kept by 1500 more rounds"


# -- cells: the images as canonical text, written in C ----------------------------------------

def image_cells(img: R.ImageCells | None) -> list | None:
    """An image's cells as ``(text, bytes)`` pairs, row-major."""
    if img is None:
        return None
    text_lens, bin_lens = array.array("i", img.text_lens), array.array("i", img.bin_lens)
    assert len(text_lens) == len(bin_lens)
    out, t_at, b_at = [], 0, 0
    for tl, bl in zip(text_lens, bin_lens):
        text = img.text[t_at : t_at + tl].decode("utf-8") if tl >= 0 else None
        data = img.bin[b_at : b_at + bl] if bl >= 0 else None
        t_at, b_at = t_at + max(tl, 0), b_at + max(bl, 0)
        out.append((text, data))
    assert (t_at, b_at) == (len(img.text), len(img.bin))
    return out


def value_cells(tm, cols: tuple, images) -> list | None:
    """The ``(text, bytes)`` cells of decoded values, each as :func:`canonical_text` with its column's
    fractional digits spells it (bytes in the second place); None: no image."""
    if images is None:
        return None
    out = []
    for image in images:
        for i, v in zip(cols, image):
            if type(v) is bytes:
                out.append((None, v))
            else:
                out.append((canonical_text(v, column_fsp(tm, i)), None))
    return out


_DATES = (CT.DATE, CT.NEWDATE, CT.TIME, CT.DATETIME, CT.TIMESTAMP, CT.TIME2, CT.DATETIME2, CT.TIMESTAMP2)


def declined(tm, cols: tuple, image) -> bool:
    """Whether an image holds a value the cells leave to the Python path: a zero or invalid date
    (MySQL's text), YEAR 0, text not valid in its charset."""
    for i, v in zip(cols, image or ()):
        t = tm.column_types[i]
        if type(v) is InvalidText or (t in _DATES and type(v) is str) or (t == CT.YEAR and v == 0):
            return True
    return False


def check_cells(op, tm, body, before, after):
    """decode_cells: None, or the canonical text of the Python path's values; returns what happened."""
    cells = R.decode_cells(op, tm, body, before, after)
    with decoder_path(False):
        slow = outcome(lambda: R.decode_rows(op, tm, body, before, after, event_type=30))
    if cells is None:
        return "declined" if slow[0] == "rows" else "error"
    assert slow[0] == "rows", "cells for a body the Python decoders refuse"
    with decoder_path(False):
        rows = R.decode_rows(op, tm, body, before, after, event_type=30)
    assert cells.rows == len(rows)
    assert image_cells(cells.before) == value_cells(tm, before, [r[0] for r in rows] if op != "insert" else None)
    assert image_cells(cells.after) == value_cells(tm, after, [r[1] for r in rows] if op != "delete" else None)
    return "cells"


@SETTINGS
@given(tables_and_bodies())
def test_cells_are_the_canonical_text_of_the_values(case):
    tm, op, before, after, body = case
    speedups()
    what = check_cells(op, tm, body, before, after)
    event(f"cells: {what}")
    if what == "declined":  # only where C declines the values, or for what the cells leave to Python
        _, _, direct = decode_both_ways(op, tm, body, before, after)
        if direct not in (None, "fallback"):
            with decoder_path(False):
                rows = R.decode_rows(op, tm, body, before, after, event_type=30)
            assert any(declined(tm, before, b) or declined(tm, after, a) for b, a in rows)


@SETTINGS
@given(tables_and_bodies(), st.data())
def test_cells_of_truncated_and_corrupted_bodies(case, data):
    tm, op, before, after, body = case
    buf = bytearray(body)
    i = data.draw(st.integers(0, max(len(buf) - 1, 0)))
    if data.draw(st.booleans()):
        del buf[i:]
    elif buf:
        buf[i] ^= 1 << data.draw(st.integers(0, 7))
    check_cells(op, tm, bytes(buf), before, after)


def test_cells_of_every_supported_type_and_what_they_decline():
    speedups()
    cols = [int_col(CT.LONGLONG, 8, False), int_col(CT.LONGLONG, 8, True), enum(("a", "b"), 1), newdecimal(12, 2),
            newdecimal(40, 30), newdecimal(5, 0), datetime2(6), datetime2(2), timestamp2(3), time2(3),
            varchar(64, UTF8MB4), Col(CT.FLOAT, 4, encode=lambda v: struct.pack("<f", v)),
            Col(CT.DOUBLE, 8, encode=lambda v: struct.pack("<d", v)), bit(10), set_col(("x", "y"), 1),
            Col(CT.BLOB, 3, None, LATIN1, encode=prefixed(3)), char(4, BINARY)]
    tm = table_map(cols)
    present = tuple(range(len(cols)))
    rows = [
        [-5, 2 ** 64 - 1, 2, Decimal("-0.50"), Decimal("5E-30"), Decimal("-7"), (2024, 2, 29, 23, 59, 59, 123456),
         (1, 1, 1, 0, 0, 0, 990000), (1700000000, 5000), (True, 838, 59, 59, 5000), "h\u00e9 \U0001f600", 0.1,
         1e16, 1000, 3, b"\x80caf\xe9", b"ab"],
        [None] * len(cols),
    ]
    body = b"".join(encode_row(cols, present, r) for r in rows)
    assert check_cells("insert", tm, body, (), present) == "cells"
    texts = [t for t, _ in image_cells(R.decode_cells("insert", tm, body, (), present).after)[: len(cols)]]
    assert texts == ["-5", "18446744073709551615", "b", "-0.50", "0." + "0" * 29 + "5", "-7",
                     "2024-02-29 23:59:59.123456", "0001-01-01 00:00:00.99", "2023-11-14 22:13:20.005",
                     "-838:59:59.005", "h\u00e9 \U0001f600", repr(struct.unpack("<f", struct.pack("<f", 0.1))[0]),
                     "1e+16", "1000", "x,y", "\u20accaf\u00e9", None]
    year, date = Col(CT.YEAR, 0, encode=lambda v: bytes([v])), Col(CT.DATE, 0, encode=lambda v: v)
    utf8 = varchar(8, UTF8MB4)
    for col, raw in [(year, 0), (date, bytes(3)), (utf8, b"\x02\xc3\x28")]:  # YEAR 0, zero date, bad UTF-8
        one = table_map([col])
        tm_body = b"\x00" + (bytes([raw]) if type(raw) is int else raw)
        assert R.decode_cells("insert", one, tm_body, (), (0,)) is None
        assert check_cells("insert", one, tm_body, (), (0,)) == "declined"


def test_cells_do_not_leak():
    S = speedups()
    member = "member-" + "a" * 20
    cols = [int_col(CT.LONG, 4, False), varchar(20, UTF8MB4), newdecimal(10, 2), set_col(("f", "y"), 1),
            datetime2(3), enum((member, "b"), 1), Col(CT.BLOB, 3, None, LATIN1, encode=prefixed(3))]
    tm = table_map(cols)
    present = tuple(range(len(cols)))
    row = [1, "abc", Decimal("1.25"), 3, (2020, 1, 2, 3, 4, 5, 6000), 1, b"caf\xe9"]
    good = (encode_row(cols, present, row) + encode_row(cols, present, [None] * 3 + row[3:])) * 10
    plan = R.row_plan(tm, present)
    cases = [(good, 0), (good, 2), (good[:-3], 0), (good + b"\x01", 2)]

    def run():
        for body, op in cases:
            try:
                S.decode_cells(body, op, plan, plan)
            except S.Fallback:
                pass

    run()
    refs = sys.getrefcount(member)
    assert_no_growth(run)
    assert sys.getrefcount(member) == refs


# -- the existing suites both ways -----------------------------------------------------------

def _corpus_files() -> list[Path]:
    files: list[Path] = []
    mdb = CORPUS / "mariadb-10.11" / "binlogs"
    if mdb.exists():
        files += sorted(mdb.glob("binlog.0000??"))
    manifest = CORPUS / "public" / "MANIFEST.tsv"
    if manifest.exists():
        with open(manifest, newline="") as fh:
            files += [CORPUS / "public" / row["file"] for row in csv.DictReader(fh, delimiter="\t")]
        files += sorted((CORPUS / "public" / "derived").glob("*.unpacked"))
    return files


_OLDTIME_DECIMALS = {1: 0, 2: 3, 3: 6, 4: 0, 5: 2, 6: 6, 7: 0, 8: 4}


def _oldtime_hook(tm):
    from pipelines.binlog.columns import override_metas

    return override_metas(tm, _OLDTIME_DECIMALS) if (tm.schema, tm.table) == ("corpus", "t_oldtime") else tm


def _next(it):
    try:
        ev = next(it)
    except StopIteration:
        return ("end",)
    except BinlogError as e:
        return ("error", type(e).__name__, str(e))
    if type(ev) is RowsEvent:
        return ("rows", ev.header, ev.op, ev.columns_before, ev.columns_after, typed(ev.rows))
    return ("event", ev)


def _corpus_cases():
    cases = [pytest.param(p, None, id=p.name) for p in _corpus_files()]
    cases += [pytest.param(p, _oldtime_hook, id=p.name + "-schema-decimals")
              for p in _corpus_files() if p.name == "binlog.000017"]
    return cases


@pytest.mark.corpus
@pytest.mark.parametrize("path,hook", _corpus_cases())
def test_corpus_decodes_identically_both_ways(path, hook):
    """Every event of every corpus file: identical with the accelerator and with the
    Python decoders (so the conformance tests hold for both paths). binlog.000017 is
    also read with the schema's decimals for its MariaDB 5.3 temporal table."""
    speedups()
    with ExitStack() as stack:
        try:
            fast_s = stack.enter_context(EventStream(path, table_map_hook=hook))
            slow_s = stack.enter_context(EventStream(path, table_map_hook=hook))
        except BinlogError:
            return  # not a binlog: no events either way
        fast_it, slow_it = fast_s.events(), slow_s.events()
        count = 0
        while True:
            with decoder_path(True):
                fast = _next(fast_it)
            with decoder_path(False):
                slow = _next(slow_it)
            assert fast == slow, (path.name, count)
            if fast[0] in ("end", "error"):
                break
            count += 1


@pytest.mark.corpus
def test_corpus_rows_are_mostly_decoded_in_c():
    """Guards against a vacuous pass: the C decoder itself decodes nearly every rows
    event of the corpus, with the Python decoders' rows."""
    S = speedups()
    total = in_c = 0
    for path in _corpus_files():
        try:
            with EventStream(path, decode_rows=False) as s:
                for ev in s.events():
                    if type(ev) is not RowsEvent or ev.table_map is None or not ev.body or ev.partial:
                        continue
                    total += 1
                    plans = tuple(R.row_plan(ev.table_map, p)
                                  for p in PRESENTS[ev.op](ev.columns_before, ev.columns_after))
                    if None in plans:
                        continue
                    try:
                        got = S.decode_rows(ev.body, accel.OPS[ev.op], *plans)
                    except S.Fallback:
                        continue
                    with decoder_path(False):
                        want = R.decode_rows(ev.op, ev.table_map, ev.body, ev.columns_before, ev.columns_after,
                                             event_type=ev.header.type_code)
                    assert typed(got) == typed(want), (path.name, ev.header.pos)
                    in_c += 1
        except BinlogError:
            pass  # the broken public files
    if not total:
        pytest.skip("../shared/corpus is not present")
    assert in_c >= 0.95 * total, f"{in_c} of {total} rows events decoded in C"


def _row_tests():
    out = []
    for name, fn in sorted(vars(test_rows).items()):
        if not name.startswith("test_") or not callable(fn):
            continue
        if any(m.name == "parametrize" for m in getattr(fn, "pytestmark", [])):
            continue
        if set(inspect.signature(fn).parameters) <= {"corpus_dir"}:
            out.append(name)
    return out


@pytest.mark.parametrize("name", _row_tests())
def test_row_tests_without_the_accelerator(name):
    """The tests of test_rows.py (run accelerated by default) on the Python path."""
    speedups()
    fn = getattr(test_rows, name)
    kwargs = {}
    if "corpus_dir" in inspect.signature(fn).parameters:
        if not CORPUS.is_dir():
            pytest.skip(f"binlog corpus not found at {CORPUS}")
        kwargs["corpus_dir"] = CORPUS
    with decoder_path(False):
        fn(**kwargs)


@pytest.mark.parametrize("mode,expected", [("python", "False"), ("auto", "True"), ("c", "True")])
def test_binlog_decoder_environment_variable(mode, expected):
    speedups()
    env = dict(os.environ, BINLOG_DECODER=mode)
    out = subprocess.run([sys.executable, "-c", "from pipelines.binlog import accel; print(accel.ACCELERATED)"],
                         env=env, cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


@pytest.mark.corpus
def test_corpus_rows_mostly_become_cells_in_c():
    """Every rows event of the corpus: its cells are the canonical text of its values, and nearly
    every one is written in C (a vacuous pass would leave them all to Python)."""
    speedups()
    outcomes: dict[str, int] = {}
    for path in _corpus_files():
        try:
            with EventStream(path, decode_rows=False) as s:
                for ev in s.events():
                    if type(ev) is not RowsEvent or ev.table_map is None or not ev.body or ev.partial:
                        continue
                    what = check_cells(ev.op, ev.table_map, ev.body, ev.columns_before, ev.columns_after)
                    outcomes[what] = outcomes.get(what, 0) + 1
        except BinlogError:
            pass  # the broken public files
    total = sum(outcomes.values())
    if not total:
        pytest.skip("../shared/corpus is not present")
    assert outcomes.get("cells", 0) >= 0.9 * total, outcomes


def test_row_changes_refuse_cells(tmp_path):
    """A row change holds values: asking iter_changes for cells is an error, not rows left out."""
    from pipelines.binlog.changes import iter_changes

    path = REPO / "samples" / "binlogs" / "binlog.000001"
    assert any(type(ch).__name__ == "RowChange" for ch in iter_changes(str(path)))
    with pytest.raises(TypeError, match="row_cells"):
        next(iter_changes(str(path), row_cells=True))
