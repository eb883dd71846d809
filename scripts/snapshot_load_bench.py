"""How fast the snapshot load (``jobs/load_snapshot.py``: :mod:`pipelines.snapshot_load`) lands a dump
in bronze: the synthetic mariadb-dump of :mod:`scripts.snapshot_read_bench` (one OLTP-ish table of
every common kind of value), loaded into a fresh warehouse in a new local Spark session.

    .venv/bin/python -m scripts.snapshot_load_bench [--mb 100] [--backend rs] [--tasks-mb 16] [--path .bench/snapshot.sql]

Prints wall time, MB/s and rows/s of the load (the session is built before the clock starts), and
the peak RSS of the Python driver, the JVM and the Python workers, sampled as ``make load`` samples
them (:class:`scripts.load_test.Sampler`). Writes ``snapshot_load.json`` beside the dump.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

from scripts.load_test import Sampler
from scripts.snapshot_read_bench import write_dump


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=int, default=100, help="size of the synthetic dump (MB)")
    p.add_argument("--backend", choices=["rs", "spark"], default="rs")
    p.add_argument("--tasks-mb", type=int, default=16, help="parallelism.target_bytes_per_task, in MiB")
    p.add_argument("--path", default=".bench/snapshot.sql")
    p.add_argument("--master", default="local[2]")
    args = p.parse_args()

    from pipelines import snapshot_load
    from pipelines.config import load_config
    from pipelines.spark_session import build_session

    os.makedirs(os.path.dirname(args.path) or ".", exist_ok=True)
    if not os.path.exists(args.path) or os.path.getsize(args.path) < args.mb * 1e6 * 0.95:
        write_dump(args.path, args.mb)
    size = os.path.getsize(args.path)
    warehouse = tempfile.mkdtemp(prefix="snapshot-load-bench-")
    try:
        cfg = load_config("conf/pipeline.yaml", {"warehouse": warehouse, "input": warehouse, "progress": False,
                                                 "delta.backend": args.backend,
                                                 "parallelism.target_bytes_per_task": args.tasks_mb << 20})
        spark = build_session("snapshot-load-bench", args.master, None, {"spark.ui.enabled": "false"}, delta=True)
        spark.sparkContext.setLogLevel("ERROR")
        sampler = Sampler(os.getpid(), 0.5)
        sampler.start()
        started = time.perf_counter()
        try:
            stats = snapshot_load.run(spark, cfg, [args.path])
        finally:
            seconds = time.perf_counter() - started
            sampler.stop()
        spark.stop()
    finally:
        shutil.rmtree(warehouse, ignore_errors=True)
    rows = sum(stats.rows.values())
    result = {
        "mb": round(size / 1e6, 1), "backend": args.backend, "tasks_mb": args.tasks_mb, "seconds": round(seconds, 2),
        "mb_per_s": round(size / 1e6 / seconds, 2), "rows": rows, "rows_per_s": round(rows / seconds),
        **{f"peak_{k}_mb": round(max((x[k] for x in sampler.samples), default=0) / 1e6)
           for k in ("python_driver_rss", "jvm_rss", "python_workers_rss")},
        "peak_total_mb": round(max((x["python_driver_rss"] + x["jvm_rss"] + x["python_workers_rss"]
                                    for x in sampler.samples), default=0) / 1e6),
    }
    print(json.dumps(result))
    with open(os.path.join(os.path.dirname(args.path) or ".", "snapshot_load.json"), "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
