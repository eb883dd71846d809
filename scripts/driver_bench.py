"""The bronze step on a folder of many large files (issue 15): the driver's peak RSS and the
wall time, in a new process as ``spark-submit`` runs it.

    .venv/bin/python -m scripts.driver_bench [--files 20] [--out .bench/driver.json] [--repo DIR]

The files are the bench's one-table binlog (``make bench`` caches it: 300k inserts, 150k updates,
75k deletes, ~46 MB), made distinct per copy: the format description's timestamp differs (its
CRC32 recomputed), so no file is a copy of another, and ``accept_gaps: true`` lets their ROTATE
targets differ from the next name. Only bronze runs (delta-rs backend); silver is not the
question here. ``--repo`` runs another checkout's bronze (e.g. a worktree of an older commit)
on the same files, to compare before and after.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / ".bench" / "single-300000" / "binlog.000001"

_CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from pipelines import bronze
from pipelines.config import load_config
from pipelines.spark_session import build_session
cfg = load_config(None, {"input": sys.argv[2], "warehouse": sys.argv[3], "progress": False, "accept_gaps": True,
                         "delta.backend": "rs"})
spark = build_session("driver-bench", "local[2]", None, {"spark.ui.enabled": "false"})
spark.sparkContext.setLogLevel("ERROR")
t0 = time.perf_counter()
stats = bronze.run(spark, cfg)
wall = time.perf_counter() - t0
print(json.dumps({"bronze_s": round(wall, 1), "files": stats.files, "rows": sum(stats.rows.values()),
                  "driver_python_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))
"""


def make_files(folder: Path, n: int) -> int:
    """``n`` distinct copies of :data:`SOURCE` in ``folder``; returns the bytes in all."""
    data = bytearray(SOURCE.read_bytes())
    fde_len = struct.unpack_from("<I", data, 4 + 9)[0]
    ts = struct.unpack_from("<I", data, 4)[0]
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(1, n + 1):
        struct.pack_into("<I", data, 4, ts + i)
        struct.pack_into("<I", data, 4 + fde_len - 4, zlib.crc32(bytes(data[4 : 4 + fde_len - 4])) & 0xFFFFFFFF)
        (folder / f"binlog.{i:06d}").write_bytes(data)
    return n * len(data)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--repo", type=Path, default=REPO)
    ap.add_argument("--out", type=Path, default=REPO / ".bench" / "driver.json")
    args = ap.parse_args()
    if not SOURCE.exists():
        sys.exit(f"{SOURCE} is missing: run make bench once (it caches the one-table binlog)")
    with tempfile.TemporaryDirectory(prefix="driver-bench-") as tmp:
        folder = Path(tmp) / "in"
        total = make_files(folder, args.files)
        env = dict(os.environ, PYTHONPATH=str(args.repo))
        r = subprocess.run([sys.executable, "-c", _CHILD, str(args.repo), str(folder), str(Path(tmp) / "wh")],
                           capture_output=True, text=True, env=env, cwd=args.repo)
        if r.returncode != 0:
            sys.exit(r.stderr[-4000:])
        result = json.loads(r.stdout.strip().splitlines()[-1])
        result.update(files_in=args.files, mb_in=round(total / 1e6), repo=str(args.repo))
    print(json.dumps(result))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
