"""Which bronze rows are new to silver: the read-through mark of the last run that finished, the
late batches behind it, and the filters that keep bronze's rows above the tables' watermarks
(:mod:`pipelines.silver.watermarks` reads and writes them)."""
from __future__ import annotations

import datetime as _dt
import json

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from pipelines import delta_io
from pipelines import state
from pipelines.config import PipelineConfig
from pipelines.silver import ranges

_UTC = _dt.timezone.utc


def above_marks(bronze: DataFrame, marks: dict[tuple[str, str], str]) -> DataFrame:
    """Per table, only ``bronze``'s rows above its watermark in ``marks`` (a table without one: all)."""
    if not marks:
        return bronze
    wm = bronze.sparkSession.createDataFrame([(d, t, s) for (d, t), s in marks.items()],
                                             "_wm_db STRING, _wm_table STRING, _wm STRING")
    return (bronze.join(F.broadcast(wm), (bronze["db"] == wm["_wm_db"]) & (bronze["table"] == wm["_wm_table"]), "left")
            .where(ranges.spark_above(F.col("_seq"), F.col("_wm")))
            .drop("_wm_db", "_wm_table", "_wm"))


def drop_rolled_back_xa(bronze: DataFrame, xa: DataFrame | None) -> DataFrame:
    """Drop the rows of XA branches that were prepared and later rolled back (their rows
    share the PREPARE's ``gtid``)."""
    if xa is None:
        return bronze
    rolled = xa.where(F.col("kind") == "xa_rollback").select("xa_xid").distinct()
    dead = (xa.where(F.col("kind") == "xa_prepare").join(rolled, "xa_xid", "inner")
            .select(F.col("gtid").alias("_dead_gtid")).where(F.col("_dead_gtid").isNotNull()).distinct())
    return bronze.join(F.broadcast(dead), bronze["gtid"] == dead["_dead_gtid"], "left_anti")


READ_THROUGH_DB = state.READ_THROUGH_DB  # (its home: the watermarks' layout)
READ_THROUGH_MARGIN = _dt.timedelta(minutes=5)  # clocks of drivers on other hosts (Kerberos allows 5 min)


def read_through_key(cfg: PipelineConfig) -> tuple[str, str]:
    """The watermark row that says when a run that read bronze finished with no failed table.

    Its ``max_seq`` holds that run's start (UTC, ISO text). Such a run dealt with every bronze
    row ingested before it started (runs hold the warehouse lock, so bronze did not grow
    meanwhile): applied it, quarantined it, or skipped its table by ``tables``. The next run
    then reads only the bronze files ingested since (``_ingested_at`` statistics, less
    :data:`READ_THROUGH_MARGIN`), so its cost follows the new changes, not bronze's history. A
    late file (``accept_gaps``) is new by that measure too, whatever its ``_seq``. The mark
    belongs to the ``tables`` setting it was made with: after a change of ``include``/
    ``exclude`` a newly included table's old changes are behind it, so that setting has no mark
    yet and bronze is read whole once.

    >>> read_through_key(cfg)  # doctest: +SKIP
    ('', 'read-through ["*"] ["*.tmp_*"]')
    """
    return (READ_THROUGH_DB, "read-through " + json.dumps(list(cfg.tables.include)) + " "
            + json.dumps(list(cfg.tables.exclude)))


def read_through_since(mark: str | None) -> _dt.datetime | None:
    if not mark:
        return None
    try:
        return _dt.datetime.fromisoformat(mark) - READ_THROUGH_MARGIN
    except ValueError:
        return None  # not a mark of ours: read bronze whole


def late_since(spark, cfg: PipelineConfig, since: _dt.datetime) -> _dt.datetime:
    """``since`` (:func:`read_through_since`), moved back to the ``_ingested_at`` of any bronze batch
    committed after it whose rows are stamped before it: a batch another run committed after the
    last silver run read bronze, having begun before that run did (runs that overlap, when no lock
    keeps them apart). Its rows would otherwise stay behind the read-through mark for good. Found
    in ``_pipeline/manifest``: a batch's committed row says when it was written (``committed_at``)
    and when its rows were stamped (``processed_at``)."""
    manifest = delta_io.open_table(state.path(cfg, state.MANIFEST), "rs")  # (delta-rs reads it on either backend)
    if not manifest.exists() or "committed_at" not in manifest.schema().fieldNames():  # (a warehouse from before)
        return since
    return earliest_late(manifest.read_arrow(["phase", "processed_at", "committed_at"]).to_pylist(), since)


def earliest_late(rows, since: _dt.datetime) -> _dt.datetime:
    """The plain-value half of :func:`late_since`: ``since``, or just before the earliest stamp of a
    batch committed after it with rows stamped at or before it.

    >>> t = lambda m: _dt.datetime(2026, 1, 1, 0, m, tzinfo=_dt.timezone.utc)
    >>> earliest_late([{"phase": "committed", "processed_at": t(1), "committed_at": t(30)}], t(20)).minute
    0
    >>> earliest_late([{"phase": "committed", "processed_at": t(1), "committed_at": t(10)}], t(20)) == t(20)
    True
    """
    late = [r["processed_at"] for r in rows
            if r["phase"] == "committed" and r["committed_at"] is not None and r["processed_at"] is not None
            and r["committed_at"] > since and r["processed_at"] <= since]
    return min([since, *[t - _dt.timedelta(microseconds=1) for t in late]])
