"""The schema of every source table over time, so silver knows the column names,
types and keys of each row change.

Where a table's schema comes from, highest priority first:

1. **TABLE_MAP optional metadata** (``binlog_row_metadata=FULL``): column names,
   signedness, charsets, ENUM/SET values, primary key.  Bronze carries it in each
   row (``name``/``type`` of the ``before``/``after`` elements, ``pk``);
   :func:`resolve_columns` puts it first.
2. **DDL in the binlog** (QUERY events, the ``_pipeline/ddl`` table): ``CREATE
   TABLE`` (also ``LIKE``, ``OR REPLACE``, ``IF NOT EXISTS``), ``ALTER TABLE`` (``ADD
   [COLUMN] [FIRST|AFTER x]``, ``DROP [COLUMN]``, ``MODIFY``, ``CHANGE old new``,
   ``RENAME COLUMN a TO b``, ``ADD/DROP PRIMARY KEY``, ``RENAME TO``, ``CONVERT TO
   CHARACTER SET``), ``RENAME TABLE``, ``DROP TABLE``, ``TRUNCATE TABLE``, ``CREATE /
   DROP DATABASE``, unique indexes.  Parsed with sqlglot (MySQL dialect, extended
   for MariaDB types such as ``INET6``; a token pass first rewrites MariaDB-only
   spellings such as ``PERSISTENT`` or ``ADD COLUMN (a INT, b INT)``).  A statement
   that cannot be understood becomes an ``unparsed`` version carrying the reason;
   it never stops the run.  Each version is valid from the statement's ``_seq`` on;
   the QUERY event's ``db`` is the default database.
3. **Seed files**: ``SHOW CREATE TABLE`` output for tables created before the first
   binlog, ``<seed>/<db>/<table>.sql`` or ``<seed>/<db>.<table>.sql`` (names escaped
   as in :mod:`pipelines.paths` when they hold ``/`` and such).  A seed version is
   valid from the start (``valid_from = ""``); DDL in the binlog applies on top.
4. **Configuration**: key overrides (``keys: {db.table: [cols]}``) win over every
   key found above (:func:`choose_keys`).

Versions are persisted in ``<warehouse>/_pipeline/schema_history`` (layout:
:data:`SCHEMA_HISTORY_COLUMNS`); each run continues from the persisted state and
appends only the versions of DDL statements it has not seen, so re-runs agree.

Pure part (no Spark), for tests and tools::

    >>> h = SchemaHistory()
    >>> _ = h.apply_statement("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)", "shop", "0001")
    >>> _ = h.apply_statement("ALTER TABLE t ADD COLUMN w INT AFTER id", "shop", "0002")
    >>> [c.name for c in h.at("shop", "t", "0003").columns]
    ['id', 'w', 'v']
    >>> [c.name for c in h.at("shop", "t", "0001x").columns]
    ['id', 'v']
"""
from __future__ import annotations

import bisect
import contextlib
import datetime as _dt
import functools
import logging
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

import sqlglot
from sqlglot import exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from .paths import unescape_name

log = logging.getLogger(__name__)

SCHEMA_HISTORY = "schema_history"  # <warehouse>/_pipeline/schema_history
QUARANTINE = "quarantine"  # <warehouse>/_pipeline/quarantine

# Version kinds.
CREATE = "create"  # a new (empty) table: CREATE TABLE [LIKE], CREATE OR REPLACE
ALTER = "alter"
DROP = "drop"  # the table is gone: silver empties it
TRUNCATE = "truncate"  # schema unchanged, silver becomes empty at this point
RENAME_TO = "rename_to"  # this name is gone, its rows now live under peer_db.peer_table
RENAME_FROM = "rename_from"  # this name now holds the rows of peer_db.peer_table
SEED = "seed"
UNPARSED = "unparsed"  # a statement about this table that could not be understood
DATABASE = "database"  # CREATE/ALTER DATABASE: default charset (table = "")
DROP_DATABASE = "drop_database"

# Kinds after which silver starts from an empty table.
RESET_KINDS = frozenset({CREATE, DROP, TRUNCATE})


# ---------------------------------------------------------------------------------------------------
# Model


@dataclass(frozen=True)
class ColumnDef:
    """One column as DDL declares it.

    ``type`` is the canonical upper-case MySQL type (``INT``, ``DECIMAL``, ``VARCHAR``,
    ``ENUM``, ``INET6``, ``JSON``...); ``length`` is M (character length, display width,
    BIT width, DECIMAL precision, VECTOR dimensions); ``decimals`` is D (DECIMAL/FLOAT
    scale) or the fractional-second digits of TIME/DATETIME/TIMESTAMP.  ``charset`` is
    set for character types (``binary`` for BINARY/VARBINARY/BLOB) when known.
    """

    name: str
    type: str
    length: int | None = None
    decimals: int | None = None
    unsigned: bool = False
    nullable: bool = True
    charset: str | None = None
    values: tuple[str, ...] = ()  # ENUM / SET members
    generated: str | None = None  # VIRTUAL | STORED
    invisible: bool = False
    default: str | None = None  # text of a literal DEFAULT (None: no default, NULL or an expression)

    def type_text(self) -> str:
        """MySQL spelling of the type: ``DECIMAL(10,2) UNSIGNED``, ``ENUM('a','b')``.

        >>> ColumnDef("d", "DECIMAL", 10, 2, unsigned=True).type_text()
        'DECIMAL(10,2) UNSIGNED'
        """
        t = self.type
        if self.values:
            t += "(" + ",".join("'" + v.replace("'", "''") + "'" for v in self.values) + ")"
        elif self.type in _FSP_TYPES:
            if self.decimals:
                t += f"({self.decimals})"
        elif self.length is not None and self.decimals is not None:
            t += f"({self.length},{self.decimals})"
        elif self.length is not None:
            t += f"({self.length})"
        if self.unsigned:
            t += " UNSIGNED"
        return t


@dataclass(frozen=True)
class UniqueKey:
    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class TableSchema:
    """Columns in ordinal order, primary key and unique keys of one table."""

    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[UniqueKey, ...] = ()
    charset: str | None = None  # table default charset

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def index_of(self, name: str) -> int | None:
        """Ordinal of a column; column names compare case-insensitively, as in MySQL."""
        low = name.lower()
        for i, c in enumerate(self.columns):
            if c.name.lower() == low:
                return i
        return None

    def effective_key(self) -> tuple[str, ...]:
        """The primary key or, as the server does without one, the first unique key whose
        columns are all NOT NULL; ``()`` when neither exists."""
        if self.primary_key:
            return self.primary_key
        for uk in self.unique_keys:
            cols = [self.index_of(n) for n in uk.columns]
            if cols and all(i is not None and not self.columns[i].nullable for i in cols):
                return tuple(self.columns[i].name for i in cols)
        return ()


@dataclass(frozen=True)
class SchemaVersion:
    """One entry of the history: what happened to ``db.table`` at ``valid_from``.

    ``schema`` is the table's schema from ``valid_from`` on (``None`` once the table is
    gone, or when it was never known).  ``reason`` explains ``unparsed`` versions.
    """

    db: str
    table: str
    valid_from: str
    kind: str
    schema: TableSchema | None
    statement: str = ""
    reason: str | None = None
    peer_db: str | None = None
    peer_table: str | None = None
    source_file: str | None = None
    pos: int | None = None
    renamed: tuple[tuple[str, str], ...] = ()  # ALTER: (old name, new name) of renamed columns


# ---------------------------------------------------------------------------------------------------
# Types

_FSP_TYPES = frozenset({"TIME", "DATETIME", "TIMESTAMP"})
_TEXT_TYPES = frozenset({"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET"})
_BINARY_OF = {"CHAR": "BINARY", "VARCHAR": "VARBINARY", "TINYTEXT": "TINYBLOB", "TEXT": "BLOB",
              "MEDIUMTEXT": "MEDIUMBLOB", "LONGTEXT": "LONGBLOB"}
_BINARY_TYPES = frozenset({"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"})
_GEOMETRY_TYPES = frozenset({"GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING",
                             "MULTIPOLYGON", "GEOMETRYCOLLECTION"})
_MB_MAXLEN = {"binary": 1, "latin1": 1, "ascii": 1, "utf8mb3": 3, "utf8": 3, "utf8mb4": 4, "ucs2": 2,
              "utf16": 4, "utf16le": 4, "utf32": 4, "gbk": 2, "big5": 2, "sjis": 2, "ujis": 3, "euckr": 2}

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


def charset_of_collation(collation: str) -> str:
    """``utf8mb4_general_ci`` -> ``utf8mb4``; ``binary`` -> ``binary``; ``utf8_bin`` -> ``utf8mb3``."""
    c = collation.lower()
    cs = c.split("_", 1)[0]
    return "utf8mb3" if cs == "utf8" else cs


def _norm_charset(cs: str | None) -> str | None:
    if cs is None:
        return None
    cs = cs.lower()
    return "utf8mb3" if cs == "utf8" else cs


class DdlError(ValueError):
    """A DDL statement that cannot be turned into a schema change (the message says why)."""


# ---------------------------------------------------------------------------------------------------
# SQL text: executable comments, MariaDB-only spellings


class _MariaDB(MySQL):
    """MySQL dialect + MariaDB's named types (``INET6``, ``POINT``...) as user-defined types,
    and MySQL's integer aliases spelled right (sqlglot reads ``INT8`` as TINYINT)."""

    SUPPORTS_USER_DEFINED_TYPES = True

    class Tokenizer(MySQL.Tokenizer):
        KEYWORDS = {
            **MySQL.Tokenizer.KEYWORDS,
            "INT1": TokenType.TINYINT, "INT2": TokenType.SMALLINT, "INT3": TokenType.MEDIUMINT,
            "INT4": TokenType.INT, "INT8": TokenType.BIGINT, "MIDDLEINT": TokenType.MEDIUMINT,
            "FLOAT4": TokenType.FLOAT, "FLOAT8": TokenType.DOUBLE, "REAL": TokenType.DOUBLE,
            "LONG": TokenType.MEDIUMTEXT,
        }


_QUOTED = frozenset({TokenType.IDENTIFIER, TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.HEX_STRING,
                     TokenType.BIT_STRING, TokenType.BYTE_STRING, TokenType.RAW_STRING})


def strip_comments(sql: str) -> str:
    """Drop ``-- ``, ``#`` and ``/* */`` comments; keep the body of MySQL executable
    comments ``/*!50100 ... */`` and ``/*M!100301 ... */`` (the server runs it).
    Quoted strings and identifiers are left as they are.

    >>> strip_comments("DROP TABLE `a/*b` /* generated by server */").strip()
    'DROP TABLE `a/*b`'
    >>> " ".join(strip_comments("CREATE TABLE t (a INT) /*!50100 PARTITION BY HASH (a) */").split())
    'CREATE TABLE t (a INT) PARTITION BY HASH (a)'
    """
    out: list[str] = []
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"`":
            j = i + 1
            while j < n:
                if sql[j] == "\\" and ch != "`":
                    j += 2
                    continue
                if sql[j] == ch:
                    if j + 1 < n and sql[j + 1] == ch:  # doubled quote
                        j += 2
                        continue
                    break
                j += 1
            out.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end
            m = re.match(r"/\*M?!(\d{5,6})?", sql[i:end])
            if m:  # executable comment: keep its body
                out.append(" " + strip_comments(sql[i + m.end() : end]) + " ")
            else:
                out.append(" ")
            i = end + 2
        elif ch == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\r\n")):
            end = sql.find("\n", i)
            i = n if end < 0 else end
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _words(tokens) -> list[str | None]:
    """Upper-case text of each bare (unquoted) word token, None for anything else."""
    return [None if t.token_type in _QUOTED else t.text.upper() for t in tokens]


def _normalize(sql: str) -> tuple[str, list[str]]:
    """Rewrite MariaDB-only spellings into ones sqlglot parses; also return the
    ``CONVERT TO CHARACTER SET`` charsets found (removed from the text).

    >>> _normalize("ALTER ONLINE TABLE t ADD COLUMN (a INT, b INT)")[0]
    'ALTER TABLE t ADD COLUMN a INT, ADD COLUMN b INT'
    """
    toks = _MariaDB().tokenize(sql)
    words = _words(toks)
    edits: list[tuple[int, int, str]] = []  # (start, end exclusive, replacement)
    converts: list[str] = []
    n = len(toks)

    def drop(i: int, j: int) -> None:  # tokens i..j-1
        edits.append((toks[i].start, toks[j - 1].end + 1, ""))

    def w(i: int) -> str | None:
        return words[i] if 0 <= i < n else None

    i = 0
    while i < n:
        word = words[i]
        if word in ("ONLINE", "IGNORE") and w(i - 1) == "ALTER":
            drop(i, i + 1)
        elif word in ("WITH", "WITHOUT") and w(i + 1) == "SYSTEM" and w(i + 2) == "VERSIONING":
            drop(i, i + 3)
            i += 3
            continue
        elif word == "PERSISTENT" and i > 0 and toks[i - 1].token_type == TokenType.R_PAREN:
            edits.append((toks[i].start, toks[i].end + 1, "STORED"))
        elif word == "COMPRESSED" and i > 0:
            j = i + 1
            if toks[j].token_type == TokenType.EQ if j < n else False:
                j += 2
            drop(i, min(j, n))
            i = j
            continue
        elif word == "USING" and w(i + 1) in ("BTREE", "HASH", "RTREE"):
            drop(i, i + 2)
            i += 2
            continue
        elif word == "UNSIGNED" and _after_float_type(toks, words, i):
            drop(i, i + 1)  # FLOAT UNSIGNED (deprecated) only narrows the range; sqlglot rejects it
        elif word == "RENAME" and w(i + 1) == "AS":
            edits.append((toks[i + 1].start, toks[i + 1].end + 1, "TO"))
        elif word in ("MODIFY", "CHANGE") or (word in ("INDEX", "KEY") and w(i - 1) in ("ADD", "DROP", "UNIQUE")):
            j = i + 1 if w(i + 1) != "COLUMN" else i + 2
            if w(j) == "IF" and w(j + 1) == "EXISTS":
                drop(j, j + 2)
            elif w(j) == "IF" and w(j + 1) == "NOT" and w(j + 2) == "EXISTS":
                drop(j, j + 3)
        elif word == "LONG" and w(i + 1) in ("VARCHAR", "VARBINARY"):
            edits.append((toks[i].start, toks[i + 1].end + 1, "MEDIUMTEXT" if w(i + 1) == "VARCHAR" else "MEDIUMBLOB"))
            i += 2
            continue
        elif word == "NATIONAL" and w(i + 1) in ("CHAR", "CHARACTER", "VARCHAR"):
            j = i + 2
            kind = "NVARCHAR" if w(i + 1) == "VARCHAR" or w(j) == "VARYING" else "NCHAR"
            if w(j) == "VARYING":
                j += 1
            edits.append((toks[i].start, toks[j - 1].end + 1, kind))
            i = j
            continue
        elif word in ("CHAR", "CHARACTER") and w(i + 1) == "VARYING":
            edits.append((toks[i].start, toks[i + 1].end + 1, "VARCHAR"))
            i += 2
            continue
        elif word == "BYTE" and w(i - 1) == "CHAR":
            edits.append((toks[i - 1].start, toks[i].end + 1, "BINARY"))
        elif word == "CONVERT" and w(i + 1) == "TO" and w(i + 2) in ("CHARACTER", "CHARSET"):
            j = i + 3 if w(i + 2) == "CHARSET" else i + 4  # CHARACTER SET
            charset = toks[j].text if j < n else ""
            j += 1
            if w(j) == "COLLATE":
                j += 2
            converts.append(charset)
            # remove the clause with one neighbouring comma
            a, b = i, j
            if b < n and toks[b].token_type == TokenType.COMMA:
                b += 1
            elif a > 0 and toks[a - 1].token_type == TokenType.COMMA:
                a -= 1
            drop(a, min(b, n))
            i = j
            continue
        elif word == "ADD" and w(i - 1) != "PARTITION":
            j = i + 1
            if w(j) == "COLUMN":
                j += 1
            if w(j) == "IF" and w(j + 1) == "NOT" and w(j + 2) == "EXISTS":
                j += 3
            if j < n and toks[j].token_type == TokenType.L_PAREN:
                # ADD [COLUMN] (a INT, b INT) -> ADD COLUMN a INT, ADD COLUMN b INT
                depth, k, parts, start = 0, j, [], j + 1
                while k < n:
                    tt = toks[k].token_type
                    if tt == TokenType.L_PAREN:
                        depth += 1
                    elif tt == TokenType.R_PAREN:
                        depth -= 1
                        if depth == 0:
                            parts.append((start, k))
                            break
                    elif tt == TokenType.COMMA and depth == 1:
                        parts.append((start, k))
                        start = k + 1
                    k += 1
                if k < n and parts and all(a < b for a, b in parts):
                    texts = [sql[toks[a].start : toks[b - 1].end + 1] for a, b in parts]
                    edits.append((toks[i].start, toks[k].end + 1, ", ".join("ADD COLUMN " + t for t in texts)))
                    i = k + 1
                    continue
        i += 1
    text = sql
    for start, end, rep in sorted(edits, reverse=True):
        text = text[:start] + rep + text[end:]
    return " ".join(text.split()) if edits else text, converts


def _after_float_type(toks, words, i: int) -> bool:
    """Is token ``i`` right after ``FLOAT`` / ``REAL`` / ``FLOAT4`` / ``FLOAT8`` (and its ``(M,D)``)?"""
    j = i - 1
    if j >= 0 and toks[j].token_type == TokenType.R_PAREN:
        while j >= 0 and toks[j].token_type != TokenType.L_PAREN:
            j -= 1
        j -= 1
    return j >= 0 and words[j] in ("FLOAT", "REAL", "FLOAT4", "FLOAT8")


@contextlib.contextmanager
def _quiet_sqlglot():
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


# ---------------------------------------------------------------------------------------------------
# Statements -> actions


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
    dtype = cd.args.get("kind")
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
    charset = None
    if mtype in ("ENUM", "SET"):
        values = tuple(str(p.this) for p in params)
    elif mtype == "VECTOR":
        length = _int_param(params[0]) if params else None
    elif params:
        nums = [_int_param(p) for p in params]
        if mtype in _FSP_TYPES:
            decimals = nums[0]
        elif mtype == "YEAR":
            pass
        else:
            length = nums[0]
            if len(nums) > 1:
                decimals = nums[1]
    if tname in ("NCHAR", "NVARCHAR"):
        charset = "utf8mb3"
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
    nullable = True
    key = None
    generated = None
    invisible = False
    default = None
    explicit_charset = charset is not None
    json_check = False
    binary_attr = False
    for c in cd.args.get("constraints") or []:
        k = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        if isinstance(k, exp.NotNullColumnConstraint):
            nullable = bool(k.args.get("allow_null"))
        elif isinstance(k, exp.PrimaryKeyColumnConstraint):
            key, nullable = "primary", False
        elif isinstance(k, exp.UniqueColumnConstraint):
            key = key or "unique"
        elif isinstance(k, exp.ComputedColumnConstraint):
            generated = "STORED" if k.args.get("persisted") else "VIRTUAL"
        elif isinstance(k, exp.GeneratedAsIdentityColumnConstraint) and k.args.get("expression") is not None:
            generated = "STORED" if k.args.get("persisted") else "VIRTUAL"
        elif isinstance(k, exp.InvisibleColumnConstraint):
            invisible = True
        elif isinstance(k, exp.DefaultColumnConstraint):
            default = _literal_text(k.this)
        elif isinstance(k, exp.CharacterSetColumnConstraint):
            charset, explicit_charset = _norm_charset(_ident(k.this)), True
        elif isinstance(k, exp.CollateColumnConstraint):
            if charset is None:
                charset = charset_of_collation(_ident(k.this))
            explicit_charset = True
        elif isinstance(k, exp.ZeroFillColumnConstraint):
            unsigned = True
        elif isinstance(k, exp.BinaryColumnConstraint):
            binary_attr = True  # binary collation of the charset, not the binary charset
        elif isinstance(k, exp.CheckColumnConstraint):
            body = k.this
            if isinstance(body, exp.Anonymous) and body.name.lower() == "json_valid":
                json_check = True
            elif isinstance(body, exp.Func) and type(body).__name__.lower().startswith("json") and "valid" in type(body).__name__.lower():
                json_check = True
    del binary_attr
    if tname == "SERIAL":
        nullable, key = False, key or "unique"
    if json_check and mtype == "LONGTEXT":
        mtype = "JSON"
    if charset == "binary" and mtype in _BINARY_OF:
        mtype = _BINARY_OF[mtype]
    if mtype in _BINARY_TYPES:
        charset = "binary"
    col = ColumnDef(name, mtype, length, decimals, unsigned, nullable, charset, values, generated, invisible, default)
    return col, key, explicit_charset, json_check


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


# ---------------------------------------------------------------------------------------------------
# The history


class _Draft:
    """A mutable copy of one table's schema while an ALTER TABLE applies."""

    def __init__(self, schema: TableSchema):
        self.renamed: list[tuple[str, str]] = []  # (old, new), chained renames collapsed
        self.cols = list(schema.columns)
        self.pk = list(schema.primary_key)
        self.uniques = list(schema.unique_keys)
        self.charset = schema.charset

    def index(self, name: str, what: str = "column") -> int:
        low = name.lower()
        for i, c in enumerate(self.cols):
            if c.name.lower() == low:
                return i
        raise DdlError(f"{what} {name!r} does not exist (columns: {', '.join(c.name for c in self.cols)})")

    def has(self, name: str) -> bool:
        return any(c.name.lower() == name.lower() for c in self.cols)

    def place(self, col: ColumnDef, position, at: int | None = None) -> None:
        if position is None:
            if at is None:
                self.cols.append(col)
            else:
                self.cols.insert(at, col)
        elif position[0] == "first":
            self.cols.insert(0, col)
        else:
            self.cols.insert(self.index(position[1], "AFTER column") + 1, col)

    def rename_in_keys(self, old: str, new: str) -> None:
        if old != new:
            for k, (first, last) in enumerate(self.renamed):
                if last.lower() == old.lower():
                    self.renamed[k] = (first, new)
                    break
            else:
                self.renamed.append((old, new))
        low = old.lower()
        self.pk = [new if k.lower() == low else k for k in self.pk]
        self.uniques = [UniqueKey(u.name, tuple(new if k.lower() == low else k for k in u.columns))
                        for u in self.uniques]

    def drop_from_keys(self, name: str) -> None:
        low = name.lower()
        self.pk = [k for k in self.pk if k.lower() != low]
        self.uniques = [UniqueKey(u.name, tuple(k for k in u.columns if k.lower() != low)) for u in self.uniques]
        self.uniques = [u for u in self.uniques if u.columns]

    def set_key(self, kind: str, name: str, columns: Sequence[str]) -> None:
        canon = [self.cols[self.index(c, "key column")].name for c in columns]
        if kind == "primary":
            self.pk = canon
            low = {c.lower() for c in canon}
            self.cols = [replace(c, nullable=False) if c.name.lower() in low else c for c in self.cols]
        else:
            self.uniques.append(UniqueKey(name, tuple(canon)))

    def apply(self, op) -> None:
        if isinstance(op, AddColumn):
            if self.has(op.column.name):
                if op.if_not_exists:
                    return
                raise DdlError(f"column {op.column.name!r} already exists")
            self.place(_finish_charset(op.column, self.charset), op.position)
            if op.key:
                self.set_key(op.key, op.column.name, [op.column.name])
        elif isinstance(op, DropColumn):
            if not self.has(op.name):
                if op.if_exists:
                    return
                self.index(op.name)
            del self.cols[self.index(op.name)]
            self.drop_from_keys(op.name)
            self.renamed = [(a, b) for a, b in self.renamed if b.lower() != op.name.lower()]
        elif isinstance(op, ChangeColumn):
            i = self.index(op.old_name)
            old = self.cols[i]
            if op.column.name.lower() != old.name.lower() and self.has(op.column.name):
                raise DdlError(f"column {op.column.name!r} already exists")
            col = _finish_charset(op.column, self.charset)
            if any(k.lower() == old.name.lower() for k in self.pk):
                col = replace(col, nullable=False)
            del self.cols[i]
            self.place(col, op.position, at=i)
            self.rename_in_keys(old.name, col.name)
            if op.key:
                self.set_key(op.key, col.name, [col.name])
        elif isinstance(op, RenameColumn):
            i = self.index(op.old_name)
            if op.new_name.lower() != op.old_name.lower() and self.has(op.new_name):
                raise DdlError(f"column {op.new_name!r} already exists")
            self.cols[i] = replace(self.cols[i], name=op.new_name)
            self.rename_in_keys(op.old_name, op.new_name)
        elif isinstance(op, AddKey):
            self.set_key(op.kind, op.index, op.columns)
        elif isinstance(op, DropPrimaryKey):
            self.pk = []
        elif isinstance(op, DropIndexOp):
            if op.index.upper() == "PRIMARY":
                self.pk = []
            self.uniques = [u for u in self.uniques if u.name.lower() != op.index.lower()]
        elif isinstance(op, ConvertCharset):
            self.charset = op.charset
            self.cols = [replace(c, charset=op.charset) if c.type in _TEXT_TYPES else c for c in self.cols]
        elif isinstance(op, DefaultCharset):
            self.charset = op.charset
        else:
            raise DdlError(f"cannot apply {type(op).__name__}")

    def schema(self) -> TableSchema:
        return TableSchema(tuple(self.cols), tuple(self.pk), tuple(self.uniques), self.charset)


class SchemaHistory:
    """Every table's schema versions in ``_seq`` order, built from seeds and DDL.

    >>> h = SchemaHistory()
    >>> _ = h.apply_statement("CREATE TABLE d.t (a INT)", None, "05")
    >>> _ = h.apply_statement("RENAME TABLE d.t TO d.u", None, "07")
    >>> h.at("d", "t", "06").names, h.at("d", "t", "08"), h.at("d", "u", "08").names
    (['a'], None, ['a'])
    """

    def __init__(self, versions: Iterable[SchemaVersion] = ()):
        self._versions: dict[tuple[str, str], list[SchemaVersion]] = {}
        self._db_events: dict[str, list[SchemaVersion]] = {}
        self._db_charsets: dict[str, str] = {}
        self.last_seq = ""  # the highest statement _seq applied
        for v in sorted(versions, key=lambda v: v.valid_from):
            self._add(v)

    # ---------------------------------------------------------------- queries
    def tables(self) -> list[tuple[str, str]]:
        return sorted(self._versions)

    def versions(self, db: str, table: str) -> list[SchemaVersion]:
        """All versions of one table, oldest first (several may share a ``valid_from``)."""
        return list(self._versions.get((db, table), ()))

    def all_versions(self) -> list[SchemaVersion]:
        out = [v for vs in self._versions.values() for v in vs]
        out += [v for vs in self._db_events.values() for v in vs]
        return sorted(out, key=lambda v: v.valid_from)

    def current(self, db: str, table: str) -> TableSchema | None:
        vs = self._versions.get((db, table))
        return vs[-1].schema if vs else None

    def version_at(self, db: str, table: str, seq: str) -> SchemaVersion | None:
        """The version in force for a row change at ``seq`` (the last one with ``valid_from <= seq``)."""
        vs = self._versions.get((db, table))
        if not vs:
            return None
        i = bisect.bisect_right([v.valid_from for v in vs], seq)
        return vs[i - 1] if i else None

    def schema_before(self, db: str, table: str, seq: str) -> TableSchema | None:
        """The schema in force just before ``seq`` (the versions of ``seq`` itself not applied)."""
        vs = self._versions.get((db, table))
        if not vs:
            return None
        i = bisect.bisect_left([v.valid_from for v in vs], seq)
        return vs[i - 1].schema if i else None

    def at(self, db: str, table: str, seq: str) -> TableSchema | None:
        """The schema of ``db.table`` for a row change at ``seq`` (None when unknown or dropped)."""
        v = self.version_at(db, table, seq)
        return v.schema if v is not None else None

    def events_between(self, db: str, table: str, after: str, upto: str | None = None) -> list[SchemaVersion]:
        """Versions of ``db.table`` (and DROP DATABASE of ``db``) with ``after < valid_from <= upto``,
        in order: the points where silver must split a batch."""
        evs = [v for v in self._versions.get((db, table), ()) if v.valid_from > after
               and (upto is None or v.valid_from <= upto)]
        evs += [v for v in self._db_events.get(db, ()) if v.kind == DROP_DATABASE and v.valid_from > after
                and (upto is None or v.valid_from <= upto)
                and not any(e.valid_from == v.valid_from for e in evs)]
        return sorted(evs, key=lambda v: v.valid_from)

    def db_charset(self, db: str) -> str | None:
        return self._db_charsets.get(db)

    # ---------------------------------------------------------------- updates
    def _add(self, v: SchemaVersion) -> SchemaVersion:
        if v.table == "":
            self._db_events.setdefault(v.db, []).append(v)
            if v.kind == DATABASE and v.schema is not None and v.schema.charset:
                self._db_charsets[v.db] = v.schema.charset
            elif v.kind == DROP_DATABASE:
                self._db_charsets.pop(v.db, None)
        else:
            vs = self._versions.setdefault((v.db, v.table), [])
            if vs and v.valid_from < vs[-1].valid_from:
                raise ValueError(f"schema versions of {v.db}.{v.table} out of order: {v.valid_from} < {vs[-1].valid_from}")
            vs.append(v)
        if v.kind != SEED and v.valid_from > self.last_seq:
            self.last_seq = v.valid_from
        return v

    def add_seed(self, db: str, table: str, create_sql: str, source: str | None = None) -> SchemaVersion:
        """A ``SHOW CREATE TABLE`` text for a table that predates the binlogs (valid from the start).
        Raises :class:`DdlError` when the text is not a CREATE TABLE with columns."""
        actions = parse_statement(create_sql, db, self._db_charsets)
        if len(actions) != 1 or not isinstance(actions[0], CreateTable) or actions[0].schema is None:
            why = actions[0].reason if actions and isinstance(actions[0], Unparsed) else "not a CREATE TABLE with columns"
            raise DdlError(f"seed {source or f'{db}.{table}'}: {why}")
        if self._versions.get((db, table)):
            raise DdlError(f"seed {source or f'{db}.{table}'}: {db}.{table} already has a schema history")
        return self._add(SchemaVersion(db, table, "", SEED, actions[0].schema, create_sql, source_file=source))

    def apply_statement(self, sql: str, default_db: str | None, seq: str, *,
                        source_file: str | None = None, pos: int | None = None) -> list[SchemaVersion]:
        """Apply one QUERY-event statement at ``seq``; return the new versions (none for
        statements that change no table). Never raises for bad SQL: see ``unparsed``."""
        out: list[SchemaVersion] = []

        def add(db, table, kind, schema, reason=None, peer=None, renamed=()):
            out.append(self._add(SchemaVersion(
                db, table, seq, kind, schema, sql, reason, peer.db if peer else None, peer.table if peer else None,
                source_file, pos, tuple(renamed))))

        add.statement = sql
        for action in parse_statement(sql, default_db, self._db_charsets):
            if isinstance(action, CreateTable):
                n = action.name
                if action.if_not_exists and self.current(n.db, n.table) is not None:
                    continue
                if action.like is not None:
                    src = self.current(action.like.db, action.like.table)
                    if src is None:
                        add(n.db, n.table, UNPARSED, None,
                            f"CREATE TABLE ... LIKE {action.like.db}.{action.like.table}: that table's schema is unknown")
                    else:
                        add(n.db, n.table, CREATE, src)
                else:
                    add(n.db, n.table, CREATE, action.schema)
            elif isinstance(action, AlterTable):
                self._apply_alter(action, add)
            elif isinstance(action, RenameTables):
                for old, new in action.pairs:
                    schema = self.current(old.db, old.table)
                    add(old.db, old.table, RENAME_TO, None, peer=new)
                    add(new.db, new.table, RENAME_FROM, schema,
                        None if schema is not None else f"renamed from {old.db}.{old.table}, whose schema is unknown",
                        peer=old)
            elif isinstance(action, DropTables):
                for n in action.names:
                    add(n.db, n.table, DROP, None)
            elif isinstance(action, TruncateTable):
                add(action.name.db, action.name.table, TRUNCATE, self.current(action.name.db, action.name.table))
            elif isinstance(action, CreateDatabase):
                add(action.db, "", DATABASE, TableSchema((), charset=action.charset))
            elif isinstance(action, DropDatabase):
                for db, table in self.tables():
                    if db == action.db and self.current(db, table) is not None:
                        add(db, table, DROP, None)
                add(action.db, "", DROP_DATABASE, None)
            elif isinstance(action, (CreateIndex, DropIndex)):
                cur = self.current(action.name.db, action.name.table)
                if cur is None:
                    continue
                d = _Draft(cur)
                try:
                    if isinstance(action, CreateIndex):
                        if not action.unique:
                            continue
                        d.set_key("unique", action.index, action.columns)
                    else:
                        d.apply(DropIndexOp(action.index))
                except DdlError as e:
                    add(action.name.db, action.name.table, UNPARSED, cur, str(e))
                    continue
                if d.schema() != cur:
                    add(action.name.db, action.name.table, ALTER, d.schema())
            elif isinstance(action, Unparsed):
                if action.tables:
                    for n in action.tables:
                        add(n.db, n.table, UNPARSED, self.current(n.db, n.table), action.reason)
                else:
                    add(default_db or "", "", UNPARSED, None, action.reason)
        return out

    def _apply_alter(self, action: AlterTable, add) -> None:
        n = action.name
        cur = self.current(n.db, n.table)
        renames = [op for op in action.ops if isinstance(op, RenameTo)]
        ops = [op for op in action.ops if not isinstance(op, RenameTo)]
        if cur is None:
            if ops:
                add(n.db, n.table, UNPARSED, None,
                    "ALTER TABLE of a table whose schema is unknown (created before the first binlog? "
                    "give its SHOW CREATE TABLE as a seed)")
            new_schema = None
        else:
            d = _Draft(cur)
            try:
                for op in ops:
                    d.apply(op)
            except DdlError as e:
                last = self._versions[(n.db, n.table)][-1]
                if last.kind == ALTER and " ".join(last.statement.split()) == " ".join(add.statement.split()):
                    # MariaDB two-phase ALTER (binlog_alter_two_phase) logs the statement at
                    # START ALTER and again at COMMIT ALTER: it is applied once
                    return
                add(n.db, n.table, UNPARSED, cur, str(e))
                return
            new_schema = d.schema()
            if new_schema != cur and not renames:
                add(n.db, n.table, ALTER, new_schema, renamed=d.renamed)
        for r in renames[-1:]:
            if (r.name.db, r.name.table) == (n.db, n.table):
                if new_schema is not None and new_schema != cur:
                    add(n.db, n.table, ALTER, new_schema, renamed=d.renamed)
                continue
            add(n.db, n.table, RENAME_TO, None, peer=r.name)
            add(r.name.db, r.name.table, RENAME_FROM, new_schema,
                None if new_schema is not None else f"renamed from {n.db}.{n.table}, whose schema is unknown",
                peer=n)


# ---------------------------------------------------------------------------------------------------
# Seeds


def read_seed_folder(seed_dir) -> list[tuple[str, str, str, str]]:
    """``(db, table, create_sql, path)`` for every ``*.sql`` file of a seed folder:
    ``<seed>/<db>/<table>.sql`` or ``<seed>/<db>.<table>.sql`` (names escaped as in
    :mod:`pipelines.paths`; the first ``.`` of a flat name separates db and table).
    The text may be bare ``SHOW CREATE TABLE`` output or the client's tabular form.
    Every layout problem is reported in one :class:`DdlError`.
    """
    entries, problems = _scan_seed_folder(seed_dir)
    if problems:
        raise DdlError(f"schema_seed {seed_dir}: {len(problems)} bad file(s):\n" + "\n".join(f"  - {p}" for p in problems))
    return entries


def _scan_seed_folder(seed_dir) -> tuple[list[tuple[str, str, str, str]], list[str]]:
    root = Path(seed_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"schema_seed folder {str(root)!r} does not exist or is not a folder")
    entries, problems = [], []
    for p in sorted(root.rglob("*.sql")):
        rel = p.relative_to(root)
        stem = p.name[: -len(".sql")]
        if len(rel.parts) == 2:
            db, table = unescape_name(rel.parts[0]), unescape_name(stem)
        elif len(rel.parts) == 1 and "." in stem:
            d, t = stem.split(".", 1)
            db, table = unescape_name(d), unescape_name(t)
        else:
            problems.append(f"{p}: expected <seed>/<db>/<table>.sql or <seed>/<db>.<table>.sql")
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            problems.append(f"{p}: cannot read: {e}")
            continue
        if text.startswith("Table\tCreate Table"):  # `mariadb -B -e "SHOW CREATE TABLE t"` output
            row = text.split("\n", 1)[1] if "\n" in text else ""
            text = row.split("\t", 1)[1] if "\t" in row else row
            text = re.sub(r"\\([nt\\0])", lambda m: {"n": "\n", "t": "\t", "\\": "\\", "0": "\0"}[m.group(1)], text)
        m = re.search(r"\bCREATE\s", text, re.IGNORECASE)
        if not m:
            problems.append(f"{p}: no CREATE TABLE statement in the file")
            continue
        body = text[m.start():].strip()
        if body.endswith(";"):
            body = body[:-1]
        entries.append((db, table, body, str(p)))
    return entries, problems


def load_seeds(history: SchemaHistory, seed_dir) -> list[SchemaVersion]:
    """Add a seed version for every seed file whose table has no history yet; every
    bad file is reported in one :class:`DdlError`."""
    entries, problems = _scan_seed_folder(seed_dir)
    added = []
    for db, table, text, path in entries:
        if history.versions(db, table):
            continue
        try:
            added.append(history.add_seed(db, table, text, path))
        except DdlError as e:
            problems.append(str(e))
    if problems:
        raise DdlError(f"schema_seed {seed_dir}: {len(problems)} bad file(s):\n" + "\n".join(f"  - {p}" for p in problems))
    return added


# ---------------------------------------------------------------------------------------------------
# Matching row images to a schema: names, types, keys (priority: table map > DDL > seed; config keys)


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
    return BinlogType(m.group("name"), args, bool(m.group("unsigned")), _norm_charset(m.group("cs")))


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
    **{t: frozenset({"GEOMETRY"}) for t in _GEOMETRY_TYPES},
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
    if ok and logged.charset and ddl.type in _BINARY_TYPES | {"INET6", "INET4", "UUID"}:
        return logged.charset == "binary"
    if ok and logged.charset == "binary" and ddl.type in _TEXT_TYPES - {"ENUM", "SET"}:
        return False
    return ok


def spec_from_ddl(col: ColumnDef, idx: int, logged: BinlogType | None = None, metadata: bool = False):
    """The silver :class:`~pipelines.typemap.ColumnSpec` of a DDL column at image position ``idx``;
    ``logged`` (with ``metadata``: the table map carried signedness/charsets) wins on
    signedness and charset."""
    from pipelines.typemap import ColumnSpec

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
    """A :class:`~pipelines.typemap.ColumnSpec` from the table map alone (FULL metadata, no DDL)."""
    from pipelines.typemap import ColumnSpec

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
    if (t in _TEXT_TYPES or t == "JSON") and logged.charset is None:
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


class KeyConfigError(ValueError):
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
            if named:
                ddl_col = None
                if schema is not None:
                    i = schema.index_of(c.name)
                    ddl_col = schema.columns[i] if i is not None else None
                if ddl_col is not None and compatible(ddl_col, lt):
                    spec = spec_from_ddl(replace(ddl_col, name=c.name), c.idx, lt, metadata=True)
                    fix = _value_fix(ddl_col, lt, True, db_charset)
                else:
                    try:
                        spec = spec_from_binlog(c.name, lt, c.idx)
                    except ValueError as e:
                        problem = str(e)
                        break
                    fix = None
            else:
                if schema is None:
                    problem = (f"no column names for {where}: the table map has no FULL metadata "
                               f"(binlog_row_metadata=FULL), and there is no CREATE TABLE in the binlogs "
                               f"and no seed for it")
                    break
                if c.idx >= len(schema.columns):
                    problem = (f"the row has a column #{c.idx + 1} ({c.type}) but the schema of {where} "
                               f"({ddl_source} at _seq {version.valid_from or 'start'}) has "
                               f"{len(schema.columns)} columns: {', '.join(schema.names)}")
                    break
                ddl_col = schema.columns[c.idx]
                if not compatible(ddl_col, lt):
                    problem = (f"column #{c.idx + 1} of {where} is logged as {c.type} but the schema "
                               f"({ddl_source} at _seq {version.valid_from or 'start'}) declares "
                               f"{ddl_col.name} {ddl_col.type_text()}")
                    break
                spec = spec_from_ddl(ddl_col, c.idx, lt, metadata=lt.charset is not None or lt.unsigned)
                fix = _value_fix(ddl_col, lt, False, db_charset)
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


# ---------------------------------------------------------------------------------------------------
# Value fixes (pure functions; pipelines.silver.value_fixes runs them inside Spark)


def inet6_text(raw: bytes) -> str:
    """INET6 as MariaDB prints it (RFC 5952; IPv4-mapped/-compatible with a dotted quad).

    >>> inet6_text(bytes(15) + b"\\x01"), inet6_text(bytes(10) + b"\\xff\\xff\\xc0\\x00\\x02\\x01")
    ('::1', '::ffff:192.0.2.1')
    """
    import ipaddress

    raw = bytes(raw).ljust(16, b"\0")
    if raw[:10] == bytes(10) and raw[10:12] == b"\xff\xff":
        return "::ffff:" + inet4_text(raw[12:])
    if raw[:12] == bytes(12) and raw[12:14] != b"\0\0":
        return "::" + inet4_text(raw[12:])
    return ipaddress.IPv6Address(raw).compressed


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
            return bytes(raw).decode(codec), None
    elif kind == FIX_ENUM:
        if text is not None and text.isdigit() and not named:
            i = int(text)
            if i > len(fix[1]):
                raise ValueError(f"ENUM index {i} but the schema has {len(fix[1])} members {fix[1]}")
            return ("" if i == 0 else fix[1][i - 1]), raw
    elif kind == FIX_SET:
        if text is not None and text.isdigit() and not named:
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


# ---------------------------------------------------------------------------------------------------
# Persistence: <warehouse>/_pipeline/schema_history

COLUMN_DEF_DDL = (
    "name STRING, type STRING, length INT, decimals INT, unsigned BOOLEAN, nullable BOOLEAN, charset STRING, "
    "`values` ARRAY<STRING>, generated STRING, invisible BOOLEAN, `default` STRING"
)
SCHEMA_HISTORY_COLUMNS: list[tuple[str, str]] = [
    ("db", "STRING"),
    ("table", "STRING"),  # "" for database-level entries (kinds database, drop_database, unparsed)
    ("valid_from", "STRING"),  # the statement's _seq; "" for seeds (valid from the start)
    ("version", "INT"),  # per table, 0, 1, 2...: orders versions that share a valid_from
    ("kind", "STRING"),  # create | alter | drop | truncate | rename_to | rename_from | seed | unparsed | ...
    ("columns", f"ARRAY<STRUCT<{COLUMN_DEF_DDL}>>"),  # NULL when the table is gone or unknown
    ("primary_key", "ARRAY<STRING>"),
    ("unique_keys", "ARRAY<STRUCT<name STRING, columns ARRAY<STRING>>>"),
    ("table_charset", "STRING"),
    ("peer_db", "STRING"),  # renames: the other name
    ("peer_table", "STRING"),
    ("renamed_columns", "ARRAY<STRUCT<old: STRING, new: STRING>>"),  # ALTER: columns renamed by it
    ("statement", "STRING"),  # the DDL text (seed: the SHOW CREATE TABLE text)
    ("reason", "STRING"),  # why an `unparsed` statement could not be applied
    ("source_file", "STRING"),  # binlog file (seed: the seed file)
    ("pos", "BIGINT"),
    ("_run_id", "STRING"),
    ("recorded_at", "TIMESTAMP"),
]
SCHEMA_HISTORY_DDL = ", ".join(f"`{n}` {t}" for n, t in SCHEMA_HISTORY_COLUMNS)


def versions_to_rows(versions: Sequence[SchemaVersion], first_version: Mapping[tuple[str, str], int],
                     run_id: str | None, now: _dt.datetime) -> list[tuple]:
    """Rows (in :data:`SCHEMA_HISTORY_COLUMNS` order) for new versions; ``first_version`` gives
    the next ``version`` number of each table."""
    counters = dict(first_version)
    rows = []
    for v in versions:
        key = (v.db, v.table)
        n = counters.get(key, 0)
        counters[key] = n + 1
        s = v.schema
        cols = None if s is None else [
            (c.name, c.type, c.length, c.decimals, c.unsigned, c.nullable, c.charset, list(c.values), c.generated,
             c.invisible, c.default) for c in s.columns]
        rows.append((
            v.db, v.table, v.valid_from, n, v.kind, cols,
            None if s is None else list(s.primary_key),
            None if s is None else [(u.name, list(u.columns)) for u in s.unique_keys],
            None if s is None else s.charset,
            v.peer_db, v.peer_table, [list(p) for p in v.renamed], v.statement, v.reason, v.source_file, v.pos,
            run_id, now,
        ))
    return rows


def rows_to_versions(rows: Iterable) -> list[SchemaVersion]:
    """:class:`SchemaVersion` objects of persisted rows (Spark Rows or dicts), in history order."""
    out = []
    for r in sorted(rows, key=lambda r: (r["valid_from"], r["db"], r["table"], r["version"])):
        schema = None
        if r["columns"] is not None:
            cols = tuple(ColumnDef(c["name"], c["type"], c["length"], c["decimals"], bool(c["unsigned"]),
                                   bool(c["nullable"]), c["charset"], tuple(c["values"] or ()), c["generated"],
                                   bool(c["invisible"]), c["default"]) for c in r["columns"])
            schema = TableSchema(cols, tuple(r["primary_key"] or ()),
                                 tuple(UniqueKey(u["name"], tuple(u["columns"])) for u in r["unique_keys"] or ()),
                                 r["table_charset"])
        out.append(SchemaVersion(r["db"], r["table"], r["valid_from"], r["kind"], schema, r["statement"] or "",
                                 r["reason"], r["peer_db"], r["peer_table"], r["source_file"], r["pos"],
                                 tuple((p["old"], p["new"]) for p in r["renamed_columns"] or ())))
    return out


def update_history(spark, cfg, run_id: str | None = None) -> tuple[SchemaHistory, list[SchemaVersion]]:
    """Bring ``<warehouse>/_pipeline/schema_history`` up to date and return the whole history
    and the versions this call added.

    Continues from the persisted versions: seeds are added for tables without history, then
    every statement of ``<warehouse>/_pipeline/ddl`` after the last one applied, in ``_seq``
    order. A second call with the same input adds nothing.

    >>> history, added = update_history(spark, cfg)  # doctest: +SKIP
    >>> history.at("shop", "orders", row_seq).names  # doctest: +SKIP
    ['order_id', 'line', 'qty']
    """
    history, added, next_version = build_history(spark, cfg)
    if added:
        from pipelines import delta_io

        now = _dt.datetime.now(_dt.timezone.utc)
        rows = versions_to_rows(added, next_version, run_id, now)
        delta_io.append_rows(spark, rows, SCHEMA_HISTORY_DDL, cfg.pipeline_path(SCHEMA_HISTORY), backend=cfg.delta.backend)
    return history, added


def build_history(spark, cfg, statements: Iterable[tuple[str, str | None, str]] = ()
                  ) -> tuple[SchemaHistory, list[SchemaVersion], dict[tuple[str, str], int]]:
    """The schema history as :func:`update_history` would make it, written nowhere:
    ``(history, versions added to the persisted ones, next version number per table)``.
    ``statements`` (``(query, default db, _seq)``, in ``_seq`` order) are applied after those of
    ``_pipeline/ddl``: bronze passes the DDL of the batch it has not committed yet."""
    from pipelines import delta_io

    backend = cfg.delta.backend
    path = cfg.pipeline_path(SCHEMA_HISTORY)
    persisted = delta_io.read_rows(spark, path, backend=backend)
    history = SchemaHistory(rows_to_versions(persisted))
    next_version: dict[tuple[str, str], int] = {}
    for r in persisted:
        key = (r["db"], r["table"])
        next_version[key] = max(next_version.get(key, 0), r["version"] + 1)
    added: list[SchemaVersion] = []
    if cfg.schema_seed:
        added += load_seeds(history, cfg.schema_seed)
    stmts = sorted(delta_io.read_rows(spark, cfg.pipeline_path("ddl"), ["_seq", "file", "pos", "db", "query"],
                                      backend=backend, above=("_seq", history.last_seq)), key=lambda r: r["_seq"])
    for r in stmts:
        added += history.apply_statement(r["query"], r["db"], r["_seq"], source_file=r["file"], pos=r["pos"])
    for query, db, seq in statements:
        if seq > history.last_seq:
            added += history.apply_statement(query, db, seq)
    return history, added, next_version
