"""silver/rules: what a key's winning event does, written once, and each engine's compiled form
of it (NumPy for the driver's fold, Spark's SQL for Spark's path) giving the same outcome for
every combination of flags."""
from __future__ import annotations

import itertools

import numpy as np
from pyspark.sql import functions as F
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines.silver.rules import KEYED_FLAGS, OUTCOMES, compiled_outcomes, keyed_outcome

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
