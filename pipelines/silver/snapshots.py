"""What a snapshot (a logical dump loaded by :mod:`pipelines.snapshot_load`) means to silver.

A snapshot of table T at position P says: *T's rows are exactly the dump's rows as of P*. The load
puts the dump's ``CREATE TABLE`` in the schema history at P (``_seq``:
:func:`pipelines.bronze.schema.snapshot_start`) and its rows in bronze just after it (op ``r``).
So silver needs no rule of its own for the rows: the ``CREATE TABLE`` at P is a schema event like
any other, and resets T there (:func:`pipelines.silver.schema_events.apply_events`: ``CREATE`` is
one of its resets); the ``r`` rows are inserts into the emptied table; the binlog's changes after
P apply on top, ALTERs and RENAMEs included, as they would after a ``CREATE TABLE`` in the binlog.
Binlog changes of T before P land in a segment before the reset (or not at all): whatever they
did is replaced, so a keyless table never gets its rows twice, and binlog files older than the
dump's may be there or not with the same silver.

What this module adds is *when*: silver's watermarks say how far each table was applied, and a
snapshot can arrive after silver has gone past P (the binlogs were applied first, or a newer dump
of a drifted table is loaded). A snapshot is *pending* until a silver run that finished has
applied it (a mark in ``_pipeline/silver_watermarks`` under the read-through database ``''``:
``snapshot <dump id>``). For each table whose latest snapshot (largest P) is pending, the run
rebuilds the table from P:

* its watermark for this run is just below P (:func:`just_before`), so the reset at P is the
  first thing the run does to it and only bronze rows after it are read;
* silver's own record of how far the table was applied (its commits' watermark) is set back to
  that point, with the table emptied (:func:`rewind`), or the reset would be skipped as done;
* bronze is read whole for this run (not only what was ingested since the last run): the
  binlog's changes after P may have been ingested long before the snapshot;
* a table it was renamed to after P is rebuilt from the same point (:func:`follow_renames`).

A run that fails leaves the snapshot pending, and the next one rebuilds again. A dump whose load
was interrupted (a ``pending`` row of ``_pipeline/snapshots`` without its ``committed`` one)
stops the run: silver must not apply half a snapshot.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipelines import delta_io
from pipelines import state
from pipelines.config import PipelineConfig
from pipelines.schema import RENAME_FROM, SchemaHistory
from pipelines.silver.columns import SilverStepError
from pipelines.silver.marks import READ_THROUGH_DB
from pipelines.silver.watermarks import read_watermark, watermark_metadata

_MARK = "snapshot "  # the table name of a snapshot's applied mark, before its dump id


@dataclass
class Snapshots:
    """The snapshots a run must apply: ``rebuild`` maps each table to rebuild to its watermark for
    this run (:func:`just_before` its latest snapshot); ``new`` are the dump ids to mark as
    applied when the run finishes (``{(READ_THROUGH_DB, "snapshot <id>"): start}``)."""

    rebuild: dict[tuple[str, str], str] = field(default_factory=dict)
    new: dict[tuple[str, str], str] = field(default_factory=dict)


def just_before(start: str) -> str:
    """A watermark below a snapshot's start and above every binlog change before its position:
    the start without its last digit (a prefix sorts first; the start's event position is one
    before the snapshot's, where no event starts)."""
    return start[:-1]


def pending(spark, cfg: PipelineConfig, marks: dict[tuple[str, str], str]) -> Snapshots:
    """The snapshots of ``_pipeline/snapshots`` this run must apply, given the watermarks ``marks``
    (as :func:`pipelines.silver.watermarks.read_watermarks` returns them, applied marks included). Raises
    :class:`SilverStepError` for a load that was interrupted."""
    rows = state.read_rows(spark, cfg, state.SNAPSHOTS,
                                    ["dump_id", "dump", "phase", "db", "table", "_seq"])
    if not rows:
        return Snapshots()
    done = {r["dump_id"] for r in rows if r["phase"] == "committed" and r["table"] is None}
    cut = sorted({r["dump"] for r in rows if r["phase"] == "pending" and r["dump_id"] not in done})
    if cut:
        raise SilverStepError(f"the snapshot load of {', '.join(cut)} was interrupted: run jobs/load_snapshot.py "
                              "with the same dump(s) again (it finishes what is missing), then this job")
    applied = {t[len(_MARK):] for d, t in marks if d == READ_THROUGH_DB and t.startswith(_MARK)}
    out = Snapshots()
    latest: dict[tuple[str, str], tuple[str, str]] = {}  # table -> (start, dump id) of its latest snapshot
    for r in rows:
        if r["phase"] != "committed":
            continue
        if r["table"] is None:
            if r["dump_id"] not in applied:
                out.new[(READ_THROUGH_DB, _MARK + r["dump_id"])] = r["_seq"]
            continue
        key = (r["db"], r["table"])
        if key not in latest or (r["_seq"], r["dump_id"]) > latest[key]:
            latest[key] = (r["_seq"], r["dump_id"])
    for key, (start, dump_id) in latest.items():
        if dump_id not in applied and cfg.tables.matches(*key):
            out.rebuild[key] = just_before(start)
    return out


def follow_renames(history: SchemaHistory, rebuild: dict[tuple[str, str], str]) -> None:
    """Add to ``rebuild`` the tables a rebuilt table was renamed to after its snapshot (``RENAME
    TABLE t TO u``, ``ALTER TABLE t RENAME u``), from the same point: their rows are a copy of the
    rebuilt one's at the rename, which the rebuild makes again (a name renamed to does not exist
    before, or was dropped: a reset of its own). Chains of renames are followed."""
    todo = list(rebuild.items())
    renames = [v for v in history.all_versions() if v.kind == RENAME_FROM and v.peer_db is not None]
    while todo:
        (db, table), mark = todo.pop()
        for v in renames:
            key = (v.db, v.table)
            if (v.peer_db, v.peer_table) == (db, table) and v.valid_from > mark and rebuild.get(key, mark + "~") > mark:
                rebuild[key] = mark
                todo.append((key, mark))


def rewind(spark, cfg: PipelineConfig, path: str, mark: str) -> bool:
    """Empty the silver table at ``path`` and record ``mark`` as how far it was applied, when it
    records more (a run went past the snapshot); True when it was rewritten."""
    table = delta_io.open_table(path, cfg.delta.backend, spark)
    if not table.exists():
        return False
    have = read_watermark(path, spark=spark, backend=cfg.delta.backend)
    if have is not None and have <= mark:
        return False
    table.overwrite(spark.createDataFrame([], table.schema()), delta_io.CommitInfo(metadata=watermark_metadata(mark)))
    return True
