"""Silver's typing (one implementation: silver.arrow_typing, on the driver and inside Spark's tasks)
against values written by hand or derived from the generated ones, value for value; and
silver.driver (small batches MERGEd from Arrow) against apply_changes, table for table."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spark_fixtures import spark  # noqa: F401
from test_typemap import ALL_TYPES, BRONZE_DDL, ZERO_DATES_IN_ALL_TYPES, _image

from pipelines import delta_io, silver
from pipelines.silver import driver
from pipelines.silver.driver_fold import apply_small
from pipelines.silver.arrow_typing import typed_row
from pipelines.silver.spark_typing import typed_columns
from pipelines.silver.typed_values import NotCanonical, convert
from pipelines.schema.typemap import ColumnSpec

UTC = dt.timezone.utc


def _spark_typed(spark, specs, images):
    """The typing in Spark's tasks of ``images`` (lists of (idx, name, type, text, bin)), as Python values by way of Arrow."""
    bronze = spark.createDataFrame([(f"{i:04d}", "c", image, None) for i, image in enumerate(images)], BRONZE_DDL)
    rows = typed_columns(bronze, specs).orderBy("_seq").select("after", "_zero_dates").toArrow().to_pylist()
    return [(None if r["after"] is None else tuple(r["after"].values()), r["_zero_dates"]) for r in rows]


def _driver_typed(specs, images):
    return [typed_row(specs, [{"idx": c[0], "text": c[3], "bin": c[4]} for c in image]) for image in images]


def test_every_type_of_the_mapping_types_on_the_driver_as_in_sparks_tasks(spark):
    specs = [e[0] for e in ALL_TYPES]
    driver = _driver_typed(specs, [_image(ALL_TYPES)])
    assert driver == _spark_typed(spark, specs, [_image(ALL_TYPES)])
    values, zeros = driver[0]
    assert zeros == ZERO_DATES_IN_ALL_TYPES
    assert list(values) == [bytes(e[3]) if isinstance(e[3], bytearray) else e[3] for e in ALL_TYPES]


_INT_SPECS = [ColumnSpec("ti", "tinyint"), ColumnSpec("tiu", "tinyint", unsigned=True), ColumnSpec("si", "smallint"),
              ColumnSpec("mi", "mediumint"), ColumnSpec("i", "int"), ColumnSpec("iu", "int", unsigned=True),
              ColumnSpec("bi", "bigint"), ColumnSpec("biu", "bigint", unsigned=True), ColumnSpec("y", "year"),
              ColumnSpec("b", "bit", length=64)]
_BOUNDS = [(-128, 127), (0, 255), (-32768, 32767), (-8388608, 8388607), (-2**31, 2**31 - 1), (0, 2**32 - 1),
           (-2**63, 2**63 - 1), (0, 2**64 - 1), (0, 2155), (0, 2**64 - 1)]
_REST_SPECS = [ColumnSpec("dec", "decimal", precision=12, scale=3), ColumnSpec("f", "float"),
               ColumnSpec("d", "double"), ColumnSpec("dt", "date"), ColumnSpec("dtm", "datetime"),
               ColumnSpec("ts", "timestamp"), ColumnSpec("bn", "binary", length=6), ColumnSpec("t", "varchar")]


def _float32_text(x: float) -> str:
    import struct

    return repr(struct.unpack("<f", struct.pack("<f", x))[0])  # the decoder's text of a FLOAT


_row = st.tuples(
    *[st.integers(lo, hi) for lo, hi in _BOUNDS],
    st.decimals(min_value=Decimal("-999999999.999"), max_value=Decimal("999999999.999"), places=3,
                allow_nan=False, allow_infinity=False),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.floats(allow_nan=False, allow_infinity=False),
    st.tuples(st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32)),
    st.tuples(st.integers(1000, 9999), st.integers(1, 12), st.integers(1, 31), st.integers(0, 23),
              st.integers(0, 59), st.integers(0, 59), st.integers(0, 999999), st.integers(0, 6)),
    st.datetimes(min_value=dt.datetime(1970, 1, 1, 0, 0, 1), max_value=dt.datetime(2038, 1, 19, 3, 14, 7)),
    st.binary(max_size=6),
    st.text(max_size=12),
)


def _cells(row) -> list:
    ints, (dec, f, d, (y, m, day), parts, ts, bn, text) = row[:10], row[10:]
    frac = f".{parts[6]:06d}"[: parts[7] + 1] if parts[7] else ""
    texts = [str(v) for v in ints] + [
        f"{dec:.3f}", _float32_text(f), repr(d), f"{y:04d}-{m:02d}-{day:02d}",
        f"{parts[0]:04d}-{parts[1]:02d}-{parts[2]:02d} {parts[3]:02d}:{parts[4]:02d}:{parts[5]:02d}{frac}",
        ts.isoformat(sep=" "), None, text]
    specs = _INT_SPECS + _REST_SPECS
    return [(i, s.name, s.mysql_type.upper(), t, bn if s.name == "bn" else None)
            for i, (s, t) in enumerate(zip(specs, texts))]


def _expected(row) -> tuple:
    """The silver values of a generated row (:func:`_cells`), from the generated values themselves:
    integers as they are (YEAR 0 NULL and a zero date; BIT(64) two's complement; BIGINT UNSIGNED a
    Decimal), a DECIMAL(12,3), the FLOAT as single precision, dates and times NULL and counted
    where the calendar has no such day, a TIMESTAMP in UTC, BINARY(6) padded with zero bytes."""
    import calendar
    import struct

    ints, (dec, f, d, (y, m, day), parts, ts, bn, text) = row[:10], row[10:]
    values, zeros = list(ints), 0
    values[7] = Decimal(ints[7])  # BIGINT UNSIGNED
    if values[8] == 0:  # YEAR 0000
        values[8], zeros = None, zeros + 1
    values[9] = ints[9] - 2**64 if ints[9] >= 2**63 else ints[9]  # BIT(64)

    def day_of(year, month, mday):
        ok = 1 <= month <= 12 and year > 0 and 1 <= mday <= calendar.monthrange(year, month)[1]
        return dt.date(year, month, mday) if ok else None
    date = day_of(y, m, day)
    frac = int(f"{parts[6]:06d}"[: parts[7]].ljust(6, "0")) if parts[7] else 0
    moment = day_of(*parts[:3])
    moment = None if moment is None else dt.datetime(*parts[:6], frac)
    values += [dec, struct.unpack("<f", struct.pack("<f", f))[0], d, date, moment, ts.replace(tzinfo=UTC),
               bn.ljust(6, b"\x00"), text]
    return tuple(values), zeros + (date is None) + (moment is None)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.large_base_example,
                                                            HealthCheck.too_slow, HealthCheck.data_too_large])
@given(rows=st.lists(_row, min_size=70, max_size=70))
def test_random_canonical_values_type_as_generated(spark, rows):
    """Random values of every type in the decoder's canonical texts (invalid dates such as
    2023-02-30 and month 13 included): the values and zero-date counts, on the driver (a few
    changes: value by value) and in Spark's tasks (70 changes: Arrow's casts), are the
    generated values."""
    specs = _INT_SPECS + _REST_SPECS
    images = [_cells(r) for r in rows]
    expected = [_expected(r) for r in rows]
    assert _driver_typed(specs, images) == expected
    assert _spark_typed(spark, specs, images) == expected


@pytest.mark.parametrize("spec, text", [
    (ColumnSpec("ti", "tinyint"), "128"),  # out of the silver type's range: the run fails naming the column
    (ColumnSpec("i", "int"), "1.5"),
    (ColumnSpec("i", "int"), " 7"),
    (ColumnSpec("dec", "decimal", precision=4, scale=2), "100.00"),
    (ColumnSpec("d", "date"), "20240101"),
    (ColumnSpec("f", "double"), "inf"),
    (ColumnSpec("dtm", "datetime"), "2024-01-01T00:00:00"),
])
def test_texts_in_other_forms_do_not_convert(spec, text):
    with pytest.raises(NotCanonical):
        convert(spec, text, None)


@pytest.mark.parametrize("precision, scale, text, value", [
    (38, 38, "0." + "9" * 38, Decimal("0." + "9" * 38)), (38, 0, "9" * 38, Decimal("9" * 38)),
    (38, 10, "-" + "9" * 28 + "." + "9" * 10, Decimal("-" + "9" * 28 + "." + "9" * 10)),
    (30, 2, "123456789012345678901234567.005", Decimal("123456789012345678901234567.01")),  # (half up)
])
def test_decimals_wider_than_28_digits_type_exactly(spark, precision, scale, text, value):
    """The DECIMAL typing is not held to Python's default 28 digits: a DECIMAL(38,38) value sent
    its whole segment to Spark's path (the e2e workload's all-types table)."""
    specs = [ColumnSpec("dec", "decimal", precision=precision, scale=scale)]
    images = [[(0, "dec", f"DECIMAL({precision},{scale})", text, None)]]
    assert _driver_typed(specs, images) == _spark_typed(spark, specs, images) == [((value,), 0)]


def test_a_binary_cell_without_bytes_does_not_convert():
    with pytest.raises(NotCanonical):
        convert(ColumnSpec("b", "blob"), "x", None)


# ---------------------------------------------------------------------------------------------
# driver_fold.apply_small against silver.apply_changes

SPECS = [ColumnSpec("id", "int"), ColumnSpec("name", "varchar"), ColumnSpec("amount", "decimal", precision=8, scale=2),
         ColumnSpec("at", "timestamp"), ColumnSpec("d", "date")]
T0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


def _img(id_, name, amount="1.00", at="2024-05-01 10:00:00", d="2024-05-01"):
    return [(0, "id", "LONG", None if id_ is None else str(id_), None), (1, "name", "VARCHAR", name, None),
            (2, "amount", "NEWDECIMAL", amount, None), (3, "at", "TIMESTAMP2", at, None), (4, "d", "DATE", d, None)]


def _bronze_rows(changes):
    """(seq, op, before, after) -> bronze-like rows (dicts as driver.fetch gives them)."""
    out = []
    for seq, op, before, after in changes:
        cells = lambda img: None if img is None else [  # noqa: E731
            {"idx": c[0], "name": c[1], "type": c[2], "text": c[3], "bin": c[4]} for c in img]
        out.append({"_seq": seq, "op": op, "commit_ts": T0 + dt.timedelta(seconds=int(seq)), "before": cells(before),
                    "after": cells(after)})
    return out


BATCH_1 = [
    ("001", "c", None, _img(1, "a")),
    ("002", "c", None, _img(2, "b", "2.50")),
    ("003", "c", None, _img(3, "c", d="0000-00-00")),  # a zero date: NULL, counted
    ("004", "u", _img(1, "a"), _img(1, "a2", "9.99")),
    ("005", "u", _img(2, "b", "2.50"), _img(20, "b moved")),  # the key changed: delete 2, upsert 20
    ("006", "d", _img(3, "c", d="0000-00-00"), None),
    ("007", "d", _img(99, "never there"), None),  # a delete of a key silver never held
    ("008", "c", None, _img(4, "d")),
    ("009", "u", _img(4, "d"), _img(4, "d2")),
]
BATCH_2 = [
    ("007", "d", _img(99, "never there"), None),  # below the watermark: skipped
    ("010", "d", _img(1, "a2", "9.99"), None),
    ("011", "c", None, _img(5, "e", at="0000-00-00 00:00:00")),
    ("012", "u", _img(20, "b moved"), _img(20, "b again", "0.01")),
]


def _spark_apply(spark, path, rows, delete_mode, keys=("id",)):
    """The same rows through Spark's path: changes_from_bronze, then apply_changes."""
    image = "ARRAY<STRUCT<idx INT, name STRING, type STRING, text STRING, bin BINARY>>"
    df = spark.createDataFrame(
        [(r["_seq"], r["op"], r["commit_ts"],
          None if r["before"] is None else [tuple(c.values()) for c in r["before"]],
          None if r["after"] is None else [tuple(c.values()) for c in r["after"]]) for r in rows],
        f"_seq STRING, op STRING, commit_ts TIMESTAMP, before {image}, after {image}")
    changes = silver.changes_from_bronze(df, SPECS, partial=False)
    return silver.apply_changes(spark, changes, SPECS, path, keys=list(keys) or None, delete_mode=delete_mode,
                                backend="rs")


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_small_batches_on_the_driver_give_the_table_apply_changes_gives(spark, tmp_path, delete_mode):
    by_spark, by_driver = str(tmp_path / "spark"), str(tmp_path / "driver")
    for batch in (BATCH_1, BATCH_2, BATCH_2):  # the last: all below the watermark
        rows = _bronze_rows(batch)
        expected = _spark_apply(spark, by_spark, rows, delete_mode)
        got = apply_small(spark, by_driver, rows, SPECS, ["id"], delete_mode=delete_mode)
        fields = ("changes", "skipped_by_watermark", "inserted", "updated", "deleted", "unchanged",
                  "zero_dates_nulled", "watermark", "committed")
        assert {f: getattr(got, f) for f in fields} == {f: getattr(expected, f) for f in fields}
    read = lambda p: spark.createDataFrame(delta_io.open_table(p).read_arrow().to_pylist(),  # noqa: E731
                                           delta_io.open_table(p, "rs").schema())
    assert_df_equality(read(by_driver), read(by_spark), ignore_row_order=True)
    assert silver.read_watermark(by_driver, backend="rs") == "012"
    ids = sorted(r["id"] for r in delta_io.open_table(by_driver).read_arrow(["id"]).to_pylist())
    assert ids == ([1, 2, 3, 4, 5, 20, 99] if delete_mode == "soft" else [4, 5, 20])  # soft: tombstones stay


KEYLESS_1 = [
    ("001", "c", None, _img(1, "a")),
    ("002", "c", None, _img(1, "a")),  # a second copy
    ("003", "c", None, _img(2, "b")),
    ("004", "d", _img(1, "a"), None),  # one copy goes
    ("005", "u", _img(2, "b"), _img(2, "b2")),
    ("006", "d", _img(7, "never there"), None),  # finds no copy: counted
]
KEYLESS_2 = [
    ("007", "d", _img(1, "a"), None),  # the last stored copy
    ("008", "d", _img(1, "a"), None),  # none left
    ("009", "c", None, _img(2, "b2")),  # a copy of a stored row
    ("010", "u", _img(2, "b2"), _img(3, "c")),  # one of the two copies changes
]


@pytest.mark.parametrize("delete_mode", ["hard", "soft"])
def test_keyless_batches_on_the_driver_give_the_table_apply_changes_gives(spark, tmp_path, delete_mode):
    by_spark, by_driver = str(tmp_path / "spark"), str(tmp_path / "driver")
    for batch in (KEYLESS_1, KEYLESS_2, KEYLESS_2):
        rows = _bronze_rows(batch)
        expected = _spark_apply(spark, by_spark, rows, delete_mode, keys=())
        got = apply_small(spark, by_driver, rows, SPECS, [], delete_mode=delete_mode)
        fields = ("changes", "skipped_by_watermark", "inserted", "updated", "deleted", "missing_deletes",
                  "zero_dates_nulled", "watermark", "committed")
        assert {f: getattr(got, f) for f in fields} == {f: getattr(expected, f) for f in fields}
    read = lambda p: spark.createDataFrame(delta_io.open_table(p).read_arrow().to_pylist(),  # noqa: E731
                                           delta_io.open_table(p, "rs").schema())
    assert_df_equality(read(by_driver), read(by_spark), ignore_row_order=True)
    live = sorted((r["id"], r["name"]) for r in delta_io.open_table(by_driver).read_arrow().to_pylist()
                  if not r["_deleted"])
    assert live == [(2, "b2"), (3, "c")]


def test_a_value_that_does_not_convert_writes_nothing_on_the_driver(spark, tmp_path):
    path = str(tmp_path / "t")
    rows = _bronze_rows([("001", "c", None, _img(1, "a", amount="1e3"))])  # not the decoder's decimal text
    with pytest.raises(NotCanonical):
        apply_small(spark, path, rows, SPECS, ["id"])
    assert not delta_io.open_table(path, "rs").exists()


def test_eligible_for_small_batches():
    ok = dict(keys=["id"], specs=SPECS, rejected={}, partial=False, scd2=False, rows=10)
    assert driver.eligible(**ok)
    assert driver.eligible(**{**ok, "keys": []})  # keyless tables too
    assert driver.eligible(**{**ok, "partial": True})  # partial images of a keyed table: filled first
    for change in (dict(rejected={"x": "y"}), dict(partial=True, keys=[]),
                   dict(scd2=True), dict(rows=driver.SMALL_ROWS + 1), dict(rows=0)):
        assert not driver.eligible(**{**ok, **change})
    # the Arrow path of big segments takes whole images only, of any number of changes
    assert not driver.eligible(**{**ok, "partial": True}, limit=None)
    assert driver.eligible(**{**ok, "rows": 10**9}, limit=None) and not driver.eligible(**{**ok, "rows": 0}, limit=None)



def test_fetch_gives_each_segment_its_rows_from_one_read(spark):
    cells = "ARRAY<STRUCT<idx INT, text STRING, bin BINARY>>"
    bronze = spark.createDataFrame(
        [("s", "a", "001", "c", T0, None, [(0, "1", None)]), ("s", "b", "002", "c", T0, None, [(0, "2", None)]),
         ("s", "a", "003", "u", T0, [(0, "1", None)], [(0, "3", None)]), ("s", "a", "005", "d", T0, [(0, "3", None)], None),
         ("t", "a", "004", "c", T0, None, [(0, "4", None)])],
        f"db STRING, `table` STRING, _seq STRING, op STRING, commit_ts TIMESTAMP, before {cells}, after {cells}")
    segments = [("s", "a", "001", "005"), ("t", "a", "", None), ("s", "b", "002", None), ("s", "c", "", None)]
    got = {k: [(r["_seq"], r["op"], r["after"]) for r in v.to_pylist()]
           for k, v in driver.fetch(bronze, segments).items()}
    assert got == {
        ("s", "a", "001", "005"): [("003", "u", [{"idx": 0, "text": "3", "bin": None}])],  # above 001, below 005
        ("t", "a", "", None): [("004", "c", [{"idx": 0, "text": "4", "bin": None}])],
        ("s", "b", "002", None): [],  # nothing above its start
        ("s", "c", "", None): [],
    }


def test_value_fixes_complete_cells_before_typing(spark, tmp_path):
    """ENUM numbers (a table map without names), latin1 and sjis texts logged as bytes: completed
    before typing, on the driver and in Spark's tasks; an ENUM number beyond the members does not
    convert; bytes a charset refuses become U+FFFD."""
    specs = [ColumnSpec("id", "int"), ColumnSpec("tier", "enum", enum_values=("gold", "platinum")),
             ColumnSpec("name", "varchar", charset="latin1"), ColumnSpec("jp", "varchar", charset="sjis")]
    fixes = {1: ("enum", ("gold", "platinum")), 2: ("decode", "latin1"), 3: ("decode", "sjis")}
    images = [[(0, None, "LONG", "1", None), (1, None, "ENUM", "2", None), (2, None, "VARCHAR", None, b"Caf\xe9 \x80"),
               (3, None, "VARCHAR", None, "日本".encode("shift_jis"))],
              [(0, "id", "LONG", "2", None), (1, "tier", "ENUM", "gold", None), (2, "name", "VARCHAR", "x", None),
               (3, None, "VARCHAR", None, b"\x82")],
              [(0, "id", "LONG", "3", None), (1, None, "ENUM", "\u0661", None), (2, None, "VARCHAR", None, None),
               (3, None, "VARCHAR", None, None)]]  # (a member named by Arabic-Indic digit one: not a number)
    bronze = spark.createDataFrame([(f"{i:03d}", "c", img, None) for i, img in enumerate(images)], BRONZE_DDL)
    by_spark = [tuple(r["after"].values()) for r in typed_columns(bronze, specs, fixes=fixes).orderBy("_seq")
                .select("after").toArrow().to_pylist()]
    by_driver = [typed_row(specs, [{"idx": c[0], "name": c[1], "text": c[3], "bin": c[4]} for c in img], fixes)[0]
                 for img in images]
    assert by_driver == by_spark == [(1, "platinum", "Café €", "日本"), (2, "gold", "x", "\ufffd"),
                                     (3, "\u0661", None, None)]
    with pytest.raises(NotCanonical, match=r"column 'tier' \(enum\): cannot convert text 3"):
        typed_row(specs, [{"idx": 1, "name": None, "text": "3", "bin": None}], fixes)


def test_segments_with_large_values_come_to_the_driver_only_within_a_byte_budget(spark):
    cells = "ARRAY<STRUCT<idx INT, text STRING, bin BINARY>>"
    bronze = spark.createDataFrame(
        [("s", "a", "001", "c", T0, None, [(0, "x" * 100, None)]), ("s", "a", "002", "c", T0, None, [(0, "y" * 100, None)]),
         ("s", "b", "003", "c", T0, None, [(0, None, b"z" * 500)]),
         ("s", "c", "004", "u", T0, [(0, "q" * 10, None)], [(0, "r" * 10, None)])],
        f"db STRING, `table` STRING, _seq STRING, op STRING, commit_ts TIMESTAMP, before {cells}, after {cells}")
    segments = [("s", "a", "", None), ("s", "b", "", None), ("s", "c", "", None)]
    assert driver.within_bytes(bronze, segments, 10_000) == segments
    assert driver.within_bytes(bronze, segments, 600) == segments[:1]  # a: 200 bytes, then b: 500 more
    assert driver.within_bytes(bronze, segments, 199) == []
    assert driver.large_values(["0\x1fid\x1fLONG\x1e1\x1fbody\x1fLONGBLOB utf8mb4"])
    assert driver.large_values(["0\x1f\x00\x1fJSON"]) and driver.large_values(["0\x1fv\x1fVARCHAR(4000) utf8mb4"])
    assert not driver.large_values(["0\x1fid\x1fLONG\x1e1\x1fv\x1fVARCHAR(255) utf8mb4\x1e2\x1ft\x1fTINYBLOB"])


def test_ddl_defaults_are_typed_as_the_server_takes_them():
    """A DEFAULT's text is as its statement wrote it: a date for a DATETIME takes midnight, a sign
    or a zero fraction on an integer and spaces are dropped; a text that still does not convert is
    no usable default (None); a NOT NULL column without one takes MySQL's implicit default."""
    from types import SimpleNamespace as Col

    from pipelines.silver.schema_events import default_values

    cols = [Col(name="d", type="DATETIME", default="2020-01-02", nullable=True, values=()),
            Col(name="n", type="INT", default="+5.0", nullable=True, values=()),
            Col(name="x", type="DECIMAL", default=" 1.50", nullable=True, values=()),
            Col(name="bad", type="INT", default="abc", nullable=True, values=()),
            Col(name="z", type="INT", default=None, nullable=False, values=())]
    specs = {"d": ColumnSpec("d", "datetime"), "n": ColumnSpec("n", "int"),
             "x": ColumnSpec("x", "decimal", precision=5, scale=2), "bad": ColumnSpec("bad", "int"),
             "z": ColumnSpec("z", "int")}
    assert default_values(cols, specs) == {"d": dt.datetime(2020, 1, 2), "n": 5, "x": Decimal("1.50"), "bad": None,
                                           "z": 0}
