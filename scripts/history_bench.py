"""What a run costs after a long history of scheduled runs (issue 20), on this machine:

    .venv/bin/python -m scripts.history_bench [--points 10,1000,5000] [--tables 3] [--files-per-run 2]
        [--backend rs|spark] [--out .bench/history.json]

A private MariaDB (FULL row metadata) makes the binlogs: one file that creates ``T`` tables with
rows, then one file per measured run with the same changes per table (10 inserts, 3 updates, 2
deletes). The first file goes through the main job for real. Then the history is built quickly,
as scheduled runs leave it, straight into the warehouse with delta-rs (no Spark):

* bronze: one commit per run (its transaction id) with the measured file's rows, renumbered;
* ``_pipeline/manifest``: ``--files-per-run`` processed files per run (a pending and a committed
  commit), and those files in the binlog folder (placeholders with the recorded size and mtime:
  a processed file that did not change is never read again);
* ``_pipeline/runs`` (a bronze and a silver row), ``_pipeline/silver_watermarks`` (every table);
* every silver table: one commit per run that rewrites its file (what a MERGE of a small table
  does), carrying the watermark in its commit metadata as silver's own commits do.

At each point of ``--points`` (runs of history) the next real file is copied in, named as the next
in sequence, and the main job runs on it in a new process, as ``spark-submit`` runs it: its wall
time, the bronze and silver steps' times (``_pipeline/runs``), and the warehouse's commit files,
checkpoints, files per silver table, bytes on disk against live bytes. Then ``jobs/maintain.py``
runs (compact, checkpoint + log cleanup, VACUUM; retention 0 h: the bench's history is synthetic,
a real one keeps 7 days) and the same file's run is timed again on the maintained warehouse (the
file is taken back out of bronze's reach by renaming the next real file instead).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from mariadb_server import MariaDBServer  # noqa: E402

BENCH = REPO / ".bench"
DB = "hist"
ROWS = 200


def _hour_sql(t: int, hour: int) -> str:
    """One hour's changes of table ``t``: 10 inserts, 3 updates, 2 deletes."""
    base = ROWS + hour * 10
    ins = ", ".join(f"({i}, 'v{i}-{hour}', {i * 7 % 1000})" for i in range(base + 1, base + 11))
    return (f"INSERT INTO t{t} (id, v, n) VALUES {ins};"
            f"UPDATE t{t} SET n = n + 1, v = 'u{hour}' WHERE id IN ({base - 1}, {base - 2}, {base - 3});"
            f"DELETE FROM t{t} WHERE id IN ({hour * 2 + 1}, {hour * 2 + 2});")


def make_binlogs(work: Path, tables: int, hours: int) -> tuple[Path, list[Path]]:
    """The setup file(s) and one file per hour, from a private MariaDB."""
    out = work / "source"
    out.mkdir()
    srv = MariaDBServer(work / "mariadb", row_metadata="FULL").start()
    try:
        srv.flush_logs()
        first = len(srv.binlog_files()) - 1
        srv.sql(f"CREATE DATABASE {DB}")
        for t in range(tables):
            srv.sql(f"CREATE TABLE t{t} (id INT PRIMARY KEY, v VARCHAR(64), n INT)", db=DB)
            srv.sql(f"INSERT INTO t{t} VALUES " + ", ".join(f"({i}, 'v{i}', {i})" for i in range(1, ROWS + 1)), db=DB)
        srv.flush_logs()
        setup = srv.binlog_files()[first:-1]
        for h in range(hours):
            srv.sql("".join(_hour_sql(t, h) for t in range(tables)), db=DB)
            srv.flush_logs()
        files = srv.binlog_files()
        hourly = files[len(files) - 1 - hours:-1]
    finally:
        srv.stop()
    (out / "setup").mkdir()
    for f in setup:
        shutil.copy2(f, out / "setup" / f.name)
    hour_files = []
    for i, f in enumerate(hourly):
        hour_files.append(out / f"hour{i}")
        shutil.copy2(f, hour_files[-1])
    return out / "setup", hour_files


def _config(work: Path, backend: str) -> Path:
    path = work / "pipeline.yaml"
    path.write_text(json.dumps({
        "input": str(work / "binlogs"), "warehouse": str(work / "wh"), "progress": False,
        "delta": {"backend": backend},
        "maintenance": {"retention_hours": 0, "log_retention_hours": 0},
        "spark": {"master": "local[2]", "conf": {"spark.sql.shuffle.partitions": "4",
                                                   "spark.sql.session.timeZone": "UTC"}},
    }))
    return path


def _job(script: str, config: Path, *extra: str) -> tuple[float, str]:
    t = time.perf_counter()
    done = subprocess.run([sys.executable, str(REPO / "jobs" / script), "--config", str(config), "--no-progress",
                           *extra], cwd=REPO, capture_output=True, text=True, timeout=3600)
    took = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}")
    return took, done.stdout


class History:
    """Synthetic runs written into the warehouse with delta-rs, renumbering the last real run."""

    def __init__(self, wh: Path, folder: Path, files_per_run: int):
        self.wh, self.folder, self.files_per_run = wh, folder, files_per_run

    def templates(self) -> None:
        """The tables as the jobs left them, and the last real run's rows: what every synthetic
        run repeats."""
        from deltalake import DeltaTable

        wh = self.wh
        self.bronze = DeltaTable(str(wh / "bronze" / "binlog_changes"))
        self.pipe = {n: DeltaTable(str(wh / "_pipeline" / n)) for n in ("manifest", "runs", "silver_watermarks")}
        self.silver = {d.name: DeltaTable(str(d)) for d in sorted((wh / "silver" / DB).iterdir())}
        b = self.bronze.to_pyarrow_table()
        last = max(b.column("file_seq").to_pylist())
        self.bronze_rows = b.filter(pc.equal(b.column("file_seq"), last))
        tabs = {n: t.to_pyarrow_table() for n, t in self.pipe.items()}
        self.schemas = {n: t.schema for n, t in tabs.items()}
        m = tabs["manifest"].to_pylist()
        self.manifest_row = max(m, key=lambda r: (r["file_seq"], r["phase"] == "committed"))
        self.next_seq = self.manifest_row["file_seq"] + 1
        self.batch = max(r["batch"] for r in m) + 1
        runs = tabs["runs"].to_pylist()
        self.run_rows = {r["step"]: r for r in runs}
        self.mark_rows = tabs["silver_watermarks"].to_pylist()
        self.silver_data = {n: t.to_pyarrow_table() for n, t in self.silver.items()}
        self.name_prefix, width = self.manifest_row["name"].rsplit(".", 1)[0], len(self.manifest_row["name"].rsplit(".", 1)[1])
        self.width = width

    def name(self, seq: int) -> str:
        return f"{self.name_prefix}.{seq:0{self.width}d}"

    def add_runs(self, n: int) -> None:
        from deltalake import CommitProperties, Transaction, write_deltalake

        from pipelines.bronze import sha256_prefixes
        from pipelines.bronze.schema import seq_key
        from pipelines.silver import watermark_metadata

        for _ in range(n):
            seqs = list(range(self.next_seq, self.next_seq + self.files_per_run))
            self.next_seq += self.files_per_run
            run_id = f"hist-{self.batch}"
            # the processed files: placeholders with the size and mtime the manifest records
            manifest = []
            for s in seqs:
                p = self.folder / self.name(s)
                p.write_bytes(b"\xfebin")
                st = p.stat()
                row = dict(self.manifest_row, name=p.name, file_seq=s, path=str(p), size=st.st_size,
                           mtime=st.st_mtime_ns // 1_000_000, start_pos=0, complete_until=st.st_size,
                           sha256=sha256_prefixes(str(p), [st.st_size])[st.st_size],
                           batch=self.batch, run_id=run_id, rotate_to=None, gtid_start=None, gtid_end=None)
                manifest.append(row)
            # bronze: the template rows as the last of these files
            s = seqs[-1]
            rows = self.bronze_rows
            cols = {c: rows.column(c) for c in rows.column_names}
            cols["file_seq"] = pa.array([s] * rows.num_rows, pa.int64())
            cols["source_file"] = pa.array([self.name(s)] * rows.num_rows)
            cols["_seq"] = pa.array([seq_key(s, p, r) for p, r in zip(rows.column("event_pos").to_pylist(),
                                                                       rows.column("row_idx").to_pylist())])
            cols["_run_id"] = pa.array([run_id] * rows.num_rows)
            btab = pa.table([cols[c] for c in rows.column_names], schema=rows.schema)
            txn = lambda app: CommitProperties(app_transactions=[Transaction(app, self.batch)])  # noqa: E731
            mschema = self.schemas["manifest"]
            write_deltalake(self.pipe["manifest"], pa.Table.from_pylist(
                [dict(r, phase="pending") for r in manifest], schema=mschema), mode="append",
                commit_properties=txn("bronze-pending"))
            write_deltalake(self.bronze, btab, mode="append", commit_properties=txn("bronze"))
            write_deltalake(self.pipe["manifest"], pa.Table.from_pylist(
                [dict(r, phase="committed") for r in manifest], schema=mschema), mode="append",
                commit_properties=txn("bronze"))
            rschema = self.schemas["runs"]
            write_deltalake(self.pipe["runs"], pa.Table.from_pylist(
                [dict(self.run_rows["bronze"], run_id=run_id)], schema=rschema), mode="append")
            # silver: each table's file rewritten, its watermark in the commit
            marks = {}
            for table, data in self.silver_data.items():
                t_rows = btab.filter(pc.equal(btab.column("table"), table))
                mark = max(t_rows.column("_seq").to_pylist()) if t_rows.num_rows else None
                if mark is None:
                    continue
                marks[table] = mark
                write_deltalake(self.silver[table], data, mode="overwrite",
                                commit_properties=CommitProperties(
                                    custom_metadata={"userMetadata": watermark_metadata(mark)}))
            wschema = self.schemas["silver_watermarks"]
            template = self.mark_rows[0]
            write_deltalake(self.pipe["silver_watermarks"], pa.Table.from_pylist(
                [dict(template, db=DB, table=t, max_seq=m, run_id=run_id) for t, m in sorted(marks.items())],
                schema=wschema), mode="append")
            write_deltalake(self.pipe["runs"], pa.Table.from_pylist(
                [dict(self.run_rows["silver"], run_id=run_id)], schema=rschema), mode="append")
            self.batch += 1


def _warehouse_figures(wh: Path) -> dict:
    from pipelines.delta_io.upkeep import storage

    tables = [p.parent for p in wh.rglob("_delta_log")]
    out = {"commit_files": 0, "checkpoints": 0, "disk_bytes": 0, "live_bytes": 0, "silver_files": {}}
    for t in tables:
        s = storage(str(t), backend="rs")
        out["commit_files"] += s.log_files
        out["checkpoints"] += s.checkpoints
        out["disk_bytes"] += s.disk_bytes
        out["live_bytes"] += s.live_bytes
        if "silver" in t.parts:
            out["silver_files"][t.name] = s.files
    return out


def _step_seconds(wh: Path, n: int = 2) -> dict:
    from deltalake import DeltaTable

    rows = DeltaTable(str(wh / "_pipeline" / "runs")).to_pyarrow_table(
        columns=["step", "started_at", "ended_at"]).to_pylist()
    rows.sort(key=lambda r: r["started_at"])
    return {r["step"]: round((r["ended_at"] - r["started_at"]).total_seconds(), 2) for r in rows[-n:]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--points", default="10,1000,5000", help="runs of history at which a run is measured")
    p.add_argument("--tables", type=int, default=3)
    p.add_argument("--files-per-run", type=int, default=2)
    p.add_argument("--backend", default="rs", choices=("rs", "spark"))
    p.add_argument("--out", default=str(BENCH / "history.json"))
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    args = p.parse_args(argv)
    points = sorted(int(x) for x in args.points.split(","))
    work = Path(tempfile.mkdtemp(prefix="history-bench-"))
    results = []
    try:
        setup, hours = make_binlogs(work, args.tables, 2 * len(points) + 1)
        folder = work / "binlogs"
        folder.mkdir()
        for f in sorted(setup.iterdir()):
            shutil.copy2(f, folder / f.name)
        config = _config(work, args.backend)
        hist = None
        built, done_runs, hour = 0.0, 0, 0
        for point in points:
            if hist is None:  # the first real run, then a real hourly one as the template
                _job("run_pipeline.py", config)
                last = sorted(folder.iterdir())[-1].name
                prefix, num = last.rsplit(".", 1)
                shutil.copy2(hours[hour], folder / f"{prefix}.{int(num) + 1:0{len(num)}d}")
                hour += 1
                _job("run_pipeline.py", config)
                hist = History(work / "wh", folder, args.files_per_run)
                done_runs = 2
            t = time.perf_counter()
            hist.templates()
            hist.add_runs(point - done_runs)
            built += time.perf_counter() - t
            done_runs = point
            row = {"history_runs": point, "processed_files": len(list(folder.iterdir())), "build_s": round(built, 1)}
            for phase in ("before maintenance", "after maintenance"):
                hist.templates()
                if phase == "after maintenance":
                    # one more synthetic run first: a real file's manifest row names the ROTATE
                    # target it was written with, which the next renamed real file is not
                    hist.add_runs(1)
                    done_runs += 1
                    row["maintain_s"] = round(_job("maintain.py", config)[0], 1)
                    hist.templates()
                nxt = folder / hist.name(hist.next_seq)
                shutil.copy2(hours[hour], nxt)
                hour += 1
                figures = _warehouse_figures(work / "wh")
                wall, out = _job("run_pipeline.py", config)
                done_runs += 1
                row[phase] = {"wall_s": round(wall, 2), "steps_s": _step_seconds(work / "wh"), **figures}
                print(f"history {point:>5} runs, {row['processed_files']:>5} files, {phase}: run {wall:.1f} s "
                      f"(bronze {row[phase]['steps_s'].get('bronze')} s, silver {row[phase]['steps_s'].get('silver')} s); "
                      f"{figures['commit_files']} commit files, {figures['checkpoints']} checkpoints, "
                      f"silver files {sorted(figures['silver_files'].values())}, "
                      f"disk {figures['disk_bytes'] / 1e6:.2f} MB / live {figures['live_bytes'] / 1e6:.2f} MB",
                      flush=True)
            results.append(row)
        base = results[0]
        for r in results:
            for phase in ("before maintenance", "after maintenance"):
                ratio = r[phase]["wall_s"] / base[phase]["wall_s"]
                r[phase]["ratio_to_first"] = round(ratio, 2)
            print(f"history {r['history_runs']:>5}: run / run at {base['history_runs']}: "
                  f"{r['before maintenance']['ratio_to_first']:.2f}x before maintenance, "
                  f"{r['after maintenance']['ratio_to_first']:.2f}x after (target <= 1.2x); after maintenance "
                  f"disk/live {r['after maintenance']['disk_bytes'] / max(1, r['after maintenance']['live_bytes']):.2f}")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"backend": args.backend, "tables": args.tables,
                                              "files_per_run": args.files_per_run, "results": results}, indent=1))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
