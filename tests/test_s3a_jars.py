"""The jars ``s3a://`` paths need: hadoop-aws at exactly PySpark's Hadoop version and the AWS SDK
bundle hadoop-aws's POM declares, fetched by make setup with the Maven client, on the classpath of
a local session that asks for them, and listed for a cluster by make package."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from spark_fixtures import in_ci

from pipelines import delta_jars
from pipelines.spark_settings import (
    LAUNCH_CLASSPATH_ENV,
    S3A_JARS_ENV,
    local_classpath_env,
    s3a_jars,
    session_conf,
    uses_s3a,
)

REPO = Path(__file__).resolve().parents[1]


def _fetched() -> list[str]:
    jars = delta_jars.find_s3a_jars()
    if not jars:
        if in_ci():
            pytest.fail(f"CI=true: hadoop-aws and the AWS SDK bundle are missing from {delta_jars.JARS_DIR} "
                        f"(make setup fetches them)")
        pytest.skip(f"hadoop-aws and the AWS SDK bundle are missing from {delta_jars.JARS_DIR}: run make setup")
    return jars


def _maven_properties(jar: str, group: str, artifact: str) -> dict[str, str]:
    """The ``pom.properties`` Maven wrote into ``jar`` when it built it: what the jar says it is."""
    with zipfile.ZipFile(jar) as z:
        text = z.read(f"META-INF/maven/{group}/{artifact}/pom.properties").decode()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))


def test_hadoop_aws_is_of_pysparks_hadoop_and_the_sdk_is_what_its_pom_declares(tmp_path):
    aws_jar, sdk_jar = _fetched()
    hadoop = delta_jars.hadoop_version()
    import pyspark

    shipped = Path(pyspark.__file__).parent / "jars"
    assert (shipped / f"hadoop-client-api-{hadoop}.jar").is_file()
    assert (shipped / f"hadoop-client-runtime-{hadoop}.jar").is_file()  # (S3A runs on both)
    aws, sdk = delta_jars.s3a_artifacts()
    assert aws.coordinates == f"org.apache.hadoop:hadoop-aws:{hadoop}" == delta_jars.s3a_packages()
    # what the jars themselves say they are
    assert _maven_properties(aws_jar, aws.group, aws.artifact)["version"] == hadoop
    assert _maven_properties(sdk_jar, sdk.group, sdk.artifact)["version"] == sdk.version
    # hadoop-aws's own POM (inside its jar), with its parents applied by Maven, declares that bundle
    with zipfile.ZipFile(aws_jar) as z:
        (tmp_path / "pom.xml").write_bytes(z.read(f"META-INF/maven/{aws.group}/{aws.artifact}/pom.xml"))
    assert delta_jars.aws_sdk_version(tmp_path / "pom.xml") == sdk.version
    assert [Path(j).name for j in (aws_jar, sdk_jar)] == [aws.jar_name, sdk.jar_name]
    assert all(Path(j).parent == REPO / "jars" for j in (aws_jar, sdk_jar))
    assert Path(sdk_jar).stat().st_size > 100_000_000  # the whole SDK, not a stub


def test_fetch_skips_s3a_jars_already_there(tmp_path):
    hadoop = delta_jars.hadoop_version()
    aws = delta_jars.hadoop_aws()
    (tmp_path / delta_jars.S3A_LISTING.format(hadoop=hadoop)).write_text(
        f"{aws.coordinates}\nsoftware.amazon.awssdk:bundle:2.0.0\n")
    # the listing alone is not enough: both jars must be there
    assert delta_jars.find_s3a_jars(tmp_path) is None
    for name in (aws.jar_name, "bundle-2.0.0.jar"):
        (tmp_path / name).write_bytes(b"jar")
    # no Maven client at all: a fetch that finds its jars must not need one
    assert delta_jars.fetch_s3a(tmp_path, mvn=str(tmp_path / "no-mvn")) == [
        str(tmp_path / aws.jar_name), str(tmp_path / "bundle-2.0.0.jar")]


def test_a_listing_of_another_hadoop_is_refused(tmp_path):
    hadoop = delta_jars.hadoop_version()
    listing = tmp_path / delta_jars.S3A_LISTING.format(hadoop=hadoop)
    listing.write_text("org.apache.hadoop:hadoop-aws:3.3.4\nsoftware.amazon.awssdk:bundle:2.0.0\n")
    with pytest.raises(delta_jars.DeltaJarsError, match=rf"should name org\.apache\.hadoop:hadoop-aws:{re.escape(hadoop)}"):
        delta_jars.find_s3a_jars(tmp_path)


def test_fetch_reports_what_the_registry_said(tmp_path):
    # a Hadoop version that does not exist: Maven's refusal comes back whole, and nothing is left behind
    with pytest.raises(delta_jars.DeltaJarsError, match=r"org\.apache\.hadoop:hadoop-aws:0\.0\.0-none:pom") as e:
        delta_jars.fetch_s3a(tmp_path, hadoop="0.0.0-none")
    assert "exit" in str(e.value) and len(str(e.value).splitlines()) > 1
    assert [p.name for p in tmp_path.iterdir()] == []


def test_which_sessions_get_the_s3a_jars(tmp_path):
    fetched = [str(tmp_path / "hadoop-aws.jar"), str(tmp_path / "bundle.jar")]
    assert uses_s3a("samples/binlogs", "s3a://bucket/wh") and not uses_s3a("/data/binlogs", "hdfs://nn/wh")
    # a session on a cluster master gets them in spark.jars (shipped to the executors), after Delta's
    # (and no LogStore jar here: tests/test_s3_log_store.py has that)
    conf = session_conf("spark://h:7077", env={}, local=False, delta=True, fetched_jars=["/j/delta.jar"],
                        s3a=True, fetched_s3a_jars=fetched, log_store_jars=[])
    assert conf["spark.jars"] == ",".join(["/j/delta.jar", *fetched])
    # a local one gets them on the driver's classpath (build_session), never in spark.jars
    local = session_conf(env={}, local=True, delta=True, fetched_jars=["/j/delta.jar"], s3a=True,
                         fetched_s3a_jars=fetched, log_store_jars=[])
    assert local["spark.jars"] == "/j/delta.jar"
    assert local_classpath_env(fetched, {}) == {LAUNCH_CLASSPATH_ENV: os.pathsep.join(fetched)}
    # not asked for: nothing
    assert "spark.jars" not in session_conf("spark://h:7077", env={}, local=False, fetched_s3a_jars=fetched)
    # S3A_JARS wins over the fetched ones; every jar it names must exist
    own = tmp_path / "own-hadoop-aws.jar"
    own.write_bytes(b"")
    assert s3a_jars({S3A_JARS_ENV: str(own)}, fetched) == [str(own)]
    assert s3a_jars({}, fetched) == fetched
    with pytest.raises(FileNotFoundError, match="S3A_JARS names jars that do not exist"):
        s3a_jars({S3A_JARS_ENV: str(tmp_path / "nope.jar")}, fetched)


# a local session built as the jobs build one for an s3a:// warehouse: S3A's file system loads and
# sends a request through the AWS SDK (to a port nobody listens on: the SDK's own connection error);
# then each set of fs.s3a settings the docs give (DOCS) names S3A options and starts S3A's file system
_S3A_SESSION = textwrap.dedent("""
    import json, sys
    from pipelines.spark_session import build_session
    spark = build_session("s3a-test", "local[1]", delta=True, s3a=True)
    jvm = spark._jvm
    cls = jvm.org.apache.spark.util.Utils.classForName("org.apache.hadoop.fs.s3a.S3AFileSystem", True, False)
    print("CLASS", cls.getName())
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in {"fs.s3a.endpoint": "http://127.0.0.1:9", "fs.s3a.endpoint.region": "us-east-1",
                       "fs.s3a.path.style.access": "true", "fs.s3a.attempts.maximum": "1",
                       "fs.s3a.retry.limit": "0",
                       "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"}.items():
        conf.set(key, value)
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("s3a://bucket/"), conf)
    print("FS", fs.getClass().getName())
    try:
        fs.exists(jvm.org.apache.hadoop.fs.Path("s3a://bucket/wh"))
    except Exception as e:
        cause = e.java_exception
        while cause.getCause() is not None:
            cause = cause.getCause()
        print("REQUEST", cause.getClass().getName())
    print("SUM", spark.range(10).selectExpr("sum(id)").collect()[0][0])
    constants = jvm.java.lang.Class.forName("org.apache.hadoop.fs.s3a.Constants")
    options = {str(f.get(None)) for f in constants.getFields() if f.getType().getName() == "java.lang.String"}
    for i, settings in enumerate(json.loads(sys.argv[1])):
        unknown = sorted(set(settings) - options)
        docs = jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
        for key, value in settings.items():
            docs.set(key, value)
        fs = jvm.org.apache.hadoop.fs.FileSystem.newInstance(jvm.java.net.URI("s3a://my-bucket/"), docs)
        print("DOCS", i, fs.getClass().getName(), "unknown:", ",".join(unknown) or "none")
        fs.close()
    spark.stop()
""")


def _docs_s3a_blocks() -> list[tuple[str, dict[str, str], list[str]]]:
    """(file, fs.s3a settings, --packages) of each sh block of the README and docs/ that sets fs.s3a
    options."""
    found = []
    for doc in (REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))):
        for block in re.findall(r"```sh\n(.*?)```", doc.read_text(), re.DOTALL):
            settings = dict(re.findall(r"--conf spark\.hadoop\.(fs\.s3a\.[\w.-]+)=(\S+)", block))
            if settings:
                found.append((doc.name, settings, re.findall(r"--packages (\S+)", block)))
    return found


@pytest.mark.spark
def test_a_local_session_asked_for_s3a_loads_its_file_system(tmp_path):
    _fetched()
    env = {k: v for k, v in os.environ.items() if k not in (S3A_JARS_ENV, LAUNCH_CLASSPATH_ENV)}
    blocks = _docs_s3a_blocks()
    done = subprocess.run([sys.executable, "-c", _S3A_SESSION, json.dumps([b[1] for b in blocks])], cwd=tmp_path,
                          env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "CLASS org.apache.hadoop.fs.s3a.S3AFileSystem" in lines
    assert "FS org.apache.hadoop.fs.s3a.S3AFileSystem" in lines
    assert "REQUEST java.net.ConnectException" in lines
    assert "SUM 45" in lines
    # the docs' settings: S3A options all, and S3A starts with each set (its credentials provider too)
    assert [line for line in lines if line.startswith("DOCS")] == [
        f"DOCS {i} org.apache.hadoop.fs.s3a.S3AFileSystem unknown: none" for i in range(len(blocks))]


def test_the_docs_s3a_blocks_name_the_packages_in_force():
    blocks = _docs_s3a_blocks()
    assert "deploy.md" in {name for name, _, _ in blocks}
    # delta-spark (it brings delta-storage) and hadoop-aws (it brings the SDK bundle its POM declares)
    wanted = f"{delta_jars.artifacts()[0].coordinates},{delta_jars.s3a_packages()}"
    for name, settings, packages in blocks:
        assert packages in ([], [wanted]), f"{name}: --packages {packages}, not {wanted}"
    assert any(packages for _, _, packages in blocks)


def test_make_package_lists_the_jars_a_cluster_needs(package):
    listing = (REPO / "dist" / "jars.txt").read_text().splitlines()
    assert listing == [a.coordinates for a in delta_jars.fetched_artifacts()]
    assert listing == [*(a.coordinates for a in delta_jars.artifacts()),
                       *(a.coordinates for a in delta_jars.s3a_artifacts())]


def test_the_docs_name_the_versions_in_force():
    # the README and docs/ give the S3 set-up with versions (docs/deploy.md at least): every version
    # they name must be the derived one
    _fetched()  # (the SDK's version is what the fetch resolved)
    aws, sdk = delta_jars.s3a_artifacts()
    naming = []
    for doc in (REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))):
        text = doc.read_text()
        named = set(re.findall(r"hadoop-aws[:\-\s](\d+(?:\.\d+)+)", text)) | set(re.findall(r"\bHadoop\s(\d+\.\d+\.\d+)", text))
        bundles = set(re.findall(r"(?:awssdk:bundle:|bundle-)(\d+(?:\.\d+)+)", text))
        if named or bundles:
            naming.append(doc.name)
            assert named == {aws.version}, f"{doc.name} names hadoop-aws {named}, not {aws.version}"
            assert bundles == {sdk.version}, f"{doc.name} names the AWS SDK bundle {bundles}, not {sdk.version}"
    assert "deploy.md" in naming
