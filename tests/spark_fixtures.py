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

from pipelines.spark_session import build_session, delta_spark_available

SPARK_SKIP_REASON = "delta-spark jars not on the classpath: run make setup (it fetches them into jars/)"


def _image_ddl() -> str:
    from pipelines.bronze.schema import IMAGE
    from pipelines.delta_io import spark_type_of

    return spark_type_of(IMAGE).simpleString()


IMAGE_DDL = _image_ddl()  # a bronze image's type in Spark's DDL: for test DataFrames built from text


def in_ci() -> bool:
    """True under CI (``CI=true``), where a delta-spark test that cannot run is a failure."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def require_delta_spark(session) -> None:
    """Skip (locally) or fail (under CI) unless ``session`` has delta-spark on its classpath."""
    if delta_spark_available(session):
        return
    if in_ci():
        pytest.fail(f"CI=true: {SPARK_SKIP_REASON}")
    pytest.skip(SPARK_SKIP_REASON)

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
        # delta-spark is on the classpath (the jars make setup fetched, or DELTA_JARS), so both
        # backends run in this one session; "auto" still picks delta-rs on this local master
        session = build_session(app_name="binlog-delta-tests", master="local[2]", extra_conf=TEST_CONF,
                                delta=True)
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
    """Each Delta backend: "rs", and "spark" (delta-spark from the jars make setup fetched)."""
    if request.param == "spark":
        require_delta_spark(spark)
    return request.param
