"""What the S3A jars (hadoop-aws and the 560 MB AWS SDK bundle) cost a local session's start-up.

Each run is a new process (as a job is): build the session as the jobs do (delta-spark on the
classpath), run one tiny job, stop, and let the JVM exit. Three ways, taken in turn:

* ``none``: no S3A jars (every local run whose paths are not ``s3a://``);
* ``classpath``: ``build_session(s3a=True)``, the jars at the end of the driver JVM's classpath;
* ``spark.jars``: the jars in ``spark.jars`` beside the Delta jars (the conventional route).

Reported per run: the session's build and the first job (wall), the JVM's CPU time and peak RSS
(it is this process's only child), and the bytes of jars the local executor copied into its work
folder. Wall times move with the machine's load; CPU time and RSS much less.

    .venv/bin/python -m scripts.s3a_startup_bench --runs 3
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

MODES = ("none", "classpath", "spark.jars")

_ONE = """
import json, os, resource, sys, time
t0 = time.perf_counter()
from pipelines import delta_jars
from pipelines.spark_session import build_session
mode = sys.argv[1]
extra = {"spark.jars": ",".join(delta_jars.find_jars() + delta_jars.find_s3a_jars())} if mode == "spark.jars" else {}
spark = build_session("s3a-startup-bench", "local[2]", extra_conf=extra, delta=True, s3a=mode == "classpath")
t1 = time.perf_counter()
spark.range(1000).selectExpr("sum(id)").collect()
t2 = time.perf_counter()
root = spark._jvm.org.apache.spark.SparkFiles.getRootDirectory()
copied = sum(os.path.getsize(os.path.join(root, f)) for f in os.listdir(root) if f.endswith(".jar"))
proc = spark.sparkContext._gateway.proc
spark.stop()
proc.stdin.close()  # the JVM exits when its stdin closes
proc.wait()
jvm = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"mode": mode, "session_s": t1 - t0, "first_job_s": t2 - t1,
                  "jvm_cpu_s": jvm.ru_utime + jvm.ru_stime, "jvm_peak_rss_mb": jvm.ru_maxrss / 1024,
                  "jars_copied_mb": copied / 2**20}))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3, help="runs of each way (default 3)")
    args = p.parse_args(argv)
    repo = Path(__file__).resolve().parents[1]
    rows = []
    for _ in range(args.runs):
        for mode in MODES:
            done = subprocess.run([sys.executable, "-c", _ONE, mode], cwd=repo, capture_output=True, text=True)
            if done.returncode:
                print(done.stderr[-3000:], file=sys.stderr)
                return 1
            row = json.loads(done.stdout.splitlines()[-1])
            rows.append(row)
            print(f"{row['mode']:10s}  session {row['session_s']:5.2f} s  first job {row['first_job_s']:5.2f} s  "
                  f"JVM CPU {row['jvm_cpu_s']:5.2f} s  JVM peak RSS {row['jvm_peak_rss_mb']:4.0f} MB  "
                  f"jars copied {row['jars_copied_mb']:4.0f} MB", flush=True)
    print(f"load average after: {Path('/proc/loadavg').read_text().split()[:3]} ({time.strftime('%H:%M')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
