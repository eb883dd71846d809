"""A silver run's plan: each table's segments (its new rows cut at its schema events), the image
shapes and ops of their rows, and the lanes the segments run in (tables a rename links share one).

Plain values in and out, except :func:`with_segment`, a ``DataFrame -> DataFrame`` transform."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.schema import RENAME_FROM, SchemaHistory, SchemaVersion
from pipelines.silver import bronze_scan, ranges


@dataclass
class SegmentPlan:
    """One segment of one table: the schema events at its start, its rows ``[start, end)``."""

    db: str
    table: str
    start: str  # the events' valid_from, or the table's watermark for the first segment
    end: str | None
    events: list[SchemaVersion]
    shapes: dict[str, int] = field(default_factory=dict)  # shape key -> rows
    ops: Counter = field(default_factory=Counter)  # c/u/d -> rows
    min_image: int | None = None  # fewest columns in an image: partial row images (MINIMAL / NOBLOB)
    segment: str | None = None  # its rows' SEG (the start of a segment after a schema event, "" for
    # the first) when its table is cut by SEG, else None: its rows are those in its _seq range

    @property
    def order(self) -> tuple:
        # at one _seq: copies (rename_from) before the resets that empty their source
        first = 0 if any(e.kind == RENAME_FROM for e in self.events) else 1
        return (self.start, first, self.db, self.table)


SEG = bronze_scan.SEG  # the start of a bronze row's segment: its table's last schema event before it ("": none)


def segments_of(history: SchemaHistory, marks: dict) -> list[tuple[str, str, str, str | None]]:
    """``(db, table, start, end)`` of every segment of the tables with a middle segment (two schema
    events or more above their watermark), as :func:`plan_segments` cuts them (the first one's
    start is ``""``). With fewer, a shape whose ``_seq`` range overlaps a segment has rows in it."""
    out = []
    for db, table in sorted({(v.db, v.table) for v in history.all_versions() if v.table}):
        starts = sorted({e.valid_from for e in history.events_between(db, table, marks.get((db, table), ""))})
        if len(starts) < 2:
            continue
        bounds = [""] + starts
        out += [(db, table, start, bounds[i + 1] if i + 1 < len(bounds) else None) for i, start in enumerate(bounds)]
    return out


def with_segment(bronze: DataFrame, segments: list[tuple]) -> DataFrame:
    """``bronze`` with each row's segment start (:data:`SEG`; NULL: its table has one segment)."""
    if not segments:
        return bronze.withColumn(SEG, F.lit(None).cast("string"))
    segs = bronze.sparkSession.createDataFrame(segments, T.StructType([
        T.StructField(n, T.StringType()) for n in ("_sg_db", "_sg_table", SEG, "_sg_end")]))
    inside = ((bronze["db"] == segs["_sg_db"]) & (bronze["table"] == segs["_sg_table"])
              & ranges.spark_holds(bronze["_seq"], segs[SEG], segs["_sg_end"]))
    return bronze.join(F.broadcast(segs), inside, "left").drop("_sg_db", "_sg_table", "_sg_end")


def plan_segments(history: SchemaHistory, tables: Iterable[tuple[str, str]], marks: dict, shape_rows: list,
                segmented: set = frozenset()) -> list[SegmentPlan]:
    """Each table's segments and the shapes of their rows: by the rows' :data:`SEG` for the
    ``segmented`` tables (:func:`segments_of`), else by ``_seq`` range."""
    by_table: dict[tuple[str, str], list] = {}
    for r in shape_rows:
        by_table.setdefault((r["db"], r["table"]), []).append(r)
    steps = []
    for db, table in tables:
        wm = marks.get((db, table), "")
        events = history.events_between(db, table, wm)
        starts = sorted({e.valid_from for e in events})
        bounds = [wm] + starts
        for i, start in enumerate(bounds):
            end = bounds[i + 1] if i + 1 < len(bounds) else None
            evs = [e for e in events if e.valid_from == start] if i > 0 else []
            seg = SegmentPlan(db, table, start, end, evs,
                         segment=(start if i > 0 else "") if (db, table) in segmented else None)
            for r in by_table.get((db, table), ()):
                if ((r[SEG] or "") == seg.segment) if seg.segment is not None else \
                        ranges.overlaps(r["min_seq"], r["max_seq"], start, end):
                    seg.shapes[r["_shape"]] = seg.shapes.get(r["_shape"], 0) + int(r["n"])
                    seg.ops[r["op"]] += int(r["n"])
                    sizes = [v for v in (r["min_after"], r["min_before"]) if v is not None and v >= 0]
                    if sizes:
                        seg.min_image = min(sizes + ([seg.min_image] if seg.min_image is not None else []))
            if seg.events or seg.shapes:
                steps.append(seg)
    return sorted(steps, key=lambda s: s.order)


def lanes_of(steps: list[SegmentPlan]) -> list[list[SegmentPlan]]:
    """Steps grouped into lanes that can run side by side: tables linked by a rename share a
    lane; each lane keeps the global ``_seq`` order."""
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(k):
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    for seg in steps:
        for e in seg.events:
            if e.peer_db is not None:
                a, b = find((seg.db, seg.table)), find((e.peer_db, e.peer_table))
                if a != b:
                    parent[b] = a
    lanes: dict[tuple[str, str], list[SegmentPlan]] = {}
    for seg in steps:
        lanes.setdefault(find((seg.db, seg.table)), []).append(seg)
    return sorted(lanes.values(), key=lambda lane: -len(lane))
