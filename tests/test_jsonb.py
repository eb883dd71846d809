"""MySQL binary JSON and partial-update diffs, against an encoder written from the
layout in ``sql-common/json_binary.cc`` and ``sql/json_diff.cc``."""
from __future__ import annotations

import base64
import json
import struct
from decimal import Decimal
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings, strategies as st

from pipelines.binlog import jsonb as J
from pipelines.binlog.errors import CorruptEvent, TruncatedEvent
from pipelines.binlog.jsonb import JsonOpaque

# -- encoder -----------------------------------------------------------------------------


class Typed(NamedTuple):
    """Force a scalar's binary type (e.g. UINT16 for a small unsigned value)."""

    t: int
    v: Any


_PACK = {J.INT16: "<h", J.UINT16: "<H", J.INT32: "<i", J.UINT32: "<I", J.INT64: "<q", J.UINT64: "<Q", J.DOUBLE: "<d"}


def varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def scalar(v) -> tuple[int, bytes]:
    if isinstance(v, Typed):
        return v.t, struct.pack(_PACK[v.t], v.v)
    if v is None:
        return J.LITERAL, b"\x00"
    if v is True:
        return J.LITERAL, b"\x01"
    if v is False:
        return J.LITERAL, b"\x02"
    if isinstance(v, int):
        for t, lo, hi in ((J.INT16, -(2**15), 2**15 - 1), (J.INT32, -(2**31), 2**31 - 1), (J.INT64, -(2**63), 2**63 - 1)):
            if lo <= v <= hi:
                return t, struct.pack(_PACK[t], v)
        return J.UINT64, struct.pack("<Q", v)
    if isinstance(v, float):
        return J.DOUBLE, struct.pack("<d", v)
    if isinstance(v, str):
        b = v.encode()
        return J.STRING, varlen(len(b)) + b
    if isinstance(v, JsonOpaque):
        return J.OPAQUE, bytes([v.field_type]) + varlen(len(v.data)) + v.data
    raise TypeError(v)


def value(v, large: bool) -> tuple[int, bytes]:
    if isinstance(v, (dict, list)):
        return container(v, large)
    return scalar(v)


def container(v, large: bool) -> tuple[int, bytes]:
    osz = 4 if large else 2
    fmt = "<I" if large else "<H"
    is_obj = isinstance(v, dict)
    items = list(v.items()) if is_obj else [(None, x) for x in v]
    n = len(items)
    header = 2 * osz + n * ((osz + 2) if is_obj else 0) + n * (1 + osz)
    off = header
    key_entries, keys = b"", b""
    for k, _ in items if is_obj else ():
        kb = k.encode()
        key_entries += struct.pack(fmt, off) + struct.pack("<H", len(kb))
        keys += kb
        off += len(kb)
    inline = {J.LITERAL, J.INT16, J.UINT16} | ({J.INT32, J.UINT32} if large else set())
    value_entries, blobs = b"", b""
    for _, x in items:
        t, data = value(x, large)
        if t in inline:
            value_entries += bytes([t]) + data.ljust(osz, b"\0")
        else:
            value_entries += bytes([t]) + struct.pack(fmt, off)
            blobs += data
            off += len(data)
    t = (J.LARGE_OBJECT if large else J.SMALL_OBJECT) if is_obj else (J.LARGE_ARRAY if large else J.SMALL_ARRAY)
    return t, struct.pack(fmt, n) + struct.pack(fmt, off) + key_entries + value_entries + keys + blobs


def encode(v, large: bool = False) -> bytes:
    t, data = value(v, large)
    return bytes([t]) + data


def netlen(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 2**16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 2**24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def diff(op: int, path: str, v=None) -> bytes:
    p = path.encode()
    out = bytes([op]) + netlen(len(p)) + p
    if op != J.REMOVE:
        doc = encode(v)
        out += netlen(len(doc)) + doc
    return out


def diff_vector(*diffs: bytes) -> bytes:
    body = b"".join(diffs)
    return len(body).to_bytes(4, "little") + body


def text(doc: bytes) -> str:
    return J.json_text(doc)


# -- documents -----------------------------------------------------------------------------


def test_docstring_vector():
    raw = bytes.fromhex("000200140012000100130001000501000400006162")
    assert raw == encode({"a": 1, "b": None})
    assert text(raw) == '{"a": 1, "b": null}'


def test_empty_value_is_null():
    assert text(b"") == "null"


@pytest.mark.parametrize(
    "v,expected",
    [
        (None, "null"),
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-32768, "-32768"),
        (Typed(J.UINT16, 65535), "65535"),
        (Typed(J.INT32, -(2**31)), "-2147483648"),
        (Typed(J.UINT32, 2**32 - 1), "4294967295"),
        (Typed(J.INT64, -(2**63)), "-9223372036854775808"),
        (Typed(J.UINT64, 2**64 - 1), "18446744073709551615"),
        (1.5, "1.5"),
        (1.0, "1.0"),
        ("", '""'),
        ("héllo \u20ac \U0001f600", '"héllo \u20ac \U0001f600"'),
    ],
)
def test_scalars(v, expected):
    assert text(encode(v)) == expected


def test_nested_containers_keep_stored_key_order():
    doc = {"b": [True, None, {"x": "y"}], "a": {"k": [1, [2, []], {}]}, "longer": -7}
    assert text(encode(doc)) == '{"b": [true, null, {"x": "y"}], "a": {"k": [1, [2, []], {}]}, "longer": -7}'
    assert text(encode([])) == "[]"
    assert text(encode({})) == "{}"


def test_inline_values_in_small_and_large_containers():
    doc = [Typed(J.INT16, -5), Typed(J.UINT16, 7), Typed(J.INT32, -70000), Typed(J.UINT32, 70000), None, False]
    assert text(encode(doc, large=False)) == "[-5, 7, -70000, 70000, null, false]"
    assert text(encode(doc, large=True)) == "[-5, 7, -70000, 70000, null, false]"
    assert text(encode({"a": doc}, large=True)) == '{"a": [-5, 7, -70000, 70000, null, false]}'


def test_large_document_over_64k():
    big = {"k%03d" % i: "x" * 1000 for i in range(100)}
    raw = encode(big, large=True)
    assert len(raw) > 65536 and raw[0] == J.LARGE_OBJECT
    assert json.loads(text(raw)) == big
    arr = ["é" * 40000, ["y" * 30000]]
    raw = encode(arr, large=True)
    assert raw[0] == J.LARGE_ARRAY
    assert text(raw) == json.dumps(arr, ensure_ascii=False)


def test_string_lengths_use_variable_length_sizes():
    for n in (127, 128, 16383, 16384, 70000):
        s = "a" * n
        raw = encode(s)
        assert raw[1:1 + len(varlen(n))] == varlen(n)
        assert text(raw) == '"' + s + '"'


def test_escaping_like_mysql_double_quote():
    s = 'q"b\\s/\b\f\n\r\t\x00\x01\x1f\x7f é'
    assert text(encode(s)) == '"q\\"b\\\\s/\\b\\f\\n\\r\\t\\u0000\\u0001\\u001f\x7f é"'
    assert text(encode({"k\n": 1})) == '{"k\\n": 1}'


@pytest.mark.parametrize(
    "x,expected",
    [
        (1.0, "1.0"), (-1.0, "-1.0"), (0.0, "0.0"), (-0.0, "-0.0"), (1.5, "1.5"), (0.1, "0.1"),
        (3.14159, "3.14159"), (1e100, "1e100"), (1e-7, "0.0000001"), (1e-15, "0.000000000000001"),
        (1e-16, "1e-16"), (2.5e-15, "0.0000000000000025"), (1e15, "1e15"), (123456789012345.0, "123456789012345.0"),
        (1234567890123456.8, "1234567890123456.8"), (1.2345678901234568e16, "1.2345678901234568e16"),
        (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e308"), (-2.5e-20, "-2.5e-20"),
        (100.0, "100.0"), (1e21, "1e21"),
    ],
)
def test_double_formatting_my_gcvt(x, expected):
    assert J.json_double_text(x) == expected
    assert text(encode(x)) == expected


def dt_packed(y, mo, d, h=0, mi=0, s=0, us=0, neg=False) -> bytes:
    v = ((((y * 13 + mo) << 5 | d) << 17 | h << 12 | mi << 6 | s) << 24) + us
    return (-v if neg else v).to_bytes(8, "little", signed=True)


def time_packed(h, mi, s, us=0, neg=False) -> bytes:
    v = ((h << 12 | mi << 6 | s) << 24) + us
    return (-v if neg else v).to_bytes(8, "little", signed=True)


def test_opaque_temporal_and_decimal():
    doc = [
        JsonOpaque(10, dt_packed(2015, 1, 15)),  # DATE
        JsonOpaque(12, dt_packed(2015, 1, 15, 23, 24, 25)),  # DATETIME
        JsonOpaque(7, dt_packed(2015, 1, 15, 23, 24, 25, 120000)),  # TIMESTAMP
        JsonOpaque(11, time_packed(23, 24, 25)),  # TIME
        JsonOpaque(11, time_packed(838, 59, 59, 500000, neg=True)),
        JsonOpaque(246, bytes([10, 2]) + bytes.fromhex("8000003039")),  # DECIMAL(10,2) 48.57
        JsonOpaque(246, bytes([5, 2]) + bytes(b ^ 0xFF for b in bytes.fromhex("80031f"))),  # -3.31
    ]
    assert text(encode(doc)) == (
        '["2015-01-15", "2015-01-15 23:24:25.000000", "2015-01-15 23:24:25.120000", '
        '"23:24:25.000000", "-838:59:59.500000", 48.57, -3.31]'
    )


def test_opaque_blob_is_base64_with_mysql_line_breaks():
    assert text(encode(JsonOpaque(252, b"abc"))) == '"base64:type252:YWJj"'
    data = bytes(range(100))
    b64 = base64.b64encode(data).decode()
    expected = "base64:type15:" + b64[:76] + "\\n" + b64[76:]
    assert text(encode(JsonOpaque(15, data))) == '"' + expected + '"'
    assert text(encode(JsonOpaque(253, "v\u00e9".encode()))) == '"v\u00e9"'  # VAR_STRING: a string


@pytest.mark.parametrize(
    "raw",
    [
        b"\x0d",  # unknown type
        b"\x04\x07",  # unknown literal
        b"\x00\x01\x00\xff\x00",  # container size past the end
        bytes.fromhex("0001000a00080001000c0a00") + b"a",  # value offset inside header
        b"\x0c\x05ab",  # string past the end
        b"\x0c\xff\xff\xff\xff\xff\x01",  # length longer than 5 bytes
        b"\x0b\x00\x00",  # short double
        b"\x0c\x02\xc3\x28",  # invalid utf-8
    ],
)
def test_corrupt_documents_raise_corrupt_event(raw):
    with pytest.raises(CorruptEvent):
        text(raw)


def test_too_deep():
    doc: Any = 1
    for _ in range(J.MAX_DEPTH + 5):
        doc = [doc]
    with pytest.raises(CorruptEvent):
        text(encode(doc))


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20),
)
json_trees = st.recursive(
    json_scalars,
    lambda kids: st.lists(kids, max_size=5) | st.dictionaries(st.text(max_size=8), kids, max_size=5),
    max_leaves=30,
)


@settings(max_examples=200)
@given(json_trees, st.booleans())
def test_roundtrip_property(tree, large):
    raw = encode(tree, large)
    assert J.parse_binary(raw) == tree
    assert json.loads(text(raw)) == tree  # doubles print so that they read back exactly


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_double_text_reads_back_exactly(x):
    assert float(J.json_double_text(x)) == x


# -- paths and diffs --------------------------------------------------------------------------


def test_parse_path():
    L = J.Leg
    assert J.parse_path("$") == ()
    assert J.parse_path('$.a[1]."b c"[last-2][last] .d') == (
        L("a"), L(None, 1), L("b c"), L(None, 2, True), L(None, 0, True), L("d"),
    )
    assert J.parse_path('$."a\\"b"') == (L('a"b'),)
    for bad in ("a.b", "$[*]", "$.*", "$**.a", "$[1 to 2]", "$.", "$["):
        with pytest.raises(CorruptEvent):
            J.parse_path(bad)


def apply(doc, *diffs: bytes) -> str:
    vec, off = J.read_diff_vector(diff_vector(*diffs), 0)
    return J.to_text(J.apply_diffs(J.parse_binary(encode(doc)), vec))


def test_replace_insert_remove():
    doc = {"a": 1, "b": [1, 2, 3], "cc": {"x": True}}
    assert apply(doc, diff(J.REPLACE, "$.a", "new")) == '{"a": "new", "b": [1, 2, 3], "cc": {"x": true}}'
    assert apply(doc, diff(J.REPLACE, "$.b[1]", [9])) == '{"a": 1, "b": [1, [9], 3], "cc": {"x": true}}'
    assert apply(doc, diff(J.REPLACE, "$.b[last]", 0.5)) == '{"a": 1, "b": [1, 2, 0.5], "cc": {"x": true}}'
    assert apply(doc, diff(J.REMOVE, "$.cc.x")) == '{"a": 1, "b": [1, 2, 3], "cc": {}}'
    assert apply(doc, diff(J.REMOVE, "$.b[0]"), diff(J.REMOVE, "$.a")) == '{"b": [2, 3], "cc": {"x": true}}'
    # INSERT into an object: MySQL keeps keys ordered by length, then bytes
    assert apply(doc, diff(J.INSERT, "$.c", 5)) == '{"a": 1, "b": [1, 2, 3], "c": 5, "cc": {"x": true}}'
    assert apply(doc, diff(J.INSERT, '$."zzz"', None)) == '{"a": 1, "b": [1, 2, 3], "cc": {"x": true}, "zzz": null}'
    assert apply(doc, diff(J.INSERT, "$.A", 0)) == '{"A": 0, "a": 1, "b": [1, 2, 3], "cc": {"x": true}}'
    # INSERT into an array: at the index, clamped to the end; [last] inserts before the last
    assert apply(doc, diff(J.INSERT, "$.b[0]", 0)) == '{"a": 1, "b": [0, 1, 2, 3], "cc": {"x": true}}'
    assert apply(doc, diff(J.INSERT, "$.b[99]", 4)) == '{"a": 1, "b": [1, 2, 3, 4], "cc": {"x": true}}'
    assert apply(doc, diff(J.INSERT, "$.b[last]", 4)) == '{"a": 1, "b": [1, 2, 4, 3], "cc": {"x": true}}'
    # several diffs in one vector apply in order
    assert apply([1], diff(J.INSERT, "$[1]", 2), diff(J.REPLACE, "$[0]", {"k": [3]})) == '[{"k": [3]}, 2]'
    # an empty vector changes nothing
    assert apply(doc, ) == '{"a": 1, "b": [1, 2, 3], "cc": {"x": true}}'


@pytest.mark.parametrize(
    "d",
    [
        diff(J.REPLACE, "$.zz", 1),  # no such member
        diff(J.REPLACE, "$.b[3]", 1),  # out of bounds
        diff(J.REMOVE, "$.b[5]"),
        diff(J.INSERT, "$.a", 1),  # member exists
        diff(J.INSERT, "$.a.b", 1),  # parent is a scalar
        diff(J.REPLACE, "$", 1),  # the root
        diff(J.REMOVE, "$.b.x"),
    ],
)
def test_diffs_mysql_rejects(d):
    with pytest.raises(CorruptEvent):
        apply({"a": 1, "b": [1, 2, 3]}, d)


def test_read_diff_vector_errors_and_lengths():
    long_path = "$." + "k" * 300
    vec = diff_vector(diff(J.REPLACE, long_path, "v"))
    diffs, off = J.read_diff_vector(b"\xee" + vec + b"tail", 1)
    assert off == 1 + len(vec)
    assert diffs[0].path == long_path and diffs[0].value == "v"
    assert "REPLACE" in repr(diffs[0])
    with pytest.raises(TruncatedEvent):
        J.read_diff_vector(vec[:-1], 0)
    with pytest.raises(CorruptEvent):
        J.read_diff_vector(diff_vector(b"\x03\x01$"), 0)
    with pytest.raises(TruncatedEvent):
        J.read_diff_vector(b"\x01\x00", 0)


def test_partial_json_applies_to_text():
    diffs, _ = J.read_diff_vector(diff_vector(diff(J.REPLACE, "$.n", 2.0), diff(J.INSERT, "$.m", Decimal_opaque())), 0)
    pj = J.PartialJson(diffs)
    before = '{"d": "2020-01-01", "n": 1, "price": 10.50}'
    assert pj.apply(before) == '{"d": "2020-01-01", "m": 1.25, "n": 2.0, "price": 10.50}'


def Decimal_opaque() -> JsonOpaque:
    return JsonOpaque(246, bytes([3, 2]) + bytes.fromhex("81") + bytes([25]))


def test_decimal_opaque_helper():
    assert text(encode(Decimal_opaque())) == "1.25"
    assert J.to_text(Decimal("0.000000001")) == "0.000000001"


def test_partial_json_prints_as_its_diffs():
    # dump (text and jsonl) of a PARTIAL_UPDATE_ROWS value whose document is not in the event
    from pipelines.binlog.dump import _text_value
    from pipelines.binlog.values import json_value

    pj = J.PartialJson((J.JsonDiff(J.REPLACE, "$.age", (), 31), J.JsonDiff(J.REMOVE, "$.old", ())))
    expected = {"partial_json": [{"op": "REPLACE", "path": "$.age", "value": "31"}, {"op": "REMOVE", "path": "$.old"}]}
    assert json_value(pj) == expected
    assert json.loads(_text_value(pj, None)) == expected
