"""silver/rules: what a key's winning event does, which copies of a keyless table's rows survive
and where a partial image's columns come from, each written once, and each engine's compiled form of them (NumPy for the driver's fold,
Spark's SQL for Spark's path) giving what the rule gives."""
from __future__ import annotations

import itertools
import random

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines.silver import changes, driver_fold
from pipelines.silver.columns import COMMIT_TS, DELETE, INSERT, SEQ, UPSERT, WORK
from pipelines.silver.keyless import fates
from pipelines.silver.plan import keyless_actions
from pipelines.silver.rules import (FILL_HOLDS, FILL_LEAVES, FILL_ORDER, FILL_SOURCES, KEYED_FLAGS, KEYLESS_ACTIONS,
                                    KEYLESS_ORDER, OUTCOMES, compiled_fill, compiled_outcomes, fill_source,
                                    keyed_outcome, keyless_fate, keyless_kept, keyless_missing, sort_in)

COMBOS = [dict(zip(KEYED_FLAGS, values)) for values in itertools.product([False, True], repeat=len(KEYED_FLAGS))]


def _meant(stored: bool, newer: bool, upsert: bool, soft: bool) -> str:
    """The outcome as the MERGE clauses apply it: a new key's upsert inserts; a delete removes (or,
    with soft deletes, marks) a stored row it is newer than, and with soft deletes records the
    delete of a key never stored; an upsert newer than the stored row updates it."""
    if not stored:
        return "inserted" if upsert else ("deleted" if soft else "unchanged")
    if not newer:
        return "unchanged"
    return "updated" if upsert else "deleted"


def test_the_rule_says_what_the_merge_clauses_do():
    assert {keyed_outcome(**c) for c in COMBOS} == set(OUTCOMES)
    for c in COMBOS:
        assert keyed_outcome(**c) == _meant(**c), c


def test_the_drivers_compiled_rule_gives_the_rules_outcomes():
    flags = {f: np.array([c[f] for c in COMBOS]) for f in KEYED_FLAGS}
    outcomes = compiled_outcomes(flags, np.logical_and, np.logical_not, np.ones(len(COMBOS), bool))
    got = np.select([cond for _, cond in outcomes], [OUTCOMES.index(k) for k, _ in outcomes], -1)
    assert [OUTCOMES[i] for i in got] == [keyed_outcome(**c) for c in COMBOS]


def test_sparks_compiled_rule_gives_the_rules_outcomes(spark):  # noqa: F811
    df = spark.createDataFrame([tuple(c[f] for f in KEYED_FLAGS) for c in COMBOS], list(KEYED_FLAGS))
    kind = None
    for k, cond in compiled_outcomes({f: F.col(f) for f in KEYED_FLAGS}, lambda a, b: a & b, lambda a: ~a, F.lit(True)):
        kind = F.when(cond, k) if kind is None else kind.when(cond, k)
    got = {tuple(r[f] for f in KEYED_FLAGS): r["kind"] for r in df.withColumn("kind", kind).collect()}
    assert got == {tuple(c[f] for f in KEYED_FLAGS): keyed_outcome(**c) for c in COMBOS}


# --- keyless tables: which copies survive a batch's deletes --------------------------------------

def _keyless_by_rule(candidates: list[tuple], deletes: list[int]) -> tuple[dict, int]:
    """The keyless rule in plain Python: per candidate ``(identity, origin, seq)`` its action
    (None: nothing), and the deletes that find no candidate."""
    actions, missing = {}, 0
    for ident in {c[0] for c in candidates} | set(deletes):
        mine = sorted((c for c in candidates if c[0] == ident), key=lambda c: c[2],
                      reverse=KEYLESS_ORDER == (("seq", "descending"),))
        ndel = deletes.count(ident)
        kept = keyless_kept(len(mine), ndel, max)
        actions.update({c: KEYLESS_ACTIONS.get((c[1], place < kept)) for place, c in enumerate(mine)})
        missing += keyless_missing(len(mine), ndel, max)
    return actions, missing


def _keyless_cases(seed: int, n: int = 60) -> tuple[list[tuple], list[int]]:
    """Candidates over a few identities, stored and batch copies' seqs interleaved, and deletes."""
    rng = random.Random(seed)
    seqs = rng.sample(range(10_000, 99_999), n)
    candidates = [(rng.randrange(6), rng.choice(("batch", "stored")), f"{s:08d}") for s in seqs]
    return candidates, [rng.randrange(8) for _ in range(rng.randrange(n))]


def test_the_keyless_rule_leaves_the_copies_the_source_has():
    """Stored copies are older than the batch's; after its deletes the source holds
    max(stored + batch - deletes, 0) copies, and a delete past the last copy found none."""
    for stored, batch, deletes in itertools.product(range(4), range(4), range(5)):
        kept = keyless_kept(stored + batch, deletes, max)
        assert kept == max(stored + batch - deletes, 0)
        assert keyless_missing(stored + batch, deletes, max) == max(deletes - stored - batch, 0)
        inserted, removed = min(batch, kept), stored - max(kept - batch, 0)  # the newest survive
        assert stored - removed + inserted == kept
    assert set(KEYLESS_ACTIONS.values()) == {INSERT, DELETE}
    assert keyless_fate(INSERT) == ("batch", True) and keyless_fate(DELETE) == ("stored", False)


@pytest.mark.parametrize("seed", range(5))
def test_the_drivers_keyless_fold_follows_the_rule(seed):
    candidates, deletes = _keyless_cases(seed)
    want, missing = _keyless_by_rule(candidates, deletes)
    groups = 8
    survives, got_missing = fates(np.array([c[0] for c in candidates], np.int64), np.array(deletes, np.int64),
                                  pa.array([c[2] for c in candidates]), groups)
    got = {c: KEYLESS_ACTIONS.get((c[1], bool(s))) for c, s in zip(candidates, survives)}
    assert got == want and got_missing == missing


@pytest.mark.parametrize("seed", range(3))
def test_sparks_keyless_plan_follows_the_rule(spark, seed):  # noqa: F811
    candidates, deletes = _keyless_cases(seed)
    want, missing = _keyless_by_rule(candidates, deletes)
    rows = spark.createDataFrame(
        [(v, origin, seq, None) for v, origin, seq in candidates]
        + [(v, "delete", None, f"{i:08d}") for i, v in enumerate(deletes)],
        f"v INT, origin STRING, {SEQ} STRING, {WORK}dseq STRING").withColumn(COMMIT_TS, F.lit(None).cast("timestamp"))
    ranked, action = keyless_actions(rows, ["v"], "origin")
    out = ranked.withColumn("action", action).collect()
    got = {(r["v"], r["origin"], r[SEQ]): r["action"] for r in out if r["origin"] != "delete"}
    assert got == want
    assert sum(r["action"] == "missing" for r in out) == missing
    assert {r["action"] for r in out if r["origin"] == "delete"} <= {"missing", None}


# --- partial row images: where each column of an event's row comes from ------------------------

FILL_COMBOS = [dict(delete=d, carried=c) for d in (False, True) for c in (False, True)]


def _fill_meant(table: str, delete: bool, carried: bool) -> str:
    """What a partial image means on the server: a delete ends the key's row (it leaves nothing)
    and is recorded with its own before image; an upsert changes the columns its image carries and
    keeps the others as the row had them."""
    if delete:
        return "null" if table == "leaves" else "own"
    return "own" if carried else "before"


def test_the_fill_rules_say_what_partial_images_mean():
    assert {source for _, source in FILL_LEAVES + FILL_HOLDS} <= set(FILL_SOURCES)
    for combo in FILL_COMBOS:
        assert fill_source(FILL_LEAVES, **combo) == _fill_meant("leaves", **combo), combo
        assert fill_source(FILL_HOLDS, **combo) == _fill_meant("holds", **combo), combo


def test_the_drivers_compiled_fill_rules_give_the_rules_sources():
    event = type("E", (), {})()
    for lines, compiled in ((FILL_LEAVES, driver_fold.LEAVES), (FILL_HOLDS, driver_fold.HOLDS)):
        for combo in FILL_COMBOS:
            event.action, event.vals, event.flags = DELETE if combo["delete"] else UPSERT, ["own"], [combo["carried"]]
            got = driver_fold._filled_from(compiled, event, ["before"])[0]
            assert (got or "null") == fill_source(lines, **combo), combo


def test_sparks_compiled_fill_rules_give_the_rules_sources(spark):  # noqa: F811
    df = spark.createDataFrame([(c["delete"], c["carried"]) for c in FILL_COMBOS], "delete BOOLEAN, carried BOOLEAN")
    conds = {"delete": F.col("delete"), "carried": F.col("carried")}
    for lines in (FILL_LEAVES, FILL_HOLDS):
        sources = {s: F.lit(s) for s in FILL_SOURCES}
        got = df.withColumn("source", changes.case_of(compiled_fill(lines, conds, sources))).collect()
        assert {(r["delete"], r["carried"]): r["source"] for r in got} == \
            {(c["delete"], c["carried"]): fill_source(lines, **c) for c in FILL_COMBOS}


def test_python_and_sparks_orders_of_a_keys_events_agree(spark):  # noqa: F811
    rng = random.Random(7)
    events = [(o, f"{rng.randrange(5):02d}", rng.choice((UPSERT, DELETE))) for o in (1,) * 12] + [(0, "", "stored")]
    rng.shuffle(events)
    mine = list(events)
    sort_in(mine, FILL_ORDER, {"order": lambda e: e[0], "seq": lambda e: e[1], "action": lambda e: e[2]})
    df = spark.createDataFrame(events, "order INT, seq STRING, action STRING")
    cols = {"order": F.col("order"), "seq": F.col("seq"), "action": F.col("action")}
    ordered = df.orderBy(*[cols[f].desc() if d == "descending" else cols[f].asc() for f, d in FILL_ORDER]).collect()
    assert [tuple(r) for r in ordered] == mine
    assert mine[0] == (0, "", "stored")
