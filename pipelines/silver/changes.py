"""Bronze rows of one table -> per-key events: the ``DataFrame -> DataFrame`` transforms silver's
MERGE plans start from (:func:`changes_from_bronze`, :func:`key_events`, :func:`fill_partial`,
:func:`latest_per_key`). :mod:`pipelines.silver.merge` says which rules they follow. Typing runs
the driver's Arrow code inside Spark's tasks (:mod:`pipelines.silver.spark_typing`).
"""
from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.binlog.errors import BinlogError
from pipelines.binlog.jsonb import PartialJson
from pipelines.bronze.schema import INSERT_OPS, PARTIAL_JSON_MARK, UPSERT_OPS
from pipelines.delta_io import quote_ident
from pipelines.schema.typemap import ZERO_DATES_COL, ColumnSpec, silver_schema
from pipelines.silver.columns import (CHANGE_COMMIT_TS, COMMIT_TS, DELETED, DIFFS, OP, PRESENT, SEQ,
                                      SilverSchemaError, ACTION, BRONZE_ZEROS, DELETE, GUARD, MOVED, WORK, RN,
                                      UPSERT)
from pipelines.silver.rules import FILL_HOLDS, FILL_LEAVES, FILL_ORDER, WINNER_ORDER, compiled_fill, sort_in
from pipelines.silver.spark_typing import typed_columns


# ---------------------------------------------------------------------------------------------
# building changes_df from bronze


def changes_from_bronze(
    bronze_df: DataFrame,
    specs: Sequence[ColumnSpec],
    defaults: dict[str, object] | None = None,
    fixes: dict[int, tuple] | None = None,
    *,
    partial: bool = True,
    guard: Column | None = None,
) -> DataFrame:
    """Bronze rows of one table -> the ``changes_df`` that :func:`apply_changes` takes.

    Partial row images (``binlog_row_image`` MINIMAL/NOBLOB log only some columns) also get the
    ``_present`` flags of their after image.  An INSERT is always a whole row: the columns its
    image lacks take ``defaults`` (spec name -> silver value, e.g. the DDL's ``DEFAULT``; the
    binlog does not carry defaults), else NULL. ``fixes``: see :func:`pipelines.silver.spark_typing.typed_columns`.
    ``_zero_dates`` is bronze's own count where the rows have one (bronze versions that write
    it), else the count :func:`pipelines.silver.spark_typing.typed_columns` makes while typing.
    ``partial=False`` says that every image has all the columns (the caller knows from the image
    shapes): the rows then get no ``_present`` flags, and nothing reads the images to make them.
    ``guard`` (a boolean over ``bronze_df``'s columns, e.g. the filter that picked its rows): rows
    where it is not true are not typed (NULL images), so only its own rows can raise on a value
    that does not convert (see ``typed_columns``).

    >>> changes = changes_from_bronze(bronze.where("db = 'shop' AND `table` = 'orders'"), specs)  # doctest: +SKIP
    >>> changes.columns  # doctest: +SKIP
    ['_seq', 'op', 'commit_ts_of', 'after', 'before', '_present', '_zero_dates']
    """
    missing = [c for c in ("_seq", "op", "commit_ts", "before", "after") if c not in bronze_df.columns]
    if missing:
        raise SilverSchemaError(f"bronze rows lack {missing}; present: {bronze_df.columns}")
    counted = ZERO_DATES_COL in bronze_df.columns  # bronze counted them: typing need not
    diffs = _json_diffs(bronze_df, specs) if partial else None
    if diffs is not None:  # the marked cells leave the image: the update does not carry the document
        bronze_df = bronze_df.withColumns(diffs)
    df = bronze_df.select(
        "_seq", "op", F.col("commit_ts").alias(CHANGE_COMMIT_TS), "after", "before",
        *([_presence(specs).alias(PRESENT)] if partial else []),
        *([F.col(DIFFS)] if diffs is not None else []),
        *([F.col(ZERO_DATES_COL).alias(BRONZE_ZEROS)] if counted else []),
        *([guard.alias(GUARD)] if guard is not None else []),
    )
    guarded = GUARD if guard is not None else None
    typed = typed_columns(df, specs, ("after", "before"), fixes=fixes, guard=guarded)
    if guard is not None:
        typed = typed.drop(GUARD)
    out = typed
    if partial:  # (whole images: an insert lacks no column, so no defaults are needed)
        whole = F.struct(*[F.lit(True).alias(s.name) for s in specs])
        out = out.withColumns({
            "after": _with_defaults(specs, defaults or {}),
            PRESENT: F.when(F.col("op").isin(*INSERT_OPS), whole).otherwise(F.col(PRESENT)),  # an insert is a whole row
        })
    if counted:
        out = out.withColumn(ZERO_DATES_COL, F.col(BRONZE_ZEROS)).drop(BRONZE_ZEROS)
    return out


def _json_diffs(bronze_df: DataFrame, specs: Sequence[ColumnSpec]) -> dict[str, Column] | None:
    """For tables with JSON columns: :data:`DIFFS` (a STRUCT of the diffs text per JSON spec, NULL
    for rows without any) and the ``after`` image without the marked cells. None otherwise."""
    ordinals = [i if s.ordinal is None else s.ordinal for i, s in enumerate(specs)]
    json_specs = [(s, o) for s, o in zip(specs, ordinals) if s.mysql_type == "json"]
    cell = bronze_df.schema["after"].dataType
    if not json_specs or not isinstance(cell, T.ArrayType) or "bin" not in cell.elementType.fieldNames():
        return None

    def marked(c: Column) -> Column:
        return F.coalesce(c["bin"] == F.lit(PARTIAL_JSON_MARK), F.lit(False))

    def diffs_of(ordinal: int) -> Column:  # (Spark reads a lambda's arity: no default arguments)
        cells = F.filter("after", lambda c: (c["idx"] == ordinal) & marked(c))
        return F.try_element_at(cells, F.lit(1))["text"]

    any_marked = F.coalesce(F.exists("after", marked), F.lit(False))
    per_column = F.struct(*[diffs_of(o).alias(s.name) for s, o in json_specs])
    return {DIFFS: F.when(any_marked, per_column),
            "after": F.when(any_marked, F.filter("after", lambda c: ~marked(c))).otherwise(F.col("after"))}


def _presence(specs: Sequence[ColumnSpec]) -> Column:
    """Bronze after image -> STRUCT of one flag per spec: does the image carry the column?"""
    ordinals = [i if s.ordinal is None else s.ordinal for i, s in enumerate(specs)]
    whole = F.struct(*[F.lit(True).alias(s.name) for s in specs])
    flags = F.struct(*[F.expr(f"exists(after, x -> x.idx = {o})").alias(s.name)
                       for s, o in zip(specs, ordinals)])
    return (F.when(F.col("after").isNull(), F.lit(None))
            .when(F.size("after") >= len(specs), whole)
            .otherwise(flags))


def _with_defaults(specs: Sequence[ColumnSpec], defaults: dict[str, object]) -> Column:
    """The typed after image with the columns an INSERT's image lacks set to their ``defaults``."""
    if not any(defaults.get(s.name) is not None for s in specs):
        return F.col("after")
    after = F.col("after")
    fields = []
    for s, f in zip(specs, silver_schema(specs).fields):
        value = after.getField(s.name)
        if defaults.get(s.name) is not None:
            absent = F.col("op").isin(*INSERT_OPS) & ~F.col(PRESENT).getField(s.name)
            value = F.when(absent, F.lit(defaults[s.name]).cast(f.dataType)).otherwise(value)
        fields.append(value.alias(s.name))
    return F.when(after.isNull(), F.lit(None)).otherwise(F.struct(*fields))


# ---------------------------------------------------------------------------------------------
# the change logic: DataFrame -> DataFrame


def struct_fields(df: DataFrame, col: str) -> dict[str, T.DataType]:
    dt = df.schema[col].dataType
    if not isinstance(dt, T.StructType):
        raise SilverSchemaError(f"changes_df column {col!r} must be a STRUCT, got {dt.simpleString()}")
    return {f.name: f.dataType for f in dt.fields}


def image_values(image: str, fields: dict[str, T.DataType], value_schema: T.StructType, source_names: dict[str, str]) -> list[Column]:
    """One column per silver value column, taken from ``image`` (NULL where the image lacks it)."""
    cols = []
    for f in value_schema.fields:
        src = source_names.get(f.name)
        if src is not None and src in fields:
            cols.append(F.col(image).getField(src).cast(f.dataType).alias(f.name))
        else:
            cols.append(F.lit(None).cast(f.dataType).alias(f.name))
    return cols


def commit_ts_of(df: DataFrame) -> Column:
    if COMMIT_TS in df.columns:
        return F.col(COMMIT_TS).cast(T.TimestampType())
    return F.lit(None).cast(T.TimestampType())


def _presence_flags(changes: DataFrame, value_schema: T.StructType, source_names: dict[str, str],
                    after_key: dict[str, Column], present: dict, key_changed: Column) -> tuple[list, list]:
    """The partial images' columns of :func:`key_events`' upserts and of its deletes: a presence
    flag per value column, ``__silver_moved``, and the JSON diffs by silver name when logged."""
    op = F.col("op")
    flags: list[Column] = []
    deletes_flags: list[Column] = []
    for i, f in enumerate(value_schema.fields):
        src = source_names.get(f.name)
        if f.name in after_key or (src is not None and src not in present):
            flag = F.lit(True)
        elif src is None:  # a silver column the specs lack: not logged here (or dropped): kept
            flag = op.isin(*INSERT_OPS)
        else:
            flag = op.isin(*INSERT_OPS) | F.coalesce(F.col(PRESENT).getField(src), F.lit(False))
        flags.append(flag.alias(_flag(i)))
        deletes_flags.append(F.lit(False).alias(_flag(i)))
    flags.append(((op == "u") & key_changed).alias(MOVED))
    deletes_flags.append(F.lit(False).alias(MOVED))
    if DIFFS in changes.columns:  # diffs by silver name, for fill_partial to apply
        logged = struct_fields(changes, DIFFS)
        by_silver = [(f.name, source_names.get(f.name)) for f in value_schema.fields]
        diffs = F.struct(*[F.col(DIFFS).getField(src).alias(name) for name, src in by_silver if src in logged])
        flags.append(F.when(F.col(DIFFS).isNotNull(), diffs).alias(DIFFS))
        deletes_flags.append(F.lit(None).cast(_diffs_type(by_silver, logged)).alias(DIFFS))
    return flags, deletes_flags


def key_events(
    changes: DataFrame,
    keys: Sequence[str],
    value_schema: T.StructType,
    source_names: dict[str, str] | None = None,
) -> DataFrame:
    """Translate changes into per-key events: upsert(after) and delete(before).

    ``c`` -> upsert; ``d`` -> delete; ``u`` -> upsert, plus delete of the old key when the key
    changed.  Output columns: the silver value columns (``value_schema``), ``_seq``, ``_op`` (the
    change's op; ``d`` for deletes), ``commit_ts_of``, ``_deleted`` (true for deletes) and the
    internal ``__silver_action``.  ``source_names`` maps silver column -> image field name (default:
    the same name).

    When ``changes`` has a ``_present`` column (partial row images), an update's key columns that
    its after image lacks are taken from its before image (the key did not change), and the
    events also carry one presence flag per value column (``__silver_p0`` ...: true where the
    event has the value; always true for inserts and key columns; false for a silver column the
    specs lack, so an update keeps its stored value) and ``__silver_moved`` (the upsert of a
    key-changing update); see :func:`fill_partial`.

    >>> key_events(changes, ["id"], T.StructType([T.StructField("id", T.IntegerType())])).show()  # doctest: +SKIP
    """
    source_names = source_names or {f.name: f.name for f in value_schema.fields}
    after_fields = struct_fields(changes, "after")
    before_fields = struct_fields(changes, "before")
    partial = PRESENT in changes.columns
    present = struct_fields(changes, PRESENT) if partial else {}
    after_key = {}
    for k in keys:
        src = source_names[k]
        value = F.col("after").getField(src)
        if src in present:
            value = F.when(F.col(PRESENT).getField(src), value).otherwise(F.col("before").getField(src))
        after_key[k] = value
    same_key = F.lit(True)
    for k in keys:
        same_key = same_key & F.col("before").getField(source_names[k]).eqNullSafe(after_key[k])
    key_changed = F.col("before").isNotNull() & ~same_key
    op = F.col("op")
    tail = [F.col(SEQ), commit_ts_of(changes).alias(COMMIT_TS)]
    after_values = [
        after_key[f.name].cast(f.dataType).alias(f.name) if f.name in after_key else c
        for f, c in zip(value_schema.fields, image_values("after", after_fields, value_schema, source_names))
    ]
    flags, deletes_flags = _presence_flags(changes, value_schema, source_names, after_key, present, key_changed) \
        if partial else ([], [])
    upserts = changes.where(op.isin(*UPSERT_OPS)).select(
        *after_values,
        *tail,
        op.alias(OP),
        F.lit(False).alias(DELETED),
        F.lit(UPSERT).alias(ACTION),
        *flags,
    )
    deletes = changes.where((op == "d") | ((op == "u") & key_changed)).select(
        *image_values("before", before_fields, value_schema, source_names),
        *tail,
        F.lit("d").alias(OP),
        F.lit(True).alias(DELETED),
        F.lit(DELETE).alias(ACTION),
        *deletes_flags,
    )
    return upserts.unionByName(deletes)


def _diffs_type(by_silver, logged: dict) -> T.StructType:
    """The type of :data:`DIFFS` by silver name (what :func:`key_events` gives upserts)."""
    return T.StructType([T.StructField(name, T.StringType()) for name, src in by_silver if src in logged])


def _flag(i: int) -> str:
    return f"{WORK}p{i}"


_UNSET = object()


def fold_json_diffs(chain: Sequence[tuple], ncols: int) -> list[tuple]:
    """The documents of one key's events where updates logged JSON diffs: plain values in, plain
    values out.  ``chain``: ``(order, seq, action, values, present, diffs)`` per event of the key
    (``order`` 0 for silver's stored row; ``values`` after :func:`fill_partial`'s fill; ``present``
    whether the event carries each column; ``diffs`` the diffs text or None), in any order.
    Returns ``(seq, action, values)`` per event of the batch (not the stored row), ``values`` the
    documents as the server had them after the event.

    >>> fold_json_diffs([(0, "", "stored", ('{"a": 1}',), (True,), (None,)),
    ...                  (1, "2", "upsert", ('{"a": 1}',), (False,), ('[{"op": "REPLACE", "path": "$.a", "value": "3"}]',)),
    ...                  (1, "1", "upsert", ('{"a": 1}',), (False,), ('[{"op": "INSERT", "path": "$.b", "value": "2"}]',))], 1)
    [('1', 'upsert', ('{"a": 1, "b": 2}',)), ('2', 'upsert', ('{"a": 3, "b": 2}',))]
    """
    events = list(chain)
    sort_in(events, FILL_ORDER, {"order": lambda e: e[0], "seq": lambda e: e[1], "action": lambda e: e[2]})
    state = [_UNSET] * ncols
    out = []
    for order, seq, action, values, present, diffs in events:
        values = list(values)
        if action == DELETE:  # the row is gone: what follows starts from its own values
            state = [None] * ncols
        else:
            for j in range(ncols):
                if diffs[j] is not None:
                    base = values[j] if state[j] is _UNSET else state[j]
                    values[j] = None if base is None else _applied(diffs[j], base)
                    state[j] = values[j]
                elif present[j] or state[j] is _UNSET:
                    state[j] = values[j]
                else:  # not logged: the document as the fold has it (the fill may predate diffs)
                    values[j] = state[j]
        if order:
            out.append((seq, action, tuple(values)))
    return out


def _applied(diffs: str, base: str) -> str | None:
    """``base`` with the diffs applied; None where they do not fit it (MySQL would have rejected
    them on the server's document, so silver's is not the server's: history it never saw)."""
    try:
        return PartialJson.from_json(diffs).apply(base)
    except BinlogError:
        return None


def _apply_json_diffs(rows: DataFrame, keys: Sequence[str], value_schema: T.StructType) -> DataFrame:
    """:func:`fill_partial`'s rows with the documents of JSON diffs applied (:func:`fold_json_diffs`),
    for the keys that have diffs; the other rows pass as they are."""
    names = [f.name for f in rows.schema[DIFFS].dataType.fields]
    values = [f.name for f in value_schema.fields]
    positions = [values.index(n) for n in names]
    k = [f"{WORK}k{i}" for i in range(len(keys))]
    touched = rows.where(F.col(DIFFS).isNotNull()).select(
        *[F.col(quote_ident(key)).alias(a) for key, a in zip(keys, k)]).distinct()
    same_key = F.lit(True)
    for key, a in zip(keys, k):
        same_key = same_key & F.col(quote_ident(key)).eqNullSafe(F.col(a))
    affected = rows.join(touched, same_key, "left_semi")
    event = F.struct(
        F.col(f"{WORK}order").alias("o"), F.col(SEQ).alias("s"), F.col(ACTION).alias("a"),
        F.array(*[F.col(quote_ident(n)) for n in names]).alias("v"),
        F.array(*[F.col(_flag(p)) for p in positions]).alias("p"),
        F.array(*[F.col(DIFFS).getField(n) for n in names]).alias("d"))
    out_type = T.ArrayType(T.StructType([T.StructField("s", T.StringType()), T.StructField("a", T.StringType()),
                                         T.StructField("v", T.ArrayType(T.StringType()))]))
    ncols = len(names)
    fold = F.udf(lambda chain: [(s, a, list(v)) for s, a, v in fold_json_diffs(
        [(e["o"], e["s"], e["a"], e["v"], e["p"], e["d"]) for e in chain], ncols)], out_type)
    folded = (affected.groupBy(*[F.col(quote_ident(key)) for key in keys])
              .agg(F.collect_list(event).alias(f"{WORK}chain"))
              .select(F.explode(fold(F.col(f"{WORK}chain"))).alias(f"{WORK}doc"))
              .select(F.col(f"{WORK}doc.s").alias(f"{WORK}doc_seq"), F.col(f"{WORK}doc.a").alias(f"{WORK}doc_action"),
                      F.col(f"{WORK}doc.v").alias(f"{WORK}docs")))
    joined = rows.join(folded, (F.col(SEQ) == F.col(f"{WORK}doc_seq")) & (F.col(ACTION) == F.col(f"{WORK}doc_action"))
                       & (F.col(f"{WORK}order") == 1), "left")
    found = F.col(f"{WORK}doc_seq").isNotNull()
    return joined.select(
        *[F.when(found, F.col(f"{WORK}docs")[names.index(c)]).otherwise(F.col(quote_ident(c))).alias(c)
          if c in names else F.col(quote_ident(c)) for c in rows.columns])


def _settle_moves(rows: DataFrame, before, values: list[str], flags: list[str], pending: str, previous) -> DataFrame:
    """:func:`fill_partial`'s key moves: each pending upsert of a key-changing update takes the
    columns it lacks from its old key's row just before the change; one link of a chain per round
    (a move waits while its old key has a move pending), at least one move settled per round."""
    for _ in range(rows.where(F.col(pending)).count()):
        blocked = F.max(F.col(pending).cast("int")).over(before)
        # a delete's row just before it: what a key-changing update takes to its new key
        moved_out = (
            rows.select(F.col(SEQ), F.col(ACTION),
                        *[previous(i, v).alias(f"{WORK}from{i}") for i, v in enumerate(values)],
                        F.coalesce(blocked, F.lit(0)).alias(f"{WORK}blocked"))
            .where((F.col(ACTION) == DELETE) & (F.col(f"{WORK}blocked") == 0))
            .drop(ACTION, f"{WORK}blocked")
        )
        take = F.col(pending) & F.col(f"{WORK}from_seq").isNotNull()
        joined = rows.join(moved_out.withColumnRenamed(SEQ, f"{WORK}from_seq"),
                           F.col(SEQ) == F.col(f"{WORK}from_seq"), "left")
        rows = joined.select(
            *[F.when(take & ~F.col(flags[i]), F.col(f"{WORK}from{i}")).otherwise(F.col(quote_ident(v))).alias(v)
              for i, v in enumerate(values)],
            *[F.col(c) for c in rows.columns if c not in values and c not in flags and c != pending],
            *[(F.col(p) | take).alias(p) for p in flags],
            (F.col(pending) & ~take).alias(pending),
        ).localCheckpoint(eager=True)
        if not rows.where(F.col(pending)).limit(1).count():
            break
    return rows


def case_of(pairs: Sequence[tuple[Column | None, Column | str]]) -> Column:
    """``(condition, value)`` pairs (a rule compiled: :mod:`pipelines.silver.rules`) as one CASE:
    the first whose condition holds (None: always); NULL when none does."""
    out = None
    for cond, value in pairs:
        if cond is None:
            return value if out is None else out.otherwise(value)
        out = F.when(cond, value) if out is None else out.when(cond, value)
    return out


def spark_order(order: Sequence[tuple[str, str]], fields: dict[str, Column]) -> list[Column]:
    """An ORDER table of :mod:`pipelines.silver.rules` as Spark's sort columns (``fields``: each
    field's column)."""
    return [fields[f].desc() if d == "descending" else fields[f].asc() for f, d in order]


def fill_partial(events: DataFrame, stored: DataFrame, keys: Sequence[str], value_schema: T.StructType) -> DataFrame:
    """Give every upsert of partial row images (``binlog_row_image`` MINIMAL/NOBLOB) a full row.

    ``events`` come from :func:`key_events` with presence flags; ``stored`` holds the rows silver
    has now (the key and value columns; tombstones left out).  The rules, per key in ``_seq``
    order: a column an upsert lacks takes the value the row had just before it: from the latest
    earlier event of that key that carries the column (an insert carries all), else from the
    stored row, else NULL (a delete in between means there was no row: NULL).  The upsert of a
    key-changing update takes the missing columns from its old key's row just before the change,
    so the values move with the row; chains of key changes (k1 -> k2 -> k3) are followed one link
    per round.  Deletes keep their own values.  Flags are dropped from the result.

    >>> fill_partial(key_events(changes, ["id"], schema, names), stored, ["id"], schema)  # doctest: +SKIP
    """
    n = len(value_schema.fields)
    values = [f.name for f in value_schema.fields]
    flags = [_flag(i) for i in range(n)]
    order = f"{WORK}order"
    rows = events.withColumn(order, F.lit(1)).unionByName(
        stored.select(
            *[F.col(quote_ident(v)) for v in values],
            F.lit("").alias(SEQ),
            F.lit("stored").alias(ACTION),
            F.lit(0).alias(order),
            *[F.lit(True).alias(p) for p in flags],
            F.lit(False).alias(MOVED),
        ),
        allowMissingColumns=True,
    )
    fields = {"order": F.col(order), "seq": F.col(SEQ), "action": F.col(ACTION)}
    before = (
        Window.partitionBy(*[F.col(quote_ident(k)) for k in keys])
        .orderBy(*spark_order(FILL_ORDER, fields))
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    all_present = F.lit(True)
    for p in flags:
        all_present = all_present & F.col(p)
    pending = f"{WORK}pending"

    def conds(i: int) -> dict[str, Column]:
        return {"delete": F.col(ACTION) == DELETE, "carried": F.col(flags[i])}

    def previous(i: int, v: str) -> Column:
        """The value column ``v`` had before each row (NULL when it was deleted or never known):
        the last value an earlier row left (FILL_LEAVES; "before": none left here, so it looks back)."""
        null = F.lit(None).cast(value_schema[i].dataType)
        leaves = compiled_fill(FILL_LEAVES, conds(i), {"own": F.struct(F.col(quote_ident(v)).alias("v")),
                                                      "null": F.struct(null.alias("v")), "before": F.lit(None)})
        return F.last(case_of(leaves), ignorenulls=True).over(before).getField("v")

    def resolved(df: DataFrame) -> DataFrame:
        """Each upsert's missing columns filled from the row before it (one pass, no key moves)."""
        return df.select(
            *[case_of(compiled_fill(FILL_HOLDS, conds(i), {
                "own": F.col(quote_ident(v)), "before": previous(i, v),
                "null": F.lit(None).cast(value_schema[i].dataType)})).alias(v) for i, v in enumerate(values)],
            *[F.col(c) for c in df.columns if c not in values],
        )

    rows = rows.withColumn(pending, F.col(MOVED) & ~all_present).localCheckpoint(eager=True)
    out = resolved(_settle_moves(rows, before, values, flags, pending, previous))
    if DIFFS in out.columns:
        out = _apply_json_diffs(out, keys, value_schema)
    out = out.where(F.col(order) == 1)
    return out.drop(order, pending, MOVED, DIFFS, *flags)


def latest_per_key(events: DataFrame, keys: Sequence[str]) -> DataFrame:
    """Keep, per key, the event that wins (:data:`pipelines.silver.rules.WINNER_ORDER`: the largest
    ``_seq``, an upsert before a delete on a tie), as :func:`pipelines.silver.arrow_fold.latest_rows`
    does in the driver's fold: here a window over the events partitioned by key (-0.0 with 0.0,
    NULLs as one key). Spark's own:
    run in Spark's tasks instead, Arrow's made this path's silver 20% slower (BENCHMARKS.md, "One
    typing for silver").

    >>> latest_per_key(key_events(changes, ["id"], value_schema), ["id"])  # doctest: +SKIP
    """
    if not keys:
        raise ValueError("latest_per_key needs at least one key column")
    fields = {"seq": F.col(SEQ), "action": F.col(ACTION)}
    w = Window.partitionBy(*[F.col(quote_ident(k)) for k in keys]).orderBy(*spark_order(WINNER_ORDER, fields))
    return events.withColumn(RN, F.row_number().over(w)).where(F.col(RN) == 1).drop(RN)
