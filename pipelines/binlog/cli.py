"""``python -m pipelines.binlog dump [--format text|jsonl] FILE...`` and
``python -m pipelines.binlog bench [--workers N] FILE`` (interfaces other tools use)."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .dump import dump
from .errors import BinlogError
from .parallel import parallel_decode
from .stream import EventStream


def _cmd_dump(args) -> int:
    rc = 0
    out = sys.stdout
    for path in args.files:
        try:
            with EventStream(path, verify_checksums=not args.no_verify) as s:
                dump(s.events(), args.format, out)
                if s.stats.get("unknown"):
                    print(f"{path}: {s.stats['unknown']} event(s) of unknown type", file=sys.stderr)
        except BinlogError as e:
            out.flush()
            print(f"error: {e}", file=sys.stderr)
            rc = 1
        except OSError as e:
            print(f"error: {path}: {e.strerror or e}", file=sys.stderr)
            rc = 1
    return rc


def _cmd_bench(args) -> int:
    path = args.file
    size = os.path.getsize(path)
    results = []
    for workers in sorted(set([1] + ([args.workers] if args.workers > 1 else []))):
        best = None
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            if workers == 1:
                events = rows = 0
                with EventStream(path) as s:
                    for ev in s.events():
                        events += 1
                        r = getattr(ev, "rows", None)
                        if r:
                            rows += len(r)
            else:
                events, rows = parallel_decode(path, workers)
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        res = {
            "file": path,
            "workers": workers,
            "bytes": size,
            "seconds": round(best, 3),
            "events": events,
            "rows": rows,
            "mb_per_s": round(size / best / 1e6, 2),
            "events_per_s": round(events / best),
            "rows_per_s": round(rows / best),
        }
        results.append(res)
        print(
            f"{path}: {workers} process(es): {size / 1e6:.1f} MB in {best:.2f} s = "
            f"{res['mb_per_s']} MB/s, {res['events_per_s']} events/s, {res['rows_per_s']} rows/s "
            f"({events} events, {rows} rows)"
        )
    if args.json:
        print(json.dumps(results))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pipelines.binlog", description="MySQL/MariaDB binlog decoder")
    sub = p.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="print decoded events")
    d.add_argument("--format", choices=("text", "jsonl"), default="text")
    d.add_argument("--no-verify", action="store_true", help="skip CRC32 verification")
    d.add_argument("files", nargs="+", metavar="FILE")
    b = sub.add_parser("bench", help="decode every row value of a file and report throughput")
    b.add_argument("file", metavar="FILE")
    b.add_argument("--workers", type=int, default=1, help="also measure N processes over one file")
    b.add_argument("--repeat", type=int, default=1)
    b.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = p.parse_args(argv)
    try:
        return _cmd_dump(args) if args.cmd == "dump" else _cmd_bench(args)
    except BrokenPipeError:
        return 0
    except BinlogError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
