"""A mydumper folder: ``metadata`` (the snapshot's position), ``db-schema-create.sql`` (``CREATE
DATABASE``), ``db.t-schema.sql`` (``CREATE TABLE``) and the data chunks ``db.t.sql``,
``db.t.00000.sql`` or ``db.t.00000.00001.sql``, each plain, ``.gz`` or ``.zst`` (mydumper's
documented layout, "Output Files"). A chunk is SQL: ``/*!40101 SET NAMES binary*/;`` (values are
the columns' own bytes), ``SET TIME_ZONE``, then ``INSERT INTO `t` [(cols)] VALUES (...),\\n(...);``
with strings in double or single quotes; each chunk is one task (they are small, and compressed
ones cannot be split anyway).

The names in file names are mydumper's file-safe spellings; the real names are the ones in
``CREATE DATABASE`` / ``CREATE TABLE``. Files this reader does not load (views, triggers, routines:
``-schema-view``, ``-schema-triggers``, ``-schema-post``; CSV and ``LOAD DATA`` chunks) are listed
in :attr:`MydumperFolder.skipped` (:func:`not_loaded` counts their statements; CSV and ``LOAD DATA``
chunks are refused there, being rows that would not be loaded); a view's placeholder ``-schema.sql``
(beside its ``-schema-view.sql``) is not a table. A folder whose ``metadata`` is still
``metadata.partial`` is a dump that did not finish, and is refused (:func:`check_finished`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from collections import Counter
from typing import Iterator

from pipelines.schema.model import TableSchema

from .tablemap import create_table
from .errors import CorruptDump, DumpError, NoPosition, UnsupportedDump
from .position import SnapshotPosition, mydumper_position
from .source import DumpFile
from .reader import DumpReading
from .session import DumpState
from .statements import Statement, iter_statements, iter_stream

_COMPRESSED = re.compile(r"\.(?:gz|zst)\Z")
_DATA = re.compile(r"(?P<prefix>.+?)(?:\.(?P<chunk>\d{5,})(?:\.(?P<part>\d{5,}))?)?\.sql\Z")
_SCHEMA = re.compile(r"(?P<prefix>.+)-schema\.sql\Z")
_DB_SCHEMA = re.compile(r"(?P<db>.+)-schema-create\.sql\Z")
_VIEW = re.compile(r"(?P<prefix>.+)-schema-view\.sql\Z")
_NOT_SQL = re.compile(r".*\.(?:dat|csv)\Z")  # --csv / --load-data chunks
_SKIPPED = re.compile(r".*(?:-schema-(?:view|triggers|post|sequence)\.sql|-schema-create-tablespace\.sql|\.dat|\.csv"
                      r"|-checksum|-metadata)\Z")


@dataclass(frozen=True)
class MydumperTable:
    """One dumped table: real names, schema, the session its CREATE TABLE ran in, and its data
    chunks in order."""

    db: str
    table: str
    schema: TableSchema
    schema_path: str
    chunks: tuple[str, ...]


@dataclass(frozen=True)
class MydumperFolder:
    path: str
    metadata: str | None  # the metadata file's text (None: no metadata file)
    tables: tuple[MydumperTable, ...]
    skipped: tuple[str, ...]
    flavor: str | None = None  # the server's, from the metadata's GTID set (None: unknown)

    def position(self) -> SnapshotPosition:
        """The position the ``metadata`` file records (:class:`NoPosition` without one)."""
        if self.metadata is None:
            raise NoPosition(file=os.path.join(self.path, "metadata"))
        return mydumper_position(self.metadata, os.path.join(self.path, "metadata"))


def _read_text(path: str) -> bytes:
    return b"".join(DumpFile(path).chunks())


def _first(path: str, kind: str, state: DumpState) -> Statement:
    for st in iter_statements(_read_text(path), state=state, name=os.path.basename(path)):
        if st.kind == kind:
            return st
    raise CorruptDump(f"no {kind.replace('_', ' ').upper()} statement in the file", file=os.path.basename(path),
                      offset=0)


def is_mydumper_folder(path: str) -> bool:
    """Is the folder at ``path`` mydumper's output (it holds ``metadata`` or ``metadata.partial``)?"""
    return any(os.path.isfile(os.path.join(path, m)) for m in ("metadata", "metadata.partial"))


def check_finished(path: str) -> None:
    """Refuse a mydumper folder whose ``metadata`` is still ``metadata.partial`` (mydumper renames
    it when the dump is done): a dump that did not finish."""
    if not os.path.exists(os.path.join(path, "metadata")) and os.path.exists(os.path.join(path, "metadata.partial")):
        raise DumpError("mydumper did not finish this dump (metadata.partial, no metadata)",
                        file=os.path.join(path, "metadata.partial"))


def read_mydumper_folder(path: str, flavor: str | None = None) -> MydumperFolder:
    """The tables, chunks and metadata of a mydumper output folder. ``flavor`` (``mariadb`` or
    ``mysql``: the server the dump came from) defaults to what the metadata's GTID set says."""
    check_finished(path)
    names = sorted(os.listdir(path))
    metadata = None
    if "metadata" in names:
        with open(os.path.join(path, "metadata"), encoding="utf-8", errors="replace") as f:
            metadata = f.read()
    dbs: dict[str, str] = {}  # file prefix -> real database name
    schemas: dict[str, str] = {}  # file prefix db.t -> schema file
    data: list[tuple[str, str]] = []
    skipped = []
    for name in names:
        if name in ("metadata", "metadata.partial"):
            continue
        plain = _COMPRESSED.sub("", name)
        if _SKIPPED.match(plain):
            skipped.append(name)
        elif (m := _DB_SCHEMA.match(plain)) is not None:
            st = _first(os.path.join(path, name), "create_database", DumpState())
            dbs[m.group("db")] = st.name
        elif (m := _SCHEMA.match(plain)) is not None:
            schemas[m.group("prefix")] = name
        elif (m := _DATA.match(plain)) is not None:
            data.append((m.group("prefix"), name))
        else:
            skipped.append(name)
    if flavor is None and metadata:
        try:
            flavor = mydumper_position(metadata).gtid_flavor
        except DumpError:
            flavor = None
    views = {m.group("prefix") for n in names if (m := _VIEW.match(_COMPRESSED.sub("", n)))}
    skipped += [schemas.pop(v) for v in sorted(views) if v in schemas]  # a view's placeholder table
    skipped.sort()
    tables = []
    for prefix, schema_file in sorted(schemas.items()):
        db_file = next((d for d in sorted(dbs, key=len, reverse=True) if prefix.startswith(d + ".")), None)
        if db_file is None:
            db_file, _, _ = prefix.partition(".")
        db = dbs.get(db_file, db_file)
        state = DumpState(db=db, flavor=flavor)
        schema_path = os.path.join(path, schema_file)
        st = _first(schema_path, "create_table", state)
        found = create_table(st.raw.decode("utf-8", "replace"), db, state.db_charsets)
        if isinstance(found, str):
            raise CorruptDump(f"CREATE TABLE not understood: {found}", file=schema_file, offset=st.offset)
        _, table, schema = found
        chunks = [name for p, name in data if p == prefix]
        chunks.sort(key=_chunk_order)
        tables.append(MydumperTable(db, table, schema, schema_path,
                                    tuple(os.path.join(path, c) for c in chunks)))
    claimed = {c for t in tables for c in t.chunks}
    orphans = [name for _, name in data if os.path.join(path, name) not in claimed]
    if orphans:
        raise CorruptDump(f"data files without a -schema.sql for their table: {', '.join(orphans)}",
                          file=os.path.join(path, orphans[0]), offset=0)
    return MydumperFolder(path, metadata, tuple(tables), tuple(skipped), flavor)


def not_loaded(folder: MydumperFolder) -> Counter:
    """The statements of the folder's skipped SQL files (views, triggers, routines...), counted by
    kind as :attr:`DumpReading.skipped` counts a dump's. A CSV or ``LOAD DATA`` chunk (``.csv``,
    ``.dat``) holds rows this reader does not load: refused, naming the file."""
    out: Counter = Counter()
    for name in folder.skipped:
        plain = _COMPRESSED.sub("", name)
        path = os.path.join(folder.path, name)
        if _NOT_SQL.match(plain):
            raise UnsupportedDump("a CSV / LOAD DATA chunk (mydumper --csv or --load-data): only SQL INSERT chunks "
                                  "are loaded; dump again without those options", file=path, offset=0)
        if not plain.endswith(".sql") or _SCHEMA.match(plain):  # (a view's placeholder table: the view counts)
            continue
        reading = DumpReading(DumpState(flavor=folder.flavor), name=name)
        for _row in reading.rows(iter_statements(_read_text(path), state=reading.state, name=name), cells=False):
            pass
        out.update(reading.skipped)
    return out


def _chunk_order(name: str) -> tuple:
    m = _DATA.match(_COMPRESSED.sub("", name))
    return (int(m.group("chunk") or -1), int(m.group("part") or -1), name)


def iter_chunk(table: MydumperTable, path: str, flavor: str | None = None,
               state: DumpState | None = None) -> Iterator[tuple[Statement, DumpState]]:
    """The INSERT statements of one data chunk with the session state each runs in (``SET NAMES``
    and ``SET TIME_ZONE`` of the chunk's own header; ``state``, the one to keep it in, defaults to
    a new one for the table's database). An INSERT into another table than the chunk's is refused."""
    state = state if state is not None else DumpState(db=table.db, flavor=flavor)
    dump = DumpFile(path)
    for st in iter_stream(dump.chunks(), state, name=dump.name):
        if st.kind != "insert":
            continue
        if st.insert.table != table.table or (st.insert.db not in (None, table.db)):
            raise CorruptDump(f"the chunk of {table.db}.{table.table} inserts into "
                              f"{st.insert.db + '.' if st.insert.db else ''}{st.insert.table}", file=dump.name,
                              offset=st.offset)
        yield st, state
