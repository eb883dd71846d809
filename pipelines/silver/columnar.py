"""A batch's fold in Arrow, on the driver: every segment the driver applies is typed by
:mod:`pipelines.silver.arrow_typing` (:func:`typed_images`), small
(:mod:`pipelines.silver.driver_fold`) or big (:mod:`pipelines.silver.big_segments`), and a keyed
table's changes are folded here (:func:`fold_keyed`, :func:`classify`); a keyless table's by
:mod:`pipelines.silver.keyless`.

A segment of hundreds of thousands of changes costs Spark's path several passes (typing, key
events, latest per key, classification) and its MERGE. Here a segment's flat cells
(:mod:`pipelines.silver.segment_cells`) are typed a column at a time, then folded with Arrow's
sort and group-by: per key, the change with the largest ``_seq`` (an upsert before a delete on a
tie), classified against silver's stored ``_seq`` by a join (:func:`fold_keyed`,
:func:`classify`), then written by :func:`pipelines.silver.driver_writes.write`. A big segment of
any size is read, typed and folded in parts of bounded size, the parts' latest events folded
again (:func:`latest_per_key`).

The semantics are :func:`pipelines.silver.driver_fold.apply_small`'s (which folds partial images
and keyless identities over this typing). A value that does not convert, or a change this fold
does not take (a NULL or floating-point key, an unknown op), raises
:class:`~pipelines.silver.typed_values.NotCanonical` before anything is written: the caller then
takes Spark's path. ``tests/test_columnar.py`` checks big segments (whole and read by parts)
against Spark's path table for table.
"""
from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.bronze.schema import INSERT_OPS, OPS, UPSERT_OPS
from pipelines.delta_io import spark_type_to_arrow
from pipelines.schema.typemap import ColumnSpec, type_rule
from pipelines.silver.arrow_fold import latest_rows
from pipelines.silver.arrow_typing import columns_of, every, typed_cells
from pipelines.silver.segment_cells import Cells, Segment
from pipelines.silver.columns import DELETE, UPSERT
from pipelines.silver.driver_writes import Target
from pipelines.silver import ranges
from pipelines.silver.rules import OUTCOMES, compiled_outcomes
from pipelines.silver.typed_values import NotCanonical

# -- folding -----------------------------------------------------------------------------

def _checked(seg: Segment) -> None:
    """What :func:`pipelines.silver.driver_fold._typed` refuses: an unknown op, a NULL ``_seq``, a
    change without the image it needs."""
    op = seg.op
    if not every(pc.is_in(op, pa.array(OPS))) or op.null_count or seg.seq.null_count:
        raise NotCanonical("a change with an unknown op or without _seq")
    after, before = seg.images["after"].present, seg.images["before"].present
    is_c = pc.is_in(op, pa.array(INSERT_OPS)).to_numpy(zero_copy_only=False)
    is_d = pc.equal(op, "d").to_numpy(zero_copy_only=False)
    if not after[~is_d].all() or not before[~is_c].all():
        raise NotCanonical("a change without the image it needs")


# the types whose zero or invalid values typing nulls and counts (the run log's "zero dates nulled")
_COUNTED = frozenset({"date", "datetime", "timestamp", "year"})


def typed_images(seg: Segment, specs: Sequence[ColumnSpec], t: Target, fixes: dict[int, tuple], *,
                 keys_only: bool = False) -> tuple[dict[str, dict[int, pa.Array]], int]:
    """Per image, per spec that a silver value column holds, its typed values for every change;
    and the zero dates nulled. Checks the changes first (:func:`_checked`); the segment's cells
    are released once typed (its ``images`` emptied). ``keys_only``: of the before image, only
    the key columns are typed, and the temporal ones (their zero dates are counted all the same):
    with hard deletes, nothing else of it reaches silver."""
    _checked(seg)
    zeros, typed = 0, {}
    # the columns silver holds, each of the type of its silver column
    columns = {i: (spec, ordinal, spark_type_to_arrow(t.values.fields[t.value_idx.index(i)].dataType), fix)
               for i, (spec, ordinal, _, fix) in columns_of(specs, fixes).items() if i in t.value_idx}
    needed = {i: c for i, c in columns.items() if i in (t.key_spec or ()) or type_rule(c[0])[0] in _COUNTED}
    for image, cells in seg.images.items():
        done = typed_cells(cells, seg.n, needed if keys_only and image == "before" else columns)
        typed[image] = {i: values for i, (values, _) in done.items()}
        zeros += sum(z for _, z in done.values())
    seg.images.clear()  # (typed: released before the events are built)
    return typed, zeros


def fold_keyed(seg: Segment, specs: Sequence[ColumnSpec], t: Target, fixes: dict[int, tuple], *,
               delete_mode: str) -> tuple[pa.Table, int]:
    """The segment's latest event per key (``_seq`` order; an upsert before a delete on a tie),
    as a table of silver's value columns, ``_seq``, ``action``, ``op`` and ``commit_ts``; and the
    zero dates nulled in its typed images. The segment's cells are released once typed
    (:func:`typed_images`): a big segment's memory goes to one copy at a time. The latest
    events of a segment's parts, folded again by :func:`latest_per_key`, are the segment's.
    With hard deletes a delete event holds its keys only (its other values NULL): a delete
    takes the stored row away by its key."""
    n = seg.n
    typed, zeros = typed_images(seg, specs, t, fixes, keys_only=delete_mode == "hard")
    op = seg.op
    upsert = pc.is_in(op, pa.array(UPSERT_OPS))
    changed = pa.array(np.zeros(n, bool))
    for k in t.key_spec:
        a, b = typed["after"][k], typed["before"][k]
        differs = pc.fill_null(pc.not_equal(a, b), pc.xor(pc.is_null(a), pc.is_null(b)))
        changed = pc.or_(changed, differs)
    delete = pc.or_(pc.equal(op, "d"), pc.and_(pc.equal(op, "u"), changed))

    def events(image: str, mask: pa.Array, action: str, ops: pa.Array) -> pa.Table:
        rows = image_rows(seg, typed[image], mask, t, ops)
        return rows.append_column("_action", pa.array([action] * rows.num_rows, pa.string()))
    ev = pa.concat_tables([events("after", upsert, UPSERT, op),
                           events("before", delete, DELETE, pa.array(["d"] * n, pa.string()))])
    typed.clear()  # (the images' typed columns are in the events now)
    return latest_events(ev, t), zeros


def image_rows(seg: Segment, typed: dict[int, pa.Array], mask: pa.Array, t: Target, ops: pa.Array) -> pa.Table:
    """The changes of ``mask`` as rows of one of their images (``typed``: :func:`typed_images`'
    columns of it): silver's value columns ``_v{j}`` (NULL where the specs lack one, or it was not
    typed), ``_seq``, ``_op`` (``ops``) and ``_ts``."""
    k = _count(mask)
    columns = [pc.filter(typed[i], mask) if i in typed else pa.nulls(k, spark_type_to_arrow(f.dataType))
               for i, f in zip(t.value_idx, t.values.fields)]
    return pa.Table.from_arrays([*columns, pc.filter(seg.seq, mask), pc.filter(ops, mask), pc.filter(seg.commit_ts, mask)],
                                names=[*[f"_v{j}" for j in range(len(columns))], "_seq", "_op", "_ts"])


def key_columns(t: Target) -> list[str]:
    return [f"_v{t.values.fieldNames().index(k)}" for k in t.keys]


def events_table(events: Sequence[tuple], t: Target) -> pa.Table:
    """Events ``(seq, action, op, commit_ts, values in silver's value-column order)`` as
    :func:`fold_keyed` builds them from a segment's images."""
    arrow_types = [spark_type_to_arrow(f.dataType) for f in t.values.fields]
    columns = [pa.array([e[4][j] for e in events], to) for j, to in enumerate(arrow_types)]
    return pa.Table.from_arrays([*columns, *(pa.array([e[i] for e in events], to) for i, to in
                                             ((0, pa.string()), (1, pa.string()), (2, pa.string()),
                                              (3, pa.timestamp("us", "UTC"))))],
                                names=[*[f"_v{j}" for j in range(len(columns))], "_seq", "_action", "_op", "_ts"])


def latest_events(ev: pa.Table, t: Target) -> pa.Table:
    """Of a segment's events (:func:`fold_keyed`'s, :func:`events_table`'s), the latest per key
    (:func:`latest_per_key`); :class:`NotCanonical` for a NULL or floating-point key."""
    keys = key_columns(t)
    if any(ev.column(k).null_count for k in keys):
        raise NotCanonical("a change with a NULL key")  # (Spark's path names the error)
    if any(pa.types.is_floating(ev.schema.field(k).type) for k in keys):
        raise NotCanonical("a floating-point key (-0.0 and 0.0 are one key)")
    return latest_per_key(ev, t)


def latest_per_key(ev: pa.Table, t: Target) -> pa.Table:
    """Of events (:func:`fold_keyed`'s columns), the latest per key
    (:func:`pipelines.silver.arrow_fold.latest_rows`); in ``_seq`` order."""
    return latest_rows(ev, key_columns(t), "_seq", "_action")


def classify(latest: pa.Table, t: Target, stored: pa.Table | None, delete_mode: str) -> tuple[pa.Table, dict]:
    """The MERGE source (:attr:`Target.source_schema`) of the latest events, classified against
    silver's stored ``(keys, _seq)`` as :func:`pipelines.silver.plan.plan_keyed` does; and the counts."""
    keys = key_columns(t)
    latest = latest.append_column("_i", pa.array(np.arange(latest.num_rows)))  # (its order, kept through the join)
    upsert = pc.equal(latest.column("_action"), UPSERT)
    if stored is None or not stored.num_rows:
        have = pa.array(np.zeros(latest.num_rows, bool))
        newer = pa.array(np.ones(latest.num_rows, bool))
    else:
        probe = pa.Table.from_arrays([*[stored.column(k).cast(latest.schema.field(c).type) for k, c in zip(t.keys, keys)],
                                      stored.column(t.own.seq).cast(pa.string()),  # (delta-rs may read string_view)
                                      pa.array(np.ones(stored.num_rows, bool))],
                                     names=[*keys, "_stored", "_have"])
        joined = latest.join(probe, keys=keys, join_type="left outer", use_threads=False)
        latest = joined.take(pc.sort_indices(joined, [("_i", "ascending")]))
        have = pc.is_valid(latest.column("_have"))
        stored_seq = latest.column("_stored")
        newer = pc.fill_null(pc.or_kleene(pc.is_null(stored_seq), pc.greater(latest.column("_seq"), stored_seq)), True)
        upsert = pc.equal(latest.column("_action"), UPSERT)
    n = latest.num_rows
    flags = {"stored": _bools(have), "newer": _bools(newer), "upsert": _bools(upsert),
             "soft": np.full(n, delete_mode == "soft")}
    outcomes = compiled_outcomes(flags, np.logical_and, np.logical_not, np.ones(n, bool))
    kind = np.select([cond for _, cond in outcomes], [OUTCOMES.index(k) for k, _ in outcomes],
                     OUTCOMES.index("unchanged")) if n else np.zeros(0, np.int64)
    counts = dict(zip(OUTCOMES, np.bincount(kind, minlength=len(OUTCOMES)).tolist()))
    return merge_source(latest.filter(pa.array(kind != OUTCOMES.index("unchanged"))), t), counts


def _bools(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    return np.asarray(values.to_numpy(zero_copy_only=False), bool)


def merge_source(latest: pa.Table, t: Target) -> pa.Table:
    """Latest events (:func:`fold_keyed`'s columns) as the MERGE source (:attr:`Target.source_schema`)."""
    action = latest.column("_action")
    schema = t.source_schema
    arrays = [*[latest.column(f"_v{j}") for j in range(len(t.values.fields))], latest.column("_seq"),
              latest.column("_op"), latest.column("_ts"), pc.equal(action, DELETE), action]
    arrow = pa.Table.from_arrays(arrays, names=schema.fieldNames())
    return arrow.cast(pa.schema([pa.field(f.name, spark_type_to_arrow(f.dataType)) for f in schema.fields]))


def _count(mask: pa.Array) -> int:
    return int(pc.sum(mask).as_py() or 0)


@contextlib.contextmanager
def arrow_refusals():
    """What Arrow refuses to do with a segment (a cast, group or join on a type it does not take
    there) raises :class:`NotCanonical`: Spark's path applies the segment."""
    try:
        yield
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise NotCanonical(f"Arrow cannot fold this segment: {e}") from None


def above_watermark(seg: Segment, mark: str | None) -> Segment:
    """The segment's changes above the table's watermark ``mark`` (:func:`pipelines.silver.ranges.arrow_above`)."""
    if mark is None or not seg.n:
        return seg
    keep = ranges.arrow_above(seg.seq, mark).to_numpy(zero_copy_only=False)
    return seg if keep.all() else _only(seg, keep)


def _only(seg: Segment, keep: np.ndarray) -> Segment:
    """The segment's changes where ``keep`` (the watermark passed those: the first ones are dropped)."""
    rank = np.cumsum(keep) - 1
    images = {}
    for image, cells in seg.images.items():
        mine = keep[cells.row]
        images[image] = Cells(rank[cells.row[mine]], cells.idx.filter(pa.array(mine)), cells.text.filter(pa.array(mine)),
                              cells.bin.filter(pa.array(mine)), cells.name.filter(pa.array(mine)), cells.present[keep])
    mask = pa.array(keep)
    return Segment(seg.seq.filter(mask), seg.op.filter(mask), seg.commit_ts.filter(mask), images)
