"""silver.bronze_scan (silver's planning reads of bronze by delta-rs and Arrow) against the Spark
reads it stands in for, on a real bronze: the same shape counts per table, shape, op and segment,
and the same rows for each small segment."""
from __future__ import annotations

from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from spark_fixtures import require_delta_spark, spark  # noqa: F401  (the shared session fixture)

from oracle import _diff, copy_binlogs, server_columns, server_rows, silver_rows
from pipelines import bronze, delta_io
from pipelines.bronze.schema import BRONZE_TABLE
from pipelines.config import load_config
from pipelines.silver import bronze_scan, driver
from pipelines.silver import step as silver_step
from pipelines.silver.marks import above_marks
from pipelines.silver.segments import SEG, with_segment
from pipelines.silver.shapes import shape_rows_of, slim_image

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

_WORKLOAD = """
CREATE DATABASE scan;
CREATE TABLE scan.a (id INT PRIMARY KEY, v VARCHAR(10), d DATE);
INSERT INTO scan.a VALUES (1, 'x', '2024-01-01'), (2, 'y', '0000-00-00'), (3, 'z', NULL);
UPDATE scan.a SET v = 'w', id = 4 WHERE id = 2;
ALTER TABLE scan.a ADD COLUMN n INT;
INSERT INTO scan.a VALUES (5, 'n', NULL, 7);
DELETE FROM scan.a WHERE id = 1;
ALTER TABLE scan.a DROP COLUMN d;
UPDATE scan.a SET n = 1;
CREATE TABLE scan.b (k INT, t TEXT);
INSERT INTO scan.b VALUES (1, 'one'), (1, 'one'), (2, REPEAT('t', 3000));
DELETE FROM scan.b WHERE k = 1 LIMIT 1;
CREATE TABLE scan.`c d` (id INT PRIMARY KEY, b BLOB);
INSERT INTO scan.`c d` VALUES (1, 'bytes'), (2, NULL);
"""


def _normalized(rows) -> list[dict]:
    out = []
    for r in rows:
        r = dict(r.asDict() if hasattr(r, "asDict") else r)
        for k in ("min_after", "min_before"):  # (Spark's size of no image: -1 or NULL)
            if r[k] is not None and r[k] < 0:
                r[k] = None
        out.append(r)
    return sorted(out, key=lambda r: tuple(str(r[k]) for k in ("db", "table", "_shape", "op", "_segment")))


def _shipped(mariadb_factory, tmp_path):
    """The workload on a server with FULL metadata (the table map's key: pk_idx), and the folder
    its closed binlogs were shipped to."""
    srv = mariadb_factory(row_metadata="FULL")
    srv.sql(_WORKLOAD)
    srv.flush_logs()
    copy_binlogs(srv, tmp_path / "in")
    return srv, tmp_path / "in"


@pytest.fixture
def landed(spark, tmp_path, mariadb_factory):  # noqa: F811
    """The workload in bronze (delta-rs): its path, and the ``_seq`` of table ``a``'s rows."""
    _, folder = _shipped(mariadb_factory, tmp_path)
    cfg = load_config(None, {"input": str(folder), "warehouse": str(tmp_path / "wh"), "progress": False,
                             "delta.backend": "rs"})
    bronze.run(spark, cfg)
    path = cfg.warehouse_path(BRONZE_TABLE)
    seqs = sorted(r["_seq"] for r in delta_io.open_table(path).read_arrow(["_seq", "table"]).to_pylist()
                  if r["table"] == "a")
    return path, seqs


def test_shape_counts_are_spark_s_with_marks_and_cuts(spark, landed):  # noqa: F811
    path, seqs = landed
    mid, late = seqs[2], seqs[len(seqs) - 3]
    cases = [({}, []),  # every row, no table cut
             ({("scan", "a"): mid, ("scan", "b"): "", ("other", "x"): "9"}, []),  # watermarks
             ({("scan", "a"): mid}, [("scan", "a", "", late), ("scan", "a", late, None)])]  # a cut table
    for marks, cuts in cases:
        want, want_written = shape_rows_of(with_segment(
            above_marks(delta_io.open_table(path, "rs", spark).read_df(), marks), cuts), by=(SEG,))
        got, got_written = bronze_scan.shape_rows(delta_io.open_table(path).scan_arrow(), marks, cuts)
        assert _normalized(got) == _normalized(want), (marks, cuts)
        assert got_written == want_written == {"_shape", "_zero_dates"}
    assert any(r["_segment"] == late for r in got) and any(r["pk_idx"] == [0] for r in got)


def test_small_segments_rows_are_spark_s_and_large_ones_within_the_byte_budget(spark, landed):  # noqa: F811
    path, seqs = landed
    segments = [("scan", "a", "", seqs[3]), ("scan", "a", seqs[3], None), ("scan", "b", "", None),
                ("scan", "c d", "", None), ("scan", "none", "", None)]
    slim = delta_io.open_table(path, "rs", spark).read_df().select(
        "db", "table", *[slim_image(c, with_name=True).alias(c) if c in ("before", "after") else c
                         for c in driver.COLUMNS])
    want = driver.fetch(slim, segments)
    got = bronze_scan.fetch(delta_io.open_table(path).scan_arrow(), segments)
    order = lambda t: t.take(pc.sort_indices(t, [("_seq", "ascending")])).to_pylist()  # noqa: E731
    assert set(got) == set(want) and {k: order(v) for k, v in got.items()} == {k: order(v) for k, v in want.items()}
    assert [got[s].num_rows for s in segments] == [3, 5, 4, 2, 0]
    # large values: as many of them, in order, as keep within the byte budget
    large = [("scan", "b", "", None), ("scan", "c d", "", None)]
    kept = []
    for limit in (0, 3000, 3005, 3010, 3013, 3016, 3020, 3030, 10**6):
        fits = driver.within_bytes(slim, large, limit)
        assert set(bronze_scan.fetch(delta_io.open_table(path).scan_arrow(), segments, large, limit)) == \
            (set(segments) - set(large)) | set(fits), limit
        kept.append(len(fits))
    assert kept[0] == 0 and kept[-1] == 2 and 1 in kept


def _leaf_paths(path) -> set[str]:
    """The Parquet leaf paths of the table's data files."""
    schemas = [pq.ParquetFile(f).schema for f in path.glob("*.parquet")]
    return {s.column(i).path for s in schemas for i in range(len(s))}


def test_a_bronze_with_spark_s_legacy_lists_is_read_by_spark_where_arrow_cannot(spark, tmp_path,  # noqa: F811
                                                                                mariadb_factory, monkeypatch):
    """Bronze landed by delta-spark with ``spark.sql.parquet.writeLegacyFormat`` (a cluster's
    setting: lists laid out as ``bag.array``, where Arrow's leaf paths ``list.element`` name
    nothing), then silver on delta-rs: the shape counts and the big segments take Spark's read
    instead, and silver equals the server."""
    require_delta_spark(spark)  # (bronze is landed by delta-spark, as a cluster lands it)
    srv, folder = _shipped(mariadb_factory, tmp_path)
    wh = tmp_path / "wh"
    settings = {"input": str(folder), "warehouse": str(wh), "progress": False}
    spark.conf.set("spark.sql.parquet.writeLegacyFormat", "true")
    try:
        bronze.run(spark, load_config(None, {**settings, "delta.backend": "spark"}))
    finally:
        spark.conf.unset("spark.sql.parquet.writeLegacyFormat")
    path = load_config(None, settings).warehouse_path(BRONZE_TABLE)
    leaves = _leaf_paths(Path(path))
    assert "after.bag.array.idx" in leaves and not any(".list.element." in p for p in leaves), sorted(leaves)
    assert bronze_scan.shape_rows(delta_io.open_table(path).scan_arrow(), {}, []) is None

    monkeypatch.setattr(driver, "FETCH_ROWS", 0)  # every keyed segment is a big one: read for Arrow
    stats = silver_step.run(spark, load_config(None, {**settings, "delta.backend": "rs"}))
    assert stats.status == "ok", stats.summary()
    assert {k: v["applied_by"] for k, v in stats.tables.items()} == \
        {"scan.a": ["spark", "spark", "spark"], "scan.b": ["spark"], "scan.c d": ["spark"]}
    for t in ("a", "b", "c d"):
        cols = server_columns(srv, "scan", t)
        want, got = server_rows(srv, "scan", t, cols), silver_rows(wh, "scan", t, cols)
        assert got == want, _diff(f"scan.{t}", cols, want, got or [])


def test_a_part_keeps_the_rows_its_filter_keeps_and_only_copies_when_it_drops_some():
    """RsScan's row filter tests the flat columns and takes rows by number: the rows and their
    order of a filter of the whole part; the part itself when every row is kept."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipelines.delta_io.rs_scan import _kept

    cell = pa.list_(pa.struct([("idx", pa.int32()), ("text", pa.string())]))
    part = pa.table({"db": ["s", "s", "t", None], "table": ["a", "b", "a", "a"], "_seq": ["1", "2", "3", "4"],
                     "after": pa.array([[{"idx": 0, "text": "x"}], None, [], [{"idx": 1, "text": None}]], cell)})
    for where in (pc.field("db") == "s", (pc.field("table") == "a") & (pc.field("_seq") > "1"),
                  pc.field("db").is_null(), pc.field("_seq") > "9"):
        assert _kept(part, where).to_pylist() == part.filter(where).to_pylist()
    assert _kept(part, pc.field("_seq") > "0") is part
