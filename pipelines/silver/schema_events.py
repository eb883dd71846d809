"""What schema events do to a silver table: the statements the server applied to the rows it
already had, without logging them (:func:`apply_events`: CREATE, DROP, TRUNCATE, RENAME TABLE
copies, ALTER TABLE's renamed, added, retyped and re-added columns), the DEFAULTs those rows take,
and the prefix of silver's own columns when the configuration changes it. The silver step
(:mod:`pipelines.silver.step`) calls these per table, once per event, before its changes."""
from __future__ import annotations

import re
from dataclasses import replace

from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines import delta_io
from pipelines.config import PipelineConfig
from pipelines.paths import silver_table_path
from pipelines.schema import (ALTER, CREATE, DROP, DROP_DATABASE, RENAME_FROM, RENAME_TO, TRUNCATE, Resolution,
                              SchemaHistory, SchemaVersion, alter_effects)
from pipelines.schema import resolve as schema_resolve
from pipelines.schema.typemap import type_rule
from pipelines.silver import properties as silver_properties
from pipelines.silver.arrow_typing import typed_row
from pipelines.silver.columns import OwnColumns, own_columns_of, prefix_renames
from pipelines.silver.merge import check_reserved, silver_table_schema
from pipelines.silver.watermarks import read_watermark, watermark_metadata
from pipelines.silver.typed_values import DATE_TEXT, INT_SILVER, NotCanonical
from pipelines.logs import get_logger

_log = get_logger(__name__)

_RESETS = frozenset({CREATE, DROP, TRUNCATE, RENAME_TO, DROP_DATABASE})


def apply_events(spark, cfg: PipelineConfig, seg, path: str, resolution: Resolution | None,
                 version: SchemaVersion | None, history: SchemaHistory) -> str | None:
    """Empty / replace / copy / alter the silver table for the schema events at ``seg.start``
    (``seg``: a :class:`~pipelines.silver.segments.SegmentPlan`, with ``db``, ``table``, ``start`` and ``events``),
    once; returns ``"reset"``, ``"copy"``, ``"create"``, ``"alter"`` (what was written) or None.
    What it writes records ``seg.start`` as the table's watermark: a run that reads the table
    afterwards knows these events are done."""
    backend = cfg.delta.backend
    table = delta_io.open_table(path, backend, spark)
    done = delta_io.CommitInfo(metadata=watermark_metadata(seg.start))
    kinds = {e.kind for e in seg.events}
    exists = table.exists()
    mark = read_watermark(path, spark=spark, backend=backend) if exists else None
    if mark is not None and mark >= seg.start:
        return None  # silver already holds changes from after these events: done in an earlier run
    scd2 = cfg.is_scd2(seg.db, seg.table)
    copy_from = next((e for e in seg.events if e.kind == RENAME_FROM), None)
    if copy_from is not None and copy_from.peer_db is not None:
        source = silver_table_path(cfg.warehouse, copy_from.peer_db, copy_from.peer_table)
        peer = delta_io.open_table(source, backend, spark)
        if peer.exists():
            rows = peer.read_df()
            if not exists:  # created as silver creates its tables: column mapping for names that
                # need it (a space, a comma), deletion vectors on delta-spark; then the rows
                table.create(rows.schema, silver_properties.for_new_table(cfg.silver, table.backend.name))
            table.overwrite(rows, done, overwrite_schema=exists)
            return "copy"
    if CREATE in kinds:
        specs = resolution.specs if resolution is not None and resolution.specs else _ddl_specs(version)
        if specs and (exists or resolution is None):
            # replace an older table of that name (its schema too; its properties stay); show a new
            # empty table as empty, created as apply_changes creates one (deletion vectors)
            schema = silver_table_schema(specs, scd2=scd2, own=OwnColumns(cfg.silver.prefix_for(seg.db, seg.table)))
            if not exists:
                table.create(schema, silver_properties.for_new_table(cfg.silver, table.backend.name))
                return "create"
            current = table.schema()
            # (the same schema, e.g. the CREATE again after a crash: not reshaped, which delta-rs
            # cannot do to a table with column mapping)
            table.overwrite(spark.createDataFrame([], schema), done,
                            overwrite_schema=_shape_of(current) != _shape_of(schema))
            return "reset"
        if not exists:
            return None  # apply_changes creates it with the first rows
    if exists and kinds & _RESETS:
        table.overwrite(spark.createDataFrame([], table.schema()), done)
        return "reset"
    alters = [e for e in seg.events if e.kind == ALTER]
    if exists and alters:
        before = history.schema_before(seg.db, seg.table, seg.start)
        if _alter_silver(spark, cfg, table, before, alters[-1], done):
            return "alter"
    return None


def give_own_columns_their_prefix(spark, cfg: PipelineConfig, seg, path: str) -> None:
    """Rename an existing silver table's own columns to the prefix the configuration gives the
    table, when they have another (the setting came after the table: a source column took one of
    their names). One rewrite of the table, once."""
    table = delta_io.open_table(path, cfg.delta.backend, spark)
    if not table.exists():
        return
    renames = prefix_renames(table.schema().fieldNames(), cfg.silver.prefix_for(seg.db, seg.table))
    if renames:
        df = table.read_df().withColumnsRenamed(renames).localCheckpoint(eager=True)
        table.overwrite(df, overwrite_schema=True)


def _shape_of(schema: T.StructType) -> list[tuple]:
    """A table schema's names and types (not nullability or field metadata): what an overwrite
    must reshape when they differ."""
    return [(f.name, f.dataType) for f in schema.fields]


def _alter_silver(spark, cfg: PipelineConfig, table: delta_io.Table, before, version: SchemaVersion,
                  commit: delta_io.CommitInfo) -> bool:
    """What ``ALTER TABLE`` did to the rows the server already had, done to silver too (the
    server logs none of it): a renamed column keeps its values under the new name; an added
    column gets its DEFAULT (MySQL's implicit default when NOT NULL without one; expression
    defaults such as ``CURRENT_TIMESTAMP`` stay NULL); a column with a new type is cast. True
    when silver was rewritten."""
    from pipelines.schema import typemap

    new = version.schema
    if before is None or new is None:
        return False
    current = table.schema()
    # a source column under one of silver's own names: an error that names the setting, before
    # the ALTER's DEFAULT is written over silver's own column of that name
    check_reserved([c.name for c in new.columns],
                    own_columns_of(current.fieldNames(), cfg.silver.prefix_for(version.db, version.table)))
    have = {f.name.lower(): f for f in current.fields}
    specs = {c.name.lower(): schema_resolve.spec_from_ddl(c, i) for i, c in enumerate(new.columns)}
    types = {n: typemap.spark_type(sp) for n, sp in specs.items()}
    renamed = {old.lower(): name for old, name in version.renamed}
    effects = alter_effects(before, version)  # (DROP COLUMN v, ADD COLUMN v in one statement)
    known = {c.name.lower() for c in before.columns} | {n.lower() for n in renamed.values()}
    added = [c for c in new.columns
             if (c.name.lower() not in known or c.name.lower() in effects.readded) and not c.generated]
    values = default_values(added, {c.name.lower(): specs[c.name.lower()] for c in added})
    # a column added under the name of one dropped earlier: silver still holds the dropped one's
    # values (it keeps dropped columns), and the server's rows have the new column's DEFAULT
    again = {c.name.lower(): c.name for c in added if c.name.lower() in have}
    # a column renamed to the name of one this ALTER dropped takes that name's place
    replaced = {t.lower() for t in renamed.values() if t.lower() in have and t.lower() in effects.dropped}
    cols, changed = [], False
    for f in current.fields:
        q = F.col(delta_io.quote_ident(f.name))
        target = renamed.get(f.name.lower())
        if f.name.lower() in again:
            cols.append(F.lit(values.get(again[f.name.lower()])).cast(types[f.name.lower()]).alias(f.name))
            changed = True
        elif f.name.lower() in replaced and target is None:
            changed = True  # (its values are gone: the renamed column's take its place)
        elif target is not None and (target.lower() not in have or target.lower() in replaced) \
                and target.lower() in types:
            cols.append(q.try_cast(types[target.lower()]).alias(target))
            changed = True
        elif f.name.lower() in types and types[f.name.lower()] != f.dataType and f.name.lower() not in renamed:
            cols.append(q.try_cast(types[f.name.lower()]).alias(f.name))
            changed = True
        else:
            cols.append(q)
    for c in added:
        if c.name.lower() not in have and values.get(c.name) is not None:
            cols.append(F.lit(values[c.name]).cast(types[c.name.lower()]).alias(c.name))
            changed = True
    if not changed:
        return False
    df = table.read_df().select(*cols).localCheckpoint(eager=True)
    # (only values changed, e.g. a column added again: the schema stays, which delta-rs can also
    # write to a table with column mapping; it cannot change such a table's schema)
    table.overwrite(df, commit, overwrite_schema=_shape_of(df.schema) != _shape_of(current))
    return True


_IMPLICIT_DEFAULTS = {  # MySQL's value for existing rows of a NOT NULL column added without DEFAULT
    **{t: "0" for t in ("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "DECIMAL", "FLOAT", "DOUBLE", "BIT")},
    **{t: "" for t in ("CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "SET", "BINARY",
                       "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB")},
    "TIME": "00:00:00",
}


def default_cells(columns, specs) -> tuple[list[tuple], list]:
    """The DEFAULTs of ``columns`` as one image's cells ``(idx, name, type, text, bin)`` and the
    specs that type them (``ordinal``: the cell's ``idx``); a column without a usable default has
    no cell. MySQL's implicit default where a NOT NULL column declares none."""
    cells, use = [], []
    for c in columns:
        text = c.default
        if text is None and not c.nullable:
            text = c.values[0] if c.type == "ENUM" and c.values else _IMPLICIT_DEFAULTS.get(c.type)
        if text is None:
            continue
        binary = c.type in ("BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB")
        cells.append((len(use), c.name, c.type, None if binary else text, text.encode("utf-8") if binary else None))
        use.append(replace(specs[c.name.lower()], ordinal=len(use)))
    return cells, use


def default_values(columns, specs) -> dict:
    """Silver values of the DEFAULTs of ``columns`` (:func:`default_cells`, typed as bronze's
    cells are: :func:`pipelines.silver.arrow_typing.typed_row`), by column name; None where there
    is no usable default. A DDL's text is as its statement wrote it, not the canonical text the
    decoder writes: a date for a DATETIME, a sign or ``.0`` on a number, spaces, are taken as
    the server takes them (:func:`_canonical_default`); a text that still does not convert is no
    usable default, and says so."""
    cells, use = default_cells(columns, specs)
    out = {}
    for (idx, name, kind, text, data), spec in zip(cells, use):
        cell = {"idx": idx, "name": name, "type": kind, "text": _canonical_default(spec, text), "bin": data}
        try:
            out[spec.name] = typed_row([spec], [cell])[0][0]
        except NotCanonical as e:
            _log.warning(f"silver: column {spec.name!r}: its DEFAULT {text!r} is not taken ({e})")
            out[spec.name] = None
    return out


_NUMBER = re.compile(r"\s*\+?(-?[0-9]+)(?:\.0*)?\s*\Z")


def _canonical_default(spec, text: str | None) -> str | None:
    """A DDL DEFAULT's text as the decoder would write the value: a DATETIME/TIMESTAMP given as a
    date takes midnight; an integer loses its sign ``+``, a ``.0`` fraction and spaces; a decimal
    or float its sign ``+`` and spaces."""
    if text is None:
        return None
    kind = type_rule(spec)[0]
    if kind in ("datetime", "timestamp") and DATE_TEXT.match(text.strip()):
        return text.strip() + " 00:00:00"
    if kind in INT_SILVER or kind in ("year", "bit"):
        whole = _NUMBER.match(text)
        return whole.group(1) if whole else text
    if kind in ("decimal", "float", "double"):
        return text.strip().removeprefix("+")
    return text


def retype(spark, cfg: PipelineConfig, path: str, specs) -> list[str]:
    """``ALTER TABLE ... MODIFY/CHANGE`` gave columns another silver type: rewrite the silver
    table with the new types (values cast the way Spark casts them; the server converted its
    rows without logging them). Returns ``["col: old -> new", ...]``."""
    from pipelines.schema import typemap

    table = delta_io.open_table(path, cfg.delta.backend, spark)
    if not table.exists():
        return []
    current = table.schema()
    wanted = {f.name.lower(): f.dataType for f in typemap.silver_schema(specs).fields}
    changed = [f for f in current.fields if f.name.lower() in wanted and wanted[f.name.lower()] != f.dataType]
    if not changed:
        return []
    new_types = {f.name: wanted[f.name.lower()] for f in changed}
    cols = [F.col(delta_io.quote_ident(f.name)).try_cast(new_types[f.name]).alias(f.name) if f.name in new_types
            else F.col(delta_io.quote_ident(f.name)) for f in current.fields]
    table.overwrite(table.read_df().select(*cols).localCheckpoint(eager=True), overwrite_schema=True)
    return [f"{f.name}: {f.dataType.simpleString()} -> {new_types[f.name].simpleString()}" for f in changed]


def _ddl_specs(version: SchemaVersion | None) -> tuple:
    if version is None or version.schema is None:
        return ()
    return tuple(schema_resolve.spec_from_ddl(c, i) for i, c in enumerate(version.schema.columns))


def insert_defaults(version: SchemaVersion | None, specs) -> dict:
    """Spec name -> the silver value of the column's DDL ``DEFAULT`` (literal defaults only; MySQL's
    implicit one for NOT NULL columns without a DEFAULT): what an INSERT whose partial image
    (binlog_row_image=MINIMAL) leaves out has on the server. Empty when the DDL is unknown."""
    if version is None or version.schema is None:
        return {}
    by_name = {c.name.lower(): c for c in version.schema.columns}
    columns = [by_name[s.name.lower()] for s in specs if s.name.lower() in by_name]
    values = default_values(columns, {s.name.lower(): s for s in specs})
    names = {s.name.lower(): s.name for s in specs}
    return {names[n.lower()]: v for n, v in values.items() if v is not None}
