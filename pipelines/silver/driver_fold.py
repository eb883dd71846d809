"""A small segment applied on the driver (:func:`apply_small`): its rows typed in Python, folded to
the latest change per key (partial images made whole rows; keyless tables by identity) and
classified against silver's stored rows, read for the purpose. Not here: which segments take this
path and their rows' fetch (:mod:`pipelines.silver.driver`), the target table and the write
(:mod:`pipelines.silver.driver_writes`).

>>> stats = apply_small(spark, path, rows, specs, ["id"])  # doctest: +SKIP
>>> stats.inserted, stats.updated, stats.deleted  # doctest: +SKIP
(2, 1, 0)
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.bronze.schema import INSERT_OPS, OPS, UPSERT_OPS
from pipelines import delta_io
from pipelines.delta_io import quote_ident
from pipelines.silver.columns import DELETE, INSERT, UPSERT, OwnColumns
from pipelines.silver.driver import cell_fix
from pipelines.silver.driver_writes import Target, target_of, write
from pipelines.silver.merge import ApplyStats
from pipelines.silver.typed_values import ImageTyper, NotCanonical
from pipelines.schema.typemap import ColumnSpec
from pipelines.silver import ranges


def _typed(rows: Sequence[dict], typer: ImageTyper) -> tuple[list[tuple], int]:
    """Each change as ``(seq, op, commit_ts, after, before)`` with typed images (values in spec
    order), and the zero dates nulled; :class:`NotCanonical` for a change Spark's path must judge."""
    out, zeros = [], 0
    for r in rows:
        op = r["op"]
        if op not in OPS or r["_seq"] is None:
            raise NotCanonical(f"a change with op {op!r} and _seq {r['_seq']!r}")
        after, za = typer(r["after"])
        before, zb = typer(r["before"])
        if (after is None and op != "d") or (before is None and op not in INSERT_OPS):
            raise NotCanonical(f"a change with op {op!r} without the image it needs")
        zeros += za + zb
        out.append((r["_seq"], op, r["commit_ts"], after, before))
    return out, zeros


def _picker(value_idx: list[int | None]) -> Callable[[tuple], tuple]:
    """An image's values in silver's value-column order (None for a column the specs lack)."""
    return lambda image: tuple(None if i is None else image[i] for i in value_idx)


def _events(changes: Sequence[tuple], value_idx: list[int | None], key_pos: list[int]) -> list[tuple]:
    """Per change: the upsert of its after image, and the delete of its before image for a delete
    or a key-changing update (as :func:`pipelines.silver.changes.key_events`). An event is
    ``(seq, action, op, commit_ts, values in silver order)``."""
    events, pick = [], _picker(value_idx)
    for seq, op, commit_ts, after, before in changes:
        if op in UPSERT_OPS:
            events.append((seq, UPSERT, op, commit_ts, pick(after)))
        if op == "d" or (op == "u" and any(before[k] != after[k] for k in key_pos)):
            events.append((seq, DELETE, "d", commit_ts, pick(before)))
    return events


def _latest(events, key_at: list[int]) -> dict[tuple, tuple]:
    """Per key, the event with the largest ``_seq`` (ties: an upsert before a delete)."""
    latest: dict[tuple, tuple] = {}
    for e in events:
        key = tuple(e[4][i] for i in key_at)
        if any(v is None for v in key):
            raise NotCanonical("a change with a NULL key")  # (Spark's path names the error)
        have = latest.get(key)
        if have is None or (e[0], e[1]) > (have[0], have[1]):  # "upsert" > "delete"
            latest[key] = e
    return latest


def _presences(rows: Sequence[dict], ordinals: Sequence[int]) -> list[tuple | None]:
    """Per row, which specs its after image carries (None: no after image), as
    :func:`pipelines.silver.changes._presence` says it: an image of at least as many cells as
    there are specs carries them all."""
    whole = (True,) * len(ordinals)
    out = []
    for r in rows:
        image = r["after"]
        if image is None:
            out.append(None)
        elif len(image) >= len(ordinals):
            out.append(whole)
        else:
            have = {c["idx"] for c in image}
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


def _fill_partial(events: list[_Event], stored: dict[tuple, tuple], key_at: list[int]) -> list[tuple]:
    """Every upsert a whole row, by :func:`pipelines.silver.changes.fill_partial`'s rules: per key,
    in ``_seq`` order after silver's ``stored`` row (live rows, by key), a column an upsert lacks
    takes the value the row had just before it (the latest earlier event carrying it, NULL after
    a delete); a key-changing update first takes its old key's row just before the change (a
    chain of moves settles one link per round, a move whose old key still waits for one of its
    own waits too). Returns the events as :func:`_latest` takes them."""
    groups: dict[tuple, list[_Event]] = {}
    for e in events:
        groups.setdefault(tuple(e.vals[i] for i in key_at), []).append(e)
    width = len(events[0].vals) if events else 0
    for key, rows in groups.items():
        if key in stored:
            rows.append(_Event("", "stored", None, None, list(stored[key]), [True] * width, order=0))
        rows.sort(key=lambda e: e.action, reverse=True)  # (ties: an upsert, silver's row, then a delete)
        rows.sort(key=lambda e: (e.order, e.seq))

    def after(e: _Event, state: list) -> list:
        """The values a key's row has after ``e``, from ``state``, those it had before."""
        return [None] * width if e.action == DELETE else [v if f else s for v, f, s in zip(e.vals, e.flags, state)]

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
                e.vals = [v if f else c for v, f, c in zip(e.vals, e.flags, came)]
                e.flags = [True] * width
                e.pending = False
    out = []
    for rows in groups.values():
        state = [None] * width
        for e in rows:
            if e.order:
                vals = e.vals if e.action == DELETE else [v if f else b for v, f, b in zip(e.vals, e.flags, state)]
                out.append((e.seq, e.action, e.op, e.commit_ts, tuple(vals)))
            state = after(e, state)
    return out


def _keyless_source(changes: Sequence[tuple], value_idx: list[int | None], identity_at: list[int],
                    stored: Callable[[set], list[tuple]]):
    """A keyless table's MERGE source rows (values, seq, op, commit_ts, deleted, action) and counts,
    as :func:`pipelines.silver.plan.plan_keyless` makes them: per identity (all the values), the
    batch's inserted copies and silver's live ones, newest first, survive the batch's deletes;
    the deleted stored copies are removed (soft: flagged), the surviving new ones inserted, and a
    delete that finds no copy is counted. ``stored(identities)``: silver's live ``(identity, seq)``."""
    groups: dict[tuple, dict] = {}
    pick = _picker(value_idx)

    def group(vals: tuple) -> dict:
        return groups.setdefault(tuple(vals[i] for i in identity_at), {"copies": [], "deletes": []})

    for seq, op, commit_ts, after, before in changes:
        if op in UPSERT_OPS:
            vals = pick(after)
            group(vals)["copies"].append((seq, "s", vals, op, commit_ts))
        if op in ("d", "u"):
            group(pick(before))["deletes"].append((seq, commit_ts))
    for identity, seq in stored({k for k, g in groups.items() if g["deletes"]}):
        if identity in groups:
            groups[identity]["copies"].append((seq, "t", None, None, None))
    counts = {"inserted": 0, "updated": 0, "deleted": 0, "unchanged": 0, "missing_deletes": 0}
    source = []
    width = len(value_idx)
    for identity, g in groups.items():
        copies = sorted(g["copies"], key=lambda c: c[0], reverse=True)
        keep = max(len(copies) - len(g["deletes"]), 0)
        counts["missing_deletes"] += max(len(g["deletes"]) - len(copies), 0)
        deleted_at = max((d[1] for d in g["deletes"]), default=None)
        for rank, (seq, origin, vals, op, commit_ts) in enumerate(copies, start=1):
            if origin == "s" and rank <= keep:
                counts["inserted"] += 1
                source.append((*vals, seq, op, commit_ts, False, INSERT))
            elif origin == "t" and rank > keep:
                counts["deleted"] += 1
                values = [None] * width
                for i, v in zip(identity_at, identity):
                    values[i] = v
                source.append((*values, seq, "d", deleted_at, True, DELETE))
    return source, counts


def _keyed_source(latest: dict[tuple, tuple], stored: dict[tuple, str], delete_mode: str):
    """A keyed table's MERGE source rows and counts: each key's latest event, classified against
    silver's stored ``_seq`` as :func:`pipelines.silver.plan.plan_keyed` does (unchanged ones left out)."""
    counts = {"inserted": 0, "updated": 0, "deleted": 0, "unchanged": 0}
    source = []
    for key, (seq, action, op, commit_ts, vals) in latest.items():
        have = key in stored
        newer = stored.get(key) is None or seq > stored[key]
        if not have:
            kind = "inserted" if action == UPSERT else ("deleted" if delete_mode == "soft" else "unchanged")
        elif not newer:
            kind = "unchanged"
        else:
            kind = "updated" if action == UPSERT else "deleted"
        counts[kind] += 1
        if kind != "unchanged":
            source.append((*vals, seq, op, commit_ts, action == DELETE, action))
    return source, counts


def _read_wanted(spark: SparkSession | None, path: str, columns: Sequence[str], match: Sequence[str],
                 wanted: set, types: T.StructType, backend: str) -> pa.Table:
    """The table's ``columns`` (all of them: delta-rs, read whole to the driver; delta-spark: only
    the rows whose ``match`` columns hold one of the ``wanted`` tuples, a semi join with them as a
    broadcast local relation, one Spark job), for the caller to test against ``wanted``."""
    stored = delta_io.open_table(path, backend, spark)
    if stored.backend.on_driver:
        return stored.read_arrow(list(columns))
    table = stored.read_df().select(*[F.col(quote_ident(c)) for c in columns])
    probe = spark.createDataFrame([tuple(w) for w in wanted],
                                  T.StructType([T.StructField(f"_w{i}", types[m].dataType) for i, m in enumerate(match)]))
    on = [F.col(quote_ident(m)).eqNullSafe(probe[f"_w{i}"]) for i, m in enumerate(match)]
    return table.join(F.broadcast(probe), on, "left_semi").toArrow()


def _stored(path: str, keys: Sequence[str], own: OwnColumns, wanted: set, *, spark=None, types=None,
            backend: str = "rs") -> dict[tuple, str]:
    """``{key: _seq}`` of silver's rows with the keys ``wanted`` (tombstones included)."""
    if not wanted:
        return {}
    table = _read_wanted(spark, path, [*keys, own.seq], keys, wanted, types, backend)
    if not table.num_rows:
        return {}
    columns = [table.column(k).to_pylist() for k in keys]
    seqs = table.column(own.seq).to_pylist()
    out = {}
    for i, seq in enumerate(seqs):
        key = tuple(c[i] for c in columns)
        if key in wanted:
            out[key] = seq
    return out


def _live_copies(path: str, identity: Sequence[str], own: OwnColumns, wanted: set, *, spark=None,
                 backend: str = "rs") -> list[tuple]:
    """``[(identity values, _seq)]`` of silver's live rows (not soft-deleted) whose values are in ``wanted``."""
    if not wanted:
        return []
    current = delta_io.open_table(path, backend, spark).schema()
    have = set(current.fieldNames())  # (a column the batch adds: NULL in silver)
    stored = [n for n in identity if n in have]
    at = [identity.index(n) for n in stored]
    table = _read_wanted(spark, path, [*stored, own.seq, own.deleted], stored, {tuple(w[i] for i in at) for w in wanted},
                         current, backend)
    columns = [table.column(n).to_pylist() if n in have else [None] * table.num_rows for n in identity]
    seqs, deleted = table.column(own.seq).to_pylist(), table.column(own.deleted).to_pylist()
    out = []
    for i, seq in enumerate(seqs):
        if deleted[i]:
            continue
        values = tuple(c[i] for c in columns)
        if values in wanted:
            out.append((values, seq))
    return out


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



def apply_small(
    spark: SparkSession | None,
    path: str,
    rows: Sequence[dict],
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
    """Apply one small segment of a table (``rows`` from :func:`pipelines.silver.driver.fetch`; no
    ``keys``: a keyless table); what :func:`pipelines.silver.merge.apply_changes` would do with them (``fixes``: the
    resolution's value fixes, per ``idx``, as Spark's path applies them). Raises
    :class:`NotCanonical`, before writing anything, when a row needs Spark's path.

    ``backend="rs"``: delta-rs MERGEs from Arrow, no Spark job. ``backend="spark"``: the MERGE
    source is a local relation of the folded rows, and the table costs delta-spark's MERGE and one
    Spark job that reads the stored rows of the batch's keys (none for a new table); a new table
    takes ``properties`` (:mod:`pipelines.silver.properties`), as :func:`apply_changes` makes it.
    ``partial``: some images lack columns (binlog_row_image MINIMAL/NOBLOB; a keyed table only):
    each upsert is first made a whole row (:func:`_fill_partial`; an insert's missing columns take
    ``defaults``, spec name -> silver value, see :func:`pipelines.silver.schema_events.insert_defaults`)."""
    path = str(path)
    io = dict(spark=spark, backend=backend)
    # (first: an unknown type raises before the table is touched)
    typer = ImageTyper(specs, {idx: cell_fix(fix) for idx, fix in (fixes or {}).items()})
    t = target_of(spark, path, specs, keys, column_prefix=column_prefix, backend=backend)
    own, exists, value_idx = t.own, t.exists, t.value_idx
    fresh = [r for r in rows if ranges.above(r["_seq"], t.watermark)]
    changes, zeros = _typed(fresh, typer)  # (may raise NotCanonical: nothing is written yet)
    if partial and t.keys is None:
        raise NotCanonical("partial images on a table without a key")  # (Spark's path sets them aside)
    if t.keys is not None and partial:
        key_at = [t.values.fieldNames().index(k) for k in t.keys]
        events = _partial_events(changes, _presences(fresh, typer.ordinals), t,
                                 [(defaults or {}).get(sp.name) for sp in specs])
        touched = {tuple(e.vals[i] for i in key_at) for e in events}
        stored_rows = _stored_rows(path, t, touched, **io) if exists else {}
        latest = _latest(_fill_partial(events, stored_rows, key_at), key_at)
    elif t.keys is not None:
        latest = _latest(_events(changes, value_idx, t.key_spec), [t.values.fieldNames().index(k) for k in t.keys])
    else:  # a keyless table: its rows are identified by all their values
        identity = [f.name for f, i in zip(t.values.fields, value_idx) if i is not None]
        identity_at = [t.values.fieldNames().index(n) for n in identity]
        stored_copies = (lambda wanted: _live_copies(path, identity, own, wanted, **io)) if exists \
            else (lambda wanted: [])
        source, counts = _keyless_source(changes, value_idx, identity_at, stored_copies)
    # a backend whose reads are Spark jobs (delta-spark), a keyed table, hard deletes: the MERGE's
    # own metrics say what each latest event did (its clauses apply only what is newer), so the
    # stored keys are not read first
    counted_by_merge = not delta_io.named(backend).on_driver and exists and t.keys is not None \
        and delete_mode == "hard"
    if t.keys is not None and fresh:
        if counted_by_merge:
            source, counts = [(*vals, seq, op, commit_ts, action == DELETE, action) for seq, action, op, commit_ts, vals
                              in latest.values()], None
        else:
            stored = _stored(path, t.keys, own, set(latest), types=t.target, **io) if exists else {}
            source, counts = _keyed_source(latest, stored, delete_mode)
    new_mark = max(r["_seq"] for r in fresh) if fresh else None
    return write(spark, t, source if fresh else None, counts if fresh else {}, new_mark=new_mark, changes=len(fresh),
                 skipped=len(rows) - len(fresh), zeros=zeros, delete_mode=delete_mode, backend=backend,
                 properties=properties)
