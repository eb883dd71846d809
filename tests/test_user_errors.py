"""Issue 36, "a newcomer's first hour": every user error is one line on stderr (``error: ...``), no
traceback unless ``--debug``, with the exit code docs/errors.md gives; what can be known before
Spark starts is checked there (well under a second, no warehouse folder, no run row).

The jobs run as subprocesses, as a user runs them. Tests that start Spark are marked ``spark``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "binlogs"


def job(script: str, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    return subprocess.run([sys.executable, str(REPO / "jobs" / script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The only line of stderr that is not Spark's JVM banner, which must be an ``error:`` line."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("WARNING: Using incubator")]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    return lines[0]


def test_a_missing_input_folder_is_one_line_and_exit_2_before_spark(tmp_path):
    started = time.monotonic()
    proc = job("run_pipeline.py", "--binlog-dir", str(tmp_path / "nope"), "--warehouse", str(tmp_path / "wh"),
               cwd=tmp_path)
    took = time.monotonic() - started
    assert proc.returncode == 2
    assert one_error_line(proc) == f"error: input folder {tmp_path / 'nope'} does not exist"
    assert not (tmp_path / "wh").exists()  # no warehouse folder, so no lock file and no run row either
    assert took < 5, f"{took:.1f} s: the check must come before Spark starts (about 10 s)"


def test_a_missing_dump_is_one_line_before_spark(tmp_path):
    proc = job("load_snapshot.py", "--dump", str(tmp_path / "shop.sql"), "--warehouse", str(tmp_path / "wh"),
               cwd=tmp_path)
    assert proc.returncode == 2
    assert one_error_line(proc) == f"error: dump {tmp_path / 'shop.sql'} does not exist"
    assert not (tmp_path / "wh").exists()


def test_a_dump_on_object_storage_is_one_line_before_spark(tmp_path):
    """--dump is read by path: a dump on S3 or HDFS is refused with what to do, not a
    FileNotFoundError from inside the load."""
    for uri in ("s3a://backups/shop.sql.gz", "hdfs://nn:8020/backups/shop.sql"):
        proc = job("load_snapshot.py", "--dump", uri, "--warehouse", str(tmp_path / "wh"), cwd=tmp_path)
        assert proc.returncode == 2
        assert one_error_line(proc) == (f"error: dump {uri} is not on a local or mounted file system: the load reads "
                                        "--dump by path; copy it to a disk the driver and executors see (aws s3 cp, "
                                        "hdfs dfs -get) and give that path")
    assert not (tmp_path / "wh").exists()


def test_an_unfinished_mydumper_folder_is_one_line_before_spark(tmp_path):
    dump = tmp_path / "shop-dump"  # mydumper renames metadata.partial to metadata when the dump is done
    dump.mkdir()
    (dump / "metadata.partial").write_text("# Started dump at: 2026-11-27 09:00:00\n[master]\nFile = binlog.000004\n")
    (dump / "shop.t-schema.sql").write_text("CREATE TABLE `t` (`id` int NOT NULL PRIMARY KEY);\n")
    proc = job("load_snapshot.py", "--dump", str(dump), "--warehouse", str(tmp_path / "wh"), cwd=tmp_path)
    assert proc.returncode == 2
    assert one_error_line(proc) == (f"error: {dump / 'metadata.partial'}: mydumper did not finish this dump "
                                    "(metadata.partial, no metadata)")
    assert not (tmp_path / "wh").exists()


def test_debug_adds_the_traceback(tmp_path):
    proc = job("ingest_bronze.py", "--binlog-dir", str(tmp_path / "nope"), "--warehouse", str(tmp_path / "wh"),
               "--debug", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Traceback (most recent call last)" in proc.stderr and "InputError" in proc.stderr
    assert proc.stderr.rstrip().splitlines()[-1] == f"error: input folder {tmp_path / 'nope'} does not exist"


def test_an_input_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "binlog.000001").write_bytes(b"\xfebin")
    proc = job("ingest_bronze.py", "--binlog-dir", str(tmp_path / "binlog.000001"), "--warehouse",
               str(tmp_path / "wh"), cwd=tmp_path)
    assert proc.returncode == 2
    assert one_error_line(proc) == f"error: input {tmp_path / 'binlog.000001'} is not a folder"


def test_two_binlog_series_in_one_folder_are_refused_before_spark(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    shutil.copyfile(SAMPLES / "binlog.000001", inp / "binlog.000001")
    shutil.copyfile(SAMPLES / "binlog.000002", inp / "binlog.000002")
    shutil.copyfile(SAMPLES / "binlog.000001", inp / "mysql-bin.000001")
    proc = job("run_pipeline.py", "--binlog-dir", str(inp), "--warehouse", str(tmp_path / "wh"), cwd=tmp_path)
    assert proc.returncode == 2
    line = one_error_line(proc)
    assert "holds two binlog series: binlog.000001 and mysql-bin.000001 have the same number 1" in line
    assert not (tmp_path / "wh").exists()


def test_a_warehouse_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "afile").write_text("x")
    proc = job("run_pipeline.py", "--binlog-dir", str(tmp_path / "in"), "--warehouse", str(tmp_path / "afile" / "wh"),
               cwd=tmp_path)
    assert proc.returncode == 2
    assert one_error_line(proc) == (f"error: warehouse {tmp_path / 'afile' / 'wh'} cannot be made: "
                                    f"{tmp_path / 'afile'} is not a folder")


def test_a_read_only_warehouse_is_one_line(tmp_path):
    (tmp_path / "in").mkdir()
    if os.geteuid() == 0:  # root writes through permission bits: a filesystem that takes no new files
        wh = "/proc/binlog-delta-wh"
    else:
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        wh = str(ro / "wh")
    proc = job("maintain.py", "--warehouse", wh, cwd=tmp_path)
    assert proc.returncode == 2
    assert one_error_line(proc).startswith(f"error: warehouse {wh} cannot be written (its nearest existing folder ")
    assert not os.path.exists(wh)


@pytest.mark.spark
def test_strict_mode_bad_input_is_one_line_naming_file_and_offset(tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "binlog.000001").write_bytes(b"this is not a binlog file at all")
    conf = tmp_path / "p.yaml"
    conf.write_text(f"input: {inp}\nwarehouse: {tmp_path / 'wh'}\nstrict: true\ndelta:\n  backend: rs\n")
    proc = job("ingest_bronze.py", "--config", str(conf), "--no-progress", cwd=tmp_path)
    assert proc.returncode == 1
    assert "bronze run" in proc.stdout and " failed:" in proc.stdout
    line = one_error_line(proc)
    assert line.startswith("error: bad input (strict mode): ") and "binlog.000001" in line and "offset 0" in line


def _sql(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    return subprocess.run([sys.executable, "-m", "pipelines.sql", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("engine", ["rs", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_wrong_table_is_one_line_on_both_sql_engines(tmp_path, engine):
    wh = tmp_path / "wh"
    wh.mkdir()
    proc = _sql("--warehouse", str(wh), "--engine", engine, "SELECT * FROM no_such_table", cwd=tmp_path)
    assert proc.returncode == 1
    line = one_error_line(proc)
    assert "no_such_table" in line and len(line) < 400, line


@pytest.mark.spark
def test_the_venvs_spark_submit_runs_a_job_without_the_venv_on_path(tmp_path):
    """``.venv/bin/spark-submit --master local[2] jobs/run_pipeline.py ...`` as written, with a PATH
    whose ``python3`` has no pyspark: PySpark's launcher failed (exit 127, "'NoneType' object has no
    attribute 'origin'") until ``make spark-home`` (part of ``make setup``) gave it the venv's Python.
    A copy of the launchers stands for the venv's, patched by the same make target."""
    venv_bin = Path(sys.executable).parent
    launchers = tmp_path / "bin"
    launchers.mkdir()
    for name in ("spark-submit", "find-spark-home", "find_spark_home.py"):
        shutil.copy2(venv_bin / name, launchers / name)
    # as PySpark installs them (the venv's own were patched by make setup already)
    finder = launchers / "find-spark-home"
    finder.write_text("".join(ln for ln in finder.read_text().splitlines(keepends=True)
                              if "binlog-delta: the venv" not in ln))
    plain = tmp_path / "plain-python"  # a python3 first on PATH, without the venv's packages
    plain.mkdir()
    (plain / "python3").symlink_to(getattr(sys, "_base_executable", "/usr/bin/python3"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_"))}
    env["PATH"] = f"{plain}:/usr/bin:/bin"
    args = [str(launchers / "spark-submit"), "--master", "local[2]", str(REPO / "jobs" / "run_pipeline.py"),
            "--binlog-dir", str(SAMPLES), "--no-progress"]

    before = subprocess.run(args + ["--warehouse", str(tmp_path / "wh0")], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert before.returncode != 0 and "'NoneType' object has no attribute 'origin'" in before.stderr

    subprocess.run(["make", "-s", "spark-home", f"VENV_BIN={launchers}", f"VENV_PYTHON={sys.executable}"],
                   cwd=REPO, check=True, timeout=60)
    after = subprocess.run(args + ["--warehouse", str(tmp_path / "wh")], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=600)
    assert after.returncode == 0, after.stderr[-3000:]
    assert " ok: 4 file(s) read" in after.stdout and "silver run" in after.stdout
    assert not [ln for ln in after.stderr.splitlines() if " INFO " in ln or " WARN " in ln], after.stderr[-3000:]


@pytest.mark.spark
def test_a_binlog_changes_error_is_said_once_with_file_and_offset(tmp_path):
    files = tmp_path / "files"
    files.mkdir()
    (files / "binlog.000001").write_bytes(b"not a binlog at all")
    (tmp_path / "wh").mkdir()
    proc = _sql("--warehouse", str(tmp_path / "wh"), "--engine", "spark",
                f"SELECT count(*) FROM (SELECT explode(binlog_changes(content, path)) FROM binaryFile.`{files}`)",
                cwd=tmp_path)
    assert proc.returncode == 1
    line = one_error_line(proc)
    assert line.startswith(f"error: binlog_changes: file:{files / 'binlog.000001'}: offset 0: NotABinlog: "), line


@pytest.mark.spark
def test_spark_is_quiet_unless_verbose(tmp_path):
    (tmp_path / "in").mkdir()
    args = ("--binlog-dir", str(tmp_path / "in"), "--warehouse", str(tmp_path / "wh"), "--no-progress")
    quiet = job("ingest_bronze.py", *args, cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr[-3000:]
    spark_lines = [ln for ln in quiet.stderr.splitlines()
                   if not ln.startswith(("warning: ", "WARNING: Using incubator modules"))]
    assert spark_lines == [], quiet.stderr[-3000:]  # no log4j profile, log level or NativeCodeLoader lines
    loud = job("ingest_bronze.py", *args, "--verbose", cwd=tmp_path)
    assert loud.returncode == 0, loud.stderr[-3000:]
    assert "Using Spark's default log4j profile" in loud.stderr and 'Setting Spark log level to "INFO"' in loud.stderr
