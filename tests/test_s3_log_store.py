"""The multi-driver Delta LogStore on S3 (pipelines/log_store.py, pipelines/jvm/): built from its
source, chosen by sessions asked for s3a://, refusing to replace a commit file, carrying
delta-spark's writes, reads, MERGEs and conflicts, and keeping every append of two JVMs that
commit to one table at once. Against moto's S3 server (tests/s3_server.py) with real delta-spark."""
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
from log_store_race import race
from s3_server import ACCESS_KEY, REGION, SECRET_KEY, environment_without_aws
from spark_fixtures import in_ci

from pipelines import delta_jars, log_store
from pipelines.spark_settings import session_conf

REPO = Path(__file__).resolve().parents[1]
S3A_KEY, S3_KEY = log_store.conf_key("s3a"), log_store.conf_key("s3")


def _built() -> str:
    """The LogStore jar make setup built (with the jars it needs); fail under CI, else skip, without."""
    jar = log_store.find_jar()
    if jar is None:
        why = (f"the LogStore jar (or the delta-spark / S3A jars it needs) is missing from {delta_jars.JARS_DIR}: "
               f"run make setup (python -m pipelines.log_store build)")
        if in_ci():
            pytest.fail(f"CI=true: {why}")
        pytest.skip(why)
    return jar


def test_sessions_asked_for_s3a_get_the_log_store_and_its_jar():
    store = ["/j/binlog-delta-logstore-0123456789ab.jar"]
    s3a = ["/j/hadoop-aws.jar", "/j/bundle.jar"]
    local = session_conf(env={}, local=True, delta=True, fetched_jars=["/j/delta.jar"], s3a=True,
                         fetched_s3a_jars=s3a, log_store_jars=store)
    assert local[S3A_KEY] == local[S3_KEY] == log_store.LOG_STORE_CLASS == "io.binlogdelta.storage.ConditionalPutS3LogStore"
    # next to delta-spark's jars (the class extends delta-storage's: one class loader for both)
    assert local["spark.jars"] == "/j/delta.jar," + store[0]
    cluster = session_conf("spark://h:7077", env={}, local=False, delta=True, fetched_jars=["/j/delta.jar"],
                           s3a=True, fetched_s3a_jars=s3a, log_store_jars=store)
    assert cluster["spark.jars"] == ",".join(["/j/delta.jar", *store, *s3a])
    assert cluster[S3A_KEY] == log_store.LOG_STORE_CLASS
    # not asked for s3a: neither the jar nor the settings
    plain = session_conf(env={}, local=True, delta=True, fetched_jars=["/j/delta.jar"], log_store_jars=store)
    assert plain["spark.jars"] == "/j/delta.jar" and not {S3A_KEY, S3_KEY} & set(plain)
    # asked, but the jar is not built: Delta's default stays (build_session warns)
    unbuilt = session_conf(env={}, local=True, delta=True, fetched_jars=["/j/delta.jar"], s3a=True,
                           fetched_s3a_jars=s3a, log_store_jars=[])
    assert not {S3A_KEY, S3_KEY} & set(unbuilt)
    # the configuration's own choice (e.g. S3DynamoDBLogStore) wins
    own = session_conf(env={}, local=True, s3a=True, log_store_jars=store,
                       extra_conf={S3A_KEY: "io.delta.storage.S3DynamoDBLogStore"})
    assert own[S3A_KEY] == "io.delta.storage.S3DynamoDBLogStore" and own[S3_KEY] == log_store.LOG_STORE_CLASS


def test_the_jar_is_built_from_the_source_and_named_by_its_digest(tmp_path):
    jar = Path(_built())
    classpath = log_store.compile_classpath()
    assert jar.name == log_store.jar_name(log_store.SOURCE, classpath) and jar.parent == REPO / "jars"
    fetched = [delta_jars.artifacts()[1], *delta_jars.s3a_artifacts()]  # delta-storage, hadoop-aws, the SDK
    assert [p.name for p in classpath[:3]] == [a.jar_name for a in fetched]
    with zipfile.ZipFile(jar) as z:
        assert "io/binlogdelta/storage/ConditionalPutS3LogStore.class" in z.namelist()
        assert f"Implementation-Version: {log_store.digest(log_store.SOURCE, classpath)}" in z.read("META-INF/MANIFEST.MF").decode()
        major = int.from_bytes(z.read("io/binlogdelta/storage/ConditionalPutS3LogStore.class")[6:8], "big")
    assert major == 61  # javac --release 17
    # a build that finds its jar does nothing (no compiler needed); a changed source makes a new
    # jar, and the stale one goes
    folder = tmp_path / "jars"
    folder.mkdir()
    listing = delta_jars.S3A_LISTING.format(hadoop=delta_jars.hadoop_version())
    for j in [*delta_jars.find_jars(), *delta_jars.find_s3a_jars(), str(delta_jars.JARS_DIR / listing)]:
        (folder / Path(j).name).symlink_to(j)
    source = tmp_path / "ConditionalPutS3LogStore.java"
    source.write_text(log_store.SOURCE.read_text())
    first = Path(log_store.build(folder, source))
    assert first.name == jar.name and log_store.build(folder, source, javac=str(tmp_path / "no-javac")) == str(first)
    source.write_text(log_store.SOURCE.read_text() + "\n// changed\n")
    second = Path(log_store.build(folder, source))
    assert second != first and second.is_file() and not first.exists()
    # a source that does not compile: javac's own words, and nothing left behind
    source.write_text("package io.binlogdelta.storage; class Broken { int x = ; }\n")
    with pytest.raises(log_store.LogStoreBuildError, match=r"(?s)javac did not compile .*illegal start of expression"):
        log_store.build(folder, source)
    assert sorted(p.name for p in folder.glob("binlog-delta-logstore-*")) == [second.name]
    assert not list(folder.glob(".build-*"))


# One local session, built as the jobs build one for an s3a:// warehouse, on a moto bucket: the
# LogStore Delta uses, its writes called directly, then delta-spark's own writes, reads, MERGE and
# a commit that meets another writer's at its version. Prints one JSON object.
_CHECKS = textwrap.dedent("""
    import json, sys
    args = json.loads(sys.argv[1])
    import boto3
    from pipelines.spark_session import build_session
    spark = build_session("log-store-test", "local[1]", extra_conf=args["conf"], delta=True, s3a=True)
    spark.sparkContext.setLogLevel("ERROR")
    jvm, hconf, bucket = spark._jvm, spark.sparkContext._jsc.hadoopConfiguration(), args["bucket"]
    Path = jvm.org.apache.hadoop.fs.Path
    s3 = boto3.client("s3", **args["client"])
    out = {"conf": {k: spark.conf.get(k, None) for k in args["keys"]}}

    def delta_log(path):
        return jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)

    def store_of(path):  # the LogStore delta-spark uses for this path
        return delta_log(path).store().getDelegate(Path(path)).logStoreImpl()

    def outcome(call):
        try:
            call()
            return "ok"
        except Exception as e:
            j = getattr(e, "java_exception", None)
            return f"{j.getClass().getName()}: {j.getMessage()}" if j is not None else f"{type(e).__name__}: {e}"

    def lines(*texts):
        items = jvm.java.util.ArrayList()
        for t in texts:
            items.add(t)
        return items.iterator()

    def body(key):
        return s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode()

    # -- the store's own writes
    store = store_of(f"s3a://{bucket}/raw")
    out["store"] = store.getClass().getName()
    out["partial_write_visible"] = store.isPartialWriteVisible(Path(f"s3a://{bucket}/raw"), hconf)
    commit = Path(f"s3a://{bucket}/raw/_delta_log/00000000000000000000.json")
    out["first"] = outcome(lambda: store.write(commit, lines('{"first":1}'), False, hconf))
    out["second"] = outcome(lambda: store.write(commit, lines('{"second":2}'), False, hconf))
    out["after_second"] = body("raw/_delta_log/00000000000000000000.json")
    out["again"] = outcome(lambda: store.write(commit, lines('{"first":1}'), False, hconf))
    checkpoint = Path(f"s3a://{bucket}/raw/_delta_log/_last_checkpoint")
    out["overwrites"] = [outcome(lambda: store.write(checkpoint, lines(t), True, hconf)) for t in ('{"v":1}', '{"v":2}')]
    out["after_overwrites"] = body("raw/_delta_log/_last_checkpoint")
    local = Path(f"file://{args['tmp']}/_delta_log/00000000000000000000.json")
    out["not_s3a"] = outcome(lambda: store.write(local, lines("{}"), False, hconf))

    # -- delta-spark on it
    table = f"s3a://{bucket}/table"
    spark.createDataFrame([(1, "a"), (2, "b")], "id INT, v STRING").write.format("delta").save(table)
    out["table_store"] = store_of(table).getClass().getName()
    from delta.tables import DeltaTable
    source = spark.createDataFrame([(2, "B"), (3, "c")], "id INT, v STRING")
    (DeltaTable.forPath(spark, table).alias("t").merge(source.alias("s"), "t.id = s.id")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
    out["rows"] = sorted(tuple(r) for r in spark.read.format("delta").load(table).collect())
    out["history"] = sorted((r.version, r.operation) for r in DeltaTable.forPath(spark, table).history().collect())

    # -- a commit that meets another writer's: the transaction reads version 1, another client
    # writes version 2 (a transaction id of its own), then the transaction commits
    txn = delta_log(table).startTransaction()
    out["read_version"] = txn.readVersion()
    s3.put_object(Bucket=bucket, Key="table/_delta_log/00000000000000000002.json", Body=args["foreign"].encode())
    nothing = getattr(getattr(jvm.scala.collection.immutable, "Nil$"), "MODULE$")
    manual = getattr(getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$ManualUpdate$"), "MODULE$")
    out["committed"] = txn.commit(nothing, manual)
    out["foreign_txn"] = delta_log(table).update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty()).transactions().get("foreign").get()
    print("RESULT", json.dumps(out))
    spark.stop()
""")
_FOREIGN_COMMIT = '{"txn":{"appId":"foreign","version":7,"lastUpdated":1}}\n'


@pytest.fixture(scope="module")
def checks(s3_server, tmp_path_factory):
    """What :data:`_CHECKS` saw, and the bucket it used."""
    _built()
    tmp = tmp_path_factory.mktemp("log-store")
    bucket = s3_server.bucket("logstore")
    args = {"conf": s3_server.spark_conf(), "bucket": bucket, "keys": [S3A_KEY, S3_KEY], "tmp": str(tmp),
            "foreign": _FOREIGN_COMMIT,
            "client": {"endpoint_url": s3_server.endpoint, "aws_access_key_id": ACCESS_KEY,
                       "aws_secret_access_key": SECRET_KEY, "region_name": REGION}}
    done = subprocess.run([sys.executable, "-c", _CHECKS, json.dumps(args)], cwd=tmp, capture_output=True, text=True,
                          env={**environment_without_aws(), "PYTHONPATH": str(REPO)}, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(result) == 1, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(result[0][len("RESULT "):]), bucket


@pytest.mark.spark
def test_a_log_file_that_exists_is_never_replaced(checks, s3_server):
    out, bucket = checks
    assert out["conf"] == {S3A_KEY: log_store.LOG_STORE_CLASS, S3_KEY: log_store.LOG_STORE_CLASS}
    assert out["store"] == log_store.LOG_STORE_CLASS and out["partial_write_visible"] is False
    assert out["first"] == "ok"
    assert re.fullmatch(r"java\.nio\.file\.FileAlreadyExistsException: s3a://\S+/raw/_delta_log/0{20}\.json: "
                        r"exists already \(S3 answered 412 to a PUT with If-None-Match: \*\)", out["second"]), out["second"]
    assert out["after_second"] == '{"first":1}\n'
    # the same bytes again: what a PUT whose answer was lost and that the SDK retried meets
    assert out["again"] == "ok"
    # overwrites (_last_checkpoint) replace
    assert out["overwrites"] == ["ok", "ok"] and out["after_overwrites"] == '{"v":2}\n'
    assert out["not_s3a"].startswith("java.io.IOException: ConditionalPutS3LogStore needs S3AFileSystem for file:")
    # the refusal was S3's: moto answered the conditional PUT with 412 (its log colours the line)
    assert re.search(rf'"\S*PUT /{bucket}/raw/_delta_log/0{{20}}\.json HTTP/1\.1\S*" 412', s3_server.log_path.read_text())


@pytest.mark.spark
def test_delta_spark_writes_reads_and_merges_through_it(checks):
    out, _ = checks
    assert out["table_store"] == log_store.LOG_STORE_CLASS
    assert out["rows"] == [[1, "a"], [2, "B"], [3, "c"]]
    assert out["history"] == [[0, "WRITE"], [1, "MERGE"]]


@pytest.mark.spark
def test_a_commit_that_meets_another_writers_version_goes_to_the_next(checks, s3_server):
    out, bucket = checks
    # version 2 was taken by the other writer: S3 refused the PUT, Delta checked that commit for
    # conflicts (none) and committed at 3; the other writer's commit is untouched and in the table
    assert (out["read_version"], out["committed"], out["foreign_txn"]) == (1, 3, 7)
    s3 = s3_server.client()
    key = "table/_delta_log/{:020d}.json"
    assert s3.get_object(Bucket=bucket, Key=key.format(2))["Body"].read().decode() == _FOREIGN_COMMIT
    mine = [json.loads(line) for line in s3.get_object(Bucket=bucket, Key=key.format(3))["Body"].read().splitlines()]
    assert mine[0]["commitInfo"]["operation"] == "Manual Update" and mine[0]["commitInfo"]["readVersion"] == 1


@pytest.mark.spark
def test_two_jvms_appending_at_once_lose_no_commit(s3_server, tmp_path):
    _built()
    rounds = int(os.environ.get("LOG_STORE_RACE_ROUNDS", "8"))
    r = race(s3_server, tmp_path, rounds)
    print(r.summary())
    assert r.stores == [log_store.LOG_STORE_CLASS] * 2
    everything = {(w, i) for w in (0, 1) for i in range(rounds)}
    assert r.failures == {} and r.reported_ok == everything
    # every append is in exactly one version, each version after the empty create holds one
    assert r.versions == list(range(2 * rounds + 1)), r.summary()
    assert r.txns == {k: 1 for k in everything} and r.lost == set()
    assert [r.adds_per_version[v] for v in r.versions] == [0] + [1] * (2 * rounds)
    assert sorted(r.rows) == sorted(everything)


# A job under spark-submit, given the jar and settings docs/deploy.md gives ("Several writers on S3"):
# hadoop-aws and the SDK on the driver's classpath (the docs' offline way), delta-spark and the
# LogStore jar in --jars.
_SUBMITTED = textwrap.dedent("""
    import sys
    from pyspark.sql import SparkSession
    spark = SparkSession.builder.getOrCreate()
    jvm, path = spark._jvm, sys.argv[1]
    spark.range(3).write.format("delta").save(path)
    spark.range(3, 5).write.format("delta").mode("append").save(path)
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    print("STORE", log.store().getDelegate(jvm.org.apache.hadoop.fs.Path(path)).logStoreImpl().getClass().getName())
    print("COUNT", spark.read.format("delta").load(path).count())
""")


@pytest.mark.spark
def test_spark_submit_with_the_documented_settings_commits_through_it(s3_server, tmp_path):
    jar = _built()
    script = tmp_path / "job.py"
    script.write_text(_SUBMITTED)
    settings = {**log_store.spark_conf(), **s3_server.spark_conf(),
                "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
                "spark.ui.enabled": "false"}
    cmd = [str(Path(sys.executable).with_name("spark-submit")), "--master", "local[1]",
           "--jars", ",".join([*delta_jars.find_jars(), jar]),
           "--driver-class-path", os.pathsep.join(delta_jars.find_s3a_jars()),
           *(a for k, v in settings.items() for a in ("--conf", f"{k}={v}")),
           str(script), f"s3a://{s3_server.bucket('submit')}/table"]
    env = {**environment_without_aws(), "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    assert f"STORE {log_store.LOG_STORE_CLASS}" in done.stdout.splitlines()
    assert "COUNT 5" in done.stdout.splitlines()


def test_the_docs_give_the_log_store_settings_in_force():
    # docs/deploy.md tells cluster users the --jars and --conf to add: the class and keys of
    # pipelines.log_store, and the jar make package ships
    text = (REPO / "docs" / "deploy.md").read_text()
    named = dict(re.findall(r"--conf (spark\.delta\.logStore\.\w+\.impl)=(\S+)", text))
    assert named == log_store.spark_conf()
    assert f"dist/{log_store.DIST_JAR_NAME}" in text
    assert "log_store" in (REPO / "Makefile").read_text()


def test_make_package_ships_the_jar(package):
    shipped = REPO / "dist" / log_store.DIST_JAR_NAME
    assert shipped.read_bytes() == Path(_built()).read_bytes()
