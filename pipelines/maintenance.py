"""The maintenance step: keep every Delta table of a warehouse cheap to read and small on disk
over thousands of scheduled runs (``jobs/maintain.py``; the main job too, every
``maintenance.every_runs`` runs).

For each table (bronze, the pipeline's own ``_pipeline/*`` state, every silver table), in this
order, each with the backend's own operation (:class:`pipelines.delta_io.Table`'s upkeep):

0. ``_pipeline/silver_watermarks`` (one row per table per run) is folded to the latest row
   per table (:func:`pipelines.silver.watermarks.fold_watermarks`);
1. **compact** when it has more than ``compact_min_files`` data files: small files are bin-packed
   into files near ``target_file_bytes`` (one commit; what the table returns is unchanged);
2. **log retention**: ``delta.logRetentionDuration`` set to ``log_retention_hours`` where the table
   says otherwise;
3. **checkpoint** of the current version, then log cleanup: commit files older than the log
   retention that the checkpoint covers go. The state the pipeline reads from a table's snapshot
   (bronze's transaction identifiers, silver's watermark in its newest commit) survives it;
4. **VACUUM** with ``retention_hours`` (Delta's 7 days by default): data files that no version of
   that window uses are deleted; never a file of the current snapshot, so what a query returns now
   is unchanged, and time travel within the window keeps working.

A silver table's watermark lives in its commits' user metadata: every commit made here repeats
it, so the newest commit always has it.

The summary line says what was removed and what was kept::

    maintenance run 20261124T... ok: 9 table(s); compacted 41 file(s) into 3 in 2 table(s);
    vacuumed 44 file(s) (2.1 MB); 9 checkpoint(s), 120 log file(s) removed; on disk 0.4 MB for
    0.3 MB live (was 2.6 MB); retention 168 h (files younger than that kept for time travel)
"""
from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from pipelines import delta_io
from pipelines import state
from pipelines.config import PipelineConfig
from pipelines.lock import check_held
from pipelines.storage import arrow_filesystem
from pipelines.delta_io import Storage

_UTC = _dt.timezone.utc


@dataclass(frozen=True)
class TableUpkeep:
    """What maintenance did to one table."""

    path: str
    before: Storage
    after: Storage
    compacted: tuple[int, int] = (0, 0)  # (files removed, files added)
    vacuumed: int = 0


@dataclass
class MaintenanceStats:
    run_id: str
    started_at: _dt.datetime
    retention_hours: int
    status: str = "running"
    error: str | None = None
    seconds: float = 0.0
    tables: list[TableUpkeep] = field(default_factory=list)
    watermark_rows_folded: int = 0  # rows of _pipeline/silver_watermarks folded into one per table

    def summary(self) -> str:
        t = self.tables
        compacted = [u for u in t if u.compacted[0]]
        mb = 1 << 20
        text = (
            f"maintenance run {self.run_id} {self.status}: {len(t)} table(s); "
            f"compacted {sum(u.compacted[0] for u in t)} file(s) into {sum(u.compacted[1] for u in t)} "
            f"in {len(compacted)} table(s); vacuumed {sum(u.vacuumed for u in t)} file(s) "
            f"({sum(max(u.before.disk_bytes - u.after.disk_bytes, 0) for u in t) / mb:.1f} MB); "
            f"{sum(u.after.checkpoints > 0 for u in t)} table(s) checkpointed, "
            f"{sum(max(u.before.log_files - u.after.log_files, 0) for u in t)} log file(s) removed; "
            f"on disk {sum(u.after.disk_bytes for u in t) / mb:.1f} MB for {sum(u.after.live_bytes for u in t) / mb:.1f} MB "
            f"live (was {sum(u.before.disk_bytes for u in t) / mb:.1f} MB); kept: every file of the current "
            f"snapshots, and files removed within the last {self.retention_hours} h (time travel); {self.seconds:.1f} s"
        )
        if self.watermark_rows_folded:
            text += f"; silver watermarks folded to one row per table ({self.watermark_rows_folded} row(s) removed)"
        if self.error:
            text += f"\n  error: {self.error}"
        return text

    def run_row(self) -> tuple:
        """One row of ``_pipeline/runs`` (:data:`pipelines.state.RUNS_LAYOUT`; ``files`` counts the tables,
        ``bytes`` what VACUUM freed)."""
        freed = sum(max(u.before.disk_bytes - u.after.disk_bytes, 0) for u in self.tables)
        end = self.started_at + _dt.timedelta(seconds=self.seconds)
        return (self.run_id, STEP, self.started_at, end, len(self.tables), None, None, None, None, None, None,
                None, None, freed, self.seconds, None, None, self.status, self.error)


STEP = "maintenance"  # the step name of its rows in _pipeline/runs


def due(spark: SparkSession | None, cfg: PipelineConfig) -> bool:
    """True when ``maintenance.every_runs`` is set and that many silver runs have ended since the
    last maintenance run (the run log, ``_pipeline/runs``, says)."""
    every = cfg.maintenance.every_runs
    runs = state.read_arrow(spark, cfg, state.RUNS, ["step", "started_at", "status"]) if every else None
    if runs is None:
        return False
    rows = runs.to_pylist()
    last = max((r["started_at"] for r in rows if r["step"] == STEP and r["status"] == "ok"), default=None)
    since = [r for r in rows if r["step"] == "silver" and r["status"] == "ok" and (last is None or r["started_at"] > last)]
    return len(since) >= every


def find_tables(warehouse: str) -> list[str]:
    """Every Delta table of the pipeline under ``warehouse``: bronze, ``_pipeline/*``,
    ``silver/<db>/<table>`` (a folder with a ``_delta_log``)."""
    from pyarrow import fs as pafs

    fs, root = arrow_filesystem(warehouse)
    base = warehouse.rstrip("/")

    def folders(rel: str) -> list[str]:
        infos = fs.get_file_info(pafs.FileSelector(f"{root}/{rel}".rstrip("/"), allow_not_found=True))
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)

    def is_table(rel: str) -> bool:
        return fs.get_file_info(f"{root}/{rel}/_delta_log").type == pafs.FileType.Directory

    found = [rel for rel in ("bronze/binlog_changes",) if is_table(rel)]
    found += [f"_pipeline/{n}" for n in folders("_pipeline") if is_table(f"_pipeline/{n}")]
    found += [f"silver/{db}/{t}" for db in folders("silver") for t in folders(f"silver/{db}")
              if is_table(f"silver/{db}/{t}")]
    return [f"{base}/{rel}" for rel in found]


def maintain_table(spark: SparkSession | None, path: str, cfg: PipelineConfig, backend: str,
                   user_metadata: str | None = None) -> TableUpkeep:
    """Compact, set the log retention, checkpoint (and clean up the log), VACUUM one table."""
    m = cfg.maintenance
    table, commit = delta_io.open_table(path, backend, spark), delta_io.CommitInfo(metadata=user_metadata)
    before = table.storage()
    compacted = (0, 0)
    if before.files > m.compact_min_files:
        compacted = table.compact(m.target_file_bytes, commit)
    table.keep_properties(m.log_retention_hours, commit)
    table.checkpoint()
    vacuumed = table.vacuum(m.retention_hours, commit)
    return TableUpkeep(path, before, table.storage(), compacted, vacuumed)


def run(spark: SparkSession | None, cfg: PipelineConfig, *, retention_hours: int | None = None) -> MaintenanceStats:
    """Maintain every table of the warehouse; prints and returns the summary. ``retention_hours``
    overrides ``maintenance.retention_hours`` for this run."""
    from dataclasses import replace

    from pipelines import silver

    if retention_hours is not None:
        cfg = replace(cfg, maintenance=replace(cfg.maintenance, retention_hours=int(retention_hours)))
    started = time.monotonic()
    now = _dt.datetime.now(_UTC)
    stats = MaintenanceStats(run_id=state.new_run_id(now), started_at=now,
                             retention_hours=cfg.maintenance.retention_hours)
    backend = delta_io.resolve_backend(spark, cfg.delta.backend)
    silver_root = cfg.warehouse_path("silver") + "/"

    def ended(stats: MaintenanceStats) -> None:
        stats.seconds = time.monotonic() - started

    with state.logged_run(spark, cfg, stats, ended=ended):
        stats.watermark_rows_folded = silver.fold_watermarks(spark, cfg, backend=backend)
        for path in find_tables(cfg.warehouse):
            check_held()  # (a run that lost its remote warehouse lock stops here)
            meta = None
            if path.startswith(silver_root):  # its watermark goes along into every commit made here
                mark = silver.read_watermark(path, spark=spark, backend=backend)
                meta = None if mark is None else silver.watermark_metadata(mark)
            stats.tables.append(maintain_table(spark, path, cfg, backend, meta))
    return stats
