"""What a long history costs a Delta table, and what maintenance gives back (delta-rs backend,
no JVM): ``python -m scripts.maintenance_bench [--commits N] [--merges M]``.

Builds a table the way scheduled runs do (N small appends of 10 rows, like bronze; M small MERGEs
that rewrite one row each, like silver), then times opening the table and reading it whole, and
reports commit files, checkpoints, data files, bytes on disk against live bytes; then runs
:func:`pipelines.maintenance.maintain_table` (compact, checkpoint + log cleanup with the logs made
two days old, VACUUM with 0 h retention) and measures again.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

import pyarrow as pa


def _read_seconds(path: str, repeat: int = 5) -> float:
    from deltalake import DeltaTable

    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        DeltaTable(path).to_pyarrow_table()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None) -> int:
    from deltalake import DeltaTable, write_deltalake

    from pipelines.config import load_config
    from pipelines.delta_io.upkeep import storage
    from pipelines.maintenance import maintain_table

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--commits", type=int, default=1000)
    p.add_argument("--merges", type=int, default=500)
    args = p.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="maint-bench-"))
    path = str(root / "t")
    try:
        t0 = time.perf_counter()
        for i in range(args.commits):
            write_deltalake(path, pa.table({"id": list(range(i * 10, i * 10 + 10)), "v": [f"v{i}"] * 10}), mode="append")
        for i in range(args.merges):
            (DeltaTable(path).merge(pa.table({"id": [i], "v": [f"m{i}"]}), "t.id = s.id", "s", "t")
             .when_matched_update_all().execute())
        built = time.perf_counter() - t0
        before, read_before = storage(path), _read_seconds(path)
        past = time.time() - 2 * 86400
        for f in (Path(path) / "_delta_log").iterdir():
            os.utime(f, (past, past))
        cfg = load_config(None, {"input": str(root), "warehouse": str(root), "maintenance": {
            "retention_hours": 0, "log_retention_hours": 0, "compact_min_files": 8}})
        t = time.perf_counter()
        maintain_table(None, path, cfg, "rs")
        took = time.perf_counter() - t
        after, read_after = storage(path), _read_seconds(path)
        mb = 1 << 20
        print(f"history: {args.commits} appends + {args.merges} merges, built in {built:.1f} s")
        for name, s, r in (("before", before, read_before), ("after", after, read_after)):
            print(f"{name:>6}: version {s.version}, {s.log_files} commit files, {s.checkpoints} checkpoint(s), "
                  f"{s.files} live files ({s.live_bytes / mb:.2f} MB), {s.disk_files} files on disk "
                  f"({s.disk_bytes / mb:.2f} MB), open+read {r * 1000:.0f} ms")
        print(f"maintenance: {took:.1f} s")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
