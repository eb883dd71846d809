"""Column metadata (TABLE_MAP) and column values (row images).

Two ways to decode a row image, which must always agree:

* the **reference** decoder, :func:`decode_row_reference`: a loop over
  ``COLUMN_DECODERS`` (``dict[ColumnType, decoder]``), each a pure
  ``decode_x(buf, off, spec) -> (value, new_off)`` that checks every length;
* the **compiled** decoder, :func:`compile_row_decoder`: Python source generated
  once per (table map, present columns) and per null-bitmap pattern, with runs of
  fixed-width columns unpacked by one precompiled ``struct.Struct`` and strings
  sliced and decoded inline. It trusts the bytes; when anything goes wrong
  (an exception, or a row running past the end of the buffer) the caller re-decodes
  with the reference decoder, which raises the precise :class:`BinlogError`.

Values:

===========================  ====================================================
column                       Python value
===========================  ====================================================
TINY..LONGLONG, INT24        ``int`` (unsigned when ``signedness[i]`` is True)
FLOAT / DOUBLE               ``float`` (FLOAT is the 4-byte single widened)
NEWDECIMAL / DECIMAL         ``Decimal``
BIT, YEAR                    ``int``
DATE                         ``date``; DATETIME: naive ``datetime``;
                             TIMESTAMP: ``datetime`` in UTC; TIME: ``timedelta``;
                             zero/invalid dates: MySQL's text (see temporal.py)
VARCHAR, CHAR, TEXT, BLOB    ``str`` decoded with the column's collation; ``bytes``
                             for the binary collation (63) or when the charset is
                             unknown; BINARY(n) is right-padded with ``\\0`` to n
ENUM / SET                   ``str`` (``''`` for index 0, ``'a,b'``) when the names
                             are known, else the ``int`` index / bitmask
JSON (MySQL binary)          ``str``, JSON text as MySQL prints it
MariaDB COMPRESSED columns   (types 140/141) inflated, then as VARCHAR/BLOB
GEOMETRY                     ``bytes`` (4-byte SRID + WKB)
VECTOR                       ``list[float]``
===========================  ====================================================

MariaDB 5.3 TIME/DATETIME/TIMESTAMP(n) and pre-5.0 DECIMAL carry no metadata in
the table map; give the decoder the schema's precision with :func:`override_metas`
(``{column: decimals}`` for the temporal types, ``{column: byte length}`` for
DECIMAL).
"""
from __future__ import annotations

import dataclasses
import struct
import sys
import zlib
from array import array
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from . import temporal as T
from .charsets import BINARY_COLLATION, codec_for_collation
from .constants import ColumnType as CT, column_type_name
from .decimal import NEWDECIMAL_ENV, decimal_bin_size, decode_newdecimal, decode_old_decimal, newdecimal_lines
from .errors import BinlogError, CorruptEvent, TruncatedEvent, UnsupportedType
from .jsonb import json_text
from .values import decode_text

# -- TABLE_MAP metadata ---------------------------------------------------------------


def _meta_u8(b: bytes):
    return b[0]


def _meta_u16le(b: bytes):
    return b[0] | b[1] << 8


def _meta_decimal(b: bytes):
    return (b[0], b[1])  # (precision, scale)


def _meta_bit(b: bytes):
    return (b[0], b[1])  # (bits in the last partial byte, whole bytes)


def _meta_string(b: bytes):
    """STRING/ENUM/SET: ``(real_type, length)``. CHAR longer than 255 bytes keeps
    two high length bits, inverted, in bits 4-5 of the type byte (MySQL bug #37426)."""
    byte0, byte1 = b[0], b[1]
    if (byte0 & 0x30) != 0x30:
        return (byte0 | 0x30, byte1 | (((byte0 & 0x30) ^ 0x30) << 4))
    return (byte0, byte1)


# MariaDB column compression (``COMPRESSED`` attribute, 10.3+): logged with their
# own type codes; the value is a compression header byte (+ zlib stream).
MARIA_BLOB_COMPRESSED = 140
MARIA_VARCHAR_COMPRESSED = 141

# type -> (metadata bytes, parser); types without metadata map to (0, None)
METADATA_READERS: dict[int, tuple[int, Callable[[bytes], Any] | None]] = {
    CT.DECIMAL: (0, None),
    CT.TINY: (0, None),
    CT.SHORT: (0, None),
    CT.LONG: (0, None),
    CT.FLOAT: (1, _meta_u8),
    CT.DOUBLE: (1, _meta_u8),
    CT.NULL: (0, None),
    CT.TIMESTAMP: (0, None),
    CT.LONGLONG: (0, None),
    CT.INT24: (0, None),
    CT.DATE: (0, None),
    CT.TIME: (0, None),
    CT.DATETIME: (0, None),
    CT.YEAR: (0, None),
    CT.NEWDATE: (0, None),
    CT.VARCHAR: (2, _meta_u16le),
    CT.BIT: (2, _meta_bit),
    CT.TIMESTAMP2: (1, _meta_u8),
    CT.DATETIME2: (1, _meta_u8),
    CT.TIME2: (1, _meta_u8),
    CT.VECTOR: (1, _meta_u8),
    CT.JSON: (1, _meta_u8),
    CT.NEWDECIMAL: (2, _meta_decimal),
    CT.ENUM: (2, _meta_string),
    CT.SET: (2, _meta_string),
    CT.TINY_BLOB: (1, _meta_u8),
    CT.MEDIUM_BLOB: (1, _meta_u8),
    CT.LONG_BLOB: (1, _meta_u8),
    CT.BLOB: (1, _meta_u8),
    CT.VAR_STRING: (2, _meta_u16le),
    CT.STRING: (2, _meta_string),
    CT.GEOMETRY: (1, _meta_u8),
    MARIA_BLOB_COMPRESSED: (1, _meta_u8),
    MARIA_VARCHAR_COMPRESSED: (2, _meta_u16le),
}


def read_metadata(column_types, buf, off: int, end: int) -> tuple[tuple, int]:
    """Parse the TABLE_MAP metadata block ``buf[off:end]`` for ``column_types``.

    Returns ``(metas, new_off)``: one entry per column — ``0`` for types without
    metadata, an ``int`` (FLOAT/DOUBLE pack length, VARCHAR max bytes, BLOB/JSON/
    GEOMETRY/VECTOR length bytes, TIME2/DATETIME2/TIMESTAMP2 fsp) or a tuple
    (NEWDECIMAL ``(precision, scale)``, BIT ``(bits, bytes)``, STRING/ENUM/SET
    ``(real_type, length)``).

    >>> read_metadata(bytes([3, 15, 246, 18]), bytes([0x40, 0, 10, 2, 3]), 0, 5)
    ((0, 64, (10, 2), 3), 5)
    """
    metas = []
    for i, t in enumerate(column_types):
        spec = METADATA_READERS.get(t)
        if spec is None:
            raise UnsupportedType(f"column type {t} ({column_type_name(t)}) of column {i + 1} is not supported")
        n, parse = spec
        if n == 0:
            metas.append(0)
            continue
        if off + n > end:
            raise TruncatedEvent(n, max(end - off, 0), f"metadata of column {i + 1}")
        metas.append(parse(bytes(buf[off:off + n])))
        off += n
    return tuple(metas), off


# -- per-column decoding spec -------------------------------------------------------------


class ColumnDecoding(NamedTuple):
    """Everything a column decoder needs about one column."""

    index: int
    type: int  # ColumnType; STRING resolved to ENUM/SET through its real type
    meta: Any
    unsigned: bool = False
    codec: str | None = None  # text codec; None -> bytes
    binary: bool = False  # the binary collation (63): BINARY(n) is padded
    length: int = 0  # STRING declared length / ENUM, SET pack length
    enum_values: tuple[str, ...] | None = None
    set_values: tuple[str, ...] | None = None

    @property
    def name(self) -> str:
        return f"column {self.index + 1} ({column_type_name(self.type)})"


def override_metas(table_map, overrides: Mapping[int, Any]):
    """A copy of ``table_map`` with some column metas replaced, for what the table
    map cannot say: MariaDB 5.3 TIME/DATETIME/TIMESTAMP(n) decimals (``{i: n}``) or
    a pre-5.0 DECIMAL's byte length (``{i: length}``). ``i`` is 0-based."""
    metas = list(table_map.column_metas)
    for i, m in overrides.items():
        metas[i] = m
    return dataclasses.replace(table_map, column_metas=tuple(metas))


def _per_column(seq, i):
    if seq is None or i >= len(seq):
        return None
    return seq[i]


_STRING_REAL_TYPES = {CT.STRING: CT.STRING, CT.VAR_STRING: CT.STRING, CT.ENUM: CT.ENUM, CT.SET: CT.SET}


def column_spec(table_map, i: int) -> ColumnDecoding:
    """The :class:`ColumnDecoding` of column ``i`` (0-based) of a TableMapEvent. An
    unknown collation id is treated like an unknown charset: the value stays bytes."""
    t = table_map.column_types[i]
    meta = table_map.column_metas[i]
    unsigned = bool(_per_column(table_map.signedness, i))
    cid = _per_column(table_map.column_charsets, i)
    codec, binary = None, False
    if cid is not None:
        binary = cid == BINARY_COLLATION
        try:
            codec = codec_for_collation(cid)
        except UnsupportedType:
            codec = None  # unknown collation: bytes, as with an unknown charset
    length = 0
    if t in (CT.STRING, CT.ENUM, CT.SET):
        real, length = meta if isinstance(meta, tuple) else (t, 0)
        t = _STRING_REAL_TYPES.get(real)
        if t is None:
            raise UnsupportedType(f"STRING column {i + 1} with real type {real} ({column_type_name(real)})")
    if t not in COLUMN_DECODERS:
        raise UnsupportedType(f"column type {t} ({column_type_name(t)}) of column {i + 1} is not supported")
    return ColumnDecoding(
        i, t, meta, unsigned, codec, binary, length,
        _per_column(table_map.enum_values, i), _per_column(table_map.set_values, i),
    )


def column_specs(table_map) -> tuple[ColumnDecoding, ...]:
    n = table_map.column_count
    if len(table_map.column_types) != n or len(table_map.column_metas) != n:
        raise CorruptEvent(
            f"table map {table_map.schema}.{table_map.table}: {n} columns but "
            f"{len(table_map.column_types)} types and {len(table_map.column_metas)} metas"
        )
    return tuple(column_spec(table_map, i) for i in range(n))


# -- reference column decoders ------------------------------------------------------------


def _need(buf, off: int, n: int, spec: ColumnDecoding) -> None:
    have = len(buf) - off
    if have < n:
        raise TruncatedEvent(n, max(have, 0), spec.name)


def _int_decoder(size: int):
    def decode_int(buf, off, spec):
        _need(buf, off, size, spec)
        return int.from_bytes(buf[off:off + size], "little", signed=not spec.unsigned), off + size
    return decode_int


_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")


def decode_float(buf, off, spec):
    _need(buf, off, 4, spec)
    return _FLOAT.unpack_from(buf, off)[0], off + 4


def decode_double(buf, off, spec):
    _need(buf, off, 8, spec)
    return _DOUBLE.unpack_from(buf, off)[0], off + 8


def decode_null(buf, off, spec):
    return None, off


def decode_year(buf, off, spec):
    return T.decode_year(buf, off)


def decode_date(buf, off, spec):
    return T.decode_date(buf, off)


def fsp_of(spec: ColumnDecoding) -> int:
    fsp = spec.meta if isinstance(spec.meta, int) else 0
    if not 0 <= fsp <= 6:
        raise CorruptEvent(f"{spec.name} has {fsp} fractional digits (0..6 allowed)")
    return fsp


def decode_time(buf, off, spec):
    dec = fsp_of(spec)
    return T.decode_time_hires(buf, off, dec) if dec else T.decode_time(buf, off)


def decode_datetime(buf, off, spec):
    dec = fsp_of(spec)
    return T.decode_datetime_hires(buf, off, dec) if dec else T.decode_datetime(buf, off)


def decode_timestamp(buf, off, spec):
    dec = fsp_of(spec)
    return T.decode_timestamp_hires(buf, off, dec) if dec else T.decode_timestamp(buf, off)


def decode_time2(buf, off, spec):
    return T.decode_time2(buf, off, fsp_of(spec))


def decode_datetime2(buf, off, spec):
    return T.decode_datetime2(buf, off, fsp_of(spec))


def decode_timestamp2(buf, off, spec):
    return T.decode_timestamp2(buf, off, fsp_of(spec))


def decimal_meta(spec: ColumnDecoding) -> tuple[int, int]:
    if not (isinstance(spec.meta, tuple) and len(spec.meta) == 2):
        raise CorruptEvent(f"{spec.name} has metadata {spec.meta!r}, expected (precision, scale)")
    return spec.meta


def decode_newdecimal_column(buf, off, spec):
    p, s = decimal_meta(spec)
    return decode_newdecimal(buf, off, p, s)


def decode_old_decimal_column(buf, off, spec):
    if not (isinstance(spec.meta, int) and spec.meta > 0):
        raise UnsupportedType(
            f"{spec.name}: pre-5.0 DECIMAL has no metadata in the table map; "
            "give its byte length with override_metas()"
        )
    return decode_old_decimal(buf, off, spec.meta)


def _read_length(buf, off, nbytes: int, spec: ColumnDecoding) -> tuple[int, int]:
    if not 1 <= nbytes <= 4:
        raise CorruptEvent(f"{spec.name} has a {nbytes}-byte length prefix (1..4 allowed)")
    _need(buf, off, nbytes, spec)
    n = int.from_bytes(buf[off:off + nbytes], "little")
    off += nbytes
    _need(buf, off, n, spec)
    return n, off


def _text(raw: bytes, spec: ColumnDecoding):
    """A character column's value: its text, or an :class:`.values.InvalidText` (the exact bytes
    kept) where the bytes are not valid in the column's character set. The compiled decoders
    decode strictly and leave such rows to this reference path."""
    if spec.codec is None:
        return raw
    return decode_text(raw, spec.codec)


def decode_varchar(buf, off, spec):
    n, off = _read_length(buf, off, 1 if spec.meta < 256 else 2, spec)
    return _text(bytes(buf[off:off + n]), spec), off + n


def decode_string(buf, off, spec):
    n, off = _read_length(buf, off, 1 if spec.length < 256 else 2, spec)
    raw = bytes(buf[off:off + n])
    if spec.binary:
        return raw.ljust(spec.length, b"\0"), off + n
    return _text(raw, spec), off + n


def enum_value(idx: int, spec: ColumnDecoding):
    if spec.enum_values is None:
        return idx
    if idx == 0:
        return ""
    if idx > len(spec.enum_values):
        raise CorruptEvent(f"{spec.name}: ENUM index {idx} but only {len(spec.enum_values)} values")
    return spec.enum_values[idx - 1]


def set_value(bits: int, spec: ColumnDecoding):
    names = spec.set_values
    if names is None:
        return bits
    if bits >> len(names):
        raise CorruptEvent(f"{spec.name}: SET bits 0x{bits:x} but only {len(names)} members")
    return ",".join(names[k] for k in range(len(names)) if bits >> k & 1)


def decode_enum(buf, off, spec):
    n = spec.length
    if n not in (1, 2):
        raise CorruptEvent(f"{spec.name}: ENUM of {n} bytes (1 or 2 allowed)")
    _need(buf, off, n, spec)
    return enum_value(int.from_bytes(buf[off:off + n], "little"), spec), off + n


def decode_set(buf, off, spec):
    n = spec.length
    if not 1 <= n <= 8:
        raise CorruptEvent(f"{spec.name}: SET of {n} bytes (1..8 allowed)")
    _need(buf, off, n, spec)
    return set_value(int.from_bytes(buf[off:off + n], "little"), spec), off + n


def bit_size(spec: ColumnDecoding) -> int:
    if not (isinstance(spec.meta, tuple) and len(spec.meta) == 2):
        raise CorruptEvent(f"{spec.name} has metadata {spec.meta!r}, expected (bits, bytes)")
    bits, nbytes = spec.meta
    n = nbytes + (1 if bits else 0)
    if not 1 <= n <= 8 or bits > 7:
        raise CorruptEvent(f"{spec.name}: BIT metadata {spec.meta!r} is not 1..64 bits")
    return n


def decode_bit(buf, off, spec):
    n = bit_size(spec)
    _need(buf, off, n, spec)
    return int.from_bytes(buf[off:off + n], "big"), off + n


def decode_blob(buf, off, spec):
    n, off = _read_length(buf, off, spec.meta, spec)
    return _text(bytes(buf[off:off + n]), spec), off + n


def decode_geometry(buf, off, spec):
    n, off = _read_length(buf, off, spec.meta, spec)
    return bytes(buf[off:off + n]), off + n


def decode_json(buf, off, spec):
    n, off = _read_length(buf, off, spec.meta, spec)
    return json_text(buf[off:off + n]), off + n


def vector_value(raw: bytes) -> list[float]:
    if len(raw) % 4:
        raise CorruptEvent(f"VECTOR value of {len(raw)} bytes is not a whole number of floats")
    a = array("f")
    a.frombytes(raw)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tolist()


def decode_vector(buf, off, spec):
    n, off = _read_length(buf, off, spec.meta, spec)
    return vector_value(bytes(buf[off:off + n])), off + n


def uncompress_value(raw: bytes) -> bytes:
    """MariaDB ``Field_longstr::uncompress``: ``b""`` stays empty; a header byte with
    method 0 is followed by the bytes as they are; method 8 (zlib) by the original
    length (big-endian, ``header & 7`` bytes) and a zlib stream (raw deflate when
    ``header & 8``)."""
    if not raw:
        return b""
    head = raw[0]
    method = head >> 4
    if method == 0:
        return raw[1:]
    if method != 8:
        raise CorruptEvent(f"compressed column with unknown method {method}")
    n = head & 7
    if len(raw) < 1 + n:
        raise CorruptEvent("compressed column shorter than its header")
    size = int.from_bytes(raw[1:1 + n], "big")
    try:
        d = zlib.decompressobj(-zlib.MAX_WBITS if head & 8 else zlib.MAX_WBITS)
        out = d.decompress(raw[1 + n:], size + 1)
    except zlib.error as e:
        raise CorruptEvent(f"compressed column: {e}") from None
    if len(out) != size or not d.eof:
        raise CorruptEvent(f"compressed column inflates to {len(out)} bytes, header says {size}")
    return out


def decode_compressed_varchar(buf, off, spec):
    n, off = _read_length(buf, off, 1 if spec.meta < 256 else 2, spec)
    return _text(uncompress_value(bytes(buf[off:off + n])), spec), off + n


def decode_compressed_blob(buf, off, spec):
    n, off = _read_length(buf, off, spec.meta, spec)
    return _text(uncompress_value(bytes(buf[off:off + n])), spec), off + n


ColumnDecoder = Callable[[Any, int, ColumnDecoding], tuple[Any, int]]

COLUMN_DECODERS: dict[int, ColumnDecoder] = {
    CT.DECIMAL: decode_old_decimal_column,
    CT.TINY: _int_decoder(1),
    CT.SHORT: _int_decoder(2),
    CT.LONG: _int_decoder(4),
    CT.FLOAT: decode_float,
    CT.DOUBLE: decode_double,
    CT.NULL: decode_null,
    CT.TIMESTAMP: decode_timestamp,
    CT.LONGLONG: _int_decoder(8),
    CT.INT24: _int_decoder(3),
    CT.DATE: decode_date,
    CT.TIME: decode_time,
    CT.DATETIME: decode_datetime,
    CT.YEAR: decode_year,
    CT.NEWDATE: decode_date,
    CT.VARCHAR: decode_varchar,
    CT.BIT: decode_bit,
    CT.TIMESTAMP2: decode_timestamp2,
    CT.DATETIME2: decode_datetime2,
    CT.TIME2: decode_time2,
    CT.VECTOR: decode_vector,
    CT.JSON: decode_json,
    CT.NEWDECIMAL: decode_newdecimal_column,
    CT.ENUM: decode_enum,
    CT.SET: decode_set,
    CT.TINY_BLOB: decode_blob,
    CT.MEDIUM_BLOB: decode_blob,
    CT.LONG_BLOB: decode_blob,
    CT.BLOB: decode_blob,
    CT.VAR_STRING: decode_varchar,
    CT.STRING: decode_string,
    CT.GEOMETRY: decode_geometry,
    MARIA_BLOB_COMPRESSED: decode_compressed_blob,
    MARIA_VARCHAR_COMPRESSED: decode_compressed_varchar,
}


def null_bitmap(buf, off: int, count: int, what: str = "null bitmap") -> tuple[int, int]:
    n = (count + 7) // 8
    have = len(buf) - off
    if have < n:
        raise TruncatedEvent(n, max(have, 0), what)
    return int.from_bytes(buf[off:off + n], "little"), off + n


def decode_row_reference(specs: Sequence[ColumnDecoding], present: Sequence[int], buf, off: int,
                         *, hook: Callable | None = None) -> tuple[tuple, int]:
    """Decode one row image (null bitmap over ``present``, then the non-null
    values) column by column through ``COLUMN_DECODERS``.

    ``hook(spec, buf, start, end)`` (optional) is called after each non-null value.
    """
    nulls, off = null_bitmap(buf, off, len(present))
    values = []
    for k, i in enumerate(present):
        if nulls >> k & 1:
            values.append(None)
            continue
        spec = specs[i]
        start = off
        v, off = decode_column(spec, buf, off)
        if hook is not None:
            hook(spec, buf, start, off)
        values.append(v)
    return tuple(values), off


def decode_column(spec: ColumnDecoding, buf, off: int) -> tuple[Any, int]:
    """One non-null value through ``COLUMN_DECODERS``; only BinlogErrors escape."""
    try:
        return COLUMN_DECODERS[spec.type](buf, off, spec)
    except BinlogError:
        raise
    except (struct.error, IndexError, ValueError, TypeError, OverflowError) as e:
        raise CorruptEvent(f"{spec.name}: {e}") from None


# -- compiled row decoders ---------------------------------------------------------------

_STRUCT_CODES = {
    (CT.TINY, False): "b", (CT.TINY, True): "B",
    (CT.SHORT, False): "h", (CT.SHORT, True): "H",
    (CT.LONG, False): "i", (CT.LONG, True): "I",
    (CT.LONGLONG, False): "q", (CT.LONGLONG, True): "Q",
}
_SET_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
MAX_PATTERNS = 64  # distinct null-bitmap patterns compiled per decoder


def _at(base: str, rel: int) -> str:
    return f"{base} + {rel}" if rel else base


def _prefix_expr(nbytes: int, base: str, rel: int) -> str:
    b = [f"buf[{_at(base, rel + j)}]" for j in range(nbytes)]
    if nbytes == 4:
        return f"int.from_bytes(buf[{_at(base, rel)}:{_at(base, rel + 4)}], 'little')"
    return " | ".join(x if j == 0 else f"{x} << {8 * j}" for j, x in enumerate(b))


class _Plan(NamedTuple):
    """How the compiled decoder reads one column.

    * ``struct``: fixed ``size``, struct codes ``fmt`` (part of a run unpacked at
      once), value ``expr`` over the fields ``{0}``, ``{1}``;
    * ``inline``: fixed ``size``, ``lines(base, rel, target)`` statements;
    * ``var``: a ``prefix``-byte little-endian length, then that many bytes whose
      value is ``conv`` of ``{raw}``.
    """

    kind: str
    size: int = 0
    fmt: str = ""
    expr: str = ""
    lines: Callable[[str, int, str], list[str]] | None = None
    prefix: int = 0
    conv: str = "{raw}"


def _plan(spec: ColumnDecoding, k: int, env: dict) -> _Plan:
    """How the compiled decoder reads column ``spec`` (``k``: its position in the image)."""
    code = _STRUCT_CODES.get((spec.type, spec.unsigned))
    if code:
        return _Plan("struct", struct.calcsize("<" + code), code, "{0}")
    planner = _PLANNERS.get(spec.type)
    if planner is None:
        raise UnsupportedType(f"{spec.name} is not supported")
    return planner(spec, k, env)


def _plan_fixed(spec: ColumnDecoding, k: int, env: dict) -> _Plan:
    """FLOAT, DOUBLE, INT24, YEAR, DATE, NULL: fixed sizes read by ``struct``."""
    t = spec.type
    if t == CT.FLOAT:
        return _Plan("struct", 4, "f", "{0}")
    if t == CT.DOUBLE:
        return _Plan("struct", 8, "d", "{0}")
    if t == CT.INT24:
        return _Plan("struct", 3, "HB" if spec.unsigned else "Hb", "{0} | {1} << 16")
    if t == CT.YEAR:
        return _Plan("struct", 1, "B", "{0} + 1900 if {0} else 0")
    if t in (CT.DATE, CT.NEWDATE):
        env["_date"] = T.date_from_int
        return _Plan("struct", 3, "HB", "_date({0} | {1} << 16)")
    return _Plan("inline", 0, lines=lambda base, rel, target: [f"{target} = None"])  # NULL


def _plan_enum(spec: ColumnDecoding, k: int, env: dict) -> _Plan:
    if spec.length not in (1, 2):
        raise CorruptEvent(f"{spec.name}: ENUM of {spec.length} bytes (1 or 2 allowed)")
    code = "B" if spec.length == 1 else "H"
    if spec.enum_values is None:
        return _Plan("struct", spec.length, code, "{0}")
    env[f"_e{k}"] = ("",) + tuple(spec.enum_values)
    return _Plan("struct", spec.length, code, f"_e{k}[{{0}}]")


def _plan_set(spec: ColumnDecoding, k: int, env: dict) -> _Plan:
    n = spec.length
    if not 1 <= n <= 8:
        raise CorruptEvent(f"{spec.name}: SET of {n} bytes (1..8 allowed)")
    env[f"_sv{k}"] = lambda bits, _s=spec: set_value(bits, _s)
    wrap = "{}" if spec.set_values is None else f"_sv{k}({{}})"
    if n in _SET_CODES:
        return _Plan("struct", n, _SET_CODES[n], wrap.format("{0}"))
    return _Plan("inline", n, lines=lambda base, rel, target: [
        f"{target} = " + wrap.format(f"int.from_bytes(buf[{_at(base, rel)}:{_at(base, rel + n)}], 'little')")])


def _plan_bit(spec: ColumnDecoding, k: int, env: dict) -> _Plan:
    n = bit_size(spec)
    return _Plan("inline", n, lines=lambda base, rel, target: [
        f"{target} = int.from_bytes(buf[{_at(base, rel)}:{_at(base, rel + n)}], 'big')"])


def _plan_decimal(spec: ColumnDecoding, k: int, env: dict) -> _Plan:
    """NEWDECIMAL (binary), and the pre-5.0 DECIMAL (its digits as text)."""
    if spec.type == CT.NEWDECIMAL:
        p, s = decimal_meta(spec)
        env.update(NEWDECIMAL_ENV)
        return _Plan("inline", decimal_bin_size(p, s),
                     lines=lambda base, rel, target: newdecimal_lines(p, s, base, rel, target))
    if not (isinstance(spec.meta, int) and spec.meta > 0):
        decode_old_decimal_column(b"", 0, spec)  # raises UnsupportedType
    env["_old_decimal"] = decode_old_decimal
    n = spec.meta
    return _Plan("inline", n, lines=lambda base, rel, target: [
        f"{target} = _old_decimal(buf, {_at(base, rel)}, {n})[0]"])


def _plan_temporal2(spec: ColumnDecoding, k: int, env: dict) -> _Plan:
    """DATETIME2, TIMESTAMP2, TIME2 (MySQL 5.6+ and MariaDB 10.1+ with mysql56_temporal_format)."""
    t, fsp = spec.type, fsp_of(spec)
    if t == CT.DATETIME2:
        env.update(T.TEMPORAL_ENV)
        env[f"_f{k}"] = T.datetime2_reader(fsp)
        return _Plan("inline", T.datetime2_size(fsp),
                     lines=lambda base, rel, target: T.datetime2_lines(fsp, base, rel, target, f"_f{k}"))
    if t == CT.TIMESTAMP2:
        env.update(T.TEMPORAL_ENV)
        env[f"_f{k}"] = T.timestamp2_reader(fsp)
        return _Plan("inline", T.timestamp2_size(fsp),
                     lines=lambda base, rel, target: T.timestamp2_lines(fsp, base, rel, target, f"_f{k}"))
    env[f"_f{k}"] = T.time2_reader(fsp)
    return _Plan("inline", T.time2_size(fsp),
                 lines=lambda base, rel, target: [f"{target} = _f{k}(buf, {_at(base, rel)})"])


_HIRES = {
    CT.TIME: (T.decode_time_hires, T.time_hires_size),
    CT.DATETIME: (T.decode_datetime_hires, T.datetime_hires_size),
    CT.TIMESTAMP: (T.decode_timestamp_hires, T.timestamp_hires_size),
}


def _plan_temporal_old(spec: ColumnDecoding, k: int, env: dict) -> _Plan:
    """TIME, DATETIME, TIMESTAMP: integers without fractions, MariaDB 5.3's forms with them."""
    t, dec = spec.type, fsp_of(spec)
    if dec == 0:
        env["_time_int"] = T.time_from_int
        env["_dt_int"] = T.datetime_from_int
        env["_ts_value"] = T.timestamp_value
        if t == CT.TIME:
            return _Plan("struct", 3, "Hb", "_time_int({0} | {1} << 16)")
        if t == CT.DATETIME:
            return _Plan("struct", 8, "Q", "_dt_int({0})")
        return _Plan("struct", 4, "I", "_ts_value({0}, 0, 0)")
    fn, size = _HIRES[t]
    env[f"_f{k}"] = fn
    return _Plan("inline", size(dec),
                 lines=lambda base, rel, target: [f"{target} = _f{k}(buf, {_at(base, rel)}, {dec})[0]"])


def _plan_string(spec: ColumnDecoding, k: int, env: dict) -> _Plan:
    """VARCHAR, VAR_STRING, STRING (CHAR/BINARY) and MariaDB's compressed columns: a length prefix."""
    t = spec.type
    if t in (MARIA_VARCHAR_COMPRESSED, MARIA_BLOB_COMPRESSED):
        env["_uncompress"] = uncompress_value
        conv = _text_conv(spec).replace("{raw}", "_uncompress({raw})")
        if t == MARIA_VARCHAR_COMPRESSED:
            return _Plan("var", prefix=1 if spec.meta < 256 else 2, conv=conv)
        if spec.meta not in (1, 2, 3, 4):
            raise CorruptEvent(f"{spec.name} has a {spec.meta}-byte length prefix (1..4 allowed)")
        return _Plan("var", prefix=spec.meta, conv=conv)
    if t in (CT.VARCHAR, CT.VAR_STRING):
        return _Plan("var", prefix=1 if spec.meta < 256 else 2, conv=_text_conv(spec))
    prefix = 1 if spec.length < 256 else 2  # STRING
    if spec.binary:
        return _Plan("var", prefix=prefix, conv=f"{{raw}}.ljust({spec.length}, b'\\0')")
    return _Plan("var", prefix=prefix, conv=_text_conv(spec))


_BLOB_CONV = {CT.JSON: ("_json", json_text), CT.VECTOR: ("_vector", vector_value)}


def _plan_blob(spec: ColumnDecoding, k: int, env: dict) -> _Plan:
    """BLOB/TEXT of every size, GEOMETRY, JSON, VECTOR: a 1-4 byte length prefix."""
    if spec.meta not in (1, 2, 3, 4):
        raise CorruptEvent(f"{spec.name} has a {spec.meta}-byte length prefix (1..4 allowed)")
    if spec.type in _BLOB_CONV:
        name, fn = _BLOB_CONV[spec.type]
        env[name] = fn
        conv = name + "({raw})"
    elif spec.type == CT.GEOMETRY:
        conv = "{raw}"
    else:
        conv = _text_conv(spec)
    return _Plan("var", prefix=spec.meta, conv=conv)


_PLANNERS = {
    **dict.fromkeys((CT.FLOAT, CT.DOUBLE, CT.INT24, CT.YEAR, CT.DATE, CT.NEWDATE, CT.NULL), _plan_fixed),
    CT.ENUM: _plan_enum,
    CT.SET: _plan_set,
    CT.BIT: _plan_bit,
    CT.NEWDECIMAL: _plan_decimal,
    CT.DECIMAL: _plan_decimal,
    **dict.fromkeys((CT.DATETIME2, CT.TIMESTAMP2, CT.TIME2), _plan_temporal2),
    **dict.fromkeys((CT.TIME, CT.DATETIME, CT.TIMESTAMP), _plan_temporal_old),
    **dict.fromkeys((MARIA_VARCHAR_COMPRESSED, MARIA_BLOB_COMPRESSED, CT.VARCHAR, CT.VAR_STRING, CT.STRING),
                    _plan_string),
    **dict.fromkeys((CT.BLOB, CT.TINY_BLOB, CT.MEDIUM_BLOB, CT.LONG_BLOB, CT.GEOMETRY, CT.JSON, CT.VECTOR),
                    _plan_blob),
}


def _text_conv(spec: ColumnDecoding) -> str:
    if spec.codec is None:
        return "{raw}"
    return f"{{raw}}.decode({spec.codec!r})"


class _Emitter:
    """Straight-line code for one row image; ``rel`` counts the bytes of fixed-width
    columns read since ``o`` last moved, so fixed runs need no ``o +=``."""

    def __init__(self, structs: dict):
        self.lines: list[str] = []
        self.structs = structs
        self.rel = 0
        self.run: list[tuple[int, _Plan]] = []
        self.run_start = 0
        self.nfield = 0

    def struct(self, fmt: str) -> str:
        name = f"_s{len(self.structs)}"
        self.structs[name] = struct.Struct("<" + fmt)
        return name

    def flush(self, ind: str = "    ") -> None:
        if not self.run:
            return
        sname = self.struct("".join(p.fmt for _, p in self.run))
        targets, post = [], []
        for k, p in self.run:
            if p.expr == "{0}":
                targets.append(f"v{k}")
                continue
            names = [f"x{self.nfield + j}" for j in range(len(p.fmt))]
            self.nfield += len(p.fmt)
            targets += names
            post.append(f"v{k} = {p.expr.format(*names)}")
        self.lines.append(f"{ind}{', '.join(targets)}, = {sname}(buf, {_at('o', self.run_start)})")
        self.lines += [ind + line for line in post]
        self.run = []

    def column(self, k: int, p: _Plan, ind: str = "    ") -> None:
        if p.kind == "struct":
            if not self.run:
                self.run_start = self.rel
            self.run.append((k, p))
            self.rel += p.size
            return
        self.flush(ind)
        if p.kind == "inline":
            self.lines += [ind + line for line in p.lines("o", self.rel, f"v{k}")]
            self.rel += p.size
            return
        self.lines.append(f"{ind}n = {_prefix_expr(p.prefix, 'o', self.rel)}")
        self.lines.append(f"{ind}o += {self.rel + p.prefix}")
        self.lines.append(f"{ind}v{k} = {p.conv.format(raw='buf[o:o + n]')}")
        self.lines.append(f"{ind}o += n")
        self.rel = 0

    def close(self, ind: str = "    ") -> str:
        """Finish the fixed bytes; return the expression of the final offset."""
        self.flush(ind)
        return _at("o", self.rel)


def _compile(present, plans, env, nulls: int | None, name: str):
    """Compile the body decoding one image from just after its null bitmap
    (``nulls`` given: one pattern) or from the bitmap itself (``nulls`` None)."""
    structs: dict[str, struct.Struct] = {}
    em = _Emitter(structs)
    values = [f"v{k}" for k in range(len(present))]
    if nulls is not None:
        for k, p in enumerate(plans):
            if nulls >> k & 1:
                values[k] = "None"
            else:
                em.column(k, p)
        end = em.close()
    else:
        nb = (len(present) + 7) // 8
        em.lines.append(f"    nb = int.from_bytes(buf[o:o + {nb}], 'little')")
        em.lines.append(f"    o += {nb}")
        for k, p in enumerate(plans):
            em.lines.append(f"    if nb >> {k} & 1:")
            em.lines.append(f"        v{k} = None")
            em.lines.append("    else:")
            em.column(k, p, "        ")
            em.close("        ")
            if em.rel:
                em.lines.append(f"        o += {em.rel}")
            em.rel = 0
        end = "o"
    tup = "(" + ", ".join(values) + ("," if len(values) == 1 else "") + ")"
    src = "\n".join([f"def {name}(buf, o):"] + em.lines + [f"    return {tup}, {end}"])
    src = src.replace("int.from_bytes(", "_ifb(")  # one global lookup instead of two
    ns = dict(env)
    ns["_ifb"] = int.from_bytes
    for sname, s in structs.items():
        ns[sname] = s.unpack_from
    exec(compile(src, f"<row decoder {name}>", "exec"), ns)
    fn = ns[name]
    fn.source = src
    return fn


def compile_row_decoder(table_map, present: tuple[int, ...]) -> Callable[[bytes, int], tuple[tuple, int]]:
    """Build the fast decoder of one row image with the columns ``present``.

    Returns ``decode(buf, off) -> (values, new_off)``. ``buf`` should be ``bytes``
    (slices of it are the string values). The function also carries:

    * ``null_bytes``: size of the image's null bitmap;
    * ``paths``: ``dict`` null-bitmap value -> ``body(buf, off_after_bitmap)``,
      filled by ``make_path(bitmap)``, so a loop can skip one call per row;
    * ``reference(buf, off)``: the same decode through :func:`decode_row_reference`.

    The compiled code does not check lengths: after a run, a row that ends past
    ``len(buf)`` or any exception means "re-decode with ``reference``" (which raises
    the precise error) — :mod:`.rows` does exactly that.
    """
    specs = column_specs(table_map)
    for i in present:
        if not 0 <= i < len(specs):
            raise CorruptEvent(f"row image names column {i + 1} of a {len(specs)}-column table")
    env: dict[str, Any] = {"None": None}
    plans = [_plan(specs[i], k, env) for k, i in enumerate(present)]
    nb = (len(present) + 7) // 8
    general = _compile(present, plans, env, None, "row_any")
    paths: dict[int, Callable] = {}

    def overflow(buf, o):  # too many patterns: the general body, from the bitmap
        return general(buf, o - nb)

    def make_path(nulls: int):
        fn = paths.get(nulls)
        if fn is not None:
            return fn
        if len(paths) >= MAX_PATTERNS:
            return overflow
        fn = _compile(present, plans, env, nulls, f"row_{nulls:x}")
        paths[nulls] = fn
        return fn

    get = paths.get
    if nb == 1:
        def decode(buf, off):
            bits = buf[off]
            return (get(bits) or make_path(bits))(buf, off + 1)
    elif nb == 2:
        def decode(buf, off):
            bits = buf[off] | buf[off + 1] << 8
            return (get(bits) or make_path(bits))(buf, off + 2)
    elif nb == 0:
        make_path(0)

        def decode(buf, off):
            return paths[0](buf, off)
    else:
        def decode(buf, off):
            bits = int.from_bytes(buf[off:off + nb], "little")
            return (get(bits) or make_path(bits))(buf, off + nb)

    def reference(buf, off):
        return decode_row_reference(specs, present, buf, off)

    decode.null_bytes = nb
    decode.paths = paths
    decode.make_path = make_path
    decode.general = general
    decode.reference = reference
    decode.specs = specs
    decode.present = present
    return decode
