"""A class-data archive of the driver JVM, so that a local job's Spark starts in about half the time.

A new local process (``make run``, a job an Airflow worker starts on one machine, each test
module's session) spends about 4 s building its SparkSession and 1-2 s more in its first job,
most of it loading, parsing and verifying Spark's, Hadoop's, Parquet's and Delta's classes.
Java's class-data sharing (AppCDS) maps a dump of the classes a training run loaded instead.

* ``python -m pipelines.jvm_archive create`` (``make setup`` runs it): one training run of the
  pipeline on the committed samples, on both Delta backends, in a JVM started with
  ``-XX:ArchiveClassesAtExit``. The archive is written under a temporary name and renamed when the
  JVM has exited, so a half-written archive never carries the final name.
* :func:`java_options` gives ``-XX:SharedArchiveFile=...`` when that archive exists;
  :func:`pipelines.spark_session.build_session` adds it to a local session's driver options.
  Clusters and ``spark-submit`` jobs are not touched: their JVM is started by the submit command.
* The archive's name holds a digest of the Java build and of PySpark's jars: another JDK or Spark
  version looks for another file, and without one the JVM starts as before.
* The JVM maps an archive only when the classpath it was made with starts the session's. Jars in
  ``spark.jars`` (delta-spark's) are not on that classpath; the S3A jars a session asked for
  ``s3a://`` gets go at its end (:func:`pipelines.spark_settings.local_classpath_env`), after
  PySpark's: the training run goes without them, and sessions with or without them map the archive.

The archive is about 190 MB, in ``<venv>/share/binlog-delta/`` (``BINLOG_DELTA_JVM_ARCHIVE_DIR``
overrides it; ``make clean`` removes the venv). Measured in BENCHMARKS.md ("Start-up").
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from pipelines.logs import get_logger

_log = get_logger(__name__)

ARCHIVE_DIR_ENV = "BINLOG_DELTA_JVM_ARCHIVE_DIR"
REPO = Path(__file__).resolve().parents[1]
# (the JVM's own notes on classes it cannot archive or an archive it cannot map go nowhere: a job's
# output is its report)
QUIET_CDS = "-Xlog:cds*=off"


def java_home() -> Path | None:
    """The JDK Spark's launcher runs: ``JAVA_HOME``, else the ``java`` on PATH."""
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    java = shutil.which("java")
    return Path(os.path.realpath(java)).parents[1] if java else None


def archive_key() -> str | None:
    """A digest of what the archive depends on: the JDK build (its ``release`` file) and PySpark's
    jars; None when the JDK is not found."""
    import pyspark

    home = java_home()
    release = home / "release" if home else None
    if release is None or not release.is_file():
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    names = sorted(p.name for p in jars.glob("*.jar")) if jars.is_dir() else []
    digest = hashlib.sha256(release.read_bytes())
    digest.update("\n".join([pyspark.__version__, *names]).encode())
    return digest.hexdigest()[:16]


def archive_dir() -> Path:
    return Path(os.environ.get(ARCHIVE_DIR_ENV) or Path(sys.prefix) / "share" / "binlog-delta")


def archive_path() -> Path | None:
    """Where this JDK and Spark's archive is (or would be)."""
    key = archive_key()
    return None if key is None else archive_dir() / f"spark-driver-{key}.jsa"


def java_options() -> str:
    """The driver JVM options that map the archive, or ``""`` when there is none."""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET_CDS}"


# -- making one --------------------------------------------------------------------------------

def _maps(path: Path) -> bool:
    """True when a JVM of this JDK starts with the archive (a damaged one makes it crash)."""
    home = java_home()
    java = str(home / "bin" / "java") if home else "java"
    done = subprocess.run([java, f"-XX:SharedArchiveFile={path}", QUIET_CDS, "-version"], capture_output=True,
                          cwd=tempfile.gettempdir())
    return done.returncode == 0


def create(force: bool = False) -> Path | None:
    """Make the archive unless it is there (``force``: again); returns its path (None: no JDK)."""
    path = archive_path()
    if path is None:
        _log.info("jvm archive: no JDK found (JAVA_HOME, java on PATH): nothing made")
        return None
    if path.is_file() and not force:  # (set-up re-checks are silent when there is nothing to do)
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        done = subprocess.run([sys.executable, "-m", "pipelines.jvm_training", str(partial)],
                              cwd=REPO, capture_output=True, text=True)
        if done.returncode or not partial.is_file() or not _maps(partial):
            _log.warning(f"jvm archive: the training run failed (exit {done.returncode}); jobs start without an "
                         f"archive:\n{done.stderr[-3000:]}")
            return None
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    print(f"jvm archive: {path} ({path.stat().st_size / 2**20:.0f} MB)")
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    make = sub.add_parser("create", help="make the archive (a training run of the pipeline on the samples)")
    make.add_argument("--force", action="store_true", help="make it again even when it is there")
    sub.add_parser("path", help="print where the archive is (or would be)")
    a = p.parse_args(argv)
    if a.command == "path":
        print(archive_path() or "no JDK found")
        return 0
    return 0 if create(a.force) is not None else 1


if __name__ == "__main__":
    sys.exit(main())
