"""Would clustering silver by primary key help MERGE? (issue 20) A table of ROWS rows written
as the pipeline writes it (appends, in commit order), and the same rows Z-ordered by key
(delta-rs ``optimize.z_order``), for auto-increment and for random (UUID) keys; then MERGEs that
update 20 keys, among the newest 1 % of rows (what CDC updates mostly touch) and among all rows.
Reports the files each MERGE rewrote and the rows it copied (delta-rs rewrites every file that
holds a matched row). delta-rs only, no JVM.

    python -m scripts.cluster_bench [--rows 1000000] [--files 20]
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--files", type=int, default=20, help="appends (one file each) that write the table")
    p.add_argument("--out", type=Path, default=REPO / ".bench" / "cluster.json")
    args = p.parse_args(argv)

    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    rng = random.Random(7)
    per_file = args.rows // args.files
    root = Path(tempfile.mkdtemp(prefix="cluster-bench-"))
    results = []
    try:
        for kind in ("auto-increment", "uuid"):
            appended, keys = str(root / f"{kind}-append"), []
            for n in range(args.files):
                lo = n * per_file
                batch = ([f"{i:012d}" for i in range(lo, lo + per_file)] if kind == "auto-increment" else
                         [uuid.UUID(int=rng.getrandbits(128)).hex for _ in range(per_file)])
                keys += batch
                write_deltalake(appended, pa.table({"k": batch, "v": list(range(lo, lo + per_file))}), mode="append")
            clustered = str(root / f"{kind}-zorder")
            shutil.copytree(appended, clustered)
            size = sum(f.stat().st_size for f in Path(appended).glob("*.parquet")) // args.files
            DeltaTable(clustered).optimize.z_order(["k"], target_size=size)
            for layout, path in (("appended", appended), ("z-ordered by key", clustered)):
                files = len(DeltaTable(path).file_uris())
                for which, pool in (("newest 1 %", keys[-len(keys) // 100:]), ("any row", keys)):
                    picked = rng.sample(pool, 20)
                    t0 = time.perf_counter()
                    m = (DeltaTable(path).merge(pa.table({"k": picked, "v": [-1] * 20}), "t.k = s.k", source_alias="s",
                                                target_alias="t").when_matched_update_all().execute())
                    results.append({"keys": kind, "layout": layout, "files": files, "updated": which,
                                    "files_rewritten": m["num_target_files_removed"],
                                    "rows_copied": m["num_target_rows_copied"],
                                    "seconds": round(time.perf_counter() - t0, 2)})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"{args.rows:,} rows in {args.files} appends; each MERGE updates 20 keys (delta-rs)")
    for r in results:
        print(f"  {r['keys']:15s} {r['layout']:17s} ({r['files']:2d} files)  20 of {r['updated']:10s}: "
              f"{r['files_rewritten']:2d} files rewritten, {r['rows_copied']:8,d} rows copied, {r['seconds']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
