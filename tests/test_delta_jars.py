"""The delta-spark jars: their version follows the pinned Python package, make setup fetched them
with the Maven client, sessions find them by default, and Spark's own resolver works too."""
from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import pytest
from spark_fixtures import in_ci

from pipelines import delta_jars
from pipelines.spark_settings import DELTA_CATALOG, DELTA_EXTENSION, session_conf

REPO = Path(__file__).resolve().parents[1]


def _pin(package: str) -> str:
    text = (REPO / "requirements.txt").read_text()
    m = re.search(rf"^{re.escape(package)}==(\S+)", text, re.MULTILINE)
    assert m, f"requirements.txt pins no {package}"
    return m.group(1)


def _fetched() -> list[str]:
    jars = delta_jars.find_jars()
    if not jars:
        if in_ci():
            pytest.fail(f"CI=true: the delta-spark jars are missing from {delta_jars.JARS_DIR} (make setup fetches them)")
        pytest.skip(f"the delta-spark jars are missing from {delta_jars.JARS_DIR}: run make setup")
    return jars


def test_jar_version_follows_the_pinned_delta_spark_package():
    pinned = _pin("delta-spark")
    assert importlib.metadata.version("delta-spark") == pinned, "the venv's delta-spark is not the pinned one"
    spark_jar, storage_jar = delta_jars.artifacts()
    assert (spark_jar.version, storage_jar.version) == (pinned, pinned)
    # delta-spark X.Y runs on Spark X.Y: a bump of one pin without the other fails here
    assert _pin("pyspark").split(".")[:2] == pinned.split(".")[:2]
    assert spark_jar.artifact == f"delta-spark_{delta_jars.scala_binary_version()}"


def test_make_setup_fetched_the_jars_of_that_version():
    jars = _fetched()
    names = [Path(j).name for j in jars]
    assert names == [a.jar_name for a in delta_jars.artifacts()]
    assert all(Path(j).stat().st_size > 10_000 for j in jars)
    assert all(Path(j).parent == REPO / "jars" for j in jars)
    assert subprocess.run(["git", "check-ignore", "-q", "jars/x.jar"], cwd=REPO).returncode == 0


def test_fetch_skips_jars_already_there(tmp_path):
    for a in delta_jars.artifacts():
        (tmp_path / a.jar_name).write_bytes(b"jar")
    # no Maven client at all: a fetch that finds its jars must not need one
    assert delta_jars.fetch(tmp_path, mvn=str(tmp_path / "no-mvn")) == [
        str(tmp_path / a.jar_name) for a in delta_jars.artifacts()]


def test_fetch_reports_what_the_registry_said(tmp_path):
    # a version that does not exist: Maven's refusal comes back whole, and nothing is left behind
    with pytest.raises(delta_jars.DeltaJarsError, match=r"io\.delta:delta-spark_2\.13:0\.0\.0-none") as e:
        delta_jars.fetch(tmp_path, version="0.0.0-none")
    assert "exit" in str(e.value) and len(str(e.value).splitlines()) > 1
    assert [p.name for p in tmp_path.iterdir()] == []


def test_sessions_find_the_fetched_jars_unless_others_are_named(tmp_path):
    fetched = [str(tmp_path / "a.jar"), str(tmp_path / "b.jar")]
    conf = session_conf(env={}, local=True, delta=True, fetched_jars=fetched)
    assert conf["spark.jars"] == ",".join(fetched)
    assert (conf["spark.sql.extensions"], conf["spark.sql.catalog.spark_catalog"]) == (DELTA_EXTENSION, DELTA_CATALOG)
    # not asked for: plain Spark (faster to start)
    assert "spark.jars" not in session_conf(env={}, local=True, fetched_jars=fetched)
    # DELTA_JARS wins, then delta.packages
    own = tmp_path / "own.jar"
    own.write_bytes(b"")
    assert session_conf(env={"DELTA_JARS": str(own)}, local=True, delta=True, fetched_jars=fetched)["spark.jars"] == str(own)
    by_packages = session_conf("local[2]", "io.delta:delta-spark_2.13:4.0.0", env={}, local=True, delta=True,
                               fetched_jars=fetched)
    assert by_packages["spark.jars.packages"] == "io.delta:delta-spark_2.13:4.0.0" and "spark.jars" not in by_packages
    # missing jars: no Delta settings, and the backend check says what to do
    assert "spark.sql.extensions" not in session_conf(env={}, local=True, delta=True, fetched_jars=[])


_IVY_SESSION = """
import sys
from pipelines import delta_jars, delta_io
from pipelines.spark_session import build_session, delta_spark_available
spark = build_session(app_name="ivy", master="local[1]", delta_packages=delta_jars.packages(),
                      extra_conf={"spark.jars.ivy": sys.argv[1]})
assert delta_spark_available(spark)
jars = spark.sparkContext.getConf().get("spark.jars", "").split(",")
assert all(j.startswith("file://" + sys.argv[1]) for j in jars), jars   # Ivy's, not jars/
spark.range(3).write.format("delta").save(sys.argv[2])
print(delta_io.open_table(sys.argv[2], "spark", spark).read_df().count(),
      delta_io.open_table(sys.argv[2], "rs").history()[0].operation)
spark.stop()
"""


@pytest.mark.slow
@pytest.mark.spark
def test_spark_resolves_delta_packages_itself(tmp_path):
    # the conventional route: spark.jars.packages, resolved by Spark's Ivy from the registry the
    # machine reaches (a fresh Ivy home; Ivy looks in the local Maven cache first, then the registry)
    r = subprocess.run([sys.executable, "-c", _IVY_SESSION, str(tmp_path / "ivy"), str(tmp_path / "t")],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    assert r.stdout.split() == ["3", "WRITE"]
    resolved = {p.name for p in (tmp_path / "ivy" / "jars").glob("*.jar")}
    assert {a.jar_name.replace(a.artifact, f"{a.group}_{a.artifact}") for a in delta_jars.artifacts()} <= resolved
