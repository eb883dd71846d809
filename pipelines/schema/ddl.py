"""DDL text to schema changes, with sqlglot (MySQL dialect, extended for MariaDB): executable comments
and MariaDB-only spellings first, then one statement object per CREATE / ALTER / RENAME / DROP /
TRUNCATE ... (:func:`parse_statement`). Pure."""
from __future__ import annotations

import contextlib
import functools
import logging
import re
from dataclasses import dataclass, replace
from typing import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from pipelines.errors import PipelineError
from pipelines.binlog.changes import is_ddl
from pipelines.schema.sql_text import _MariaDB, _normalize, _words, strip_comments
from pipelines.schema.model import (
    ColumnDef, TableSchema, UniqueKey, _BINARY_OF, _BINARY_TYPES, _FSP_TYPES, _GEOMETRY_TYPES, _MB_MAXLEN,
    _TEXT_TYPES, _norm_charset, charset_of_collation,
)


log = logging.getLogger(__name__)


# sqlglot DataType.Type name -> (MySQL type, unsigned)
_SQLGLOT_TYPES: dict[str, tuple[str, bool]] = {
    "TINYINT": ("TINYINT", False), "UTINYINT": ("TINYINT", True),
    "SMALLINT": ("SMALLINT", False), "USMALLINT": ("SMALLINT", True),
    "MEDIUMINT": ("MEDIUMINT", False), "UMEDIUMINT": ("MEDIUMINT", True),
    "INT": ("INT", False), "UINT": ("INT", True),
    "BIGINT": ("BIGINT", False), "UBIGINT": ("BIGINT", True),
    "DECIMAL": ("DECIMAL", False), "UDECIMAL": ("DECIMAL", True),
    "FLOAT": ("FLOAT", False), "UFLOAT": ("FLOAT", True),
    "DOUBLE": ("DOUBLE", False), "UDOUBLE": ("DOUBLE", True),
    "BIT": ("BIT", False), "BOOLEAN": ("TINYINT", False), "SERIAL": ("BIGINT", True),
    "DATE": ("DATE", False), "DATETIME": ("DATETIME", False), "TIMESTAMP": ("TIMESTAMP", False),
    "TIMESTAMPTZ": ("TIMESTAMP", False), "TIMESTAMPLTZ": ("TIMESTAMP", False), "TIME": ("TIME", False),
    "YEAR": ("YEAR", False),
    "CHAR": ("CHAR", False), "VARCHAR": ("VARCHAR", False), "NCHAR": ("CHAR", False),
    "NVARCHAR": ("VARCHAR", False), "BINARY": ("BINARY", False), "VARBINARY": ("VARBINARY", False),
    "TINYTEXT": ("TINYTEXT", False), "TEXT": ("TEXT", False), "MEDIUMTEXT": ("MEDIUMTEXT", False),
    "LONGTEXT": ("LONGTEXT", False), "TINYBLOB": ("TINYBLOB", False), "BLOB": ("BLOB", False),
    "MEDIUMBLOB": ("MEDIUMBLOB", False), "LONGBLOB": ("LONGBLOB", False),
    "ENUM": ("ENUM", False), "SET": ("SET", False), "JSON": ("JSON", False),
    "GEOMETRY": ("GEOMETRY", False), "UUID": ("UUID", False), "VECTOR": ("VECTOR", False),
}


_USER_TYPES = _GEOMETRY_TYPES | {"INET6", "INET4", "UUID", "XMLTYPE"}


class DdlError(PipelineError, ValueError):
    """A DDL statement that cannot be turned into a schema change (the message says why)."""


@contextlib.contextmanager
def _quiet_sqlglot():
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@dataclass(frozen=True)
class _Name:
    db: str
    table: str


@dataclass(frozen=True)
class CreateTable:
    name: _Name
    schema: TableSchema | None  # None with ``like``
    like: _Name | None = None
    if_not_exists: bool = False
    system_versioned: bool = False


@dataclass(frozen=True)
class AlterTable:
    name: _Name
    ops: tuple
    if_exists: bool = False


@dataclass(frozen=True)
class RenameTables:
    pairs: tuple[tuple[_Name, _Name], ...]


@dataclass(frozen=True)
class DropTables:
    names: tuple[_Name, ...]


@dataclass(frozen=True)
class TruncateTable:
    name: _Name


@dataclass(frozen=True)
class CreateDatabase:
    db: str
    charset: str | None


@dataclass(frozen=True)
class DropDatabase:
    db: str


@dataclass(frozen=True)
class CreateIndex:
    name: _Name
    index: str
    columns: tuple[str, ...]
    unique: bool


@dataclass(frozen=True)
class DropIndex:
    name: _Name
    index: str


@dataclass(frozen=True)
class Unparsed:
    """A table statement that could not be understood; ``tables`` are the names it
    appears to touch (may be empty)."""

    reason: str
    tables: tuple[_Name, ...] = ()


# ALTER TABLE operations
@dataclass(frozen=True)
class AddColumn:
    column: ColumnDef
    position: tuple[str, str | None] | None = None  # ("first", None) | ("after", name)
    if_not_exists: bool = False
    key: str | None = None  # "primary" | "unique" when declared inline


@dataclass(frozen=True)
class DropColumn:
    name: str
    if_exists: bool = False


@dataclass(frozen=True)
class ChangeColumn:
    old_name: str  # == column.name for MODIFY
    column: ColumnDef
    position: tuple[str, str | None] | None = None
    key: str | None = None


@dataclass(frozen=True)
class RenameColumn:
    old_name: str
    new_name: str


@dataclass(frozen=True)
class AddKey:
    kind: str  # primary | unique
    index: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class DropPrimaryKey:
    pass


@dataclass(frozen=True)
class DropIndexOp:
    index: str


@dataclass(frozen=True)
class ConvertCharset:
    charset: str


@dataclass(frozen=True)
class DefaultCharset:
    charset: str


@dataclass(frozen=True)
class RenameTo:
    name: _Name


_HEAD_RE = re.compile(
    r"""^(?:
        (?P<create_table>CREATE\s+(?:OR\s+REPLACE\s+)?(?P<temp>TEMPORARY\s+)?TABLE\b)
      | (?P<create_index>CREATE\s+(?:OR\s+REPLACE\s+)?(?:ONLINE\s+|OFFLINE\s+)?(?:UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?INDEX\b)
      | (?P<create_db>CREATE\s+(?:OR\s+REPLACE\s+)?(?:DATABASE|SCHEMA)\b)
      | (?P<alter_db>ALTER\s+(?:DATABASE|SCHEMA)\b)
      | (?P<drop_db>DROP\s+(?:DATABASE|SCHEMA)\b)
      | (?P<alter_table>ALTER\s+(?:ONLINE\s+)?(?:IGNORE\s+)?TABLE\b)
      | (?P<drop_table>DROP\s+(?P<dtemp>TEMPORARY\s+)?TABLES?\b)
      | (?P<drop_index>DROP\s+(?:ONLINE\s+|OFFLINE\s+)?INDEX\b)
      | (?P<rename>RENAME\s+TABLES?\b)
      | (?P<truncate>TRUNCATE\b)
    )""",
    re.IGNORECASE | re.VERBOSE,
)


def statement_kind(sql: str) -> str | None:
    """Which schema statement ``sql`` is (``create_table``, ``alter_table``, ``rename``,
    ...), or None for anything that cannot change a table's schema (DML, GRANT, ...).

    >>> statement_kind("/* x */ alter table t add c int"), statement_kind("INSERT INTO t VALUES (1)")
    ('alter_table', None)
    """
    if not is_ddl(sql):
        return None
    m = _HEAD_RE.match(strip_comments(sql).lstrip())
    if not m:
        return None
    if m.group("temp") or m.group("dtemp"):
        return None  # temporary tables never reach row-based binlogs
    return m.lastgroup if m.lastgroup not in ("temp", "dtemp") else None


def _ident(node) -> str:
    if isinstance(node, exp.Identifier):
        return node.this
    if isinstance(node, (exp.Column, exp.Table)):
        return node.this.this if isinstance(node.this, exp.Identifier) else node.name
    if isinstance(node, (exp.Ordered, exp.ColumnPrefix)):  # `c DESC`, prefix `c(10)`
        return _ident(node.this)
    if isinstance(node, (exp.Var, exp.Literal)):
        return node.this
    if isinstance(node, str):
        return node
    # prefix index part: c(10) parses as an Anonymous function call
    if isinstance(node, exp.Anonymous):
        return node.name
    if isinstance(node, exp.Func) and node.this is not None:
        return _ident(node.this)
    raise DdlError(f"expected a name, got {node.sql(dialect=_MariaDB)!r}")


def _table_name(table: exp.Expression, default_db: str | None) -> _Name:
    if not isinstance(table, exp.Table):
        raise DdlError(f"expected a table name, got {table.sql(dialect=_MariaDB)!r}")
    name = _ident(table.this)
    db_node = table.args.get("db")
    db = _ident(db_node) if db_node is not None else default_db
    if not db:
        raise DdlError(f"table {name!r} is not qualified and the statement has no default database")
    return _Name(db, name)


def _int_param(p) -> int:
    node = p.this if isinstance(p, exp.DataTypeParam) else p
    try:
        return int(node.this if isinstance(node, exp.Literal) else node.name)
    except (TypeError, ValueError):
        raise DdlError(f"expected a number in the type, got {p.sql(dialect=_MariaDB)!r}") from None


def _column_def(cd: exp.ColumnDef) -> tuple[ColumnDef, str | None, bool, bool]:
    """(column, inline key 'primary'|'unique'|None, explicit charset given, json check)."""
    name = _ident(cd.this)
    tname, mtype, unsigned, length, decimals, values = _column_type(name, cd.args.get("kind"))
    charset = "utf8mb3" if tname in ("NCHAR", "NVARCHAR") else None
    a = _column_attributes(cd, charset)
    if a["zerofill"]:
        unsigned = True
    nullable, key, charset = a["nullable"], a["key"], a["charset"]
    if tname == "SERIAL":
        nullable, key = False, key or "unique"
    if a["json_check"] and mtype == "LONGTEXT":
        mtype = "JSON"
    if charset == "binary" and mtype in _BINARY_OF:
        mtype = _BINARY_OF[mtype]
    if mtype in _BINARY_TYPES:
        charset = "binary"
    col = ColumnDef(name, mtype, length, decimals, unsigned, nullable, charset, values, a["generated"],
                    a["invisible"], a["default"])
    return col, key, a["explicit_charset"], a["json_check"]


def _column_type(name: str, dtype) -> tuple[str, str, bool, int | None, int | None, tuple[str, ...]]:
    """``(sqlglot's type name, MySQL type, unsigned, length, decimals, ENUM/SET values)`` of a
    column's type, with the lengths MySQL fills in."""
    if not isinstance(dtype, exp.DataType):
        raise DdlError(f"column {name!r} has no type")
    tname = dtype.this.name if hasattr(dtype.this, "name") else str(dtype.this)
    if tname == "USERDEFINED":
        udt = str(dtype.args.get("kind") or "").upper()
        if udt not in _USER_TYPES:
            raise DdlError(f"column {name!r} has an unknown type {udt!r}")
        mtype, unsigned = udt, False
    elif tname in _SQLGLOT_TYPES:
        mtype, unsigned = _SQLGLOT_TYPES[tname]
    else:
        raise DdlError(f"column {name!r} has an unsupported type {dtype.sql(dialect=_MariaDB)!r}")
    params = [p for p in dtype.expressions or []]
    length = decimals = None
    values: tuple[str, ...] = ()
    if mtype in ("ENUM", "SET"):
        values = tuple(str(p.this) for p in params)
    elif mtype == "VECTOR":
        length = _int_param(params[0]) if params else None
    elif params:
        nums = [_int_param(p) for p in params]
        if mtype in _FSP_TYPES:
            decimals = nums[0]
        elif mtype != "YEAR":
            length = nums[0]
            if len(nums) > 1:
                decimals = nums[1]
    if tname == "BOOLEAN":
        length = 1
    # defaults MySQL fills in
    if mtype == "DECIMAL":
        length = 10 if length is None else length
        decimals = 0 if decimals is None else decimals
    elif mtype in ("CHAR", "BINARY", "BIT") and length is None:
        length = 1
    elif mtype == "FLOAT" and length is not None and decimals is None:
        mtype = "DOUBLE" if length > 24 else "FLOAT"  # FLOAT(p): precision in bits
        length = None
    elif mtype == "YEAR":
        length = 4
    return tname, mtype, unsigned, length, decimals, values


def _column_attributes(cd: exp.ColumnDef, charset: str | None) -> dict:
    """A column definition's attributes after its type: NULL, inline key, generated, INVISIBLE,
    DEFAULT, charset and collation (``charset``: the type's own, NCHAR's), ZEROFILL, a JSON check."""
    a = dict(nullable=True, key=None, generated=None, invisible=False, default=None, charset=charset,
             explicit_charset=charset is not None, json_check=False, zerofill=False)
    for c in cd.args.get("constraints") or []:
        k = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        if isinstance(k, exp.NotNullColumnConstraint):
            a["nullable"] = bool(k.args.get("allow_null"))
        elif isinstance(k, exp.PrimaryKeyColumnConstraint):
            a["key"], a["nullable"] = "primary", False
        elif isinstance(k, exp.UniqueColumnConstraint):
            a["key"] = a["key"] or "unique"
        elif isinstance(k, exp.ComputedColumnConstraint):
            a["generated"] = "STORED" if k.args.get("persisted") else "VIRTUAL"
        elif isinstance(k, exp.GeneratedAsIdentityColumnConstraint) and k.args.get("expression") is not None:
            a["generated"] = "STORED" if k.args.get("persisted") else "VIRTUAL"
        elif isinstance(k, exp.InvisibleColumnConstraint):
            a["invisible"] = True
        elif isinstance(k, exp.DefaultColumnConstraint):
            a["default"] = _literal_text(k.this)
        elif isinstance(k, exp.CharacterSetColumnConstraint):
            a["charset"], a["explicit_charset"] = _norm_charset(_ident(k.this)), True
        elif isinstance(k, exp.CollateColumnConstraint):
            if a["charset"] is None:
                a["charset"] = charset_of_collation(_ident(k.this))
            a["explicit_charset"] = True
        elif isinstance(k, exp.ZeroFillColumnConstraint):
            a["zerofill"] = True
        elif isinstance(k, exp.CheckColumnConstraint):
            a["json_check"] = a["json_check"] or _is_json_check(k.this)
        # (BINARY: the binary collation of the charset, not the binary charset: nothing to keep)
    return a


def _is_json_check(body) -> bool:
    """``CHECK (json_valid(c))``, as MariaDB writes a JSON column's definition."""
    if isinstance(body, exp.Anonymous):
        return body.name.lower() == "json_valid"
    name = type(body).__name__.lower()
    return isinstance(body, exp.Func) and name.startswith("json") and "valid" in name


def _literal_text(node) -> str | None:
    """The value of a literal DEFAULT as text (``-3``, ``x'y``, ``5`` for ``b'101'``); None for
    NULL and for expressions (``CURRENT_TIMESTAMP``, ``NEXTVAL(s)``)."""
    if isinstance(node, exp.Paren):
        return _literal_text(node.this)
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return "-" + str(node.this.this)
    if isinstance(node, exp.BitString):
        return str(int(str(node.this), 2))
    if isinstance(node, exp.Boolean):
        return "1" if node.this else "0"
    return None


def _finish_charset(col: ColumnDef, table_charset: str | None) -> ColumnDef:
    """Fill in the table's default charset for character columns; size TEXT(n)/BLOB(n)."""
    if col.type in _TEXT_TYPES and col.charset is None and table_charset:
        col = replace(col, charset=table_charset)
    if col.type in ("TEXT", "BLOB") and col.length is not None:
        nbytes = col.length * _MB_MAXLEN.get(col.charset or "", 4 if col.type == "TEXT" else 1)
        size = "TINY" if nbytes < 256 else "" if nbytes < 65536 else "MEDIUM" if nbytes < 1 << 24 else "LONG"
        col = replace(col, type=size + col.type, length=None)
    elif col.type in ("TINYTEXT", "MEDIUMTEXT", "LONGTEXT", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB"):
        col = replace(col, length=None)
    return col


def _position(cd: exp.Expression) -> tuple[str, str | None] | None:
    pos = cd.args.get("position")
    if pos is None:
        return None
    where = str(pos.args.get("position") or "").upper()
    if where == "FIRST":
        return ("first", None)
    if where == "AFTER":
        return ("after", _ident(pos.this))
    raise DdlError(f"unknown column position {pos.sql(dialect=_MariaDB)!r}")


def _key_columns(node) -> tuple[str, ...]:
    if isinstance(node, exp.Schema):
        return tuple(_ident(e) for e in node.expressions)
    return tuple(_ident(e) for e in node.expressions)


def _table_elements(elements, table_charset: str | None):
    """Column definitions and keys of a CREATE TABLE body."""
    cols: list[ColumnDef] = []
    pk: tuple[str, ...] = ()
    uniques: list[UniqueKey] = []
    like = None
    for el in elements:
        if isinstance(el, exp.ColumnDef):
            col, key, _explicit, _ = _column_def(el)
            cols.append(_finish_charset(col, table_charset))
            if key == "primary":
                pk = (col.name,)
            elif key == "unique":
                uniques.append(UniqueKey(col.name, (col.name,)))
            continue
        name = None
        if isinstance(el, exp.Constraint):
            name = _ident(el.this) if el.this is not None else None
            inner = el.expressions[0] if el.expressions else None
        else:
            inner = el
        if isinstance(inner, exp.PrimaryKey):
            pk = _key_columns(inner)
        elif isinstance(inner, exp.UniqueColumnConstraint):
            schema = inner.this
            cols_ = _key_columns(schema) if schema is not None else ()
            iname = name or (_ident(schema.this) if schema is not None and schema.this is not None else None)
            uniques.append(UniqueKey(iname or (cols_[0] if cols_ else ""), cols_))
        elif isinstance(inner, exp.LikeProperty):
            like = inner.this
        # other indexes, foreign keys, checks, periods: no effect on the row layout
    # PK columns are NOT NULL
    if pk:
        low = {p.lower() for p in pk}
        cols = [replace(c, nullable=False) if c.name.lower() in low else c for c in cols]
        pk = tuple(next((c.name for c in cols if c.name.lower() == p.lower()), p) for p in pk)
    return cols, pk, tuple(uniques), like


def _table_charset(props) -> str | None:
    cs = None
    for p in props:
        if isinstance(p, exp.CharacterSetProperty):
            cs = _norm_charset(_ident(p.this))
        elif isinstance(p, exp.CollateProperty) and cs is None:
            cs = charset_of_collation(_ident(p.this))
    return cs


def _parse_create(tree: exp.Create, default_db: str | None, db_charsets: Mapping[str, str],
                  system_versioned: bool) -> CreateTable:
    target = tree.this
    props = list((tree.args.get("properties") or exp.Properties(expressions=[])).expressions)
    if tree.args.get("expression") is not None and not isinstance(target, exp.Schema):
        raise DdlError("CREATE TABLE ... SELECT without column definitions: the columns are not in the statement")
    if isinstance(target, exp.Schema):
        name = _table_name(target.this, default_db)
        cs = _table_charset(props) or db_charsets.get(name.db)
        cols, pk, uniques, like = _table_elements(target.expressions, cs)
    else:
        name = _table_name(target, default_db)
        cs = _table_charset(props) or db_charsets.get(name.db)
        cols, pk, uniques, like = [], (), (), None
    for p in props:
        if isinstance(p, exp.LikeProperty):
            like = p.this
    if like is not None:
        return CreateTable(name, None, _table_name(like, name.db), bool(tree.args.get("exists")))
    if not cols:
        raise DdlError("CREATE TABLE without column definitions")
    seen: set[str] = set()
    for c in cols:
        if c.name.lower() in seen:
            raise DdlError(f"column {c.name!r} is defined twice")
        seen.add(c.name.lower())
    if system_versioned and not {"row_start", "row_end"} & seen:
        cols += [ColumnDef("row_start", "TIMESTAMP", None, 6, nullable=False, generated="ROW START", invisible=True),
                 ColumnDef("row_end", "TIMESTAMP", None, 6, nullable=False, generated="ROW END", invisible=True)]
    schema = TableSchema(tuple(cols), pk, uniques, cs)
    return CreateTable(name, schema, None, bool(tree.args.get("exists")), system_versioned)


def _parse_alter(tree: exp.Alter, default_db: str | None, converts: list[str]) -> AlterTable:
    name = _table_name(tree.this, default_db)
    ops: list = []
    for a in tree.args.get("actions") or []:
        if isinstance(a, exp.ColumnDef):
            if a.this is not None and _ident(a.this).upper() == "SYSTEM" and a.args.get("kind") is None:
                raise DdlError("ADD SYSTEM VERSIONING changes the hidden row_start/row_end columns")
            col, key, _explicit, _ = _column_def(a)
            ops.append(AddColumn(col, _position(a), bool(a.args.get("exists")), key))
        elif isinstance(a, exp.Drop):
            kind = str(a.args.get("kind") or "").upper()
            targets = a.args.get("tables") or []
            if kind == "COLUMN":
                for t in targets:
                    ops.append(DropColumn(_ident(t), bool(a.args.get("exists"))))
            elif kind in ("INDEX", "KEY"):
                for t in targets:
                    ops.append(DropIndexOp(_ident(t)))
            elif kind in ("FOREIGN KEY", "CONSTRAINT", "CHECK", ""):
                if kind == "" and targets:
                    raise DdlError(f"unsupported ALTER action {a.sql(dialect=_MariaDB)!r}")
            elif kind == "PARTITION":
                raise DdlError("DROP PARTITION removes rows without row events")
            else:
                raise DdlError(f"unsupported ALTER action {a.sql(dialect=_MariaDB)!r}")
        elif isinstance(a, exp.ModifyColumn):
            cd = a.this
            col, key, _explicit, _ = _column_def(cd)
            old = a.args.get("rename_from")
            ops.append(ChangeColumn(_ident(old) if old is not None else col.name, col, _position(cd), key))
        elif isinstance(a, exp.RenameColumn):
            ops.append(RenameColumn(_ident(a.this), _ident(a.args["to"])))
        elif isinstance(a, exp.AddConstraint):
            for e in a.expressions:
                cname = None
                if isinstance(e, exp.Constraint):
                    cname = _ident(e.this) if e.this is not None else None
                    e = e.expressions[0] if e.expressions else None
                if isinstance(e, exp.PrimaryKey):
                    ops.append(AddKey("primary", "PRIMARY", _key_columns(e)))
                elif isinstance(e, exp.UniqueColumnConstraint):
                    schema = e.this
                    cols_ = _key_columns(schema) if schema is not None else ()
                    iname = cname or (_ident(schema.this) if schema is not None and schema.this is not None else None)
                    ops.append(AddKey("unique", iname or (cols_[0] if cols_ else ""), cols_))
                # plain indexes, foreign keys, checks: no effect on rows
        elif isinstance(a, exp.DropPrimaryKey):
            ops.append(DropPrimaryKey())
        elif isinstance(a, exp.AlterRename):
            ops.append(RenameTo(_table_name(a.this, name.db)))
        elif isinstance(a, (exp.AlterColumn, exp.RenameIndex, exp.ForceProperty)):
            pass
        else:
            raise DdlError(f"unsupported ALTER action {a.sql(dialect=_MariaDB)!r}")
    for p in tree.args.get("options") or []:
        if isinstance(p, exp.CharacterSetProperty):
            ops.append(DefaultCharset(_norm_charset(_ident(p.this))))
    for cs in converts:
        ops.insert(0, ConvertCharset(_norm_charset(cs)))
    return AlterTable(name, tuple(ops), bool(tree.args.get("exists")))


def _parse_rename(sql: str, default_db: str | None) -> RenameTables:
    """``RENAME TABLE[S] [IF EXISTS] a TO b [, c TO d]`` from tokens (sqlglot has no node for it)."""
    m = re.match(r"\s*RENAME\s+TABLES?\s+", sql, re.IGNORECASE)
    toks = _MariaDB().tokenize(sql[m.end():] if m else sql)  # the tokenizer swallows what follows RENAME
    words = _words(toks)
    i = 0
    if words[i : i + 2] == ["IF", "EXISTS"]:
        i += 2

    def name(i: int) -> tuple[_Name, int]:
        parts = [toks[i].text]
        i += 1
        while i + 1 < len(toks) and toks[i].token_type == TokenType.DOT:
            parts.append(toks[i + 1].text)
            i += 2
        if len(parts) == 1:
            if not default_db:
                raise DdlError(f"table {parts[0]!r} is not qualified and the statement has no default database")
            return _Name(default_db, parts[0]), i
        if len(parts) == 2:
            return _Name(parts[0], parts[1]), i
        raise DdlError(f"bad table name {'.'.join(parts)!r}")

    pairs = []
    while i < len(toks):
        old, i = name(i)
        if i >= len(toks) or words[i] != "TO":
            raise DdlError("expected TO in RENAME TABLE")
        new, i = name(i + 1)
        pairs.append((old, new))
        if i < len(toks):
            if toks[i].token_type != TokenType.COMMA:
                raise DdlError(f"unexpected {toks[i].text!r} in RENAME TABLE")
            i += 1
    if not pairs:
        raise DdlError("RENAME TABLE without tables")
    return RenameTables(tuple(pairs))


def _guess_tables(sql: str, kind: str | None, default_db: str | None) -> tuple[_Name, ...]:
    """Best-effort target of an unparsable statement (the name after TABLE / ON)."""
    try:
        toks = _MariaDB().tokenize(sql)
    except Exception:  # noqa: BLE001 - the statement is already unparsable
        return ()
    words = _words(toks)
    anchor = "ON" if kind == "create_index" else "TABLE" if kind != "truncate" else "TRUNCATE"
    for i, word in enumerate(words):
        if word == anchor or (kind == "truncate" and word == "TABLE"):
            j = i + 1
            while j < len(words) and words[j] in ("IF", "NOT", "EXISTS", "TABLE"):
                j += 1
            if j >= len(toks):
                return ()
            parts = [toks[j].text]
            if j + 2 < len(toks) and toks[j + 1].token_type == TokenType.DOT:
                parts.append(toks[j + 2].text)
            if len(parts) == 2:
                return (_Name(parts[0], parts[1]),)
            return (_Name(default_db, parts[0]),) if default_db else ()
    return ()


def parse_statement(sql: str, default_db: str | None, db_charsets: Mapping[str, str] | None = None) -> list:
    """The schema actions of one statement: ``[]`` for statements that change no table
    schema, ``[Unparsed(reason, tables)]`` for table statements that cannot be understood.

    A pure function of its arguments, and its actions are frozen: the results are kept per
    process (bronze and silver parse the same statements in one run; sqlglot costs ~2 ms each).

    >>> parse_statement("TRUNCATE TABLE t", "shop")
    [TruncateTable(name=_Name(db='shop', table='t'))]
    >>> parse_statement("GRANT ALL ON *.* TO x", "shop")
    []
    """
    return list(_parse_cached(sql, default_db, tuple(sorted((db_charsets or {}).items()))))


@functools.lru_cache(maxsize=20_000)
def _parse_cached(sql: str, default_db: str | None, db_charsets: tuple) -> tuple:
    return tuple(_parse_statement(sql, default_db, dict(db_charsets)))


def _parse_statement(sql: str, default_db: str | None, db_charsets: Mapping[str, str]) -> list:
    kind = statement_kind(sql)
    if kind is None:
        return []
    db_charsets = db_charsets or {}
    text = strip_comments(sql).strip().rstrip(";").strip()
    try:
        if kind == "rename":
            return [_parse_rename(text, default_db)]
        if kind == "alter_table" and re.search(r"\b(TRUNCATE|DROP|EXCHANGE|REORGANIZE|COALESCE)\s+PARTITION\b",
                                               text, re.IGNORECASE):
            raise DdlError("partition maintenance removes or moves rows without row events")
        system_versioned = kind == "create_table" and bool(
            re.search(r"\bWITH\s+SYSTEM\s+VERSIONING\s*(?:$|[^(\w])", _outside_parens(text), re.IGNORECASE))
        normalized, converts = _normalize(_without_partitioning(text))
        if kind == "alter_table" and re.fullmatch(r"ALTER\s+TABLE\s+(IF\s+EXISTS\s+)?(`[^`]*(``[^`]*)*`|[^\s,]+)"
                                                  r"(\s*\.\s*(`[^`]*(``[^`]*)*`|[^\s,]+))?\s*,?\s*", normalized,
                                                  re.IGNORECASE):
            normalized += " FORCE"  # only CONVERT TO ... was there: keep a parsable statement
        with _quiet_sqlglot():
            tree = sqlglot.parse_one(normalized, read=_MariaDB)
        if isinstance(tree, exp.Command):
            raise DdlError(f"sqlglot does not understand this {kind.replace('_', ' ').upper()} statement")
        if kind == "create_table" and isinstance(tree, exp.Create):
            return [_parse_create(tree, default_db, db_charsets, system_versioned)]
        if kind == "alter_table" and isinstance(tree, exp.Alter):
            return [_parse_alter(tree, default_db, converts)]
        if kind == "drop_table" and isinstance(tree, exp.Drop):
            return [DropTables(tuple(_table_name(t, default_db) for t in tree.args.get("tables") or []))]
        if kind == "truncate" and isinstance(tree, exp.TruncateTable):
            return [TruncateTable(_table_name(t, default_db)) for t in tree.expressions]
        if kind in ("create_db", "alter_db", "drop_db"):
            target = tree.this if kind != "drop_db" else (tree.args.get("tables") or [None])[0]
            db = _ident(target.args.get("db") or target.this) if isinstance(target, exp.Table) else None
            if db is None:
                db = default_db
            if not db:
                raise DdlError("database statement without a database name")
            if kind == "drop_db":
                return [DropDatabase(db)]
            props = list((tree.args.get("properties") or exp.Properties(expressions=[])).expressions)
            cs = _table_charset(props)
            return [CreateDatabase(db, cs)] if (cs or kind == "create_db") else []
        if kind == "create_index" and isinstance(tree, exp.Create) and isinstance(tree.this, exp.Index):
            idx = tree.this
            unique = bool(tree.args.get("unique")) or str(tree.args.get("kind") or "").upper() == "UNIQUE"
            params = idx.args.get("params")
            cols = tuple(_ident(c) for c in (params.args.get("columns") if params else None) or [])
            return [CreateIndex(_table_name(idx.args["table"], default_db), _ident(idx.this), cols, unique)]
        if kind == "drop_index" and isinstance(tree, exp.Drop):
            on = tree.args.get("cluster")
            table = on.this if isinstance(on, exp.OnProperty) else None
            if table is None:
                raise DdlError("DROP INDEX without ON table")
            return [DropIndex(_table_name(table, default_db), _ident(tree.args["tables"][0]))]
        raise DdlError(f"sqlglot read this {kind.replace('_', ' ').upper()} statement as {type(tree).__name__}")
    except (DdlError, SqlglotError, KeyError, IndexError, AttributeError, TypeError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        if not isinstance(e, DdlError):
            reason = f"cannot parse: {reason}"
        return [Unparsed(reason, _guess_tables(text, kind, default_db))]


def _without_partitioning(sql: str) -> str:
    """The statement up to a top-level ``PARTITION BY`` (partitioning never changes the columns)."""
    try:
        toks = _MariaDB().tokenize(sql)
    except Exception:  # noqa: BLE001 - sqlglot will report the problem itself
        return sql
    words = _words(toks)
    depth = 0
    for i, t in enumerate(toks):
        if t.token_type == TokenType.L_PAREN:
            depth += 1
        elif t.token_type == TokenType.R_PAREN:
            depth -= 1
        elif depth == 0 and (" ".join((words[i] or "").split()) == "PARTITION BY"
                             or (words[i] == "PARTITION" and i + 1 < len(toks) and words[i + 1] == "BY")):
            return sql[: t.start].rstrip().rstrip(",")
    return sql


def _outside_parens(text: str) -> str:
    """The statement with every parenthesised part blanked (for table-level options)."""
    out, depth = [], 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)

