"""Spark's Python workers read each zip archive on their path once, not once per task.

Before every task, PySpark's worker calls :func:`importlib.invalidate_caches`
(``pyspark.worker_util.setup_spark_files``), and Python 3.11's zip importer re-reads its archive's
whole directory each time, once per package it has imported from it. With ``pyspark.zip``'s 1,220
entries that is about 80-100 ms per task, more than most of the pipeline's tasks do themselves: 400
trivial tasks took 48 s, and 10.7 s once the importers kept what they had read (local[2], 2 vCPU).

The archives on a worker's path do not change while it runs (``pyspark.zip``, py4j's, the
``--py-files`` zip: Spark refuses a second file under one name), so in a Spark worker the zip
importers keep the directory they read. An archive added later still gets an importer that reads
it when it is first used. :mod:`pipelines` applies this when it is imported in a worker.
"""
from __future__ import annotations

import sys
import zipimport


def in_spark_worker() -> bool:
    """Whether this process is a PySpark Python worker (its task loop imports ``worker_util``)."""
    return "pyspark.worker_util" in sys.modules


def _keep_directory(self) -> None:
    """A zip importer told its archive may have changed: it keeps what it read (see the module)."""


def keep_zip_directories() -> bool:
    """Make this process's zip importers keep their archives' directories; returns whether it
    changed anything (False when they already do)."""
    if zipimport.zipimporter.invalidate_caches is _keep_directory:
        return False
    zipimport.zipimporter.invalidate_caches = _keep_directory
    return True
