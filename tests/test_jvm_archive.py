"""The driver JVM's class-data archive (pipelines/jvm_archive.py): made by ``make setup``, mapped by
local sessions, and a damaged one never stops a job.

Each case starts its own Python and JVM (a session's JVM options apply only when the JVM starts)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from pipelines import jvm_archive

ROOT = Path(__file__).resolve().parents[1]

# a local session built as the jobs build theirs; prints the driver JVM's options and a query's result
_SESSION = textwrap.dedent("""
    from pipelines.spark_session import build_session
    spark = build_session("jvm-archive-test", "local[1]", extra_conf=EXTRA, s3a=S3A)
    args = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    print("ARGS", " ".join(str(a) for a in args))
    print("CLASSPATH", spark.sparkContext._jvm.java.lang.System.getProperty("java.class.path"))
    print("SUM", spark.range(10).selectExpr("sum(id)").collect()[0][0])
    spark.stop()
""")


def _session(tmp_path: Path, env: dict | None = None, extra: dict | None = None,
             s3a: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", f"EXTRA = {extra or {}!r}\nS3A = {s3a!r}\n{_SESSION}"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                          capture_output=True, text=True, timeout=300)


def _args(done: subprocess.CompletedProcess) -> str:
    return next(line for line in done.stdout.splitlines() if line.startswith("ARGS "))


def test_make_setup_made_the_archive_and_a_local_session_maps_it(tmp_path):
    path = jvm_archive.archive_path()
    assert path is not None, "no JDK found"
    assert path.is_file(), f"no class-data archive at {path}: make setup makes it (python -m pipelines.jvm_archive create)"
    # -Xshare:on: the JVM refuses to start unless it maps the archive (auto would fall back silently)
    done = _session(tmp_path, extra={"spark.driver.extraJavaOptions":
                                     f"-Duser.timezone=UTC -XX:SharedArchiveFile={path} -Xshare:on"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "SUM 45" in done.stdout
    # and a session built without options of its own gets the archive
    done = _session(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"-XX:SharedArchiveFile={path}" in _args(done)
    assert "SUM 45" in done.stdout


def test_a_session_with_the_s3a_jars_still_maps_the_archive(tmp_path):
    # hadoop-aws and the AWS SDK go at the end of the driver's classpath: the archive's classpath
    # (PySpark's jars) stays its prefix, so the JVM maps it (-Xshare:on: or refuses to start)
    from pipelines.delta_jars import find_s3a_jars

    path = jvm_archive.archive_path()
    assert path is not None and path.is_file(), "make setup makes the archive"
    jars = find_s3a_jars()
    assert jars, "make setup fetches hadoop-aws and the AWS SDK bundle into jars/"
    done = _session(tmp_path, s3a=True, extra={"spark.driver.extraJavaOptions":
                                               f"-Duser.timezone=UTC -XX:SharedArchiveFile={path} -Xshare:on"})
    assert done.returncode == 0, done.stderr[-3000:]
    classpath = next(line for line in done.stdout.splitlines() if line.startswith("CLASSPATH ")).split()[1].split(os.pathsep)
    assert classpath[-len(jars):] == jars
    assert "SUM 45" in done.stdout


def test_a_damaged_archive_is_named_and_the_session_starts_without_it(tmp_path):
    good = jvm_archive.archive_path()
    assert good is not None and good.is_file(), "make setup makes the archive"
    folder = tmp_path / "archives"
    folder.mkdir()
    with open(good, "rb") as src, open(folder / good.name, "wb") as dst:  # cut short, as by a full disk
        dst.write(src.read(2_000_000))
    done = _session(tmp_path, env={jvm_archive.ARCHIVE_DIR_ENV: str(folder)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"class-data archive -XX:SharedArchiveFile={folder / good.name}" in done.stderr
    assert "SharedArchiveFile" not in _args(done)
    assert "SUM 45" in done.stdout


def test_no_archive_no_option(tmp_path, monkeypatch):
    monkeypatch.setenv(jvm_archive.ARCHIVE_DIR_ENV, str(tmp_path))
    assert jvm_archive.java_options() == ""
    path = jvm_archive.archive_path()
    assert path is not None and path.parent == tmp_path and path.name.startswith("spark-driver-")
    shutil.copyfile(__file__, path)  # (any file: the JVM judges it, :func:`build_session` falls back)
    assert jvm_archive.java_options() == f"-XX:SharedArchiveFile={path} -Xlog:cds*=off"


def test_options_of_the_users_own_keep_their_archive(monkeypatch, tmp_path):
    from pipelines.spark_session import _with_jvm_archive

    monkeypatch.setenv(jvm_archive.ARCHIVE_DIR_ENV, str(tmp_path))
    jvm_archive.archive_path().write_bytes(b"x")
    conf = {"spark.driver.extraJavaOptions": "-XX:SharedArchiveFile=/opt/mine.jsa"}
    assert _with_jvm_archive(conf) is None and conf["spark.driver.extraJavaOptions"] == "-XX:SharedArchiveFile=/opt/mine.jsa"
    conf = {"spark.driver.extraJavaOptions": "-Duser.timezone=UTC"}
    added = _with_jvm_archive(conf)
    assert conf["spark.driver.extraJavaOptions"] == f"-Duser.timezone=UTC {added}"
