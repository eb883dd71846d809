"""DDL text to schema changes, with sqlglot (MySQL dialect, extended for MariaDB): executable comments
and MariaDB-only spellings first, then one statement object per CREATE / ALTER / RENAME / DROP /
TRUNCATE ... (:func:`parse_statement`). Pure."""
from __future__ import annotations

import contextlib
import functools
import logging
import re
from typing import Mapping

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from pipelines.binlog.changes import is_ddl
from pipelines.schema.sql_text import MariaDBDialect, normalize, words_of, strip_comments
from pipelines.schema.ddl_ops import (  # noqa: F401 (the statements parse_statement returns)
    AddColumn, AddKey, AlterTable, ChangeColumn, ConvertCharset, CreateDatabase, CreateIndex, CreateTable,
    DefaultCharset, DropColumn, DropDatabase, DropIndex, DropIndexOp, DropPrimaryKey, DropTables, RenameColumn,
    DdlError, RenameTables, RenameTo, TableName as _Name, TruncateTable, Unparsed,
)
from pipelines.schema.ddl_columns import (
    column_def, column_position, ident, key_columns, table_charset_of, table_elements,
)
from pipelines.schema.model import ColumnDef, TableSchema, norm_charset


@contextlib.contextmanager
def _quiet_sqlglot():
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


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


def _table_name(table: exp.Expression, default_db: str | None) -> _Name:
    if not isinstance(table, exp.Table):
        raise DdlError(f"expected a table name, got {table.sql(dialect=MariaDBDialect)!r}")
    name = ident(table.this)
    db_node = table.args.get("db")
    db = ident(db_node) if db_node is not None else default_db
    if not db:
        raise DdlError(f"table {name!r} is not qualified and the statement has no default database")
    return _Name(db, name)


def _parse_create(tree: exp.Create, default_db: str | None, db_charsets: Mapping[str, str],
                  system_versioned: bool) -> CreateTable:
    target = tree.this
    props = list((tree.args.get("properties") or exp.Properties(expressions=[])).expressions)
    if tree.args.get("expression") is not None and not isinstance(target, exp.Schema):
        raise DdlError("CREATE TABLE ... SELECT without column definitions: the columns are not in the statement")
    if isinstance(target, exp.Schema):
        name = _table_name(target.this, default_db)
        cs = table_charset_of(props) or db_charsets.get(name.db)
        cols, pk, uniques, like = table_elements(target.expressions, cs)
    else:
        name = _table_name(target, default_db)
        cs = table_charset_of(props) or db_charsets.get(name.db)
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
            if a.this is not None and ident(a.this).upper() == "SYSTEM" and a.args.get("kind") is None:
                raise DdlError("ADD SYSTEM VERSIONING changes the hidden row_start/row_end columns")
            col, key, _explicit, _ = column_def(a)
            ops.append(AddColumn(col, column_position(a), bool(a.args.get("exists")), key))
        elif isinstance(a, exp.Drop):
            kind = str(a.args.get("kind") or "").upper()
            targets = a.args.get("tables") or []
            if kind == "COLUMN":
                for t in targets:
                    ops.append(DropColumn(ident(t), bool(a.args.get("exists"))))
            elif kind in ("INDEX", "KEY"):
                for t in targets:
                    ops.append(DropIndexOp(ident(t)))
            elif kind in ("FOREIGN KEY", "CONSTRAINT", "CHECK", ""):
                if kind == "" and targets:
                    raise DdlError(f"unsupported ALTER action {a.sql(dialect=MariaDBDialect)!r}")
            elif kind == "PARTITION":
                raise DdlError("DROP PARTITION removes rows without row events")
            else:
                raise DdlError(f"unsupported ALTER action {a.sql(dialect=MariaDBDialect)!r}")
        elif isinstance(a, exp.ModifyColumn):
            cd = a.this
            col, key, _explicit, _ = column_def(cd)
            old = a.args.get("rename_from")
            ops.append(ChangeColumn(ident(old) if old is not None else col.name, col, column_position(cd), key))
        elif isinstance(a, exp.RenameColumn):
            ops.append(RenameColumn(ident(a.this), ident(a.args["to"])))
        elif isinstance(a, exp.AddConstraint):
            for e in a.expressions:
                cname = None
                if isinstance(e, exp.Constraint):
                    cname = ident(e.this) if e.this is not None else None
                    e = e.expressions[0] if e.expressions else None
                if isinstance(e, exp.PrimaryKey):
                    ops.append(AddKey("primary", "PRIMARY", key_columns(e)))
                elif isinstance(e, exp.UniqueColumnConstraint):
                    schema = e.this
                    cols_ = key_columns(schema) if schema is not None else ()
                    iname = cname or (ident(schema.this) if schema is not None and schema.this is not None else None)
                    ops.append(AddKey("unique", iname or (cols_[0] if cols_ else ""), cols_))
                # plain indexes, foreign keys, checks: no effect on rows
        elif isinstance(a, exp.DropPrimaryKey):
            ops.append(DropPrimaryKey())
        elif isinstance(a, exp.AlterRename):
            ops.append(RenameTo(_table_name(a.this, name.db)))
        elif isinstance(a, (exp.AlterColumn, exp.RenameIndex, exp.ForceProperty)):
            pass
        else:
            raise DdlError(f"unsupported ALTER action {a.sql(dialect=MariaDBDialect)!r}")
    for p in tree.args.get("options") or []:
        if isinstance(p, exp.CharacterSetProperty):
            ops.append(DefaultCharset(norm_charset(ident(p.this))))
    for cs in converts:
        ops.insert(0, ConvertCharset(norm_charset(cs)))
    return AlterTable(name, tuple(ops), bool(tree.args.get("exists")))


def _parse_rename(sql: str, default_db: str | None) -> RenameTables:
    """``RENAME TABLE[S] [IF EXISTS] a TO b [, c TO d]`` from tokens (sqlglot has no node for it)."""
    m = re.match(r"\s*RENAME\s+TABLES?\s+", sql, re.IGNORECASE)
    toks = MariaDBDialect().tokenize(sql[m.end():] if m else sql)  # the tokenizer swallows what follows RENAME
    words = words_of(toks)
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
        toks = MariaDBDialect().tokenize(sql)
    except Exception:  # noqa: BLE001 - the statement is already unparsable
        return ()
    words = words_of(toks)
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
    [TruncateTable(name=TableName(db='shop', table='t'))]
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
        normalized, converts = normalize(_without_partitioning(text))
        if kind == "alter_table" and re.fullmatch(r"ALTER\s+TABLE\s+(IF\s+EXISTS\s+)?(`[^`]*(``[^`]*)*`|[^\s,]+)"
                                                  r"(\s*\.\s*(`[^`]*(``[^`]*)*`|[^\s,]+))?\s*,?\s*", normalized,
                                                  re.IGNORECASE):
            normalized += " FORCE"  # only CONVERT TO ... was there: keep a parsable statement
        with _quiet_sqlglot():
            tree = sqlglot.parse_one(normalized, read=MariaDBDialect)
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
            db = ident(target.args.get("db") or target.this) if isinstance(target, exp.Table) else None
            if db is None:
                db = default_db
            if not db:
                raise DdlError("database statement without a database name")
            if kind == "drop_db":
                return [DropDatabase(db)]
            props = list((tree.args.get("properties") or exp.Properties(expressions=[])).expressions)
            cs = table_charset_of(props)
            return [CreateDatabase(db, cs)] if (cs or kind == "create_db") else []
        if kind == "create_index" and isinstance(tree, exp.Create) and isinstance(tree.this, exp.Index):
            idx = tree.this
            unique = bool(tree.args.get("unique")) or str(tree.args.get("kind") or "").upper() == "UNIQUE"
            params = idx.args.get("params")
            cols = tuple(ident(c) for c in (params.args.get("columns") if params else None) or [])
            return [CreateIndex(_table_name(idx.args["table"], default_db), ident(idx.this), cols, unique)]
        if kind == "drop_index" and isinstance(tree, exp.Drop):
            on = tree.args.get("cluster")
            table = on.this if isinstance(on, exp.OnProperty) else None
            if table is None:
                raise DdlError("DROP INDEX without ON table")
            return [DropIndex(_table_name(table, default_db), ident(tree.args["tables"][0]))]
        raise DdlError(f"sqlglot read this {kind.replace('_', ' ').upper()} statement as {type(tree).__name__}")
    except (DdlError, SqlglotError, KeyError, IndexError, AttributeError, TypeError, ValueError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        if not isinstance(e, DdlError):
            reason = f"cannot parse: {reason}"
        return [Unparsed(reason, _guess_tables(text, kind, default_db))]


def _without_partitioning(sql: str) -> str:
    """The statement up to a top-level ``PARTITION BY`` (partitioning never changes the columns)."""
    try:
        toks = MariaDBDialect().tokenize(sql)
    except Exception:  # noqa: BLE001 - sqlglot will report the problem itself
        return sql
    words = words_of(toks)
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

