"""The column-wise bronze builder (:class:`pipelines.bronze.arrow_rows.ArrowRowsBuilder`, what the
staging tasks write) gives exactly the rows of the row-by-row reference (:func:`bronze_row`):
on fresh binlogs of every column type under four server settings, on every binlog of the
shared corpus, cut into chunks at arbitrary points, and value by value for mixed columns."""
from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines import bronze
from pipelines.bronze import decode as bronze_decode
from pipelines.bronze import bookkeeping
from pipelines.binlog.txindex import scan
from pipelines.bronze.arrow_rows import ArrowRowsBuilder, _generic, column_arrays
from spark_fixtures import spark  # noqa: F401
from workloads import all_types_workload, roundtrip_workload

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
NOW = dt.datetime(2026, 11, 24, 1, 2, 3, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def schema(spark):
    from pipelines.delta_io import spark_schema_to_arrow

    return spark_schema_to_arrow(bookkeeping.bronze_struct(), force_nullable=True)


def _work(path: Path) -> bronze.WorkRange | None:
    idx = scan(str(path))
    if not idx.transactions:
        return None
    start, end = idx.transactions[0].begin_pos, idx.complete_until
    return bronze.WorkRange(path.name, str(path), 7, start, end, bronze_decode._sub_index(idx, start, end), "run-1", NOW)


def _reference(w: bronze.WorkRange, schema: pa.Schema) -> pa.Table:
    rows = [rec[1] for rec in bronze.decode_range(w) if rec[0] == "row"]
    columns = list(zip(*rows)) if rows else [[] for _ in schema]
    return pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)


def _columnar(w: bronze.WorkRange, schema: pa.Schema, take_every: int | None = None) -> pa.Table:
    builder = ArrowRowsBuilder(schema, w.file_seq, w.run_id, w.ingested_at)
    batches, events = [], 0
    for rec in bronze.decode_range(w, batches=True):
        if rec[0] == "rows":
            builder.add(*rec[1])
            events += 1
            if take_every and events % take_every == 0:
                batches.append(builder.take())
    batches.append(builder.take())
    return pa.Table.from_batches([b for b in batches if b is not None], schema=schema)


def assert_same(path: Path, schema: pa.Schema, take_every: int | None = None) -> int:
    w = _work(path)
    if w is None:
        return 0
    want, got = _reference(w, schema), _columnar(w, schema, take_every)
    assert got.num_rows == want.num_rows, path
    if not got.equals(want):
        for name in schema.names:
            a, b = got.column(name).to_pylist(), want.column(name).to_pylist()
            for i, (x, y) in enumerate(zip(a, b)):
                assert x == y, f"{path}: row {i} column {name}: columnar {x!r} != reference {y!r}"
        pytest.fail(f"{path}: tables differ in a way to_pylist does not show")
    return want.num_rows


SETTINGS = {
    "minimal-meta": dict(row_metadata="MINIMAL"),
    "full-meta": dict(row_metadata="FULL", checksum="NONE"),
    "minimal-image": dict(row_image="MINIMAL", row_metadata="FULL"),
    "noblob-image": dict(row_image="NOBLOB"),
}


@pytest.mark.parametrize("setting", SETTINGS, ids=list(SETTINGS))
def test_equal_on_fresh_binlogs_of_every_type(mariadb_factory, schema, setting):
    srv = mariadb_factory(**SETTINGS[setting])
    all_types_workload(srv, db="wl")
    roundtrip_workload(srv, seed=3, n=80, n_updates=30, n_deletes=10, rows_per_statement=7)
    srv.flush_logs()
    rows = sum(assert_same(p, schema) for p in srv.binlog_files())
    assert rows > 150
    # the same rows when the chunks are cut every few events (groups of several tables interleave)
    for every in (1, 3):
        for p in srv.binlog_files():
            assert_same(p, schema, take_every=every)


def _corpus_binlogs() -> list[Path]:
    if not CORPUS.is_dir():
        return []
    out = []
    for p in sorted(CORPUS.rglob("*")):
        if p.is_file() and "encrypted" not in str(p):
            with open(p, "rb") as fh:
                if fh.read(4) == b"\xfebin":
                    out.append(p)
    return out


def test_equal_on_the_corpus(schema):
    files = _corpus_binlogs()
    if not files:
        pytest.skip(f"binlog corpus not found at {CORPUS}")
    rows = sum(assert_same(p, schema) for p in files)
    assert rows > 50_000  # 56,415 row changes in the corpus of 2026-11


# -- value by value ------------------------------------------------------------------------

_UTC = dt.timezone.utc
_datetimes = st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59))
_VALUES = {
    "int": st.integers(min_value=-(2 ** 63), max_value=2 ** 64 - 1),
    "float": st.floats(allow_nan=True, allow_infinity=True, width=64),
    "decimal": st.decimals(allow_nan=False, allow_infinity=False, places=None),
    "datetime": _datetimes,
    "aware": _datetimes.map(lambda d: d.replace(tzinfo=_UTC)),
    "str": st.text(max_size=8),
    "bytes": st.binary(max_size=8),
    "date": st.dates(),
    "time": st.timedeltas(min_value=dt.timedelta(hours=-838), max_value=dt.timedelta(hours=838)),
}


@settings(max_examples=300, deadline=None)
@given(kinds=st.lists(st.sampled_from(sorted(_VALUES)), min_size=1, max_size=3), fsp=st.sampled_from([None, 0, 3, 6]),
       data=st.data())
def test_column_arrays_equal_one_by_one(kinds, fsp, data):
    values = data.draw(st.lists(st.one_of(st.none(), *[_VALUES[k] for k in kinds]), max_size=12))
    texts, bins = _generic(values, fsp)
    text, binary = column_arrays(values, fsp)
    assert text.to_pylist() == texts
    assert binary.to_pylist() == bins


def test_column_arrays_fast_paths_cover_typical_columns():
    rng = random.Random(5)
    for values, fsp in [
        ([rng.randrange(-2 ** 63, 2 ** 63) for _ in range(50)] + [None], None),
        ([2 ** 64 - 1, 5, None], None),  # BIGINT UNSIGNED above int64: one by one
        ([dt.datetime(2024, 1, 1, 0, 0, 0, 123456), dt.datetime(999, 1, 2), None], 3),
        ([dt.datetime(2024, 1, 1, 5, tzinfo=_UTC), None], 0),
        ([Decimal("1E+3"), Decimal("-0.50"), Decimal("0E-10"), None], None),
        ([0.1, 1e16, -0.0, float("inf"), None], None),
        (["a", "0000-00-00 00:00:00", None], 0),  # a zero date next to no datetime at all
        ([dt.datetime(2024, 1, 1), "0000-00-00 00:00:00"], 0),  # mixed: one by one
    ]:
        texts, bins = _generic(values, fsp)
        text, binary = column_arrays(values, fsp)
        assert (text.to_pylist(), binary.to_pylist()) == (texts, bins), values


def test_text_not_valid_in_its_charset_and_partial_json_keep_what_they_are():
    from pipelines.binlog.jsonb import REPLACE, JsonDiff, PartialJson
    from pipelines.binlog.values import decode_text
    from pipelines.bronze.arrow_rows import _with_bytes
    from pipelines.bronze.schema import PARTIAL_JSON_MARK

    bad = decode_text("Регистрация".encode("cp1251"), "utf-8")
    diffs = PartialJson((JsonDiff(REPLACE, "$.age", (), 31),))
    values = ["ok", bad, diffs, None]
    texts, bins = _generic(values, None)
    assert texts == ["ok", "\ufffd" * 11, '[{"op": "REPLACE", "path": "$.age", "value": "31"}]', None]
    assert bins == [None, "Регистрация".encode("cp1251"), PARTIAL_JSON_MARK, None]
    text, binary = column_arrays(values, None)
    assert (text.to_pylist(), binary.to_pylist()) == (texts, bins)
    cells = pa.StructArray.from_arrays([text, binary], names=["text", "bin"])
    assert _with_bytes(cells) == 1  # the invalid text is counted, the marked diffs are not


# -- the image shape bronze writes -----------------------------------------------------------------

def _silver_tables(warehouse: Path) -> dict[str, list[dict]]:
    import deltalake

    out = {}
    for log in sorted((warehouse / "silver").glob("*/*/_delta_log")):
        rows = deltalake.DeltaTable(str(log.parent)).to_pyarrow_table().to_pylist()
        out[f"{log.parent.parent.name}.{log.parent.name}"] = sorted(rows, key=lambda r: (r["_seq"], repr(r)))
    return out


def test_shape_and_zero_dates_equal_silver_and_an_older_bronze_gains_them(spark, mariadb_factory, tmp_path):
    """``_shape`` as bronze writes it is the text silver computes from the images, and bronze's
    ``_zero_dates`` add up to the zero dates silver counts while typing; a bronze table of an
    older version (neither column) gains them on the next run, and silver over its mix of old
    rows (NULL there) and new rows equals silver over a fresh warehouse."""
    import shutil

    import deltalake
    from pyspark.sql import functions as F

    from pipelines import delta_io
    from pipelines.silver import shapes
    from pipelines.silver import step as silver_step
    from pipelines.config import load_config

    srv = mariadb_factory(row_image="MINIMAL", row_metadata="FULL")  # partial images: several shapes per table
    all_types_workload(srv, db="wl")
    srv.flush_logs()
    inp = tmp_path / "in"
    inp.mkdir()

    def copy_files():
        for f in srv.binlog_files():
            shutil.copyfile(f, inp / f.name)

    def cfg(wh: str):
        return load_config(None, {"input": str(inp), "warehouse": str(tmp_path / wh), "progress": False,
                                  "delta.backend": "rs"})

    copy_files()
    old = cfg("old")
    bronze.run(spark, old)
    path = old.warehouse_path("bronze/binlog_changes")
    table = deltalake.DeltaTable(path).to_pyarrow_table()
    assert table.column("_shape").null_count == 0 and table.column("_zero_dates").null_count == 0
    deltalake.write_deltalake(path, table.drop_columns(["_shape", "_zero_dates"]), mode="overwrite",
                              schema_mode="overwrite")
    names = deltalake.DeltaTable(path).schema().to_arrow().names
    assert "_shape" not in names and "_zero_dates" not in names  # as an older version wrote it

    roundtrip_workload(srv, seed=4, n=40, n_updates=15, n_deletes=5, rows_per_statement=5)
    srv.flush_logs()
    copy_files()
    bronze.run(spark, old)
    typed = silver_step.run(spark, old)  # silver counts the zero dates while typing: some rows lack bronze's
    mixed = delta_io.open_table(path, "rs", spark).read_df()
    assert 0 < mixed.where(F.col("_shape").isNull()).count() < mixed.count()
    assert 0 < mixed.where(F.col("_zero_dates").isNull()).count() < mixed.count()
    assert shapes.written_columns(mixed) == frozenset()
    mixed_rows, mixed_written = shapes.shape_rows_of(mixed)  # the same answer from the shape counts' job
    assert mixed_written == frozenset()
    assert all(r["_shape"] is not None for r in mixed_rows)  # grouped by the images' arrays instead

    fresh = cfg("fresh")
    bronze.run(spark, fresh)
    counted = silver_step.run(spark, fresh)  # every row has bronze's count: silver sums it
    rows = delta_io.open_table(fresh.warehouse_path("bronze/binlog_changes"), "rs", spark).read_df()
    assert shapes.written_columns(rows) == {"_shape", "_zero_dates"}
    shape_rows, written = shapes.shape_rows_of(rows)
    assert written == {"_shape", "_zero_dates"}
    key = lambda r: (r["db"], r["table"], r["_shape"], r["op"])  # noqa: E731
    assert sorted(map(key, shape_rows)) == sorted(map(key, shapes.shape_counts(rows, by_shape=True).collect()))
    assert rows.where(F.col("_shape").isNull() | (F.col("_shape") != shapes.shape_column())).count() == 0
    assert rows.select("_shape").distinct().count() > 3
    assert typed.zero_dates == counted.zero_dates == rows.agg(F.sum("_zero_dates")).first()[0] > 0

    def comparable(tables):  # the run's own columns differ between the two warehouses
        return {k: [{c: v for c, v in r.items() if c not in ("_run_id", "_ingested_at")} for r in rows]
                for k, rows in tables.items()}

    got, want = comparable(_silver_tables(tmp_path / "old")), comparable(_silver_tables(tmp_path / "fresh"))
    assert set(got) == set(want) and len(want) >= 3
    assert got == want


def test_bronze_sees_truncate_as_ddl(mariadb):
    """TRUNCATE is DDL to bronze (:func:`pipelines.binlog.changes.is_ddl`): the survey hands it to
    the driver with the other schema statements, and the DML around it is not among them."""
    db = "bronze_truncate"
    mariadb.sql(f"CREATE DATABASE `{db}`; CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    path = mariadb.flush_logs()
    mariadb.sql(f"INSERT INTO `{db}`.t VALUES (1); TRUNCATE TABLE `{db}`.t; "
                f"ALTER TABLE `{db}`.t ADD COLUMN c INT; FLUSH BINARY LOGS")
    data = path.read_bytes()
    queries = [q for q, _db, _seq in bronze_decode.batch_statements(data, 1, 4, len(data))]
    assert [q.split(f"`{db}`")[0].strip() for q in queries] == ["TRUNCATE TABLE", "ALTER TABLE"]
