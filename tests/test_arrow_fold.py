"""arrow_fold: the latest event per key, the rule every fold of silver follows, against a fold
written here in plain Python."""
from __future__ import annotations

import random

import pyarrow as pa
import pytest

from pipelines import arrow_pool
from pipelines.silver import arrow_fold


def _events(n: int, seed: int, nulls: bool = True) -> pa.Table:
    rnd = random.Random(seed)
    return pa.table({"k": [rnd.choice([None, *range(40)] if nulls else range(-20, 20)) for _ in range(n)],
                     "s": [f"{rnd.randrange(60):03d}" for _ in range(n)],
                     "a": [rnd.choice(["upsert", "delete"]) for _ in range(n)],
                     "i": list(range(n))})


def _by_hand(events: pa.Table) -> dict:
    """Per key, the (seq, action) that wins: the largest seq, the upsert on a tie."""
    best = {}
    for e in events.to_pylist():
        mine = (e["s"], e["a"] == "upsert")
        if e["k"] not in best or mine > best[e["k"]]:
            best[e["k"]] = mine
    return best


@pytest.mark.parametrize("threads", [False, True])  # (the winners' columns taken side by side)
@pytest.mark.parametrize("nulls", [True, False])  # (an integer key without NULLs: NumPy or pandas, not Arrow's group-by)
@pytest.mark.parametrize("hashed", [False, True])  # (that key's last of each: NumPy's sort, or pandas' hash)
@pytest.mark.parametrize("seed", range(5))
def test_latest_rows_keep_the_winner_of_each_key(seed, nulls, hashed, threads, monkeypatch):
    if threads:
        monkeypatch.setattr(arrow_pool, "THREADS_FROM", 0)
    monkeypatch.setattr(arrow_fold, "_HASH_FROM", 0 if hashed else 10_000)
    events = _events(500, seed, nulls)
    events = pa.concat_tables([events.slice(0, 123), events.slice(123)])  # (in chunks, as a fold's events are)
    got = arrow_fold.latest_rows(events, ["k"], "s", "a").to_pylist()
    assert {e["k"]: (e["s"], e["a"] == "upsert") for e in got} == _by_hand(events)
    assert len(got) == len(_by_hand(events)) and [e["s"] for e in got] == sorted(e["s"] for e in got)


def test_a_table_taken_in_threads_is_the_table_taken(monkeypatch):
    table = pa.table({"a": list(range(10)), "b": [str(i) for i in range(10)], "c": [None] * 10})
    indices = pa.array([9, 0, 3, 3])
    assert arrow_fold.taken(table, indices) == table.take(indices)  # (under the threshold)
    monkeypatch.setattr(arrow_pool, "THREADS_FROM", 0)
    assert arrow_fold.taken(table, indices).equals(table.take(indices))
    assert arrow_fold.taken(table, pa.array([], pa.int64())).num_rows == 0
