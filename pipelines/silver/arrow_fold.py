"""Which change wins, in Arrow: of a table's events, the latest per key (:func:`latest_rows`),
by the rule :data:`pipelines.silver.rules.WINNER_ORDER` says, as the driver's fold
(:mod:`pipelines.silver.columnar`) takes it for a segment's events, small or big. Spark's path
runs the same rule as a window (:func:`pipelines.silver.changes.latest_per_key`): run inside
Spark's tasks, this code made that path's silver 20% slower (BENCHMARKS.md). Pure Arrow; no
Spark, no Delta.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.arrow_pool import side_by_side
from pipelines.silver.rules import WINNER_ORDER, ascending_order


def _group_key(values: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A key column as it groups: -0.0 is 0.0 (as Spark's grouping and MySQL's equality have it)."""
    if pa.types.is_floating(values.type):
        return pc.if_else(pc.equal(values, pa.scalar(0, values.type)), pa.scalar(0, values.type), values)
    return values


def latest_rows(events: pa.Table, keys: Sequence[str], seq: str, action: str) -> pa.Table:
    """Of ``events``, per key (the columns ``keys``; NULLs are equal, -0.0 is 0.0), the event that
    wins (:data:`pipelines.silver.rules.WINNER_ORDER`: the largest ``seq``, the upsert on a tie;
    ``action``'s ``"delete"`` sorts before ``"upsert"``); in ``seq`` order.

    >>> t = pa.table({"id": [1, 1, 2, 1], "s": ["03", "01", "02", "03"], "a": ["upsert", "upsert", "delete", "delete"]})
    >>> latest_rows(t, ["id"], "s", "a").to_pylist()
    [{'id': 2, 's': '02', 'a': 'delete'}, {'id': 1, 's': '03', 'a': 'upsert'}]
    """
    # (the winner last of its key: WINNER_ORDER, each field reversed)
    order = pc.sort_indices(pa.table({"seq": events.column(seq), "action": events.column(action)}),
                            ascending_order(WINNER_ORDER))
    ordered = [_group_key(events.column(k)).take(order) for k in keys]
    return taken(events, order.take(pa.array(_last_of_each(ordered))))


def taken(table: pa.Table, indices: pa.Array) -> pa.Table:
    """``table.take(indices)``, its columns taken side by side (:func:`pipelines.arrow_pool.side_by_side`:
    Arrow's take of a table takes them one after another)."""
    columns = side_by_side(lambda column: column.take(indices), table.columns, table.num_rows)
    return pa.Table.from_arrays(columns, schema=table.schema)


_HASH_FROM = 1024  # keys from which pandas' hash finds the last of each, faster than NumPy's sort


def _last_of_each(keys: Sequence[pa.ChunkedArray | pa.Array]) -> np.ndarray:
    """The positions, ascending, of the last row of each distinct key (NULLs are equal): one
    integer key without NULLs (the usual primary key) by pandas' hash of it, about twenty times
    faster than Arrow's group-by (below :data:`_HASH_FROM` keys, NumPy's sort); any other by that
    group-by."""
    if len(keys) == 1 and pa.types.is_integer(keys[0].type) and not keys[0].null_count:
        values = keys[0].to_numpy()
        if len(values) < _HASH_FROM:  # (NumPy's sort of a few values: a fifth of a pandas Series' cost)
            _, first_from_the_end = np.unique(values[::-1], return_index=True)
            return np.sort(len(values) - 1 - first_from_the_end)
        return np.flatnonzero(~pd.Series(values).duplicated(keep="last").to_numpy())
    names = [f"_k{i}" for i in range(len(keys))]
    grouped = pa.table({**dict(zip(names, keys)), "_i": pa.array(np.arange(len(keys[0]) if keys else 0))})
    return np.sort(grouped.group_by(names, use_threads=False).aggregate([("_i", "max")]).column("_i_max").to_numpy())
