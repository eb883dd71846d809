"""The history of every table's schema: versions valid from a ``_seq`` on, built by applying parsed
statements in order (:class:`SchemaHistory`). Pure: no I/O."""
from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from typing import Iterable, Sequence
from pipelines.schema.ddl import (
    AddColumn, AddKey, AlterTable, ChangeColumn, ConvertCharset, CreateDatabase, CreateIndex, CreateTable,
    DdlError, DefaultCharset, DropColumn, DropDatabase, DropIndex, DropIndexOp, DropPrimaryKey, DropTables,
    RenameColumn, RenameTables, RenameTo, TruncateTable, Unparsed, parse_statement,
)
from pipelines.schema.ddl_columns import finish_charset
from pipelines.schema.model import (
    ALTER, CREATE, ColumnDef, DATABASE, DROP, DROP_DATABASE, RENAME_FROM, RENAME_TO, SEED, SchemaVersion,
    TRUNCATE, TableSchema, UNPARSED, UniqueKey, TEXT_TYPES,
)


class _Draft:
    """A mutable copy of one table's schema while an ALTER TABLE applies."""

    def __init__(self, schema: TableSchema):
        self.renamed: list[tuple[str, str]] = []  # (old, new), chained renames collapsed
        self.dropped: set[str] = set()  # lower-case names this ALTER dropped
        self.readded: list[str] = []  # columns it dropped, then added again: new columns, old names
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
            self.place(finish_charset(op.column, self.charset), op.position)
            if op.column.name.lower() in self.dropped:
                self.readded.append(op.column.name)
            if op.key:
                self.set_key(op.key, op.column.name, [op.column.name])
        elif isinstance(op, DropColumn):
            if not self.has(op.name):
                if op.if_exists:
                    return
                self.index(op.name)
            del self.cols[self.index(op.name)]
            self.dropped.add(op.name.lower())
            self.drop_from_keys(op.name)
            self.renamed = [(a, b) for a, b in self.renamed if b.lower() != op.name.lower()]
        elif isinstance(op, ChangeColumn):
            i = self.index(op.old_name)
            old = self.cols[i]
            if op.column.name.lower() != old.name.lower() and self.has(op.column.name):
                raise DdlError(f"column {op.column.name!r} already exists")
            col = finish_charset(op.column, self.charset)
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
            self.cols = [replace(c, charset=op.charset) if c.type in TEXT_TYPES else c for c in self.cols]
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
            # (a column dropped and added again as it was changes the rows, not the schema)
            if (new_schema != cur or d.readded) and not renames:
                add(n.db, n.table, ALTER, new_schema, renamed=d.renamed)
        for r in renames[-1:]:
            if (r.name.db, r.name.table) == (n.db, n.table):
                if new_schema is not None and (new_schema != cur or d.readded):
                    add(n.db, n.table, ALTER, new_schema, renamed=d.renamed)
                continue
            add(n.db, n.table, RENAME_TO, None, peer=r.name)
            add(r.name.db, r.name.table, RENAME_FROM, new_schema,
                None if new_schema is not None else f"renamed from {n.db}.{n.table}, whose schema is unknown",
                peer=n)


@dataclass(frozen=True)
class AlterEffects:
    """What an ALTER TABLE did to the columns beyond what the schemas before and after it show
    (lower-case names): ``dropped``, every column it dropped, some added again; ``readded``, the
    columns it dropped and then added again, which are new columns under old names (the server's
    rows hold their DEFAULT)."""

    dropped: frozenset[str] = frozenset()
    readded: frozenset[str] = frozenset()


def alter_effects(before: TableSchema | None, version: SchemaVersion) -> AlterEffects:
    """:class:`AlterEffects` of the ALTER ``version``, by applying its statement again to the
    schema ``before`` it (nothing when either is unknown, or the statement does not apply).

    >>> t = TableSchema((ColumnDef("id", "INT"), ColumnDef("v", "INT")))
    >>> v = SchemaVersion("d", "t", "09", ALTER, t, "ALTER TABLE t DROP v, ADD v INT")
    >>> sorted(alter_effects(t, v).readded)
    ['v']
    """
    if before is None or version.kind != ALTER or not version.statement:
        return AlterEffects()
    try:
        actions = parse_statement(version.statement, version.db)
    except DdlError:
        return AlterEffects()
    for action in actions:
        if isinstance(action, AlterTable) and (action.name.db, action.name.table) == (version.db, version.table):
            d = _Draft(before)
            try:
                for op in action.ops:
                    if not isinstance(op, RenameTo):
                        d.apply(op)
            except DdlError:
                return AlterEffects()
            return AlterEffects(frozenset(d.dropped), frozenset(n.lower() for n in d.readded))
    return AlterEffects()
