"""The schema model: columns, tables, versions and their kinds, and the type and charset facts the DDL
parser and the resolver share. Plain values only."""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Context


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
        elif self.type in FSP_TYPES:
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


# Decimal arithmetic wide enough for any DECIMAL's digits (MySQL's 65) at any scale: Python's default
# context keeps 28, and refused DECIMAL(38,38)'s 0.999...9.
DECIMAL_CONTEXT = Context(prec=200)

FSP_TYPES = frozenset({"TIME", "DATETIME", "TIMESTAMP"})


TEXT_TYPES = frozenset({"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET"})


BINARY_OF = {"CHAR": "BINARY", "VARCHAR": "VARBINARY", "TINYTEXT": "TINYBLOB", "TEXT": "BLOB",
              "MEDIUMTEXT": "MEDIUMBLOB", "LONGTEXT": "LONGBLOB"}


BINARY_TYPES = frozenset({"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"})


GEOMETRY_TYPES = frozenset({"GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING",
                             "MULTIPOLYGON", "GEOMETRYCOLLECTION"})


MB_MAXLEN = {"binary": 1, "latin1": 1, "ascii": 1, "utf8mb3": 3, "utf8": 3, "utf8mb4": 4, "ucs2": 2,
              "utf16": 4, "utf16le": 4, "utf32": 4, "gbk": 2, "big5": 2, "sjis": 2, "ujis": 3, "euckr": 2}


def charset_of_collation(collation: str) -> str:
    """``utf8mb4_general_ci`` -> ``utf8mb4``; ``binary`` -> ``binary``; ``utf8_bin`` -> ``utf8mb3``."""
    c = collation.lower()
    cs = c.split("_", 1)[0]
    return "utf8mb3" if cs == "utf8" else cs


def norm_charset(cs: str | None) -> str | None:
    if cs is None:
        return None
    cs = cs.lower()
    return "utf8mb3" if cs == "utf8" else cs

