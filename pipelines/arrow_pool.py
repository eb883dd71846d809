"""Arrow's memory pool (jemalloc, on the driver and in the Python workers), the C allocator's
threshold for big blocks on the driver (:func:`hold_mmap_threshold`), and Arrow's kernels run over
columns side by side on the driver (:func:`side_by_side`).

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

NumPy allocates from the C library's ``malloc``. glibc's serves a block of at least
``M_MMAP_THRESHOLD`` bytes (128 KiB) from its own mapping, unmapped when freed, but raises the
threshold to the size of each such block freed, up to 32 MiB. Silver's typing frees NumPy
temporaries of many MiB over a segment's text, in threads (:func:`side_by_side`), so later ones
came from the threads' heaps, which keep freed memory: the 4x one-process run peaked at 2.48-2.54
GB of RSS, against 2.13-2.30 GB before the threads. With the threshold held at 128 KiB it peaks at
2.31-2.34 GB, in the same time (BENCHMARKS.md). :func:`use_fast_pool` holds it
(:func:`hold_mmap_threshold`), unless ``MALLOC_MMAP_THRESHOLD_`` sets it.

>>> use_fast_pool() in ("jemalloc", "system", "mimalloc")
True
"""
from __future__ import annotations

import ctypes
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
    Arrays allocated before keep their own pool: switching is safe at any time. Holds the C
    allocator's mmap threshold too (:func:`hold_mmap_threshold`)."""
    hold_mmap_threshold()
    wanted = os.environ.setdefault(ARROW_POOL_ENV, "jemalloc")
    if pa.default_memory_pool().backend_name != wanted and wanted in _POOLS:
        try:
            pa.set_memory_pool(_POOLS[wanted]())
        except NotImplementedError:  # (a pyarrow built without it)
            pa.set_memory_pool(pa.system_memory_pool())
    return pa.default_memory_pool().backend_name


MMAP_THRESHOLD = 128 * 2**10  # bytes from which glibc maps a block of its own: its initial value
_M_MMAP_THRESHOLD = -3  # mallopt's parameter (glibc's malloc.h)


def hold_mmap_threshold() -> bool:
    """Hold glibc's ``M_MMAP_THRESHOLD`` at :data:`MMAP_THRESHOLD` in this process (a value set
    by ``mallopt`` is not raised again), so a freed block of that size or more goes back to the
    system; unless ``MALLOC_MMAP_THRESHOLD_`` set it when the process started. True when held;
    False where the C library is not glibc or the variable stands.

    >>> hold_mmap_threshold() in (True, False)
    True
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # (not glibc: musl, macOS)
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1


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
