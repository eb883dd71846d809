"""TABLE_MAP: the column types and metadata, and the optional metadata lists
(see :mod:`pipelines.binlog.events`)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .charsets import codec_for_collation
from .constants import ColumnType, EventType
from .errors import CorruptEvent, UnsupportedType, need
from .framing import EventHeader
from .layout import Layout
from .values import decode_text
from .wire import lstr8, packed_int
from .events_common import bits_lsb, bits_msb, declared_post_header, name_text, post_header


@dataclass(frozen=True, slots=True, weakref_slot=True)
class TableMapEvent:
    """TABLE_MAP: the layout of one table's rows, valid until the next statement.

    Per-column tuples all have ``column_count`` entries; optional-metadata
    fields are ``None`` when the server did not log them.
    """

    header: EventHeader
    table_id: int
    flags: int
    schema: str
    table: str
    column_count: int
    column_types: tuple[int, ...]  # ColumnType codes as logged (STRING may hide ENUM/SET)
    column_metas: tuple[Any, ...]  # per-column metadata, as columns.read_metadata returns it
    nullable: tuple[bool, ...]
    # optional metadata (MySQL 8.0.1+ binlog_row_metadata, MariaDB 10.5+)
    signedness: tuple[bool | None, ...] | None = None  # True = unsigned; None for non-numeric
    column_charsets: tuple[int | None, ...] | None = None  # collation id per column, None if n/a
    column_names: tuple[str, ...] | None = None
    set_values: tuple[tuple[str, ...] | None, ...] | None = None  # per column, None if not SET
    enum_values: tuple[tuple[str, ...] | None, ...] | None = None  # per column, None if not ENUM
    geometry_types: tuple[int | None, ...] | None = None
    primary_key: tuple[tuple[int, int], ...] | None = None  # (column index, prefix length 0=whole)
    visibility: tuple[bool, ...] | None = None  # True = visible
    vector_dimensions: tuple[int | None, ...] | None = None
    raw_optional_metadata: bytes = b""
    real_types: tuple[int, ...] = ()  # column_types with STRING resolved to ENUM/SET from the metadata
    unknown_metadata: tuple[tuple[int, bytes], ...] = ()  # optional-metadata TLVs of unknown type


# =============================================================================
# TABLE_MAP
# =============================================================================

TABLE_MAP_POST_HEADER = Layout("table_id:u6 flags:H", "TableMapPostHeader")
TABLE_ID_4_POST_HEADER = Layout("table_id:I flags:H", "TableId4PostHeader")  # before MySQL 5.1.4

# Optional metadata field types (Table_map_event::Optional_metadata_field_type)
OPT_SIGNEDNESS = 1
OPT_DEFAULT_CHARSET = 2
OPT_COLUMN_CHARSET = 3
OPT_COLUMN_NAME = 4
OPT_SET_STR_VALUE = 5
OPT_ENUM_STR_VALUE = 6
OPT_GEOMETRY_TYPE = 7
OPT_SIMPLE_PRIMARY_KEY = 8
OPT_PRIMARY_KEY_WITH_PREFIX = 9
OPT_ENUM_AND_SET_DEFAULT_CHARSET = 10
OPT_ENUM_AND_SET_COLUMN_CHARSET = 11
OPT_COLUMN_VISIBILITY = 12
OPT_VECTOR_DIMENSIONALITY = 13

# Which real column types each optional-metadata list covers, in column order: what the
# servers write, not what their own readers assume. MySQL's writer and reader agree (its
# is_numeric_type / is_character_type / is_enum_or_set_type, sql/log_event.cc). MariaDB's
# writer (10.5+) puts YEAR in SIGNEDNESS, with an "unsigned" bit, because its YEAR field is a
# TINYINT underneath; its reader (mariadb-binlog, log_event_client.cc) skips YEAR, so it shifts
# every later bit by one. Established on a private MariaDB 10.11 for every column type
# (tests/test_table_map_lists.py): YEAR is the only type where writer and reader differ.
NUMERIC_TYPES = frozenset(
    {ColumnType.TINY, ColumnType.SHORT, ColumnType.INT24, ColumnType.LONG, ColumnType.LONGLONG,
     ColumnType.NEWDECIMAL, ColumnType.FLOAT, ColumnType.DOUBLE}
)
MYSQL_NUMERIC_TYPES = NUMERIC_TYPES
MARIADB_NUMERIC_TYPES = frozenset(NUMERIC_TYPES | {ColumnType.YEAR})
_CHARACTER_BASE = {ColumnType.STRING, ColumnType.VAR_STRING, ColumnType.VARCHAR, ColumnType.BLOB}
MYSQL_CHARACTER_TYPES = frozenset(_CHARACTER_BASE | {ColumnType.VECTOR})  # MySQL 9 counts VECTOR
MARIADB_CHARACTER_TYPES = frozenset(_CHARACTER_BASE | {ColumnType.GEOMETRY})  # "base class is blob"
ENUM_SET_TYPES = frozenset({ColumnType.ENUM, ColumnType.SET})
_STRING_LIKE = (ColumnType.STRING, ColumnType.ENUM, ColumnType.SET)


def _read_metadata(column_types, buf, off, end):
    """``columns.read_metadata``, imported when first needed (the column layer
    may be absent in a partial checkout; the error then says so)."""
    try:
        from .columns import read_metadata
    except ImportError as e:  # pragma: no cover - depends on the checkout
        raise UnsupportedType(f"TABLE_MAP column metadata needs pipelines.binlog.columns ({e})") from None
    return read_metadata(column_types, buf, off, end)


def _real_type(t: int, meta) -> int:
    """STRING columns hide ENUM and SET: the real type is the first metadata byte."""
    if t in _STRING_LIKE and isinstance(meta, tuple) and meta:
        return int(meta[0])
    return t


def _tlv_ints(raw: bytes, what: str) -> list[int]:
    out, off = [], 0
    while off < len(raw):
        v, off = packed_int(raw, off, what)
        out.append(v)
    return out


def _tlv_strings(raw: bytes, what: str) -> list[str]:
    out, off = [], 0
    while off < len(raw):
        n, off = packed_int(raw, off, what)
        need(raw, off, n, what)
        out.append(name_text(raw[off : off + n]))
        off += n
    return out


def _tlv_string_lists(raw: bytes, what: str) -> list[tuple[bytes, ...]]:
    """Lists of member names as bytes (decoded later with the column's charset)."""
    out, off = [], 0
    while off < len(raw):
        count, off = packed_int(raw, off, what)
        values = []
        for _ in range(count):
            n, off = packed_int(raw, off, what)
            need(raw, off, n, what)
            values.append(bytes(raw[off : off + n]))
            off += n
        out.append(tuple(values))
    return out


def _decode_members(per_column: tuple, charsets) -> tuple:
    """ENUM/SET member names in each column's own charset (UTF-8 when unknown)."""
    from .charsets import codec_for_collation

    out = []
    for i, members in enumerate(per_column):
        if members is None:
            out.append(None)
            continue
        cid = charsets[i] if charsets else None
        codec = (codec_for_collation(cid) if cid is not None else None) or "utf-8"
        out.append(tuple(decode_text(m, codec) for m in members))
    return tuple(out)


def _tlv_default_charset(raw: bytes, what: str) -> tuple[int, dict[int, int]]:
    """Default collation, then (index among the covered columns, collation) pairs."""
    ints = _tlv_ints(raw, what)
    if not ints or len(ints) % 2 != 1:
        raise CorruptEvent(f"{what}: {len(ints)} numbers, expected a default and pairs")
    return ints[0], dict(zip(ints[1::2], ints[2::2]))


def _spread(values: list, indexes: list[int], n: int, what: str) -> tuple:
    """Place ``values`` (one per covered column) on their columns; None elsewhere."""
    if len(values) != len(indexes):
        raise CorruptEvent(f"{what} lists {len(values)} entries for {len(indexes)} columns of that kind")
    out: list = [None] * n
    for i, v in zip(indexes, values):
        out[i] = v
    return tuple(out)


def _charsets_for(
    fields: dict[int, bytes], default_code: int, column_code: int, indexes: list[int], what: str
) -> list[int] | None:
    if column_code in fields:
        cs = _tlv_ints(fields[column_code], what)
        if len(cs) != len(indexes):
            raise CorruptEvent(f"{what} lists {len(cs)} collations for {len(indexes)} columns")
        return cs
    if default_code in fields:
        default, pairs = _tlv_default_charset(fields[default_code], what)
        if any(i >= len(indexes) for i in pairs):
            raise CorruptEvent(f"{what} names column {max(pairs)} of only {len(indexes)}")
        return [pairs.get(k, default) for k in range(len(indexes))]
    return None


def _tlv_fields(raw: bytes) -> tuple[dict[int, bytes], list[tuple[int, bytes]]]:
    """The optional-metadata TLVs (type byte, packed length, value): the known fields by type
    (each at most once) and the unknown ones in order."""
    fields: dict[int, bytes] = {}
    unknown: list[tuple[int, bytes]] = []
    off = 0
    while off < len(raw):
        ftype = raw[off]
        length, off = packed_int(raw, off + 1, "optional metadata length")
        need(raw, off, length, "optional metadata field")
        value = raw[off : off + length]
        off += length
        if 1 <= ftype <= OPT_VECTOR_DIMENSIONALITY:
            if ftype in fields:
                raise CorruptEvent(f"optional metadata field {ftype} appears twice")
            fields[ftype] = value
        else:
            unknown.append((ftype, value))
    return fields, unknown


def _primary_key(fields: dict[int, bytes], n: int) -> tuple[tuple[int, int], ...]:
    """``(column, prefix length)`` of each key part, from SIMPLE_PRIMARY_KEY (prefix 0) and
    PRIMARY_KEY_WITH_PREFIX."""
    pk: list[tuple[int, int]] = []
    if OPT_SIMPLE_PRIMARY_KEY in fields:
        pk += [(i, 0) for i in _tlv_ints(fields[OPT_SIMPLE_PRIMARY_KEY], "SIMPLE_PRIMARY_KEY")]
    if OPT_PRIMARY_KEY_WITH_PREFIX in fields:
        ints = _tlv_ints(fields[OPT_PRIMARY_KEY_WITH_PREFIX], "PRIMARY_KEY_WITH_PREFIX")
        if len(ints) % 2:
            raise CorruptEvent("PRIMARY_KEY_WITH_PREFIX has an odd count of numbers")
        pk += list(zip(ints[::2], ints[1::2]))
    if any(i >= n for i, _ in pk):
        raise CorruptEvent(f"primary key names a column beyond the {n} of the table")
    return tuple(pk)


def _optional_metadata(raw: bytes, real_types: tuple[int, ...], mariadb: bool) -> dict[str, Any]:
    """Decode the optional-metadata TLVs (type byte, packed length, value) and
    map the per-kind lists onto columns."""
    fields, unknown = _tlv_fields(raw)
    n = len(real_types)
    character = MARIADB_CHARACTER_TYPES if mariadb else MYSQL_CHARACTER_TYPES
    numeric = MARIADB_NUMERIC_TYPES if mariadb else MYSQL_NUMERIC_TYPES
    idx_numeric = [i for i, t in enumerate(real_types) if t in numeric]
    idx_char = [i for i, t in enumerate(real_types) if t in character]
    idx_enum_set = [i for i, t in enumerate(real_types) if t in ENUM_SET_TYPES]
    idx_enum = [i for i, t in enumerate(real_types) if t == ColumnType.ENUM]
    idx_set = [i for i, t in enumerate(real_types) if t == ColumnType.SET]
    idx_geo = [i for i, t in enumerate(real_types) if t == ColumnType.GEOMETRY]
    idx_vec = [i for i, t in enumerate(real_types) if t == ColumnType.VECTOR]

    out: dict[str, Any] = {"unknown_metadata": tuple(unknown)}
    if OPT_SIGNEDNESS in fields:
        bits = bits_msb(fields[OPT_SIGNEDNESS])
        if len(bits) < len(idx_numeric):
            raise CorruptEvent(f"SIGNEDNESS has {len(bits)} bits for {len(idx_numeric)} numeric columns")
        out["signedness"] = _spread(list(bits[: len(idx_numeric)]), idx_numeric, n, "SIGNEDNESS")
    char_cs = _charsets_for(fields, OPT_DEFAULT_CHARSET, OPT_COLUMN_CHARSET, idx_char, "character column charsets")
    es_cs = _charsets_for(
        fields, OPT_ENUM_AND_SET_DEFAULT_CHARSET, OPT_ENUM_AND_SET_COLUMN_CHARSET, idx_enum_set, "ENUM/SET charsets"
    )
    if char_cs is not None or es_cs is not None:
        cs: list = [None] * n
        for idx, values in ((idx_char, char_cs), (idx_enum_set, es_cs)):
            for i, v in zip(idx, values or ()):
                cs[i] = v
        out["column_charsets"] = tuple(cs)
    if OPT_COLUMN_NAME in fields:
        names = _tlv_strings(fields[OPT_COLUMN_NAME], "COLUMN_NAME")
        if len(names) != n:
            raise CorruptEvent(f"COLUMN_NAME lists {len(names)} names for {n} columns")
        out["column_names"] = tuple(names)
    if OPT_SET_STR_VALUE in fields:
        out["set_values"] = _spread(_tlv_string_lists(fields[OPT_SET_STR_VALUE], "SET_STR_VALUE"), idx_set, n, "SET_STR_VALUE")
    if OPT_ENUM_STR_VALUE in fields:
        out["enum_values"] = _spread(
            _tlv_string_lists(fields[OPT_ENUM_STR_VALUE], "ENUM_STR_VALUE"), idx_enum, n, "ENUM_STR_VALUE"
        )
    for key in ("set_values", "enum_values"):
        if key in out:
            out[key] = _decode_members(out[key], out.get("column_charsets"))
    if OPT_GEOMETRY_TYPE in fields:
        out["geometry_types"] = _spread(_tlv_ints(fields[OPT_GEOMETRY_TYPE], "GEOMETRY_TYPE"), idx_geo, n, "GEOMETRY_TYPE")
    if OPT_SIMPLE_PRIMARY_KEY in fields or OPT_PRIMARY_KEY_WITH_PREFIX in fields:
        out["primary_key"] = _primary_key(fields, n)
    if OPT_COLUMN_VISIBILITY in fields:
        bits = bits_msb(fields[OPT_COLUMN_VISIBILITY])
        if len(bits) < n:
            raise CorruptEvent(f"COLUMN_VISIBILITY has {len(bits)} bits for {n} columns")
        out["visibility"] = bits[:n]
    if OPT_VECTOR_DIMENSIONALITY in fields:
        out["vector_dimensions"] = _spread(
            _tlv_ints(fields[OPT_VECTOR_DIMENSIONALITY], "VECTOR_DIMENSIONALITY"), idx_vec, n, "VECTOR_DIMENSIONALITY"
        )
    return out


def decode_table_map(data, ctx, header) -> TableMapEvent:
    declared = declared_post_header(ctx, EventType.TABLE_MAP, TABLE_MAP_POST_HEADER.size)
    layout = TABLE_ID_4_POST_HEADER if declared == TABLE_ID_4_POST_HEADER.size else TABLE_MAP_POST_HEADER
    ph, off = post_header(data, ctx, EventType.TABLE_MAP, layout)
    schema, off = lstr8(data, off, "TABLE_MAP schema name")
    need(data, off, 1, "TABLE_MAP schema terminator")
    table, off = lstr8(data, off + 1, "TABLE_MAP table name")
    need(data, off, 1, "TABLE_MAP table terminator")
    ncols, off = packed_int(data, off + 1, "TABLE_MAP column count")
    need(data, off, ncols, "TABLE_MAP column types")
    types = tuple(data[off : off + ncols])
    off += ncols
    if off >= len(data):
        raise UnsupportedType("TABLE_MAP without column metadata (MySQL 5.1 before 5.1.18)")
    meta_len, off = packed_int(data, off, "TABLE_MAP metadata length")
    need(data, off, meta_len, "TABLE_MAP column metadata")
    metas, meta_end = _read_metadata(types, data, off, off + meta_len)
    if meta_end != off + meta_len:
        raise CorruptEvent(f"TABLE_MAP column metadata is {meta_len} bytes, the column types use {meta_end - off}")
    metas = tuple(metas)
    off += meta_len
    nbytes = (ncols + 7) // 8
    need(data, off, nbytes, "TABLE_MAP null bitmap")
    nullable = bits_lsb(data, off, ncols)
    off += nbytes
    real_types = tuple(_real_type(t, m) for t, m in zip(types, metas))
    raw_opt = bytes(data[off:])
    opt = _optional_metadata(raw_opt, real_types, ctx.format.is_mariadb) if raw_opt else {}
    return TableMapEvent(
        header, ph.table_id, ph.flags, name_text(schema), name_text(table), ncols, types, metas, nullable,
        raw_optional_metadata=raw_opt, real_types=real_types, **opt,
    )
