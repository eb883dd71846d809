"""MySQL binary JSON (column type 245) -> JSON text exactly as MySQL prints it, and
the partial-update diffs of ``PARTIAL_UPDATE_ROWS`` events.

Binary layout (``sql-common/json_binary.cc``): a document is a type byte and a value.

==========  =====================  ================================================
type        name                   value
==========  =====================  ================================================
0x00/0x01   small/large object     count, size, key entries (offset, uint16 length),
                                   value entries (type, offset-or-inline), keys, values
0x02/0x03   small/large array      count, size, value entries, values
0x04        literal                0x00 null, 0x01 true, 0x02 false
0x05..0x0a  int16 uint16 int32     little-endian
            uint32 int64 uint64
0x0b        double                 8 bytes little-endian
0x0c        string                 variable-length length (7 bits a byte) + utf8mb4
0x0f        opaque                 field type byte, variable-length length, data
==========  =====================  ================================================

Small containers use 2-byte counts and offsets, large ones 4-byte; offsets count
from the first byte after the container's type byte. Literals and 16-bit integers
(and in large containers 32-bit ones) are stored inline in their value entry.

The in-memory tree is plain Python: ``dict`` (keys in stored order), ``list``,
``str``, ``int``, ``float`` (a JSON double), ``True``/``False``/``None``, plus
:class:`JsonOpaque` for opaque values and :class:`JsonNumber` for numbers read back
from JSON text. :func:`to_text` prints it as ``Json_wrapper::to_string`` does:
``{"a": 1, "b": [true, null]}``, doubles through ``my_gcvt`` (``1.5``, ``1e100``,
``1.0``), DECIMAL opaques as numbers, DATE/TIME/DATETIME/TIMESTAMP opaques as
quoted strings with 6 fractional digits, other opaques as
``"base64:type<N>:<base64>"``.

>>> to_text(parse_binary(bytes.fromhex("000200140012000100130001000501000400006162")))
'{"a": 1, "b": null}'
"""
from __future__ import annotations

import base64
import json
import math
import re
import struct
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, NamedTuple

from .constants import ColumnType
from .decimal import decimal_bin_size, newdecimal_reader
from .errors import BinlogError, CorruptEvent, TruncatedEvent
from .wire import packed_int

SMALL_OBJECT = 0x00
LARGE_OBJECT = 0x01
SMALL_ARRAY = 0x02
LARGE_ARRAY = 0x03
LITERAL = 0x04
INT16 = 0x05
UINT16 = 0x06
INT32 = 0x07
UINT32 = 0x08
INT64 = 0x09
UINT64 = 0x0A
DOUBLE = 0x0B
STRING = 0x0C
OPAQUE = 0x0F

LITERAL_NULL = 0x00
LITERAL_TRUE = 0x01
LITERAL_FALSE = 0x02

MAX_DEPTH = 150  # MySQL refuses documents deeper than 100

_I16 = struct.Struct("<h")
_U16 = struct.Struct("<H")
_I32 = struct.Struct("<i")
_U32 = struct.Struct("<I")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")

_FIXED = {
    INT16: _I16,
    UINT16: _U16,
    INT32: _I32,
    UINT32: _U32,
    INT64: _I64,
    UINT64: _U64,
    DOUBLE: _F64,
}


class JsonOpaque(NamedTuple):
    """An opaque JSON value: a MySQL column type code and its binary data."""

    field_type: int
    data: bytes


class JsonNumber(str):
    """A number read from JSON text, printed back verbatim."""

    __slots__ = ()


# -- binary -> tree -----------------------------------------------------------------

def _corrupt(msg: str) -> CorruptEvent:
    return CorruptEvent(f"binary JSON: {msg}")


def _varlen(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Variable-length unsigned int (7 bits a byte, low first, at most 5 bytes)."""
    length = 0
    for i in range(5):
        if pos + i >= end:
            raise _corrupt("length runs past the end of the value")
        b = buf[pos + i]
        length |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            if length > 0xFFFFFFFF:
                raise _corrupt(f"length {length} too large")
            return length, pos + i + 1
    raise _corrupt("length longer than 5 bytes")


def _scalar(t: int, buf: bytes, pos: int, end: int):
    s = _FIXED.get(t)
    if s is not None:
        if pos + s.size > end:
            raise _corrupt(f"type 0x{t:02x} needs {s.size} bytes, {end - pos} left")
        return s.unpack_from(buf, pos)[0]
    if t == STRING:
        n, pos = _varlen(buf, pos, end)
        if pos + n > end:
            raise _corrupt(f"string of {n} bytes, {end - pos} left")
        try:
            return buf[pos:pos + n].decode("utf-8")
        except UnicodeDecodeError as e:
            raise _corrupt(f"string is not utf8mb4: {e}") from None
    if t == LITERAL:
        if pos >= end:
            raise _corrupt("missing literal")
        return _literal(buf[pos])
    if t == OPAQUE:
        if pos >= end:
            raise _corrupt("missing opaque type")
        ft = buf[pos]
        n, pos = _varlen(buf, pos + 1, end)
        if pos + n > end:
            raise _corrupt(f"opaque value of {n} bytes, {end - pos} left")
        return JsonOpaque(ft, bytes(buf[pos:pos + n]))
    raise _corrupt(f"unknown value type 0x{t:02x}")


def _literal(b: int):
    if b == LITERAL_NULL:
        return None
    if b == LITERAL_TRUE:
        return True
    if b == LITERAL_FALSE:
        return False
    raise _corrupt(f"unknown literal 0x{b:02x}")


def _value(t: int, buf: bytes, pos: int, end: int, depth: int):
    if t <= LARGE_ARRAY:
        if depth > MAX_DEPTH:
            raise _corrupt(f"nested deeper than {MAX_DEPTH}")
        return _container(t, buf, pos, end, depth + 1)
    return _scalar(t, buf, pos, end)


def _container(t: int, buf: bytes, base: int, end: int, depth: int):
    large = t & 1
    is_object = t <= LARGE_OBJECT
    osz = 4 if large else 2
    if base + 2 * osz > end:
        raise _corrupt("container header runs past the end")
    if large:
        count, size = struct.unpack_from("<II", buf, base)
    else:
        count, size = struct.unpack_from("<HH", buf, base)
    cend = base + size
    if cend > end:
        raise _corrupt(f"container of {size} bytes, {end - base} left")
    key_entry = osz + 2 if is_object else 0
    value_entry = 1 + osz
    header = 2 * osz + count * (key_entry + value_entry)
    if header > size:
        raise _corrupt(f"{count} entries do not fit in a {size}-byte container")
    inline = (LITERAL, INT16, UINT16, INT32, UINT32) if large else (LITERAL, INT16, UINT16)
    off_fmt = _U32 if large else _U16
    values = []
    vpos = base + 2 * osz + count * key_entry
    for i in range(count):
        e = vpos + i * value_entry
        vt = buf[e]
        if vt in inline:
            if vt == LITERAL:
                values.append(_literal(buf[e + 1]))
            else:
                values.append(_FIXED[vt].unpack_from(buf, e + 1)[0])
        else:
            voff = off_fmt.unpack_from(buf, e + 1)[0]
            if voff < header or voff >= size:
                raise _corrupt(f"value offset {voff} outside its {size}-byte container")
            values.append(_value(vt, buf, base + voff, cend, depth))
    if not is_object:
        return values
    obj = {}
    kpos = base + 2 * osz
    for i in range(count):
        e = kpos + i * key_entry
        koff = off_fmt.unpack_from(buf, e)[0]
        klen = _U16.unpack_from(buf, e + osz)[0]
        if koff < header or koff + klen > size:
            raise _corrupt(f"key at {koff}+{klen} outside its {size}-byte container")
        try:
            key = buf[base + koff:base + koff + klen].decode("utf-8")
        except UnicodeDecodeError as e:
            raise _corrupt(f"key is not utf8mb4: {e}") from None
        obj[key] = values[i]
    return obj


def parse_binary(data) -> Any:
    """Tree of a binary JSON document (``b""`` is the JSON null, as MySQL reads it)."""
    buf = bytes(data)
    if not buf:
        return None
    try:
        return _value(buf[0], buf, 1, len(buf), 0)
    except (struct.error, IndexError) as e:
        raise _corrupt(f"truncated or inconsistent document ({e})") from None


# -- tree -> text -------------------------------------------------------------------

_encode_str = json.encoder.encode_basestring  # escapes exactly as MySQL's double_quote


def _shortest_digits(x: float) -> tuple[str, int]:
    """dtoa mode 0 for ``x >= 0``: (digits, decpt) with ``x = 0.digits * 10**decpt``."""
    if x == 0:
        return "0", 1
    mant, _, exp = repr(x).partition("e")
    ip, _, fp = mant.partition(".")
    raw = ip + fp
    stripped = raw.lstrip("0")
    decpt = len(ip) - (len(raw) - len(stripped)) + (int(exp) if exp else 0)
    return stripped.rstrip("0"), decpt


_GCVT_WIDTH = 34  # MY_GCVT_MAX_FIELD_WIDTH = DBL_DIG + 4 + max(5, MAX_DECPT_FOR_F_FORMAT)
_MAX_DECPT_FOR_F_FORMAT = 15  # DBL_DIG


def format_double(x: float) -> str:
    """``my_gcvt(x, MY_GCVT_ARG_DOUBLE, MY_GCVT_MAX_FIELD_WIDTH)`` (``strings/dtoa.cc``).

    With a 34-character field the shortest round-trip digits (at most 17) always fit,
    so only the choice between the ``f`` and ``e`` forms remains.
    """
    if not math.isfinite(x):
        raise CorruptEvent(f"binary JSON: double {x!r} is not a JSON number")
    neg = math.copysign(1.0, x) < 0
    width = _GCVT_WIDTH - (x < 0)
    digits, decpt = _shortest_digits(-x if neg else x)
    n = len(digits)
    exp_len = 1 + (decpt >= 101 or decpt <= -99) + (decpt >= 11 or decpt <= -9)
    f_len = n - decpt + 2 if decpt <= 0 else (n + 1 if decpt < n else decpt)
    have_space = f_len <= width
    force_e = decpt <= 0 and width <= 2 - decpt and width >= 3 + exp_len
    use_f = (
        have_space
        or (decpt <= width and (decpt >= -1 or (decpt == -2 and (n > 1 or not force_e))) and not force_e)
    ) and (
        not have_space
        or (decpt >= -_MAX_DECPT_FOR_F_FORMAT + 1 and (decpt <= _MAX_DECPT_FOR_F_FORMAT or n > decpt))
    )
    sign = "-" if neg else ""
    if use_f:
        if decpt <= 0:
            return f"{sign}0.{'0' * -decpt}{digits}"
        if decpt < n:
            return f"{sign}{digits[:decpt]}.{digits[decpt:]}"
        return f"{sign}{digits}{'0' * (decpt - n)}"
    e = decpt - 1
    body = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{sign}{body}e{'-' if e < 0 else ''}{abs(e)}"


def json_double_text(x: float) -> str:
    """A JSON double as MySQL prints it: ``my_gcvt`` plus ``.0`` when it looks integral."""
    text = format_double(x)
    if "." not in text and "e" not in text:
        text += ".0"
    return text


def _packed_temporal(data: bytes, what: str) -> int:
    if len(data) < 8:
        raise _corrupt(f"{what} opaque of {len(data)} bytes (need 8)")
    return int.from_bytes(data[:8], "little", signed=True)


def _datetime_packed_text(packed: int, with_time: bool) -> str:
    neg = packed < 0
    if neg:
        packed = -packed
    usec = packed & 0xFFFFFF
    ymdhms = packed >> 24
    ymd = ymdhms >> 17
    ym = ymd >> 5
    hms = ymdhms & 0x1FFFF
    text = f"{ym // 13:04d}-{ym % 13:02d}-{ymd & 31:02d}"
    if with_time:
        text += f" {hms >> 12:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}.{usec:06d}"
    return text


def _time_packed_text(packed: int) -> str:
    neg = packed < 0
    if neg:
        packed = -packed
    usec = packed & 0xFFFFFF
    hms = packed >> 24
    return f"{'-' if neg else ''}{(hms >> 12) & 0x3FF:02d}:{(hms >> 6) & 63:02d}:{hms & 63:02d}.{usec:06d}"


def opaque_text(v: JsonOpaque) -> str:
    """Text of an opaque value inside a document (already quoted when it is a string)."""
    ft, data = v
    if ft == ColumnType.NEWDECIMAL:
        if len(data) < 2:
            raise _corrupt("DECIMAL opaque without precision and scale")
        precision, scale = data[0], data[1]
        try:
            size = decimal_bin_size(precision, scale)
        except BinlogError:
            raise _corrupt(f"DECIMAL opaque with precision {precision} scale {scale}") from None
        if len(data) < 2 + size:
            raise _corrupt(f"DECIMAL({precision},{scale}) opaque of {len(data)} bytes")
        return format(newdecimal_reader(precision, scale)(data, 2), "f")
    if ft == ColumnType.DATE:
        return '"' + _datetime_packed_text(_packed_temporal(data, "DATE"), False) + '"'
    if ft in (ColumnType.DATETIME, ColumnType.TIMESTAMP):
        return '"' + _datetime_packed_text(_packed_temporal(data, "DATETIME"), True) + '"'
    if ft == ColumnType.TIME:
        return '"' + _time_packed_text(_packed_temporal(data, "TIME")) + '"'
    if ft == ColumnType.VAR_STRING:
        try:
            return _encode_str(data.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise _corrupt(f"string opaque is not utf8mb4: {e}") from None
    b64 = base64.b64encode(data).decode("ascii")
    if len(b64) > 76:  # MySQL's base64_encode breaks lines every 76 characters
        b64 = "\n".join(b64[i:i + 76] for i in range(0, len(b64), 76))
    return _encode_str(f"base64:type{ft}:{b64}")


def _emit(v, out: list) -> None:
    t = type(v)
    if t is str:
        out.append(_encode_str(v))
    elif t is dict:
        if not v:
            out.append("{}")
            return
        out.append("{")
        first = True
        for k, x in v.items():
            if not first:
                out.append(", ")
            first = False
            out.append(_encode_str(k))
            out.append(": ")
            _emit(x, out)
        out.append("}")
    elif t is list:
        if not v:
            out.append("[]")
            return
        out.append("[")
        first = True
        for x in v:
            if not first:
                out.append(", ")
            first = False
            _emit(x, out)
        out.append("]")
    elif t is int:
        out.append(str(v))
    elif v is None:
        out.append("null")
    elif v is True:
        out.append("true")
    elif v is False:
        out.append("false")
    elif t is float:
        out.append(json_double_text(v))
    elif t is JsonOpaque:
        out.append(opaque_text(v))
    elif t is JsonNumber:
        out.append(str.__str__(v))
    elif t is Decimal:
        out.append(format(v, "f"))
    else:
        raise TypeError(f"not a JSON tree node: {t.__name__}")


def to_text(tree) -> str:
    """JSON text of a tree, as MySQL's ``JSON_EXTRACT``/``CAST(... AS CHAR)`` print it."""
    out: list[str] = []
    _emit(tree, out)
    return "".join(out)


def json_text(data) -> str:
    """MySQL binary JSON -> text (``b""`` -> ``'null'``)."""
    return to_text(parse_binary(data))


def parse_text(text: str):
    """Tree of a JSON text (MySQL's own output): numbers are kept verbatim."""
    try:
        return json.loads(
            text,
            object_pairs_hook=dict,
            parse_float=JsonNumber,
            parse_int=_parse_int,
            parse_constant=_bad_constant,
        )
    except ValueError as e:
        raise CorruptEvent(f"not a JSON text: {e}") from None


def _parse_int(s: str):
    return int(s)


def _bad_constant(s: str):
    raise ValueError(f"{s} is not JSON")


# -- paths -----------------------------------------------------------------------------

class Leg(NamedTuple):
    """One leg of a JSON path: a member name, or an array index (``from_end``: ``last-N``)."""

    member: str | None
    index: int = 0
    from_end: bool = False


_WS = " \t\n\r"
_IDENT_END = re.compile(r"[.\[\s\"*]|$")
_INDEX = re.compile(r"\[\s*(?:(\d+)|last(?:\s*-\s*(\d+))?)\s*\]")


def parse_path(path: str) -> tuple[Leg, ...]:
    """Legs of a MySQL JSON path such as ``$.a[1]."b c"[last-1]`` (no wildcards or ranges)."""
    i, n = 0, len(path)
    while i < n and path[i] in _WS:
        i += 1
    if i >= n or path[i] != "$":
        raise CorruptEvent(f"JSON path {path!r} does not start with '$'")
    i += 1
    legs: list[Leg] = []
    while True:
        while i < n and path[i] in _WS:
            i += 1
        if i >= n:
            return tuple(legs)
        c = path[i]
        if c == ".":
            i += 1
            while i < n and path[i] in _WS:
                i += 1
            if i < n and path[i] == '"':
                try:
                    name, i = json.decoder.scanstring(path, i + 1)
                except ValueError:
                    raise CorruptEvent(f"bad quoted member in JSON path {path!r}") from None
            else:
                m = _IDENT_END.search(path, i)
                if m.start() == i:
                    raise CorruptEvent(f"bad member name in JSON path {path!r}")
                name, i = path[i:m.start()], m.start()
            legs.append(Leg(name))
        elif c == "[":
            m = _INDEX.match(path, i)
            if m is None:
                raise CorruptEvent(f"bad array index in JSON path {path!r}")
            if m.group(1) is not None:
                legs.append(Leg(None, int(m.group(1))))
            else:
                legs.append(Leg(None, int(m.group(2) or 0), True))
            i = m.end()
        else:
            raise CorruptEvent(f"unsupported JSON path {path!r} (wildcards and ranges cannot be diffed)")


def _position(leg: Leg, length: int) -> tuple[int, bool]:
    """``Json_array_index``: (position, within_bounds) of an array leg."""
    if leg.from_end:
        pos = length - leg.index - 1 if leg.index < length else 0
    else:
        pos = min(leg.index, length)
    return pos, leg.index < length


# -- partial JSON diffs -------------------------------------------------------------------

REPLACE, INSERT, REMOVE = 0, 1, 2
DIFF_OPERATIONS = ("REPLACE", "INSERT", "REMOVE")


@dataclass(frozen=True, slots=True)
class JsonDiff:
    """One logical JSON change (``Json_diff``): operation, path and (not for REMOVE) value."""

    operation: int
    path: str
    legs: tuple[Leg, ...]
    value: Any = None

    def __repr__(self) -> str:
        value = "" if self.operation == REMOVE else f", {to_text(self.value)}"
        return f"JsonDiff({DIFF_OPERATIONS[self.operation]}, {self.path!r}{value})"


@dataclass(frozen=True, slots=True)
class PartialJson:
    """An after-image JSON value logged as diffs whose document is not in the event
    (the before image does not hold the column): apply them to the previous value."""

    diffs: tuple[JsonDiff, ...]

    def as_json(self) -> list[dict]:
        """The diffs as JSON-ready objects: ``{"op", "path"[, "value"]}``, the value as JSON text
        (MySQL's spelling, so every JSON type, opaque ones included, keeps its exact form).

        >>> PartialJson((JsonDiff(REPLACE, "$.age", (), 31),)).as_json()
        [{'op': 'REPLACE', 'path': '$.age', 'value': '31'}]
        """
        return [{"op": DIFF_OPERATIONS[d.operation], "path": d.path,
                 **({} if d.operation == REMOVE else {"value": to_text(d.value)})} for d in self.diffs]

    def apply(self, before) -> str:
        """JSON text after applying the diffs to ``before`` (JSON text, or a tree)."""
        tree = parse_text(before) if isinstance(before, str) else before
        return to_text(apply_diffs(tree, self.diffs))

    @classmethod
    def from_json(cls, items) -> "PartialJson":
        """The inverse of :meth:`as_json` (what bronze keeps in a cell's text): a list of
        ``{"op", "path"[, "value"]}``, or that list as JSON text.

        >>> PartialJson.from_json('[{"op": "REPLACE", "path": "$.age", "value": "31"}]').apply('{"age": 30}')
        '{"age": 31}'
        """
        if isinstance(items, str):
            items = parse_text(items)
        if not isinstance(items, list):
            raise CorruptEvent(f"partial JSON diffs must be a list, got {type(items).__name__}")
        diffs = []
        for item in items:
            if not isinstance(item, dict) or item.get("op") not in DIFF_OPERATIONS or "path" not in item:
                raise CorruptEvent(f"not a partial JSON diff: {item!r}")
            op = DIFF_OPERATIONS.index(item["op"])
            value = None if op == REMOVE else parse_text(item["value"])
            diffs.append(JsonDiff(op, item["path"], parse_path(item["path"]), value))
        return cls(tuple(diffs))


def read_diff_vector(buf, off: int) -> tuple[tuple[JsonDiff, ...], int]:
    """``Json_diff_vector::read_binary``: a 4-byte length, then diffs of
    (operation byte, length-prefixed path, and unless REMOVE a length-prefixed
    binary JSON value). Returns (diffs, new_off)."""
    have = len(buf) - off
    if have < 4:
        raise TruncatedEvent(4, max(have, 0), "JSON diff vector length")
    length = int.from_bytes(buf[off:off + 4], "little")
    pos = off + 4
    end = pos + length
    if end > len(buf):
        raise TruncatedEvent(length, len(buf) - pos, "JSON diff vector")
    diffs = []
    while pos < end:
        op = buf[pos]
        if op > REMOVE:
            raise CorruptEvent(f"JSON diff: unknown operation {op}")
        n, pos = packed_int(buf, pos + 1, "JSON diff path length", end)
        if pos + n > end:
            raise TruncatedEvent(n, end - pos, "JSON diff path")
        try:
            path = bytes(buf[pos:pos + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptEvent("JSON diff: path is not utf8") from None
        pos += n
        legs = parse_path(path)
        value = None
        if op != REMOVE:
            n, pos = packed_int(buf, pos, "JSON diff value length", end)
            if pos + n > end:
                raise TruncatedEvent(n, end - pos, "JSON diff value")
            if n == 0:
                raise CorruptEvent(f"JSON diff {DIFF_OPERATIONS[op]} {path} without a value")
            value = parse_binary(buf[pos:pos + n])
            pos += n
        diffs.append(JsonDiff(op, path, legs, value))
    return tuple(diffs), end


def _key_order(key: str) -> tuple[int, bytes]:
    b = key.encode("utf-8")
    return len(b), b  # Json_key_comparator: shorter keys first, then bytewise


def _seek(node, legs):
    for leg in legs:
        if type(node) is list:
            if leg.member is not None:
                return None
            pos, ok = _position(leg, len(node))
            if not ok:
                return None
            node = node[pos]
        elif type(node) is dict:
            if leg.member is None or leg.member not in node:
                return None
            node = node[leg.member]
        else:
            return None
    return node


_MISSING = object()


def apply_diffs(tree, diffs) -> Any:
    """Apply diffs as ``apply_json_diffs`` (``sql/json_diff.cc``) does; returns the
    new root. Containers in ``tree`` are changed in place. A diff MySQL would reject
    raises :class:`CorruptEvent`."""
    for d in diffs:
        if not d.legs:
            raise CorruptEvent(f"JSON diff {d!r}: the root cannot be diffed")
        parent = _seek(tree, d.legs[:-1])
        last = d.legs[-1]
        done = False
        if type(parent) is dict and last.member is not None:
            exists = last.member in parent
            if d.operation == REPLACE and exists:
                parent[last.member] = d.value
                done = True
            elif d.operation == REMOVE and exists:
                del parent[last.member]
                done = True
            elif d.operation == INSERT and not exists:
                items = list(parent.items())
                k = _key_order(last.member)
                at = next((j for j, (key, _) in enumerate(items) if _key_order(key) > k), len(items))
                items.insert(at, (last.member, d.value))
                parent.clear()
                parent.update(items)
                done = True
        elif type(parent) is list and last.member is None:
            pos, ok = _position(last, len(parent))
            if d.operation == REPLACE and ok:
                parent[pos] = d.value
                done = True
            elif d.operation == REMOVE and ok:
                del parent[pos]
                done = True
            elif d.operation == INSERT:
                parent.insert(pos, d.value)
                done = True
        if not done:
            raise CorruptEvent(f"JSON diff {d!r} does not apply to the before image")
    return tree
