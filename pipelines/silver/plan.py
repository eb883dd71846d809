"""MERGE plans of one batch of one silver table: which change wins, as Spark ``DataFrame ->
DataFrame`` transforms, and the MERGE clauses that write it (the same SQL for both backends).

A planner takes the batch's changes and the silver table as it is (a DataFrame the caller read:
:func:`pipelines.silver.merge.apply_changes` does the I/O) and returns a :class:`_Plan`: the MERGE
source, its ON predicate and clauses, and the counts per kind of outcome. The rules are in
:mod:`pipelines.silver.merge`'s docstring; :mod:`pipelines.silver.driver` folds small batches on
the driver with the same clauses (:func:`keyed_clauses`, :func:`keyless_clauses`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.bronze.schema import UPSERT_OPS
from pipelines.delta_io import MergeClause, qualified, quote_ident
from pipelines.silver.changes import (case_of, commit_ts_of, image_values, struct_fields, fill_partial, key_events,
                                      latest_per_key, spark_order)
from pipelines.silver.columns import (COMMIT_TS, DELETED, IS_CURRENT, OP, OwnColumns, PRESENT, SEQ, VALID_FROM,
                                      VALID_TO, ACTION, DELETE, INSERT, KIND, WORK, RN, UPSERT)
from pipelines.silver.rules import (KEYLESS_ACTIONS, KEYLESS_ORDER, compiled_outcomes, keyless_kept,
                                    keyless_missing)


def value_schema(target: T.StructType, own: OwnColumns) -> T.StructType:
    ours = set(own.names(scd2=True))
    return T.StructType([f for f in target.fields if f.name not in ours])


def _newer(own: OwnColumns, s: str = "s", t: str = "t") -> str:
    return f"({qualified(t, own.seq)} IS NULL OR {qualified(s, own.seq)} > {qualified(t, own.seq)})"


def _is(alias: str, col: str, value: str) -> str:
    return f"{qualified(alias, col)} = '{value}'"


def _assign(names: Sequence[str]) -> dict[str, str]:
    return {n: qualified("s", n) for n in names}


def _source(df: DataFrame, target: T.StructType, internal: Sequence[str],
            own: OwnColumns) -> tuple[DataFrame, T.StructType]:
    """The MERGE source: every target column (with the target's type; silver's own columns from
    their working names) plus internal columns."""
    working = own.working()
    cols = []
    for f in target.fields:
        name = working.get(f.name, f.name)
        value = F.col(quote_ident(name)) if name in df.columns else F.lit(None)
        cols.append(value.cast(f.dataType).alias(f.name))
    out = df.select(*cols, *[F.col(c) for c in internal])
    schema = T.StructType(list(target.fields) + [out.schema[c] for c in internal])
    return out, schema


def key_on(keys: Sequence[str]) -> str:
    return " AND ".join(f"{qualified('t', k)} = {qualified('s', k)}" for k in keys)


@dataclass
class _Plan:
    source: DataFrame
    source_schema: T.StructType
    on: str
    clauses: list[MergeClause]
    counts: dict[str, int]
    cached: DataFrame  # unpersisted after the MERGE


def _small_if_local(stored: DataFrame, broadcast: bool) -> DataFrame:
    """With delta-rs the table was read into driver memory anyway: broadcast it (no shuffle)."""
    return F.broadcast(stored) if broadcast else stored


def _count_by(df: DataFrame, col: str) -> dict[str, int]:
    return {r[col]: int(r["n"]) for r in df.groupBy(col).agg(F.count(F.lit(1)).alias("n")).collect()}


def _null_key(keys: Sequence[str]) -> Column:
    flag = F.lit(False)
    for k in keys:
        flag = flag | F.col(quote_ident(k)).isNull()
    return flag


def _stored_rows(
    table: DataFrame,
    keys: Sequence[str],
    values: T.StructType,
    events: DataFrame,
    own: OwnColumns,
    where: Column | None = None,
) -> DataFrame:
    """Silver's live rows (no tombstones; ``where`` narrows further) of the keys ``events`` touch."""
    deleted = F.col(quote_ident(own.deleted))
    live = deleted.isNull() | ~deleted
    if where is not None:
        live = live & where
    stored = table.where(live).select(
        *[F.col(quote_ident(f.name)) for f in values.fields]
    )
    touched = events.select(*[F.col(quote_ident(k)) for k in keys]).distinct()
    return stored.join(touched, on=[stored[quote_ident(k)].eqNullSafe(touched[quote_ident(k)]) for k in keys],
                       how="left_semi")


def _key_events(changes: DataFrame, keys: list[str], target: T.StructType, names: dict[str, str],
                table: DataFrame, own: OwnColumns, current: Column | None = None) -> DataFrame:
    """The batch's per-key events; partial images are filled from the batch and from the rows
    the table holds (``current``: which of them count, for SCD2 its current versions)."""
    values = value_schema(target, own)
    events = key_events(changes, keys, values, names)
    if PRESENT in changes.columns:
        events = fill_partial(events, _stored_rows(table, keys, values, events, own, current), keys, values)
    return events


def plan_keyed(
    changes: DataFrame,
    keys: list[str],
    target: T.StructType,
    names: dict[str, str],
    table: DataFrame,
    broadcast: bool,
    delete_mode: str,
    own: OwnColumns,
) -> _Plan:
    events = _key_events(changes, keys, target, names, table, own)
    latest = latest_per_key(events, keys)
    tk = [f"{WORK}tk{i}" for i in range(len(keys))]
    stored = table.select(
        *[F.col(quote_ident(k)).alias(n) for k, n in zip(keys, tk)],
        F.col(quote_ident(own.seq)).alias(f"{WORK}tseq"),
        F.lit(True).alias(f"{WORK}tpresent"),
    )
    cond = [F.col(quote_ident(k)) == F.col(n) for k, n in zip(keys, tk)]
    joined = latest.join(_small_if_local(stored, broadcast), on=cond, how="left")
    present = F.col(f"{WORK}tpresent").isNotNull()
    newer = F.col(f"{WORK}tseq").isNull() | (F.col(SEQ) > F.col(f"{WORK}tseq"))
    upsert = F.col(ACTION) == UPSERT
    flags = {"stored": present, "newer": newer, "upsert": upsert, "soft": F.lit(delete_mode == "soft")}
    klass = case_of([(_null_key(keys), F.lit("null_key")),
                     *[(cond, F.lit(kind)) for kind, cond in
                       compiled_outcomes(flags, lambda a, b: a & b, lambda a: ~a, F.lit(True))]])
    classified = joined.withColumn(KIND, klass).drop(*tk, f"{WORK}tseq", f"{WORK}tpresent").cache()
    counts = _count_by(classified, KIND)
    if counts.get("null_key"):
        classified.unpersist()
        raise ValueError(f"{counts['null_key']} change(s) have a NULL in key columns {keys}")
    source, schema = _source(classified.where(F.col(KIND) != "unchanged"), target, [ACTION], own)
    return _Plan(source, schema, key_on(keys), keyed_clauses(target.fieldNames(), delete_mode, own), counts,
                 classified)


def keyed_clauses(all_cols: Sequence[str], delete_mode: str, own: OwnColumns) -> list[MergeClause]:
    """The MERGE clauses of a keyed table's latest events (source column :data:`ACTION` says
    upsert or delete): a change applies only where it is newer than the stored row."""
    is_delete, is_upsert = _is("s", ACTION, DELETE), _is("s", ACTION, UPSERT)
    clauses = []
    if delete_mode == "soft":
        clauses.append(MergeClause("update", f"{is_delete} AND {_newer(own)}",
                                   _assign([own.deleted, own.seq, own.op, own.commit_ts])))
    else:
        clauses.append(MergeClause("delete", f"{is_delete} AND {_newer(own)}"))
    clauses.append(MergeClause("update", f"{is_upsert} AND {_newer(own)}", _assign(all_cols)))
    clauses.append(MergeClause("insert", None if delete_mode == "soft" else is_upsert, _assign(all_cols)))
    return clauses


def plan_scd2(
    changes: DataFrame,
    keys: list[str],
    target: T.StructType,
    names: dict[str, str],
    table: DataFrame,
    broadcast: bool,
    delete_mode: str,
    own: OwnColumns,
) -> _Plan:
    events = _key_events(changes, keys, target, names, table, own, F.col(quote_ident(own.is_current)))
    tk = [f"{WORK}tk{i}" for i in range(len(keys))]
    tmax, tcur = f"{WORK}tmax", f"{WORK}tcurrent"
    stored_current = F.col(quote_ident(own.is_current))
    stored = (
        table.select(*[F.col(quote_ident(c)) for c in [*keys, own.seq, own.is_current]])
        .groupBy(*[F.col(quote_ident(k)).alias(n) for k, n in zip(keys, tk)])
        .agg(F.max(F.col(quote_ident(own.seq))).alias(tmax), F.max(F.when(stored_current, F.lit(True))).alias(tcur))
    )
    joined = events.join(
        _small_if_local(stored, broadcast), on=[F.col(quote_ident(k)) == F.col(n) for k, n in zip(keys, tk)], how="left"
    )
    fresh = F.col(tmax).isNull() | (F.col(SEQ) > F.col(tmax))
    # One window over all events of a key: stale events (already in silver) sort before fresh ones.
    by_key = Window.partitionBy(*[F.col(quote_ident(k)) for k in keys]).orderBy(F.col(SEQ), F.col(ACTION))
    tagged = (
        joined.withColumn(f"{WORK}fresh", fresh)
        .withColumn(VALID_TO, F.lead(COMMIT_TS).over(by_key))
        .withColumn(IS_CURRENT, F.lead(SEQ).over(by_key).isNull())
        .withColumn(f"{WORK}first", F.coalesce(~F.lag(f"{WORK}fresh").over(by_key), F.lit(True)))
        .withColumn(VALID_FROM, F.col(COMMIT_TS))
    )
    is_fresh, is_upsert = F.col(f"{WORK}fresh"), F.col(ACTION) == UPSERT
    kind = (
        F.when(_null_key(keys), "null_key")
        .when(~is_fresh, "unchanged")
        .when(is_upsert | F.lit(delete_mode == "soft"), "version")
        .otherwise("delete_event")  # a hard delete: it only closes the current version
    )
    rows = tagged.withColumn(KIND, kind)
    closes = rows.where(is_fresh & F.col(f"{WORK}first") & F.col(tcur).isNotNull()).select(
        *[F.col(quote_ident(k)) for k in keys],
        F.col(SEQ),
        F.col(COMMIT_TS).alias(VALID_TO),
        F.lit("close").alias(KIND),
        F.col(ACTION),
    )
    working = own.working()
    src = rows.select(*[F.col(quote_ident(working.get(n, n))) for n in target.fieldNames()], KIND, ACTION)
    src = src.unionByName(closes, allowMissingColumns=True).cache()
    tally = {
        (r[KIND], r[ACTION]): int(r["n"])
        for r in src.groupBy(KIND, ACTION).agg(F.count(F.lit(1)).alias("n")).collect()
    }
    by_kind = {}
    for (k, _), n in tally.items():
        by_kind[k] = by_kind.get(k, 0) + n
    if by_kind.get("null_key"):
        src.unpersist()
        raise ValueError(f"{by_kind['null_key']} change(s) have a NULL in key columns {keys}")
    counts = {
        "inserted": by_kind.get("version", 0),
        "updated": by_kind.get("close", 0),
        "deleted": tally.get(("version", DELETE), 0) + by_kind.get("delete_event", 0),
        "unchanged": by_kind.get("unchanged", 0),
    }
    source, schema = _source(src.where(F.col(KIND).isin("version", "close")), target, [KIND], own)
    tseq, sseq = qualified("t", own.seq), qualified("s", own.seq)
    on = (
        f"{key_on(keys)} AND (({_is('s', KIND, 'close')} AND {qualified('t', own.is_current)} = true "
        f"AND ({tseq} IS NULL OR {tseq} < {sseq})) "
        f"OR ({_is('s', KIND, 'version')} AND {tseq} = {sseq}))"
    )
    clauses = [
        MergeClause("update", _is("s", KIND, "close"),
                    {own.valid_to: qualified("s", own.valid_to), own.is_current: "false"}),
        MergeClause("insert", _is("s", KIND, "version"), _assign(target.fieldNames())),
    ]
    return _Plan(source, schema, on, clauses, counts, src)


_DELETES = "delete"  # keyless_actions' origin of the batch's deletes


def keyless_actions(rows: DataFrame, identity: Sequence[str], origin: str) -> tuple[DataFrame, Column]:
    """:mod:`pipelines.silver.rules`' keyless rule in Spark's SQL: ``rows`` (the candidates, whose
    ``origin`` is the rule's, and the deletes, whose is ``"delete"``) ranked per identity, and each row's
    action: :data:`~pipelines.silver.rules.KEYLESS_ACTIONS`', ``"missing"`` for a delete that finds
    no candidate, else NULL. The ranked rows carry the identity's candidates, deletes and last
    delete's commit time."""
    group = Window.partitionBy(*[F.col(quote_ident(n)) for n in identity])
    is_candidate = F.col(origin) != _DELETES
    seq_order = spark_order(KEYLESS_ORDER, {"seq": F.coalesce(F.col(SEQ), F.col(f"{WORK}dseq"))})
    ranked = (
        rows.withColumn(f"{WORK}n", F.sum(is_candidate.cast("int")).over(group))
        .withColumn(f"{WORK}ndel", F.sum((~is_candidate).cast("int")).over(group))
        .withColumn(f"{WORK}dts", F.max(F.when(~is_candidate, F.col(COMMIT_TS))).over(group))
        # the candidates in the rule's order, then the deletes: a delete at rank n + j is the j-th
        .withColumn(RN, F.row_number().over(group.orderBy(is_candidate.desc(), *seq_order)))
    )
    n, rn = F.col(f"{WORK}n"), F.col(RN)
    greatest = lambda c, z: F.greatest(c, F.lit(z))  # noqa: E731
    survives = rn <= keyless_kept(n, F.col(f"{WORK}ndel"), greatest)
    missing = (F.col(origin) == _DELETES) & (keyless_missing(n, rn - n, greatest) > 0)
    return ranked, case_of([*[((F.col(origin) == of) & (survives if lives else ~survives), F.lit(act))
                              for (of, lives), act in KEYLESS_ACTIONS.items()], (missing, F.lit("missing"))])


def plan_keyless(
    changes: DataFrame,
    target: T.StructType,
    names: dict[str, str],
    identity: list[str],
    table: DataFrame,
    broadcast: bool,
    delete_mode: str,
    own: OwnColumns,
) -> _Plan:
    values = value_schema(target, own)
    op = F.col("op")
    origin = f"{WORK}origin"
    # Three kinds of rows, grouped by the identity values: silver's live copies, the batch's
    # inserted copies (full rows) and the batch's deletes; the rule: pipelines.silver.rules.
    inserts = changes.where(op.isin(*UPSERT_OPS)).select(
        *image_values("after", struct_fields(changes, "after"), values, names),
        F.col(SEQ),
        commit_ts_of(changes).alias(COMMIT_TS),
        op.alias(OP),
        F.lit(False).alias(DELETED),
        F.lit("batch").alias(origin),
    )
    deletes = changes.where(op.isin("d", "u")).select(
        *image_values("before", struct_fields(changes, "before"), values, names),
        F.col(SEQ).alias(f"{WORK}dseq"),
        commit_ts_of(changes).alias(COMMIT_TS),
        F.lit(_DELETES).alias(origin),
    )
    # Positional working names: identity columns may carry any name; NULLs must match NULLs.
    ic = [f"{WORK}c{i}" for i in range(len(identity))]
    wanted = F.broadcast(deletes.select(*[F.col(quote_ident(n)).alias(c) for n, c in zip(identity, ic)]))
    stored_deleted = F.col(quote_ident(own.deleted))
    live = (
        table.select(*[F.col(quote_ident(c)) for c in [*identity, own.seq, own.deleted]])
        .where(stored_deleted.isNull() | ~stored_deleted)
        .join(wanted, [F.col(quote_ident(n)).eqNullSafe(F.col(c)) for n, c in zip(identity, ic)], "left_semi")
        .select(*[F.col(quote_ident(n)) for n in identity], F.col(quote_ident(own.seq)).alias(SEQ),
                F.lit("stored").alias(origin))
    )
    rows = inserts.unionByName(live, allowMissingColumns=True).unionByName(deletes, allowMissingColumns=True)
    ranked, action = keyless_actions(rows, identity, origin)
    tagged = ranked.withColumn(ACTION, action).where(F.col(ACTION).isNotNull())
    doomed = F.col(ACTION) == DELETE
    src = tagged.select(
        *[F.col(quote_ident(f.name)) for f in values.fields],
        F.col(SEQ),
        F.when(doomed, F.lit("d")).otherwise(F.col(OP)).alias(OP),
        F.when(doomed, F.col(f"{WORK}dts")).otherwise(F.col(COMMIT_TS)).alias(COMMIT_TS),
        F.when(doomed, F.lit(True)).otherwise(F.col(DELETED)).alias(DELETED),
        F.col(ACTION),
    ).cache()
    by_action = _count_by(src, ACTION)
    counts = {
        "inserted": by_action.get(INSERT, 0),
        "deleted": by_action.get(DELETE, 0),
        "missing_deletes": by_action.get("missing", 0),
    }
    source, schema = _source(src.where(F.col(ACTION) != "missing"), target, [ACTION], own)
    on = f"{qualified('t', own.seq)} = {qualified('s', own.seq)}"
    return _Plan(source, schema, on, keyless_clauses(target.fieldNames(), delete_mode, own), counts, src)


def keyless_clauses(all_cols: Sequence[str], delete_mode: str, own: OwnColumns) -> list[MergeClause]:
    """The MERGE clauses of a keyless table (matched on ``_seq``, each row's identity): a stored
    copy the batch deleted goes (soft: is flagged), a surviving new copy is inserted."""
    is_delete = _is("s", ACTION, DELETE)
    if delete_mode == "soft":
        on_delete = MergeClause("update", is_delete, _assign([own.deleted, own.op, own.commit_ts]))
    else:
        on_delete = MergeClause("delete", is_delete)
    return [on_delete, MergeClause("insert", _is("s", ACTION, INSERT), _assign(all_cols))]
