"""Delta table upkeep on either backend: compaction, checkpoints, log cleanup, VACUUM, and what a
table costs on disk. The backends' own operations do the work (delta-rs ``optimize.compact``,
``create_checkpoint``, ``cleanup_metadata``, ``vacuum``; delta-spark ``OPTIMIZE``,
``DeltaLog.checkpoint``, ``VACUUM``, in :mod:`~pipelines.delta_io.spark_backend` and
:mod:`~pipelines.delta_io.rs_backend`); this module only picks the backend, hands it the caller's
commit metadata for every commit it makes, and measures.

Every commit made here carries ``user_metadata`` when given: silver keeps its watermark in its
commits' user metadata (:func:`pipelines.silver.read_watermark` reads the newest commit that has
one), so an OPTIMIZE or VACUUM commit on a silver table repeats it, and log cleanup can never
leave a table whose newest commits lack it.

Log cleanup follows the table's ``delta.logRetentionDuration`` and only removes log files that a
checkpoint covers (both backends): the snapshot, transaction identifiers included, is then read
from the checkpoint. :func:`keep_properties` sets that property, and ``delta.checkpointInterval``,
where they differ.

>>> s = storage(str(tmp_path / "silver/shop/orders"))  # doctest: +SKIP
>>> s.files, s.live_bytes <= s.disk_bytes  # doctest: +SKIP
(3, True)
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from pipelines import storage as _storage
from pipelines.delta_io.backend import NEW_TABLE_PROPERTIES, backend_for

LOG_RETENTION = "delta.logRetentionDuration"


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

    files, live, version = backend_for(spark, backend).snapshot_size(spark, path)
    fs, root = _storage.arrow_filesystem(str(path))
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
    return backend_for(spark, backend).compact(spark, path, target_bytes, user_metadata)


def checkpoint(path: str, *, spark: SparkSession | None = None, backend: str = "auto") -> None:
    """Write a checkpoint of the table's current version, then clean up the log files that it
    covers and that are older than the table's ``delta.logRetentionDuration``."""
    backend_for(spark, backend).checkpoint(spark, path)


def set_properties(path: str, wanted: dict[str, str], *, spark: SparkSession | None = None, backend: str = "auto",
                   user_metadata: str | None = None) -> bool:
    """Set the table properties ``wanted`` where the table says otherwise (one commit, carrying
    ``user_metadata``); True when it changed."""
    return backend_for(spark, backend).set_properties(spark, path, wanted, user_metadata)


def keep_properties(path: str, log_retention_hours: int, *, spark: SparkSession | None = None,
                    backend: str = "auto", user_metadata: str | None = None) -> bool:
    """Set ``delta.logRetentionDuration`` to ``log_retention_hours``, and the properties every table
    this package creates has (:data:`~pipelines.delta_io.backend.NEW_TABLE_PROPERTIES`: a checkpoint
    every 10 commits, for tables made before that), where the table says otherwise (one commit);
    True when it changed."""
    wanted = {**NEW_TABLE_PROPERTIES, LOG_RETENTION: f"interval {int(log_retention_hours)} hours"}
    return backend_for(spark, backend).set_properties(spark, path, wanted, user_metadata)


def vacuum(path: str, retention_hours: int, *, spark: SparkSession | None = None, backend: str = "auto",
           user_metadata: str | None = None) -> int:
    """Delete the data files that no version younger than ``retention_hours`` uses (never a file of
    the current snapshot), and the files in the table's folder that no version names (staged by a
    run that died before its commit) once they are older than ``retention_hours``; returns how
    many went."""
    return backend_for(spark, backend).vacuum(spark, path, retention_hours, user_metadata)
