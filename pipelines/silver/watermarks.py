"""How far silver has gone: its two records, each of one fact, read and written here only.

* **Applied**: in each silver table's own commits, ``{"binlog_delta.silver_watermark": "<_seq>"}``
  in the commit's user metadata (:func:`watermark_metadata`): the largest ``_seq`` whose change the
  table holds. It is written by the commit that lands the rows, so a run that dies after that
  commit never applies those changes again, not even to a table without a key; a table's writes
  apply only what is above it (:func:`read_watermark`).
* **Dealt with**: ``_pipeline/silver_watermarks`` (:data:`pipelines.state.WATERMARKS_LAYOUT`), a
  row per table per run: the largest ``_seq`` the run finished with, applied or not (rows it
  quarantined, or a table's whose silver commit no later run found), and the run-wide marks under
  the database ``''`` (:data:`pipelines.state.READ_THROUGH_DB`): the read-through mark of the last
  run that read bronze through (:mod:`pipelines.silver.marks`) and the snapshots applied
  (:mod:`pipelines.silver.snapshots`). A run reads it once, for every table at once
  (:func:`read_watermarks`), to choose the bronze rows it plans; no table's commit can hold it.
  Maintenance folds it to a row per table (:func:`fold_watermarks`).

The first is the truth of what a table holds; the second only says where to start reading: a
run that dies between the two reads a little more bronze next time, and applies none of it twice.

>>> json.loads(watermark_metadata("0042"))
{'binlog_delta.silver_watermark': '0042'}
"""
from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence

from pyspark.sql import SparkSession

from pipelines import delta_io
from pipelines import state
from pipelines.config import PipelineConfig

WATERMARK_KEY = "binlog_delta.silver_watermark"  # (the key of a silver commit's user metadata)


# -- applied: each silver table's commits


def read_watermark(path: str, *, spark: SparkSession | None = None, backend: str = "auto") -> str | None:
    """The largest ``_seq`` applied to the silver table (from its commits' user metadata), or None.

    >>> read_watermark(str(tmp_path / "silver/shop/orders"))  # doctest: +SKIP
    '00000000010000000000001234000000002'
    """
    table = delta_io.open_table(path, backend, spark)
    if not table.exists():
        return None
    for limit in (1, 50, None):  # (most often the last commit has it: silver's own MERGE)
        commits = table.history(limit)
        for commit in commits:
            if not commit.user_metadata:
                continue
            try:
                meta = json.loads(commit.user_metadata)
            except ValueError:
                continue
            if isinstance(meta, dict) and isinstance(meta.get(WATERMARK_KEY), str):
                return meta[WATERMARK_KEY]
        if limit is not None and len(commits) < limit:
            break
    return None


def watermark_metadata(seq: str) -> str:
    """The user metadata of a silver commit that applies every change up to ``seq``."""
    return json.dumps({WATERMARK_KEY: seq})


# -- dealt with: _pipeline/silver_watermarks


def read_watermarks(spark, cfg: PipelineConfig) -> dict[tuple[str, str], str]:
    """``{(db, table): largest _seq dealt with}`` from ``_pipeline/silver_watermarks``, with the
    run-wide marks (database ``''``). The table holds a row per table per run until maintenance
    folds it (:func:`fold_watermarks`): the largest wins."""
    t = delta_io.open_table(state.path(cfg, state.WATERMARKS), cfg.delta.backend, spark)
    if not t.exists():
        return {}
    if t.backend.on_driver:  # Arrow, no Spark job
        top = t.read_arrow(["db", "table", "max_seq"]).group_by(["db", "table"]).aggregate(
            [("max_seq", "max")])
        return {(d, t): m for d, t, m in zip(top.column("db").to_pylist(), top.column("table").to_pylist(),
                                             top.column("max_seq_max").to_pylist()) if m is not None}
    from pyspark.sql import functions as F

    rows = t.read_df().groupBy("db", "table").agg(F.max("max_seq").alias("m")).collect()
    return {(r["db"], r["table"]): r["m"] for r in rows if r["m"] is not None}


def write_watermarks(spark, cfg: PipelineConfig, marks: dict, rows: dict, run_id: str) -> None:
    """Append a row per mark of ``marks`` (``{(db, table): _seq}``), with the table's ``rows``
    applied by the run ``run_id``."""
    if not marks:
        return
    now = _dt.datetime.now(_dt.timezone.utc)
    data = [(db, table, seq, int(rows.get((db, table), 0)), run_id, now) for (db, table), seq in sorted(marks.items())]
    state.append(spark, cfg, state.WATERMARKS, data)


def latest_watermark_rows(rows: Sequence) -> list:
    """The latest of ``rows`` (watermark rows) per ``(db, table)``: the largest ``max_seq``, then
    the latest ``updated_at``. A pure function: :func:`fold_watermarks` does the I/O.

    >>> [r["max_seq"] for r in latest_watermark_rows([
    ...     {"db": "s", "table": "t", "max_seq": "2", "updated_at": 1},
    ...     {"db": "s", "table": "t", "max_seq": "3", "updated_at": 0}])]
    ['3']
    """
    latest: dict = {}
    for r in rows:
        key, cur = (r["db"], r["table"]), latest.get((r["db"], r["table"]))
        if cur is None or (r["max_seq"] or "", r["updated_at"]) > (cur["max_seq"] or "", cur["updated_at"]):
            latest[key] = r
    return list(latest.values())


def fold_watermarks(spark, cfg: PipelineConfig, *, backend: str | None = None) -> int:
    """Fold ``_pipeline/silver_watermarks`` (one row per table per run, appended) to its latest
    row per table, so that reading it at the start of a run costs the same after 10,000 runs
    as after 10. Maintenance calls it (under the warehouse lock). What :func:`read_watermarks`
    returns does not change; a row appended after the snapshot the fold read is kept. Returns
    the number of rows removed (0: the table holds at most twice as many rows as tables)."""
    t = delta_io.open_table(state.path(cfg, state.WATERMARKS), backend or cfg.delta.backend, spark)
    if not t.exists():
        return 0
    rows = t.read_rows()
    latest = latest_watermark_rows(rows)
    if len(rows) <= 2 * len(latest):
        return 0
    t.overwrite_rows([tuple(r[n] for n in state.WATERMARKS_LAYOUT.names) for r in latest], state.WATERMARKS_LAYOUT)
    return len(rows) - len(latest)
