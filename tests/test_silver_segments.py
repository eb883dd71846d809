"""A silver run's plan (:mod:`pipelines.silver.segments`), from plain values: a schema history
built from DDL and the shape counts bronze's read gives. No Spark, no server."""
from __future__ import annotations

from pipelines.schema import SchemaHistory
from pipelines.silver.segments import SEG, lanes_of, plan_segments, segments_of


def _history(*statements: tuple[str, str]) -> SchemaHistory:
    h = SchemaHistory()
    for seq, sql in statements:
        h.apply_statement(sql, "d", seq)
    return h


def _shape(table, shape, op, n, lo, hi, segment=None, size=2):
    return {"db": "d", "table": table, "_shape": shape, "op": op, "n": n, "min_seq": lo, "max_seq": hi,
            SEG: segment, "min_after": size, "min_before": size if op != "c" else None}


def test_a_table_is_cut_at_each_schema_event_and_each_cut_takes_the_rows_of_its_range():
    history = _history(("01", "CREATE TABLE t (a INT PRIMARY KEY, b INT)"),
                       ("05", "ALTER TABLE t ADD COLUMN c INT"),
                       ("08", "TRUNCATE TABLE t"))
    rows = [_shape("t", "s2", "c", 3, "02", "04"), _shape("t", "s3", "u", 2, "06", "07", size=3),
            _shape("t", "s3", "c", 1, "09", "09", size=3)]
    steps = plan_segments(history, [("d", "t")], {("d", "t"): "01"}, rows)

    assert [(s.start, s.end, [e.kind for e in s.events]) for s in steps] == [
        ("01", "05", []), ("05", "08", ["alter"]), ("08", None, ["truncate"])]
    assert [dict(s.shapes) for s in steps] == [{"s2": 3}, {"s3": 2}, {"s3": 1}]
    assert [dict(s.ops) for s in steps] == [{"c": 3}, {"u": 2}, {"c": 1}]
    assert [s.min_image for s in steps] == [2, 3, 3]


def test_a_table_with_two_events_or_more_is_cut_by_its_rows_segment_not_by_seq_range():
    history = _history(("01", "CREATE TABLE t (a INT PRIMARY KEY)"),
                       ("05", "ALTER TABLE t ADD COLUMN c INT"),
                       ("08", "ALTER TABLE t DROP COLUMN c"))
    cuts = segments_of(history, {("d", "t"): "01"})
    assert cuts == [("d", "t", "", "05"), ("d", "t", "05", "08"), ("d", "t", "08", None)]

    # one shape on both sides of the middle segment: its seq range alone would put it in all three
    rows = [_shape("t", "s1", "c", 2, "02", "09", segment=""), _shape("t", "s1", "c", 4, "02", "09", segment="08"),
            _shape("t", "s2", "c", 1, "06", "06", segment="05")]
    steps = plan_segments(history, [("d", "t")], {("d", "t"): "01"}, rows, segmented={("d", "t")})
    assert [(s.start, s.segment, dict(s.shapes)) for s in steps] == [
        ("01", "", {"s1": 2}), ("05", "05", {"s2": 1}), ("08", "08", {"s1": 4})]


def test_tables_a_rename_links_share_a_lane_and_keep_seq_order():
    history = _history(("01", "CREATE TABLE a (x INT PRIMARY KEY)"), ("02", "CREATE TABLE b (x INT PRIMARY KEY)"),
                       ("03", "CREATE TABLE c (x INT PRIMARY KEY)"), ("06", "RENAME TABLE a TO a2"))
    rows = [_shape("a", "s", "c", 1, "04", "04"), _shape("a2", "s", "u", 1, "07", "07"),
            _shape("b", "s", "c", 5, "05", "05"), _shape("c", "s", "c", 1, "08", "08")]
    tables = [("d", "a"), ("d", "a2"), ("d", "b"), ("d", "c")]
    steps = plan_segments(history, tables, {t: "03" for t in tables}, rows)
    lanes = lanes_of(steps)

    named = sorted([[(s.table, s.start) for s in lane] for lane in lanes])
    # in the lane, the copy into the new name comes before the reset that empties the old one
    assert named == [[("a", "03"), ("a2", "06"), ("a", "06")], [("b", "03")], [("c", "03")]]
    assert len(lanes[0]) == 3  # the longest lane first
