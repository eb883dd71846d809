"""A small segment applied on the driver (:func:`apply_small`): its rows typed and folded by Arrow
as a big segment's are (:mod:`pipelines.silver.columnar`: the latest change per key, classified
against silver's stored keys; :mod:`pipelines.silver.keyless`: a keyless table by identity), from
silver's stored rows read here for the purpose; partial images made whole rows first, here, in
Python over the typed values (the one rule Arrow does not hold). Not here: which segments take
this path and their rows' fetch (:mod:`pipelines.silver.driver`), the target table and the write
(:mod:`pipelines.silver.driver_writes`).

>>> stats = apply_small(spark, path, rows, specs, ["id"])  # doctest: +SKIP
>>> stats.inserted, stats.updated, stats.deleted  # doctest: +SKIP
(2, 1, 0)
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.bronze.schema import INSERT_OPS, UPSERT_OPS
from pipelines import delta_io
from pipelines.delta_io import quote_ident
from pipelines.silver.columns import DELETE, UPSERT
from pipelines.silver.rules import FILL_HOLDS, FILL_LEAVES, FILL_ORDER, fill_source, sort_in
from pipelines.silver import keyless
from pipelines.silver.columnar import (above_watermark, arrow_refusals, classify, events_table, fold_keyed, key_columns,
                                       latest_events, merge_source, typed_images)
from pipelines.silver.driver_writes import Target, target_of, write
from pipelines.silver.merge import ApplyStats
from pipelines.silver.segment_cells import Cells, Segment, segment_of_rows
from pipelines.silver.typed_values import NotCanonical, converter
from pipelines.schema.typemap import ColumnSpec


def _typed(seg: Segment, specs: Sequence[ColumnSpec], t: Target, fixes: dict) -> tuple[list[tuple], int]:
    """Each change as ``(seq, op, commit_ts, after, before)``, its images' values typed by Arrow
    (:func:`pipelines.silver.columnar.typed_images`) as tuples in spec order (None: a column the
    image lacks, or an image the change has not); and the zero dates nulled. Raises
    :class:`NotCanonical` for a change Spark's path must judge."""
    present = {image: cells.present for image, cells in seg.images.items()}
    with arrow_refusals():
        typed, zeros = typed_images(seg, specs, t, fixes)
    width = len(specs)
    images = {}
    for image, columns in typed.items():
        values = [columns[i].to_pylist() if i in columns else None for i in range(width)]
        images[image] = [tuple(None if v is None else v[r] for v in values) if has else None
                         for r, has in enumerate(present[image].tolist())]
    return list(zip(seg.seq.to_pylist(), seg.op.to_pylist(), seg.commit_ts.to_pylist(),
                    images["after"], images["before"])), zeros


def _presences(cells: Cells, n: int, ordinals: Sequence[int]) -> list[tuple | None]:
    """Per change, which specs its after image (``cells``) carries (None: no after image), as
    :func:`pipelines.silver.changes._presence` says it: an image of at least as many cells as
    there are specs carries them all."""
    whole = (True,) * len(ordinals)
    idx = pc.fill_null(cells.idx, -1).to_numpy()
    changes = np.arange(n)
    starts, ends = np.searchsorted(cells.row, changes), np.searchsorted(cells.row, changes, "right")
    out = []
    for r, has in enumerate(cells.present.tolist()):
        if not has:
            out.append(None)
        elif ends[r] - starts[r] >= len(ordinals):
            out.append(whole)
        else:
            have = set(idx[starts[r]:ends[r]].tolist())
            out.append(tuple(o in have for o in ordinals))
    return out


class _Event:
    """One event of a partial-image fold (:func:`_fill_partial`): ``flags`` say which ``vals``
    the event carries; ``moved``: the upsert of a key-changing update; ``order`` 0 for silver's
    stored row."""

    __slots__ = ("seq", "action", "op", "commit_ts", "vals", "flags", "moved", "order", "pending")

    def __init__(self, seq, action, op, commit_ts, vals, flags, moved=False, order=1):
        self.seq, self.action, self.op, self.commit_ts = seq, action, op, commit_ts
        self.vals, self.flags, self.moved, self.order = vals, flags, moved, order
        self.pending = False


def _partial_events(changes: Sequence[tuple], presences: Sequence[tuple | None], t: "Target",
                    defaults: Sequence) -> list[_Event]:
    """The events of changes with partial images, as :func:`pipelines.silver.changes.key_events`
    makes them with presence flags: an insert is a whole row (the columns its image lacks take
    ``defaults``, per spec, else NULL); an update's key columns its after image lacks come from
    its before image; a flag per value column (always for keys; for a column the specs lack only
    on insert); deletes carry no flag."""
    value_idx, key_spec = t.value_idx, t.key_spec
    names = t.values.fieldNames()
    key_pos = {names.index(k) for k in t.keys}
    width = len(value_idx)
    events = []
    for (seq, op, commit_ts, after, before), present in zip(changes, presences):
        if op in INSERT_OPS:
            after = tuple(d if d is not None and not p else v for v, p, d in zip(after, present, defaults))
            present = (True,) * len(after)
        if after is not None and before is not None:
            after = list(after)
            for k in key_spec:
                if not present[k]:
                    after[k] = before[k]  # (the key did not change)
        key_changed = before is not None and after is not None and any(before[k] != after[k] for k in key_spec)
        if op in UPSERT_OPS:
            inserted = op in INSERT_OPS
            flags = [True if j in key_pos else inserted if i is None else inserted or present[i]
                     for j, i in enumerate(value_idx)]
            events.append(_Event(seq, UPSERT, op, commit_ts, [None if i is None else after[i] for i in value_idx],
                                 flags, moved=op == "u" and key_changed))
        if op == "d" or (op == "u" and key_changed):
            events.append(_Event(seq, DELETE, "d", commit_ts, [None if i is None else before[i] for i in value_idx],
                                 [False] * width))
    return events


_FIELDS = {"order": lambda e: e.order, "seq": lambda e: e.seq, "action": lambda e: e.action}
_PICK = ("own", "before", "null")  # a value's sources, as _filled_from lines them up
# the FILL_* rules compiled for Python: per (delete, carried), the place of the value's source in _PICK
LEAVES, HOLDS = ({(d, c): _PICK.index(fill_source(lines, delete=d, carried=c))
                  for d in (False, True) for c in (False, True)} for lines in (FILL_LEAVES, FILL_HOLDS))


def _filled_from(lines: dict, e: _Event, before: list) -> list:
    """``e``'s values by a compiled FILL_* rule (``lines``), ``before`` the key's row before it."""
    delete = e.action == DELETE
    return [(v, b, None)[lines[delete, f]] for v, f, b in zip(e.vals, e.flags, before)]  # (_PICK's order)


def _fill_partial(events: list[_Event], stored: dict[tuple, tuple], key_at: list[int]) -> list[tuple]:
    """Every upsert a whole row, by :mod:`pipelines.silver.rules`' fill rules: per key,
    in ``_seq`` order after silver's ``stored`` row (live rows, by key), a column an upsert lacks
    takes the value the row had just before it (the latest earlier event carrying it, NULL after
    a delete); a key-changing update first takes its old key's row just before the change (a
    chain of moves settles one link per round, a move whose old key still waits for one of its
    own waits too). Returns the events as :func:`pipelines.silver.columnar.events_table` takes them."""
    groups: dict[tuple, list[_Event]] = {}
    for e in events:
        groups.setdefault(tuple(e.vals[i] for i in key_at), []).append(e)
    width = len(events[0].vals) if events else 0
    for key, rows in groups.items():
        if key in stored:
            rows.append(_Event("", "stored", None, None, list(stored[key]), [True] * width, order=0))
        sort_in(rows, FILL_ORDER, _FIELDS)

    def after(e: _Event, state: list) -> list:
        """The values a key's row has after ``e``, from ``state``, those it had before."""
        return _filled_from(LEAVES, e, state)

    pending = [e for e in events if e.moved and not all(e.flags)]
    for e in pending:
        e.pending = True
    for _ in range(len(pending)):
        waiting = [e for e in pending if e.pending]
        if not waiting:
            break
        moved_out = {}  # a delete's seq -> its key's row just before it (no pending move before it)
        for rows in groups.values():
            state, blocked = [None] * width, False
            for e in rows:
                if e.action == DELETE and not blocked:
                    moved_out[e.seq] = state
                blocked = blocked or e.pending
                state = after(e, state)
        for e in waiting:
            came = moved_out.get(e.seq)
            if came is not None:
                e.vals = _filled_from(HOLDS, e, came)
                e.flags = [True] * width
                e.pending = False
    out = []
    for rows in groups.values():
        state = [None] * width
        for e in rows:
            if e.order:
                out.append((e.seq, e.action, e.op, e.commit_ts, tuple(_filled_from(HOLDS, e, state))))
            state = after(e, state)
    return out


def _read_wanted(spark: SparkSession | None, path: str, columns: Sequence[str], match: Sequence[str],
                 wanted: set, types: T.StructType, backend: str) -> pa.Table:
    """The table's ``columns`` (all of them: delta-rs, read whole to the driver; delta-spark: only
    the rows whose ``match`` columns hold one of the ``wanted`` tuples, a semi join with them as a
    broadcast local relation, one Spark job), for the caller to test against ``wanted``."""
    stored = delta_io.open_table(path, backend, spark)
    if stored.backend.on_driver:
        return stored.read_arrow(list(columns))
    table = stored.read_df().select(*[F.col(quote_ident(c)) for c in columns])
    if not match:  # (nothing to match by: every row)
        return table.toArrow()
    probe = spark.createDataFrame([tuple(w) for w in wanted],
                                  T.StructType([T.StructField(f"_w{i}", types[m].dataType) for i, m in enumerate(match)]))
    on = [F.col(quote_ident(m)).eqNullSafe(probe[f"_w{i}"]) for i, m in enumerate(match)]
    return table.join(F.broadcast(probe), on, "left_semi").toArrow()


def _stored(path: str, t: Target, latest: pa.Table, *, spark=None, backend: str = "rs") -> pa.Table:
    """Silver's ``(keys, _seq)`` of the keys of ``latest`` (:func:`pipelines.silver.columnar.fold_keyed`'s
    events; tombstones included), for :func:`~pipelines.silver.columnar.classify`."""
    wanted = set(zip(*[latest.column(c).to_pylist() for c in key_columns(t)])) if latest.num_rows else set()
    return _read_wanted(spark, path, [*t.keys, t.own.seq], t.keys, wanted, t.target, backend)


def stored_copies(path: str, t: Target, deletes: pa.Table, *, spark=None, backend: str = "rs") -> pa.Table:
    """Silver's identity columns, ``_seq`` and deleted flag (:func:`pipelines.silver.keyless.fold`
    takes them): of every row (delta-rs), or of the rows whose identity one of ``deletes``
    (:func:`~pipelines.silver.keyless.keyless_events`' table) has (delta-spark)."""
    current = delta_io.open_table(path, backend, spark).schema()
    have = set(current.fieldNames())  # (a column the batch adds: NULL in silver)
    stored = [n for n in keyless.identity(t) if n in have]
    slots = [f"_v{t.values.fieldNames().index(n)}" for n in stored]
    wanted = set(zip(*[deletes.column(s).to_pylist() for s in slots]))
    return _read_wanted(spark, path, [*stored, t.own.seq, t.own.deleted], stored, wanted, current, backend)


def _stored_rows(path: str, t: "Target", wanted: set, *, spark=None, backend: str = "rs") -> dict[tuple, tuple]:
    """``{key: values in silver's value-column order}`` of silver's live rows (no tombstones) with
    the keys ``wanted``: what a partial image's missing columns are filled from (a column the table
    does not have yet: NULL)."""
    if not wanted:
        return {}
    current = delta_io.open_table(path, backend, spark).schema()
    have = set(current.fieldNames())
    names = [n for n in t.values.fieldNames() if n in have]
    table = _read_wanted(spark, path, [*names, t.own.deleted], t.keys, wanted, current, backend)
    columns = {n: table.column(n).to_pylist() for n in names}
    deleted = table.column(t.own.deleted).to_pylist()
    every = [columns.get(n) for n in t.values.fieldNames()]
    key_at = [t.values.fieldNames().index(k) for k in t.keys]
    out = {}
    for r in range(table.num_rows):
        if deleted[r]:
            continue
        values = tuple(None if c is None else c[r] for c in every)
        key = tuple(values[i] for i in key_at)
        if key in wanted:
            out[key] = values
    return out



def _filled(seg: Segment, specs: Sequence[ColumnSpec], t: Target, fixes: dict, defaults: dict | None, *,
            exists: bool, spark=None, backend: str = "rs") -> tuple[pa.Table, int]:
    """A keyed segment of partial images: its events made whole rows (:func:`_fill_partial`, from
    silver's stored rows of the keys it touches), then the latest per key
    (:func:`pipelines.silver.columnar.latest_events`); and the zero dates nulled."""
    ordinals = [i if sp.ordinal is None else sp.ordinal for i, sp in enumerate(specs)]
    presences = _presences(seg.images["after"], seg.n, ordinals)
    changes, zeros = _typed(seg, specs, t, fixes)
    key_at = [t.values.fieldNames().index(k) for k in t.keys]
    events = _partial_events(changes, presences, t, [(defaults or {}).get(sp.name) for sp in specs])
    touched = {tuple(e.vals[i] for i in key_at) for e in events}
    if any(None in key for key in touched):
        raise NotCanonical("a change with a NULL key")  # (Spark's path names the error)
    stored_rows = _stored_rows(t.path, t, touched, spark=spark, backend=backend) if exists else {}
    return latest_events(events_table(_fill_partial(events, stored_rows, key_at), t), t), zeros


def apply_small(
    spark: SparkSession | None,
    path: str,
    rows: pa.Table | Sequence[dict],
    specs: Sequence[ColumnSpec],
    keys: Sequence[str],
    *,
    fixes: dict[int, tuple] | None = None,
    delete_mode: str = "hard",
    column_prefix: str | None = None,
    backend: str = "rs",
    properties: dict[str, str] | None = None,
    partial: bool = False,
    defaults: dict[str, object] | None = None,
) -> ApplyStats:
    """Apply one small segment of a table (``rows`` from :func:`pipelines.silver.driver.fetch`, or
    those rows as dicts; no ``keys``: a keyless table); what :func:`pipelines.silver.merge.apply_changes`
    would do with them (``fixes``: the resolution's value fixes, per ``idx``, as Spark's path applies
    them). Raises :class:`NotCanonical`, before writing anything, when a row needs Spark's path.

    The images are typed and folded by Arrow as a big segment's are
    (:func:`pipelines.silver.columnar.typed_images`, :func:`~pipelines.silver.columnar.fold_keyed`,
    :func:`~pipelines.silver.columnar.classify`; :mod:`pipelines.silver.keyless`); partial images are
    made whole rows here first, in Python over the typed values (:func:`_filled`).

    ``backend="rs"``: delta-rs MERGEs from Arrow, no Spark job. ``backend="spark"``: the MERGE
    source is a local relation of the folded rows, and the table costs delta-spark's MERGE and one
    Spark job that reads the stored rows of the batch's keys (none for a new table); a new table
    takes ``properties`` (:mod:`pipelines.silver.properties`), as :func:`apply_changes` makes it.
    ``partial``: some images lack columns (binlog_row_image MINIMAL/NOBLOB; a keyed table only):
    each upsert is first made a whole row (:func:`_fill_partial`; an insert's missing columns take
    ``defaults``, spec name -> silver value, see :func:`pipelines.silver.schema_events.insert_defaults`)."""
    path = str(path)
    io = dict(spark=spark, backend=backend)
    for spec in specs:  # (first: an unknown type raises before the table is touched)
        converter(spec)
    t = target_of(spark, path, specs, keys, column_prefix=column_prefix, backend=backend)
    exists = t.exists
    if partial and t.keys is None:
        raise NotCanonical("partial images on a table without a key")  # (Spark's path sets them aside)
    seg = segment_of_rows(rows)
    total = seg.n
    seg = above_watermark(seg, t.watermark)
    fresh, fixes = seg.n, fixes or {}
    if not fresh:
        return write(spark, t, None, {}, new_mark=None, changes=0, skipped=total, zeros=0, delete_mode=delete_mode,
                     backend=backend, properties=properties)
    new_mark = pc.max(seg.seq).as_py()
    # a backend whose reads are Spark jobs (delta-spark), a keyed table, hard deletes: the MERGE's
    # own metrics say what each latest event did (its clauses apply only what is newer), so the
    # stored keys are not read first
    counted_by_merge = not delta_io.named(backend).on_driver and exists and t.keys is not None \
        and delete_mode == "hard"
    if t.keys is not None:  # (Arrow's fold, as a big segment's; partial images made whole rows first)
        with arrow_refusals():
            if partial:
                latest, zeros = _filled(seg, specs, t, fixes, defaults, exists=exists, **io)
            else:
                latest, zeros = fold_keyed(seg, specs, t, fixes, delete_mode=delete_mode)
            if counted_by_merge:
                source, counts = merge_source(latest, t), None
            else:
                stored = _stored(path, t, latest, **io) if exists else None
                source, counts = classify(latest, t, stored, delete_mode)
    else:  # a keyless table: its rows are identified by all their values (by Arrow, as a big segment's)
        with arrow_refusals():
            copies, deletes, zeros = keyless.keyless_events(seg, specs, t, fixes)
            stored = stored_copies(path, t, deletes, **io) if exists and deletes.num_rows else None
            source, counts = keyless.fold(copies, deletes, stored, t)
    return write(spark, t, source, counts, new_mark=new_mark, changes=fresh, skipped=total - fresh, zeros=zeros,
                 delete_mode=delete_mode, backend=backend, properties=properties)
