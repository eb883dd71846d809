"""A dump's ``CREATE TABLE`` -> the table map the server logs for it with
``binlog_row_metadata=FULL``: type codes, metadata, signedness, charsets, names, ENUM/SET members,
key. Image cells of dumped rows then carry the same ``type`` text and names as decoded ones
(:func:`pipelines.binlog.typetext.column_type_text`).

>>> from pipelines.binlog.typetext import column_type_text
>>> _, _, schema = create_table("CREATE TABLE `t` (`a` int unsigned, `b` varchar(10), `c` enum('x')) CHARSET=latin1", "d")
>>> tm = table_map("d", "t", schema)
>>> [column_type_text(tm, i) for i in range(3)]
['LONG UNSIGNED', 'VARCHAR(10) latin1', 'ENUM latin1']
"""
from __future__ import annotations

import re
from dataclasses import replace

from pipelines.binlog.charsets import BINARY_COLLATION, COLLATION_CHARSETS
from pipelines.binlog.constants import ColumnType as CT
from pipelines.binlog.events import TableMapEvent
from pipelines.schema.model import ColumnDef, TableSchema

from .errors import UnsupportedDump

MARIADB, MYSQL = "mariadb", "mysql"

INT_TYPES = {"TINYINT": CT.TINY, "SMALLINT": CT.SHORT, "MEDIUMINT": CT.INT24, "INT": CT.LONG, "BIGINT": CT.LONGLONG}
_BLOB_BYTES = {"TINYTEXT": 1, "TEXT": 2, "MEDIUMTEXT": 3, "LONGTEXT": 4,
               "TINYBLOB": 1, "BLOB": 2, "MEDIUMBLOB": 3, "LONGBLOB": 4}
_TEMPORAL = {"TIME": CT.TIME2, "DATETIME": CT.DATETIME2, "TIMESTAMP": CT.TIMESTAMP2}
GEOMETRY_TYPES = {"GEOMETRY": 0, "POINT": 1, "LINESTRING": 2, "POLYGON": 3, "MULTIPOINT": 4, "MULTILINESTRING": 5,
             "MULTIPOLYGON": 6, "GEOMETRYCOLLECTION": 7}
FIXED_BINARY_TYPES = {"INET4": 4, "INET6": 16, "UUID": 16}
_MBMAXLEN = {"utf8mb4": 4, "utf8mb3": 3, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4, "big5": 2, "gbk": 2,
             "gb2312": 2, "gb18030": 4, "sjis": 2, "cp932": 2, "ujis": 3, "eucjpms": 3, "euckr": 2}
_COLLATION_OF: dict[str, int] = {}
for _cid, _cs in sorted(COLLATION_CHARSETS.items(), reverse=True):
    _COLLATION_OF[_cs] = _cid  # the lowest id of each charset (its charset is all that is read)


def _collation(charset: str | None, where: str) -> int:
    cs = "utf8mb3" if charset == "utf8" else (charset or "utf8mb4")
    cid = _COLLATION_OF.get(cs)
    if cid is None:
        raise UnsupportedDump(f"{where}: character set {charset!r} is not one the binlog decoder knows")
    return cid


def _set_bytes(n: int) -> int:
    size = (n + 7) // 8
    return 8 if size > 4 else size


_TEXT = frozenset({"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET", "JSON"})


def _column_facts(col: ColumnDef, flavor: str, where: str) -> tuple:
    """``(type code, meta, unsigned or None, collation id or None, real type)`` of one column as
    the server logs it."""
    t = col.type
    if t in _TEXT and not col.charset and not (t == "JSON" and flavor == MYSQL):
        raise UnsupportedDump(f"{where}: the CREATE TABLE gives no character set for this {t} column "
                              "(nor a table or database default)")
    if t in INT_TYPES:
        return INT_TYPES[t], 0, col.unsigned, None, INT_TYPES[t]
    if t == "DECIMAL":
        return CT.NEWDECIMAL, (col.length or 10, col.decimals or 0), col.unsigned, None, CT.NEWDECIMAL
    if t == "FLOAT":
        if col.decimals is None and col.length is not None and col.length > 24:
            return CT.DOUBLE, 8, col.unsigned, None, CT.DOUBLE
        return CT.FLOAT, 4, col.unsigned, None, CT.FLOAT
    if t == "DOUBLE":
        return CT.DOUBLE, 8, col.unsigned, None, CT.DOUBLE
    if t == "BIT":
        n = col.length or 1
        return CT.BIT, (n % 8, n // 8), None, None, CT.BIT
    if t in ("YEAR", "JSON") and flavor not in (MARIADB, MYSQL):
        raise UnsupportedDump(f"{where}: a {t} column is logged differently by MariaDB and MySQL, and the dump does "
                              "not say which server it came from (no '-- Server version' line: --compact?); "
                              "give the flavor")
    if t == "YEAR":
        return CT.YEAR, 0, True if flavor == MARIADB else None, None, CT.YEAR
    if t == "DATE":
        return CT.DATE, 0, None, None, CT.DATE
    if t in _TEMPORAL:
        return _TEMPORAL[t], col.decimals or 0, None, None, _TEMPORAL[t]
    if t in ("CHAR", "BINARY", "VARCHAR", "VARBINARY"):
        cs = "binary" if t in ("BINARY", "VARBINARY") else (col.charset or "utf8mb4")
        nbytes = (col.length if col.length is not None else 1) * _MBMAXLEN.get(cs, 1)
        cid = _collation(cs, where)
        if t in ("CHAR", "BINARY"):
            return CT.STRING, (CT.STRING, nbytes), None, cid, CT.STRING
        return CT.VARCHAR, nbytes, None, cid, CT.VARCHAR
    if t in _BLOB_BYTES:
        cs = "binary" if t.endswith("BLOB") else (col.charset or "utf8mb4")
        return CT.BLOB, _BLOB_BYTES[t], None, _collation(cs, where), CT.BLOB
    if t == "JSON":
        if flavor == MYSQL:
            return CT.JSON, 4, None, None, CT.JSON
        return CT.BLOB, 4, None, _collation(col.charset or "utf8mb4", where), CT.BLOB  # MariaDB: LONGTEXT
    if t == "ENUM":
        size = 1 if len(col.values) < 256 else 2
        return CT.STRING, (CT.ENUM, size), None, _collation(col.charset or "utf8mb4", where), CT.ENUM
    if t == "SET":
        return CT.STRING, (CT.SET, _set_bytes(len(col.values))), None, _collation(col.charset or "utf8mb4", where), \
            CT.SET
    if t in GEOMETRY_TYPES:
        return CT.GEOMETRY, 4, None, None, CT.GEOMETRY
    if t in FIXED_BINARY_TYPES:
        return CT.STRING, (CT.STRING, FIXED_BINARY_TYPES[t]), None, BINARY_COLLATION, CT.STRING
    raise UnsupportedDump(f"{where}: column type {col.type_text()} has no binlog counterpart this reader knows")


def table_map(db: str, table: str, schema: TableSchema, flavor: str | None = MARIADB) -> TableMapEvent:
    """The table map the server logs for ``schema`` with ``binlog_row_metadata=FULL``; ``flavor``
    (``mariadb``/``mysql``) matters to YEAR (MariaDB logs it unsigned) and JSON (MariaDB's is
    LONGTEXT)."""
    facts = [_column_facts(c, flavor, f"{db}.{table}.{c.name}") for c in schema.columns]
    n = len(facts)
    key = tuple((i, 0) for i in (schema.index_of(k) for k in schema.primary_key) if i is not None)
    return TableMapEvent(
        header=None, table_id=0, flags=0, schema=db, table=table, column_count=n,
        column_types=tuple(f[0] for f in facts), column_metas=tuple(f[1] for f in facts),
        nullable=tuple(c.nullable for c in schema.columns),
        signedness=tuple(f[2] for f in facts),
        column_charsets=tuple(f[3] for f in facts),
        column_names=tuple(c.name for c in schema.columns),
        set_values=tuple(c.values if c.type == "SET" else None for c in schema.columns),
        enum_values=tuple(c.values if c.type == "ENUM" else None for c in schema.columns),
        geometry_types=tuple(GEOMETRY_TYPES.get(c.type) for c in schema.columns),
        primary_key=key or None,
        real_types=tuple(f[4] for f in facts),
    )


_FLOAT_UNSIGNED = re.compile(r"^\s*`((?:[^`]|``)+)`\s+float(?:\s*\(\s*\d+\s*(?:,\s*\d+\s*)?\))?\s+unsigned\b",
                             re.IGNORECASE | re.MULTILINE)


def create_table(sql: str, default_db: str | None, db_charsets=None) -> tuple[str, str, TableSchema] | str:
    """``(db, table, schema)`` of a dump's ``CREATE TABLE`` text (:func:`pipelines.schema.ddl.parse_statement`),
    or the reason it was not understood. The schema parser drops FLOAT's deprecated UNSIGNED
    (silver's type is the same), which the table map logs: it is put back here from the column
    lines as ``SHOW CREATE TABLE`` prints them."""
    from pipelines.schema.ddl import CreateTable, parse_statement

    actions = parse_statement(sql, default_db, db_charsets or {})
    action = actions[0] if actions else None
    if not isinstance(action, CreateTable) or action.schema is None:
        return getattr(action, "reason", None) or "not a CREATE TABLE with columns (CREATE TABLE ... LIKE?)"
    schema = action.schema
    unsigned_floats = {m.group(1).replace("``", "`").lower() for m in _FLOAT_UNSIGNED.finditer(sql)}
    if unsigned_floats:
        schema = replace(schema, columns=tuple(
            replace(c, unsigned=True) if c.type == "FLOAT" and c.name.lower() in unsigned_floats else c
            for c in schema.columns))
    return action.name.db, action.name.table, schema
