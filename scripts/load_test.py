"""Load test: the whole pipeline over gigabytes of binlog, with the memory of every process sampled.

    .venv/bin/python -m scripts.load_test                      # one binlog file of >= 1 GB
    .venv/bin/python -m scripts.load_test --mode folder --gb 5 # a folder of >= 5 GB (files of 1 GiB)

1. Generate (once; cached under ``.bench/load/<name>/``) the binlog from a private MariaDB server
   with the workload of :mod:`scripts.make_bench_binlog` (its DDL and inserts): chunks of 100,000
   ``orders`` rows in transactions of 2,000 (plus the ``events`` rows), then for every 10,000 rows
   an UPDATE of 2,000 and a DELETE of 1,000, until the binlog reaches the target size. The server
   runs with ``max_binlog_size=1G``. The server's final table counts and the exact number of row
   changes per operation are recorded in ``meta.json``, and ``python -m pipelines.binlog bench
   --json`` gives the decoder's row count per file.
2. Run ``jobs/run_pipeline.py`` (bronze then silver, one Spark session, the given config) as a
   subprocess over a fresh warehouse, sampling every 0.2 s from /proc the RSS of the Python
   driver, of the driver JVM (in local mode the executors run inside it), and of the PySpark
   worker processes (RSS summed and PSS summed, since forked workers share pages), plus the JVM's
   heap use from ``jstat -gc`` when present, and the load average.
3. Check the result: bronze rows = the decoder's row changes (and per operation = the workload's),
   silver ``bench.orders`` / ``bench.events`` row counts (and ``SUM(id)``) = the server's.

Writes ``.bench/load.json`` (one entry per run name, kept across runs) and prints a markdown table.
Exit status 1 when the job fails or a check does not hold.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))
from mariadb_server import MariaDBServer  # noqa: E402

from scripts.make_bench_binlog import DDL, _insert  # noqa: E402

MAX_BINLOG_SIZE = 1 << 30
CHUNK_ROWS = 100_000  # orders rows per generation round (a multiple of 10,000)
TX_ROWS = 2_000  # rows per insert transaction, as make_bench_binlog
PAGE = os.sysconf("SC_PAGE_SIZE")


# ------------------------------------------------------------------------------------ generation


def _changes(lo: int, hi: int) -> tuple[str, int, int]:
    """The UPDATE/DELETE statements for orders ``lo..hi`` and the rows they update and delete:
    for every 10,000 ids, the first 2,000 are updated, then the first 1,000 deleted."""
    sql, upd, dele = [], 0, 0
    for b in range(lo, hi + 1, 5 * TX_ROWS):
        u_hi, d_hi = min(b + TX_ROWS - 1, hi), min(b + TX_ROWS // 2 - 1, hi)
        sql.append(f"UPDATE orders SET status='paid', amount=amount+1, note=CONCAT('upd ', id) "
                   f"WHERE id BETWEEN {b} AND {u_hi};")
        sql.append(f"DELETE FROM orders WHERE id BETWEEN {b} AND {d_hi};")
        upd += u_hi - b + 1
        dele += d_hi - b + 1
    return "\n".join(sql), upd, dele


def generate(out: Path, target_bytes: int, single_file: bool) -> dict:
    """Write binlog files of ``target_bytes`` or more in total into ``out/binlogs``; return the meta."""
    binlogs = out / "binlogs"
    shutil.rmtree(out, ignore_errors=True)
    binlogs.mkdir(parents=True)
    base = Path(tempfile.mkdtemp(prefix="load-mdb-", dir=out))
    t0 = time.monotonic()
    ops = {"c": 0, "u": 0, "d": 0}
    rows = 0
    try:
        srv = MariaDBServer(base, extra_args=(
            f"--max-binlog-size={MAX_BINLOG_SIZE}", "--plugin-load-add=ha_sequence",
            "--innodb-buffer-pool-size=1G", "--innodb-log-file-size=512M"))
        with srv:
            srv.sql(DDL)
            while True:
                size = sum(f.stat().st_size for f in srv.binlog_files())
                if size >= target_bytes:
                    break
                if single_file and len(srv.binlog_files()) > 1:
                    raise SystemExit(f"the binlog rotated at {size} bytes before reaching {target_bytes}")
                lo, hi = rows + 1, rows + CHUNK_ROWS
                inserts = "".join(_insert(a, min(a + TX_ROWS - 1, hi)) for a in range(lo, hi + 1, TX_ROWS))
                changes, upd, dele = _changes(lo, hi)
                srv.sql(inserts + changes, db="bench")
                rows = hi
                ops["c"] += CHUNK_ROWS + CHUNK_ROWS // 4  # orders + events (every 4th id)
                ops["u"] += upd
                ops["d"] += dele
                print(f"\rgenerating: {rows:,} orders rows, {size / 1e9:.2f} GB of binlog", end="", flush=True)
            print()
            server = {
                "orders_count": int(srv.query_value("SELECT COUNT(*) FROM bench.orders")),
                "orders_sum_id": int(srv.query_value("SELECT SUM(id) FROM bench.orders")),
                "events_count": int(srv.query_value("SELECT COUNT(*) FROM bench.events")),
            }
            assert server["orders_count"] == rows - ops["d"], (server, rows, ops)
            srv.flush_logs()
            files = [f for f in srv.binlog_files()[:-1] if f.stat().st_size > 1024]
            for f in files:
                shutil.move(str(f), binlogs / f.name)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    gen_s = time.monotonic() - t0
    decoder = [_decoder_bench(binlogs / f.name) for f in files]
    meta = {
        "orders_rows_inserted": rows,
        "row_changes_by_op": ops,
        "server": server,
        "files": [{"name": d["file"], "bytes": d["bytes"], "decoder_rows": d["rows"],
                   "decoder_events": d["events"], "decoder_seconds": d["seconds"]} for d in decoder],
        "generate_seconds": round(gen_s, 1),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    return meta


def _decoder_bench(path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "pipelines.binlog", "bench", "--json", str(path)],
                          cwd=REPO, capture_output=True, text=True, check=True)
    res = json.loads(proc.stdout.strip().splitlines()[-1])[0]
    res["file"] = path.name
    return res


def cached_or_generate(out: Path, target_bytes: int, single_file: bool) -> dict:
    meta_path = out / "meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        present = {f["name"]: f["bytes"] for f in meta["files"]}
        on_disk = {p.name: p.stat().st_size for p in (out / "binlogs").iterdir()}
        if present == on_disk and sum(present.values()) >= target_bytes:
            print(f"using cached binlogs in {out / 'binlogs'}")
            return meta
    return generate(out, target_bytes, single_file)


# ------------------------------------------------------------------------------------ sampling


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def _proc_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        stat = _read(f"/proc/{name}/stat")
        if not stat:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        cmd = (_read(f"/proc/{name}/cmdline") or "").replace("\0", " ").strip()
        table[int(name)] = (ppid, cmd)
    return table


def _rss(pid: int) -> int:
    statm = _read(f"/proc/{pid}/statm")
    return int(statm.split()[1]) * PAGE if statm else 0


def _pss(pid: int) -> int:
    text = _read(f"/proc/{pid}/smaps_rollup") or ""
    m = re.search(r"^Pss:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else 0


def classify(root: int, table: dict[int, tuple[int, str]]) -> dict[str, list[int]]:
    """The descendants of ``root`` (itself included) by role: ``python_driver``, ``jvm``,
    ``python_workers`` (pyspark daemon and the workers it forks) and ``other``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    roles: dict[str, list[int]] = {"python_driver": [], "jvm": [], "python_workers": [], "other": []}
    stack = [(root, False)]
    while stack:
        pid, under_jvm = stack.pop()
        cmd = table.get(pid, (0, ""))[1]
        exe = os.path.basename(cmd.split(" ", 1)[0]) if cmd else ""
        if pid == root:
            role = "python_driver"
        elif exe == "java" and "org.apache.spark.launcher.Main" not in cmd:  # not spark-submit's launcher
            role = "jvm"
        elif "pyspark.daemon" in cmd or "pyspark.worker" in cmd or (under_jvm and exe.startswith("python")):
            role = "python_workers"
        else:
            role = "other"
        roles[role].append(pid)
        for c in children.get(pid, ()):
            stack.append((c, under_jvm or role == "jvm"))
    return roles


class Sampler(threading.Thread):
    """Samples the job's processes every ``interval`` seconds until :meth:`stop`."""

    def __init__(self, root: int, interval: float):
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.samples: list[dict] = []
        self.jvm_pid: int | None = None
        self.heap: list[tuple[float, int, int]] = []  # (t, used bytes, committed bytes)
        self._done = threading.Event()
        self._jstat: subprocess.Popen | None = None
        self._t0 = time.monotonic()

    def stop(self) -> None:
        self._done.set()
        self.join()
        if self._jstat is not None and self._jstat.poll() is None:
            self._jstat.terminate()
            self._jstat.wait()

    def run(self) -> None:
        while not self._done.is_set():
            t = time.monotonic() - self._t0
            roles = classify(self.root, _proc_table())
            s = {"t": round(t, 2), "load1": float(open("/proc/loadavg").read().split()[0])}
            for role, pids in roles.items():
                s[role + "_rss"] = sum(_rss(p) for p in pids)
                s[role + "_n"] = len(pids)
            s["python_workers_pss"] = sum(_pss(p) for p in roles["python_workers"])
            s["python_workers_max1_rss"] = max((_rss(p) for p in roles["python_workers"]), default=0)
            self.samples.append(s)
            if self.jvm_pid is None and roles["jvm"]:
                self.jvm_pid = max(roles["jvm"], key=_rss)
                self._start_jstat()
            self._done.wait(self.interval)

    def _start_jstat(self) -> None:
        jstat = shutil.which("jstat")
        if not jstat:
            return
        self._jstat = subprocess.Popen([jstat, "-gc", str(self.jvm_pid), "500"], stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read_jstat, daemon=True).start()

    def _read_jstat(self) -> None:
        header = None
        for line in self._jstat.stdout:
            cols = line.split()
            if not cols:
                continue
            if cols[0] == "S0C":
                header = cols
                continue
            if header is None or len(cols) != len(header):
                continue
            try:
                v = dict(zip(header, map(float, cols)))
            except ValueError:
                continue
            used = (v["S0U"] + v["S1U"] + v["EU"] + v["OU"]) * 1024
            committed = (v["S0C"] + v["S1C"] + v["EC"] + v["OC"]) * 1024
            self.heap.append((round(time.monotonic() - self._t0, 2), int(used), int(committed)))


# ------------------------------------------------------------------------------------ the run


def run_job(binlogs: Path, warehouse: Path, config: Path, log: Path, interval: float) -> dict:
    shutil.rmtree(warehouse, ignore_errors=True)
    cmd = [sys.executable, str(REPO / "jobs" / "run_pipeline.py"), "--config", str(config),
           "--binlog-dir", str(binlogs), "--warehouse", str(warehouse), "--no-progress"]
    load_before = open("/proc/loadavg").read().split()[:3]
    t0 = time.monotonic()
    marks: dict[str, float] = {}
    lines: list[str] = []
    with open(log, "w") as logf:
        env = dict(os.environ, PYTHONUNBUFFERED="1")  # the step summaries arrive when printed
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        sampler = Sampler(proc.pid, interval)
        sampler.start()
        for line in proc.stdout:
            logf.write(line)
            for step in ("bronze run", "silver run"):
                if line.startswith(step):
                    marks[step] = round(time.monotonic() - t0, 1)
                    lines.append(line.strip())
        rc = proc.wait()
        wall = time.monotonic() - t0
        sampler.stop()
    load_after = open("/proc/loadavg").read().split()[:3]
    bronze_end = marks.get("bronze run", wall)
    phases = {
        "bronze": _peaks([x for x in sampler.samples if x["t"] <= bronze_end],
                         [h for h in sampler.heap if h[0] <= bronze_end]),
        "silver": _peaks([x for x in sampler.samples if x["t"] > bronze_end],
                         [h for h in sampler.heap if h[0] > bronze_end]),
    }
    return {
        "command": " ".join(cmd),
        "returncode": rc,
        "wall_seconds": round(wall, 1),
        "step_done_at_seconds": marks,
        "summaries": lines,
        "load_before": load_before,
        "load_after": load_after,
        "peaks": _peaks(sampler.samples, sampler.heap),
        "peaks_by_step": phases,
        "samples": len(sampler.samples),
        "timeline": _thin(sampler.samples, 200),
        "heap_timeline": _thin(sampler.heap, 200),
        "log": str(log),
    }


def _peaks(samples: list[dict], heap: list[tuple]) -> dict:
    peaks = {}
    for key in ("python_driver_rss", "jvm_rss", "python_workers_rss", "python_workers_pss",
                "python_workers_max1_rss", "other_rss", "python_workers_n", "load1"):
        peaks[key] = max((x[key] for x in samples), default=0)
    peaks["total_rss"] = max((x["python_driver_rss"] + x["jvm_rss"] + x["python_workers_rss"] + x["other_rss"]
                              for x in samples), default=0)
    if heap:
        peaks["jvm_heap_used"] = max(h[1] for h in heap)
        peaks["jvm_heap_committed"] = max(h[2] for h in heap)
    return peaks


def _thin(items: list, n: int) -> list:
    step = max(1, len(items) // n)
    return items[::step]


def verify(warehouse: Path, meta: dict) -> dict:
    """Bronze and silver against the decoder's and the server's figures (delta-rs, no Spark)."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    from pipelines.bronze.schema import BRONZE_TABLE
    from pipelines.paths import silver_table_path

    checks = {}
    decoder_rows = sum(f["decoder_rows"] for f in meta["files"])
    try:
        ds = DeltaTable(str(warehouse / BRONZE_TABLE)).to_pyarrow_dataset()
        ops: dict[str, int] = {}
        for batch in ds.to_batches(columns=["op"]):
            for v in pc.value_counts(batch.column(0)).to_pylist():
                ops[v["values"]] = ops.get(v["values"], 0) + v["counts"]
        checks["bronze_rows"] = {"got": sum(ops.values()), "want": decoder_rows}
        checks["bronze_rows_by_op"] = {"got": ops, "want": meta["row_changes_by_op"]}
    except Exception as e:  # noqa: BLE001 - reported as a failed check
        checks["bronze_rows"] = {"got": f"{type(e).__name__}: {e}", "want": decoder_rows}
    server = meta["server"]
    for table, want_count in (("orders", server["orders_count"]), ("events", server["events_count"])):
        path = silver_table_path(warehouse, "bench", table)
        try:
            sds = DeltaTable(str(path)).to_pyarrow_dataset()
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            checks[f"silver_{table}_count"] = {"got": f"{type(e).__name__}: {e}", "want": want_count}
            continue
        checks[f"silver_{table}_count"] = {"got": sds.count_rows(), "want": want_count}
        if table == "orders":
            total = 0
            for batch in sds.to_batches(columns=["id"]):
                total += pc.sum(batch.column(0)).as_py() or 0
            checks["silver_orders_sum_id"] = {"got": total, "want": server["orders_sum_id"]}
    for c in checks.values():
        c["ok"] = c["got"] == c["want"]
    return checks


def _mb(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def markdown(r: dict) -> str:
    p = r["run"]["peaks"]
    rows = [
        ("input", f"{r['input_files']} file(s), {r['input_bytes'] / 1e9:.2f} GB ({r['input_bytes']:,} bytes)"),
        ("row changes (decoder)", f"{r['row_changes']:,}"),
        ("job exit code", str(r["run"]["returncode"])),
        ("wall time (bronze + silver, incl. JVM start)", f"{r['run']['wall_seconds']:.1f} s"),
        ("bronze / silver done at", ", ".join(f"{k}: {v} s" for k, v in r["run"]["step_done_at_seconds"].items())
         or "-"),
        ("rows/s (row changes / wall)", f"{r['rows_per_s']:,.0f}"),
        ("MB/s (binlog / wall)", f"{r['mb_per_s']:.1f}"),
        ("peak RSS driver JVM (driver + local executors)", _mb(p["jvm_rss"])),
        ("peak JVM heap used / committed (jstat)",
         f"{_mb(p['jvm_heap_used'])} / {_mb(p['jvm_heap_committed'])}" if "jvm_heap_used" in p else "n/a"),
        ("peak RSS Python driver", _mb(p["python_driver_rss"])),
        ("peak RSS Python workers (sum / PSS sum / largest one)",
         f"{_mb(p['python_workers_rss'])} / {_mb(p['python_workers_pss'])} / {_mb(p['python_workers_max1_rss'])}"),
        ("peak Python worker processes", str(p["python_workers_n"])),
        ("peak RSS of the whole job", _mb(p["total_rss"])),
        ("load average before / after / peak 1-min", f"{' '.join(r['run']['load_before'])} / "
         f"{' '.join(r['run']['load_after'])} / {p['load1']}"),
    ]
    for step, q in r["run"]["peaks_by_step"].items():
        heap = f", heap used {_mb(q['jvm_heap_used'])}" if "jvm_heap_used" in q else ""
        rows.append((f"peaks during {step}", f"JVM {_mb(q['jvm_rss'])}{heap}, Python driver "
                     f"{_mb(q['python_driver_rss'])}, workers {_mb(q['python_workers_rss'])} "
                     f"(PSS {_mb(q['python_workers_pss'])})"))
    for name, c in r["checks"].items():
        rows.append((f"check {name}", f"{'ok' if c['ok'] else 'FAILED'}: got {c['got']}, want {c['want']}"))
    out = [f"### load test `{r['name']}`", "", "| | |", "|---|---|"]
    out += [f"| {k} | {v} |" for k, v in rows]
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mode", choices=("file", "folder"), default="file",
                   help="file: one binlog file of --gb; folder: files of 1 GiB up to --gb in total")
    p.add_argument("--gb", type=float, default=None, help="binlog size in GB (1e9 bytes); default 1 (file), 5 (folder)")
    p.add_argument("--cache", type=Path, default=REPO / ".bench" / "load")
    p.add_argument("--config", type=Path, default=REPO / "conf" / "pipeline.yaml")
    p.add_argument("--interval", type=float, default=0.2, help="sampling interval in seconds")
    p.add_argument("--out", type=Path, default=REPO / ".bench" / "load.json")
    p.add_argument("--generate-only", action="store_true")
    p.add_argument("--keep-warehouse", action="store_true", help="keep the warehouse after the run")
    a = p.parse_args(argv)
    gb = a.gb if a.gb is not None else (1.0 if a.mode == "file" else 5.0)
    target = int(gb * 1e9)
    if a.mode == "file" and target >= MAX_BINLOG_SIZE:
        p.error(f"a single file holds at most {MAX_BINLOG_SIZE} bytes (max_binlog_size)")
    name = f"{a.mode}-{gb:g}GB"
    work = a.cache / name
    meta = cached_or_generate(work, target, a.mode == "file")
    if a.generate_only:
        print(json.dumps(meta, indent=2))
        return 0
    warehouse = work / "warehouse"
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                         text=True).stdout.strip()
    run = run_job(work / "binlogs", warehouse, a.config, work / "job.log", a.interval)
    checks = verify(warehouse, meta)  # also after a failed job: what did land?
    if not a.keep_warehouse:
        shutil.rmtree(warehouse, ignore_errors=True)
    input_bytes = sum(f["bytes"] for f in meta["files"])
    row_changes = sum(f["decoder_rows"] for f in meta["files"])
    result = {
        "name": name,
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git": git,  # the commit the job started on
        "config": str(a.config),
        "cpus": os.cpu_count(),
        "input_files": len(meta["files"]),
        "input_bytes": input_bytes,
        "row_changes": row_changes,
        "rows_per_s": row_changes / run["wall_seconds"],
        "mb_per_s": input_bytes / 1e6 / run["wall_seconds"],
        "meta": meta,
        "run": run,
        "checks": checks,
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    all_runs = json.loads(a.out.read_text()) if a.out.exists() else {}
    all_runs[name] = result
    a.out.write_text(json.dumps(all_runs, indent=2))
    print(markdown(result))
    if run["returncode"] != 0:
        print(f"\nthe job failed (exit {run['returncode']}); see {run['log']}", file=sys.stderr)
        return 1
    return 0 if checks and all(c["ok"] for c in checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
