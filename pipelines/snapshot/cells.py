"""Dumped rows -> the values and bronze image cells the binlog decoder gives for the same stored
row, so silver's typing applies to snapshot rows unchanged.

Two steps, both built once per table (and connection charset and time zone):

1. :func:`pipelines.snapshot.tablemap.table_map`: the table map the server would log for the
   dump's ``CREATE TABLE`` with ``binlog_row_metadata=FULL``. Cells then carry the same ``type``
   text as decoded rows and names, so image shapes match; FULL is the form silver reads without
   value fixes (ENUM/SET members, not numbers);
2. :class:`RowReader`: each literal -> the decoder's Python value for the column (``int``,
   ``Decimal``, ``float``, ``date``/``datetime``/``timedelta``, MySQL's text for zero dates,
   ``str`` or :class:`~pipelines.binlog.values.InvalidText`, ``bytes``), then the cell
   ``(idx, name, type, text, bin)`` as bronze writes it (:func:`image_cells`).

What the literals are, per column kind:

* numbers: the literal's text; FLOAT is rounded to single precision as the server stores it;
  DECIMAL keeps the column's scale;
* text (CHAR, VARCHAR, TEXT, ENUM, SET, JSON): a quoted string is in the connection charset
  (``SET NAMES``; ``binary`` means "as stored", decoded in the column's charset); a hex or
  ``_binary`` literal is the column's own bytes; an introducer names its charset. Bytes that are
  not valid where they are decoded give an ``InvalidText`` (the text with U+FFFD, the exact bytes
  kept), as the decoder does;
* binary (BINARY, VARBINARY, BLOB, GEOMETRY): the bytes, whatever the literal's form; BINARY(n)
  right-padded with zero bytes to n as the decoder pads it;
* BIT: its bytes big-endian (``b'0101'``, ``0x15``, or the raw string mariadb-dump writes),
  an unsigned integer;
* TIMESTAMP: the text is in the dump's ``time_zone`` (mysqldump sets ``+00:00`` unless
  ``--skip-tz-utc``), converted to UTC as the binlog has it;
* INET4, INET6, UUID (MariaDB): the text, as the 4 or 16 bytes the binlog logs.

>>> from pipelines.schema.model import ColumnDef, TableSchema
>>> schema = TableSchema((ColumnDef("id", "INT", unsigned=True), ColumnDef("f", "FLOAT"),
...                       ColumnDef("t", "TIMESTAMP", decimals=2)), primary_key=("id",))
>>> reader = RowReader("shop", "t", schema, client_charset="utf8mb4", time_zone="+02:00")
>>> reader.cells(("7", "1.1", b"2024-01-02 03:04:05.12"))
[(0, 'id', 'LONG UNSIGNED', '7', None), (1, 'f', 'FLOAT', '1.100000023841858', None), (2, 't', 'TIMESTAMP2(2)', '2024-01-02 01:04:05.12', None)]
"""
from __future__ import annotations

import datetime as _dt
import ipaddress
import re
import struct
import zoneinfo
from decimal import Decimal, InvalidOperation
from typing import Callable, Sequence

from pipelines.binlog.charsets import CHARSET_CODECS
from pipelines.binlog.constants import ColumnType as CT
from pipelines.binlog.temporal import make_date, make_datetime, make_time, zero_datetime_text
from pipelines.binlog.typetext import column_fsp, column_type_text
from pipelines.binlog.values import InvalidText, canonical_text, datetime_text, decimal_text, decode_text
from pipelines.schema.model import DECIMAL_CONTEXT, ColumnDef, TableSchema

from .errors import CorruptDump, UnsupportedDump
from .tablemap import FIXED_BINARY_TYPES, GEOMETRY_TYPES, INT_TYPES, MARIADB, table_map
from .values import Binary, Introduced
_UTC = _dt.timezone.utc

# -- literals -> values --------------------------------------------------------------------------

_DATE = re.compile(rb"(\d{4})-(\d{1,2})-(\d{1,2})\Z")
_DATETIME = re.compile(rb"(\d{4})-(\d{1,2})-(\d{1,2})[ T](\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?\Z")
_TIME = re.compile(rb"(-)?(\d+):(\d{1,2}):(\d{1,2})(?:\.(\d{1,6}))?\Z")
_FLOAT32 = struct.Struct("<f")


class _Bad(ValueError):
    """A literal that cannot be the column's value (the reader adds table, column and offset)."""


def _ascii(lit) -> bytes:
    if isinstance(lit, str):
        return lit.encode("ascii")
    return bytes(lit)


def _int(lit) -> int:
    if type(lit) is str:
        return int(lit)
    if type(lit) is Binary:
        return int.from_bytes(lit, "big")
    return int(lit)


def _year(lit) -> int:
    return int(lit)


def _decimal(scale: int) -> Callable:
    quantum = Decimal(1).scaleb(-scale)
    # what a dump writes for a DECIMAL(p, scale): its digits with exactly `scale` decimals, which
    # Decimal reads to the value the general path makes (a negative zero takes that path: no sign)
    plain = re.compile(rf"-?[0-9]{{1,65}}\.[0-9]{{{scale}}}\Z" if scale else r"-?[0-9]{1,65}\Z").match

    def conv(lit):
        if type(lit) is str and plain(lit) and (lit[0] != "-" or lit.strip("-0.")):
            return Decimal(lit)
        try:
            d = Decimal(lit if isinstance(lit, str) else bytes(lit).decode("ascii")).quantize(quantum, context=DECIMAL_CONTEXT)
        except InvalidOperation:
            raise _Bad(f"{lit!r} is not a number") from None
        unscaled = abs(int(d.scaleb(scale, context=DECIMAL_CONTEXT)))
        sign = "-" if d.is_signed() and unscaled else ""
        return Decimal(f"{sign}{unscaled}E-{scale}") if scale else Decimal(f"{sign}{unscaled}")
    return conv


def _float32(lit) -> float:
    return _FLOAT32.unpack(_FLOAT32.pack(float(lit)))[0]


def _double(lit) -> float:
    return float(lit)


def _bit(lit) -> int:
    if isinstance(lit, (bytes, bytearray)):
        return int.from_bytes(lit, "big")
    return int(lit)


def _iso(lit) -> _dt.datetime | None:
    """``datetime.fromisoformat`` of a canonical ``YYYY-MM-DD HH:MM:SS[.f]`` (the C parser; None for
    anything else: zero and invalid dates, other spellings, which take the exact path)."""
    try:
        text = lit.decode("ascii") if type(lit) is not str else lit
        if len(text) < 19 or text[10] != " " or text[4] != "-":
            return None
        v = _dt.datetime.fromisoformat(text)
    except (ValueError, UnicodeDecodeError):
        return None
    return v if v.tzinfo is None else None


def _date(lit):
    if type(lit) is not Binary and len(lit) == 10:
        try:
            return _dt.date.fromisoformat(lit.decode("ascii") if type(lit) is not str else lit)
        except (ValueError, UnicodeDecodeError):
            pass
    m = _DATE.match(_ascii(lit))
    if m is None:
        raise _Bad(f"{lit!r} is not a date")
    return make_date(int(m.group(1)), int(m.group(2)), int(m.group(3)))


def _usec(frac: bytes | None) -> int:
    return int(frac.ljust(6, b"0")) if frac else 0


def _datetime(fsp: int) -> Callable:
    def conv(lit):
        v = _iso(lit)
        if v is not None:
            return v
        m = _DATETIME.match(_ascii(lit))
        if m is None:
            raise _Bad(f"{lit!r} is not a date and time")
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        return make_datetime(y, mo, d, h, mi, s, _usec(m.group(7)), fsp)
    return conv


def _zone(time_zone: str | None) -> _dt.tzinfo | None:
    if time_zone is None:
        return None
    tz = time_zone.strip()
    m = re.fullmatch(r"([+-])(\d{1,2}):(\d{2})", tz)
    if m:
        delta = _dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return _UTC if not delta else _dt.timezone(-delta if m.group(1) == "-" else delta)
    if tz.upper() in ("UTC", "GMT"):
        return _UTC
    try:
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise UnsupportedDump(f"time zone {time_zone!r} (SET TIME_ZONE) is not an offset or a zone this system knows") from None


def _timestamp(fsp: int, zone: _dt.tzinfo | None) -> Callable:
    def conv(lit):
        v = _iso(lit)
        if v is not None and zone is not None:
            return v.replace(tzinfo=_UTC) if zone is _UTC else v.replace(tzinfo=zone).astimezone(_UTC)
        m = _DATETIME.match(_ascii(lit))
        if m is None:
            raise _Bad(f"{lit!r} is not a timestamp")
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        usec = _usec(m.group(7))
        if not (y or mo or d or h or mi or s or usec):
            return zero_datetime_text(fsp)
        if zone is None:
            raise UnsupportedDump("a TIMESTAMP value, but the dump sets no time zone (made with --skip-tz-utc?): "
                                  "its text is in the server's time zone, which the dump does not say")
        local = make_datetime(y, mo, d, h, mi, s, usec, fsp)
        if isinstance(local, str):
            return local  # an invalid date: MySQL's text, as the decoder gives it
        return local.replace(tzinfo=zone).astimezone(_UTC)
    return conv


def _time(lit):
    m = _TIME.match(_ascii(lit))
    if m is None:
        raise _Bad(f"{lit!r} is not a time")
    return make_time(m.group(1) is not None, int(m.group(2)), int(m.group(3)), int(m.group(4)), _usec(m.group(5)))


def _text(col_codec: str | None, client_codec: str | None, client_binary: bool, where: str) -> Callable:
    """A text column's value: bytes in the connection charset, or the column's own bytes."""

    def conv(lit):
        t = type(lit)
        if t is str:  # a number literal in a text column
            return lit
        if t is Binary or client_binary:
            raw = bytes(lit)
            return raw if col_codec is None else decode_text(raw, col_codec)
        if t is Introduced:
            codec = CHARSET_CODECS.get("utf8mb3" if lit.charset == "utf8" else lit.charset)
            if codec is None:
                raise _Bad(f"a string with the introducer _{lit.charset}, a charset this reader cannot decode")
            return _decoded(bytes(lit), codec, col_codec)
        if client_codec is None:
            raise UnsupportedDump(f"{where}: a string value but no SET NAMES before it: its character set is unknown")
        return _decoded(lit, client_codec, col_codec)

    if col_codec is None or col_codec != client_codec or client_binary:
        return conv

    def same_charset(lit):  # the common case: the connection's charset is the column's
        if type(lit) is bytes:
            try:
                return lit.decode(col_codec)
            except UnicodeDecodeError:
                return InvalidText(lit, col_codec)
        return conv(lit)
    return same_charset


def _decoded(raw: bytes, codec: str, col_codec: str | None):
    if col_codec is None:
        raise _Bad("a string for a column whose charset has no Python codec: the server converted it to bytes "
                   "this reader cannot reproduce (dump with --hex-blob or --default-character-set=binary)")
    if codec == col_codec:
        return decode_text(raw, codec)
    try:
        return raw.decode(codec)
    except UnicodeDecodeError:
        raise _Bad(f"bytes {raw[:40]!r} are not valid in the connection charset ({codec})") from None


def _binary(length: int | None) -> Callable:
    def conv(lit):
        raw = lit.encode("ascii") if type(lit) is str else bytes(lit)
        return raw.ljust(length, b"\0") if length else raw
    return conv


def _inet(kind: str) -> Callable:
    size = FIXED_BINARY_TYPES[kind]

    def conv(lit):
        if type(lit) is Binary:
            return bytes(lit).ljust(size, b"\0")
        text = _ascii(lit).decode("ascii").strip()
        try:
            if kind == "INET4":
                return ipaddress.IPv4Address(text).packed
            if kind == "INET6":
                return ipaddress.IPv6Address(text).packed
            digits = text.replace("-", "")
            if text.startswith("{") or len(digits) != 32:
                raise ValueError(text)
            return bytes.fromhex(digits)
        except ValueError:
            raise _Bad(f"{text!r} is not an {kind} value") from None
    return conv


def _converter(col: ColumnDef, code: int, client_charset: str | None, zone, where: str) -> Callable:
    t = col.type
    if t in INT_TYPES:
        return _int
    if t == "DECIMAL":
        return _decimal(col.decimals or 0)
    if code == CT.FLOAT:
        return _float32
    if code == CT.DOUBLE:
        return _double
    if t == "BIT":
        return _bit
    if t == "YEAR":
        return _year
    if t == "DATE":
        return _date
    if t == "DATETIME":
        return _datetime(col.decimals or 0)
    if t == "TIMESTAMP":
        return _timestamp(col.decimals or 0, zone)
    if t == "TIME":
        return _time
    if t in FIXED_BINARY_TYPES:
        return _inet(t)
    if t in GEOMETRY_TYPES or t in ("BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"):
        return _binary(col.length if t == "BINARY" else None)
    cs = "utf8mb3" if col.charset == "utf8" else (col.charset or ("utf8mb4" if t == "JSON" else None))  # MySQL JSON: utf8mb4
    client = None if client_charset is None else ("utf8mb3" if client_charset == "utf8" else client_charset)
    return _text(CHARSET_CODECS.get(cs), CHARSET_CODECS.get(client) if client else None, client == "binary", where)


class RowReader:
    """Rows of one table's literals -> decoder values and bronze cells, for one connection
    charset and time zone (build one per ``(table, SET NAMES, TIME_ZONE)``; a dump changes them
    rarely). ``columns``: an INSERT's column list (``--complete-insert``) maps literals to columns
    by name; without one, literals are the table's columns in order."""

    def __init__(self, db: str, table: str, schema: TableSchema, *, client_charset: str | None,
                 time_zone: str | None, flavor: str | None = MARIADB):
        self.db, self.table, self.schema, self.flavor = db, table, schema, flavor
        self.table_map = tm = table_map(db, table, schema, flavor)
        zone = _zone(time_zone)
        self.names = tm.column_names
        self.types = tuple(column_type_text(tm, i) for i in range(tm.column_count))
        self.fsps = tuple(column_fsp(tm, i) for i in range(tm.column_count))
        self.heads = tuple((i, self.names[i], self.types[i]) for i in range(tm.column_count))
        self.converters = tuple(
            _converter(c, tm.column_types[i], client_charset, zone, f"{db}.{table}.{c.name}")
            for i, c in enumerate(schema.columns))
        self._orders: dict[tuple[str, ...], tuple[int, ...]] = {}

    def order(self, columns: Sequence[str] | None) -> tuple[int, ...]:
        """The column index of each literal of a row (``columns`` None: all, in table order)."""
        if columns is None:
            return tuple(range(len(self.names)))
        key = tuple(columns)
        idx = self._orders.get(key)
        if idx is None:
            idx = []
            for name in key:
                i = self.schema.index_of(name)
                if i is None:
                    raise CorruptDump(f"the INSERT names a column {name!r} that {self.db}.{self.table} does not "
                                      f"have (its columns: {', '.join(self.names)})")
                idx.append(i)
            idx = self._orders[key] = tuple(idx)
        return idx

    def values(self, literals: Sequence, columns: Sequence[str] | None = None) -> tuple:
        """The decoder's values of one row, aligned with :meth:`order` of ``columns``."""
        idx = self.order(columns)
        if len(literals) != len(idx):
            raise CorruptDump(f"a row of {len(literals)} values for {len(idx)} columns of {self.db}.{self.table}")
        out = []
        conv = self.converters
        for i, lit in zip(idx, literals):
            if lit is None:
                out.append(None)
                continue
            try:
                out.append(conv[i](lit))
            except (_Bad, ValueError, TypeError, OverflowError) as e:
                raise CorruptDump(f"{self.db}.{self.table}.{self.names[i]} ({self.schema.columns[i].type_text()}): "
                                  f"{e}") from None
        return tuple(out)

    def values_of_rows(self, rows: Sequence[Sequence], columns: Sequence[str] | None = None) -> list[tuple]:
        """:meth:`values` of each of an INSERT's rows, converted a column at a time (a row that does
        not convert is read again by :meth:`values`, which names what is wrong with it)."""
        idx = self.order(columns)
        width = len(idx)
        if not rows:
            return []
        if any(len(r) != width for r in rows):
            return [self.values(r, columns) for r in rows]
        conv = self.converters
        try:
            converted = [[None if lit is None else c(lit) for lit in col]
                         for c, col in zip((conv[i] for i in idx), zip(*rows))]
        except (_Bad, ValueError, TypeError, OverflowError):
            return [self.values(r, columns) for r in rows]
        return list(zip(*converted))

    def cells(self, literals: Sequence, columns: Sequence[str] | None = None) -> list[tuple]:
        """The row's bronze image: one ``(idx, name, type, text, bin)`` cell per literal."""
        return self.cells_of(self.values(literals, columns), columns)

    def cells_of(self, values: Sequence, columns: Sequence[str] | None = None) -> list[tuple]:
        """The image cells of :meth:`values`' result."""
        return image_cells(self, self.order(columns), values)


def image_cells(reader: RowReader, idx: Sequence[int], values: Sequence) -> list[tuple]:
    """Cells as bronze writes a decoded image: bytes in ``bin``; text not valid in its charset as
    its text with U+FFFD plus the exact bytes; anything else its canonical text
    (:func:`pipelines.binlog.values.canonical_text`, with the column's fractional digits); the
    common kinds done inline, as :meth:`pipelines.bronze.rows.TableLayout.image` does."""
    heads, fsps = reader.heads, reader.fsps
    out = []
    add = out.append
    for i, v in zip(idx, values):
        t = type(v)
        if t is str:
            add(heads[i] + (v, None))
        elif v is None:
            add(heads[i] + _NULL)
        elif t is int:
            add(heads[i] + (str(v), None))
        elif t is bytes:
            add(heads[i] + (None, v))
        elif t is _dt.datetime:
            add(heads[i] + (datetime_text(v, fsps[i]), None))
        elif t is Decimal:
            add(heads[i] + (decimal_text(v), None))
        elif t is InvalidText:
            add(heads[i] + (str(v), v.raw))
        else:
            add(heads[i] + (canonical_text(v, fsps[i]), None))
    return out


_NULL = (None, None)
