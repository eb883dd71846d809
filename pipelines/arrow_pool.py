"""Arrow's memory pool (jemalloc, on the driver and in the Python workers), and Arrow's kernels
run over columns side by side on the driver (:func:`side_by_side`).

pyarrow's wheels allocate from mimalloc by default. On the 4x benchmark (1.55M changes, a warm
process) silver took 4.6-5.5 s with mimalloc and 4.4-4.9 s with jemalloc, at a lower peak RSS
(BENCHMARKS.md): mimalloc gives freed pages back to the system and faults them in again, and a
segment's first read from bronze took twice as long as later ones. So:

* ``pipelines/__init__.py`` sets Arrow's own variable ``ARROW_DEFAULT_MEMORY_POOL`` to jemalloc
  before pyarrow is imported (Arrow reads it once: its Parquet readers and file systems allocate
  from that pool), on Linux, where pyarrow's wheels have jemalloc;
* :func:`use_fast_pool` (from :func:`pipelines.spark_session.build_session` and the silver step)
  makes pyarrow's default pool the one the variable names, for a process that imported pyarrow
  first, and leaves the variable set for the processes it starts (a local JVM's Python workers);
* executors' Python workers get the variable from ``spark.executorEnv`` (:mod:`pipelines.spark_settings`).

A pool the user chose with the variable stands. Where this pyarrow has no jemalloc the system
allocator is used.

>>> use_fast_pool() in ("jemalloc", "system", "mimalloc")
True
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pyarrow as pa

ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"  # Arrow's variable: the default pool's backend
_POOLS = {"jemalloc": pa.jemalloc_memory_pool, "mimalloc": pa.mimalloc_memory_pool, "system": pa.system_memory_pool}


def use_fast_pool() -> str:
    """Make the pool ``ARROW_DEFAULT_MEMORY_POOL`` names (jemalloc when it names none, and the
    variable set to it for the processes this one starts) pyarrow's default pool in this process;
    the system allocator where this pyarrow lacks jemalloc. Returns the default pool's backend.
    Arrays allocated before keep their own pool: switching is safe at any time."""
    wanted = os.environ.setdefault(ARROW_POOL_ENV, "jemalloc")
    if pa.default_memory_pool().backend_name != wanted and wanted in _POOLS:
        try:
            pa.set_memory_pool(_POOLS[wanted]())
        except NotImplementedError:  # (a pyarrow built without it)
            pa.set_memory_pool(pa.system_memory_pool())
    return pa.default_memory_pool().backend_name


THREADS_FROM = 1 << 16  # rows from which the driver works on a table's columns side by side

T_ = TypeVar("T_")
R_ = TypeVar("R_")


def side_by_side(work: Callable[[T_], R_], items: Sequence[T_], rows: int) -> list[R_]:
    """``[work(item) for item in items]`` (each item a column of ``rows`` rows, say): in threads, as
    many as the cores, from :data:`THREADS_FROM` rows, since Arrow's and NumPy's kernels let go of
    the GIL; in turn below that or for one item. What ``work`` raises is raised, the first item's
    first.

    >>> side_by_side(len, ["a", "bc"], rows=2)
    [1, 2]
    """
    if rows < THREADS_FROM or len(items) < 2:
        return [work(item) for item in items]
    with ThreadPoolExecutor(min(len(items), os.cpu_count() or 1), thread_name_prefix="arrow-columns") as pool:
        return list(pool.map(work, items))
