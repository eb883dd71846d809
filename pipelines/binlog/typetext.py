"""A column's type as a table map logs it, as text (bronze's ``type`` field: ``LONG UNSIGNED``,
``NEWDECIMAL(10,2)``, ``VARCHAR(40) utf8mb4``), and the fractional digits of its temporal
values. Plain functions of a :class:`~pipelines.binlog.events.TableMapEvent` (or any value with its
per-column fields); used by bronze for decoded rows and by the snapshot reader for dumped ones.
"""
from __future__ import annotations

from .charsets import charset_for_collation
from .constants import ColumnType, column_type_name
from .errors import BinlogError

_INT_TYPES = frozenset({ColumnType.TINY, ColumnType.SHORT, ColumnType.INT24, ColumnType.LONG, ColumnType.LONGLONG})
_NUMERIC = _INT_TYPES | {ColumnType.FLOAT, ColumnType.DOUBLE, ColumnType.NEWDECIMAL, ColumnType.DECIMAL,
                         ColumnType.YEAR}
_FSP_TYPES = frozenset({ColumnType.TIME2, ColumnType.DATETIME2, ColumnType.TIMESTAMP2})
_STRING_TYPES = frozenset({ColumnType.VARCHAR, ColumnType.VAR_STRING, ColumnType.STRING})
_BLOB_NAMES = {1: "TINYBLOB", 2: "BLOB", 3: "MEDIUMBLOB", 4: "LONGBLOB"}
_CHARSET_TYPES = _STRING_TYPES | {ColumnType.BLOB, ColumnType.TINY_BLOB, ColumnType.MEDIUM_BLOB,
                                  ColumnType.LONG_BLOB, ColumnType.ENUM, ColumnType.SET}
# bytes per character, for the character sets where it is not 1
_MBMAXLEN = {
    "utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4, "big5": 2,
    "gbk": 2, "gb2312": 2, "gb18030": 4, "sjis": 2, "cp932": 2, "ujis": 3, "eucjpms": 3, "euckr": 2,
}


def _ints(meta) -> tuple[int, ...]:
    if isinstance(meta, int):
        return (meta,)
    if isinstance(meta, (tuple, list)):
        return tuple(int(x) for x in meta if isinstance(x, int))
    return ()


def _charset(tm, i: int) -> str | None:
    cs = tm.column_charsets
    cid = cs[i] if cs is not None and i < len(cs) else None
    if cid is None:
        return None
    try:
        return charset_for_collation(cid)
    except BinlogError:
        return f"collation{cid}"


def column_fsp(tm, i: int) -> int | None:
    """Fractional-second digits of temporal column ``i`` (None for other types)."""
    code = tm.column_types[i]
    if code in _FSP_TYPES:
        m = _ints(tm.column_metas[i])
        return m[0] if m else 0
    if code in (ColumnType.TIME, ColumnType.DATETIME, ColumnType.TIMESTAMP):
        m = _ints(tm.column_metas[i])  # MariaDB 5.3 fractional types: digits from TemporalPrecision
        return m[0] if m else 0
    return None


def column_type_text(tm, i: int) -> str:
    """The column type as logged: ``NAME[(args)][ UNSIGNED][ charset]``, e.g.
    ``LONG UNSIGNED``, ``NEWDECIMAL(10,2)``, ``VARCHAR(40) utf8mb4``, ``DATETIME2(3)``,
    ``BLOB binary``, ``BIT(5)``.

    String lengths are in characters when the charset is known (it is printed),
    in bytes otherwise. ``STRING`` columns that are really ENUM/SET show as such
    when the table map says so.
    """
    code = tm.column_types[i]
    real = tm.real_types[i] if getattr(tm, "real_types", None) else code
    meta = _ints(tm.column_metas[i])
    name = column_type_name(real)
    args = ""
    cs = _charset(tm, i) if real in _CHARSET_TYPES or code in _CHARSET_TYPES else None
    if real == ColumnType.NEWDECIMAL and meta:
        p, s = (meta[0], meta[1]) if len(meta) >= 2 else (meta[0] >> 8, meta[0] & 0xFF)
        args = f"({p},{s})"
    elif real in _STRING_TYPES and meta:
        n = meta[-1]
        if cs and cs != "binary":
            n //= _MBMAXLEN.get(cs, 1)
        args = f"({n})"
    elif real == ColumnType.BIT and meta:
        bits = meta[0] if len(meta) == 1 else meta[0] * 8 + meta[1] if meta[0] <= 8 else meta[0]
        args = f"({bits})"
    elif real in _FSP_TYPES:
        args = f"({meta[0] if meta else 0})"
    elif real == ColumnType.BLOB and meta:
        name = _BLOB_NAMES.get(meta[0], name)
    elif real == ColumnType.VECTOR and meta:
        args = f"({meta[0] // 4})"
    text = name + args
    sg = tm.signedness
    if real in _NUMERIC and sg is not None and i < len(sg) and sg[i]:
        text += " UNSIGNED"
    if cs:
        text += f" {cs}"
    return text
