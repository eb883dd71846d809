"""Spark plumbing of the bronze step: the jobs that read whole files in tasks instead of on the
driver (the survey, digests, prefix facts), the remote files a run reads once and keeps on the
executors (:class:`KeptFiles`), a progress bar over a job group's tasks, and shipping the
``pipelines`` package to the Python workers."""
from __future__ import annotations

import contextlib
import re
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass

from pipelines import storage
from pipelines.bronze.decode import file_name
from pipelines.bronze.files import quarantine_raw, sha256_prefixes, task_file
from pipelines.bronze.plan import Survey, SurveyRequest, survey_file
from pipelines.config import PipelineConfig
from pipelines.spark_session import job_description

_FILES_PER_SLOT = 4  # survey tasks per core when there are many files: one file each when few
WHOLE_FILE_MAX = 256 << 20  # larger files are read by byte ranges even when one task takes all of it
GLOB = re.compile(r"[{}\[\]*?\\,]")  # Hadoop input paths: glob characters, and the comma between paths


def _slices(spark, n: int) -> int:
    return max(1, min(n, spark.sparkContext.defaultParallelism * _FILES_PER_SLOT))


def whole_files(spark, reader: str, uris: list[str]):
    """The RDD of ``(path, content)`` of every file in ``uris``, one file a record: Spark's
    ``binaryFile`` source (the rows ``binlog_changes(content, path)`` takes in SQL), or
    ``SparkContext.binaryFiles`` (the RDD reader: no query to plan, about 1 s less in a new
    process). Hadoop's filesystem reads them, with the session's settings."""
    if reader == "binaryFiles":
        return spark.sparkContext.binaryFiles(",".join(uris), len(uris))
    return spark.read.format("binaryFile").load(uris).select("path", "content").rdd.map(tuple)


@dataclass
class KeptFiles:
    """New remote files that a run reads once: whole, through Spark's whole-file reader
    (:func:`whole_files`), kept on the executors (memory, then their local disk) until the run
    ends. The survey reads them from there, and so do the decode tasks of those read whole: an
    object store or HDFS serves each byte of them once, not once to the survey and again to the
    decode. ``names``: the files kept, by name."""

    rdd: object
    names: frozenset

    def records(self, names) -> object:
        """The ``(path, content)`` records of ``names`` (all of them kept)."""
        wanted = frozenset(names)
        return self.rdd.filter(lambda rec: file_name(rec[0]) in wanted)

    def release(self) -> None:
        self.rdd.unpersist()


def keep_whole(spark, cfg: PipelineConfig, files: list) -> KeptFiles | None:
    """:class:`KeptFiles` of the new files (``SourceFile``) that one task will read whole: remote
    (a local file is memory-mapped by each task that reads it, which costs nothing), at most
    ``target_bytes_per_task`` (so one range), not over :data:`WHOLE_FILE_MAX`, with a path Hadoop
    takes as it is; None when there are none, or ``parallelism.whole_files`` is ``ranges``."""
    from pyspark import StorageLevel

    reader, target = cfg.parallelism.whole_files, cfg.parallelism.target_bytes_per_task
    kept = [f for f in files if storage.is_remote(f.uri) and f.size <= min(target, WHOLE_FILE_MAX)
            and not GLOB.search(f.uri)]
    if reader == "ranges" or not kept:
        return None
    # (kept as the Python records: binaryFiles' own records are handles that read the file again)
    rdd = whole_files(spark, reader, [f.uri for f in kept]).map(tuple).persist(StorageLevel.MEMORY_AND_DISK)
    return KeptFiles(rdd, frozenset(f.name for f in kept))


def survey(spark, cfg: PipelineConfig, requests: list[SurveyRequest], kept: KeptFiles | None = None) -> dict[str, Survey]:
    """One Spark job: every requested file is read whole by a task (:func:`survey_file`), side
    by side, and only the small findings come back to the driver, by file name. The tasks read
    with the driver's storage settings (:func:`pipelines.storage.current`), in their closure; a
    file in ``kept`` is read from there (:func:`keep_whole`: the decode reads the same copy)."""
    if not requests:
        return {}
    strict, target, settings = cfg.strict, cfg.parallelism.target_bytes_per_task, storage.current()
    sc = spark.sparkContext
    by_kept = {r.file.name: r for r in requests if kept is not None and r.file.name in kept.names and r.redo is None}
    rest = [r for r in requests if r.file.name not in by_kept]
    parts = []
    if rest:
        parts.append(sc.parallelize(rest, _slices(spark, len(rest))).map(lambda r: survey_file(r, strict, target, settings)))
    if by_kept:
        parts.append(kept.records(by_kept).map(
            lambda rec: survey_file(by_kept[file_name(rec[0])], strict, target, settings, content=rec[1])))
    rdd = parts[0] if len(parts) == 1 else sc.union(parts)
    with TaskProgress(spark, f"bronze-survey-{uuid.uuid4().hex[:8]}", rdd.getNumPartitions(),
                       progress_enabled(cfg), "bronze: read new files"):
        found = {sv.name: sv for sv in rdd.collect()}
    unread = [r for r in requests if r.file.name not in found]  # (a file the whole-file reader did not list)
    if unread:
        found.update(survey(spark, cfg, unread))
    return found


def _digest(uri: str, size: int, settings: storage.StorageSettings) -> str:
    with task_file(uri, settings) as buf:
        return sha256_prefixes(buf, [min(size, len(buf))])[min(size, len(buf))]


def file_digests(spark, files: list) -> dict[str, str]:
    """sha256 of each file's listed bytes (``SourceFile``), by uri, computed in tasks."""
    if not files:
        return {}
    items, settings = [(f.uri, f.size) for f in files], storage.current()
    got = spark.sparkContext.parallelize(items, _slices(spark, len(items))).map(lambda t: (t[0], _digest(*t, settings)))
    return dict(got.collect())


def _facts(uri: str, cut: int, error_class: str | None, error_offset: int | None,
           settings: storage.StorageSettings) -> tuple[str, bytes | None]:
    with task_file(uri, settings) as buf:
        sha = sha256_prefixes(buf, [cut])[cut]
        raw = quarantine_raw(buf, error_class, error_offset) if error_offset is not None else None
    return sha, raw


def prefix_facts(spark, items: list[tuple[str, int, str | None, int | None]]) -> list[tuple[str, bytes | None]]:
    """For each ``(uri, cut, error_class, error_offset)``: the sha256 of the file's bytes
    ``[0, cut)`` and the raw bytes its quarantine row keeps, read in tasks (a batch whose
    tasks met a bad event moves the file's end back to it)."""
    if not items:
        return []
    settings = storage.current()
    return spark.sparkContext.parallelize(items, _slices(spark, len(items))).map(lambda t: _facts(*t, settings)).collect()


class TaskProgress:
    """A tqdm bar over the tasks of the Spark jobs of one job group, fed by a
    thread polling the status tracker."""

    def __init__(self, spark, group: str, total: int, enabled: bool, desc: str):
        self.spark, self.sc, self.group, self.total = spark, spark.sparkContext, group, total
        self.enabled = enabled and total > 0
        self.desc = desc
        self._stop = threading.Event()

    def __enter__(self):
        self._described = contextlib.ExitStack()
        self._described.enter_context(job_description(self.spark, self.desc, group=self.group))
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc=self.desc, unit="range", file=sys.stderr)
            self.thread = threading.Thread(target=self._poll, daemon=True)
            self.thread.start()
        return self

    def _done(self) -> int:
        st = self.sc.statusTracker()
        best = 0
        for jid in st.getJobIdsForGroup(self.group):
            info = st.getJobInfo(jid)
            for sid in info.stageIds if info else ():
                s = st.getStageInfo(sid)
                if s is not None and s.numTasks == self.total:
                    best = max(best, s.numCompletedTasks)
        return best

    def _poll(self):
        while not self._stop.wait(0.5):
            try:
                n = self._done()
            except Exception:  # noqa: BLE001 - progress must never break the run
                continue
            self.bar.update(max(0, n - self.bar.n))

    def __exit__(self, *exc):
        self._stop.set()
        if self.enabled:
            self.thread.join()
            self.bar.update(max(0, self.total - self.bar.n) if exc[0] is None else 0)
            self.bar.close()
        self._described.close()


def progress_enabled(cfg: PipelineConfig) -> bool:
    return cfg.progress and sys.stderr.isatty()


def ship_package(spark) -> None:
    """Make ``pipelines`` importable in the Python workers: unless it is installed
    in site-packages, zip the package and ``addPyFile`` it (once per SparkContext).
    Needed under ``spark-submit`` on a cluster and whenever the driver found the
    package through ``sys.path`` rather than an installation."""
    from pathlib import Path

    import pipelines
    from pipelines.pyfiles import build_zip

    sc = spark.sparkContext
    if getattr(sc, "_bronze_pipelines_shipped", False):
        return
    pkg = Path(next(iter(pipelines.__path__))).resolve()
    if "site-packages" not in pkg.parts and "dist-packages" not in pkg.parts:
        zpath = Path(tempfile.mkdtemp(prefix="pipelines-pyfiles-")) / "pipelines.zip"
        build_zip(zpath, pkg=pkg)
        sc.addPyFile(str(zpath))
    sc._bronze_pipelines_shipped = True

