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
:data:`pipelines.state.SCHEMA_HISTORY_COLUMNS`); each run continues from the persisted state and
appends only the versions of DDL statements it has not seen, so re-runs agree.

Pure part (no Spark), for tests and tools::

    >>> h = SchemaHistory()
    >>> _ = h.apply_statement("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)", "shop", "0001")
    >>> _ = h.apply_statement("ALTER TABLE t ADD COLUMN w INT AFTER id", "shop", "0002")
    >>> [c.name for c in h.at("shop", "t", "0003").columns]
    ['id', 'w', 'v']
    >>> [c.name for c in h.at("shop", "t", "0001x").columns]
    ['id', 'v']

Modules (each imports only those above it; none imports Spark but ``typemap``):

* ``model``    columns, tables, versions and their kinds; type and charset facts (plain values)
* ``ddl``      DDL text to statement objects with sqlglot (pure)
* ``history``  :class:`SchemaHistory`: versions per table from statements in order (pure)
* ``seeds``    ``SHOW CREATE TABLE`` seed folders (reads files)
* ``resolve``  row images to a schema: names, types, keys, value fixes (pure)
* ``store``    ``_pipeline/schema_history`` (layout: :mod:`pipelines.state`): rows <-> versions, the run's update (Delta I/O)
* ``typemap``  MySQL types to silver's Spark types: the one table of type rules (imports pyspark;
  not imported here)
"""
from __future__ import annotations

from pipelines.schema.model import (
    ALTER, CREATE, ColumnDef, DATABASE, DROP, DROP_DATABASE, RENAME_FROM, RENAME_TO, RESET_KINDS, SEED,
    SchemaVersion, TRUNCATE, TableSchema, UNPARSED, UniqueKey, charset_of_collation,
)
from pipelines.schema.ddl import (
    AddColumn, AddKey, AlterTable, ChangeColumn, ConvertCharset, CreateDatabase, CreateIndex, CreateTable,
    DdlError, DefaultCharset, DropColumn, DropDatabase, DropIndex, DropIndexOp, DropPrimaryKey, DropTables,
    RenameColumn, RenameTables, RenameTo, TruncateTable, Unparsed, parse_statement, statement_kind,
    strip_comments,
)
from pipelines.schema.history import (
    AlterEffects, SchemaHistory, alter_effects,
)
from pipelines.schema.seeds import (
    load_seeds, read_seed_folder,
)
from pipelines.schema.resolve import (
    BinlogType, FIX_DECODE, FIX_ENUM, FIX_INET4, FIX_INET6, FIX_SET, FIX_UNSIGNED, FIX_UUID, ImageColumn,
    KeyConfigError, Resolution, apply_fix, choose_keys, compatible, inet4_text, inet6_text, parse_binlog_type,
    resolve_columns, sorted_shape, spec_from_binlog, spec_from_ddl, uuid_text,
)
from pipelines.schema.store import (
    build_history,
    rows_to_versions, update_history, versions_to_rows,
)

__all__ = [
    "ALTER", "AddColumn", "AlterEffects", "AddKey", "AlterTable", "BinlogType", "CREATE", "ChangeColumn",
    "ColumnDef", "ConvertCharset", "CreateDatabase", "CreateIndex", "CreateTable", "DATABASE", "DROP",
    "DROP_DATABASE", "DdlError", "DefaultCharset", "DropColumn", "DropDatabase", "DropIndex", "DropIndexOp",
    "DropPrimaryKey", "DropTables", "FIX_DECODE", "FIX_ENUM", "FIX_INET4", "FIX_INET6", "FIX_SET",
    "FIX_UNSIGNED", "FIX_UUID", "ImageColumn", "KeyConfigError", "RENAME_FROM", "RENAME_TO",
    "RESET_KINDS", "RenameColumn", "RenameTables", "RenameTo", "Resolution",
    "SEED", "SchemaHistory", "SchemaVersion", "TRUNCATE",
    "TableSchema", "TruncateTable", "UNPARSED", "UniqueKey", "Unparsed", "alter_effects", "apply_fix", "build_history",
    "charset_of_collation", "choose_keys", "compatible", "inet4_text", "inet6_text", "load_seeds",
    "parse_binlog_type", "parse_statement", "read_seed_folder", "resolve_columns", "rows_to_versions",
    "sorted_shape", "spec_from_binlog", "spec_from_ddl", "statement_kind", "strip_comments", "update_history",
    "uuid_text", "versions_to_rows",
]
