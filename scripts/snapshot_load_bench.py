"""How fast the snapshot load (``jobs/load_snapshot.py``: :mod:`pipelines.snapshot_load`) lands a dump
in bronze, cold, against what a user would run instead: the synthetic mariadb-dump of
:mod:`scripts.snapshot_read_bench` (one OLTP-ish table of every common kind of value).

    .venv/bin/python -m scripts.snapshot_load_bench [--mb 1000] [--backend rs] [--tasks-mb 16] [--path .bench/snapshot.sql]
        [--no-peer]

* ours: ``jobs/load_snapshot.py --dump`` in a new process, as spark-submit runs it, into a new
  warehouse, timed whole (Spark's start-up included), with the peak RSS of the Python driver, the
  JVM and the Python workers sampled as ``make load`` samples them (:class:`scripts.load_test.Sampler`);
* the peer: a scratch MariaDB started, ``mariadb shop < dump.sql``, and the table exported with
  delta-rs ``write_deltalake`` (:func:`scripts.bench.export_tables`), timed from before the server
  starts to the table written.

Prints MB/s and rows/s of each as JSON and writes ``snapshot_load.json`` beside the dump.
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

from scripts.bench import ROOT, MariaDBServer, export_tables
from scripts.load_test import Sampler
from scripts.snapshot_read_bench import write_dump

DATABASE = "shop"  # the synthetic dump's (its header's "Database:"; it has no USE)


def ours_cold(dump: str, backend: str, tasks_mb: int) -> dict:
    warehouse = tempfile.mkdtemp(prefix="snapshot-load-bench-")
    try:
        conf = Path(warehouse) / "bench.yaml"
        conf.write_text(f"input: {warehouse}\nwarehouse: {warehouse}/wh\nprogress: false\n"
                        f"parallelism:\n  target_bytes_per_task: {tasks_mb << 20}\n")
        started = time.perf_counter()
        job = subprocess.Popen([sys.executable, "jobs/load_snapshot.py", "--config", str(conf), "--dump", dump,
                                "--delta-backend", backend], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        sampler = Sampler(job.pid, 0.5)
        sampler.start()
        out, err = job.communicate()
        seconds = time.perf_counter() - started
        sampler.stop()
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)
    if job.returncode:
        raise RuntimeError(f"the load failed (exit {job.returncode}):\n{err[-4000:]}")
    summary = next(line for line in out.splitlines() if line.startswith("snapshot load"))
    peak = {f"peak_{k}_mb": round(max((x[k] for x in sampler.samples), default=0) / 1e6)
            for k in ("python_driver_rss", "jvm_rss", "python_workers_rss")}
    peak["peak_total_mb"] = round(max((x["python_driver_rss"] + x["jvm_rss"] + x["python_workers_rss"]
                                       for x in sampler.samples), default=0) / 1e6)
    return {"seconds": round(seconds, 2), "summary": summary, **peak}


def peer(dump: str) -> dict:
    base, out = Path(tempfile.mkdtemp(prefix="snapshot-peer-")), Path(tempfile.mkdtemp(prefix="snapshot-peer-wh-"))
    try:
        t0 = time.perf_counter()
        with MariaDBServer(base, extra_args=("--skip-log-bin",)) as srv:
            srv.sql(f"CREATE DATABASE {DATABASE}")
            with open(dump, "rb") as f:
                subprocess.run([*srv.client_args(), DATABASE], stdin=f, check=True, stdout=subprocess.DEVNULL)
            t1 = time.perf_counter()
            rows = srv.query_value(f"SELECT count(*) FROM {DATABASE}.orders")
            export_tables(srv, out)
            t2 = time.perf_counter()
        return {"seconds": round(t2 - t0, 2), "load_s": round(t1 - t0, 2), "export_s": round(t2 - t1, 2), "rows": int(rows)}
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=int, default=1000, help="size of the synthetic dump (MiB)")
    p.add_argument("--backend", choices=["rs", "spark"], default="rs")
    p.add_argument("--tasks-mb", type=int, default=16, help="parallelism.target_bytes_per_task, in MiB")
    p.add_argument("--path", default=".bench/snapshot.sql")
    p.add_argument("--no-peer", action="store_true", help="ours only")
    args = p.parse_args()

    os.makedirs(os.path.dirname(args.path) or ".", exist_ok=True)
    if not os.path.exists(args.path) or abs(os.path.getsize(args.path) - (args.mb << 20)) > (args.mb << 20) * 0.05:
        write_dump(args.path, args.mb)
    size = os.path.getsize(args.path)
    dump = os.path.abspath(args.path)
    result = {"mb": round(size / 1e6, 1), "backend": args.backend, "tasks_mb": args.tasks_mb, "cpus": os.cpu_count()}
    ours = ours_cold(dump, args.backend, args.tasks_mb)
    result["ours"] = ours
    if not args.no_peer:
        theirs = peer(dump)
        result["peer"] = theirs
        rows = theirs["rows"]
        for side in (ours, theirs):
            side["mb_per_s"] = round(size / 1e6 / side["seconds"], 2)
            side["rows_per_s"] = round(rows / side["seconds"])
        result["peer_over_ours"] = round(theirs["seconds"] / ours["seconds"], 2)
    else:
        ours["mb_per_s"] = round(size / 1e6 / ours["seconds"], 2)
    print(json.dumps(result))
    with open(os.path.join(os.path.dirname(args.path) or ".", "snapshot_load.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
