"""Spark plumbing of the bronze step: a progress bar over a job group's tasks, and shipping the
``pipelines`` package to the Python workers."""
from __future__ import annotations


import sys
import tempfile
import threading

from pipelines.config import PipelineConfig


class _TaskProgress:
    """A tqdm bar over the tasks of the Spark jobs of one job group, fed by a
    thread polling the status tracker."""

    def __init__(self, spark, group: str, total: int, enabled: bool, desc: str):
        self.sc, self.group, self.total = spark.sparkContext, group, total
        self.enabled = enabled and total > 0
        self.desc = desc
        self._stop = threading.Event()

    def __enter__(self):
        self.sc.setJobGroup(self.group, self.desc)
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
        self.sc.setLocalProperty("spark.jobGroup.id", None)


def _progress_enabled(cfg: PipelineConfig) -> bool:
    return cfg.progress and sys.stderr.isatty()


def ship_package(spark) -> None:
    """Make ``pipelines`` importable in the Python workers: unless it is installed
    in site-packages, zip the package and ``addPyFile`` it (once per SparkContext).
    Needed under ``spark-submit`` on a cluster and whenever the driver found the
    package through ``sys.path`` rather than an installation."""
    import zipfile
    from pathlib import Path

    import pipelines

    sc = spark.sparkContext
    if getattr(sc, "_bronze_pipelines_shipped", False):
        return
    pkg = Path(next(iter(pipelines.__path__))).resolve()
    if "site-packages" not in pkg.parts and "dist-packages" not in pkg.parts:
        zpath = Path(tempfile.mkdtemp(prefix="pipelines-pyfiles-")) / "pipelines.zip"
        with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(pkg.rglob("*.py")):
                z.write(f, f.relative_to(pkg.parent).as_posix())
        sc.addPyFile(str(zpath))
    sc._bronze_pipelines_shipped = True

