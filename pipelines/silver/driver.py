"""Small batches folded on the driver: typed in Python, MERGEd from Arrow (delta-rs) or from a
local relation (delta-spark).

Most of a run's tables have a few changes each. Typing, "latest per key" and the classification
against silver's keys cost Spark several jobs per table (about 0.9 s a table), though the rows
fit in a list. A run instead fetches the rows of every small segment in one Spark job
(:func:`fetch`), and each table then costs only its writes (:func:`apply_small`):

* delta-rs: its delta-rs calls, no Spark job: the cost follows the changes, not the tables;
* delta-spark: one job that reads the stored rows of the batch's keys, then delta-spark's MERGE
  of the folded rows (a new table: one write of its rows). That MERGE still costs delta-spark's
  own jobs per table (BENCHMARKS.md, "Many small tables on delta-spark").

The semantics are :func:`pipelines.silver.merge.apply_changes`'s for a non-SCD2 table with whole row
images, keyed or keyless, and the MERGE clauses are the same (:func:`pipelines.silver.plan.keyed_clauses`,
:func:`pipelines.silver.plan.keyless_clauses`). A segment takes this path only when nothing in it needs
more (:func:`eligible`): no partial images on a table without a key, no text in a charset other than
UTF-8, latin1 or ASCII to decode, no quarantined shapes, at most :data:`SMALL_ROWS` changes. Partial
images (binlog_row_image MINIMAL/NOBLOB) are made whole rows first, by the rules of
:func:`pipelines.silver.changes.fill_partial` (:func:`_fill_partial`). A
value this module's typing does not take (:class:`~pipelines.silver.typed_values.NotCanonical`) sends
the segment back to the Spark path before anything is written.

>>> stats = apply_small(spark, path, rows, specs, ["id"])  # doctest: +SKIP
>>> stats.inserted, stats.updated, stats.deleted  # doctest: +SKIP
(2, 1, 0)
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.bronze.schema import INSERT_OPS, OPS, UPSERT_OPS
from pipelines import delta_io
from pipelines.schema import resolve as schema_resolve
from pipelines.delta_io import qualified, quote_ident
from pipelines.silver.columns import ACTION, DEFAULT_PREFIX, DELETE, INSERT, UPSERT, OwnColumns, own_columns_of
from pipelines.silver.merge import (ApplyStats, _check_reserved, _plan_schema, _resolve_keys, read_watermark,
                                    watermark_metadata)
from pipelines.silver.plan import _key_on, _value_schema, keyed_clauses, keyless_clauses
from pipelines.silver.typed_values import ImageTyper, NotCanonical
from pipelines.schema.typemap import ColumnSpec

SMALL_ROWS = 20_000  # changes of one segment at most, for this path
FETCH_ROWS = 200_000  # changes fetched to the driver per run at most (the other segments take Spark's path)
FETCH_BYTES = 256 * 2**20  # and their values' bytes, when a segment's columns may hold large values
COLUMNS = ("_seq", "op", "commit_ts", "before", "after")  # what a fetched row holds


# charsets whose bytes Python decodes as Spark's path does (Java's UTF-8; latin1 is cp1252 on both)
_DECODED_HERE = frozenset({"utf8mb4", "utf8mb3", "utf8", "latin1", "ascii"})
_DIGITS = re.compile(r"[0-9]+\Z")


def _fixable(fix: tuple) -> bool:
    return fix[0] != schema_resolve.FIX_DECODE or fix[1] in _DECODED_HERE


def eligible(*, keys: Sequence[str], specs: Sequence[ColumnSpec], fixes: dict, rejected: dict, partial: bool,
             scd2: bool, rows: int, limit: int = SMALL_ROWS) -> bool:
    """True when a segment can take this path (see the module doc: partial images only with a
    key), or with ``limit`` (:data:`pipelines.silver.columnar.BIG_ROWS`) :mod:`pipelines.silver.columnar`'s
    (whole images only)."""
    return bool(specs) and all(_fixable(f) for f in fixes.values()) and not rejected \
        and (not partial or (bool(keys) and limit <= SMALL_ROWS)) and not scd2 and 0 < rows <= limit


def cell_fix(fix: tuple) -> Callable[[str | None, bytes | None, bool], tuple]:
    """A cell's completion by ``fix`` (:func:`pipelines.schema.resolve.apply_fix`, the rules
    Spark's path applies in SQL), or :class:`NotCanonical` where the two could differ: ENUM/SET
    numbers in other digits than ASCII's, out of the members' range, bytes a codec refuses."""
    kind = fix[0]

    def complete(text, data, named):
        if kind in (schema_resolve.FIX_ENUM, schema_resolve.FIX_SET) and text is not None and not named \
                and text.isdigit() and not _DIGITS.match(text):
            raise NotCanonical(f"an {kind} number in other digits: {text[:20]!r}")
        try:
            return schema_resolve.apply_fix(fix, text, data, named)
        except (ValueError, UnicodeDecodeError) as e:
            raise NotCanonical(f"{kind}: {e}") from None
    return complete


# image types whose values can be large (TEXT is BLOB with a charset); TINYBLOB holds 255 bytes
_LARGE_TYPE = re.compile(r"\x1f(?:(?:MEDIUM|LONG)?BLOB|JSON|GEOMETRY|VECTOR)\b|\x1fVAR(?:CHAR|_STRING)\(\d{5,}\)|"
                         r"\x1fVAR(?:CHAR|_STRING)\(([2-9]\d{3})\)")


def large_values(shapes) -> bool:
    """True when an image shape (``_shape`` texts) has a column whose values may be large."""
    return any(_LARGE_TYPE.search("\x1f" + cell) for shape in shapes for cell in shape.split("\x1e"))


def _in_segments(bronze: DataFrame, segments: Sequence[tuple]) -> DataFrame:
    """``bronze``'s rows of the segments, each with its segment's index ``_f_i``."""
    segs = bronze.sparkSession.createDataFrame([(i, *s) for i, s in enumerate(segments)],
                                               "_f_i INT, _f_db STRING, _f_table STRING, _f_start STRING, _f_end STRING")
    return (bronze.join(F.broadcast(segs), (bronze["db"] == segs["_f_db"]) & (bronze["table"] == segs["_f_table"]))
            .where((F.col("_seq") > F.col("_f_start")) & (F.col("_f_end").isNull() | (F.col("_seq") < F.col("_f_end")))))


def _image_bytes(image: str):
    return F.aggregate(image, F.lit(0).cast("long"), lambda acc, x: acc + F.coalesce(F.octet_length(x["text"]), F.lit(0))
                       + F.coalesce(F.octet_length(x["bin"]), F.lit(0)))


def within_bytes(bronze: DataFrame, segments: Sequence[tuple], limit: int) -> list[tuple]:
    """The segments, in order, as long as their images' bytes add up to at most ``limit`` (one
    Spark job that sums them on the executors; nothing comes to the driver but the sums)."""
    if not segments:
        return []
    sums = dict(_in_segments(bronze, segments).groupBy("_f_i").agg(
        F.sum(F.coalesce(_image_bytes("before"), F.lit(0)) + F.coalesce(_image_bytes("after"), F.lit(0))).alias("b"))
        .collect())
    out, total = [], 0
    for i, segment in enumerate(segments):
        total += int(sums.get(i) or 0)
        if total > limit:
            break
        out.append(segment)
    return out


def fetch(bronze: DataFrame, segments: Sequence[tuple[str, str, str, str | None]]) -> dict[tuple, pa.Table]:
    """The rows of every segment ``(db, table, start, end)`` (``_seq`` above start, below end) of
    ``bronze`` (its ``db``, ``table`` and :data:`COLUMNS`; the images' cells need only ``idx``,
    ``text`` and ``bin``), in one Spark job: ``{segment: Arrow table of COLUMNS}``. They stay Arrow
    until their table is applied (:func:`rows_of`)."""
    if not segments:
        return {}
    table = _in_segments(bronze, segments).select("_f_i", *COLUMNS).toArrow()
    table = table.take(pc.sort_indices(table, [("_f_i", "ascending")]))
    counts = dict(zip(*(c.to_pylist() for c in pc.value_counts(table.column("_f_i")).flatten())))
    out, at = {}, 0
    for i, segment in enumerate(segments):
        n = counts.get(i, 0)
        out[tuple(segment)] = table.slice(at, n).drop_columns(["_f_i"])
        at += n
    return out


def rows_of(fetched: pa.Table) -> list[dict]:
    """A fetched segment's rows as Python dicts (``_seq``, ``op``, ``commit_ts``, ``before``, ``after``)."""
    return fetched.to_pylist()


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
    as :func:`pipelines.silver.plan._plan_keyless` makes them: per identity (all the values), the
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
    silver's stored ``_seq`` as :func:`pipelines.silver.plan._plan_keyed` does (unchanged ones left out)."""
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
    if backend == "rs":
        return delta_io.read_arrow(path, list(columns))
    table = delta_io.read(spark, path, backend="spark").select(*[F.col(quote_ident(c)) for c in columns])
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
    current = delta_io.schema(path, spark=spark, backend=backend)
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
    current = delta_io.schema(path, spark=spark, backend=backend)
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


@dataclass
class Target:
    """What a segment is applied to (:func:`target_of`): the silver table as it is and as the
    segment's specs make it, and silver's value columns mapped to the specs."""
    path: str
    exists: bool
    own: OwnColumns
    target: T.StructType  # the table's schema after the segment (columns added)
    to_add: list
    keys: list[str] | None  # silver's names of the key columns (None: a keyless table)
    watermark: str | None
    values: T.StructType  # silver's value columns (not its own), in table order
    value_idx: list[int | None]  # per value column: the spec it holds (None: a column the specs lack)
    key_spec: list[int] | None  # per key: its spec's index

    @property
    def source_schema(self) -> T.StructType:
        """The MERGE source's columns: the values, silver's own columns and the action."""
        by_name = {f.name: f for f in self.target.fields}
        own = self.own
        return T.StructType([*self.values.fields, *[by_name[n] for n in (own.seq, own.op, own.commit_ts, own.deleted)],
                             T.StructField(ACTION, T.StringType())])


def target_of(spark: SparkSession | None, path: str, specs: Sequence[ColumnSpec], keys: Sequence[str] | None, *,
              column_prefix: str | None, backend: str) -> Target:
    """The :class:`Target` of a segment of ``path`` with ``specs`` and ``keys`` (spec names; None or
    empty: a keyless table). Reads the table's schema and watermark; writes nothing."""
    io = dict(spark=spark, backend=backend)
    keys = _resolve_keys(list(keys), specs) if keys else None
    exists = delta_io.table_exists(path, **io)
    current = delta_io.schema(path, **io) if exists else None
    own = own_columns_of(current.fieldNames(), column_prefix) if current is not None else \
        OwnColumns(column_prefix or DEFAULT_PREFIX)
    _check_reserved([s.name for s in specs], own)
    target, to_add, names = _plan_schema(current, specs, False, own)
    silver_name = {spec: silver for silver, spec in names.items()}
    values = _value_schema(target, own)
    spec_at = {s.name: i for i, s in enumerate(specs)}
    return Target(path=path, exists=exists, own=own, target=target, to_add=to_add,
                  keys=None if keys is None else [silver_name[k] for k in keys],
                  watermark=read_watermark(path, **io) if exists else None, values=values,
                  value_idx=[spec_at.get(names.get(f.name)) for f in values.fields],
                  key_spec=None if keys is None else [spec_at[k] for k in keys])


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
    """Apply one small segment of a table (``rows`` from :func:`fetch`; no ``keys``: a keyless table);
    what :func:`pipelines.silver.merge.apply_changes` would do with them (``fixes``: the
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
    fresh = [r for r in rows if t.watermark is None or (r["_seq"] is not None and r["_seq"] > t.watermark)]
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
    # delta-spark, a keyed table, hard deletes: the MERGE's own metrics say what each latest event
    # did (its clauses apply only what is newer), so the stored keys are not read first
    counted_by_merge = backend == "spark" and exists and t.keys is not None and delete_mode == "hard"
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


def write(spark: SparkSession | None, t: Target, source: list[tuple] | pa.Table | None, counts: dict | None, *,
          new_mark: str | None, changes: int, skipped: int, zeros: int, delete_mode: str, backend: str,
          properties: dict[str, str] | None) -> ApplyStats:
    """Write a folded segment: the MERGE ``source`` rows (:attr:`Target.source_schema`; None: no
    change above the watermark) into ``t``'s table, its columns added first, in one commit that
    records ``new_mark`` as the watermark (a new table: created with its rows). ``counts`` None:
    delta-spark's MERGE metrics count them."""
    path, io = t.path, dict(spark=spark, backend=backend)
    added = delta_io.add_columns(path, t.to_add, **io) if t.exists and t.to_add else []
    base = dict(changes=changes, skipped_by_watermark=skipped, zero_dates_nulled=zeros,
                columns_added=tuple(added), backend=backend, table_path=path)
    if source is None:
        if not t.exists:
            delta_io.create_if_missing(path, t.target, properties=properties, **io)
        return ApplyStats(watermark=t.watermark, **base)

    schema, own, target = t.source_schema, t.own, t.target
    if t.keys is None:
        on, clauses = f"{qualified('t', own.seq)} = {qualified('s', own.seq)}", keyless_clauses(target.fieldNames(),
                                                                                                delete_mode, own)
    else:
        on, clauses = _key_on(t.keys), keyed_clauses(target.fieldNames(), delete_mode, own)
    arrow = source if isinstance(source, pa.Table) else delta_io.rows_to_arrow(source, schema)
    if not t.exists:  # a new table: created with its rows, one commit (what the MERGE would insert)
        first = arrow.select(target.fieldNames())
        made = delta_io.create_with_rows(path, target, first, user_metadata=watermark_metadata(new_mark),
                                         properties=properties, **io)
        if made:
            return ApplyStats(watermark=new_mark, committed=True, **counts, **base)
        delta_io.create_if_missing(path, target, properties=properties, **io)
        # an empty table: nothing matches, so only the insert clause can act (delta-spark then
        # takes its insert-only MERGE, a join fewer)
        clauses = [c for c in clauses if c.kind == "insert"]
    if counts is not None and arrow.num_rows and counts.get("inserted") == arrow.num_rows:
        # every source row is one the MERGE would insert (no stored row has its key, or its _seq):
        # appended, in one commit with the watermark, without the MERGE's read of the stored rows
        # (an append-only log's cost then follows its new rows, not the rows it holds)
        rows = arrow.select(target.fieldNames())
        delta_io.append_with_rows(path, target, rows, user_metadata=watermark_metadata(new_mark), **io)
        return ApplyStats(watermark=new_mark, committed=True, **counts, **base)
    # (no source row: the commit still moves the watermark, as apply_changes's MERGE does)
    done = delta_io.merge_rows(path, arrow, on, clauses, source_schema=schema, user_metadata=watermark_metadata(new_mark),
                               **io)
    if counts is None:  # (delta-spark's MERGE metrics)
        counts = {"inserted": done.inserted, "updated": done.updated, "deleted": done.deleted,
                  "unchanged": arrow.num_rows - done.inserted - done.updated - done.deleted}
    return ApplyStats(watermark=new_mark, committed=True, **counts, **base)
