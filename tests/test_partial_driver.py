"""Partial row images folded on the driver (:func:`pipelines.silver.driver_fold.apply_small` with
``partial``, what a run does with every small segment) give the silver table that Spark's path
(:func:`pipelines.silver.apply_changes` over :func:`pipelines.silver.changes_from_bronze`) gives
for the same bronze rows: random MINIMAL workloads of updates that carry some columns, key
changes (chains, a freed key taken again), deletes and inserts again, over a stored table, in
batches, with an insert's missing column taking its default; on delta-rs and delta-spark."""
from __future__ import annotations

import datetime as dt
import random

import pytest
from spark_fixtures import IMAGE_DDL, delta_backend, spark  # noqa: F401

from pipelines import delta_io
from pipelines.schema.typemap import ColumnSpec
from pipelines.silver import apply_changes, changes_from_bronze
from pipelines.silver.driver_fold import apply_small

SPECS = [ColumnSpec("id", "int"), ColumnSpec("a", "int"), ColumnSpec("b", "varchar", length=20)]
TYPES = ("LONG", "LONG", "VARCHAR(20) utf8mb4")
DEFAULTS = {"b": "dflt"}
T0 = dt.datetime(2024, 5, 1, 12, 0, 0, tzinfo=dt.timezone.utc)


def _cells(values: dict[int, object]) -> list[tuple] | None:
    """An image's cells (idx, name, type, text, bin) of the columns it carries."""
    return [(i, SPECS[i].name, TYPES[i], None if v is None else str(v), None) for i, v in sorted(values.items())]


def workload(seed: int, n: int) -> list[tuple]:
    """Bronze rows ``(_seq, op, commit_ts, after, before)`` of a MINIMAL-image server: a delete's and
    an update's before image is the key; an update's after image the columns it set (the key too
    when it moves the row); an insert logs every column, or leaves ``b`` to its default."""
    rng = random.Random(seed)
    live: dict[int, tuple] = {}
    out = []
    for s in range(1, n + 1):
        seq, ts = f"{s:04d}", T0 + dt.timedelta(seconds=s)
        free = [k for k in range(1, 7) if k not in live]
        op = rng.choice(["c", "u", "u", "u", "d"]) if live and free else ("c" if free else "u")
        if op == "c":
            k = rng.choice(free)
            a = rng.randrange(100)
            if rng.random() < 0.3:
                live[k] = (a, "dflt")
                out.append((seq, "c", ts, _cells({0: k, 1: a}), None))
            else:
                live[k] = (a, rng.choice(["x", "y", None]))
                out.append((seq, "c", ts, _cells({0: k, 1: a, 2: live[k][1]}), None))
        elif op == "d":
            k = rng.choice(sorted(live))
            del live[k]
            out.append((seq, "d", ts, None, _cells({0: k})))
        else:
            k = rng.choice(sorted(live))
            a, b = live[k]
            after = {}
            if rng.random() < 0.6:
                a = after[1] = rng.randrange(100)
            if rng.random() < 0.4:
                b = after[2] = rng.choice(["p", "q", None])
            new = k
            if free and rng.random() < 0.35:  # the row moves to a free key (chains follow)
                new = after[0] = rng.choice(free)
            del live[k]
            live[new] = (a, b)
            out.append((seq, "u", ts, _cells(after), _cells({0: k})))
    return out


def _with_spark(spark, rows, path, backend):
    df = spark.createDataFrame(
        rows, f"_seq STRING, op STRING, commit_ts TIMESTAMP, after {IMAGE_DDL}, before {IMAGE_DDL}")
    return apply_changes(spark, changes_from_bronze(df, SPECS, DEFAULTS), SPECS, path, keys=["id"], backend=backend)


def _on_driver(spark, rows, path, backend):
    def image(cells):
        return None if cells is None else [dict(zip(("idx", "name", "type", "text", "bin"), c)) for c in cells]

    fetched = [{"_seq": s, "op": op, "commit_ts": ts, "after": image(a), "before": image(b)} for s, op, ts, a, b in rows]
    return apply_small(spark, path, fetched, SPECS, ["id"], backend=backend, partial=True, defaults=DEFAULTS)


def _table(path: str) -> list[dict]:
    return sorted(delta_io.open_table(path).read_arrow().to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("seed", [0, 1, 2, 4, 5, 6])  # (seed 3 moves no row: every key stays taken)
def test_the_driver_fills_partial_images_as_spark_does(spark, delta_backend, tmp_path, seed):  # noqa: F811
    rows = workload(seed, 40)
    cut = len(rows) // 3  # a first batch, then the rest over the stored rows
    spark_path, driver_path = str(tmp_path / "spark"), str(tmp_path / "driver")
    for part in (rows[:cut], rows[cut:]):
        want = _with_spark(spark, part, spark_path, delta_backend)
        got = _on_driver(spark, part, driver_path, delta_backend)
        assert (got.inserted, got.updated, got.deleted) == (want.inserted, want.updated, want.deleted)
    assert _table(driver_path) == _table(spark_path)
    # (what the workload is made of: partial updates, key changes, inserts left to b's default)
    assert any(op == "u" and len(a) < 3 for _s, op, _t, a, _b in rows)
    assert any(op == "u" and a and a[0][0] == 0 for _s, op, _t, a, _b in rows)
    assert any(op == "c" and len(a) == 2 for _s, op, _t, a, _b in workload(seed, 200))


def test_a_chain_of_key_changes_carries_the_row_along(spark, tmp_path):  # noqa: F811
    # stored 1 and 2; 1 -> 5 -> 6 carries a and b along, and 2 moves into the freed key 1
    ts = [T0 + dt.timedelta(seconds=s) for s in range(8)]
    first = [("01", "c", ts[1], _cells({0: 1, 1: 10, 2: "x"}), None), ("02", "c", ts[2], _cells({0: 2, 1: 20}), None)]
    batch = [("03", "u", ts[3], _cells({1: 11}), _cells({0: 1})),
             ("04", "u", ts[4], _cells({0: 5}), _cells({0: 1})),
             ("05", "u", ts[5], _cells({0: 6, 2: "w"}), _cells({0: 5})),
             ("06", "u", ts[6], _cells({0: 1}), _cells({0: 2})),
             ("07", "u", ts[7], _cells({1: 66}), _cells({0: 6}))]
    path = str(tmp_path / "t")
    _on_driver(spark, first, path, "rs")
    _on_driver(spark, batch, path, "rs")
    assert [(r["id"], r["a"], r["b"], r["_seq"]) for r in _table(path)] == [(1, 20, "dflt", "06"), (6, 66, "w", "07")]
