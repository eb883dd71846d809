"""Deletion vectors in silver (issue 20): a table delta-spark creates takes them, so a MERGE that
touches a few rows marks those rows instead of rewriting the files that hold them; delta-rs then
reads, MERGEs and maintains such a table (it rewrites what it touches), and nothing it returns
changes. Measured both ways in BENCHMARKS.md ("Deletion vectors")."""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from pyspark.sql import types as T
from spark_fixtures import require_delta_spark, spark  # noqa: F401  (the shared session fixture)

from pipelines import delta_io, maintenance
from pipelines.config import SilverConfig, load_config
from pipelines.delta_io import spark_commits, spark_writes
from pipelines.schema.typemap import ColumnSpec, silver_schema
from pipelines.silver import apply_changes
from pipelines.silver.properties import for_new_table

pytestmark = pytest.mark.spark

SPECS = [ColumnSpec("id", "int"), ColumnSpec("name", "varchar", length=20)]
T0 = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
N = 3000


def changes(spark, rows):
    """rows: (seq number, op, after | None, before | None)."""
    image = silver_schema(SPECS)
    schema = T.StructType([T.StructField("_seq", T.StringType()), T.StructField("op", T.StringType()),
                           T.StructField("after", image), T.StructField("before", image),
                           T.StructField("_commit_ts", T.TimestampType())])
    return spark.createDataFrame(
        [(f"{s:010d}", op, a, b, T0 + dt.timedelta(seconds=s)) for s, op, a, b in rows], schema).coalesce(1)


def loaded(spark, path: str, deletion_vectors: bool) -> None:
    """A silver table of N rows in one file, then a batch that updates one row and deletes one."""
    inserts = [(i, "c", (i, f"v{i}"), None) for i in range(1, N + 1)]
    apply_changes(spark, changes(spark, inserts), SPECS, path, keys=["id"], backend="spark",
                  properties=for_new_table(SilverConfig(deletion_vectors=deletion_vectors), "spark"))
    few = [(N + 1, "u", (7, "seven"), (7, "v7")), (N + 2, "d", None, (9, "v9"))]
    apply_changes(spark, changes(spark, few), SPECS, path, keys=["id"], backend="spark",
                  properties=for_new_table(SilverConfig(deletion_vectors=deletion_vectors), "spark"))


def last_merge(spark, path: str) -> dict:
    row = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").where("operation = 'MERGE'").orderBy("version", ascending=False).first()
    return {k: int(v) for k, v in row["operationMetrics"].items()}


def rows_of(spark, path: str, backend: str) -> dict[int, tuple[str, str]]:
    return {r["id"]: (r["name"], r["_seq"]) for r in delta_io.open_table(path, backend, spark).read_df().collect()}


def expected(*later: tuple[int, str, int]) -> dict[int, tuple[str, str]]:
    want = {i: (f"v{i}", f"{i:010d}") for i in range(1, N + 1) if i != 9}
    want[7] = ("seven", f"{N + 1:010d}")
    for key, name, seq in later:
        want[key] = (name, f"{seq:010d}")
    return want


def test_a_merge_of_a_few_rows_marks_them_instead_of_rewriting_the_file(spark, tmp_path, monkeypatch):  # noqa: F811
    require_delta_spark(spark)
    # (the table is small: as large ones are, for this test; the next one takes the real bound)
    monkeypatch.setattr(spark_writes, "REWRITE_BELOW_BYTES", 0)
    with_dv, without = str(tmp_path / "dv" / "t"), str(tmp_path / "plain" / "t")
    loaded(spark, with_dv, True)
    loaded(spark, without, False)

    marked = last_merge(spark, with_dv)
    assert marked["numTargetDeletionVectorsAdded"] >= 1 and marked["numTargetFilesRemoved"] == 0, marked
    rewritten = last_merge(spark, without)
    assert rewritten["numTargetDeletionVectorsAdded"] == 0 and rewritten["numTargetFilesRemoved"] >= 1, rewritten
    assert marked["numTargetBytesAdded"] < rewritten["numTargetBytesAdded"]
    assert rows_of(spark, with_dv, "spark") == rows_of(spark, without, "spark") == expected()
    import deltalake

    assert "deletionVectors" in (deltalake.DeltaTable(with_dv).protocol().reader_features or [])
    assert "deletionVectors" not in (deltalake.DeltaTable(without).protocol().reader_features or [])


def test_a_merge_into_a_small_table_rewrites_its_file(spark, tmp_path):  # noqa: F811
    """Below ``REWRITE_BELOW_BYTES`` a MERGE rewrites what it touches: deletion vectors would cost
    it 8 more Spark jobs to spare rewriting a file of a few KB. delta-rs makes that commit from
    the driver (no Spark job at all), and the table keeps the feature."""
    require_delta_spark(spark)
    path = str(tmp_path / "dv" / "t")
    loaded(spark, path, True)
    assert spark_commits.spark_snapshot(spark, path).sizeInBytes() <= spark_writes.REWRITE_BELOW_BYTES
    newest = sorted((Path(path) / "_delta_log").glob("*.json"))[-1].read_text().splitlines()
    actions = [json.loads(line) for line in newest]
    info = next(a["commitInfo"] for a in actions if "commitInfo" in a)
    assert info["operation"] == "MERGE" and "delta-rs" in info.get("clientVersion", ""), info
    assert any("remove" in a for a in actions), actions
    assert all(a["add"].get("deletionVector") is None for a in actions if "add" in a), actions
    assert rows_of(spark, path, "spark") == expected()
    import deltalake

    assert "deletionVectors" in (deltalake.DeltaTable(path).protocol().reader_features or [])


def test_delta_rs_reads_merges_and_maintains_a_table_with_deletion_vectors(spark, tmp_path, monkeypatch):  # noqa: F811
    require_delta_spark(spark)
    monkeypatch.setattr(spark_writes, "REWRITE_BELOW_BYTES", 0)  # (marks rows, as in a large table)
    path = str(tmp_path / "wh" / "silver" / "shop" / "t")
    loaded(spark, path, True)
    assert last_merge(spark, path)["numTargetDeletionVectorsAdded"] >= 1

    # delta-rs reads the marked rows as gone: through Spark, as Arrow, and row by row
    assert rows_of(spark, path, "rs") == expected()
    assert len(delta_io.open_table(path).read_arrow(["id"])) == N - 1
    assert len(delta_io.open_table(path, "rs", spark).read_rows(["id"])) == N - 1

    # it MERGEs into the table (rewriting the file it touches), and delta-spark reads the result
    more = [(N + 3, "u", (11, "eleven"), (11, "v11")), (N + 4, "c", (N + 10, "new"), None)]
    stats = apply_changes(spark, changes(spark, more), SPECS, path, keys=["id"], backend="rs",
                          properties=for_new_table(SilverConfig(), "rs"))
    assert (stats.inserted, stats.updated) == (1, 1)
    want = expected((11, "eleven", N + 3), (N + 10, "new", N + 4))
    assert rows_of(spark, path, "rs") == rows_of(spark, path, "spark") == want

    # maintenance on either backend changes nothing a reader sees
    cfg = load_config(None, {"input": str(tmp_path / "in"), "warehouse": str(tmp_path / "wh"),
                             "maintenance.retention_hours": 0, "maintenance.compact_min_files": 0})
    for backend in ("rs", "spark"):
        maintenance.maintain_table(spark, path, cfg, backend)
        assert rows_of(spark, path, "rs") == rows_of(spark, path, "spark") == want, backend


@pytest.mark.mariadb
def test_every_silver_table_delta_spark_creates_has_deletion_vectors(spark, mariadb_factory, tmp_path):  # noqa: F811
    """The silver step creates tables three ways on delta-spark: a small batch folded on the
    driver (written with its rows), a big one through Spark's MERGE, and a table created empty
    (CREATE TABLE with no rows yet). Each takes deletion vectors, and none when they are off."""
    import shutil

    from pipelines import bronze
    from pipelines.paths import silver_table_path
    from pipelines.silver import step as silver_step

    require_delta_spark(spark)
    srv = mariadb_factory()
    srv.sql("CREATE DATABASE dv; CREATE TABLE dv.small (id INT PRIMARY KEY, v VARCHAR(10));"
            "INSERT INTO dv.small VALUES (1, 'a'), (2, 'b');"
            "CREATE TABLE dv.big (id INT PRIMARY KEY, v VARCHAR(10)); CREATE TABLE dv.empty (id INT PRIMARY KEY);"
            "CREATE TABLE dv.digits (d INT); INSERT INTO dv.digits VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9);"
            "INSERT INTO dv.big SELECT n, 'x' FROM (SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d AS n"
            " FROM dv.digits a, dv.digits b, dv.digits c, dv.digits e, dv.digits f) t WHERE n <= 20001;")
    srv.flush_logs()
    folder = tmp_path / "in"
    folder.mkdir()
    for f in srv.binlog_files()[:-1]:
        shutil.copy(f, folder / f.name)
    for on in (True, False):
        wh = tmp_path / f"wh-{on}"
        cfg = load_config(None, {"input": str(folder), "warehouse": str(wh), "progress": False,
                                 "delta.backend": "spark", "silver.deletion_vectors": on})
        bronze.run(spark, cfg)
        stats = silver_step.run(spark, cfg)
        assert stats.tables["dv.small"]["applied_by"] == ["driver"] and stats.tables["dv.big"]["applied_by"] == ["spark"]
        for table in ("small", "digits", "big", "empty"):
            path = silver_table_path(str(wh), "dv", table)
            detail = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()
            assert detail["properties"].get("delta.enableDeletionVectors") == ("true" if on else None), (table, on)
