"""Delta table upkeep on either backend: compaction, checkpoints, log cleanup, VACUUM, and what a
table costs on disk. The backends' own operations do the work (delta-rs ``optimize.compact``,
``create_checkpoint``, ``cleanup_metadata``, ``vacuum``; delta-spark ``OPTIMIZE``,
``DeltaLog.checkpoint``, ``VACUUM``); this module only picks the backend, carries the caller's
commit metadata into every commit it makes, and measures.

Every commit made here carries ``user_metadata`` when given: silver keeps its watermark in its
commits' user metadata (:func:`pipelines.silver.read_watermark` reads the newest commit that has
one), so an OPTIMIZE or VACUUM commit on a silver table repeats it, and log cleanup can never
leave a table whose newest commits lack it.

Log cleanup follows the table's ``delta.logRetentionDuration`` and only removes log files that a
checkpoint covers (both backends): the snapshot, transaction identifiers included, is then read
from the checkpoint. :func:`set_log_retention` sets that property where it differs.

>>> s = storage(str(tmp_path / "silver/shop/orders"))  # doctest: +SKIP
>>> s.files, s.live_bytes <= s.disk_bytes  # doctest: +SKIP
(3, True)
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from pipelines.delta_io.backend import _SPARK_USER_METADATA, _arrow_fs, _rs_table, quote_ident, resolve_backend
from pipelines.delta_io.commits import _rs_commit_properties, commit_session, spark_delta_log, spark_snapshot

LOG_RETENTION = "delta.logRetentionDuration"
_SPARK_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
_SPARK_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"


@dataclass(frozen=True)
class Storage:
    """What one table holds: data files of its snapshot and their bytes, against the Parquet
    files on disk (dead ones included) and the log's commit files and checkpoints."""

    version: int
    files: int
    live_bytes: int
    disk_files: int
    disk_bytes: int
    log_files: int
    checkpoints: int


def storage(path: str, *, spark: SparkSession | None = None, backend: str = "auto") -> Storage:
    """The table's :class:`Storage`: the snapshot from the backend, the rest from a listing."""
    from pyarrow import fs as pafs

    if resolve_backend(spark, backend) == "spark":
        detail = spark.sql(f"DESCRIBE DETAIL delta.{quote_ident(str(path))}").collect()[0]
        files, live = int(detail["numFiles"] or 0), int(detail["sizeInBytes"] or 0)
        version = spark_snapshot(spark, path).version()
    else:
        table = _rs_table(path)
        adds = table.get_add_actions(flatten=True)
        files = adds.num_rows
        live = sum(v or 0 for v in adds.column("size_bytes").to_pylist()) if files else 0
        version = table.version()
    fs, root = _arrow_fs(str(path))
    disk_files = disk_bytes = log_files = checkpoints = 0
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True)):
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(root):].lstrip("/")
        name = rel.rsplit("/", 1)[-1]
        if rel.startswith("_delta_log/"):
            log_files += name.endswith(".json") and "/" not in rel[len("_delta_log/"):]
            checkpoints += ".checkpoint." in name and name.endswith(".parquet")
        elif name.endswith(".parquet") and not name.startswith((".", "_")):
            disk_files += 1
            disk_bytes += info.size or 0
    return Storage(int(version), files, live, disk_files, disk_bytes, log_files, checkpoints)


def compact(path: str, *, spark: SparkSession | None = None, backend: str = "auto", target_bytes: int,
            user_metadata: str | None = None) -> tuple[int, int]:
    """Bin-pack the table's small files into files near ``target_bytes``; returns (files removed,
    files added). A table with nothing to pack gets no commit."""
    if resolve_backend(spark, backend) == "spark":
        session = commit_session(spark, {_SPARK_USER_METADATA: user_metadata, _SPARK_MAX_FILE_SIZE: str(target_bytes)})
        row = session.sql(f"OPTIMIZE delta.{quote_ident(str(path))}").collect()[0]
        metrics = row["metrics"]
        return int(metrics["numFilesRemoved"] or 0), int(metrics["numFilesAdded"] or 0)
    metrics = _rs_table(path).optimize.compact(target_size=target_bytes,
                                               commit_properties=_rs_properties(user_metadata))
    return int(metrics.get("numFilesRemoved", 0)), int(metrics.get("numFilesAdded", 0))


def checkpoint(path: str, *, spark: SparkSession | None = None, backend: str = "auto") -> None:
    """Write a checkpoint of the table's current version, then clean up the log files that it
    covers and that are older than the table's ``delta.logRetentionDuration``."""
    if resolve_backend(spark, backend) == "spark":
        spark_delta_log(spark, path).checkpoint()  # delta-spark cleans up expired log files after it
        return
    table = _rs_table(path)
    table.create_checkpoint()
    _rs_table(path).cleanup_metadata()


def set_log_retention(path: str, hours: int, *, spark: SparkSession | None = None, backend: str = "auto",
                      user_metadata: str | None = None) -> bool:
    """Set ``delta.logRetentionDuration`` to ``hours`` where the table says otherwise (one commit);
    True when it changed."""
    wanted = f"interval {int(hours)} hours"
    if resolve_backend(spark, backend) == "spark":
        detail = spark.sql(f"DESCRIBE DETAIL delta.{quote_ident(str(path))}").collect()[0]
        if (detail["properties"] or {}).get(LOG_RETENTION) == wanted:
            return False
        commit_session(spark, {_SPARK_USER_METADATA: user_metadata}).sql(
            f"ALTER TABLE delta.{quote_ident(str(path))} SET TBLPROPERTIES ('{LOG_RETENTION}' = '{wanted}')")
        return True
    table = _rs_table(path)
    if table.metadata().configuration.get(LOG_RETENTION) == wanted:
        return False
    table.alter.set_table_properties({LOG_RETENTION: wanted}, commit_properties=_rs_properties(user_metadata))
    return True


def vacuum(path: str, retention_hours: int, *, spark: SparkSession | None = None, backend: str = "auto",
           user_metadata: str | None = None) -> int:
    """Delete the data files that no version younger than ``retention_hours`` uses (never a file of
    the current snapshot); returns how many went."""
    if resolve_backend(spark, backend) == "spark":
        before = storage(path, spark=spark, backend="spark").disk_files
        session = commit_session(spark, {_SPARK_USER_METADATA: user_metadata, _SPARK_RETENTION_CHECK: "false"})
        session.sql(f"VACUUM delta.{quote_ident(str(path))} RETAIN {int(retention_hours)} HOURS").collect()
        return before - storage(path, spark=spark, backend="spark").disk_files
    removed = _rs_table(path).vacuum(retention_hours=int(retention_hours), dry_run=False,
                                     enforce_retention_duration=False,
                                     commit_properties=_rs_properties(user_metadata))
    return len(removed)


def _rs_properties(user_metadata: str | None):
    return _rs_commit_properties(None, None, user_metadata)
