"""Matching row images to a schema: names, types and keys of each logged column (priority: table map >
DDL > seed; config keys), the value fixes silver applies, and the text forms of INET/UUID bytes.
Pure."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence
from pipelines.errors import PipelineError
from pipelines.schema.model import (
    ColumnDef, SEED, SchemaVersion, BINARY_TYPES, GEOMETRY_TYPES, TEXT_TYPES, norm_charset,
)


@dataclass(frozen=True)
class ImageColumn:
    """One column as a bronze image shows it: ``idx``, the table map's ``name`` (FULL
    metadata only) and the logged ``type`` text (``LONG UNSIGNED``, ``VARCHAR(40) utf8mb4``)."""

    idx: int
    name: str | None
    type: str

    def sort_key(self) -> tuple:
        return (self.idx, self.name is not None, self.name or "", self.type)


def sorted_shape(shape: Iterable[ImageColumn]) -> tuple[ImageColumn, ...]:
    """A shape's columns, distinct, in ``idx`` order."""
    return tuple(sorted(set(shape), key=ImageColumn.sort_key))


@dataclass(frozen=True)
class BinlogType:
    """A bronze ``type`` text taken apart: ``NEWDECIMAL(10,2) UNSIGNED`` ->
    ``BinlogType("NEWDECIMAL", (10, 2), True, None)``."""

    name: str
    args: tuple[int, ...] = ()
    unsigned: bool = False
    charset: str | None = None


_BINLOG_TYPE_RE = re.compile(r"^(?P<name>[A-Z_0-9]+)(?:\((?P<args>[\d, ]*)\))?(?P<unsigned> UNSIGNED)?(?: (?P<cs>\S+))?$")


def parse_binlog_type(text: str) -> BinlogType:
    """The parts of a bronze ``type`` text.

    >>> parse_binlog_type("VARCHAR(40) utf8mb4")
    BinlogType(name='VARCHAR', args=(40,), unsigned=False, charset='utf8mb4')
    """
    m = _BINLOG_TYPE_RE.match(text.strip())
    if not m:
        raise ValueError(f"cannot read the bronze column type {text!r}")
    args = tuple(int(a) for a in (m.group("args") or "").replace(" ", "").split(",") if a)
    return BinlogType(m.group("name"), args, bool(m.group("unsigned")), norm_charset(m.group("cs")))


_BLOBS = frozenset({"TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "TINY_BLOB", "MEDIUM_BLOB", "LONG_BLOB"})


# DDL type -> binlog type names it may be logged as
_COMPATIBLE: dict[str, frozenset[str]] = {
    "TINYINT": frozenset({"TINY"}), "SMALLINT": frozenset({"SHORT"}), "MEDIUMINT": frozenset({"INT24"}),
    "INT": frozenset({"LONG"}), "BIGINT": frozenset({"LONGLONG"}),
    "DECIMAL": frozenset({"NEWDECIMAL", "DECIMAL"}), "FLOAT": frozenset({"FLOAT"}), "DOUBLE": frozenset({"DOUBLE"}),
    "BIT": frozenset({"BIT"}), "DATE": frozenset({"DATE", "NEWDATE"}),
    "DATETIME": frozenset({"DATETIME", "DATETIME2"}), "TIMESTAMP": frozenset({"TIMESTAMP", "TIMESTAMP2"}),
    "TIME": frozenset({"TIME", "TIME2"}), "YEAR": frozenset({"YEAR"}),
    "CHAR": frozenset({"STRING"}), "BINARY": frozenset({"STRING"}),
    "VARCHAR": frozenset({"VARCHAR", "VAR_STRING"}), "VARBINARY": frozenset({"VARCHAR", "VAR_STRING"}),
    "ENUM": frozenset({"ENUM", "STRING"}), "SET": frozenset({"SET", "STRING"}),
    "JSON": _BLOBS | {"JSON"}, "GEOMETRY": frozenset({"GEOMETRY"}),
    "INET6": frozenset({"STRING"}), "INET4": frozenset({"STRING"}), "UUID": frozenset({"STRING"}),
    "VECTOR": frozenset({"VECTOR", "VARCHAR"}),
    **{t: _BLOBS for t in ("TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB")},
    **{t: frozenset({"GEOMETRY"}) for t in GEOMETRY_TYPES},
}


_INT_BITS = {"TINY": 8, "SHORT": 16, "INT24": 24, "LONG": 32, "LONGLONG": 64}


_BINLOG_TO_SQL = {"TINY": "tinyint", "SHORT": "smallint", "INT24": "mediumint", "LONG": "int", "LONGLONG": "bigint",
                  "NEWDECIMAL": "decimal", "DECIMAL": "decimal", "FLOAT": "float", "DOUBLE": "double", "BIT": "bit",
                  "DATE": "date", "NEWDATE": "date", "DATETIME": "datetime", "DATETIME2": "datetime",
                  "TIMESTAMP": "timestamp", "TIMESTAMP2": "timestamp", "TIME": "time", "TIME2": "time",
                  "YEAR": "year", "ENUM": "enum", "SET": "set", "JSON": "json", "GEOMETRY": "geometry",
                  "VECTOR": "vector"}


def compatible(ddl: ColumnDef, logged: BinlogType) -> bool:
    """Can a column the DDL declares as ``ddl`` be logged as ``logged``?

    >>> compatible(ColumnDef("a", "INT"), parse_binlog_type("LONG UNSIGNED"))
    True
    >>> compatible(ColumnDef("a", "INT"), parse_binlog_type("VARCHAR(4) utf8mb4"))
    False
    """
    ok = logged.name in _COMPATIBLE.get(ddl.type, frozenset())
    if ok and logged.charset and ddl.type in BINARY_TYPES | {"INET6", "INET4", "UUID"}:
        return logged.charset == "binary"
    if ok and logged.charset == "binary" and ddl.type in TEXT_TYPES - {"ENUM", "SET"}:
        return False
    return ok


def spec_from_ddl(col: ColumnDef, idx: int, logged: BinlogType | None = None, metadata: bool = False):
    """The silver :class:`~pipelines.schema.typemap.ColumnSpec` of a DDL column at image position ``idx``;
    ``logged`` (with ``metadata``: the table map carried signedness/charsets) wins on
    signedness and charset."""
    from pipelines.schema.typemap import ColumnSpec

    t = col.type
    unsigned = col.unsigned if not (metadata and logged is not None) else logged.unsigned or col.unsigned
    charset = logged.charset if logged is not None and logged.charset else col.charset
    precision = scale = length = None
    if t == "DECIMAL":
        precision, scale = col.length, col.decimals
    elif t in ("FLOAT", "DOUBLE"):
        precision, scale = col.length, col.decimals
    elif t in ("CHAR", "BINARY", "BIT", "VARCHAR", "VARBINARY", "VECTOR"):
        length = col.length
    return ColumnSpec(
        name=col.name, mysql_type=t.lower(), unsigned=unsigned, precision=precision, scale=scale, length=length,
        charset=charset, nullable=col.nullable,
        enum_values=col.values if t == "ENUM" else (), set_values=col.values if t == "SET" else (), ordinal=idx,
    )


def spec_from_binlog(name: str, logged: BinlogType, idx: int):
    """A :class:`~pipelines.schema.typemap.ColumnSpec` from the table map alone (FULL metadata, no DDL)."""
    from pipelines.schema.typemap import ColumnSpec

    n, cs = logged.name, logged.charset
    binary = cs == "binary"
    precision = scale = length = None
    if n in _BINLOG_TO_SQL:
        sql = _BINLOG_TO_SQL[n]
        if sql == "decimal" and len(logged.args) == 2:
            precision, scale = logged.args
        elif sql == "bit" and logged.args:
            length = logged.args[0]
    elif n == "STRING":
        sql, length = ("binary" if binary else "char"), (logged.args[0] if logged.args else None)
    elif n in ("VARCHAR", "VAR_STRING"):
        sql, length = ("varbinary" if binary else "varchar"), (logged.args[0] if logged.args else None)
    elif n in _BLOBS:
        size = n.replace("_", "").replace("BLOB", "").lower()
        sql = size + ("blob" if binary or cs is None else "text")
    else:
        raise ValueError(f"column {name!r}: no silver type for the logged type {n!r}")
    return ColumnSpec(name=name, mysql_type=sql, unsigned=logged.unsigned, precision=precision, scale=scale,
                      length=length, charset=cs, ordinal=idx)


# How to complete a bronze value the decoder could not finish without the schema
# (table maps without metadata: no charsets, no signedness, no ENUM/SET names).
FIX_DECODE = "decode"  # (FIX_DECODE, MySQL charset): bytes -> text


FIX_ENUM = "enum"  # (FIX_ENUM, values): index -> member


FIX_SET = "set"  # (FIX_SET, values): bitmask -> members


FIX_UNSIGNED = "unsigned"  # (FIX_UNSIGNED, bits): negative -> + 2**bits


FIX_INET6 = "inet6"  # bytes -> text as MariaDB prints it


FIX_INET4 = "inet4"


FIX_UUID = "uuid"


def _value_fix(col: ColumnDef, logged: BinlogType, metadata: bool, db_charset: str | None) -> tuple | None:
    t = col.type
    if t in ("INET6", "INET4", "UUID"):
        return ({"INET6": FIX_INET6, "INET4": FIX_INET4, "UUID": FIX_UUID}[t],)
    if t == "ENUM" and col.values:
        return (FIX_ENUM, col.values)
    if t == "SET" and col.values:
        return (FIX_SET, col.values)
    if col.unsigned and not logged.unsigned and logged.name in _INT_BITS and not metadata:
        return (FIX_UNSIGNED, _INT_BITS[logged.name])
    if (t in TEXT_TYPES or t == "JSON") and logged.charset is None:
        cs = col.charset or db_charset or "utf8mb4"
        if cs != "binary":
            return (FIX_DECODE, cs)
    return None


@dataclass(frozen=True)
class Resolution:
    """How silver reads one segment of one table: the specs (by image ``idx``), the key and
    where both came from, the value fixes (``idx -> fix``) and the image shapes that do not
    fit the schema (``shape -> reason``: those rows go to quarantine)."""

    specs: tuple
    keys: tuple[str, ...]
    key_source: str  # config | table_map | ddl | none
    name_source: str  # table_map | ddl | seed | none
    fixes: Mapping[int, tuple] = field(default_factory=dict)
    rejected: Mapping[tuple[ImageColumn, ...], str] = field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]


class KeyConfigError(PipelineError, ValueError):
    """A configured key names columns the table does not have."""


def choose_keys(names: Sequence[str], override: Sequence[str] | None, table_map_key: Sequence[str] | None,
                ddl_key: Sequence[str] | None, table: str = "") -> tuple[tuple[str, ...], str]:
    """``(key columns, source)``: config override > table-map primary key > DDL key > none.

    >>> choose_keys(["id", "v"], None, None, ["id"])
    (('id',), 'ddl')
    >>> choose_keys(["id", "v"], ["V"], ["id"], ["id"])
    (('v',), 'config')
    """
    by_lower = {n.lower(): n for n in names}

    def canon(cols, source):
        missing = [c for c in cols if c.lower() not in by_lower]
        if missing:
            if source == "config":
                raise KeyConfigError(f"keys for {table or 'the table'}: columns {missing} do not exist; "
                                f"columns are {list(names)}")
            return None
        return tuple(by_lower[c.lower()] for c in cols)

    for cols, source in ((override, "config"), (table_map_key, "table_map"), (ddl_key, "ddl")):
        if cols:
            got = canon(cols, source)
            if got:
                return got, source
    return (), "none"


class _Rejected(Exception):
    """Why a shape's column cannot be resolved (its shape goes to quarantine)."""


def _column_spec(c: ImageColumn, lt: BinlogType, named: bool, version: SchemaVersion | None, where: str,
                 db_charset: str | None) -> tuple:
    """``(spec, value fix)`` of one image column: by its name from the table map (the DDL's
    definition when it agrees with the logged type, else the logged type alone), or by its
    position in the DDL/seed ``version``; raises :class:`_Rejected`."""
    schema = version.schema if version is not None else None
    if named:
        ddl_col = None
        if schema is not None:
            i = schema.index_of(c.name)
            ddl_col = schema.columns[i] if i is not None else None
        if ddl_col is not None and compatible(ddl_col, lt):
            return (spec_from_ddl(replace(ddl_col, name=c.name), c.idx, lt, metadata=True),
                    _value_fix(ddl_col, lt, True, db_charset))
        try:
            return spec_from_binlog(c.name, lt, c.idx), None
        except ValueError as e:
            raise _Rejected(str(e)) from None
    if schema is None:
        raise _Rejected(f"no column names for {where}: the table map has no FULL metadata "
                        f"(binlog_row_metadata=FULL), and there is no CREATE TABLE in the binlogs "
                        f"and no seed for it")
    ddl_source = "seed" if version.kind == SEED else "ddl"
    if c.idx >= len(schema.columns):
        raise _Rejected(f"the row has a column #{c.idx + 1} ({c.type}) but the schema of {where} "
                        f"({ddl_source} at _seq {version.valid_from or 'start'}) has "
                        f"{len(schema.columns)} columns: {', '.join(schema.names)}")
    ddl_col = schema.columns[c.idx]
    if not compatible(ddl_col, lt):
        raise _Rejected(f"column #{c.idx + 1} of {where} is logged as {c.type} but the schema "
                        f"({ddl_source} at _seq {version.valid_from or 'start'}) declares "
                        f"{ddl_col.name} {ddl_col.type_text()}")
    return (spec_from_ddl(ddl_col, c.idx, lt, metadata=lt.charset is not None or lt.unsigned),
            _value_fix(ddl_col, lt, False, db_charset))


def resolve_columns(db: str, table: str, version: SchemaVersion | None, shapes: Iterable[Sequence[ImageColumn]], *,
                    key_override: Sequence[str] | None = None, table_map_key_idx: Sequence[int] | None = None,
                    db_charset: str | None = None) -> Resolution:
    """Match the image shapes of one segment of ``db.table`` to its schema.

    Names come from the table map (FULL metadata) when the images carry them, else from the
    DDL/seed ``version``. A shape is rejected (its rows go to quarantine) when a column
    lies beyond the schema, when its logged type cannot be the declared type, when two
    table maps disagree about one position, or when no names are known at all.
    """
    schema = version.schema if version is not None else None
    ddl_source = "seed" if version is not None and version.kind == SEED else "ddl"
    shapes = sorted({sorted_shape(s) for s in shapes}, key=lambda s: (-len(s), [c.sort_key() for c in s]))
    specs: dict[int, object] = {}
    logged_at: dict[int, BinlogType] = {}
    fixes: dict[int, tuple] = {}
    rejected: dict[tuple[ImageColumn, ...], str] = {}
    name_source = "none"
    where = f"{db}.{table}"
    for shape in shapes:
        try:
            logged = {c.idx: parse_binlog_type(c.type) for c in shape}
        except ValueError as e:
            rejected[shape] = str(e)
            continue
        named = bool(shape) and all(c.name is not None for c in shape)
        problem = None
        new: dict[int, object] = {}
        new_fixes: dict[int, tuple] = {}
        for c in shape:
            lt = logged[c.idx]
            try:
                spec, fix = _column_spec(c, lt, named, version, where, db_charset)
            except _Rejected as e:
                problem = str(e)
                break
            prev = specs.get(c.idx)
            if prev is not None and (prev.name.lower() != spec.name.lower() or
                                     prev.mysql_type != spec.mysql_type):
                problem = (f"table maps of {where} disagree about column #{c.idx + 1}: "
                           f"{prev.name} {prev.mysql_type} vs {spec.name} {spec.mysql_type}")
                break
            new[c.idx] = spec
            if fix is not None:
                new_fixes[c.idx] = fix
        if problem is None:
            names_now = {s.name.lower(): i for i, s in {**specs, **new}.items()}
            if len(names_now) != len({**specs, **new}):
                problem = f"two columns of {where} share one name: {sorted(s.name for s in new.values())}"
        if problem is not None:
            rejected[shape] = problem
            continue
        specs.update(new)
        fixes.update(new_fixes)
        logged_at.update(logged)
        name_source = "table_map" if named else ddl_source
    # columns the schema declares but no image showed (partial images): keep them in silver
    if schema is not None and name_source != "table_map":
        name_source = ddl_source
        for i, col in enumerate(schema.columns):
            if i not in specs:
                specs[i] = spec_from_ddl(col, i)
    ordered = tuple(specs[i] for i in sorted(specs))
    names = [s.name for s in ordered]
    tm_key = None
    if table_map_key_idx:
        if all(i in specs for i in table_map_key_idx):
            tm_key = [specs[i].name for i in table_map_key_idx]
    ddl_key = schema.effective_key() if schema is not None else None
    keys, key_source = choose_keys(names, key_override, tm_key, ddl_key, where) if names else ((), "none")
    return Resolution(ordered, keys, key_source, name_source, fixes, rejected)


def inet6_text(raw: bytes) -> str:
    """INET6 as MariaDB prints it: lower-case groups without leading zeros, the leftmost longest
    run of zero groups as ``::`` even when it is one group long (unlike RFC 5952, which
    ``ipaddress`` follows; established on the server, ``tests/test_schema_history.py``), and
    IPv4-mapped/-compatible addresses with a dotted quad.

    >>> inet6_text(bytes(15) + b"\\x01"), inet6_text(bytes(10) + b"\\xff\\xff\\xc0\\x00\\x02\\x01")
    ('::1', '::ffff:192.0.2.1')
    >>> inet6_text(bytes.fromhex("00010000000200030004000500060007"))
    '1::2:3:4:5:6:7'
    """
    raw = bytes(raw).ljust(16, b"\0")
    if raw[:10] == bytes(10) and raw[10:12] == b"\xff\xff":
        return "::ffff:" + inet4_text(raw[12:])
    if raw[:12] == bytes(12) and raw[12:14] != b"\0\0":
        return "::" + inet4_text(raw[12:])
    groups = [int.from_bytes(raw[i:i + 2], "big") for i in range(0, 16, 2)]
    best, at, run = 0, -1, 0
    for i, g in enumerate(groups + [1]):  # the sentinel ends a trailing run
        if g == 0:
            run += 1
        else:
            if run > best:
                best, at = run, i - run
            run = 0
    text = [f"{g:x}" for g in groups]
    if best == 0:
        return ":".join(text)
    return ":".join(text[:at]) + "::" + ":".join(text[at + best:])


def inet4_text(raw: bytes) -> str:
    """INET4 as dotted quad.

    >>> inet4_text(b"\\xc0\\xa8\\x01\\x01")
    '192.168.1.1'
    """
    raw = bytes(raw).ljust(4, b"\0")
    return ".".join(str(b) for b in raw[:4])


def uuid_text(raw: bytes) -> str:
    """UUID text of the 16 bytes MariaDB logs (in text order; trailing zero bytes may be cut).

    >>> uuid_text(bytes.fromhex("123e4567e89b12d3a4564266141740"))
    '123e4567-e89b-12d3-a456-426614174000'
    """
    h = bytes(raw).ljust(16, b"\0").hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def apply_fix(fix: tuple, text: str | None, raw: bytes | None, named: bool = False) -> tuple[str | None, bytes | None]:
    """The completed ``(text, bin)`` of one bronze cell (``named``: the cell carries a column
    name, so the table map had FULL metadata and ENUM/SET values are members already).

    >>> apply_fix((FIX_ENUM, ("a", "b")), "2", None)
    ('b', None)
    >>> apply_fix((FIX_SET, ("x", "y", "z")), "5", None)
    ('x,z', None)
    >>> apply_fix((FIX_UNSIGNED, 32), "-1", None)
    ('4294967295', None)
    >>> apply_fix((FIX_DECODE, "utf8mb4"), None, "é".encode())
    ('é', None)
    """
    kind = fix[0]
    if kind == FIX_DECODE:
        if raw is not None and text is None:
            from pipelines.binlog.charsets import CHARSET_CODECS

            codec = CHARSET_CODECS.get(fix[1])
            if codec is None:
                raise ValueError(f"no text decoding for the MySQL charset {fix[1]!r}")
            return bytes(raw).decode(codec, "replace"), None  # (bytes the charset refuses: U+FFFD)
    elif kind == FIX_ENUM:
        if text is not None and text.isascii() and text.isdigit() and not named:
            i = int(text)
            if i > len(fix[1]):
                raise ValueError(f"ENUM index {i} but the schema has {len(fix[1])} members {fix[1]}")
            return ("" if i == 0 else fix[1][i - 1]), raw
    elif kind == FIX_SET:
        if text is not None and text.isascii() and text.isdigit() and not named:
            bits = int(text)
            if bits >> len(fix[1]):
                raise ValueError(f"SET bits 0x{bits:x} but the schema has {len(fix[1])} members {fix[1]}")
            return ",".join(m for k, m in enumerate(fix[1]) if bits >> k & 1), raw
    elif kind == FIX_UNSIGNED:
        if text is not None and text.startswith("-"):
            return str(int(text) + (1 << fix[1])), raw
    elif kind in (FIX_INET6, FIX_INET4, FIX_UUID):
        if raw is not None and text is None:
            fmt = {FIX_INET6: inet6_text, FIX_INET4: inet4_text, FIX_UUID: uuid_text}[kind]
            return fmt(raw), None
    else:
        raise ValueError(f"unknown value fix {fix!r}")
    return text, raw

