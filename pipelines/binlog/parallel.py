"""Decode one file in parallel: a quick pass indexes transaction boundaries,
then workers decode byte ranges that start on them. Each worker opens the file
itself, reads the format description at offset 4, and meets every table map
it needs inside its own range."""
from __future__ import annotations

import multiprocessing as mp
import os

from .stream import EventStream
from .txindex import FileIndex, scan


def decode_range(path: str, start: int, end: int) -> tuple[int, int]:
    """Fully decode ``[start, end)`` of ``path``; returns (events, rows)."""
    events = rows = 0
    with EventStream(path) as s:
        for ev in s.events(start, end):
            events += 1
            r = getattr(ev, "rows", None)
            if r:
                rows += len(r)
    return events, rows


def _work(args):
    return decode_range(*args)


def plan(path: str, workers: int, index: FileIndex | None = None) -> list[tuple[int, int]]:
    """Byte ranges, one or more per worker, covering the whole file."""
    index = index or scan(path, verify_checksums=False)
    ranges = index.split(workers * 2, min_bytes=1 << 16) if workers > 1 else [(4, index.complete_until)]
    # events after the last complete transaction (an unfinished tail) are decoded too
    if ranges and index.error is None:
        s, _ = ranges[-1]
        ranges[-1] = (s, os.path.getsize(path))
    return ranges


def parallel_decode(path: str, workers: int) -> tuple[int, int]:
    """Decode every event of ``path`` with ``workers`` processes; (events, rows)."""
    ranges = plan(path, workers)
    if workers <= 1 or len(ranges) == 1:
        return decode_range(path, *ranges[0])
    ctx = mp.get_context("fork")
    with ctx.Pool(workers) as pool:
        parts = pool.map(_work, [(path, s, e) for s, e in ranges], chunksize=1)
    return sum(p[0] for p in parts), sum(p[1] for p in parts)
