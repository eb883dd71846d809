"""The bronze step's bookkeeping: file statuses, transaction ids, the run's stats, and the rows the step
appends to its ``_pipeline`` tables (their layouts, reads and writes: :mod:`pipelines.state`)."""
from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pipelines.errors import PipelineError
from pipelines.bronze.rows import epoch_datetime
from pipelines.bronze.schema import BRONZE_LAYOUT, seq_key
from pipelines.config import PipelineConfig
from pipelines.logs import get_logger

_log = get_logger(__name__)

if TYPE_CHECKING:
    from pipelines.bronze.plan import FilePlan

_UTC = _dt.timezone.utc


TXN_APP_ID = "bronze"
PENDING_APP_ID = "bronze-pending"

# status of a file's manifest row
DONE = "done"  # every byte of the file is processed
PARTIAL = "partial"  # the newest file: an unfinished tail waits for the next run
QUARANTINED = "quarantined"  # a bad event stopped the file; the good prefix landed


class BronzeError(PipelineError, RuntimeError):
    """The bronze step cannot go on: changed input, bad input in strict mode, gaps."""

    report = True


def delta_io_module():
    """`pipelines.delta_io`, imported when first needed (not when this module is)."""
    from pipelines import delta_io

    return delta_io


def bronze_struct():
    from pipelines.delta_io import struct_of

    return struct_of(BRONZE_LAYOUT)


def append_frame(spark, cfg: PipelineConfig, df, path: str, app_id: str | None = None, version: int | None = None):
    d = delta_io_module()
    d.open_table(path, cfg.delta.backend, spark).append(df, d.CommitInfo.of(app_id, version))


def append_rows(spark, cfg: PipelineConfig, rows: list[tuple], ddl: str, path: str, app_id: str | None = None,
                 version: int | None = None):
    """Rows of one of the ``_pipeline`` tables (``ddl``: its layout in :mod:`pipelines.state`),
    appended through that module under the batch's transaction id."""
    from pipelines import state

    state.append_at(spark, cfg, ddl, path, rows, app_id=app_id, version=version)


def last_txn(spark, cfg: PipelineConfig, path: str) -> int:
    v = delta_io_module().open_table(path, cfg.delta.backend, spark).last_txn(TXN_APP_ID)
    return -1 if v is None else int(v)


def manifest_rows(plans: list[FilePlan], batch: int, phase: str, run_id: str, now, rows_by_file=None,
                   committed_at=None) -> list:
    """Rows of ``_pipeline/manifest`` (:data:`pipelines.state.MANIFEST_LAYOUT`), one per plan."""
    from pipelines.state import MANIFEST_LAYOUT, row_of

    rows_by_file = rows_by_file or {}
    return [
        row_of(MANIFEST_LAYOUT, name=p.file.name, file_seq=p.file.file_seq, path=p.file.uri, size=p.file.size,
               mtime=p.file.mtime, start_pos=p.start, complete_until=p.end, sha256=p.sha256, status=p.status,
               phase=phase, batch=batch, events=p.events, rows=rows_by_file.get(p.file.name, 0), error=p.error,
               error_class=p.error_class, error_offset=p.error_offset, run_id=run_id, processed_at=now,
               flavor=p.flavor, gtid_start=p.gtid_start, gtid_end=p.gtid_end, rotate_to=p.rotate_to,
               ignorable_skipped=p.ignorable_skipped, committed_at=committed_at,
               server_version=(p.server or (None, None))[0], server_id=(p.server or (None, None))[1])
        for p in plans
    ]


def xa_rows(plans: list[FilePlan], run_id: str) -> list:
    """Rows of ``_pipeline/xa``: the XA groups (found by the survey) in what each plan lands."""
    return [(p.file.name, p.file.file_seq, pos, seq_key(p.file.file_seq, pos, 0), kind, xa_xid, gtid,
             epoch_datetime(ts), run_id)
            for p in plans for pos, kind, xa_xid, gtid, ts in p.xa if p.start <= pos < p.end]


@dataclass
class BronzeStats:
    """What one bronze run did (also its row in ``_pipeline/runs``)."""

    run_id: str
    started_at: _dt.datetime
    ended_at: _dt.datetime | None = None
    files: int = 0  # files read (new or grown)
    files_skipped: int = 0  # binlog files already processed
    files_ignored: int = 0  # other names in the folder
    events: int = 0
    rows: dict[str, int] = field(default_factory=lambda: {"c": 0, "u": 0, "d": 0})
    statements: int = 0
    quarantined: int = 0
    ignorable_skipped: int = 0  # unknown events flagged ignorable, skipped on purpose
    invalid_text: int = 0  # statements and values not valid in their charset (landed with their bytes)
    bytes: int = 0
    batches: int = 0
    read_whole: int = 0  # files a task read whole through Spark's binaryFile(s) reader
    held_back: list[str] = field(default_factory=list)  # files after a break in the sequence
    warnings: list[str] = field(default_factory=list)
    statement_format: dict[str, int] = field(default_factory=dict)  # file -> changes logged as statements
    status: str = "running"
    error: str | None = None

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        _log.warning(message)

    @property
    def seconds(self) -> float:
        end = self.ended_at or _dt.datetime.now(_UTC)
        return max((end - self.started_at).total_seconds(), 1e-9)

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds

    def summary(self) -> str:
        r = self.rows
        return (
            f"bronze run {self.run_id} {self.status}: {self.files} file(s) read, {self.files_skipped} skipped, "
            f"{self.files_ignored} other name(s) ignored; {self.events} events; "
            f"rows c={r['c']} u={r['u']} d={r['d']}; {self.statements} statement(s); "
            f"{self.quarantined} quarantined; {self.ignorable_skipped} ignorable event(s) skipped; "
            + (f"{self.invalid_text} statement(s) or value(s) not valid in their charset, kept as bytes too; "
               if self.invalid_text else "")
            + (f"{len(self.held_back)} file(s) held back; " if self.held_back else "")
            + (f"{len(self.warnings)} warning(s); " if self.warnings else "")
            + f"{self.bytes / 1e6:.2f} MB in {self.seconds:.1f} s ({self.mb_per_s:.2f} MB/s)"
        )

    def run_row(self) -> tuple:
        r = self.rows
        return (
            self.run_id, "bronze", self.started_at, self.ended_at, self.files, self.files_skipped,
            self.files_ignored, self.events, r["c"], r["u"], r["d"], self.statements, self.quarantined,
            self.bytes, self.seconds, self.mb_per_s, None, self.status, self.error,
        )
