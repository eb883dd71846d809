"""pipelines.arrow_pool: a run's Arrow memory comes from jemalloc unless the user chose a pool."""
from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines.arrow_pool import hold_mmap_threshold, use_fast_pool


def test_a_process_that_imports_the_package_first_reads_parquet_into_jemalloc(tmp_path):
    """Importing ``pipelines`` before pyarrow makes jemalloc Arrow's pool for everything, the
    Parquet reader's buffers too (Arrow reads its variable once); a pool the user chose stands."""
    code = ("import pipelines, pyarrow as pa, pyarrow.parquet as pq; "
            f"pq.write_table(pa.table({{'a': list(range(100000))}}), {str(tmp_path / 'a.parquet')!r}); "
            f"t = pq.ParquetFile({str(tmp_path / 'a.parquet')!r}).read_row_group(0); "
            "print(pa.default_memory_pool().backend_name, pa.mimalloc_memory_pool().max_memory())")
    env = {k: v for k, v in __import__("os").environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["jemalloc", "0"]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**env, "ARROW_DEFAULT_MEMORY_POOL": "system"})
    assert out.stdout.split() == ["system", "0"]


def test_pyarrow_s_default_follows_the_variable_in_a_process_that_imported_it_first(monkeypatch):
    before = pa.default_memory_pool()
    try:
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
        pa.set_memory_pool(pa.mimalloc_memory_pool())
        assert use_fast_pool() == "jemalloc"  # (the pinned pyarrow's wheels have it)
        assert __import__("os").environ["ARROW_DEFAULT_MEMORY_POOL"] == "jemalloc"  # (for its children)
        assert pa.array(["a", "b"]).take([1]).to_pylist() == ["b"]  # (allocates from it)

        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")  # the user's choice stands
        assert use_fast_pool() == "mimalloc"
    finally:
        pa.set_memory_pool(before)


def test_python_workers_get_the_same_pool_or_the_users():
    """session_conf passes the pool to executors' Python workers (spark.executorEnv): jemalloc,
    or the one ARROW_DEFAULT_MEMORY_POOL names; a setting of the configuration wins."""
    from pipelines.spark_settings import session_conf

    key = "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL"
    assert session_conf(env={}, local=True)[key] == "jemalloc"
    assert session_conf(env={}, local=False)[key] == "jemalloc"
    assert session_conf(env={"ARROW_DEFAULT_MEMORY_POOL": "system"}, local=True)[key] == "system"
    assert session_conf(env={}, local=True, extra_conf={key: "mimalloc"})[key] == "mimalloc"


def test_the_sessions_python_workers_allocate_from_jemalloc(spark):  # noqa: F811
    """A real session's Python workers (the tasks that build bronze's Arrow) use jemalloc."""
    pools = spark.sparkContext.parallelize(range(2), 2).map(
        lambda _: __import__("pyarrow").default_memory_pool().backend_name).collect()
    assert pools == ["jemalloc", "jemalloc"]


_AFTER_A_BIG_FREE = """
import numpy as np
from pipelines.arrow_pool import use_fast_pool
def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096
if {hold}: use_fast_pool()
block = np.ones(16 << 20, np.uint8); del block  # (glibc raises its threshold to 16 MiB here, unless held)
before = rss()
block = np.ones(8 << 20, np.uint8); del block
print((rss() - before) >> 20)
"""


def _kept_mib(hold: bool) -> int:
    """MiB still resident after an 8 MiB NumPy block is freed, in a new process."""
    env = {k: v for k, v in __import__("os").environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    return int(subprocess.run([sys.executable, "-c", _AFTER_A_BIG_FREE.format(hold=hold)], capture_output=True,
                              text=True, check=True, env=env).stdout)


def test_a_freed_big_numpy_block_goes_back_to_the_system_once_the_pool_is_chosen():
    """glibc serves a block after a bigger one was freed from its heap, which keeps it when freed
    (8 MiB stay resident); with the threshold held (use_fast_pool) the block is unmapped when freed."""
    assert _kept_mib(hold=False) >= 4
    assert _kept_mib(hold=True) == 0


def test_a_threshold_the_user_set_stands(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", str(1 << 20))
    assert hold_mmap_threshold() is False
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    assert hold_mmap_threshold() is True  # (this machine's C library is glibc)
