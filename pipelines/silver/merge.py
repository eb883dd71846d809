"""Silver: apply a batch of typed row changes to ``<warehouse>/silver/<database>/<table>``.

This module owns MERGE.  The "which change wins" logic is written once, as Spark
``DataFrame -> DataFrame`` transforms; only the final write differs per backend
(:meth:`pipelines.delta_io.Table.merge`: delta-spark ``DeltaTable.merge`` or delta-rs ``merge``, with the
same ON predicate and WHEN clauses), so both backends produce the same table.

The ``changes_df`` contract (one source table per call; :func:`changes_from_bronze` builds it)
-------------------------------------------------------------------------------------------
=============  =====================================================================
``_seq``       STRING, the bronze total-order key (fixed-width digits), unique per change
``op``         STRING, ``c`` (insert) | ``u`` (update) | ``d`` (delete)
``after``      STRUCT with one typed field per spec (:func:`pipelines.silver.spark_typing.typed_columns`);
               NULL for deletes
``before``     STRUCT of typed fields, NULL for inserts; needs the key fields (all fields for
               tables without a key); used for deletes and key-changing updates
``_commit_ts`` TIMESTAMP, optional (required for SCD2): the commit time of the change
``_zero_dates`` INT, optional: zero dates nulled by typemap, summed into the stats
``_present``   STRUCT of BOOLEAN, optional: one flag per spec, true where the after image
               carries the column (``binlog_row_image`` MINIMAL/NOBLOB log only some); absent
               or NULL: the after image is whole.  Inserts are always whole rows.
=============  =====================================================================

The silver table
----------------
Source columns keep their names and silver types (:func:`pipelines.schema.typemap.silver_schema`);
pipeline columns start with ``_``: ``_seq`` (the change that wrote the row), ``_op``,
``_commit_ts``, ``_deleted`` (always present; true only for soft-delete tombstones), and with
SCD2 ``_valid_from``, ``_valid_to``, ``_is_current``. A source table with columns of those names
(legal in MySQL) gets another prefix for silver's own columns from the configuration
(``silver.table_column_prefix`` / ``silver.column_prefix``, :class:`OwnColumns`); the silver
step renames an existing table's own columns when that setting gives it another prefix
(:func:`pipelines.silver.columns.prefix_renames`).

Rules
-----
* Tables with a key: every change becomes events keyed by key: ``c`` -> upsert(after);
  ``d`` -> delete(before); ``u`` -> upsert(after), plus delete(before) when the key changed.  Per
  key only the latest event (by ``_seq``) is applied, which also gets key-change chains
  (k1->k2->k3) and swaps through a temporary key right: the last event touching a key decides
  what the key holds.
* An event is applied only when its ``_seq`` is newer than the row's stored ``_seq`` (MERGE
  conditions), so applying the same batch twice changes nothing.
* Deletes are hard by default.  ``delete_mode="soft"`` keeps the row with ``_deleted = true``
  and the delete's ``_seq``/``_op``/``_commit_ts``; a delete of a key silver does not hold leaves a
  tombstone built from the before image.  Soft tombstones make replays of older changes harmless
  row by row.
* Table watermark: every silver commit records the largest ``_seq`` it applied in the commit's
  user metadata (``{"binlog_delta.silver_watermark": "<_seq>"}``); the next call only considers
  changes above it.  This is what keeps a hard-deleted row from being resurrected by a replayed
  older insert, and what makes keyless tables idempotent.  Batches of one table must therefore be
  applied in ``_seq`` order (the bronze watermark does this upstream).  Optionally
  ``txn_app_id``/``txn_version`` add a Delta transaction identifier to the commit and skip the
  batch when the table already has that version.
* Partial row images (``_present``, tables with a key, SCD2 too): an update changes only the
  columns its after image carries.  Per key, in ``_seq`` order, a missing column takes the value
  the row had just before the change: from the latest earlier change of the batch that carries
  it (an insert carries all), else from silver's stored row, else NULL (a row silver never saw).
  A key-changing update brings the other columns along from its old key.  The result is a
  whole row per event, so the ``_seq`` rules above (and SCD2 versions) apply unchanged
  (:func:`fill_partial`).  In a batch with partial images, a silver column the specs lack keeps
  its stored value on update (it may just not have been logged), unlike the DROP COLUMN rule
  below.  A table without a key cannot take partial images (ValueError).
* Partial JSON (MySQL 8 ``binlog_row_value_options=PARTIAL_JSON``): an update whose after image
  logs a JSON column as diffs (bronze marks the cell, :data:`~pipelines.bronze.schema.PARTIAL_JSON_MARK`)
  gets the whole document: per key, in ``_seq`` order, the diffs are applied to the document the
  row had just before (an earlier change of the batch, diffs included, else silver's stored row),
  as MySQL applies them (:func:`fold_json_diffs`).  A document silver never saw (a row it never
  held), or one the diffs do not fit, stays NULL, like any column a partial image lacks.
* Tables without a key (``keys=None``): rows are a multiset identified by their values; each silver
  row's ``_seq`` is the change that inserted it (its identity).  ``c`` adds one row, ``d`` removes
  exactly one row with the before image's values (the oldest copy), ``u`` does both.  Per batch,
  per distinct value: copies = silver's copies + the batch's inserts; ``n_delete`` of them go, the
  newest survive.  A delete that finds no copy is counted in ``missing_deletes`` (never silent).
  Soft mode flags the removed copy (``_deleted``, ``_op = 'd'``, its ``_seq`` kept as identity).
  Known limit: rows written before an ADD COLUMN hold NULL there, so a later delete whose before
  image has a non-NULL default in that column finds no copy (counted in ``missing_deletes``).
* ADD COLUMN: specs with a new column add it to the table (older rows NULL).  DROP COLUMN: a
  table column that is no longer in the specs is kept; rows written after the drop (inserted or
  updated) have NULL there.  A column whose type changed raises :class:`SilverSchemaError`.
* SCD2 (``scd2=True``, tables with a key): the silver table itself keeps every version.  Each
  upsert event (all of them, not only the latest per key) becomes a version valid from its
  ``_commit_ts`` to the next event's ``_commit_ts`` of the same key (``_valid_to`` NULL and
  ``_is_current`` true for the last); the key's current version in silver is closed at the first
  new event.  A delete closes the current version; in soft mode a tombstone version
  (``_deleted``) follows.  Binlog commit times have one-second resolution, so versions can share a
  ``_valid_from``; ``_seq`` orders them.
"""
from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, replace

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.bronze.schema import OPS
from pipelines import delta_io
from pipelines.schema.typemap import ZERO_DATES_COL, ColumnSpec, silver_schema
from pipelines.silver.changes import struct_fields
from pipelines.silver.columns import (CHANGE_COMMIT_TS, CHANGE_SEQ, DEFAULT_OWN, DEFAULT_PREFIX, DELETE_MODES, DIFFS,
                                      OwnColumns, PREFIX_SETTINGS, PRESENT, SEQ, SilverSchemaError, WORK,
                                      own_columns_of, working_changes)
from pipelines.silver.plan import plan_keyed, plan_keyless, plan_scd2
from pipelines.silver import ranges
from pipelines.silver.watermarks import read_watermark, watermark_metadata


@dataclass(frozen=True)
class ApplyStats:
    """What one :func:`apply_changes` call did.

    ``inserted``/``updated``/``deleted`` count silver rows: with SCD2 ``inserted`` is new versions,
    ``updated`` versions closed, ``deleted`` delete events; soft deletes count as ``deleted``.
    ``unchanged``: latest events that changed nothing (silver already newer, or a hard delete of
    a key silver does not hold).  ``missing_deletes``: keyless deletes that found no copy.
    """

    changes: int = 0
    skipped_by_watermark: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    missing_deletes: int = 0
    zero_dates_nulled: int = 0
    columns_added: tuple[str, ...] = ()
    watermark: str | None = None
    committed: bool = False
    skipped_by_txn: bool = False
    backend: str = ""
    table_path: str = ""



# ---------------------------------------------------------------------------------------------
# checks and schema


def silver_table_schema(specs: Sequence[ColumnSpec], *, scd2: bool = False,
                        own: OwnColumns = DEFAULT_OWN) -> T.StructType:
    """The schema of a new silver table: source columns, then the pipeline columns.

    >>> silver_table_schema([ColumnSpec("id", "int")]).fieldNames()
    ['id', '_seq', '_op', '_commit_ts', '_deleted']
    >>> silver_table_schema([ColumnSpec("_seq", "int")], own=OwnColumns("_cdc_")).fieldNames()[:2]
    ['_seq', '_cdc_seq']
    """
    values = silver_schema(specs)
    check_reserved([f.name for f in values.fields], own)
    return T.StructType(values.fields + own.fields(scd2))


def check_reserved(names: Sequence[str], own: OwnColumns = DEFAULT_OWN) -> None:
    reserved = {r.lower() for r in own.names(scd2=True)}
    clash = [n for n in names if n.lower() in reserved]
    internal = [n for n in names if n.lower().startswith(WORK)]
    if clash:
        raise SilverSchemaError(
            f"source columns {clash} collide with silver's own columns {own.names(scd2=True)}: give this "
            f"table's own columns another prefix than {own.prefix!r} with {PREFIX_SETTINGS}, "
            f"e.g. '_cdc_'")
    if internal:
        raise SilverSchemaError(f"source columns {internal} start with {WORK!r}, which silver keeps for its "
                                "working columns")


def resolve_keys(keys: Sequence[str] | None, specs: Sequence[ColumnSpec]) -> list[str] | None:
    if keys is None:
        return None
    if isinstance(keys, str) or not keys:
        raise ValueError(f"keys must be a non-empty list of column names or None, got {keys!r}")
    by_lower = {s.name.lower(): s.name for s in specs}
    unknown = [k for k in keys if k.lower() not in by_lower]
    if unknown:
        raise SilverSchemaError(f"key columns {unknown} are not in the specs {[s.name for s in specs]}")
    resolved = [by_lower[k.lower()] for k in keys]
    if len(set(resolved)) != len(resolved):
        raise ValueError(f"duplicate key columns: {keys}")
    return resolved


def _check_changes(
    changes_df: DataFrame, specs: Sequence[ColumnSpec], keys: list[str] | None, scd2: bool
) -> None:
    problems = []
    required = {CHANGE_SEQ: T.StringType(), "op": T.StringType()}
    for name, dt in required.items():
        if name not in changes_df.columns:
            problems.append(f"missing column {name!r}")
        elif changes_df.schema[name].dataType != dt:
            problems.append(f"{name!r} must be {dt.simpleString()}, is {changes_df.schema[name].dataType.simpleString()}")
    if scd2 and CHANGE_COMMIT_TS not in changes_df.columns:
        problems.append(f"scd2 needs column {CHANGE_COMMIT_TS!r}")
    expected = {f.name: f.dataType for f in silver_schema(specs).fields}
    for image, needed in (("after", list(expected)), ("before", keys if keys is not None else list(expected))):
        if image not in changes_df.columns:
            problems.append(f"missing column {image!r}")
            continue
        dt = changes_df.schema[image].dataType
        if not isinstance(dt, T.StructType):
            problems.append(f"{image!r} must be a STRUCT of typed columns, is {dt.simpleString()}")
            continue
        have = {f.name: f.dataType for f in dt.fields}
        missing = [n for n in needed if n not in have]
        if missing:
            problems.append(f"{image!r} lacks fields {missing} (has {list(have)})")
        wrong = [
            f"{n}: {have[n].simpleString()} (silver type {expected[n].simpleString()})"
            for n in have
            if n in expected and have[n] != expected[n]
        ]
        if wrong:
            problems.append(f"{image!r} fields with types other than the specs give: {wrong}")
    if PRESENT in changes_df.columns:
        dt = changes_df.schema[PRESENT].dataType
        if not isinstance(dt, T.StructType) or any(f.dataType != T.BooleanType() for f in dt.fields):
            problems.append(f"{PRESENT!r} must be a STRUCT of BOOLEAN flags, is {dt.simpleString()}")
        else:
            unknown = [f.name for f in dt.fields if f.name not in expected]
            if unknown:
                problems.append(f"{PRESENT!r} has flags {unknown} for columns the specs do not have")
    if problems:
        raise SilverSchemaError(
            "changes_df does not follow the contract: " + "; ".join(problems)
            + f". Columns present: {changes_df.columns}"
        )


def _partial_update(changes_df: DataFrame) -> Column:
    """True for an update whose after image lacks columns (``_present`` has a false flag)."""
    if PRESENT not in changes_df.columns:
        return F.lit(False)
    flags = [F.coalesce(F.col(PRESENT).getField(n), F.lit(False)) for n in struct_fields(changes_df, PRESENT)]
    lacks = F.lit(False)
    for f in flags:
        lacks = lacks | ~f
    return (F.col("op") == "u") & lacks


def plan_schema(
    current: T.StructType | None, specs: Sequence[ColumnSpec], scd2: bool, own: OwnColumns
) -> tuple[T.StructType, list[T.StructField], dict[str, str]]:
    """(target schema after evolution, fields to add, silver name -> spec name)."""
    wanted = silver_table_schema(specs, scd2=scd2, own=own)
    if current is None:
        return wanted, [], {s.name: s.name for s in specs}
    has_scd2 = own.is_current in current.fieldNames()
    if has_scd2 != scd2:
        raise SilverSchemaError(
            f"the silver table is {'an' if has_scd2 else 'not an'} SCD2 table but scd2={scd2} was asked"
        )
    by_lower = {f.name.lower(): f for f in current.fields}
    missing_pipeline = [f.name for f in own.fields(scd2) if f.name not in current.fieldNames()]
    if missing_pipeline:
        raise SilverSchemaError(f"the silver table lacks pipeline columns {missing_pipeline}")
    names: dict[str, str] = {}
    to_add, conflicts = [], []
    for spec, f in zip(specs, silver_schema(specs).fields):
        have = by_lower.get(spec.name.lower())
        if have is None:
            to_add.append(f)
            names[f.name] = spec.name
        elif have.dataType != f.dataType:
            conflicts.append(f"{spec.name}: silver has {have.dataType.simpleString()}, specs give {f.dataType.simpleString()}")
        else:
            names[have.name] = spec.name
    if conflicts:
        raise SilverSchemaError(f"column types changed (not supported, migrate the table): {conflicts}")
    return T.StructType(current.fields + to_add), to_add, names


def apply_changes(spark: SparkSession, changes_df: DataFrame, specs: Sequence[ColumnSpec], target_path: str, *,
                  keys: list[str] | None, delete_mode: str = "hard", scd2: bool = False, backend: str = "auto",
                  txn_app_id: str | None = None, txn_version: int | None = None, column_prefix: str | None = None,
                  properties: dict[str, str] | None = None) -> ApplyStats:
    """Apply one batch of changes of one source table to its silver table (see the module doc).

    ``column_prefix`` names silver's own columns of a new table (default ``_``: ``_seq``, ...);
    an existing table's are found by their names (:func:`own_columns_of`). A new table takes
    ``properties`` (:mod:`pipelines.silver.properties`: deletion vectors, the change data feed).

    ``specs`` describe the source table's columns as of this batch (their order is the image
    ``idx`` order); ``keys`` its primary key (None: no key).  The table is created when missing and
    its schema evolved before the MERGE.  ``changes_df`` is evaluated more than once (an overview,
    then the plan), so it must give the same rows each time: a table, a file or a checkpoint
    (the silver step passes a read of bronze's files, which its lock keeps unchanged), not a
    query over data that may change meanwhile.

    >>> stats = apply_changes(spark, changes, specs, f"{warehouse}/silver/shop/orders", keys=["id"])  # doctest: +SKIP
    >>> stats.inserted, stats.updated, stats.deleted  # doctest: +SKIP
    (2, 1, 0)
    """
    keys = _checked_arguments(changes_df, specs, keys, delete_mode, scd2)
    path = str(target_path)
    table = delta_io.open_table(path, backend, spark)
    which = table.backend.name
    current, own = _table_now(table, column_prefix)
    check_reserved([s.name for s in specs], own)
    _check_changes(changes_df, specs, keys, scd2)

    txn = delta_io.CommitInfo.of(txn_app_id, txn_version)
    if txn_app_id is not None:
        last = table.last_txn(txn_app_id)
        if last is not None and last >= txn_version:
            return ApplyStats(skipped_by_txn=True, backend=which, table_path=path,
                              watermark=read_watermark(path, spark=spark, backend=which))

    target, names, added = _evolved(table, current, specs, scd2, own, properties)
    # Source names are the specs'; silver may spell a column in another case (MySQL renames).
    silver_name = {spec: silver for silver, spec in names.items()}
    keys = None if keys is None else [silver_name[k] for k in keys]

    watermark = read_watermark(path, spark=spark, backend=which)
    # Cached (memory, then disk): the overview and the plans read the typed changes, and typing
    # runs in Python (spark_typing), which Spark cannot prune: each value is typed once.
    marked = working_changes(changes_df).withColumn(_FRESH, ranges.spark_above(F.col(SEQ), F.lit(watermark)))
    with _cached(marked):
        overview = _overview(marked, changes_df)
        base = dict(
            changes=int(overview["fresh"] or 0),
            skipped_by_watermark=int(overview["all"] or 0) - int(overview["fresh"] or 0),
            zero_dates_nulled=int(overview["zero"] or 0),
            columns_added=tuple(added),
            backend=which,
            table_path=path,
        )
        if not overview["fresh"]:
            return ApplyStats(watermark=watermark, **base)

        changes = _fresh_changes(marked, overview, keys)
        # the table as it is now (after its schema evolved), for the plans to join with: with delta-rs
        # it was listed on the driver, so the plans broadcast it
        stored, small = table.read_df(), table.backend.on_driver
        if scd2:
            plan = plan_scd2(changes, keys, target, names, stored, small, delete_mode, own)
        elif keys is not None:
            plan = plan_keyed(changes, keys, target, names, stored, small, delete_mode, own)
        else:
            identity = [silver for silver in target.fieldNames() if silver in names]
            plan = plan_keyless(changes, target, names, identity, stored, small, delete_mode, own)
        new_mark = overview["max_seq"]
        _merge_plan(table, plan, replace(txn, metadata=watermark_metadata(new_mark)), split_by=keys if not scd2 else None)
        counts = plan.counts
        return ApplyStats(inserted=counts.get("inserted", 0), updated=counts.get("updated", 0),
                          deleted=counts.get("deleted", 0), unchanged=counts.get("unchanged", 0),
                          missing_deletes=counts.get("missing_deletes", 0), watermark=new_mark, committed=True, **base)


_FRESH = f"{WORK}fresh"  # a change above the table's watermark


@contextlib.contextmanager
def _cached(df: DataFrame):
    """``df`` cached (memory, then disk) while the block reads it."""
    df.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        yield df
    finally:
        df.unpersist()


def _checked_arguments(changes_df, specs, keys, delete_mode: str, scd2: bool) -> list[str] | None:
    """:func:`apply_changes`' arguments checked; the key columns resolved against ``specs``."""
    if changes_df is None:
        raise ValueError("'changes_df' in apply_changes cannot be None")
    if delete_mode not in DELETE_MODES:
        raise ValueError(f"delete_mode must be one of {DELETE_MODES}, got {delete_mode!r}")
    if not specs:
        raise ValueError("apply_changes needs the column specs of the source table")
    keys = resolve_keys(keys, specs)
    if scd2 and keys is None:
        raise ValueError("scd2=True needs a key: SCD2 versions are kept per key")
    return keys


def _table_now(table: delta_io.Table, column_prefix: str | None) -> tuple:
    """``(schema, own columns)`` of the silver table (schema None: no table yet, whose own columns
    take ``column_prefix``; an existing table's are found by their names)."""
    if not table.exists():
        return None, OwnColumns(column_prefix or DEFAULT_PREFIX)
    current = table.schema()
    return current, own_columns_of(current.fieldNames(), column_prefix)


def _evolved(table: delta_io.Table, current, specs, scd2: bool, own: OwnColumns,
             properties: dict[str, str] | None) -> tuple:
    """``(target, names, added)``: the table created (with ``properties``) or its schema evolved to
    hold ``specs``; the silver schema, silver's name of each source column, the columns added."""
    target, to_add, names = plan_schema(current, specs, scd2, own)
    added: list[str] = []
    if current is None:
        table.create(target, properties)
    elif to_add:
        added = table.add_columns(to_add)
    return target, names, added


def _merge_plan(table: delta_io.Table, plan, commit: delta_io.CommitInfo, *, split_by: list[str] | None) -> None:
    """MERGE a plan's source with its clauses, in a commit that stamps the new watermark; ``split_by``:
    a keyed (not SCD2) table's keys, by whose hash delta-rs MERGEs a big batch in parts."""
    try:
        table.merge(plan.source, plan.on, plan.clauses, commit, source_schema=plan.source_schema, split_by=split_by,
                    source_rows=sum(n for kind, n in plan.counts.items() if kind != "unchanged"))
    finally:
        plan.cached.unpersist()


def _overview(marked: DataFrame, changes_df: DataFrame) -> dict:
    """One Spark job's counts over the batch (all, fresh, the fresh ``max_seq``, zero dates, partial
    updates, JSON diffs); a NULL ``_seq`` or an unknown op refuses the batch."""
    fresh = F.col(_FRESH)
    zeros = F.col(ZERO_DATES_COL) if ZERO_DATES_COL in changes_df.columns else F.lit(0)
    overview = marked.select(
        F.count(F.lit(1)).alias("all"),
        F.sum(fresh.cast("int")).alias("fresh"),
        F.max(F.when(fresh, F.col(SEQ))).alias("max_seq"),
        F.sum(F.col(SEQ).isNull().cast("int")).alias("null_seq"),
        F.sum(F.coalesce(~F.col("op").isin(*OPS), F.lit(True)).cast("int")).alias("bad_op"),
        F.sum(F.when(fresh, F.coalesce(zeros, F.lit(0)))).alias("zero"),
        F.sum(F.when(fresh, _partial_update(changes_df).cast("int"))).alias("partial"),
        *([F.sum(F.when(fresh & F.col(DIFFS).isNotNull(), 1).otherwise(0)).alias("diffs")]
          if DIFFS in changes_df.columns else []),
    ).collect()[0].asDict()
    if overview["null_seq"] or overview["bad_op"]:
        raise ValueError(
            f"changes_df has {overview['null_seq']} row(s) with a NULL _seq and "
            f"{overview['bad_op']} with an op other than c/u/d/r"
        )
    return overview


def _fresh_changes(marked: DataFrame, overview: dict, keys: list[str] | None) -> DataFrame:
    """The changes above the watermark, without the partial-image columns the batch does not use;
    partial images of a keyless table are refused."""
    changes = marked.where(F.col(_FRESH)).drop(_FRESH)
    if PRESENT in changes.columns and not overview["partial"]:
        changes = changes.drop(PRESENT, DIFFS)  # full images only: nothing to fill
    if DIFFS in changes.columns and not overview.get("diffs"):
        changes = changes.drop(DIFFS)  # no JSON diffs in this batch: no fold to plan
    if PRESENT in changes.columns and keys is None:
        raise ValueError(
            f"{overview['partial']} update(s) carry partial row images (binlog_row_image MINIMAL/NOBLOB) "
            "but the table has no key: its rows are identified by all their values, so a partial "
            "image cannot be matched"
        )
    return changes
