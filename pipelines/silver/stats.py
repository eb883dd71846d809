"""What one silver run did (:class:`SilverStats`): its printed summary and its row of
``_pipeline/runs``."""
from __future__ import annotations

import datetime as _dt
from collections import Counter
from dataclasses import dataclass, field

_UTC = _dt.timezone.utc


@dataclass
class SilverStats:
    """What one run did; ``tables`` maps ``db.table`` to per-table details."""

    run_id: str
    started_at: _dt.datetime
    ended_at: _dt.datetime | None = None
    status: str = "running"
    error: str | None = None
    segments: int = 0
    rows: Counter = field(default_factory=Counter)  # changes read, by op c/u/d/r
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    quarantined: int = 0
    zero_dates: int = 0
    missing_deletes: int = 0
    resets: int = 0
    copies: int = 0
    replans: int = 0  # segments planned again after another run's commit made their plan stale
    schema_versions: int = 0
    unparsed_ddl: list = field(default_factory=list)
    tables: dict = field(default_factory=dict)

    def summary(self) -> str:
        r = self.rows
        text = (
            f"silver run {self.run_id} {self.status}: {len(self.tables)} table(s), {self.segments} segment(s); "
            f"changes c={r['c']} u={r['u']} d={r['d']}" + (f" r={r['r']}" if r["r"] else "")
            + f"; silver +{self.inserted} ~{self.updated} -{self.deleted}; "
            f"{self.resets} reset(s), {self.copies} rename copy(ies); {self.quarantined} quarantined; "
            f"{self.zero_dates} zero date(s) nulled; {self.schema_versions} new schema version(s)"
        )
        if self.missing_deletes:
            text += f"; {self.missing_deletes} keyless delete(s) found no row"
        if self.replans:
            text += f"; {self.replans} segment(s) planned again after another run's commit"
        text += f"; {self.seconds():.1f} s"
        for v in self.unparsed_ddl:
            text += f"\n  unparsed DDL for {v}"
        if self.error:
            text += f"\n  error: {self.error}"
        return text

    def seconds(self) -> float:
        """The run's time so far, or in all once it ended."""
        return ((self.ended_at or _dt.datetime.now(_UTC)) - self.started_at).total_seconds()

    def run_row(self) -> tuple:
        """One row of ``_pipeline/runs`` (:data:`pipelines.state.RUNS_LAYOUT`)."""
        end = self.ended_at or _dt.datetime.now(_UTC)
        r = self.rows
        return (
            self.run_id, "silver", self.started_at, end, len(self.tables), None, None, self.segments,
            r["c"], r["u"], r["d"], self.schema_versions, self.quarantined, None,
            (end - self.started_at).total_seconds(), None, self.zero_dates, self.status, self.error,
        )
