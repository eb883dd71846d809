"""Spark fixtures shared by the Spark tests: one local session for the whole run, and the Delta
backends that can run on this machine.

Use them with ``from spark_fixtures import spark, delta_backend  # noqa: F401`` at the top of a
test module (pytest puts ``tests/`` on ``sys.path``, as for ``mariadb_server``).  Importing the
fixture into several modules is fine: the session is built once (``build_session`` reuses the
active one) and stopped once, at the end of the run.
"""
from __future__ import annotations

import os

import pytest

from pipelines.spark_session import DELTA_JARS_ENV, build_session, delta_spark_available

SPARK_SKIP_REASON = "delta-spark jars not on the classpath: set DELTA_JARS to run the delta-spark backend"

# Settings for tests only: a tiny local session that starts and plans fast.  On a handful of rows,
# compiling generated code costs more than it saves (measured ~25% faster without it).
TEST_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.rdd.compress": "false",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "1",
}

_state: dict[str, object] = {}


def _session():
    session = _state.get("spark")
    if session is None:
        session = build_session(app_name="binlog-delta-tests", master="local[2]", extra_conf=TEST_CONF)
        session.sparkContext.setLogLevel("ERROR")
        _state["spark"] = session
    return session


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test run (local[2], UTC, no UI)."""
    session = _session()
    yield session
    if _state.pop("spark", None) is not None:
        session.stop()


@pytest.fixture(params=["rs", "spark"], scope="session")
def delta_backend(request, spark):
    """Each Delta backend that can run here: always "rs"; "spark" only with delta-spark jars."""
    if request.param == "spark" and not os.environ.get(DELTA_JARS_ENV):
        pytest.skip(SPARK_SKIP_REASON)
    if request.param == "spark" and not delta_spark_available(spark):
        pytest.fail(f"{DELTA_JARS_ENV} is set but delta-spark does not load from it")
    return request.param
