"""The state of a warehouse at a glance: ``python -m pipelines.status [--warehouse WH] [--format json]``.

Per source table: the last change silver applied (its binlog position, GTID and source commit
time: silver's watermark, :func:`applied_seq`, and the bronze row at it), the lag (now minus that commit time), the
silver table's rows, the run that applied it last and that run's outcome, and the table's open
quarantine rows by class. Then the latest run of each step with its counts named as the step means
them, the binlog files (the manifest, one line per file: its latest state) and those of the input
folder still waiting for bronze, and the decoder's quarantine rows by class.

Everything is read through :mod:`pipelines.delta_io` with delta-rs: no JVM starts. The
warehouse and ``--config`` are taken as :mod:`pipelines.sql` takes them (``--warehouse``, else
``$BINLOG_DELTA_WAREHOUSE``, else the config's ``warehouse``; S3 and HDFS through the config's
``spark.conf``). The input folder for "waiting" is ``--input``, else the config's ``input``; when
neither can be listed, status says the waiting files are unknown. The page ``docs/state.md``
describes the tables this reads and an example.

From Python:

>>> st = gather("/data/wh", input="/data/binlogs")                   # doctest: +SKIP
>>> [(t.name, t.position, t.gtid) for t in st.tables]                # doctest: +SKIP
[('shop.orders', 'binlog.000004:2048', '0-1-42')]
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

from pipelines import delta_io, quarantine, state, storage
from pipelines.bronze.schema import BRONZE_TABLE
from pipelines.paths import silver_table_path
from pipelines.logs import get_logger

_log = get_logger(__name__)

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "conf" / "pipeline.yaml"
_UTC = _dt.timezone.utc

# What each column of _pipeline/runs means for each step (silver and maintenance reuse the
# columns of bronze's layout): (column, word); a NULL column is left out. docs/state.md has the table.
RUN_WORDS: dict[str, list[tuple[str, str]]] = {
    "bronze": [("files", "file(s) read"), ("files_skipped", "skipped"), ("files_ignored", "other name(s) ignored"),
               ("events", "events"), ("rows_c", "rows c"), ("rows_u", "rows u"), ("rows_d", "rows d"),
               ("statements", "statement(s)"), ("quarantined", "quarantined"), ("bytes", "bytes")],
    "silver": [("files", "table(s)"), ("events", "segment(s)"), ("rows_c", "changes c"), ("rows_u", "changes u"),
               ("rows_d", "changes d"), ("statements", "new schema version(s)"), ("quarantined", "quarantined"),
               ("zero_dates", "zero date(s) nulled")],
    "snapshot": [("files", "dump(s) loaded"), ("files_skipped", "loaded before"), ("rows_c", "rows r"),
                 ("statements", "statement(s) not loaded"), ("bytes", "bytes")],
    "maintenance": [("files", "table(s)"), ("bytes", "bytes freed by VACUUM")],
}


@dataclass(frozen=True)
class TableStatus:
    """One source table as silver has it."""

    name: str  # db.table
    seq: str | None  # the _seq of the last change applied (:func:`applied_seq`)
    position: str | None  # FILE:POS of that change (the event's start)
    gtid: str | None
    commit_ts: _dt.datetime | None  # the source's commit time of that change
    lag_seconds: float | None  # now - commit_ts
    rows: int | None  # rows of the silver table (None: no silver table)
    run_id: str | None  # the run that moved the watermark last
    run_status: str | None
    applied_at: _dt.datetime | None
    quarantine: dict[str, int] = field(default_factory=dict)  # open rows by class


@dataclass(frozen=True)
class RunStatus:
    """The latest run of one step (``_pipeline/runs``) with its counts named."""

    step: str
    run_id: str
    started_at: _dt.datetime | None
    ended_at: _dt.datetime | None
    status: str | None
    error: str | None
    counts: dict[str, int]


@dataclass(frozen=True)
class FilesStatus:
    """The binlog files: the manifest's latest state per file, and the input's files not landed yet."""

    by_status: dict[str, int]  # done | partial | quarantined -> files
    last: str | None  # the newest file in the manifest
    waiting: list[dict] | None  # {"name", "why"} (new | grown | changed); None: unknown
    waiting_note: str  # why waiting is unknown, or the folder listed


@dataclass(frozen=True)
class Status:
    warehouse: str
    now: _dt.datetime
    tables: list[TableStatus]
    runs: list[RunStatus]
    files: FilesStatus
    quarantine: dict[str, dict[str, int]]  # where (binlog | db.table) -> class -> open rows
    resolved: int  # quarantine rows whose file landed later


# -- plain values --------------------------------------------------------------------------------


def seq_position(seq: str, names: dict[int, str]) -> str:
    """``FILE:POS`` of a ``_seq`` (:func:`pipelines.bronze.schema.seq_key`); ``names``: file_seq -> file name.

    >>> seq_position("00000000040000000002048000000001", {4: "binlog.000004"})
    'binlog.000004:2048'
    >>> seq_position("00000000070000000000100000000000", {})
    '#7:100'
    """
    file_seq, pos = int(seq[:10]), int(seq[10:23])
    return f"{names.get(file_seq, f'#{file_seq}')}:{pos}"


def latest_runs(rows: Sequence[dict]) -> list[RunStatus]:
    """The latest run (``started_at``) of each step, its counts named by :data:`RUN_WORDS`."""
    latest: dict[str, dict] = {}
    for r in rows:
        cur = latest.get(r["step"])
        if cur is None or (r["started_at"] or _dt.datetime.min.replace(tzinfo=_UTC)) >= \
                (cur["started_at"] or _dt.datetime.min.replace(tzinfo=_UTC)):
            latest[r["step"]] = r
    out = []
    for step in sorted(latest, key=lambda s: (list(RUN_WORDS).index(s) if s in RUN_WORDS else 99, s)):
        r = latest[step]
        words = RUN_WORDS.get(step, [(c, c) for c in ("files", "events", "rows_c", "rows_u", "rows_d")])
        counts = {word: int(r[col]) for col, word in words if r.get(col) is not None}
        out.append(RunStatus(step, r["run_id"], r["started_at"], r["ended_at"], r["status"], r["error"], counts))
    return out


def waiting_files(listed: Sequence[tuple[str, int, int]], latest: dict[str, dict]) -> list[dict]:
    """The input's files (``(name, size, mtime ms)``) bronze has not (fully) landed: ``new`` (not in
    the manifest), ``grown`` (the newest file's tail: larger than what landed), ``changed`` (a
    quarantined file replaced by another copy, read on by the next run).

    >>> m = {"b.1": {"status": "done", "size": 10, "mtime": 1, "complete_until": 10},
    ...      "b.2": {"status": "partial", "size": 10, "mtime": 1, "complete_until": 8},
    ...      "b.3": {"status": "quarantined", "size": 10, "mtime": 1, "complete_until": 4}}
    >>> waiting_files([("b.1", 10, 1), ("b.2", 12, 2), ("b.3", 10, 5), ("b.4", 3, 1)], m)
    [{'name': 'b.2', 'why': 'grown'}, {'name': 'b.3', 'why': 'changed'}, {'name': 'b.4', 'why': 'new'}]
    """
    out = []
    for name, size, mtime in listed:
        m = latest.get(name)
        if m is None:
            out.append({"name": name, "why": "new"})
        elif m["status"] == "partial" and size > (m["complete_until"] or 0):
            out.append({"name": name, "why": "grown"})
        elif m["status"] == "quarantined" and (size, mtime) != (m["size"], m["mtime"]):
            out.append({"name": name, "why": "changed"})
    return out


def duration(seconds: float | None) -> str:
    """A lag or age in words a reader takes in at once.

    >>> [duration(s) for s in (None, 0.2, 42, 600, 7500, 90000 * 7)]
    ['-', '<1 s', '42 s', '10 min', '2 h 5 min', '7 d 7 h']
    """
    if seconds is None:
        return "-"
    s = int(seconds)
    if seconds < 1:
        return "<1 s"
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


# -- reading the warehouse --------------------------------------------------------------------------


def _table(warehouse: str, *parts: str) -> str:
    return "/".join([warehouse.rstrip("/"), *parts])


def _at_seqs(path: str, seqs: list[str], columns: list[str]) -> dict[str, dict]:
    """_seq -> the row at it, of the Delta table at ``path`` (none when it does not exist)."""
    table = delta_io.open_table(path, "rs")
    if not seqs or not table.exists():
        return {}
    return {r["_seq"]: r for r in table.read_arrow_in(["_seq", *columns], "_seq", seqs).to_pylist()}


def _silver_tables(warehouse: str) -> set[tuple[str, str]]:
    from pipelines.paths import silver_table_name
    from pipelines.sql import discover_tables

    return {silver_table_name(t.path) for t in discover_tables(warehouse) if t.qualified.startswith("silver.")}


def applied_seq(mark: dict | None, path: str) -> str | None:
    """The ``_seq`` of the last change applied to a silver table: the larger of its row in
    ``_pipeline/silver_watermarks`` (what the next run starts from) and the watermark its own last
    MERGE committed with the data (:func:`pipelines.silver.watermarks.read_watermark`: ahead of the
    former when a run stopped between the two writes)."""
    from pipelines.silver.watermarks import read_watermark

    own = read_watermark(path, backend="rs") if delta_io.open_table(path, "rs").exists() else None
    return max((s for s in (mark["max_seq"] if mark else None, own) if s), default=None)


def _list_input(folder: str) -> list[tuple[str, int, int]]:
    """``(name, size, mtime ms)`` of the binlog files of ``folder`` (local, or remote through pyarrow)."""
    from pyarrow import fs as pafs

    from pipelines.bronze.listing import file_seq_of, list_folder

    local = storage.local_path(folder)
    if local is not None:
        return [(f.name, f.size, f.mtime) for f in list_folder(None, folder)[0]]
    fs, where = storage.arrow_filesystem(folder)
    infos = fs.get_file_info(pafs.FileSelector(where, recursive=False))
    return sorted(((i.base_name, i.size, int(i.mtime.timestamp() * 1000) if i.mtime else 0) for i in infos
                   if i.type == pafs.FileType.File and not i.base_name.startswith(".")
                   and file_seq_of(i.base_name) is not None), key=lambda f: (file_seq_of(f[0]), f[0]))


def _files(manifest_rows: list[dict], input: str | None) -> FilesStatus:
    latest = state.latest_files(manifest_rows)
    by_status = dict(sorted(Counter(r["status"] for r in latest.values()).items()))
    last = max(latest.values(), key=lambda r: (r["file_seq"] or 0, r["name"]))["name"] if latest else None
    if not input:
        return FilesStatus(by_status, last, None, "unknown: no input folder (pass --input, or set input in the config)")
    try:
        listed = _list_input(input)
    except Exception as e:  # noqa: BLE001 - a status must show the rest; it says why this part is unknown
        return FilesStatus(by_status, last, None, f"unknown: input {input} cannot be listed: {str(e).splitlines()[0]}")
    return FilesStatus(by_status, last, waiting_files(listed, latest), f"input {input}, {len(listed)} binlog file(s)")


def gather(warehouse: str, *, input: str | None = None, now: _dt.datetime | None = None) -> Status:
    """The :class:`Status` of ``warehouse``, read through delta-rs (no Spark); ``input``: the binlog
    folder to compare with the manifest (None: the waiting files are unknown)."""
    now = now or _dt.datetime.now(_UTC)
    marks = [r for r in state.rows_in(warehouse, state.WATERMARKS) if r["db"] != state.READ_THROUGH_DB]
    from pipelines.silver.watermarks import latest_watermark_rows

    latest_marks = {(r["db"], r["table"]): r for r in latest_watermark_rows(marks)}
    manifest_rows = state.rows_in(warehouse, state.MANIFEST)
    names = {r["file_seq"]: r["name"] for r in manifest_rows if r["file_seq"] is not None}
    runs = state.rows_in(warehouse, state.RUNS)
    run_status = {r["run_id"]: r["status"] for r in runs}

    keys = sorted(set(latest_marks) | _silver_tables(warehouse))
    paths = {k: silver_table_path(warehouse, *k) for k in keys}
    applied = {k: applied_seq(latest_marks.get(k), paths[k]) for k in keys}
    seqs = sorted({s for s in applied.values() if s})
    found = _at_seqs(_table(warehouse, BRONZE_TABLE), seqs, ["gtid", "commit_ts"])
    found.update(_at_seqs(_table(warehouse, state.PIPELINE_FOLDER, state.DDL), [s for s in seqs if s not in found],
                          ["gtid", "commit_ts"]))  # (a mark at a schema event: its statement)

    q_rows = quarantine.read_quarantine(warehouse)
    done = quarantine.resolved(q_rows, manifest_rows)
    by_where: dict[str, Counter] = {}
    for r, d in zip(q_rows, done):
        if not d:
            by_where.setdefault(quarantine.where_of(r), Counter())[r["error_class"] or "?"] += 1

    tables = []
    for db, table in keys:
        mark, seq, path = latest_marks.get((db, table)), applied[(db, table)], paths[(db, table)]
        at = found.get(seq) or {}
        silver = delta_io.open_table(path, "rs")
        rows = silver.count() if silver.exists() else None
        commit_ts = at.get("commit_ts")
        tables.append(TableStatus(
            name=f"{db}.{table}", seq=seq, position=seq_position(seq, names) if seq else None, gtid=at.get("gtid"),
            commit_ts=commit_ts, lag_seconds=(now - commit_ts).total_seconds() if commit_ts else None, rows=rows,
            run_id=mark["run_id"] if mark else None, run_status=run_status.get(mark["run_id"]) if mark else None,
            applied_at=mark["updated_at"] if mark else None,
            quarantine=dict(sorted(by_where.get(f"{db}.{table}", Counter()).items()))))
    return Status(warehouse, now, tables, latest_runs(runs), _files(manifest_rows, input),
                  {w: dict(sorted(c.items())) for w, c in sorted(by_where.items())}, sum(done))


# -- output ----------------------------------------------------------------------------------------


def _when(t: _dt.datetime | None) -> str:
    return "-" if t is None else t.astimezone(_UTC).strftime("%Y-%m-%d %H:%M:%S")


def _classes(counts: dict[str, int]) -> str:
    return ", ".join(f"{c} {n}" for c, n in counts.items()) or "-"


def _counts_text(counts: dict[str, int]) -> str:
    """A run's counts as its summary line words them: ``rows c=12 u=5 d=0`` for the ops, ``N word`` else.

    >>> _counts_text({"table(s)": 3, "changes c": 12, "changes u": 5, "changes d": 0, "quarantined": 0})
    '3 table(s), changes c=12 u=5 d=0, 0 quarantined'
    """
    parts: list[str] = []
    for word, n in counts.items():
        label, _, op = word.rpartition(" ")
        if label in ("rows", "changes") and op in ("c", "u", "d", "r"):
            if parts and parts[-1].startswith(label + " ") and "=" in parts[-1]:
                parts[-1] += f" {op}={n}"
            else:
                parts.append(f"{label} {op}={n}")
        else:
            parts.append(f"{n} {word}")
    return ", ".join(parts)


def render_text(st: Status) -> str:
    """The human form: a table of the source tables, then runs, files and quarantine, a line each."""
    import pyarrow as pa

    from pipelines.sql import render

    out = [f"warehouse {st.warehouse} at {_when(st.now)} UTC", ""]
    if st.tables:
        cols = {"source table": [], "last applied": [], "gtid": [], "source commit (UTC)": [], "lag": [],
                "rows": [], "applied by run": [], "quarantined": []}
        for t in st.tables:
            for k, v in zip(cols, (t.name, t.position or "-", t.gtid or "-", _when(t.commit_ts),
                                   duration(t.lag_seconds), "-" if t.rows is None else str(t.rows),
                                   f"{t.run_id} {t.run_status or '?'}" if t.run_id else "-", _classes(t.quarantine))):
                cols[k].append(v)
        out.append(render(pa.table(cols)).rstrip("\n"))
    else:
        out.append("no source table in silver yet")
    out.append("")
    out.append("latest runs:" if st.runs else "latest runs: none yet")
    for r in st.runs:
        counts = _counts_text(r.counts)
        out.append(f"  {r.step:<11} {r.run_id} {r.status or '?'} at {_when(r.started_at)} .. {_when(r.ended_at)}: {counts}"
                   + (f"\n  {'':<11} error: {r.error.splitlines()[0]}" if r.error else ""))
    f = st.files
    total = sum(f.by_status.values())
    out.append("")
    out.append(f"files: {total} in the manifest" + (f" (newest {f.last})" if f.last else "") + ": "
               + (", ".join(f"{n} {s}" for s, n in f.by_status.items()) or "none"))
    if f.waiting is None:
        out.append(f"waiting: {f.waiting_note}")
    else:
        listed = ", ".join(f"{w['name']} ({w['why']})" for w in f.waiting[:10]) + (" ..." if len(f.waiting) > 10 else "")
        out.append(f"waiting: {len(f.waiting)} file(s)" + (f": {listed}" if f.waiting else "") + f" [{f.waiting_note}]")
    open_rows = sum(sum(c.values()) for c in st.quarantine.values())
    out.append(f"quarantine: {open_rows} open row(s), {st.resolved} resolved"
               + "".join(f"; {w}: {_classes(c)}" for w, c in st.quarantine.items())
               + (" (python -m pipelines.quarantine list)" if open_rows else ""))
    return "\n".join(out) + "\n"


def _jsonable(v: Any) -> Any:
    if isinstance(v, _dt.datetime):
        return v.astimezone(_UTC).isoformat()
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_jsonable(x) for x in v]
    return v


def render_json(st: Status) -> str:
    return json.dumps(_jsonable(asdict(st)), ensure_ascii=False, indent=2) + "\n"


# -- command line -------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m pipelines.status", description=__doc__.split("\n\n")[0])
    p.add_argument("--warehouse", help="warehouse folder (default: $BINLOG_DELTA_WAREHOUSE, else the config's warehouse)")
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="YAML configuration (default: conf/pipeline.yaml)")
    p.add_argument("--input", help="binlog folder compared with the manifest (default: the config's input)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; 0, or 2 when the warehouse or the configuration cannot be read."""
    from pipelines.config import ConfigError
    from pipelines.sql import warehouse_and_config

    args = parse_args(argv)
    try:
        warehouse, cfg = warehouse_and_config(args)
        if not _is_folder(warehouse):
            _log.error(f"warehouse {warehouse} is not a folder (run the pipeline first, or pass --warehouse)")
            return 2
        st = gather(warehouse, input=args.input or (cfg.input if cfg is not None else None))
    except (ConfigError, storage.StorageError) as e:
        _log.error(str(e))
        return 2
    except OSError as e:
        _log.error(f"warehouse {args.warehouse or '(from the config)'} cannot be read: {e}")
        return 2
    sys.stdout.write(render_json(st) if args.format == "json" else render_text(st))
    return 0


def _is_folder(warehouse: str) -> bool:
    from pyarrow import fs as pafs

    if not storage.is_remote(warehouse):
        return os.path.isdir(storage.local_path(warehouse) or warehouse)
    fs, where = storage.arrow_filesystem(warehouse)
    return fs.get_file_info(where).type == pafs.FileType.Directory


if __name__ == "__main__":
    delta_io.exit_process(main())  # (not sys.exit: delta_io.exit_process says why)
