"""``make bench``: the decoder and the whole pipeline on real binlogs, on this machine.

    .venv/bin/python -m scripts.bench [--quick] [--out .bench/results.json]

1. Decoder: ``python -m pipelines.binlog bench`` (1 and 2 processes, with the C
   accelerator and with ``BINLOG_DECODER=python``) side by side with
   ``mariadb-binlog -vvv --base64-output=decode-rows`` on the same file.
2. Pipeline, by input size: bronze + silver over 1x, 2x and 4x inputs (4x is at
   least 1 million row changes), reporting rows/s for bronze, silver and end to
   end, and the peak RSS of the driver process tree (Python driver + JVM +
   Python workers).
3. Pipeline, by silver table size: a fixed batch of changes applied to silver
   tables of growing size.
4. Cold: the 4x input once more in a new process, as one ``spark-submit`` job runs
   it (its JVM compiles Spark's generated code and warms its JIT from nothing; steps
   2 and 3 share one JVM, so their 2x and 4x runs reuse the 1x run's compiled code).

Binlogs come from a private MariaDB server (``scripts/make_bench_binlog.py``)
and are cached under ``.bench/``. Results print as a table and are saved as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from mariadb_server import MariaDBServer  # noqa: E402

from scripts.make_bench_binlog import DDL, _insert, generate, generate_single, generate_tables  # noqa: E402

BENCH = ROOT / ".bench"


# -- memory ----------------------------------------------------------------------------

def _tree_rss(pid: int) -> int:
    """RSS in bytes of ``pid`` and all its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += children.get(p, [])
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


class PeakRSS:
    """Samples the RSS of this process tree every 0.2 s while active."""

    def __enter__(self):
        self.peak, self._stop = 0, threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, _tree_rss(os.getpid()))
            self._stop.wait(0.2)

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


# -- inputs ----------------------------------------------------------------------------

def decoder_file() -> Path:
    path = BENCH / "binlog.000001"
    if not path.exists():
        generate(1_000_000, BENCH)
    return path


def _cached(name: str, make) -> Path:
    """``BENCH/name``, made by ``make(folder)`` unless a finished one is there."""
    d = BENCH / name
    if not (d / "done").exists():
        shutil.rmtree(d, ignore_errors=True)
        make(d)
        (d / "done").write_text("ok")
    return d


def pipeline_inputs(rows: int) -> Path:
    """A folder of binlogs with ``rows`` inserted orders (+ updates/deletes, ~1.55 changes per row)."""
    return _cached(f"pipeline-{rows}", lambda d: generate(rows, d))


def batch_inputs(base_rows: int, batch: int) -> tuple[Path, Path]:
    """(base folder: ``base_rows`` inserts, batch file: ``batch`` updates + ``batch`` inserts)."""
    d = BENCH / f"silver-{base_rows}-{batch}"
    if not (d / "done").exists():
        shutil.rmtree(d, ignore_errors=True)
        (d / "base").mkdir(parents=True)
        (d / "batch").mkdir()
        tmp = Path(tempfile.mkdtemp(prefix="bench-mdb-"))
        try:
            with MariaDBServer(tmp, extra_args=("--max-binlog-size=1073741824", "--plugin-load-add=ha_sequence")) as srv:
                srv.sql(DDL)
                step = 2000
                for lo in range(1, base_rows + 1, step * 50):
                    srv.sql("".join(_insert(a, min(a + step - 1, base_rows)) for a in range(lo, min(lo + step * 50, base_rows + 1), step)), db="bench")
                first_batch_file = srv.flush_logs()  # the batch goes to the new file
                stride = max(1, base_rows // batch)
                srv.sql(f"UPDATE orders SET amount = amount + 1, status='shipped' WHERE id % {stride} = 0 LIMIT {batch};", db="bench")
                srv.sql("".join(_insert(a, min(a + step - 1, base_rows + batch)) for a in range(base_rows + 1, base_rows + batch + 1, step)), db="bench")
                srv.flush_logs()
                files = srv.binlog_files()
                for f in files:
                    target = "base" if f.name < first_batch_file.name else "batch"
                    if f.stat().st_size > 1024:
                        shutil.copyfile(f, d / target / f.name)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        (d / "done").write_text("ok")
    return d / "base", d / "batch"


def tables_inputs(n_tables: int, changes: int) -> Path:
    """A folder with one binlog of ``n_tables`` small tables of ``changes`` row changes each."""
    return _cached(f"tables-{n_tables}x{changes}", lambda d: generate_tables(n_tables, changes, d))


SINGLE = 300_000  # inserts of the one-table input at 1x (525,000 row changes)
SINGLE_SCALES = (1, 4, 10)  # its scales against the peer (10x: 3,000,000 inserts, 5,250,000 changes)


def single_inputs(inserts: int) -> Path:
    """One table: ``inserts`` inserts, then updates of half and deletes of a quarter of the rows."""
    return _cached(f"single-{inserts}", lambda d: generate_single(inserts, d))


# -- the peer: replay into a scratch MariaDB, export every table with delta-rs -------------

def peer_replay(binlog_dir: Path) -> dict:
    """What a user could do instead: start a scratch MariaDB, replay the binlogs with
    ``mariadb-binlog FILES | mariadb``, export every table with delta-rs ``write_deltalake``.
    Timed from before the server starts to the last table written."""
    files = sorted(str(f) for f in binlog_dir.iterdir() if f.name.startswith("binlog.0"))
    base, out = Path(tempfile.mkdtemp(prefix="bench-peer-")), Path(tempfile.mkdtemp(prefix="bench-peer-wh-"))
    try:
        t0 = time.perf_counter()
        with MariaDBServer(base, extra_args=("--max-binlog-size=1073741824", "--skip-log-bin")) as srv:
            binlog = subprocess.Popen(["mariadb-binlog", *files], stdout=subprocess.PIPE)
            subprocess.run(srv.client_args(), stdin=binlog.stdout, check=True, stdout=subprocess.DEVNULL)
            if binlog.wait():
                raise RuntimeError("mariadb-binlog failed")
            t1 = time.perf_counter()
            tables = export_tables(srv, out)
            t2 = time.perf_counter()
        return {"peer_s": round(t2 - t0, 2), "peer_replay_s": round(t1 - t0, 2), "peer_export_s": round(t2 - t1, 2),
                "peer_tables": len(tables)}
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)


def export_tables(srv: MariaDBServer, out: Path) -> list[tuple[str, str]]:
    """Every user table of ``srv`` written to ``out/<db>/<table>`` by delta-rs ``write_deltalake``,
    from the client's tab-separated output (the peer's export); returns the tables."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    from deltalake import write_deltalake

    tables = [tuple(r) for r in srv.query_rows(
        "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema NOT IN "
        "('mysql', 'information_schema', 'performance_schema', 'sys', 'test')")]
    for db, table in tables:
        tsv = subprocess.run([*srv.client_args(), "--column-names", "-e", f"SELECT * FROM `{db}`.`{table}`"],
                             check=True, capture_output=True).stdout
        if not tsv.strip():  # an empty table: the client prints nothing, not even the header
            continue
        data = pacsv.read_csv(pa.BufferReader(tsv), parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
                              convert_options=pacsv.ConvertOptions(null_values=["NULL"]))
        write_deltalake(str(out / db / table), data, mode="overwrite")
    return tables


def ours_cold(binlog_dir: Path, backend: str = "auto", warehouse: str | None = None) -> dict:
    """``jobs/run_pipeline.py`` in a new process, as spark-submit runs it (``auto``: delta-rs on this
    local master), timed whole; in a new warehouse unless ``warehouse`` is given."""
    with tempfile.TemporaryDirectory(prefix="bench-wh-") as wh:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "jobs/run_pipeline.py", "--config", "conf/pipeline.yaml",
                               "--binlog-dir", str(binlog_dir), "--warehouse", warehouse or wh,
                               "--delta-backend", backend],
                              cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - t0
    if done.returncode:
        raise RuntimeError(f"the pipeline failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith(("bronze run", "silver run"))]
    return {"ours_s": round(wall, 2), "summaries": lines}


def tables_second_run(n_tables: int, changes: int, updates: int, backend: str) -> dict:
    """A run after the first on ``n_tables`` tables: the first binlog (the tables created, then
    changed) in one cold run, then the second (``updates`` updates of rows silver holds, per
    table) in another, timed: the cost of an hourly run on existing tables."""
    d = _cached(f"tables-{n_tables}x{changes}-then-{updates}",
                lambda d: generate_tables(n_tables, changes, d, then_updates=updates))
    files = sorted(f for f in d.iterdir() if f.name.startswith("binlog."))
    with tempfile.TemporaryDirectory(prefix="bench-in-") as inp, tempfile.TemporaryDirectory(prefix="bench-wh-") as wh:
        shutil.copyfile(files[0], Path(inp) / files[0].name)
        ours_cold(Path(inp), backend, wh)
        for f in files[1:]:
            shutil.copyfile(f, Path(inp) / f.name)
        r = ours_cold(Path(inp), backend, wh)
    return {"input": d.name, "backend": backend, "row_changes": n_tables * updates, **r}


def against_peer(binlog_dir: Path, changes: int) -> dict:
    r = {"input": binlog_dir.name, "row_changes": changes, **ours_cold(binlog_dir), **peer_replay(binlog_dir)}
    r["peer_over_ours"] = round(r["peer_s"] / r["ours_s"], 2)
    for line in r["summaries"]:  # (each run's summary line gives its time)
        step = line.split(" ", 1)[0]
        r[f"{step}_s"] = float(_SECONDS[step].search(line).group(1))
    return r


_SECONDS = {"bronze": re.compile(r" MB in ([0-9.]+) s \("), "silver": re.compile(r"; ([0-9.]+) s$")}


def scaling(runs: list[dict]) -> dict:
    """The one-table runs by size: silver's and the whole run's microseconds per change, and the
    largest's over the one below it (a cliff: a path that stops scaling at some size)."""
    by = {r["row_changes"]: r for r in runs}
    out = {f"{n}": {"silver_us_per_change": round(by[n]["silver_s"] * 1e6 / n, 2),
                    "ours_us_per_change": round(by[n]["ours_s"] * 1e6 / n, 2),
                    "peer_over_ours": by[n]["peer_over_ours"]} for n in sorted(by)}
    if len(by) > 1:
        top, below = sorted(by)[-1], sorted(by)[-2]
        out["silver_per_change_top_over_below"] = round(
            out[f"{top}"]["silver_us_per_change"] / out[f"{below}"]["silver_us_per_change"], 2)
    return out


# -- runs ------------------------------------------------------------------------------

def run_decoder(path: Path) -> dict:
    out = {}
    t0 = time.perf_counter()
    subprocess.run(["mariadb-binlog", "-vvv", "--base64-output=decode-rows", str(path)], stdout=subprocess.DEVNULL, check=True)
    out["mariadb_binlog_s"] = round(time.perf_counter() - t0, 3)
    out["mariadb_binlog_mb_s"] = round(path.stat().st_size / out["mariadb_binlog_s"] / 1e6, 1)
    for mode in ("auto", "python"):
        env = dict(os.environ, BINLOG_DECODER=mode)
        r = subprocess.run([sys.executable, "-m", "pipelines.binlog", "bench", "--workers", "2", "--json", str(path)],
                           capture_output=True, text=True, env=env, check=True, cwd=ROOT)
        out[mode] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def _config(binlog_dir: Path, warehouse: Path):
    from pipelines.config import load_config

    return load_config(ROOT / "conf" / "pipeline.yaml",
                       {"input": str(binlog_dir), "warehouse": str(warehouse), "progress": False})


def run_pipeline(spark, binlog_dir: Path, warehouse: Path) -> dict:
    from pipelines import bronze
    from pipelines.silver import step as silver_step

    cfg = _config(binlog_dir, warehouse)
    with PeakRSS() as mem:
        t0 = time.perf_counter()
        b = bronze.run(spark, cfg)
        t1 = time.perf_counter()
        s = silver_step.run(spark, cfg)
        t2 = time.perf_counter()
    rows = sum(b.rows.values())
    return {
        "row_changes": rows,
        "bytes": b.bytes,
        "bronze_s": round(t1 - t0, 2),
        "silver_s": round(t2 - t1, 2),
        "bronze_rows_s": round(rows / (t1 - t0)),
        "silver_rows_s": round(rows / (t2 - t1)),
        "end_to_end_rows_s": round(rows / (t2 - t0)),
        "peak_rss_mb": round(mem.peak / 2**20),
        "silver_summary": s.summary(),
    }


def one_run(binlog_dir: Path) -> int:
    from pipelines.spark_session import build_session

    spark = build_session("binlog-delta-bench-cold", "local[2]")
    with tempfile.TemporaryDirectory(prefix="bench-wh-") as wh:
        r = run_pipeline(spark, binlog_dir, Path(wh))
    spark.stop()
    print(json.dumps(r))
    return 0


def cold_run(binlog_dir: Path) -> dict:
    """The pipeline once in a new process (``--one-run``): its figures (peak RSS: that process's
    tree), plus the process's whole wall time (Python and JVM start included) as ``process_s``."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "scripts.bench", "--one-run", str(binlog_dir)],
                          capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise RuntimeError(f"the cold run failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    r = json.loads(done.stdout.strip().splitlines()[-1])
    r["process_s"] = round(time.perf_counter() - t0, 2)
    return r


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small inputs (a smoke run, not for BENCHMARKS.md)")
    p.add_argument("--skip-decoder", action="store_true")
    p.add_argument("--out", type=Path, default=BENCH / "results.json")
    p.add_argument("--peer-only", action="store_true",
                   help="only the many-tables and one-table runs against the replay peer (cold, new processes)")
    p.add_argument("--one-run", type=Path, metavar="BINLOG_DIR",
                   help="run the pipeline once on BINLOG_DIR in this new process and print its figures (JSON)")
    a = p.parse_args(argv)
    if a.one_run:
        return one_run(a.one_run)
    BENCH.mkdir(exist_ok=True)
    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "python": platform.python_version(), "load_before": os.getloadavg()}}
    # Cost follows changes, not tables; and against the replay peer, both cold, same files.
    results["against_peer"] = []
    for name, d, changes in (("100 tables x 30", tables_inputs(100, 30), 3000),
                             ("1,000 tables x 3", tables_inputs(1000, 3), 3000),
                             ("1 table x 3,000", tables_inputs(1, 3000), 3000),
                             *((f"1 table, {x}x: {SINGLE * x * 7 // 4:,} changes", single_inputs(SINGLE * x),
                                SINGLE * x * 7 // 4) for x in SINGLE_SCALES)):
        r = {"name": name, **against_peer(d, changes)}
        results["against_peer"].append(r)
        print(json.dumps(r))
    results["one_table_scaling"] = scaling([r for r in results["against_peer"] if r["input"].startswith("single-")])
    print(json.dumps(results["one_table_scaling"]))
    # delta-spark (what a cluster runs): the first run, and a run after it on the existing tables
    results["delta_spark"] = []
    for name, run in (("100 tables x 30, delta-spark", lambda: {"input": "tables-100x30", "backend": "spark",
                                                                  "row_changes": 3000,
                                                                  **ours_cold(tables_inputs(100, 30), "spark")}),
                      ("100 tables, second run: 10 updates each, delta-rs", lambda: tables_second_run(100, 30, 10, "rs")),
                      ("100 tables, second run: 10 updates each, delta-spark",
                       lambda: tables_second_run(100, 30, 10, "spark"))):
        r = {"name": name, **run()}
        results["delta_spark"].append(r)
        print(json.dumps(r))
    if a.peer_only:
        a.out.write_text(json.dumps(results, indent=1))
        return 0
    if not a.skip_decoder:
        results["decoder"] = run_decoder(decoder_file())
        print(json.dumps(results["decoder"], indent=1))

    from pipelines.spark_session import build_session

    spark = build_session("binlog-delta-bench", "local[2]")
    base = 25_000 if a.quick else 250_000
    results["by_input_size"] = []
    for scale in (1, 2, 4):
        d = pipeline_inputs(base * scale)
        with tempfile.TemporaryDirectory(prefix="bench-wh-") as wh:
            r = run_pipeline(spark, d, Path(wh))
        r["scale"] = scale
        results["by_input_size"].append(r)
        print(json.dumps(r))
    results["by_silver_size"] = []
    batch = 5_000 if a.quick else 50_000
    for size in ((20_000, 80_000) if a.quick else (100_000, 400_000, 1_600_000)):
        base_dir, batch_dir = batch_inputs(size, batch)
        with tempfile.TemporaryDirectory(prefix="bench-wh-") as wh, tempfile.TemporaryDirectory(prefix="bench-in-") as inp:
            for f in base_dir.iterdir():
                shutil.copyfile(f, Path(inp) / f.name)
            run_pipeline(spark, Path(inp), Path(wh))
            for f in batch_dir.iterdir():
                shutil.copyfile(f, Path(inp) / f.name)
            r = run_pipeline(spark, Path(inp), Path(wh))
        r["silver_rows_before"] = size
        results["by_silver_size"].append(r)
        print(json.dumps(r))
    spark.stop()
    # What one spark-submit job pays: a new JVM whose generated code and JIT start cold.
    results["cold"] = cold_run(pipeline_inputs(base * 4))
    results["cold"]["scale"] = 4
    print(json.dumps(results["cold"]))
    results["machine"]["load_after"] = os.getloadavg()
    a.out.write_text(json.dumps(results, indent=1))
    print(f"results saved to {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
