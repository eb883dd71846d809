"""A keyless table's changes folded in Arrow: its rows are identified by all their values.

The rules are :mod:`pipelines.silver.rules`' (Spark's path: :func:`pipelines.silver.plan.plan_keyless`). Per identity (the values of every
column the batch's images carry, NULLs matching NULLs): the batch's copies (each upsert's after
image) and silver's live copies, newest first, survive the batch's deletes (each delete's and
update's before image), one copy per delete; the stored copies that do not survive are removed
(soft: flagged), the batch's copies that survive inserted, and a delete that finds no copy left
is counted (``missing_deletes``). A batch that deletes nothing inserts every copy, whatever silver holds.

:func:`keyless_events` types a segment's images (:func:`pipelines.silver.columnar.typed_images`)
into its copies and deletes; :func:`fold` folds them (the copies and deletes of a big segment's
parts concatenated first) with silver's live copies into the MERGE source.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.bronze.schema import UPSERT_OPS
from pipelines.schema.typemap import ColumnSpec
from pipelines.silver.columnar import image_rows, merge_source, typed_images
from pipelines.silver import rules
from pipelines.silver.columns import DELETE, INSERT
from pipelines.silver.driver_writes import Target
from pipelines.silver.segment_cells import Segment

_DELETING_OPS = ("d", "u")  # a change whose before image goes


def identity(t: Target) -> list[str]:
    """Silver's names of the columns that identify a row: the value columns the specs hold."""
    return [f.name for f, i in zip(t.values.fields, t.value_idx) if i is not None]


def keyless_events(seg: Segment, specs: Sequence[ColumnSpec], t: Target,
                   fixes: dict[int, tuple]) -> tuple[pa.Table, pa.Table, int]:
    """The segment's copies (its upserts' after images) and deletes (its deletes' and updates'
    before images), each a table of silver's value columns ``_v{j}``, ``_seq``, ``_op`` and
    ``_ts``; and the zero dates nulled. The segment's cells are released once typed."""
    typed, zeros = typed_images(seg, specs, t, fixes)
    op = seg.op
    copies = image_rows(seg, typed["after"], pc.is_in(op, pa.array(UPSERT_OPS)), t, op)
    deletes = image_rows(seg, typed["before"], pc.is_in(op, pa.array(_DELETING_OPS)), t, op)
    return copies, deletes, zeros


def _group_ids(ids: pa.Table) -> np.ndarray:
    """Per row of ``ids``, the number of its group of equal values (NULLs equal, -0.0 is 0.0)."""
    codes = []
    for column in ids.columns:
        values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if pa.types.is_floating(values.type):
            values = pc.if_else(pc.equal(values, 0), pa.scalar(0.0, values.type), values)
        encoded = pc.dictionary_encode(values, null_encoding="encode")
        codes.append(encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64))
    if not codes:
        return np.zeros(ids.num_rows, np.int64)
    _, inverse = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
    return inverse.reshape(-1)


def _live(stored: pa.Table | None, t: Target, like: pa.Table) -> pa.Table:
    """Silver's live copies (not soft-deleted) as ``like``'s identity columns (a column silver
    lacks yet: NULL) and ``_seq``."""
    names = identity(t)
    slots = [f"_v{t.values.fieldNames().index(n)}" for n in names]
    if stored is None or not stored.num_rows:
        return pa.table({**{s: pa.nulls(0, like.schema.field(s).type) for s in slots}, "_seq": pa.nulls(0, pa.string())})
    deleted = stored.column(t.own.deleted)
    live = stored.filter(pc.invert(pc.fill_null(deleted, False)))
    have = set(live.column_names)
    return pa.table({**{s: (live.column(n).cast(like.schema.field(s).type) if n in have
                            else pa.nulls(live.num_rows, like.schema.field(s).type)) for n, s in zip(names, slots)},
                     "_seq": live.column(t.own.seq).cast(pa.string())})


def fates(g_candidate: np.ndarray, g_delete: np.ndarray, seqs: pa.ChunkedArray | pa.Array,
          groups: int) -> tuple[np.ndarray, int]:
    """:mod:`pipelines.silver.rules`' keyless rule in NumPy: per candidate (its identity's number in
    ``g_candidate``, its ``_seq`` in ``seqs``), whether it survives the deletes (their identities'
    numbers in ``g_delete``); and how many deletes find no candidate. ``groups``: identities."""
    n_deletes = np.bincount(g_delete, minlength=groups)
    n_candidates = np.bincount(g_candidate, minlength=groups)
    keep = rules.keyless_kept(n_candidates, n_deletes, np.maximum)
    order = pc.sort_indices(pa.table({"g": g_candidate, "seq": seqs}),
                            [("g", "ascending"), *rules.KEYLESS_ORDER]).to_numpy()
    ranked = g_candidate[order]
    rank = np.empty(len(order), np.int64)  # each candidate's place in its identity, from 1
    rank[order] = np.arange(len(order)) - np.searchsorted(ranked, ranked, "left") + 1
    return rank <= keep[g_candidate], int(rules.keyless_missing(n_candidates, n_deletes, np.maximum).sum())


def fold(copies: pa.Table, deletes: pa.Table, stored: pa.Table | None, t: Target) -> tuple[pa.Table, dict]:
    """The MERGE source (:attr:`Target.source_schema`) of a keyless batch's ``copies`` and
    ``deletes`` (:func:`keyless_events`) against silver's ``stored`` rows (its identity columns,
    ``_seq`` and deleted flag; those of the deleted identities at least), and the counts."""
    counts = {"inserted": copies.num_rows, "updated": 0, "deleted": 0, "unchanged": 0, "missing_deletes": 0}
    action = pa.array([INSERT] * copies.num_rows, pa.string())
    if not deletes.num_rows:  # (nothing goes: every copy is a row of its own)
        return merge_source(copies.append_column("_action", action), t), counts
    slots = [f"_v{t.values.fieldNames().index(n)}" for n in identity(t)]
    live = _live(stored, t, copies)
    nc, nd = copies.num_rows, deletes.num_rows
    gid = _group_ids(pa.concat_tables([copies.select(slots), deletes.select(slots), live.select(slots)]))
    groups = int(gid.max()) + 1
    g_copy, g_delete, g_live = gid[:nc], gid[nc:nc + nd], gid[nc + nd:]
    seqs = pa.chunked_array([copies.column("_seq").cast(pa.string()), live.column("_seq")], pa.string())
    survives, missing = fates(np.concatenate([g_copy, g_live]), g_delete, seqs, groups)
    fate = {"batch": survives[:nc], "stored": survives[nc:]}
    inserted, removed = (fate[o] == s for o, s in map(rules.keyless_fate, (INSERT, DELETE)))
    counts.update(inserted=int(inserted.sum()), deleted=int(removed.sum()), missing_deletes=missing)
    # a removed copy's change: the last delete of its identity
    never = np.iinfo(np.int64).min
    stamps = pc.fill_null(deletes.column("_ts").cast(pa.int64()), never).to_numpy()
    last = np.full(groups, never, np.int64)
    np.maximum.at(last, g_delete, stamps)
    gone = live.filter(pa.array(removed))
    k = gone.num_rows
    at = last[g_live[removed]]
    removed_ts = pa.array(at, pa.int64(), mask=at == never).cast(copies.schema.field("_ts").type)
    values = {c: gone.column(c) if c in slots else pa.nulls(k, copies.schema.field(c).type)
              for c in copies.column_names if c.startswith("_v")}
    doomed = pa.table({**values, "_seq": gone.column("_seq"), "_op": pa.array(["d"] * k, pa.string()),
                       "_ts": removed_ts, "_action": pa.array([DELETE] * k, pa.string())})
    kept = copies.filter(pa.array(inserted)).append_column("_action", pa.array([INSERT] * counts["inserted"], pa.string()))
    return merge_source(pa.concat_tables([kept, doomed.cast(kept.schema)]), t), counts
