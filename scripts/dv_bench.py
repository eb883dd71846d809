"""Deletion vectors in silver, measured both ways (issue 20): a silver table of ROWS rows
(delta-spark), then MERGEs of a few changed rows, with ``silver.deletion_vectors`` on and off.
Reports each MERGE's wall time and the bytes it wrote and removed, and a full read after.

    python -m scripts.dv_bench [--rows 2000000] [--merges 5] [--changes 10]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--merges", type=int, default=5)
    p.add_argument("--changes", type=int, default=10, help="rows each MERGE updates (and as many it deletes)")
    p.add_argument("--out", type=Path, default=REPO / ".bench" / "dv.json")
    args = p.parse_args(argv)

    from pyspark.sql import functions as F
    from spark_fixtures import TEST_CONF

    from pipelines.schema.typemap import ColumnSpec, silver_schema
    from pipelines.config import SilverConfig
    from pipelines.silver import apply_changes
    from pipelines.silver.properties import for_new_table
    from pipelines.spark_session import build_session

    spark = build_session(app_name="dv-bench", master="local[2]", extra_conf=TEST_CONF, delta=True)
    specs = [ColumnSpec("id", "bigint"), ColumnSpec("name", "varchar", length=40), ColumnSpec("qty", "int")]
    image = silver_schema(specs)

    def batch(ids_df, op: str, seq_base: int, text: str):
        after = F.struct(F.col("id"), F.concat(F.lit(text), F.col("id").cast("string")).alias("name"),
                         (F.col("id") % 1000).cast("int").alias("qty")).cast(image)
        return ids_df.select(
            F.lpad((F.col("id") + F.lit(seq_base)).cast("string"), 12, "0").alias("_seq"), F.lit(op).alias("op"),
            (after if op != "d" else F.lit(None).cast(image)).alias("after"),
            (after if op != "c" else F.lit(None).cast(image)).alias("before"),
            F.current_timestamp().alias("_commit_ts"))

    results = {}
    root = Path(tempfile.mkdtemp(prefix="dv-bench-"))
    try:
        for dv in (False, True):
            path = str(root / ("dv" if dv else "plain") / "silver" / "b" / "t")
            started = time.perf_counter()
            apply_changes(spark, batch(spark.range(1, args.rows + 1), "c", 0, "v"), specs, path, keys=["id"],
                          backend="spark", properties=for_new_table(SilverConfig(deletion_vectors=dv), "spark"))
            load = time.perf_counter() - started
            merges = []
            for m in range(args.merges):
                base = args.rows * (m + 2)
                ids = spark.range(0, args.changes).select(((F.col("id") * 7919 + m * 104729) % args.rows + 1).alias("id"))
                gone = spark.range(0, args.changes).select(((F.col("id") * 6007 + m * 3571) % args.rows + 1).alias("id"))
                changes = batch(ids, "u", base, f"m{m}-").unionByName(batch(gone, "d", base + args.rows // 2, "v"))
                t0 = time.perf_counter()
                apply_changes(spark, changes, specs, path, keys=["id"], backend="spark", properties=for_new_table(SilverConfig(deletion_vectors=dv), "spark"))
                seconds = time.perf_counter() - t0
                h = spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()["operationMetrics"]
                merges.append({"seconds": round(seconds, 2), "bytes_added": int(h.get("numTargetBytesAdded", 0)),
                               "bytes_removed": int(h.get("numTargetBytesRemoved", 0)),
                               "files_removed": int(h.get("numTargetFilesRemoved", 0)),
                               "dvs_added": int(h.get("numTargetDeletionVectorsAdded", 0))})
            t0 = time.perf_counter()
            count = spark.read.format("delta").load(path).count()
            read = time.perf_counter() - t0
            size = sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file() and "_delta_log" not in f.parts)
            results["with deletion vectors" if dv else "without"] = {
                "load_seconds": round(load, 1), "merges": merges, "read_seconds": round(read, 2), "rows": count,
                "bytes_on_disk": size}
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(f"silver table of {args.rows:,} rows (delta-spark); each MERGE updates {args.changes} rows and deletes {args.changes}")
    for name, r in results.items():
        ms = r["merges"]
        warm = ms[1:] or ms
        print(f"{name:22s} MERGE {sum(x['seconds'] for x in warm) / len(warm):6.2f} s (warm mean), "
              f"wrote {sum(x['bytes_added'] for x in ms) / len(ms) / 1e6:7.2f} MB, removed "
              f"{sum(x['bytes_removed'] for x in ms) / len(ms) / 1e6:7.2f} MB per MERGE; "
              f"{sum(x['dvs_added'] for x in ms)} DVs; full read {r['read_seconds']:.2f} s; "
              f"{r['bytes_on_disk'] / 1e6:.1f} MB on disk")
    return 0


if __name__ == "__main__":
    sys.exit(main())
