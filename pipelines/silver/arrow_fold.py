"""Which change wins, in Arrow: of a table's events, the latest per key (:func:`latest_rows`),
as the driver's fold (:mod:`pipelines.silver.columnar`) takes it for a segment's events, small or
big. Spark's path writes the same rule as a window (:func:`pipelines.silver.changes.latest_per_key`):
run inside Spark's tasks, this code made that path's silver 20% slower (BENCHMARKS.md). Pure
Arrow; no Spark, no Delta.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

def _group_key(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A key column as it groups: -0.0 is 0.0 (as Spark's grouping and MySQL's equality have it)."""
    if pa.types.is_floating(values.type):
        return pc.if_else(pc.equal(values, pa.scalar(0, values.type)), pa.scalar(0, values.type), values)
    return values


def latest_rows(events: pa.Table, keys: Sequence[str], seq: str, action: str) -> pa.Table:
    """Of ``events``, per key (the columns ``keys``; NULLs are equal, -0.0 is 0.0), the event with
    the largest ``seq``, the upsert on a tie (``action``: ``"delete"`` sorts before ``"upsert"``);
    in ``seq`` order.

    >>> t = pa.table({"id": [1, 1, 2, 1], "s": ["03", "01", "02", "03"], "a": ["upsert", "upsert", "delete", "delete"]})
    >>> latest_rows(t, ["id"], "s", "a").to_pylist()
    [{'id': 2, 's': '02', 'a': 'delete'}, {'id': 1, 's': '03', 'a': 'upsert'}]
    """
    n = events.num_rows
    names = [f"_k{i}" for i in range(len(keys))]
    # sorted and grouped: only the keys, the order and the event's number, not its values
    order = pa.table({**{name: _group_key(events.column(k)) for name, k in zip(names, keys)},
                      "_seq": events.column(seq), "_action": events.column(action), "_e": pa.array(np.arange(n))})
    order = order.take(pc.sort_indices(order, [("_seq", "ascending"), ("_action", "ascending")]))
    order = order.append_column("_i", pa.array(np.arange(n)))
    last = order.group_by(names, use_threads=False).aggregate([("_i", "max")]).column("_i_max")
    return events.take(order.column("_e").take(last.take(pc.sort_indices(last))))
