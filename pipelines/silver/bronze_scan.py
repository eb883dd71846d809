"""Silver's planning reads of bronze on the driver, by delta-rs and Arrow (the delta-rs backend):
no Spark job for a run whose segments all take the driver's paths.

* :func:`shape_rows`: what :func:`pipelines.silver.shapes.shape_rows_of` counts per table, image
  shape, op and segment, from narrow columns and the images' ``idx`` leaves only;
* :func:`fetch`: the rows of the small segments, as :func:`pipelines.silver.driver.fetch` gives them.

Both read the rows Spark's read of bronze gives the silver step (:meth:`~pipelines.delta_io.Table.scan_arrow`
with the same ``above``): the files with a row ingested since the last finished run, and of
them the rows above their table's watermark. They return None where Spark's path must do it
(rows of an older bronze without ``_shape``; files a plain scan cannot read).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.bronze.schema import WRITTEN_LATER
from pipelines.delta_io import Scan
from pipelines.silver import ranges

SEG = "_segment"  # (pipelines.silver.step._SEG)
_CELL_FIELDS = ("idx", "name", "text", "bin")  # what the driver's typing reads of a cell


def _lengths(table: pa.Table, column: str) -> pa.Array:
    return pc.list_value_length(table.column(column))


def shape_rows(scan: Scan, marks: dict[tuple[str, str], str],
               cuts: Sequence[tuple[str, str, str, str | None]]) -> tuple[list[dict], frozenset[str]] | None:
    """Per ``db``, ``table``, ``_shape``, ``op`` and segment start (:data:`SEG`, from ``cuts``:
    ``(db, table, start, end)``; None for a table not cut): ``min_seq``, ``max_seq``, ``n``,
    ``min_after``, ``min_before`` (the fewest cells of an image; None: no such image), ``pk_idx``
    and ``_lacks<column>`` for bronze's later columns, of the rows above their table's
    watermark in ``marks``; and the later columns every row has. None when a row has no ``_shape``,
    or bronze's files lay their lists out otherwise than Arrow's leaf paths say."""
    later = [n for n in WRITTEN_LATER if n in scan.columns]
    if "_shape" not in later:
        return None
    try:
        t = scan.leaves(["db", "table", "op", "_seq", *later, "after.list.element.idx", "before.list.element.idx",
                         "pk.list.element.idx"])
    except (KeyError, pa.ArrowInvalid):  # (files whose lists are laid out otherwise: Spark reads them)
        return None
    if not {"after", "before", "pk"} <= set(t.column_names):  # (a leaf path that names nothing is left out)
        return None
    if marks:  # only the rows above their table's watermark (joined by row number: Arrow's join
        # does not carry list columns)
        wm = pa.table({"db": [k[0] for k in marks], "table": [k[1] for k in marks], "_wm": list(marks.values())},
                      schema=pa.schema([("db", pa.string()), ("table", pa.string()), ("_wm", pa.string())]))
        probe = pa.table({"db": t.column("db"), "table": t.column("table"), "_seq": t.column("_seq"),
                          "_row": pa.array(np.arange(t.num_rows, dtype=np.int64))})
        probe = probe.join(wm, keys=["db", "table"], join_type="left outer", use_threads=False)
        keep = ranges.arrow_above(probe.column("_seq"), probe.column("_wm"))
        t = t.take(np.sort(probe.column("_row").filter(keep).to_numpy()))
    if t.column("_shape").null_count:
        return None
    segment = pa.nulls(t.num_rows, pa.string())
    for db, table, start, end in cuts:
        inside = pc.and_kleene(pc.and_kleene(pc.equal(t.column("db"), db), pc.equal(t.column("table"), table)),
                               ranges.arrow_holds(t.column("_seq"), start, end))
        segment = pc.if_else(pc.fill_null(inside, False), pa.scalar(start, pa.string()), segment)
    keys = ["db", "table", "_shape", "op", SEG]
    rows = pa.table({"db": t.column("db"), "table": t.column("table"), "_shape": t.column("_shape"),
                     "op": t.column("op"), SEG: segment, "_seq": t.column("_seq"),
                     "_n_after": _lengths(t, "after"), "_n_before": _lengths(t, "before"),
                     "_row": pa.array(np.arange(t.num_rows, dtype=np.int64)),
                     "_null_zeros": (pc.is_null(t.column("_zero_dates")) if "_zero_dates" in later
                                     else pa.array(np.zeros(t.num_rows, bool)))})
    groups = rows.group_by(keys, use_threads=False).aggregate([
        ("_seq", "min"), ("_seq", "max"), ("_seq", "count", pc.CountOptions(mode="all")), ("_n_after", "min"),
        ("_n_before", "min"), ("_null_zeros", "any")])
    keyed = rows.filter(pc.is_valid(t.column("pk")))  # (the first row of a group with the table map's key)
    first_pk = {tuple(r[k] for k in keys): r["_row_min"]
                for r in keyed.group_by(keys, use_threads=False).aggregate([("_row", "min")]).to_pylist()}
    pk = t.column("pk")
    out = []
    for g in groups.to_pylist():
        key = tuple(g[k] for k in keys)
        at = first_pk.get(key)
        out.append({**{k: g[k] for k in keys}, "min_seq": g["_seq_min"], "max_seq": g["_seq_max"],
                    "n": g["_seq_count"], "min_after": g["_n_after_min"], "min_before": g["_n_before_min"],
                    "pk_idx": None if at is None else [c["idx"] for c in pk[at].as_py()],
                    "_lacks_shape": False, "_lacks_zero_dates": bool(g["_null_zeros_any"])})
    written = frozenset(n for n in later if not any(r[f"_lacks{n}"] for r in out))
    return out, written


def _slim(images: pa.ChunkedArray) -> pa.Array:
    """The images with only the cell fields the driver's typing reads."""
    arr = images.combine_chunks() if isinstance(images, pa.ChunkedArray) else images
    flat = arr.flatten()
    cells = pa.StructArray.from_arrays([flat.field(f) for f in _CELL_FIELDS], list(_CELL_FIELDS))
    offsets = pc.subtract(arr.offsets, arr.offsets[0]) if len(arr) else arr.offsets
    return pa.ListArray.from_arrays(offsets, cells, mask=arr.is_null())


def image_bytes(images: pa.Array) -> np.ndarray:
    """Per row, the bytes of its image's cells' ``text`` and ``bin`` (as :func:`pipelines.silver.driver.within_bytes` counts them)."""
    flat = images.flatten()
    sizes = pc.add(pc.fill_null(pc.binary_length(flat.field("text")), 0),
                   pc.fill_null(pc.binary_length(flat.field("bin")), 0)).to_numpy(zero_copy_only=False)
    out = np.zeros(len(images), dtype=np.int64)
    np.add.at(out, pc.list_parent_indices(images).to_numpy(), sizes)
    return out


def fetch(scan: Scan, segments: Sequence[tuple[str, str, str, str | None]], large: Sequence[tuple] = (),
          limit: int | None = None) -> dict[tuple, pa.Table]:
    """The rows of every segment ``(db, table, start, end)``, as :func:`pipelines.silver.driver.fetch`
    gives them, in one scan; of the ``large`` ones (columns that may hold large values) only as
    many, in order, as keep their values' bytes within ``limit`` in all (as :func:`driver.within_bytes`)."""
    if not segments:
        return {}
    segs = pa.table({"db": [s[0] for s in segments], "table": [s[1] for s in segments],
                     "_f_start": [s[2] for s in segments], "_f_end": [s[3] for s in segments],
                     "_f_i": pa.array(range(len(segments)), pa.int64())},
                    schema=pa.schema([("db", pa.string()), ("table", pa.string()), ("_f_start", pa.string()),
                                      ("_f_end", pa.string()), ("_f_i", pa.int64())]))
    where = pc.field("db").isin(sorted({s[0] for s in segments})) & \
        pc.field("table").isin(sorted({s[1] for s in segments})) & ranges.arrow_above_filter(min(s[2] for s in segments))
    rows = pa.Table.from_batches(list(scan.batches(["db", "table", "_seq", "op", "commit_ts", "before", "after"], where)),
                                 schema=pa.schema([scan.dataset.schema.field(c) for c in
                                                   ("db", "table", "_seq", "op", "commit_ts", "before", "after")]))
    # (Arrow's join does not carry list columns: the rows are joined by their numbers)
    probe = pa.table({"db": rows.column("db"), "table": rows.column("table"), "_seq": rows.column("_seq"),
                      "_row": pa.array(np.arange(rows.num_rows, dtype=np.int64))})
    probe = probe.join(segs, keys=["db", "table"], join_type="inner", use_threads=False)
    seq = probe.column("_seq")
    probe = probe.filter(ranges.arrow_holds(seq, probe.column("_f_start"), probe.column("_f_end")))
    probe = probe.take(pc.sort_indices(probe, [("_f_i", "ascending"), ("_seq", "ascending")]))
    rows = rows.take(probe.column("_row"))
    index = probe.column("_f_i").to_numpy()
    bounds = np.searchsorted(index, np.arange(len(segments) + 1))
    dropped: set[int] = set()
    if large and limit is not None:
        total, big = 0, {tuple(s) for s in large}
        for i, segment in enumerate(segments):
            if tuple(segment) not in big:
                continue
            part = rows.slice(bounds[i], bounds[i + 1] - bounds[i])
            total += int(sum(image_bytes(part.column(c).combine_chunks()).sum() for c in ("before", "after")))
            if total > limit:  # (this one and the later large ones take Spark's path)
                dropped |= {j for j, s in enumerate(segments) if j >= i and tuple(s) in big}
                break
    out = {}
    for i, segment in enumerate(segments):
        if i in dropped:
            continue
        part = rows.slice(bounds[i], bounds[i + 1] - bounds[i])
        out[tuple(segment)] = pa.table({"_seq": part.column("_seq"), "op": part.column("op"),
                                        "commit_ts": part.column("commit_ts"),
                                        "before": _slim(part.column("before")), "after": _slim(part.column("after"))})
    return out
