"""silver.columnar (the driver's typing and keyed fold, in Arrow) against the converters of
silver.typed_values value for value; big segments (silver.big_segments, read by parts or whole)
against Spark's path table for table; and the pipeline with every keyed segment on that path
against the server's SELECT."""
from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)
from test_typed_values import (_INT_SPECS, _REST_SPECS, BATCH_1, BATCH_2, KEYLESS_1, KEYLESS_2, SPECS, _bronze_rows, _cells,
                               _img, _row, _spark_apply)

from mariadb_server import mariadb_available
from oracle import _diff, server_columns, server_rows, ship_and_run, silver_rows
from pipelines import arrow_pool, delta_io
from pipelines.config import load_config
from pipelines.delta_io.arrow import spark_type_to_arrow
from pipelines.schema.resolve import FIX_ENUM, FIX_UNSIGNED
from pipelines.schema.typemap import ColumnSpec, spark_type
from pipelines.silver import arrow_typing, columnar, driver, segment_cells
from pipelines.silver.big_segments import apply_big
from pipelines.silver.typed_values import NotCanonical, converter

_CELL = pa.struct([("idx", pa.int32()), ("name", pa.string()), ("type", pa.string()), ("text", pa.string()),
                   ("bin", pa.binary())])
_BRONZE = pa.schema([("_seq", pa.string()), ("op", pa.string()), ("commit_ts", pa.timestamp("us", "UTC")),
                     ("before", pa.list_(_CELL)), ("after", pa.list_(_CELL))])


def _segment(rows: list[dict], parts: int = 1) -> segment_cells.Segment:
    """Bronze-like rows (dicts, as driver.fetch gives them) as a segment, in ``parts`` batches."""
    table = pa.Table.from_pylist(rows, schema=_BRONZE)
    step = max(1, -(-len(rows) // parts))
    return segment_cells.segment_of(b for at in range(0, len(rows), step) for b in table.slice(at, step).to_batches())


def _parts(rows: list[dict], parts: int):
    """The rows as ``parts`` segments (segment_cells.segment_parts, a batch each), as a segment
    read by parts is."""
    table = pa.Table.from_pylist(rows, schema=_BRONZE)
    step = max(1, -(-len(rows) // parts))
    return segment_cells.segment_parts((b for at in range(0, len(rows), step) for b in table.slice(at, step).to_batches()),
                                       part_bytes=1)


def _by_value(specs, image, fixes):
    """An image typed value by value by the converters (the reference Arrow's casts must agree with)."""
    cells = {c["idx"]: c for c in image}
    values, zeros = [], 0
    for i, spec in enumerate(specs):
        cell = cells.get(i)
        if cell is None:
            values.append(None)
            continue
        text, data = cell["text"], cell["bin"]
        if i in fixes:
            text, data = arrow_typing.cell_fix(fixes[i])(text, data, cell.get("name") is not None)
        value, zero = converter(spec)(text, data)
        values.append(value)
        zeros += zero
    return tuple(values), zeros


def _typed_both_ways(specs, images, fixes=None):
    """Each column typed by arrow_typing.typed_column (Arrow's casts where they take it), by arrow_typing's
    typing of a few changes (its cells read once into Python: typed_row per image), and by the
    converters value by value (or NotCanonical)."""
    rows = [{"_seq": f"{i:04d}", "op": "c", "commit_ts": None, "before": None,
             "after": [{"idx": c[0], "name": c[1], "type": c[2], "text": c[3], "bin": c[4]} for c in image]}
            for i, image in enumerate(images)]
    seg, out = _segment(rows, parts=3), {}
    for way in ("columnar", "few", "rows"):
        try:
            if way in ("rows", "few"):
                typed = [_by_value(specs, r["after"], fixes or {}) if way == "rows"
                         else arrow_typing.typed_row(specs, r["after"], fixes) for r in rows]
                out[way] = ([list(col) for col in zip(*[v for v, _ in typed])] or [[] for _ in specs],
                            sum(z for _, z in typed))
            else:
                columns, zeros = [], 0
                for i, spec in enumerate(specs):
                    to = spark_type_to_arrow(spark_type(spec))
                    values, z = arrow_typing.typed_column(spec, to, seg.images["after"].column(i, seg.n),
                                                      fix=(fixes or {}).get(i))
                    columns.append(values.to_pylist())
                    zeros += z
                out[way] = (columns, zeros)
        except NotCanonical:
            out[way] = "NotCanonical"
    return out


_CELL_VALUE = st.tuples(st.one_of(st.none(), st.text(max_size=3)), st.one_of(st.none(), st.binary(max_size=3)),
                        st.one_of(st.none(), st.sampled_from(["a", "b"])))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(images=st.lists(st.one_of(st.none(), st.dictionaries(st.integers(0, 3), _CELL_VALUE, max_size=4)), min_size=1,
                       max_size=30), parts=st.integers(1, 4), ordinal=st.integers(0, 4))
def test_a_cell_of_every_change_is_taken_from_cells_in_several_chunks(images, parts, ordinal):
    """Cells.column: per change, the fields of its cell ``ordinal``, null where its image lacks
    the cell or the change has no image, whatever the read's chunks."""
    rows = [{"_seq": f"{i:04d}", "op": "c", "commit_ts": None, "before": None,
             "after": None if image is None else [{"idx": k, "name": v[2], "type": "T", "text": v[0], "bin": v[1]}
                                                  for k, v in sorted(image.items())]}
            for i, image in enumerate(images)]
    column = _segment(rows, parts).images["after"].column(ordinal, len(rows))
    want = [(None, None, None) if not image or ordinal not in image else image[ordinal] for image in images]
    assert list(zip(column.text.to_pylist(), column.bin.to_pylist(), column.name.to_pylist())) == want


@settings(max_examples=200, deadline=None)
@given(block=st.lists(st.integers(-1, 6), min_size=1, max_size=5), repeats=st.integers(0, 6),
       change=st.one_of(st.none(), st.tuples(st.integers(0, 40), st.integers(-1, 6))), width=st.integers(0, 6))
def test_the_cells_of_an_ordinal_are_found_whether_or_not_the_images_repeat(block, repeats, change, width):
    """by_ordinal: an ordinal's positions are those of its cells, ascending, on the stride path
    (a block repeated: every image holds the same columns) and on the sorted path (anything else:
    a changed cell, a repeated or missing ordinal, a width that is not the block's)."""
    import numpy as np

    idx = np.array(block * repeats, dtype=np.int64)
    if change is not None and len(idx):
        idx[change[0] % len(idx)] = change[1]
    find = segment_cells.by_ordinal(idx, width if width else len(block))
    for ordinal in range(-1, 8):
        assert find(ordinal).tolist() == (np.flatnonzero(idx == ordinal).tolist() if ordinal >= 0 else [])


def test_images_of_the_same_columns_take_each_column_as_a_stride():
    """Whole images of the same columns (the common case): each column's cells, null where a
    change has no image, without sorting the cells."""
    images = [None if i % 3 == 0 else {0: (f"a{i}", None, None), 2: (None, b"b", "x"), 1: (str(i), None, None)}
              for i in range(10)]
    rows = [{"_seq": f"{i:04d}", "op": "c", "commit_ts": None, "before": None,
             "after": None if image is None else [{"idx": k, "name": v[2], "type": "T", "text": v[0], "bin": v[1]}
                                                  for k, v in image.items()]}
            for i, image in enumerate(images)]
    cells = _segment(rows, 2).images["after"]
    for ordinal in (0, 1, 2, 3):
        column = cells.column(ordinal, len(rows))
        want = [(None, None, None) if not image or ordinal not in image else image[ordinal] for image in images]
        assert list(zip(column.text.to_pylist(), column.bin.to_pylist(), column.name.to_pylist())) == want
    assert cells._positions(2).tolist() == [1, 4, 7, 10, 13, 16]  # (positions 3k + 1: the stride)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.large_base_example, HealthCheck.too_slow,
                                                                 HealthCheck.data_too_large])
@given(rows=st.lists(_row, min_size=1, max_size=40))
def test_random_canonical_values_type_in_arrow_as_value_by_value(rows):
    """Random values of every type in the decoder's texts (zero dates, 2023-02-30 and month 13
    included): Arrow's casts give the converters' values and zero-date counts."""
    out = _typed_both_ways(_INT_SPECS + _REST_SPECS, [_cells(r) for r in rows])
    assert out["rows"] != "NotCanonical" and out["columnar"] == out["few"] == out["rows"]


_JUNK = st.one_of(st.none(), st.sampled_from(["", " 1", "+1", "1e3", "0x10", "1.", ".5", "-0", "00", "1.5555",
                                              "2024-02-30", "2024-1-1", "0000-00-00", "0000-00-00 00:00:00",
                                              "2024-01-01 24:00:00", "2024-01-01T10:00:00", "99999999999999999999999",
                                              "١٢", "nan", "inf", "18446744073709551615", "-9223372036854775809"]),
                  st.text(max_size=6))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(texts=st.lists(st.lists(_JUNK, min_size=len(_INT_SPECS + _REST_SPECS), max_size=len(_INT_SPECS + _REST_SPECS)),
                      min_size=1, max_size=8), column=st.integers(0, len(_INT_SPECS + _REST_SPECS) - 1))
def test_texts_of_other_forms_type_in_arrow_as_value_by_value_or_go_to_spark(texts, column):
    """Texts in other forms than the decoder's: a column gets the converters' values, or both refuse it."""
    spec = (_INT_SPECS + _REST_SPECS)[column]
    images = [[(0, spec.name, spec.mysql_type.upper(), row[column], b"\x01" if spec.name == "bn" else None)]
              for row in texts]
    out = _typed_both_ways([spec], images)
    assert out["columnar"] == out["few"] == out["rows"]


_FIXED = [(ColumnSpec("e", "enum", enum_values=("a", "b", "é")), (FIX_ENUM, ("a", "b", "é"))),
          (ColumnSpec("t", "tinyint", unsigned=True), (FIX_UNSIGNED, 8)),
          (ColumnSpec("i", "int", unsigned=True), (FIX_UNSIGNED, 32)),
          (ColumnSpec("b", "bigint", unsigned=True), (FIX_UNSIGNED, 64))]
_FIX_TEXT = st.one_of(st.none(), st.integers(-2**63, 2**64).map(str), st.integers(0, 5).map(str),
                      st.sampled_from(["", "a", "é", "007", "١", "²", "-0", "--1", " 1", "+1"]), st.text(max_size=3))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cells=st.lists(st.tuples(_FIX_TEXT, st.booleans()), min_size=1, max_size=8), which=st.integers(0, 3))
def test_enum_numbers_and_signedness_are_fixed_in_arrow_as_value_by_value(cells, which):
    """MINIMAL metadata's value fixes (ENUM numbers to members, negative texts of unsigned
    columns): Arrow's values, or both refuse (a cell with a name is a member already)."""
    spec, fix = _FIXED[which]
    images = [[(0, "x" if named else None, "ENUM", text, None)] for text, named in cells]
    out = _typed_both_ways([spec], images, fixes={0: fix})
    assert out["columnar"] == out["few"] == out["rows"]


def test_value_fixes_and_padded_binary_are_typed_value_by_value():
    specs = [ColumnSpec("e", "enum", enum_values=("a", "b")), ColumnSpec("u", "int", unsigned=True), ColumnSpec("bn", "binary", length=4)]
    images = [[(0, None, "ENUM", "2", None), (1, None, "LONG", "-1", None), (2, None, "STRING", "x", b"ab")],
              [(0, None, "ENUM", "0", None), (1, None, "LONG", None, None), (2, None, "STRING", "x", b"abcd")]]
    out = _typed_both_ways(specs, images, fixes={0: (FIX_ENUM, ("a", "b")), 1: (FIX_UNSIGNED, 32)})
    assert out["columnar"] == out["few"] == out["rows"] == ([["b", ""], [4294967295, None], [b"ab\x00\x00", b"abcd"]], 0)


_FIELDS = ("changes", "skipped_by_watermark", "inserted", "updated", "deleted", "unchanged", "missing_deletes",
           "zero_dates_nulled", "watermark", "committed")


def _read(spark, path):  # noqa: F811
    return spark.createDataFrame(delta_io.open_table(path).read_arrow().to_pylist(), delta_io.open_table(path, "rs").schema())


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_big_segments_give_the_table_sparks_path_gives(spark, tmp_path, delete_mode):  # noqa: F811
    """BATCH_1 (inserts, updates, a key change, deletes of held and never-held keys, a zero date),
    then BATCH_2 on the stored rows (one change below the watermark), then BATCH_2 again (all
    below it): the same counts, watermark and table as Spark's path, batch for batch."""
    by_spark, by_arrow, by_parts = str(tmp_path / "spark"), str(tmp_path / "arrow"), str(tmp_path / "parts")
    for batch in (BATCH_1, BATCH_2, BATCH_2):
        rows = _bronze_rows(batch)
        expected = _spark_apply(spark, by_spark, rows, delete_mode)
        got = apply_big(by_arrow, _segment(rows[::-1], parts=2), SPECS, ["id"], delete_mode=delete_mode)
        # read by parts, a change or two each, bronze's order not _seq's: folded part by part, then again
        in_parts = apply_big(by_parts, _parts(rows[::-1], parts=len(rows) // 2 + 1), SPECS, ["id"],
                             rows=len(rows), delete_mode=delete_mode)
        assert {f: getattr(got, f) for f in _FIELDS} == {f: getattr(in_parts, f) for f in _FIELDS} \
            == {f: getattr(expected, f) for f in _FIELDS}
    assert_df_equality(_read(spark, by_arrow), _read(spark, by_spark), ignore_row_order=True)
    assert_df_equality(_read(spark, by_parts), _read(spark, by_spark), ignore_row_order=True)
    assert delta_io.open_table(by_arrow, "rs").schema() == delta_io.open_table(by_parts, "rs").schema() \
        == delta_io.open_table(by_spark, "rs").schema()


def test_a_composite_key_moved_twice_and_back_in_one_segment(tmp_path):
    specs = [ColumnSpec("a", "int"), ColumnSpec("b", "varchar"), ColumnSpec("v", "int")]

    def img(a, b, v):
        return [(0, "a", "LONG", str(a), None), (1, "b", "VARCHAR", b, None), (2, "v", "LONG", str(v), None)]
    batch = [("001", "c", None, img(1, "x", 1)), ("002", "c", None, img(1, "y", 2)),
             ("003", "u", img(1, "x", 1), img(2, "x", 3)),  # (1,x) -> (2,x)
             ("004", "u", img(1, "y", 2), img(1, "x", 4)),  # (1,y) -> (1,x): the old key again
             ("005", "u", img(2, "x", 3), img(1, "y", 5))]  # (2,x) -> (1,y)
    by_arrow = str(tmp_path / "arrow")
    got = apply_big(by_arrow, _segment(_bronze_rows(batch)), specs, ["a", "b"])
    assert (got.inserted, got.unchanged) == (2, 1)  # (2,x): inserted and deleted in the segment
    assert sorted((r["a"], r["b"], r["v"]) for r in delta_io.open_table(by_arrow).read_arrow().to_pylist()) == [
        (1, "x", 4), (1, "y", 5)]


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_keyless_segments_give_the_table_sparks_path_gives(spark, tmp_path, delete_mode):  # noqa: F811
    """A keyless table: a log of inserts (copies of one row included), then KEYLESS_1 and KEYLESS_2
    (copies deleted one by one, updates, a delete that finds no copy), each on the stored rows and
    read by parts: the same counts and table as Spark's path."""
    log_1 = [("001", "c", None, _img(1, "a")), ("002", "c", None, _img(1, "a")),
             ("003", "c", None, _img(2, "b", d="0000-00-00"))]
    log_2 = [("003", "c", None, _img(2, "b", d="0000-00-00")), ("004", "c", None, _img(1, "a")),
             ("005", "c", None, _img(None, None, amount=None))]
    later = [[(f"1{s}", op, before, after) for s, op, before, after in batch] for batch in (KEYLESS_1, KEYLESS_2)]
    by_spark, by_arrow = str(tmp_path / "spark"), str(tmp_path / "arrow")
    for batch, parts in ((log_1, 1), (log_2, 3), (later[0], 2), (later[1], 4), (later[1], 1)):
        rows = _bronze_rows(batch)
        expected = _spark_apply(spark, by_spark, rows, delete_mode, keys=())
        got = apply_big(by_arrow, _parts(rows[::-1], parts), SPECS, [], rows=len(rows), delete_mode=delete_mode)
        assert {f: getattr(got, f) for f in _FIELDS} == {f: getattr(expected, f) for f in _FIELDS}
    assert_df_equality(_read(spark, by_arrow), _read(spark, by_spark), ignore_row_order=True)
    live = sorted(((r["id"], r["name"]) for r in delta_io.open_table(by_arrow).read_arrow().to_pylist()
                   if not r["_deleted"]), key=lambda r: (r[0] is not None, r))
    # (2, "b") is log_1's copy with a zero date (NULL): not the (2, "b") KEYLESS_1 inserts, then updates
    assert live == [(None, None), (1, "a"), (1, "a"), (2, "b"), (2, "b2"), (3, "c")]


def test_stored_seqs_read_as_string_views_are_classified(tmp_path):
    """delta-rs may read silver's stored ``_seq`` as string_view, a type Arrow's join does not
    carry: classify takes it as text (before, such a table's segment went to Spark's path)."""
    from pipelines.silver.driver_writes import target_of

    path = str(tmp_path / "t")
    apply_big(path, _segment(_bronze_rows(BATCH_1)), SPECS, ["id"])
    t = target_of(None, path, SPECS, ["id"], column_prefix=None, backend="rs")
    stored = delta_io.open_table(path).read_arrow([*t.keys, t.own.seq])
    viewed = stored.set_column(1, t.own.seq, stored.column(t.own.seq).cast(pa.string_view()))
    latest, _ = columnar.fold_keyed(_segment(_bronze_rows(BATCH_2)), SPECS, t, {}, delete_mode="hard")
    source, counts = columnar.classify(latest, t, viewed, "hard")
    assert (source, counts) == columnar.classify(latest, t, stored.cast(stored.schema), "hard")
    assert counts["updated"] > 0


@pytest.mark.parametrize("n", [12, 200])  # (value by value, and by Arrow's casts)
def test_with_hard_deletes_a_before_image_is_typed_in_its_keys_and_dates_only(tmp_path, n):
    """A before image reaches silver only as its keys (a delete, or an update that moves its
    key) when deletes are hard: its other values are not typed, so a text that would not convert
    there does not send the segment to Spark's path; its zero dates are counted all the same.
    With soft deletes the deleted row keeps its values: the same text is refused."""
    from pipelines.silver.driver_writes import target_of

    t = target_of(None, str(tmp_path / "t"), SPECS, ["id"], column_prefix=None, backend="rs")
    changes = [(f"{i:04}", "c", None, _img(i, f"n{i}")) for i in range(n)]
    changes += [(f"{n + i:04}", "d", _img(i, "x", amount="not a decimal", d="0000-00-00"), None) for i in range(n // 2)]
    changes += [(f"{2 * n + i:04}", "u", _img(n // 2 + i, "y", amount="nor this"), _img(n // 2 + i, "z"))
                for i in range(n // 4)]
    latest, zeros = columnar.fold_keyed(_segment(_bronze_rows(changes)), SPECS, t, {}, delete_mode="hard")
    assert zeros == n // 2  # (the deleted rows' zero dates)
    got = {r["_v0"]: (r["_action"], r["_v1"], r["_v2"]) for r in latest.to_pylist()}
    assert got == {**{i: ("delete", None, None) for i in range(n // 2)},
                   **{n // 2 + i: ("upsert", "z", Decimal("1.00")) for i in range(n // 4)},
                   **{i: ("upsert", f"n{i}", Decimal("1.00")) for i in range(n // 2 + n // 4, n)}}
    with pytest.raises(NotCanonical):
        columnar.fold_keyed(_segment(_bronze_rows(changes)), SPECS, t, {}, delete_mode="soft")


def test_an_images_columns_typed_side_by_side_are_those_typed_one_by_one(monkeypatch):
    """Threads type the columns of a big image each (arrow_pool.THREADS_FROM): the same values
    and zero dates as one after another, and a text that does not convert still raises."""
    from pipelines.silver.arrow_typing import columns_of, typed_cells

    monkeypatch.setattr(arrow_typing, "VECTORIZE_FROM", 0)
    bad = [("010", "c", None, _img(7, "g", amount="not a decimal"))]

    def typed(changes, threads_from):
        monkeypatch.setattr(arrow_pool, "THREADS_FROM", threads_from)
        seg = _segment(_bronze_rows(changes))
        try:
            done = typed_cells(seg.images["after"], seg.n, columns_of(SPECS))
        except NotCanonical:
            return "NotCanonical"
        return {i: (values.to_pylist(), z) for i, (values, z) in done.items()}
    one_by_one = typed(BATCH_1, 10**9)
    assert one_by_one[4][1] == 1 and len(one_by_one) == len(SPECS)  # (the zero date)
    assert typed(BATCH_1, 0) == one_by_one
    assert typed(BATCH_1 + bad, 0) == typed(BATCH_1 + bad, 10**9) == "NotCanonical"


def _as_lists(seg: segment_cells.Segment) -> dict:
    """A segment as plain values, its changes in ``_seq`` order (a read keeps bronze's order)."""
    order = sorted(range(seg.n), key=seg.seq.to_pylist().__getitem__)
    out = {"seq": [seg.seq.to_pylist()[i] for i in order], "op": [seg.op.to_pylist()[i] for i in order]}
    for image, cells in seg.images.items():
        rows = [[] for _ in range(seg.n)]
        for r, i, t in zip(cells.row, cells.idx.to_pylist(), cells.text.to_pylist()):
            rows[r].append((i, t))
        out[image] = [rows[i] for i in order]
    return out


def test_segments_of_interleaved_tables_are_read_in_one_pass(tmp_path):
    """read_segments: the segments of tables whose changes share bronze's row groups, read in one
    pass over them, are each what a read of that segment alone gives, its _seq bounds kept; none
    when their cells take more than the bytes allowed together."""
    from pyspark.sql import types as T

    from pipelines.delta_io.staging import ParquetStager, commit_staged, prepare_staging

    cell = T.StructType([T.StructField("idx", T.IntegerType()), T.StructField("name", T.StringType()),
                         T.StructField("type", T.StringType()), T.StructField("text", T.StringType()),
                         T.StructField("bin", T.BinaryType())])
    struct = T.StructType([T.StructField(c, T.StringType()) for c in ("db", "table", "_seq", "op")]
                          + [T.StructField("commit_ts", T.TimestampType()), T.StructField("before", T.ArrayType(cell)),
                             T.StructField("after", T.ArrayType(cell))])
    changes = [(f"{i:03d}", "c" if i % 3 else "u", None if i % 3 else _img(i, "old"), _img(i, f"n{i}"))
               for i in range(1, 31)]
    path = str(tmp_path / "bronze")
    # as bronze is staged (pyarrow's lists): several files of row groups that hold rows of both tables
    stager = ParquetStager(path, prepare_staging(path, struct), stats_columns=["db", "table", "_seq", "op"],
                           batch_rows=4, file_rows=12)
    for i, r in enumerate(_bronze_rows(changes)):
        stager.add(("shop", "orders" if i % 2 else "items", r["_seq"], r["op"], r["commit_ts"], r["before"], r["after"]))
    commit_staged(path, stager.close(), struct)
    scan = delta_io.open_table(path).scan_arrow()
    reads = [segment_cells.SegmentRead("shop", "orders", "004", None, with_name=False),
             segment_cells.SegmentRead("shop", "items", "", "021"), segment_cells.SegmentRead("shop", "none", "")]
    together = segment_cells.read_segments(scan, reads)
    alone = {r: segment_cells.read_segments(scan, [r])[r] for r in reads}
    assert {r: _as_lists(s) for r, s in together.items()} == {r: _as_lists(s) for r, s in alone.items()}
    assert [s.n for s in together.values()] == [13, 10, 0]
    assert _as_lists(together[reads[0]])["seq"][:2] == ["006", "008"]
    assert _as_lists(together[reads[1]])["after"][0] == [(0, "1"), (1, "n1"), (2, "1.00"), (3, "2024-05-01 10:00:00"),
                                                         (4, "2024-05-01")]
    assert together[reads[1]].images["after"].name.null_count == 0  # (its names kept: with_name)
    assert together[reads[0]].images["after"].name.null_count == len(together[reads[0]].images["after"].row)
    assert segment_cells.read_segments(scan, reads, max_bytes=1_000) is None
    assert segment_cells.read_segments(scan, []) == {}
    # each read by parts (a record batch each): the same changes, cut in several segments
    for r in reads:
        parts = list(segment_cells.read_parts(scan, r, part_bytes=1))
        assert len(parts) == (0 if r.table == "none" else len([1 for p in scan.parts(["db", "table", "_seq"], r.where)]))
        lists = [_as_lists(p) for p in parts]
        joined = sorted(((s, o, a, b) for x in lists for s, o, a, b in zip(x["seq"], x["op"], x["after"], x["before"])))
        whole = _as_lists(alone[r])
        assert joined == list(zip(whole["seq"], whole["op"], whole["after"], whole["before"]))


def test_parts_read_ahead_come_in_order_with_what_reading_them_raised_at_its_place():
    """read_parts reads the next part in a thread while this one is folded: the parts come as
    they would one by one, an error comes where its part would, and a caller that stops early
    stops the reading."""
    import threading

    taken = []

    def parts(n, fail_at=None):
        for i in range(n):
            if i == fail_at:
                raise ValueError(f"part {i}")
            taken.append((i, threading.current_thread().name))
            yield i

    assert list(segment_cells.read_ahead(parts(5))) == [0, 1, 2, 3, 4]
    assert all(name.startswith("silver-read-ahead") for _, name in taken)
    got = []
    with pytest.raises(ValueError, match="part 3"):
        for part in segment_cells.read_ahead(parts(5, fail_at=3)):
            got.append(part)
    assert got == [0, 1, 2]
    taken.clear()
    ahead = segment_cells.read_ahead(parts(100))
    assert next(ahead) == 0
    ahead.close()
    assert [i for i, _ in taken] == [0, 1]  # (the part read ahead, and no more)


def test_a_value_only_spark_types_writes_nothing(tmp_path):
    path = str(tmp_path / "t")
    rows = _bronze_rows([("001", "c", None, _img(1, "a")), ("002", "c", None, _img(2, "b"))])
    with pytest.raises(NotCanonical, match="its plan counted 3"):  # (bronze read otherwise than planned)
        apply_big(path, _parts(rows, 2), SPECS, ["id"], rows=3)
    rows = _bronze_rows([("001", "c", None, _img(1, "a")), ("002", "c", None, _img(2, "b", amount="1e3"))])
    with pytest.raises(NotCanonical):
        apply_big(path, _segment(rows), SPECS, ["id"])
    rows = _bronze_rows([("001", "c", None, _img(None, "a"))])  # a NULL key: Spark's path names it
    with pytest.raises(NotCanonical):
        apply_big(path, _segment(rows), SPECS, ["id"])
    assert not delta_io.open_table(path, "rs").exists()


# ---------------------------------------------------------------------------------------------
# the pipeline, every keyed segment in Arrow, against the server


def _wide_workload(db: str) -> str:
    return f"""
CREATE DATABASE {db};
CREATE TABLE {db}.w (id BIGINT UNSIGNED PRIMARY KEY, ti TINYINT, tu TINYINT UNSIGNED, y YEAR, mi MEDIUMINT,
  iu INT UNSIGNED, d DECIMAL(12,3), f FLOAT, g DOUBLE, dt DATE, dtm DATETIME(6), ts TIMESTAMP(3) NULL,
  b BIT(5), bn BINARY(4), vb VARBINARY(8), e ENUM('x','y','z'), s SET('p','q'), c VARCHAR(20) CHARACTER SET latin1,
  t TEXT, j JSON);
INSERT INTO {db}.w VALUES
  (18446744073709551615, -128, 255, 2155, -8388608, 4294967295, -123456789.125, 1.5, -2.25e300, '1000-01-01',
   '2024-02-29 23:59:59.999999', '2038-01-19 03:14:07.999', b'10101', 'ab', x'00ff', 'z', 'p,q', 'café', 'τ', '{{"a": 1}}'),
  (1, 127, 0, 0, 8388607, 0, 0.5, -0.0, 0, '0000-00-00', '0000-00-00 00:00:00', NULL, b'0', '', '', 'x', '', '', '', NULL),
  (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
UPDATE {db}.w SET id = 3, t = 'moved' WHERE id = 2;
UPDATE {db}.w SET d = d + 1, c = 'ünï' WHERE id = 1;
DELETE FROM {db}.w WHERE id = 18446744073709551615;
INSERT INTO {db}.w (id, t) VALUES (18446744073709551615, 'back');
CREATE TABLE {db}.k (a INT, b VARCHAR(10), v INT, PRIMARY KEY (a, b));
INSERT INTO {db}.k VALUES (1, 'x', 1), (1, 'y', 2);
BEGIN; UPDATE {db}.k SET a = 9 WHERE b = 'x'; UPDATE {db}.k SET b = 'x' WHERE a = 1; COMMIT;
BEGIN; INSERT INTO {db}.k VALUES (5, 'r', 5); ROLLBACK;
CREATE TABLE {db}.nokey (v INT, t VARCHAR(5));
INSERT INTO {db}.nokey VALUES (1, 'a'), (1, 'a'); DELETE FROM {db}.nokey LIMIT 1;
CREATE TABLE {db}.log (at DATETIME, e ENUM('in', 'out'), u INT UNSIGNED, msg TEXT);
INSERT INTO {db}.log VALUES ('2024-01-01 00:00:00', 'in', 4294967295, 'a'), ('2024-01-01 00:00:00', 'in', 4294967295, 'a'),
  ('0000-00-00 00:00:00', 'out', 0, NULL);
"""


def _second(db: str) -> str:
    return f"""
SET SESSION sql_mode = '';
UPDATE {db}.w SET ti = ti - 1, e = 'y' WHERE id = 1;
DELETE FROM {db}.w WHERE id = 3;
INSERT INTO {db}.w (id, dt, ts) VALUES (3, '2024-02-30', '1970-01-01 00:00:01'), (4, '9999-12-31', NULL);
UPDATE {db}.k SET v = v + 10;
DELETE FROM {db}.k WHERE a = 9;
INSERT INTO {db}.log VALUES (NULL, 'out', 1, 'b');
INSERT INTO {db}.nokey VALUES (2, 'b'), (2, 'b');
DELETE FROM {db}.nokey WHERE v = 1 LIMIT 1;
UPDATE {db}.nokey SET t = 'c' WHERE v = 2 LIMIT 1;
"""


@pytest.mark.mariadb
@pytest.mark.spark
@pytest.mark.parametrize("metadata,delete_mode,read", [("FULL", "hard", "together"), ("MINIMAL", "soft", "by parts")])
def test_segments_folded_in_arrow_equal_the_server_run_after_run(spark, mariadb_factory, tmp_path, monkeypatch,  # noqa: F811
                                                                  metadata, delete_mode, read):
    """No segment is fetched for the small segments' path (its budget 0), so every segment on
    delta-rs is applied as a big one (MINIMAL metadata: signedness and ENUM numbers fixed), the
    keyless tables too (a log of inserts; copies deleted and updated, the second run's against
    silver's stored copies). Two runs, the second on the rows silver holds. Silver equals the
    server. Read together: the big segments in one pass over bronze; by parts: as segments too
    big for that are, each part a record batch, folded part by part. Typed by Arrow's casts, as
    segments of many changes are."""
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    monkeypatch.setattr(driver, "FETCH_ROWS", 0)
    monkeypatch.setattr(arrow_typing, "VECTORIZE_FROM", 0)  # (Arrow's casts, however few the changes)
    monkeypatch.setattr(arrow_pool, "THREADS_FROM", 0)  # (an image's columns typed, the winners' taken, side by side)
    passes = []  # the big segments read together: one pass over bronze for all of them
    read_segments = segment_cells.read_segments
    monkeypatch.setattr(segment_cells, "read_segments",
                        lambda scan, reads, *a, **k: passes.append(len(reads)) or (
                            read_segments(scan, reads, *a, **k) if read == "together" else None))
    parts, read_parts, batches = [], segment_cells.read_parts, segment_cells._batches
    monkeypatch.setattr(segment_cells, "read_parts", lambda scan, r, *a, **k: (
        parts.append(p) or p for p in read_parts(scan, r, part_bytes=1)))
    monkeypatch.setattr(segment_cells, "_batches", lambda *a: (  # (a batch, so a part, per change)
        one for b in batches(*a) for one in pa.Table.from_batches([b]).to_batches(max_chunksize=1)))
    srv = mariadb_factory(row_metadata=metadata)
    db, folder, wh = "big", tmp_path / "in", tmp_path / "wh"
    folder.mkdir()
    cfg = load_config(None, {"input": str(folder), "warehouse": str(wh), "progress": False, "delta.backend": "rs",
                             "delete_mode": delete_mode})
    for run, sql in enumerate((_wide_workload(db), _second(db))):
        passes.clear()
        stats = ship_and_run(spark, srv, sql, folder, cfg)
        assert {k: v["applied_by"] for k, v in stats.tables.items()} == \
            {f"{db}.w": ["arrow"], f"{db}.k": ["arrow"], f"{db}.log": ["arrow"], f"{db}.nokey": ["arrow"]}
        assert passes == [4]
        assert not parts if read == "together" else sum(p.n for p in parts) == len(parts) > 3  # (a change each)
        parts.clear()
        for t in ("w", "k", "nokey", "log"):
            cols = server_columns(srv, db, t)
            want, got = server_rows(srv, db, t, cols), silver_rows(wh, db, t, cols)
            assert got == want, _diff(f"run {run + 1}: {db}.{t}", cols, want, got or [])
