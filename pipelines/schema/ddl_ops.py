"""The schema statements :mod:`pipelines.schema.ddl` parses, as plain values: one class per
statement (``CreateTable``, ``AlterTable``, ``RenameTables``, ...) and per ALTER TABLE operation
(``AddColumn``, ``ChangeColumn``, ``RenameTo``, ...); :mod:`pipelines.schema.history` applies them."""
from __future__ import annotations

from dataclasses import dataclass

from pipelines.errors import PipelineError
from pipelines.schema.model import ColumnDef, TableSchema


@dataclass(frozen=True)
class TableName:
    db: str
    table: str


@dataclass(frozen=True)
class CreateTable:
    name: TableName
    schema: TableSchema | None  # None with ``like``
    like: TableName | None = None
    if_not_exists: bool = False
    system_versioned: bool = False


@dataclass(frozen=True)
class AlterTable:
    name: TableName
    ops: tuple
    if_exists: bool = False


@dataclass(frozen=True)
class RenameTables:
    pairs: tuple[tuple[TableName, TableName], ...]


@dataclass(frozen=True)
class DropTables:
    names: tuple[TableName, ...]


@dataclass(frozen=True)
class TruncateTable:
    name: TableName


@dataclass(frozen=True)
class CreateDatabase:
    db: str
    charset: str | None


@dataclass(frozen=True)
class DropDatabase:
    db: str


@dataclass(frozen=True)
class CreateIndex:
    name: TableName
    index: str
    columns: tuple[str, ...]
    unique: bool


@dataclass(frozen=True)
class DropIndex:
    name: TableName
    index: str


@dataclass(frozen=True)
class Unparsed:
    """A table statement that could not be understood; ``tables`` are the names it
    appears to touch (may be empty)."""

    reason: str
    tables: tuple[TableName, ...] = ()


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
    name: TableName


class DdlError(PipelineError, ValueError):
    """A DDL statement that cannot be turned into a schema change (the message says why)."""
