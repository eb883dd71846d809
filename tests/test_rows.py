"""Row images of whole rows events: insert/update/delete, errors, decoder caching,
MySQL 8 PARTIAL_UPDATE_ROWS (partial JSON), and every row of the MariaDB corpus
against ``mariadb-binlog -vvv`` (plus the MariaDB 5.3 temporal rows that tool cannot
read, against the table's final state)."""
from __future__ import annotations

import datetime as dt
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from pipelines.binlog import jsonb as J
from pipelines.binlog.columns import override_metas
from pipelines.binlog.constants import ColumnType as CT
from pipelines.binlog.values import InvalidText
from pipelines.binlog.errors import CorruptEvent, TruncatedEvent
from pipelines.binlog.jsonb import PartialJson
from pipelines.binlog.rows import decode_rows, image_as_dict, row_decoder
from test_columns import BINARY, UTF8MB4, Col, encode_row, int_col, prefixed, table_map, varchar
from test_jsonb import diff, diff_vector, encode as encode_json

UTC = dt.timezone.utc


def people():
    cols = [int_col(CT.LONG, 4, False), varchar(40, UTF8MB4), int_col(CT.TINY, 1, True)]
    return cols, table_map(cols, names=("id", "name", "age"))


ALL = (0, 1, 2)


def test_insert_update_delete():
    cols, tm = people()
    body = encode_row(cols, ALL, [1, "ann", 30]) + encode_row(cols, ALL, [2, None, 255])
    assert decode_rows("insert", tm, memoryview(body), (), ALL, event_type=30) == (
        (None, (1, "ann", 30)), (None, (2, None, 255)))
    assert decode_rows("delete", tm, body, ALL, (), event_type=32) == (
        ((1, "ann", 30), None), ((2, None, 255), None))
    upd = encode_row(cols, (0,), [1]) + encode_row(cols, (1, 2), ["bob", 31])
    upd += encode_row(cols, (0,), [2]) + encode_row(cols, (1, 2), [None, 1])
    assert decode_rows("update", tm, upd, (0,), (1, 2), event_type=31) == (
        ((1,), ("bob", 31)), ((2,), (None, 1)))
    assert decode_rows("insert", tm, b"", (), ALL, event_type=30) == ()


def test_image_as_dict():
    cols, tm = people()
    assert image_as_dict(tm, (0, 2), (7, 40)) == {"id": 7, "age": 40}
    assert image_as_dict(table_map(cols), (0, 2), (7, 40)) == {"@1": 7, "@3": 40}
    assert image_as_dict(tm, (0,), None) is None


def test_truncated_rows_name_the_table():
    cols, tm = people()
    body = encode_row(cols, ALL, [1, "ann", 30]) * 2
    for cut in range(1, len(body) // 2):
        with pytest.raises(TruncatedEvent, match=r"db\.t"):
            decode_rows("insert", tm, body[:-cut], (), ALL, event_type=30)


def test_text_not_valid_in_its_charset_keeps_its_bytes():
    # the compiled decoder decodes strictly; the reference path gives an InvalidText
    cols, tm = people()
    body = b"\x00" + struct.pack("<i", 1) + b"\x02\xc3\x28" + b"\x05"
    [(before, after)] = decode_rows("insert", tm, body, (), ALL, event_type=30)
    assert before is None and after[0] == 1 and after[2] == 5
    assert isinstance(after[1], InvalidText) and after[1] == "\ufffd(" and after[1].raw == b"\xc3\x28"


def test_image_without_columns_is_corrupt():
    cols, tm = people()
    with pytest.raises(CorruptEvent, match="no columns"):
        decode_rows("insert", tm, b"\x00", (), (), event_type=30)


def test_decoders_are_cached_by_layout():
    cols, tm1 = people()
    _, tm2 = people()  # a fresh but identical TABLE_MAP (logged before every statement)
    assert tm1 is not tm2
    d1 = row_decoder(tm1, ALL)
    assert row_decoder(tm1, ALL) is d1
    assert row_decoder(tm2, ALL) is d1
    assert row_decoder(tm2, (0,)) is not d1
    other = table_map([int_col(CT.LONG, 4, True)] + cols[1:])
    assert row_decoder(other, ALL) is not d1


# -- PARTIAL_UPDATE_ROWS -------------------------------------------------------------------

def json_col() -> Col:
    return Col(CT.JSON, 4, encode=lambda v: prefixed(4)(encode_json(v)))


def partial_table():
    cols = [int_col(CT.LONG, 4, False), json_col(), varchar(10, UTF8MB4), json_col()]
    return cols, table_map(cols, names=("id", "doc", "s", "meta"))


def after_image(cols, present, values, partial: dict[int, bytes], options: int = 1, json_bits: int = 0):
    """value_options, the partial bitmap over the table's JSON columns, then the image
    (partial columns carry a diff vector instead of a value)."""
    head = bytes([options]) + (bytes([json_bits]) if options & 1 else b"")
    bits, body = 0, b""
    for k, i in enumerate(present):
        if values[k] is None:
            bits |= 1 << k
        elif i in partial:
            body += partial[i]
        else:
            body += cols[i].encode(values[k])
    return head + bits.to_bytes((len(present) + 7) // 8, "little") + body


def test_partial_json_applied_to_the_before_image():
    cols, tm = partial_table()
    before = encode_row(cols, (0, 1, 2, 3), [1, {"a": 1, "b": [1, 2]}, "x", {"k": "v"}])
    vec = diff_vector(diff(J.REPLACE, "$.a", 2), diff(J.INSERT, "$.b[2]", 3), diff(J.INSERT, "$.c", None))
    after = after_image(cols, (0, 1, 2, 3), [1, "diff", "y", {"k": "w"}], {1: vec}, json_bits=0b01)
    rows = decode_rows("update", tm, before + after, (0, 1, 2, 3), (0, 1, 2, 3), partial=True, event_type=39)
    assert rows == (((1, '{"a": 1, "b": [1, 2]}', "x", '{"k": "v"}'),
                     (1, '{"a": 2, "b": [1, 2, 3], "c": null}', "y", '{"k": "w"}')),)


def test_partial_json_second_column_and_several_rows():
    cols, tm = partial_table()
    row1 = encode_row(cols, (0, 1, 3), [1, [1], {"n": 1}]) + after_image(
        cols, (0, 1, 3), [1, [2], "diff"], {3: diff_vector(diff(J.REMOVE, "$.n"))}, json_bits=0b10)
    row2 = encode_row(cols, (0, 1, 3), [2, [1], None]) + after_image(
        cols, (0, 1, 3), [2, [5], None], {}, options=0)  # value_options 0: no bitmap, full values
    rows = decode_rows("update", tm, row1 + row2, (0, 1, 3), (0, 1, 3), partial=True, event_type=39)
    assert rows == (((1, "[1]", '{"n": 1}'), (1, "[2]", "{}")), ((2, "[1]", None), (2, "[5]", None)))


def test_partial_json_without_the_before_value_is_left_to_the_caller():
    cols, tm = partial_table()
    vec = diff_vector(diff(J.REPLACE, "$.a", "z"))
    body = encode_row(cols, (0,), [1]) + after_image(cols, (0, 1), [1, "diff"], {1: vec}, json_bits=0b01)
    ((before, after),) = decode_rows("update", tm, body, (0,), (0, 1), partial=True, event_type=39)
    assert before == (1,)
    assert isinstance(after[1], PartialJson)
    assert after[1].apply('{"a": "y", "b": 1}') == '{"a": "z", "b": 1}'
    empty = encode_row(cols, (0,), [1]) + after_image(cols, (0, 1), [1, "diff"], {1: diff_vector()}, json_bits=1)
    ((_, after),) = decode_rows("update", tm, empty, (0,), (0, 1), partial=True, event_type=39)
    assert after[1].apply("[1]") == "[1]"


def test_partial_json_errors():
    cols, tm = partial_table()
    vec = diff_vector(diff(J.REPLACE, "$.missing", 1))
    body = encode_row(cols, (0, 1), [1, {"a": 1}]) + after_image(cols, (0, 1), [1, "d"], {1: vec}, json_bits=1)
    with pytest.raises(CorruptEvent, match="does not apply"):
        decode_rows("update", tm, body, (0, 1), (0, 1), partial=True, event_type=39)
    body = encode_row(cols, (0, 1), [1, None]) + after_image(
        cols, (0, 1), [1, "d"], {1: diff_vector(diff(J.REMOVE, "$.a"))}, json_bits=1)
    with pytest.raises(CorruptEvent, match="NULL before"):
        decode_rows("update", tm, body, (0, 1), (0, 1), partial=True, event_type=39)
    body = encode_row(cols, (0,), [1]) + after_image(cols, (0,), [1], {}, options=2)
    with pytest.raises(CorruptEvent, match="value_options"):
        decode_rows("update", tm, body, (0,), (0,), partial=True, event_type=39)
    with pytest.raises(CorruptEvent):
        decode_rows("insert", tm, body, (), (0,), partial=True, event_type=39)
    good = encode_row(cols, (0, 1), [1, {"a": 1}]) + after_image(
        cols, (0, 1), [1, "d"], {1: diff_vector(diff(J.REMOVE, "$.a"))}, json_bits=1)
    with pytest.raises(TruncatedEvent):
        decode_rows("update", tm, good[:-2], (0, 1), (0, 1), partial=True, event_type=39)


# -- corpus: MariaDB 5.3 temporal formats (mariadb-binlog cannot decode them) -----------------

OLDTIME_DECIMALS = {2: 3, 3: 6, 5: 2, 6: 6, 8: 4}  # t3 TIME(3), t6 TIME(6), dt2, dt6, ts4


@pytest.mark.corpus
def test_mariadb_53_temporal_rows_with_schema_decimals(corpus_dir: Path):
    from pipelines.binlog.stream import EventStream

    path = corpus_dir / "mariadb-10.11" / "binlogs" / "binlog.000017"
    images = []
    stream = EventStream(path, decode_rows=False)
    for ev in stream.events():
        tm = getattr(ev, "table_map", None)
        if tm is None or not hasattr(ev, "body") or tm.table != "t_oldtime":
            continue
        tm = override_metas(tm, OLDTIME_DECIMALS)
        for before, after in decode_rows(ev.op, tm, ev.body, ev.columns_before, ev.columns_after,
                                         event_type=ev.header.type_code):
            images.append((ev.op, before, after))
    td = lambda neg, h, m, s, us=0: -dt.timedelta(hours=h, minutes=m, seconds=s, microseconds=us) if neg else dt.timedelta(  # noqa: E731
        hours=h, minutes=m, seconds=s, microseconds=us)
    row1 = (1, td(True, 838, 59, 59), td(True, 12, 34, 56, 789000), td(False, 838, 59, 59, 999999),
            dt.datetime(1000, 1, 1), dt.datetime(2024, 2, 29, 23, 59, 59, 990000),
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
            dt.datetime(2038, 1, 19, 3, 14, 7, 999900, tzinfo=UTC))
    row2 = (2, dt.timedelta(0), td(True, 0, 0, 0, 1000), td(True, 0, 0, 0, 1), "0000-00-00 00:00:00",
            "0000-00-00 00:00:00.00", dt.datetime(2001, 2, 3, 4, 5, 6, 70809), "0000-00-00 00:00:00",
            dt.datetime(2001, 2, 3, 4, 5, 6, 70800, tzinfo=UTC))
    row2_after = row2[:2] + (td(False, 1, 2, 3, 456000),) + row2[3:]
    assert images == [("insert", None, row1), ("insert", None, row2), ("insert", None, (3,) + (None,) * 8),
                      ("update", row2, row2_after)]
    # without the schema's decimals the rows cannot be decoded, and the error says why
    stream = EventStream(path)
    with pytest.raises(TruncatedEvent, match="override_metas"):
        for _ in stream.events():
            pass
    # the final state of the table agrees ("01:02:03.456", "-00:00:00.000001", ...)
    tsv = (corpus_dir / "mariadb-10.11" / "final_state" / "corpus" / "t_oldtime.tsv").read_text().splitlines()
    assert tsv[2].split("\t")[2:4] == ["01:02:03.456", "-00:00:00.000001"]


# -- corpus: every row against mariadb-binlog -vvv ----------------------------------------------

CORPUS_FILES = [f"binlog.{n:06d}" for n in (2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 18, 19)]
CORPUS_FILES.insert(3, pytest.param("binlog.000005", marks=pytest.mark.slow))  # 8220 rows, ~10 s


def _comparable(value, spec, tm, i):
    """My value in the form ``binlog_text.parse_value`` gives (bytes, indexes, ...)."""
    if value is None:
        return None
    if spec.type == CT.ENUM and isinstance(value, str):
        return 0 if value == "" else tm.enum_values[i].index(value) + 1
    if spec.type == CT.SET and isinstance(value, str):
        names = tm.set_values[i]
        return sum(1 << names.index(v) for v in value.split(",")) if value else 0
    if isinstance(value, str) and spec.codec is not None:  # text columns (not zero-date text)
        return value.encode(spec.codec)
    if spec.type == CT.STRING and spec.binary:
        return value.rstrip(b"\0")  # mariadb-binlog prints BINARY without its padding
    return value


@pytest.mark.corpus
@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_rows_match_mariadb_binlog(corpus_dir: Path, name: str):
    from binlog_text import iter_rows, parse_text_file, parse_value

    from pipelines.binlog.stream import EventStream

    base = corpus_dir / "mariadb-10.11" / "binlogs"
    truth = list(iter_rows(parse_text_file(base / f"{name}.txt")))
    mine = []
    for ev in EventStream(base / name).events():
        if getattr(ev, "rows", None):
            for before, after in ev.rows:
                mine.append((ev, before, after))
    assert len(mine) == len(truth)
    checked = 0
    for (ev, before, after), t in zip(mine, truth):
        assert ev.op == t["op"] and ev.table_map.table == t["table"]
        for cols, values, printed, types in ((ev.columns_before, before, t["before"], t["before_types"]),
                                             (ev.columns_after, after, t["after"], t["after_types"])):
            if values is None:
                assert printed is None
                continue
            specs = row_decoder(ev.table_map, cols).specs
            assert sorted(printed) == [i + 1 for i in cols]
            for i, v in zip(cols, values):
                spec = specs[i]
                expected = parse_value(printed[i + 1], types[i + 1], unsigned=spec.unsigned)
                got = _comparable(v, spec, ev.table_map, i)
                if spec.type == CT.FLOAT and got is not None:
                    got = float("%g" % got)  # the tool prints FLOAT with 6 significant digits
                assert got == expected, (name, ev.header.pos, t["table"], i + 1, v, printed[i + 1])
                checked += 1
    assert checked > 0


# -- fuzz: any bytes give rows or a BinlogError, and the two decoders never disagree ------------

def _fuzz_table():
    from test_columns import blob, char, datetime2, enum, newdecimal, set_col, time2, timestamp2

    cols = [int_col(CT.LONG, 4, False), varchar(10, UTF8MB4), newdecimal(12, 2), datetime2(6), timestamp2(3),
            time2(2), char(4, BINARY), enum(("a", "b"), 1), set_col(("x", "y"), 1), blob(2, UTF8MB4),
            json_col(), Col(CT.DATE), Col(CT.YEAR), Col(CT.BIT, (3, 1)), Col(CT.VECTOR, 4), Col(CT.GEOMETRY, 4),
            Col(CT.TIME), Col(CT.DATETIME), Col(CT.TIMESTAMP), Col(CT.FLOAT, 4), Col(CT.DOUBLE, 8)]
    return table_map(cols)



@settings(max_examples=400, deadline=None)
@given(st.binary(min_size=1, max_size=120), st.sampled_from(["insert", "delete", "update"]),
       st.lists(st.integers(0, 20), min_size=1, max_size=8, unique=True).map(lambda x: tuple(sorted(x))))
def test_fuzz_rows_only_raise_binlog_errors(body, op, present):
    from pipelines.binlog.errors import BinlogError

    tm = _fuzz_table()
    before, after = {"insert": ((), present), "delete": (present, ()), "update": (present, present)}[op]
    try:
        rows = decode_rows(op, tm, body, before, after, event_type=30)
    except BinlogError as e:
        assert "compiled row decoder failed" not in str(e)
        return
    assert rows  # a non-empty body gives at least one row


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=80))
def test_fuzz_partial_rows_only_raise_binlog_errors(body):
    from pipelines.binlog.errors import BinlogError

    cols, tm = partial_table()
    try:
        decode_rows("update", tm, body, (0, 1, 2, 3), (0, 1, 3), partial=True, event_type=39)
    except BinlogError:
        pass


@pytest.mark.corpus
def test_mutated_corpus_rows_compiled_equals_reference(corpus_dir: Path):
    """Real row images with a few bytes changed: either both decoders give the same
    rows, or decoding raises a BinlogError (never a different exception)."""
    import random

    from pipelines.binlog.errors import BinlogError
    from pipelines.binlog.rows import _reference_images
    from pipelines.binlog.stream import EventStream

    evs = [ev for ev in EventStream(corpus_dir / "mariadb-10.11" / "binlogs" / "binlog.000002",
                                    decode_rows=False).events()
           if getattr(ev, "body", None) and ev.table_map is not None and len(ev.body) < 5000]
    rnd = random.Random(7)
    decoded = 0
    for _ in range(1500):
        ev = rnd.choice(evs)
        body = bytearray(ev.body)
        for _ in range(rnd.randrange(1, 4)):
            body[rnd.randrange(len(body))] = rnd.choice([0, 0xFF, rnd.randrange(256)])
        body = bytes(body[:rnd.randrange(len(body))] if rnd.random() < 0.2 else body)
        try:
            rows = decode_rows(ev.op, ev.table_map, body, ev.columns_before, ev.columns_after, event_type=30)
        except BinlogError as e:
            assert "compiled row decoder failed" not in str(e)
            continue
        presents = {"insert": (ev.columns_after,), "delete": (ev.columns_before,),
                    "update": (ev.columns_before, ev.columns_after)}[ev.op]
        ref = _reference_images(tuple(row_decoder(ev.table_map, p) for p in presents), body, len(body))
        ref = [(None, r) if ev.op == "insert" else (r, None) if ev.op == "delete" else r for r in ref]
        assert repr(list(rows)) == repr(ref)  # repr: NaN floats compare equal
        decoded += 1
    assert decoded > 100
