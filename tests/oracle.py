"""The oracle of the end-to-end tests: what the source server returns for ``SELECT``, and silver's
rows in the same form. Values are compared as Python values after converting both sides to the
silver types of :mod:`pipelines.schema.typemap`: the server side is read as text (``HEX()`` for strings
and binaries) and converted per column type; zero/invalid dates become None as in silver.
"""
from __future__ import annotations

import datetime as dt
import shutil
import struct
from decimal import Decimal
from pathlib import Path

from mariadb_server import MariaDBServer
from workloads import _parse_time as _time

from pipelines import delta_io
from pipelines.binlog.charsets import CHARSET_CODECS
from pipelines.paths import silver_table_path
from pipelines.schema import ColumnDef, SchemaHistory

UTC = dt.timezone.utc
EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def q(name: str) -> str:
    """A quoted MariaDB identifier."""
    return "`" + name.replace("`", "``") + "`"


def copy_binlogs(srv: MariaDBServer, dest: Path) -> None:
    """The closed binlog files (every one but the server's current file), as a log shipper would."""
    dest.mkdir(parents=True, exist_ok=True)
    for f in srv.binlog_files()[:-1]:
        if not (dest / f.name).exists():
            shutil.copy2(f, dest / f.name)


def ship_and_run(spark, srv: MariaDBServer, sql: str, folder: Path, cfg):
    """``sql`` on the server, then the binlog files it wrote shipped to ``folder`` and the pipeline
    run on them (bronze, then silver): silver's stats, checked ``ok``."""
    from pipelines import bronze
    from pipelines.silver import step as silver_step

    first = len(srv.binlog_files()) - 1
    srv.sql(sql)
    srv.flush_logs()
    for f in srv.binlog_files()[first:-1]:
        shutil.copy(f, folder / f.name)
    bronze.run(spark, cfg)
    stats = silver_step.run(spark, cfg)
    assert stats.status == "ok", stats.summary()
    return stats


# ---------------------------------------------------------------------------------------------------
# values: server text -> silver Python values


def _float32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _signed64(n: int) -> int:
    return n - (1 << 64) if n >= 1 << 63 else n


def _date(text: str):
    try:
        d = dt.date.fromisoformat(text)
    except ValueError:
        return None  # zero / invalid dates are NULL in silver
    return None if d.year == 0 else d


def _datetime(text: str):
    try:
        v = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    return v


_TEXT = {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json"}
_BINARY = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point", "linestring",
           "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection"}


def select_expr(col: ColumnDef) -> str:
    """How to SELECT one column as text that converts exactly (see :func:`expected_value`)."""
    n = q(col.name)
    t = col.type.lower()
    if t == "float":
        return f"CAST({n} AS DOUBLE)"
    if t == "bit":
        return f"CAST({n} AS UNSIGNED)"
    if t == "year":
        return f"{n} + 0"
    if t in ("date", "time", "datetime", "inet6", "inet4", "uuid"):
        return f"CAST({n} AS CHAR)"
    if t == "timestamp":
        return f"IF(UNIX_TIMESTAMP({n}) = 0, '0', UNIX_TIMESTAMP({n}))"
    if t in _TEXT or t in _BINARY:
        return f"HEX({n})"
    return n


def expected_value(col: ColumnDef, text: str | None, *, hex_text: bool = True, bit_hex: bool = False):
    """The silver value of one server value given as text (``HEX()`` for strings when
    ``hex_text``; BIT as hex when ``bit_hex``), normalised like :func:`silver_value`."""
    if text is None:
        return None
    t = col.type.lower()
    if t in ("tinyint", "smallint", "mediumint", "int", "bigint"):
        return int(text)
    if t == "decimal":
        return Decimal(text)
    if t == "float":
        return _float32(float(text))
    if t == "double":
        return float(text)
    if t == "bit":
        return _signed64(int(text, 16) if bit_hex else int(text))
    if t == "year":
        return int(text) or None
    if t == "date":
        return _date(text)
    if t == "datetime":
        return _datetime(text)
    if t == "timestamp":
        if "-" in text:  # 'YYYY-MM-DD HH:MM:SS[.f]' in UTC
            v = _datetime(text)
            return None if v is None else round((v.replace(tzinfo=UTC) - EPOCH).total_seconds() * 1_000_000)
        return None if Decimal(text) == 0 else int(Decimal(text) * 1_000_000)
    if t == "time":
        return _time(text)
    if t in _BINARY:
        raw = bytes.fromhex(text)
        return raw.ljust(col.length, b"\0") if t == "binary" and col.length else raw
    if t in _TEXT:
        if not hex_text:
            return text
        codec = CHARSET_CODECS.get(col.charset or "utf8mb4") or "utf-8"
        return bytes.fromhex(text).decode(codec)
    return text  # inet6 / inet4 / uuid


def silver_value(col: ColumnDef, v):
    """A silver value (as delta-rs returns it) in the form :func:`expected_value` gives."""
    if v is None:
        return None
    t = col.type.lower()
    if t == "timestamp":
        return round((v - EPOCH).total_seconds() * 1_000_000) if v.tzinfo else round(
            (v.replace(tzinfo=UTC) - EPOCH).total_seconds() * 1_000_000)
    if t == "time":
        return _time(v)
    if t == "decimal":
        return Decimal(v) if isinstance(v, str) else v
    if t == "bigint" and isinstance(v, Decimal):
        return int(v)
    return v


DUMP_FLOAT_DIGITS = 6  # a logical dump's FLOAT: the server's text form, 6 significant digits (FLT_DIG)


def as_dumped(cols: list[ColumnDef], rows: list[tuple]) -> list[tuple]:
    """``rows`` with each FLOAT value as a logical dump of it reads back: the float32 of its text
    at :data:`DUMP_FLOAT_DIGITS` significant digits (``mariadb-dump`` writes a stored -4529.5625
    as -4529.56, so a row loaded from a dump and not changed since holds that value; a value the
    binlogs carry is exact, and equal to itself so)."""
    floats = [i for i, c in enumerate(cols) if c.type.lower() == "float"]
    if not floats:
        return rows
    out = []
    for r in rows:
        r = list(r)
        for i in floats:
            if r[i] is not None:
                r[i] = _float32(float(f"{r[i]:.{DUMP_FLOAT_DIGITS}g}"))
        out.append(tuple(r))
    return sorted(out, key=_sort_key)


def _sort_key(row: tuple):
    return tuple((v is None, repr(type(v)), repr(v)) for v in row)


def server_columns(srv: MariaDBServer, db: str, table: str) -> list[ColumnDef]:
    text = srv.query_rows(f"SHOW CREATE TABLE {q(db)}.{q(table)}")[0][1]
    h = SchemaHistory()
    h.add_seed(db, table, text)
    return list(h.current(db, table).columns)


def server_rows(srv: MariaDBServer, db: str, table: str, cols: list[ColumnDef]) -> list[tuple]:
    exprs = ", ".join(select_expr(c) for c in cols)
    rows = srv.query_rows(f"SET SESSION time_zone = '+00:00'; SELECT {exprs} FROM {q(db)}.{q(table)}")
    return sorted((tuple(expected_value(c, v) for c, v in zip(cols, r)) for r in rows), key=_sort_key)


def silver_rows(warehouse: Path, db: str, table: str, cols: list[ColumnDef],
                deleted: str = "_deleted") -> list[tuple] | None:
    """Silver's live rows of ``db.table`` (tombstones in ``deleted`` left out), None when there
    is no table."""
    path = silver_table_path(str(warehouse), db, table)
    if not delta_io.open_table(path, "rs").exists():  # (any store the process's settings reach)
        return None
    data = delta_io.open_table(path).read_arrow().to_pylist()
    out = []
    for r in data:
        if r.get(deleted):
            continue
        by_lower = {k.lower(): v for k, v in r.items() if k != deleted}
        out.append(tuple(silver_value(c, by_lower.get(c.name.lower())) for c in cols))
    return sorted(out, key=_sort_key)


def _diff(name: str, cols: list[ColumnDef], want: list[tuple], got: list[tuple]) -> str:
    lines = [f"{name}: server has {len(want)} rows, silver {len(got)}"]
    missing = [r for r in want if r not in got]
    extra = [r for r in got if r not in want]
    for label, rows in (("only on the server", missing), ("only in silver", extra)):
        for r in rows[:5]:
            lines.append(f"  {label}: " + ", ".join(f"{c.name}={v!r}" for c, v in zip(cols, r)))
    if missing and extra:  # the columns that differ in the first pair
        diffs = [f"{c.name}: server {a!r} silver {b!r}" for c, a, b in zip(cols, missing[0], extra[0]) if a != b]
        lines.append("  first difference: " + "; ".join(diffs[:10]))
    return "\n".join(lines)
