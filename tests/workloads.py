"""SQL workloads that make a real MariaDB server write real binlogs, plus the Python values a decoder
must produce for them.

EXPECTED PYTHON VALUE CONVENTIONS (what ``random_roundtrip_rows`` yields, what ``fetch_python_rows``
reads back from the server, what ``from_binlog_text`` derives from mariadb-binlog output, and what the
pipeline's decoder is expected to produce):

=====================================  =============================================================
column type                            Python value
=====================================  =============================================================
any column, SQL NULL                   ``None``
TINYINT..BIGINT [UNSIGNED], BOOL       ``int`` (unsigned columns: the non-negative value)
DECIMAL(p,s)                           ``decimal.Decimal`` with exactly ``s`` fractional digits
FLOAT                                  ``float``: the float32 value widened to double (so FLOAT 0.1 is
                                       0.10000000149011612).  mariadb-binlog prints FLOAT ``%g`` (6
                                       significant digits): compare text with :func:`float_as_text`
DOUBLE                                 ``float`` (exact)
BIT(n)                                 ``int``
YEAR                                   ``int``; YEAR 0000 -> ``0``
DATE                                   ``datetime.date``; zero/invalid dates -> ``str`` 'YYYY-MM-DD'
TIME(n)                                ``datetime.timedelta`` (negative allowed: -838:59:59.999999)
DATETIME(n)                            naive ``datetime.datetime``; zero/invalid -> ``str`` as
                                       SELECT prints it ('0000-00-00 00:00:00[.000]')
TIMESTAMP(n)                           AWARE ``datetime.datetime`` in UTC (``tzinfo=timezone.utc``;
                                       ``.timestamp()`` is the epoch value the binlog carries);
                                       zero timestamp -> ``str`` '0000-00-00 00:00:00[.000]'
CHAR/VARCHAR/TEXT with a charset       ``str`` (decoded from the column charset).  CHAR trailing spaces
                                       are not preserved (binlog and SELECT both strip them)
BINARY(n) / CHAR(n) CHARACTER SET      ``bytes`` right-padded with ``b"\\0"`` to n (the binlog strips the
binary                                 trailing zero bytes; re-pad to the declared length)
VARBINARY / BLOB types                 ``bytes``
ENUM                                   ``str`` member; '' for the error value (index 0)
SET                                    ``str``: members joined by ',' in definition order ('' = empty)
JSON                                   ``str`` exactly as stored (MariaDB JSON is LONGTEXT)
GEOMETRY types                         ``bytes``: 4-byte little-endian SRID + WKB (MariaDB's format)
INET6 / INET4 / UUID                   ``str`` canonical text as SELECT prints it (the binlog holds the
                                       16/4 raw bytes; MariaDB's UUID storage order swaps segments)
=====================================  =============================================================

Workloads:

* :data:`ALL_TYPES_DDL` / :data:`ALL_TYPES_DML` / :func:`all_types_sql` / :func:`all_types_workload`:
  every MariaDB column type with representative and extreme values, NULLs in every column, zero dates,
  keyless and composite-key tables, a primary-key UPDATE, multi-row INSERT/UPDATE/DELETE, a multi-table
  transaction, a rolled-back transaction, rows > 8 KB.  Deterministic (no NOW()/RAND()/UUID()).
* :data:`ROUNDTRIP_COLUMNS` / :func:`roundtrip_ddl` / :func:`random_roundtrip_rows` /
  :func:`roundtrip_insert_sql` / :func:`random_roundtrip_changes` / :func:`roundtrip_workload`:
  seeded random rows of a fixed many-typed table together with the expected Python values and the
  expected ordered change stream (insert/update/delete with before/after images).
"""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterable, Sequence

__all__ = [
    "ALL_TYPES_DDL",
    "ALL_TYPES_DML",
    "ALL_TYPES_TABLES",
    "ALL_TYPES_FINAL_COUNTS",
    "all_types_sql",
    "all_types_workload",
    "WorkloadRun",
    "Col",
    "ROUNDTRIP_COLUMNS",
    "ROUNDTRIP_TABLE",
    "roundtrip_ddl",
    "random_roundtrip_rows",
    "random_roundtrip_changes",
    "roundtrip_insert_sql",
    "roundtrip_workload",
    "RoundtripRun",
    "Change",
    "sql_literal",
    "sql_string",
    "fetch_python_rows",
    "from_binlog_text",
    "comparable",
    "random_value",
    "random_row",
    "float_as_text",
    "float32",
    "UTC",
]

UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


# =====================================================================================================
# SQL literal helpers
# =====================================================================================================
_SQL_ESCAPES = {"\\": "\\\\", "'": "\\'", "\x00": "\\0", "\n": "\\n", "\r": "\\r", "\x1a": "\\Z"}


def sql_string(s: str, introducer: str | None = "_utf8mb4") -> str:
    """A quoted SQL string literal (default sql_mode: backslash escapes active)."""
    body = "".join(_SQL_ESCAPES.get(ch, ch) for ch in s)
    return f"{introducer}'{body}'" if introducer else f"'{body}'"


def sql_bytes(b: bytes) -> str:
    return f"X'{b.hex().upper()}'"


def float32(x: float) -> float:
    """The value a FLOAT column stores for ``x``, widened back to a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def float_as_text(x: float) -> float:
    """``x`` as mariadb-binlog's ``%g`` (6 significant digits) renders a FLOAT, read back as float."""
    return float(f"{x:.6g}")


def _fmt_time(td: dt.timedelta, fsp: int) -> str:
    us = td // dt.timedelta(microseconds=1)
    sign = "-" if us < 0 else ""
    us = abs(us)
    secs, frac = divmod(us, 1_000_000)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    out = f"{sign}{h:02d}:{m:02d}:{s:02d}"
    if fsp:
        out += "." + f"{frac:06d}"[:fsp]
    return out


def _fmt_datetime(v: dt.datetime, fsp: int) -> str:
    out = v.strftime("%Y-%m-%d %H:%M:%S") if v.year >= 1000 else (
        f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:{v.second:02d}"
    )
    if fsp:
        out += "." + f"{v.microsecond:06d}"[:fsp]
    return out


# =====================================================================================================
# Column model for the round-trip table
# =====================================================================================================
_PY_CODECS = {
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "latin1": "latin-1",  # MariaDB latin1 is really cp1252; our generators stay within U+00A0..U+00FF
    "ascii": "ascii",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf32": "utf-32-be",
}

_INT_RANGES = {
    "TINYINT": 8,
    "SMALLINT": 16,
    "MEDIUMINT": 24,
    "INT": 32,
    "BIGINT": 64,
}


@dataclass(frozen=True)
class Col:
    """A column of the round-trip table and its value conventions."""

    name: str
    sql: str  # type as written in the DDL (without NULL/NOT NULL)
    kind: str  # int dec float double bit year date time datetime timestamp char varchar text
    # binary varbinary blob enum set json
    unsigned: bool = False
    bits: int = 0  # integer width or BIT(n) width
    precision: int = 0  # DECIMAL
    scale: int = 0  # DECIMAL
    fsp: int = 0  # TIME/DATETIME/TIMESTAMP fractional digits
    length: int = 0  # max characters (char/varchar/text) or bytes (binary/varbinary/blob)
    charset: str | None = None
    members: tuple[str, ...] = ()
    nullable: bool = True

    @property
    def codec(self) -> str | None:
        return _PY_CODECS.get(self.charset) if self.charset else None

    # ------------------------------------------------------------------ Python value -> SQL literal
    def literal(self, v: Any) -> str:
        return sql_literal(self, v)


def _ints(name, base, unsigned=False):
    return Col(name, base + (" UNSIGNED" if unsigned else ""), "int", unsigned=unsigned, bits=_INT_RANGES[base])


ROUNDTRIP_TABLE = "t_rt"

ROUNDTRIP_COLUMNS: tuple[Col, ...] = (
    Col("id", "INT", "int", bits=32, nullable=False),
    _ints("c_tinyint", "TINYINT"),
    _ints("c_tinyint_u", "TINYINT", True),
    _ints("c_smallint", "SMALLINT"),
    _ints("c_smallint_u", "SMALLINT", True),
    _ints("c_mediumint", "MEDIUMINT"),
    _ints("c_mediumint_u", "MEDIUMINT", True),
    _ints("c_int", "INT"),
    _ints("c_int_u", "INT", True),
    _ints("c_bigint", "BIGINT"),
    _ints("c_bigint_u", "BIGINT", True),
    Col("c_dec", "DECIMAL(20,6)", "dec", precision=20, scale=6),
    Col("c_dec_big", "DECIMAL(65,30)", "dec", precision=65, scale=30),
    Col("c_dec_u", "DECIMAL(10,2) UNSIGNED", "dec", unsigned=True, precision=10, scale=2),
    Col("c_dec0", "DECIMAL(18,0)", "dec", precision=18, scale=0),
    Col("c_float", "FLOAT", "float"),
    Col("c_double", "DOUBLE", "double"),
    Col("c_bit", "BIT(13)", "bit", bits=13),
    Col("c_bit64", "BIT(64)", "bit", bits=64),
    Col("c_year", "YEAR", "year"),
    Col("c_date", "DATE", "date"),
    Col("c_time", "TIME(6)", "time", fsp=6),
    Col("c_time0", "TIME", "time", fsp=0),
    Col("c_datetime", "DATETIME(6)", "datetime", fsp=6),
    Col("c_datetime3", "DATETIME(3)", "datetime", fsp=3),
    Col("c_ts", "TIMESTAMP(6)", "timestamp", fsp=6),
    Col("c_ts0", "TIMESTAMP", "timestamp", fsp=0),
    Col("c_char", "CHAR(10) CHARACTER SET utf8mb4", "char", length=10, charset="utf8mb4"),
    Col("c_varchar", "VARCHAR(300) CHARACTER SET utf8mb4", "varchar", length=300, charset="utf8mb4"),
    Col("c_latin1", "VARCHAR(50) CHARACTER SET latin1", "varchar", length=50, charset="latin1"),
    Col("c_text", "TEXT CHARACTER SET utf8mb4", "text", length=2000, charset="utf8mb4"),
    Col("c_binary", "BINARY(8)", "binary", length=8),
    Col("c_varbinary", "VARBINARY(64)", "varbinary", length=64),
    Col("c_blob", "BLOB", "blob", length=3000),
    Col(
        "c_enum",
        "ENUM('red','green','blue','ünï😀') CHARACTER SET utf8mb4",
        "enum",
        members=("red", "green", "blue", "ünï😀"),
        charset="utf8mb4",
    ),
    Col(
        "c_set",
        "SET('a','b','c','d','e','f','g','h','i') CHARACTER SET utf8mb4",
        "set",
        members=("a", "b", "c", "d", "e", "f", "g", "h", "i"),
        charset="utf8mb4",
    ),
    Col("c_json", "JSON", "json", charset="utf8mb4"),
)


def roundtrip_ddl(table: str = ROUNDTRIP_TABLE, columns: Sequence[Col] = ROUNDTRIP_COLUMNS) -> str:
    """``CREATE TABLE`` for the round-trip table (``id`` is the primary key)."""
    defs = []
    for c in columns:
        null = "NOT NULL" if not c.nullable else ("NULL DEFAULT NULL" if c.kind == "timestamp" else "NULL")
        defs.append(f"  `{c.name}` {c.sql} {null}")
    defs.append("  PRIMARY KEY (`id`)")
    return f"CREATE TABLE `{table}` (\n" + ",\n".join(defs) + "\n) ENGINE=InnoDB"


def sql_literal(col: Col, v: Any) -> str:
    """SQL literal inserting the expected Python value ``v`` into ``col`` (see conventions)."""
    if v is None:
        return "NULL"
    k = col.kind
    if k == "int":
        return str(int(v))
    if k == "dec":
        return format(v, "f")
    if k in ("float", "double"):
        return repr(float(v))
    if k == "bit":
        return f"b'{v:b}'"
    if k == "year":
        return str(int(v))  # numeric 0 -> 0000 (the string '0' would mean 2000)
    if k == "date":
        return f"'{v}'" if isinstance(v, str) else f"'{v.isoformat()}'"
    if k == "time":
        return f"'{_fmt_time(v, col.fsp)}'"
    if k == "datetime":
        return f"'{v}'" if isinstance(v, str) else f"'{_fmt_datetime(v, col.fsp)}'"
    if k == "timestamp":  # the session runs with time_zone='+00:00'
        return f"'{v}'" if isinstance(v, str) else f"'{_fmt_datetime(v.astimezone(UTC), col.fsp)}'"
    if k in ("char", "varchar", "text", "enum", "set", "json"):
        return sql_string(v)
    if k in ("binary", "varbinary", "blob"):
        return sql_bytes(v)
    raise ValueError(f"unknown kind {k}")


# =====================================================================================================
# Random values
# =====================================================================================================
_ASCII = [chr(c) for c in range(0x20, 0x7F)]
_SPECIAL = ["\t", "\n", "\r", "\\", "'", '"', "%", "_", "\x00", "\x1a", "\x7f"]
_LATIN = [chr(c) for c in range(0xA0, 0x100)]
_BMP = ["é", "ß", "€", "漢", "字", "ü", "Ω", "ж", "א", "ا", "\u200b", "\ufeff"]
_ASTRAL = ["😀", "🎉", "𝄞", "🇩🇪"[0], "𠜎"]
_MAX_TIME_US = (838 * 3600 + 59 * 60 + 59) * 1_000_000 + 999_999
_DATE_MIN = dt.date(1000, 1, 1).toordinal()
_DATE_MAX = dt.date(9999, 12, 31).toordinal()
_SPECIAL_DOUBLES = (0.0, 1.0, -1.5, 0.1, 1e-300, -2.5e-10, 1.7976931348623157e308, -1.7976931348623157e308,
                    2.2250738585072014e-308, 5e-324, 123456789.123456789, 9007199254740993.0)
_SPECIAL_FLOATS = (0.0, 1.0, -0.5, 0.1, 3.4028234663852886e38, -3.4028234663852886e38, 1.1754943508222875e-38,
                   16777216.0, 123.456)


def _rand_str(rng: random.Random, n: int, *, latin1: bool = False) -> str:
    out = []
    for _ in range(n):
        r = rng.random()
        if latin1:
            out.append(rng.choice(_LATIN) if r < 0.3 else rng.choice(_ASCII))
        elif r < 0.6:
            out.append(rng.choice(_ASCII))
        elif r < 0.7:
            out.append(rng.choice(_SPECIAL))
        elif r < 0.85:
            out.append(rng.choice(_BMP + _LATIN[:10]))
        else:
            out.append(rng.choice(_ASTRAL))
    return "".join(out)


def _rand_len(rng: random.Random, max_len: int) -> int:
    r = rng.random()
    if r < 0.1:
        return 0
    if r < 0.2:
        return max_len
    if r < 0.7:
        return rng.randint(0, min(max_len, 12))
    return rng.randint(0, max_len)


def _rand_json(rng: random.Random, depth: int = 0) -> Any:
    r = rng.random()
    if depth > 3 or r < 0.4:
        return rng.choice(
            [
                None,
                True,
                False,
                rng.randint(-(2**63), 2**63 - 1),
                rng.randint(-1000, 1000) / 8,
                _rand_str(rng, rng.randint(0, 8)).replace("\x00", ""),
            ]
        )
    if r < 0.7:
        return [_rand_json(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {f"k{i}_{_rand_str(rng, 2, latin1=True)}": _rand_json(rng, depth + 1) for i in range(rng.randint(0, 4))}


def random_value(rng: random.Random, col: Col) -> Any:
    """One random non-NULL expected Python value for ``col``."""
    k = col.kind
    if k == "int":
        lo, hi = (0, 2**col.bits - 1) if col.unsigned else (-(2 ** (col.bits - 1)), 2 ** (col.bits - 1) - 1)
        r = rng.random()
        if r < 0.15:
            return rng.choice([lo, hi, 0, 1, -1 if lo < 0 else 2, hi - 1])
        if r < 0.5:
            return rng.randint(max(lo, -1000), min(hi, 1000))
        return rng.randint(lo, hi)
    if k == "dec":
        ip = col.precision - col.scale
        r = rng.random()
        if r < 0.1:
            digits = 10**col.precision - 1  # all nines
        elif r < 0.2:
            digits = rng.choice([0, 1])
        else:
            digits = rng.randint(0, 10 ** rng.randint(1, col.precision) - 1)
        if not col.unsigned and rng.random() < 0.5:
            digits = -digits
        assert ip >= 0
        return Decimal(f"{digits}E-{col.scale}")  # exact (no context rounding), exponent -scale
    if k == "float":
        if rng.random() < 0.3:
            return float32(rng.choice(_SPECIAL_FLOATS))
        return float32(rng.randint(-(2**20), 2**20) / 64)
    if k == "double":
        r = rng.random()
        if r < 0.3:
            return rng.choice(_SPECIAL_DOUBLES)
        if r < 0.6:
            return rng.randint(-(10**9), 10**9) / 1024
        return rng.uniform(-1, 1) * 10.0 ** rng.randint(-300, 300)
    if k == "bit":
        return rng.choice([0, 2**col.bits - 1, rng.getrandbits(col.bits)])
    if k == "year":
        return rng.choice([0, 1901, 2155, rng.randint(1901, 2155)])
    if k == "date":
        return dt.date.fromordinal(rng.randint(_DATE_MIN, _DATE_MAX))
    if k == "time":
        us = rng.choice([0, _MAX_TIME_US, -_MAX_TIME_US, -500_000, rng.randint(-_MAX_TIME_US, _MAX_TIME_US),
                         rng.randint(-86_400_000_000, 86_400_000_000)])
        unit = 10 ** (6 - col.fsp)
        us = int(us / unit) * unit  # truncate toward zero to the column precision
        return dt.timedelta(microseconds=us)
    if k == "datetime":
        day = dt.date.fromordinal(rng.randint(_DATE_MIN, _DATE_MAX))
        unit = 10 ** (6 - col.fsp)
        us = rng.randint(0, 86_400 * 1_000_000 - 1) // unit * unit
        return dt.datetime.combine(day, dt.time()) + dt.timedelta(microseconds=us)
    if k == "timestamp":
        unit = 10 ** (6 - col.fsp)
        sec = rng.choice([1, 2**31 - 1, rng.randint(1, 2**31 - 1)])
        us = rng.randint(0, 999_999) // unit * unit
        return _EPOCH + dt.timedelta(seconds=sec, microseconds=us)
    if k in ("char", "varchar", "text"):
        s = _rand_str(rng, _rand_len(rng, col.length), latin1=col.charset == "latin1")
        return s.rstrip(" ") if k == "char" else s
    if k == "binary":
        b = rng.randbytes(_rand_len(rng, col.length))
        if rng.random() < 0.3:
            b = b[: col.length - 2] + b"\x00\x00"
        return b.ljust(col.length, b"\x00")[: col.length]
    if k in ("varbinary", "blob"):
        return rng.randbytes(_rand_len(rng, col.length))
    if k == "enum":
        return rng.choice(col.members)
    if k == "set":
        return ",".join(m for m in col.members if rng.random() < 0.4)
    if k == "json":
        return json.dumps(_rand_json(rng), ensure_ascii=rng.random() < 0.3)
    raise ValueError(k)


def random_row(rng: random.Random, columns: Sequence[Col], row_id: int, null_rate: float = 0.1) -> dict:
    row = {}
    for c in columns:
        if c.name == "id":
            row["id"] = row_id
        elif c.nullable and rng.random() < null_rate:
            row[c.name] = None
        else:
            row[c.name] = random_value(rng, c)
    return row


def random_roundtrip_rows(
    seed: int,
    n: int,
    *,
    start_id: int = 1,
    null_rate: float = 0.1,
    columns: Sequence[Col] = ROUNDTRIP_COLUMNS,
) -> list[dict]:
    """``n`` random rows (dicts column name -> expected Python value) with ids ``start_id..``.
    Deterministic for a given seed.  The first row has every nullable column NULL."""
    rng = random.Random(seed)
    rows = [random_row(rng, columns, start_id + i, null_rate) for i in range(n)]
    if rows:
        rows[0] = {c.name: (rows[0][c.name] if not c.nullable else None) for c in columns}
    return rows


def roundtrip_insert_sql(
    rows: Iterable[dict],
    table: str = ROUNDTRIP_TABLE,
    *,
    columns: Sequence[Col] = ROUNDTRIP_COLUMNS,
    rows_per_statement: int = 0,
) -> str:
    """Multi-row ``INSERT`` statement(s) for ``rows`` (``rows_per_statement=0``: one statement)."""
    rows = list(rows)
    names = ", ".join(f"`{c.name}`" for c in columns)
    chunks = [rows] if rows_per_statement <= 0 else [
        rows[i : i + rows_per_statement] for i in range(0, len(rows), rows_per_statement)
    ]
    stmts = []
    for chunk in chunks:
        if not chunk:
            continue
        values = ",\n  ".join("(" + ", ".join(sql_literal(c, r[c.name]) for c in columns) + ")" for r in chunk)
        stmts.append(f"INSERT INTO `{table}` ({names}) VALUES\n  {values};")
    return "\n".join(stmts)


@dataclass(frozen=True)
class Change:
    """One expected row change, in binlog order."""

    op: str  # insert | update | delete
    before: dict | None
    after: dict | None


def _row_equal_on_disk(columns: Sequence[Col], a: dict, b: dict) -> bool:
    return all(a[c.name] == b[c.name] for c in columns)


def random_roundtrip_changes(
    seed: int,
    rows: Sequence[dict],
    *,
    n_updates: int = 10,
    n_deletes: int = 3,
    table: str = ROUNDTRIP_TABLE,
    columns: Sequence[Col] = ROUNDTRIP_COLUMNS,
) -> tuple[list[str], list[Change], dict[int, dict]]:
    """Random single-row UPDATEs (1-4 columns each, one of them a primary-key change), then a
    multi-row UPDATE and DELETE, on the table holding ``rows``.

    Returns ``(statements, changes, final)``: the SQL statements in order, the expected changes they
    log (updates that change nothing are avoided: MariaDB logs no row for them), and the expected final
    table contents keyed by id."""
    rng = random.Random(seed ^ 0x5EED)
    live: dict[int, dict] = {r["id"]: dict(r) for r in rows}
    stmts: list[str] = []
    changes: list[Change] = []
    data_cols = [c for c in columns if c.name != "id"]
    next_id = max(live, default=0) + 1000
    for i in range(n_updates):
        if not live:
            break
        rid = rng.choice(sorted(live))
        before = live[rid]
        for _attempt in range(20):
            after = dict(before)
            targets = rng.sample(data_cols, rng.randint(1, 4))
            for c in targets:
                after[c.name] = None if (c.nullable and rng.random() < 0.15) else random_value(rng, c)
            if i == 0:  # primary-key UPDATE
                after["id"] = next_id
                next_id += 1
            if not _row_equal_on_disk(columns, before, after):
                break
        else:  # pragma: no cover
            continue
        changed = [c for c in columns if before[c.name] != after[c.name]]
        sets = ", ".join(f"`{c.name}` = {sql_literal(c, after[c.name])}" for c in changed)
        stmts.append(f"UPDATE `{table}` SET {sets} WHERE `id` = {rid};")
        changes.append(Change("update", before, after))
        del live[rid]
        live[after["id"]] = after
    # multi-row UPDATE of an integer column: rows are visited in primary-key order
    ids = sorted(live)[: min(4, len(live))]
    if ids:
        col = next(c for c in columns if c.name == "c_smallint")
        new_val = 12345
        touched = [i for i in ids if live[i][col.name] != new_val]
        stmts.append(f"UPDATE `{table}` SET `{col.name}` = {new_val} WHERE `id` IN ({', '.join(map(str, ids))});")
        for i in touched:
            before = live[i]
            after = dict(before, **{col.name: new_val})
            changes.append(Change("update", before, after))
            live[i] = after
    # single and multi-row DELETEs
    for _ in range(min(n_deletes, len(live))):
        rid = rng.choice(sorted(live))
        stmts.append(f"DELETE FROM `{table}` WHERE `id` = {rid};")
        changes.append(Change("delete", live.pop(rid), None))
    ids = sorted(live)[-3:]
    if len(ids) > 1:
        stmts.append(f"DELETE FROM `{table}` WHERE `id` IN ({', '.join(map(str, ids))});")
        for i in ids:
            changes.append(Change("delete", live.pop(i), None))
    return stmts, changes, live


@dataclass
class RoundtripRun:
    db: str
    table: str
    rows: list[dict]  # inserted rows
    changes: list[Change]  # expected changes in binlog order (inserts first)
    final: dict[int, dict]  # expected final contents keyed by id
    sql: str  # the whole script that ran
    start: tuple[str, int] | None = None  # (binlog file, pos) before the workload
    end: tuple[str, int] | None = None  # (binlog file, pos) after it


def roundtrip_workload(
    server,
    seed: int = 0,
    n: int = 30,
    *,
    db: str = "rt",
    table: str = ROUNDTRIP_TABLE,
    n_updates: int = 10,
    n_deletes: int = 3,
    rows_per_statement: int = 0,
) -> RoundtripRun:
    """Create ``db``.``table`` (dropping an old one), insert ``n`` random rows, run random changes.
    Every statement autocommits, in one session, so binlog order == ``changes`` order."""
    rows = random_roundtrip_rows(seed, n)
    stmts, changes, final = random_roundtrip_changes(seed, rows, n_updates=n_updates, n_deletes=n_deletes, table=table)
    script = "\n".join(
        [
            "SET SESSION time_zone = '+00:00';",
            f"CREATE DATABASE IF NOT EXISTS `{db}` CHARACTER SET utf8mb4;",
            f"USE `{db}`;",
            f"DROP TABLE IF EXISTS `{table}`;",
            roundtrip_ddl(table) + ";",
            roundtrip_insert_sql(rows, table, rows_per_statement=rows_per_statement),
            *stmts,
        ]
    )
    start = server.master_status()
    server.sql(script)
    end = server.master_status()
    all_changes = [Change("insert", None, r) for r in rows] + changes
    return RoundtripRun(db, table, rows, all_changes, final, script, start, end)


# =====================================================================================================
# Reading values back: from the server (SELECT) and from mariadb-binlog text
# =====================================================================================================
def _select_expr(c: Col) -> str:
    n = f"`{c.name}`"
    k = c.kind
    if k in ("int", "dec", "double"):
        return n
    if k == "float":
        return f"CAST({n} AS DOUBLE)"  # exact widened float32 value
    if k == "bit":
        return f"CAST({n} AS UNSIGNED)"
    if k == "year":
        return f"{n} + 0"
    if k in ("date", "time", "datetime"):
        return f"CAST({n} AS CHAR)"
    if k == "timestamp":
        return f"IF({n} IS NULL, NULL, IF(UNIX_TIMESTAMP({n}) = 0, CONCAT('Z', CAST({n} AS CHAR)), UNIX_TIMESTAMP({n})))"
    return f"HEX({n})"  # strings, binaries, enum, set, json: NULL stays NULL, no escaping issues


def _zero_or(text: str, conv):
    try:
        return conv(text)
    except ValueError:
        return text


def _parse_date(s: str):
    return _zero_or(s, lambda t: dt.date.fromisoformat(t))


def _parse_datetime(s: str):
    def conv(t):
        d, _, tm = t.partition(" ")
        y, mo, da = (int(x) for x in d.split("-"))
        hms, _, frac = tm.partition(".")
        h, mi, se = (int(x) for x in hms.split(":"))
        return dt.datetime(y, mo, da, h, mi, se, int(frac.ljust(6, "0")[:6] or 0))

    return _zero_or(s, conv)


def _parse_time(s: str) -> dt.timedelta:
    neg = s.startswith("-")
    hms, _, frac = s.lstrip("-").partition(".")
    h, m, sec = (int(x) for x in hms.split(":"))
    td = dt.timedelta(hours=h, minutes=m, seconds=sec, microseconds=int(frac.ljust(6, "0")[:6] or 0))
    return -td if neg else td


def _from_server_text(c: Col, s: str | None) -> Any:
    if s is None:
        return None
    k = c.kind
    if k == "int" or k == "bit" or k == "year":
        return int(s)
    if k == "dec":
        return Decimal(s)
    if k in ("float", "double"):
        return float(s)
    if k == "date":
        return _parse_date(s)
    if k == "time":
        return _parse_time(s)
    if k == "datetime":
        return _parse_datetime(s)
    if k == "timestamp":
        if s.startswith("Z"):
            return s[1:]
        sec, _, frac = s.partition(".")
        return _EPOCH + dt.timedelta(seconds=int(sec), microseconds=int(frac.ljust(6, "0")[:6] or 0))
    raw = bytes.fromhex(s)
    if k == "binary":
        return raw.ljust(c.length, b"\x00")
    if k in ("varbinary", "blob"):
        return raw
    return raw.decode(c.codec or "utf-8")


def fetch_python_rows(
    server, db: str, table: str = ROUNDTRIP_TABLE, columns: Sequence[Col] = ROUNDTRIP_COLUMNS
) -> dict[int, dict]:
    """The table's current rows, read with type-safe SELECT expressions and converted to the
    expected-value conventions; keyed by ``id``."""
    exprs = ", ".join(_select_expr(c) for c in columns)
    out = {}
    for rec in server.query_rows(f"SET SESSION time_zone = '+00:00'; SELECT {exprs} FROM `{db}`.`{table}` ORDER BY `id`"):
        row = {c.name: _from_server_text(c, v) for c, v in zip(columns, rec)}
        out[row["id"]] = row
    return out


def from_binlog_text(col: Col, text: str, type_comment) -> Any:
    """Expected-convention value from one mariadb-binlog printed value (``binlog_text``'s raw text and
    type comment), using the column knowledge the text lacks (signedness, charset, ENUM/SET members,
    BINARY length).  FLOAT comes back with 6 significant digits: compare with :func:`float_as_text`."""
    from binlog_text import parse_value  # local import: tests/ is on sys.path under pytest

    v = parse_value(text, type_comment, unsigned=col.unsigned)
    if v is None:
        return None
    k = col.kind
    if k in ("char", "varchar", "text", "json"):
        return v.decode(col.codec or "utf-8")
    if k == "binary":
        return v.ljust(col.length, b"\x00")
    if k == "enum":
        return col.members[v - 1] if v > 0 else ""
    if k == "set":
        return ",".join(m for i, m in enumerate(col.members) if v >> i & 1)
    return v


def comparable(col: Col, v: Any, *, from_text: bool = False) -> Any:
    """``v`` normalised for comparison with a value read from mariadb-binlog text (FLOAT -> 6 digits)."""
    if from_text and col.kind == "float" and v is not None:
        return float_as_text(v)
    return v


# =====================================================================================================
# The all-types workload
# =====================================================================================================
_E300 = ",".join(f"'v{i:03d}'" for i in range(300))
_S16 = ",".join(f"'s{i}'" for i in range(16))
_S64 = ",".join(f"'m{i}'" for i in range(64))
_TIME_COLS = ", ".join(
    [f"t{i} TIME({i})" for i in range(7)]
    + [f"dt{i} DATETIME({i})" for i in range(7)]
    + [f"ts{i} TIMESTAMP({i}) NULL DEFAULT NULL" for i in range(7)]
)

ALL_TYPES_TABLES = (
    "t_int", "t_dec", "t_float", "t_bit", "t_time", "t_str", "t_bin", "t_blob", "t_enum", "t_json",
    "t_geo", "t_mdb", "t_nopk", "t_cpk", "t_large", "t_acct", "t_ledger",
)  # fmt: skip

ALL_TYPES_DDL = f"""
CREATE TABLE t_int (
  id INT NOT NULL PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED,
  bi BIGINT, biu BIGINT UNSIGNED, b BOOL, izf INT(8) UNSIGNED ZEROFILL
) ENGINE=InnoDB;
CREATE TABLE t_dec (
  id INT NOT NULL PRIMARY KEY,
  d1 DECIMAL(1,0), d52 DECIMAL(5,2), d100 DECIMAL(10,0), d189 DECIMAL(18,9), d2010 DECIMAL(20,10),
  d99 DECIMAL(9,9), d3838 DECIMAL(38,38), d6530 DECIMAL(65,30), d650 DECIMAL(65,0), d104u DECIMAL(10,4) UNSIGNED
) ENGINE=InnoDB;
CREATE TABLE t_float (id INT NOT NULL PRIMARY KEY, f FLOAT, d DOUBLE, r REAL, f2 FLOAT(7,3)) ENGINE=InnoDB;
CREATE TABLE t_bit (id INT NOT NULL PRIMARY KEY, b1 BIT(1), b7 BIT(7), b8 BIT(8), b17 BIT(17), b64 BIT(64)) ENGINE=InnoDB;
CREATE TABLE t_time (id INT NOT NULL PRIMARY KEY, d DATE, y YEAR, {_TIME_COLS}) ENGINE=InnoDB;
CREATE TABLE t_str (
  id INT NOT NULL PRIMARY KEY,
  c10 CHAR(10) CHARACTER SET utf8mb4, c255 CHAR(255) CHARACTER SET utf8mb4,
  vc10 VARCHAR(10) CHARACTER SET utf8mb4, vc300 VARCHAR(300) CHARACTER SET utf8mb4,
  vc5000 VARCHAR(5000) CHARACTER SET utf8mb4,
  cl10 CHAR(10) CHARACTER SET latin1, vl300 VARCHAR(300) CHARACTER SET latin1,
  cu3 CHAR(10) CHARACTER SET utf8mb3, cucs2 CHAR(5) CHARACTER SET ucs2,
  vu16 VARCHAR(20) CHARACTER SET utf16, vu32 VARCHAR(10) CHARACTER SET utf32,
  va VARCHAR(20) CHARACTER SET ascii, cbin CHAR(8) CHARACTER SET binary, vbin VARCHAR(20) CHARACTER SET binary,
  c0 CHAR(0)
) ENGINE=InnoDB;
CREATE TABLE t_bin (id INT NOT NULL PRIMARY KEY, b1 BINARY(1), b8 BINARY(8), b16 BINARY(16),
  vb10 VARBINARY(10), vb300 VARBINARY(300)) ENGINE=InnoDB;
CREATE TABLE t_blob (
  id INT NOT NULL PRIMARY KEY,
  tb TINYBLOB, b BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  tt TINYTEXT, t TEXT, mt MEDIUMTEXT, lt LONGTEXT, tl TEXT CHARACTER SET latin1
) ENGINE=InnoDB;
CREATE TABLE t_enum (
  id INT NOT NULL PRIMARY KEY,
  e ENUM('a','b','c'), e300 ENUM({_E300}), eu ENUM('é','ü','😀'),
  s SET('x','y','z'), s16 SET({_S16}), s64 SET({_S64})
) ENGINE=InnoDB;
CREATE TABLE t_json (id INT NOT NULL PRIMARY KEY, j JSON) ENGINE=InnoDB;
CREATE TABLE t_geo (id INT NOT NULL PRIMARY KEY, g GEOMETRY, p POINT, ls LINESTRING, pg POLYGON,
  mp MULTIPOINT, mls MULTILINESTRING, mpg MULTIPOLYGON, gc GEOMETRYCOLLECTION) ENGINE=InnoDB;
CREATE TABLE t_mdb (id INT NOT NULL PRIMARY KEY, ip6 INET6, u UUID, ip4 INET4) ENGINE=InnoDB;
CREATE TABLE t_nopk (a INT, b VARCHAR(20), c DATETIME(3)) ENGINE=InnoDB;
CREATE TABLE t_cpk (a INT NOT NULL, b VARCHAR(20) NOT NULL, c DATE NOT NULL, v INT,
  PRIMARY KEY (a, b, c)) ENGINE=InnoDB;
CREATE TABLE t_large (id INT NOT NULL PRIMARY KEY, lt LONGTEXT, lb LONGBLOB,
  vc VARCHAR(20000) CHARACTER SET latin1, n INT) ENGINE=InnoDB;
CREATE TABLE t_acct (id INT NOT NULL PRIMARY KEY, owner VARCHAR(20), balance DECIMAL(12,2) NOT NULL) ENGINE=InnoDB;
CREATE TABLE t_ledger (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, acct INT NOT NULL,
  amount DECIMAL(12,2) NOT NULL, note VARCHAR(50)) ENGINE=InnoDB;
"""

_NULLS = lambda n: ",".join(["NULL"] * n)  # noqa: E731
_TIME_NULLS = _NULLS(2 + 21)

ALL_TYPES_DML = f"""
SET SESSION time_zone = '+00:00';
-- ---------------------------------------------------------------- integers
INSERT INTO t_int VALUES
 (1,-128,0,-32768,0,-8388608,0,-2147483648,0,-9223372036854775808,0,0,0),
 (2,127,255,32767,65535,8388607,16777215,2147483647,4294967295,9223372036854775807,18446744073709551615,1,99999999),
 (3,0,0,0,0,0,0,0,0,0,0,0,0),
 (4,-1,1,-1,1,-1,1,-1,1,-1,1,1,1),
 (5,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL),
 (6,-100,200,-1234,54321,-123456,7654321,-123456789,3123456789,-1234567890123456789,12345678901234567890,0,42);
UPDATE t_int SET ti=ti+1, si=si+1, mi=mi+1, i=i+1, bi=bi+1 WHERE id=1;
UPDATE t_int SET bi=NULL, biu=NULL WHERE id=2;
UPDATE t_int SET ti=5, biu=18446744073709551614 WHERE id=5;
UPDATE t_int SET b = 1 - b WHERE id IN (1, 2, 3, 4);
UPDATE t_int SET id = 100 WHERE id = 6;
DELETE FROM t_int WHERE id=3;
-- ---------------------------------------------------------------- decimals
INSERT INTO t_dec VALUES
 (1,0,0,0,0,0,0,0,0,0,0),
 (2,9,999.99,9999999999,999999999.999999999,9999999999.9999999999,0.999999999,
    0.99999999999999999999999999999999999999,
    99999999999999999999999999999999999.999999999999999999999999999999,
    99999999999999999999999999999999999999999999999999999999999999999,999999.9999),
 (3,-9,-999.99,-9999999999,-999999999.999999999,-9999999999.9999999999,-0.999999999,
    -0.99999999999999999999999999999999999999,
    -99999999999999999999999999999999999.999999999999999999999999999999,
    -99999999999999999999999999999999999999999999999999999999999999999,0),
 (4,1,-0.01,-1,-0.000000001,1234567890.0123456789,0.000000001,
    0.00000000000000000000000000000000000001,-0.000000000000000000000000000001,1,0.0001),
 (5,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
UPDATE t_dec SET d6530 = d6530 * 3, d52 = 0.5 WHERE id = 4;
-- ---------------------------------------------------------------- floating point
INSERT INTO t_float VALUES
 (1,0,0,0,0),
 (2,3.40282e38,1.7976931348623157e308,-1.7976931348623157e308,9999.999),
 (3,-1.17549e-38,2.2250738585072014e-308,4.9406564584124654e-324,-9999.999),
 (4,1.5,-2.5e-10,123456789.123456789,1.25),
 (5,0.1,0.1,0.30000000000000004,0.001),
 (6,NULL,NULL,NULL,NULL);
UPDATE t_float SET f = f * 2, d = d * 2 WHERE id = 4;
-- ---------------------------------------------------------------- bits
INSERT INTO t_bit VALUES
 (1,b'0',b'0000000',b'00000000',0,0),
 (2,b'1',b'1111111',b'11111111',131071,18446744073709551615),
 (3,b'1',b'1010101',b'10000001',65537,x'0123456789ABCDEF'),
 (4,NULL,NULL,NULL,NULL,NULL);
UPDATE t_bit SET b64 = b64 >> 4, b7 = 1 WHERE id = 3;
-- ---------------------------------------------------------------- temporal
INSERT INTO t_time VALUES
 (1,'1000-01-01',1901,'-838:59:59','-838:59:59.9','-838:59:59.99','-838:59:59.999','-838:59:59.9999',
    '-838:59:59.99999','-838:59:59.999999',
    '1000-01-01 00:00:00','1000-01-01 00:00:00.0','1000-01-01 00:00:00.00','1000-01-01 00:00:00.000',
    '1000-01-01 00:00:00.0000','1000-01-01 00:00:00.00000','1000-01-01 00:00:00.000000',
    '1970-01-01 00:00:01','1970-01-01 00:00:01.0','1970-01-01 00:00:01.00','1970-01-01 00:00:01.000',
    '1970-01-01 00:00:01.0000','1970-01-01 00:00:01.00000','1970-01-01 00:00:01.000000'),
 (2,'9999-12-31',2155,'838:59:59','838:59:59.9','838:59:59.99','838:59:59.999','838:59:59.9999',
    '838:59:59.99999','838:59:59.999999',
    '9999-12-31 23:59:59','9999-12-31 23:59:59.9','9999-12-31 23:59:59.99','9999-12-31 23:59:59.999',
    '9999-12-31 23:59:59.9999','9999-12-31 23:59:59.99999','9999-12-31 23:59:59.999999',
    '2038-01-19 03:14:07','2038-01-19 03:14:07.9','2038-01-19 03:14:07.99','2038-01-19 03:14:07.999',
    '2038-01-19 03:14:07.9999','2038-01-19 03:14:07.99999','2038-01-19 03:14:07.999999'),
 (3,'2024-02-29',2024,'-00:00:01','-00:00:00.5','-00:00:00.01','-00:00:00.001','-00:00:00.0001',
    '-00:00:00.00001','-00:00:00.000001',
    '2024-02-29 12:34:56','2024-02-29 12:34:56.1','2024-02-29 12:34:56.12','2024-02-29 12:34:56.123',
    '2024-02-29 12:34:56.1234','2024-02-29 12:34:56.12345','2024-02-29 12:34:56.123456',
    '2024-02-29 12:34:56','2024-02-29 12:34:56.1','2024-02-29 12:34:56.12','2024-02-29 12:34:56.123',
    '2024-02-29 12:34:56.1234','2024-02-29 12:34:56.12345','2024-02-29 12:34:56.123456'),
 (4,{_TIME_NULLS});
UPDATE t_time SET t6 = '100:00:00.5', dt3 = '2001-02-03 04:05:06.7', ts6 = '2001-02-03 04:05:06.000007' WHERE id = 3;
-- zero dates need a permissive sql_mode
SET SESSION sql_mode = '';
INSERT INTO t_time (id, d, y, t0, dt0, dt3, dt6, ts0, ts3, ts6)
  VALUES (5,'0000-00-00',0,'00:00:00','0000-00-00 00:00:00','0000-00-00 00:00:00.000','0000-00-00 00:00:00.000000',
          '0000-00-00 00:00:00','0000-00-00 00:00:00.000','0000-00-00 00:00:00.000000'),
         (6,'2024-00-15',2000,'24:00:00','2024-02-00 00:00:00',NULL,NULL,NULL,NULL,NULL);
SET SESSION sql_mode = DEFAULT;
-- ---------------------------------------------------------------- character strings
INSERT INTO t_str VALUES
 (1,'','','','','','','','','','','','','','',''),
 (2,'abc','😀🎉 emoji',REPEAT('x',10),REPEAT('😀',300),REPEAT('é',5000),'café ß',REPEAT('Ñ',300),
    'ñ€','éü€','é😀','😀a','plain','\\0\\0ab',X'00FF00','') ,
 (3,'  lead','trail   ','tab\\there','nl\\nx','quote''s \\\\ bs','ÿ','latin1 ¡¿','日本語','Ωж','𝄞','z',
    'ascii','ab','ab\\0',NULL),
 (4,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
UPDATE t_str SET vc300 = CONCAT(vc300, '!'), cl10 = 'naïve' WHERE id = 3;
-- ---------------------------------------------------------------- binary strings
INSERT INTO t_bin VALUES
 (1,X'00',X'0102000000000000',X'000000000000000000000000000000FF',X'',X''),
 (2,X'FF',X'00',X'00000000000000000000000000000000',X'00',REPEAT(X'AB',300)),
 (3,'a','abc',X'FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF',X'0000',X'5C27'),
 (4,NULL,NULL,NULL,NULL,NULL);
UPDATE t_bin SET b8 = X'0000000000000001' WHERE id = 2;
-- ---------------------------------------------------------------- blobs / texts (incl. > 64 KB)
INSERT INTO t_blob VALUES
 (1,'','','','','','','','',''),
 (2,X'00FF',REPEAT(X'01',1000),REPEAT(X'02',70000),REPEAT(X'03',300000),
    REPEAT('t',255),REPEAT('text ✓',1000),REPEAT('m',70000),REPEAT('😀',100000),'latin ÿ'),
 (3,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
UPDATE t_blob SET t = 'short now', lb = X'' WHERE id = 2;
-- ---------------------------------------------------------------- enum / set
INSERT INTO t_enum VALUES
 (1,'a','v000','é','','',''),
 (2,'c','v299','😀','x,y,z','s0,s15','{",".join(f"m{i}" for i in range(64))}'),
 (3,NULL,NULL,NULL,NULL,NULL,NULL),
 (4,'b','v255','ü','y','s8','m63'),
 (5,'b','v256','ü','x,z','s7,s8','m0,m31,m32');
SET SESSION sql_mode = '';
INSERT INTO t_enum (id, e) VALUES (6, 'not-a-member');
SET SESSION sql_mode = DEFAULT;
UPDATE t_enum SET e = 'a', s64 = 'm1,m62' WHERE id = 2;
-- ---------------------------------------------------------------- json
INSERT INTO t_json VALUES
 (1,'{{"a": 1, "b": [true, false, null], "c": {{"d": "é😀\\\\n"}}, "e": 1.5e300}}'),
 (2,'[]'),(3,'"just a string"'),(4,'null'),(5,'12345678901234567890'),(6,NULL),
 (7,CONCAT('[', REPEAT('1,', 3000), '1]'));
UPDATE t_json SET j = JSON_SET(j, '$.a', 2, '$.z', 'new') WHERE id = 1;
-- ---------------------------------------------------------------- geometry
INSERT INTO t_geo VALUES
 (1,ST_GeomFromText('POINT(1 2)'),ST_GeomFromText('POINT(-1.5 2.25)'),
    ST_GeomFromText('LINESTRING(0 0,1 1,2 0)'),ST_GeomFromText('POLYGON((0 0,4 0,4 4,0 4,0 0),(1 1,2 1,2 2,1 1))'),
    ST_GeomFromText('MULTIPOINT(0 0,1 1)'),ST_GeomFromText('MULTILINESTRING((0 0,1 1),(2 2,3 3))'),
    ST_GeomFromText('MULTIPOLYGON(((0 0,1 0,1 1,0 0)))'),
    ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))')),
 (2,ST_GeomFromText('POINT(10 20)', 4326),NULL,NULL,NULL,NULL,NULL,NULL,NULL),
 (3,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL);
-- ---------------------------------------------------------------- INET6 / UUID / INET4
INSERT INTO t_mdb VALUES
 (1,'::','00000000-0000-0000-0000-000000000000','0.0.0.0'),
 (2,'2001:db8::ff00:42:8329','123e4567-e89b-12d3-a456-426614174000','192.168.1.1'),
 (3,'::ffff:192.0.2.1','ffffffff-ffff-ffff-ffff-ffffffffffff','255.255.255.255'),
 (4,'::1','6ccd780c-baba-1026-9564-5b8c656024db','10.0.0.1'),
 (5,NULL,NULL,NULL);
UPDATE t_mdb SET ip6 = 'fe80::1', u = '00000000-0000-0000-0000-000000000001' WHERE id = 1;
DELETE FROM t_mdb WHERE id = 4;
-- ---------------------------------------------------------------- keyless table
INSERT INTO t_nopk VALUES (1,'dup','2020-01-01 00:00:00.000'),(1,'dup','2020-01-01 00:00:00.000'),
 (2,'two','2020-01-02 00:00:00.002'),(3,NULL,NULL),(4,'four','2020-01-04 00:00:00.004');
UPDATE t_nopk SET b = 'dup-1' WHERE a = 1 LIMIT 1;
UPDATE t_nopk SET c = '2021-01-01 00:00:00.001' WHERE a IN (2, 3);
DELETE FROM t_nopk WHERE a = 1;
-- ---------------------------------------------------------------- composite primary key, PK updates
INSERT INTO t_cpk VALUES (1,'x','2020-01-01',1),(1,'y','2020-01-01',2),(2,'x','2020-01-02',3),(2,'y','2020-01-02',NULL);
UPDATE t_cpk SET a = 10 WHERE a = 1 AND b = 'x';
UPDATE t_cpk SET c = '2030-12-31', v = v + 100 WHERE a = 2;
DELETE FROM t_cpk WHERE a = 1 AND b = 'y' AND c = '2020-01-01';
-- ---------------------------------------------------------------- rows larger than 8 KB
INSERT INTO t_large VALUES
 (1, REPEAT('L', 20000), REPEAT(X'C0', 50000), REPEAT('v', 20000), 1),
 (2, REPEAT('ß', 9000), NULL, REPEAT('w', 9000), 2),
 (3, NULL, NULL, NULL, NULL);
UPDATE t_large SET n = n + 10 WHERE id IN (1, 2);
UPDATE t_large SET lt = CONCAT(lt, 'tail') WHERE id = 1;
DELETE FROM t_large WHERE id = 2;
-- ---------------------------------------------------------------- multi-table transaction
INSERT INTO t_acct VALUES (1,'alice',100.00),(2,'bob',50.00),(3,'carol',0.00);
START TRANSACTION;
UPDATE t_acct SET balance = balance - 30.25 WHERE id = 1;
UPDATE t_acct SET balance = balance + 30.25 WHERE id = 2;
INSERT INTO t_ledger (acct, amount, note) VALUES (1, -30.25, 'transfer out'), (2, 30.25, 'transfer in');
DELETE FROM t_acct WHERE id = 3;
COMMIT;
-- ---------------------------------------------------------------- rolled-back transaction (not logged)
START TRANSACTION;
INSERT INTO t_acct VALUES (99,'ghost',1.00);
UPDATE t_acct SET balance = 0 WHERE id = 1;
INSERT INTO t_ledger (acct, amount, note) VALUES (99, 1.00, 'rolled back');
ROLLBACK;
"""


def all_types_sql(db: str = "wl") -> str:
    """The complete all-types script: (re)create database ``db``, DDL, DML."""
    return (
        f"DROP DATABASE IF EXISTS `{db}`;\n"
        f"CREATE DATABASE `{db}` CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;\n"
        f"USE `{db}`;\n" + ALL_TYPES_DDL + ALL_TYPES_DML
    )


@dataclass
class WorkloadRun:
    db: str
    tables: tuple[str, ...]
    sql: str
    start: tuple[str, int]  # (binlog file name, pos) before the workload
    end: tuple[str, int]  # (binlog file name, pos) after it
    extra: dict = field(default_factory=dict)


def all_types_workload(server, db: str = "wl") -> WorkloadRun:
    """Run :func:`all_types_sql` on ``server`` (one client session).  Returns where it landed in the
    binlog.  Final row counts: see ``ALL_TYPES_FINAL_COUNTS``."""
    sql = all_types_sql(db)
    start = server.master_status()
    server.sql(sql)
    end = server.master_status()
    return WorkloadRun(db, ALL_TYPES_TABLES, sql, start, end)


# rows left in each table after ALL_TYPES_DML (checked by the tests against the server)
ALL_TYPES_FINAL_COUNTS = {
    "t_int": 5, "t_dec": 5, "t_float": 6, "t_bit": 4, "t_time": 6, "t_str": 4, "t_bin": 4, "t_blob": 3,
    "t_enum": 6, "t_json": 7, "t_geo": 3, "t_mdb": 4, "t_nopk": 3, "t_cpk": 3, "t_large": 2, "t_acct": 2,
    "t_ledger": 2,
}  # fmt: skip
