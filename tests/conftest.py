"""Shared pytest fixtures.  Keep this file small: the logic lives in the helper modules
(``mariadb_server.py``, ``workloads.py``, ``binlog_text.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_TESTS_DIR = Path(__file__).resolve().parent
if str(_TESTS_DIR) not in sys.path:  # helper modules are imported as top-level modules
    sys.path.insert(0, str(_TESTS_DIR))

from mariadb_server import MariaDBServer, mariadb_available  # noqa: E402

# The suite starts a few hundred short driver JVMs (python-launched and spark-submit alike read
# SPARK_SUBMIT_OPTS).  With C1 only, a delta-spark job on the samples spends about half the JVM CPU
# seconds it spends with C2 (BENCHMARKS.md); nothing in a test runs long enough for C2 to pay back.
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1")

# ------------------------------------------------------------------------------------ MariaDB


def _require_mariadb() -> None:
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)


@pytest.fixture(scope="session")
def mariadb(tmp_path_factory) -> MariaDBServer:
    """One private server for the whole session: ROW format, FULL row image, CRC32, MINIMAL row
    metadata, annotate rows ON, server_id 1, UTC.  Shared: create your own database per test."""
    _require_mariadb()
    srv = MariaDBServer(tmp_path_factory.mktemp("mariadb"), server_id=1, row_image="FULL", checksum="CRC32")
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def mariadb_factory(tmp_path_factory):
    """``mariadb_factory(**settings) -> started MariaDBServer`` (same keyword arguments as
    :class:`MariaDBServer` minus ``basedir``); every server is stopped at the end of the test."""
    _require_mariadb()
    servers: list[MariaDBServer] = []

    def make(**settings) -> MariaDBServer:
        srv = MariaDBServer(tmp_path_factory.mktemp("mariadb-extra"), **settings)
        servers.append(srv)
        return srv.start()

    yield make
    for srv in servers:
        srv.stop()


# ------------------------------------------------------------------------------------ corpus


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    """``../shared/corpus`` relative to the repository root (real binlogs + mariadb-binlog text)."""
    path = Path(__file__).resolve().parents[2] / "shared" / "corpus"
    if not path.is_dir():
        pytest.skip(f"binlog corpus not found at {path}")
    return path


# ------------------------------------------------------------------------------------ spark-submit


@pytest.fixture(scope="session")
def package() -> str:
    """``dist/binlog_delta.zip`` built by ``make package``, as ``spark-submit --py-files`` takes it."""
    import fcntl

    repo = _TESTS_DIR.parent
    (repo / "dist").mkdir(exist_ok=True)
    # pytest -n: one build for the run's workers (a second would replace the zip under the first)
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    built = repo / "dist" / f".package-built-{run}"
    with open(repo / "dist" / ".package.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if run is None or not built.exists():
            done = subprocess.run(["make", "-s", "package"], cwd=repo, capture_output=True, text=True, timeout=600)
            assert done.returncode == 0, done.stdout + done.stderr
            for old in (repo / "dist").glob(".package-built-*"):
                old.unlink()
            if run is not None:
                built.touch()
    return str(repo / "dist" / "binlog_delta.zip")


# ------------------------------------------------------------------------------------ object store


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """One private S3 API server (moto's, on 127.0.0.1) for the session; make a bucket per test
    with ``s3_server.bucket()`` and reach it with ``s3_server.spark_conf()`` (see s3_server.py)."""
    from s3_server import S3Server

    with S3Server(tmp_path_factory.mktemp("moto")) as srv:
        yield srv


@pytest.fixture
def no_aws_env(monkeypatch):
    """No ``AWS_*`` variable in this process's environment for the test: only the settings the
    code is given can reach S3."""
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)


@pytest.fixture(scope="session")
def hdfs_server(tmp_path_factory):
    """One private HDFS (Hadoop's MiniDFSCluster, about 10 s to start) for the session; give each
    test its own folder, ``hdfs_server.uri(f"/{name}")`` (see hdfs_server.py)."""
    from hdfs_server import HdfsServer, missing_tools

    why = missing_tools()
    if why is not None:
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true: no MiniDFSCluster: {why}")
        pytest.skip(why)
    with HdfsServer(tmp_path_factory.mktemp("hdfs")) as srv:
        yield srv
