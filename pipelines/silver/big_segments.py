"""A big segment applied on the driver by Arrow and delta-rs (:func:`apply_big`): read from bronze
as flat cells (:mod:`pipelines.silver.segment_cells`: the big segments of a run in one pass over
bronze's row groups, or one segment by parts of bounded size), typed and folded part by part
(:mod:`pipelines.silver.columnar`; a keyless table's by :mod:`pipelines.silver.keyless`), then
written in one commit (:func:`pipelines.silver.driver_writes.write`). No Spark job.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from pipelines import delta_io
from pipelines.schema.typemap import ColumnSpec
from pipelines.silver import keyless
from pipelines.silver.columnar import above_watermark, arrow_refusals, classify, fold_keyed, latest_per_key
from pipelines.silver.driver_fold import stored_copies
from pipelines.silver.driver_writes import target_of, write
from pipelines.silver.merge import ApplyStats
from pipelines.silver.segment_cells import Segment
from pipelines.silver.typed_values import NotCanonical


def apply_big(path: str, segment: Segment | Iterable[Segment], specs: Sequence[ColumnSpec], keys: Sequence[str], *,
              rows: int | None = None, fixes: dict[int, tuple] | None = None, delete_mode: str = "hard",
              column_prefix: str | None = None, spark=None, properties: dict[str, str] | None = None) -> ApplyStats:
    """Apply a table's segment with delta-rs: what :func:`pipelines.silver.driver_fold.apply_small`
    does with its rows (``spark``: a session with delta-spark adds the columns deltalake cannot).
    ``segment``: one (:func:`~pipelines.silver.segment_cells.read_segments`), or its parts
    (:func:`~pipelines.silver.segment_cells.read_parts`) typed and folded one at a time: a keyed
    table's latest events per part, folded again; a keyless table's copies and deletes, folded
    together. The memory a keyed segment takes is its part's and its keys', whatever its size.
    Raises :class:`NotCanonical`, before writing anything, when a change needs Spark's path, or
    when bronze holds another count of changes than ``rows`` (the plan's)."""
    path = str(path)
    t = target_of(spark, path, specs, keys, column_prefix=column_prefix, backend="rs")
    folded, total, fresh, zeros, mark = [], 0, 0, 0, None
    for seg in [segment] if isinstance(segment, Segment) else segment:
        total += seg.n
        seg = above_watermark(seg, t.watermark)
        if not seg.n:
            continue
        fresh += seg.n
        top = pc.max(seg.seq).as_py()
        mark = top if mark is None else max(mark, top)
        with arrow_refusals():
            if t.keys is None:
                copies, deletes, z = keyless.keyless_events(seg, specs, t, fixes or {})
                folded.append((copies, deletes))
            else:
                part, z = fold_keyed(seg, specs, t, fixes or {}, delete_mode=delete_mode)
                folded.append(part)
        zeros += z
    if rows is not None and total != rows:
        raise NotCanonical(f"bronze holds {total} changes of the segment, its plan counted {rows}")
    if not fresh:
        return write(spark, t, None, {}, new_mark=None, changes=0, skipped=total, zeros=0, delete_mode=delete_mode,
                     backend="rs", properties=properties)
    with arrow_refusals():  # (the parts' events grouped again, joined with what silver holds)
        if t.keys is None:
            copies, deletes = (pa.concat_tables(part) for part in zip(*folded))
            stored = stored_copies(path, t, deletes) if t.exists and deletes.num_rows else None
            source, counts = keyless.fold(copies, deletes, stored, t)
        else:
            latest = folded[0] if len(folded) == 1 else latest_per_key(pa.concat_tables(folded), t)
            stored = delta_io.open_table(path, "rs").read_arrow([*t.keys, t.own.seq]) if t.exists else None
            source, counts = classify(latest, t, stored, delete_mode)
    return write(spark, t, source, counts, new_mark=mark, changes=fresh, skipped=total - fresh,
                 zeros=zeros, delete_mode=delete_mode, backend="rs", properties=properties)

