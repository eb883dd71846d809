"""``silver.change_data_feed: true`` (issue 36): silver tables record their row changes, so downstream
jobs read silver incrementally (``table_changes`` / ``readChangeFeed`` on delta-spark, ``load_cdf`` on
delta-rs), on both backends; a table that exists when it is turned on gains it at its next run.

The sample binlogs (samples/README.md): the first two files, then the rest, as two runs.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from spark_fixtures import delta_backend, spark  # noqa: F401  (the shared session fixtures)

from pipelines import bronze
from pipelines.config import load_config
from pipelines.silver import step as silver_step
from pipelines.silver.properties import CHANGE_DATA_FEED

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "binlogs"
pytestmark = [pytest.mark.spark]


def _run(spark, binlogs: Path, warehouse: Path, backend: str, cdf: bool) -> None:
    cfg = load_config(REPO / "conf" / "pipeline.yaml", {
        "input": str(binlogs), "warehouse": str(warehouse), "progress": False, "delta.backend": backend,
        "silver.change_data_feed": cdf})
    bronze.run(spark, cfg)
    stats = silver_step.run(spark, cfg)
    assert stats.status == "ok", stats.summary()


def _feed(spark, path: Path, backend: str, start: int = 0) -> list[dict]:
    """The table's change feed from version ``start``: (version, change type, id), in order. Read by
    the backend's own reader: delta-rs (deltalake 1.6) cannot read the change feed of a table with
    deletion vectors, which delta-spark creates."""
    if backend == "spark":
        rows = [r.asDict() for r in spark.read.format("delta").option("readChangeFeed", "true")
                .option("startingVersion", start).load(str(path))
                .select("_commit_version", "_change_type", "id").collect()]
    else:
        rows = pa.table(DeltaTable(str(path)).load_cdf(starting_version=start).read_all()) \
            .select(["_commit_version", "_change_type", "id"]).to_pylist()
    return sorted(({"v": r["_commit_version"], "type": r["_change_type"], "id": r["id"]} for r in rows),
                  key=lambda r: (r["v"], r["id"], r["type"]))


def _live(spark, path: Path, backend: str) -> set[int]:
    if backend == "spark":  # (deletion vectors: delta-spark's reader)
        return {r["id"] for r in spark.read.format("delta").load(str(path)).where("NOT _deleted").collect()}
    return {r["id"] for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist() if not r["_deleted"]}


def test_silver_records_its_changes_when_asked(spark, delta_backend, tmp_path):  # noqa: F811
    binlogs, warehouse = tmp_path / "in", tmp_path / "wh"
    binlogs.mkdir()
    for f in sorted(SAMPLES.glob("binlog.0*"))[:2]:
        shutil.copy(f, binlogs)
    _run(spark, binlogs, warehouse, delta_backend, cdf=True)
    customers = warehouse / "silver" / "shop" / "customers"
    assert DeltaTable(str(customers)).metadata().configuration.get(CHANGE_DATA_FEED) == "true"
    first = _feed(spark, customers, delta_backend)
    assert first and {r["type"] for r in first} <= {"insert", "update_preimage", "update_postimage"}
    assert {r["id"] for r in first if r["type"] == "insert"} == _live(spark, customers, delta_backend)

    for f in sorted(SAMPLES.glob("binlog.0*"))[2:]:
        shutil.copy(f, binlogs)
    _run(spark, binlogs, warehouse, delta_backend, cdf=True)
    later = [r for r in _feed(spark, customers, delta_backend) if r["v"] > max(x["v"] for x in first)]
    # the second run's changes: the key change 3 -> 100 (binlog.000003) and deletes (binlog.000004)
    assert later, "the second run recorded no changes"
    assert _live(spark, customers, delta_backend) == {1, 2, 5, 100}
    assert any(r["id"] == 3 and r["type"] in ("delete", "update_preimage") for r in later), later
    assert any(r["id"] == 100 and r["type"] in ("insert", "update_postimage") for r in later)


def test_a_table_made_without_it_gains_it_at_its_next_run(spark, delta_backend, tmp_path):  # noqa: F811
    binlogs, warehouse = tmp_path / "in", tmp_path / "wh"
    binlogs.mkdir()
    for f in sorted(SAMPLES.glob("binlog.0*"))[:2]:
        shutil.copy(f, binlogs)
    _run(spark, binlogs, warehouse, delta_backend, cdf=False)
    customers = warehouse / "silver" / "shop" / "customers"
    assert DeltaTable(str(customers)).metadata().configuration.get(CHANGE_DATA_FEED) is None
    before = DeltaTable(str(customers)).version()

    for f in sorted(SAMPLES.glob("binlog.0*"))[2:]:
        shutil.copy(f, binlogs)
    _run(spark, binlogs, warehouse, delta_backend, cdf=True)
    table = DeltaTable(str(customers))
    assert table.metadata().configuration.get(CHANGE_DATA_FEED) == "true"
    assert _live(spark, customers, delta_backend) == {1, 2, 5, 100}
    changes = _feed(spark, customers, delta_backend, before + 1)
    assert any(r["id"] == 100 for r in changes), changes
    # the property's commit claims no watermark, the MERGE's below it stays: a third run changes nothing
    version = table.version()
    _run(spark, binlogs, warehouse, delta_backend, cdf=True)
    assert DeltaTable(str(customers)).version() == version
