"""Mid-stream schema changes that move columns around, in one batch, against the server's SELECT.

Found by the random soak: after ``ALTER TABLE ... ADD COLUMN ... FIRST`` the key's position in
the table map changes, and silver took the first key position it saw for the whole batch, so
later changes had "a NULL in key columns" (the new first column)."""
from __future__ import annotations

import shutil

import pytest
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from oracle import _diff, server_columns, server_rows, silver_rows
from pipelines import bronze
from pipelines.silver import step as silver_step
from pipelines.config import load_config

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

WORKLOAD = """
CREATE DATABASE moves;
CREATE TABLE moves.t (id INT NOT NULL PRIMARY KEY, v VARCHAR(10), w INT);
INSERT INTO moves.t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30);
ALTER TABLE moves.t ADD COLUMN first_col DECIMAL(10,2) FIRST;
UPDATE moves.t SET first_col = 1.5, v = 'a2' WHERE id = 1;
INSERT INTO moves.t VALUES (NULL, 4, 'd', 40);
ALTER TABLE moves.t ADD COLUMN mid DATE AFTER id, DROP COLUMN w;
UPDATE moves.t SET id = 5, mid = '2024-02-29' WHERE id = 2;
DELETE FROM moves.t WHERE id = 3;
ALTER TABLE moves.t MODIFY COLUMN v VARCHAR(30) FIRST;
UPDATE moves.t SET v = 'moved' WHERE id = 4;
"""


def _one_run(spark, srv, sql: str, tmp_path, backend: str):  # noqa: F811
    """``sql`` on the server, its binlogs into ``tmp_path/in``, then one run of the pipeline (bronze
    and silver) into ``tmp_path/wh``; the silver step's stats, checked ok."""
    first = srv.flush_logs()
    srv.sql(sql)
    srv.flush_logs()
    files = srv.binlog_files()
    (tmp_path / "in").mkdir()
    for f in files[files.index(first):-1]:
        shutil.copy(f, tmp_path / "in" / f.name)
    cfg = load_config(None, {"input": str(tmp_path / "in"), "warehouse": str(tmp_path / "wh"), "progress": False,
                             "delta.backend": backend})
    bronze.run(spark, cfg)
    stats = silver_step.run(spark, cfg)
    assert stats.status == "ok", stats.summary()
    return stats


@pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])
def test_key_moves_within_one_batch(spark, mariadb_factory, tmp_path, metadata):  # noqa: F811
    srv = mariadb_factory(row_metadata=metadata)
    stats = _one_run(spark, srv, WORKLOAD, tmp_path, "rs")
    cols = server_columns(srv, "moves", "t")
    want, got = server_rows(srv, "moves", "t", cols), silver_rows(tmp_path / "wh", "moves", "t", cols)
    assert got == want, _diff("moves.t", cols, want, got or [])
    assert sorted(r[[c.name for c in cols].index("id")] for r in want) == [1, 4, 5]


BACK_AND_FORTH = """
CREATE DATABASE back;
CREATE TABLE back.t (a INT, k VARCHAR(10) NOT NULL PRIMARY KEY, v INT);
INSERT INTO back.t VALUES (1, 'k1', 10), (2, 'k2', 20);
ALTER TABLE back.t ADD COLUMN x BIGINT AFTER a;
INSERT INTO back.t VALUES (3, NULL, 'k3', 30), (4, 7, 'k4', 40);
UPDATE back.t SET x = NULL, v = 11 WHERE k = 'k1';
ALTER TABLE back.t DROP COLUMN x;
INSERT INTO back.t VALUES (5, 'k5', 50);
UPDATE back.t SET v = 41 WHERE k = 'k4';
"""


@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_a_shape_on_both_sides_of_a_segment_is_not_the_middle_ones(spark, mariadb_factory, tmp_path, backend):  # noqa: F811
    """ADD COLUMN then DROP COLUMN of it in one batch: the rows before the ADD and after the DROP
    have one image shape, and the table map's key index (1) of that shape is not the middle
    segment's (2, where index 1 is the added column, NULL in some rows). Found by the soak
    (seed 249, full/noblob, in its batch): the middle segment took key ``x``."""
    from spark_fixtures import require_delta_spark

    if backend == "spark":
        require_delta_spark(spark)
    srv = mariadb_factory(row_metadata="FULL")
    stats = _one_run(spark, srv, BACK_AND_FORTH, tmp_path, backend)
    assert stats.tables["back.t"]["keys"] == ["k"]
    cols = server_columns(srv, "back", "t")
    want, got = server_rows(srv, "back", "t", cols), silver_rows(tmp_path / "wh", "back", "t", cols)
    assert got == want, _diff("back.t", cols, want, got or [])
