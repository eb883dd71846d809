"""pipelines.storage: the Hadoop S3A/HDFS options as one settings value, and what pyarrow,
delta-rs, obstore and the bronze tasks make of it.

The mappings are checked as plain values; then every derived form reaches a private S3 server
(moto's, ``s3_server`` fixture) with no ``AWS_*`` variable in the environment, so only the
settings built from Spark-style options can have found it.
"""
from __future__ import annotations

import doctest
import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow import fs as pafs

from pipelines import storage
from pipelines.storage import StorageSettings, delta_storage_options, from_spark_conf, s3_options

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "binlogs"

MINIO = {
    "fs.s3a.access.key": "AK",
    "fs.s3a.secret.key": "SK",
    "fs.s3a.endpoint": "minio.local:9000",
    "fs.s3a.connection.ssl.enabled": "false",
    "fs.s3a.path.style.access": "true",
}

ID_V = pa.schema([("id", pa.int64()), ("v", pa.string())])  # a small table's layout


def test_module_examples():
    assert doctest.testmod(storage).failed == 0


# -- the mapping, as plain values ------------------------------------------------------------


def test_only_storage_options_are_kept_and_empty_ones_dropped():
    s = StorageSettings.of({"fs.s3a.endpoint": "h:1", "fs.s3a.session.token": " ", "spark.app.name": "x",
                            "dfs.nameservices": "ns", "fs.defaultFS": "hdfs://ns", "io.file.buffer.size": "4"})
    assert s.hadoop == (("dfs.nameservices", "ns"), ("fs.defaultFS", "hdfs://ns"), ("fs.s3a.endpoint", "h:1"))


def test_spark_conf_gives_the_hadoop_options_without_their_prefix():
    conf = {"spark.hadoop.fs.s3a.access.key": "AK", "spark.hadoop.fs.s3a.endpoint": "h:1",
            "spark.sql.shuffle.partitions": "4", "fs.s3a.secret.key": "not a spark setting"}
    assert from_spark_conf(conf, "") == StorageSettings.of({"fs.s3a.access.key": "AK", "fs.s3a.endpoint": "h:1"})


def test_tools_read_hadoop_conf_dir_then_the_spark_conf(tmp_path, monkeypatch):
    (tmp_path / "core-site.xml").write_text(
        "<configuration><property><name>fs.s3a.endpoint</name><value> site:9000 </value></property>"
        "<property><name>fs.s3a.access.key</name><value>SITE</value></property>"
        "<property><name>hadoop.tmp.dir</name><value>/x</value></property></configuration>")
    (tmp_path / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.nameservices</name><value>ns1</value></property></configuration>")
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    s = from_spark_conf({"spark.hadoop.fs.s3a.access.key": "SPARK"})
    assert s.hadoop == (("dfs.nameservices", "ns1"), ("fs.s3a.access.key", "SPARK"), ("fs.s3a.endpoint", "site:9000"))
    assert from_spark_conf({}, hadoop_conf_dir=str(tmp_path / "none")) == StorageSettings()
    (tmp_path / "core-site.xml").write_text("not xml")
    with pytest.raises(storage.StorageError, match="core-site.xml: not a Hadoop configuration file"):
        from_spark_conf({})


def test_keys_endpoint_without_scheme_ssl_off_path_style():
    assert delta_storage_options("s3a://data/wh", StorageSettings.of(MINIO)) == {
        "aws_access_key_id": "AK", "aws_secret_access_key": "SK", "aws_endpoint": "http://minio.local:9000",
        "aws_allow_http": "true", "aws_region": "us-east-1", "aws_virtual_hosted_style_request": "false",
    }


def test_endpoint_with_scheme_wins_over_the_ssl_setting_and_region_is_kept():
    s = StorageSettings.of({**MINIO, "fs.s3a.endpoint": "https://minio.local:9000", "fs.s3a.endpoint.region": "eu-2"})
    opts = delta_storage_options("s3://data/wh", s)
    assert opts["aws_endpoint"] == "https://minio.local:9000" and "aws_allow_http" not in opts
    assert opts["aws_region"] == "eu-2"
    assert s3_options("data", StorageSettings.of({"fs.s3a.region": "ap-1"})).region == "ap-1"


def test_virtual_hosted_buckets_put_the_bucket_into_the_endpoint():
    s = StorageSettings.of({"fs.s3a.endpoint": "s3.eu-west-3.amazonaws.com"})
    assert delta_storage_options("s3a://logs/x", s) == {
        "aws_region": "eu-west-3", "aws_endpoint": "https://logs.s3.eu-west-3.amazonaws.com",
        "aws_virtual_hosted_style_request": "true",
    }


def test_per_bucket_options_win_for_their_bucket_only():
    s = StorageSettings.of({**MINIO, "fs.s3a.bucket.logs.access.key": "AK2", "fs.s3a.bucket.logs.secret.key": "SK2",
                            "fs.s3a.bucket.logs.session.token": "TOK"})
    logs, data = delta_storage_options("s3a://logs/binlogs", s), delta_storage_options("s3a://data/wh", s)
    assert (logs["aws_access_key_id"], logs["aws_secret_access_key"], logs["aws_session_token"]) == ("AK2", "SK2", "TOK")
    assert (data["aws_access_key_id"], "aws_session_token" in data) == ("AK", False)
    assert logs["aws_endpoint"] == data["aws_endpoint"]  # (not overridden: the global one)


def test_no_options_leave_the_aws_chain_to_each_library():
    assert delta_storage_options("s3a://data/wh", StorageSettings()) is None
    assert s3_options("data", StorageSettings()) == storage.S3Options()


def test_anonymous_credentials_provider_means_unsigned_requests():
    s = StorageSettings.of({"fs.s3a.aws.credentials.provider":
                            "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"})
    assert delta_storage_options("s3a://public/x", s) == {"aws_skip_signature": "true"}


def test_local_paths_need_no_options_and_hdfs_gets_its_client_options():
    s = StorageSettings.of({**MINIO, "dfs.nameservices": "ns1", "dfs.ha.namenodes.ns1": "nn1,nn2"})
    assert delta_storage_options("/data/wh", s) is None
    assert delta_storage_options("file:///data/wh", s) is None
    assert delta_storage_options("hdfs://ns1/wh", s) == {"dfs.nameservices": "ns1", "dfs.ha.namenodes.ns1": "nn1,nn2"}
    assert delta_storage_options("hdfs://nn:8020/wh", StorageSettings.of(MINIO)) is None


def test_settings_are_plain_values_without_secrets_in_their_text():
    s = StorageSettings.of(MINIO)
    assert pickle.loads(pickle.dumps(s)) == s and hash(pickle.loads(pickle.dumps(s))) == hash(s)
    assert "SK" not in repr(s) and "AK" not in repr(s) and "SK" not in repr(s3_options("b", s))


def test_local_filesystem_paths_are_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for uri in ("wh", f"file://{tmp_path}/wh", str(tmp_path / "wh")):
        fs, path = storage.arrow_filesystem(uri)
        assert isinstance(fs, pafs.LocalFileSystem) and path == str(tmp_path / "wh")


def test_a_bucketless_s3_uri_is_refused_in_one_line():
    with pytest.raises(storage.StorageError, match="needs a bucket"):
        storage.arrow_filesystem("s3a:///wh")


def test_current_settings_are_the_last_used(monkeypatch):
    monkeypatch.setattr(storage, "_current", [storage.NO_SETTINGS])
    assert storage.current() == storage.NO_SETTINGS
    s = storage.use(StorageSettings.of(MINIO))
    assert storage.current() is s
    with pytest.raises(TypeError):
        storage.use({"fs.s3a.endpoint": "h"})


# -- against a private S3 server, with no AWS_* variable -------------------------------------


@pytest.fixture
def s3(s3_server, no_aws_env, monkeypatch):
    """A new bucket and the settings that reach it (from Spark-style options), made this
    process's for the test."""
    monkeypatch.setattr(storage, "_current", [storage.NO_SETTINGS])
    settings = storage.use(from_spark_conf(s3_server.spark_conf()))
    return s3_server, s3_server.bucket(), settings


def test_pyarrow_writes_lists_and_reads_through_the_settings(s3):
    server, bucket, settings = s3
    fs, root = storage.arrow_filesystem(f"s3a://{bucket}/wh/t", settings)
    pq.write_table(pa.table({"a": [1, 2, 3]}), f"{root}/part-0.parquet", filesystem=fs)
    listed = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    assert [i.base_name for i in listed] == ["part-0.parquet"]
    assert pq.read_table(f"{root}/part-0.parquet", filesystem=fs).column("a").to_pylist() == [1, 2, 3]
    assert server.client().get_object(Bucket=bucket, Key="wh/t/part-0.parquet")["ContentLength"] > 0


def test_wrong_keys_fail_so_the_settings_are_what_reached_the_server(s3):
    server, bucket, _settings = s3
    wrong = from_spark_conf({**server.spark_conf(), "spark.hadoop.fs.s3a.secret.key": "wrong"})
    fs, root = storage.arrow_filesystem(f"s3a://{bucket}/wh", wrong)
    with pytest.raises(OSError):
        fs.get_file_info(pafs.FileSelector(root, recursive=True))


def test_delta_rs_tables_on_s3a_through_delta_io(s3):
    from pipelines import delta_io

    _server, bucket, _settings = s3
    path = f"s3a://{bucket}/wh/_pipeline/runs"
    runs = delta_io.open_table(path, "rs")
    assert not runs.exists()
    runs.append_rows([(1, "a"), (2, "b")], ID_V, delta_io.CommitInfo(txn=("t", 1)))
    assert not runs.append_rows([(1, "a")], ID_V,
                                delta_io.CommitInfo(txn=("t", 1)))  # (the transaction id, read on S3: not twice)
    assert runs.exists()
    assert sorted(runs.read_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"}, {"id": 2, "v": "b"}]
    assert runs.last_txn("t") == 1


def test_staged_parquet_committed_and_maintained_on_s3(s3):
    from pipelines import delta_io
    from pipelines.delta_io import upkeep
    from pipelines.maintenance import find_tables

    _server, bucket, settings = s3
    wh = f"s3a://{bucket}/wh"
    path = f"{wh}/bronze/binlog_changes"
    struct = delta_io.struct_of(pa.schema([("_seq", pa.int64()), ("op", pa.string())]))
    schema = delta_io.prepare_staging(path, struct)
    files = []
    for part in range(3):  # three tasks' files, written with the settings a task gets
        stager = delta_io.ParquetStager(path, schema, stats_columns=["_seq"], settings=settings)
        stager.add((part, "c"))
        files += stager.close()
    assert delta_io.commit_staged(path, files, struct, txn_app_id="bronze", txn_version=1)
    assert sorted(r["_seq"] for r in delta_io.open_table(path).read_arrow().to_pylist()) == [0, 1, 2]
    assert find_tables(wh) == [path]
    before = upkeep.storage(path, backend="rs")
    assert (before.files, before.disk_files, before.log_files) == (3, 3, 2)  # (create, then append)
    assert upkeep.compact(path, backend="rs", target_bytes=1 << 20) == (3, 1)
    upkeep.checkpoint(path, backend="rs")
    assert upkeep.vacuum(path, 0, backend="rs") == 3
    after = upkeep.storage(path, backend="rs")
    assert (after.files, after.disk_files, after.checkpoints) == (1, 1, 1)
    assert sorted(r["_seq"] for r in delta_io.open_table(path).read_arrow().to_pylist()) == [0, 1, 2]


def test_rs_scan_reads_remote_files_through_pyarrow(s3):
    from pipelines import delta_io

    _server, bucket, _settings = s3
    path = f"s3a://{bucket}/wh/bronze/binlog_changes"
    layout = pa.schema([("_seq", pa.int64()), ("db", pa.string())])
    delta_io.open_table(path, "rs").append_rows([(1, "x"), (5, "y")], layout)
    scan = delta_io.open_table(path).scan_arrow(above=("_seq", 0))
    assert scan.leaves(["_seq", "db"]).to_pylist() == [{"_seq": 1, "db": "x"}, {"_seq": 5, "db": "y"}]


def test_bronze_task_reads_an_s3_binlog_whole_and_by_range(s3):
    from pipelines.bronze.files import task_bytes, task_file

    server, bucket, settings = s3
    data = (SAMPLES / "binlog.000001").read_bytes()
    server.client().put_object(Bucket=bucket, Key="binlogs/binlog.000001", Body=data)
    uri = f"s3a://{bucket}/binlogs/binlog.000001"
    with task_file(uri, settings) as buf:
        assert bytes(buf) == data
    start, end = len(data) // 2, len(data) - 10
    with task_bytes(uri, start, end, settings) as buf:
        assert bytes(buf[start:end]) == data[start:end] and bytes(buf[:4]) == data[:4]


def test_survey_task_of_an_s3_binlog_matches_the_local_one(s3):
    from pipelines.bronze.listing import SourceFile
    from pipelines.bronze.plan import SurveyRequest, survey_file

    server, bucket, settings = s3
    data = (SAMPLES / "binlog.000001").read_bytes()
    server.client().put_object(Bucket=bucket, Key="binlogs/binlog.000001", Body=data)
    remote = SourceFile("binlog.000001", f"s3a://{bucket}/binlogs/binlog.000001", len(data), 0, 1)
    local = SourceFile("binlog.000001", f"file:{SAMPLES / 'binlog.000001'}", len(data), 0, 1)
    got, want = (survey_file(SurveyRequest(f, None, True), False, 1 << 24, settings) for f in (remote, local))
    assert got.error is None and got.plan is not None
    assert (got.sha_listed, got.head, got.plan.end, got.plan.sha256, got.plan.ranges) == \
        (want.sha_listed, want.head, want.plan.end, want.plan.sha256, want.plan.ranges)


# -- the Spark way: settings from a live session, shipped to its tasks ---------------------------


@pytest.mark.spark
def test_settings_from_a_live_session_reach_s3_in_its_tasks(s3, spark):  # noqa: F811
    from pipelines.bronze.files import task_file

    server, bucket, _settings = s3
    data = (SAMPLES / "binlog.000002").read_bytes()
    server.client().put_object(Bucket=bucket, Key="binlogs/binlog.000002", Body=data)
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    options = server.hadoop_options()
    try:
        for key, value in options.items():  # as spark.hadoop.* in the session's settings would
            hadoop.set(key, value)
        settings = storage.from_spark(spark)  # (with core-default.xml's defaults of the options read)
        uri = f"s3a://{bucket}/binlogs/binlog.000002"
        assert delta_storage_options(uri, settings) == delta_storage_options(uri, StorageSettings.of(options))
        assert "fs.s3a.attempts.maximum" not in dict(settings.hadoop)  # (only the options read are kept)
        from pipelines.spark_session import build_session

        assert build_session() is spark and storage.current() == settings  # the builder makes them the process's

        def read(u):
            with task_file(u, settings) as buf:  # in a Python worker: the settings came in the closure
                return len(buf)

        assert spark.sparkContext.parallelize([uri], 1).map(read).collect() == [len(data)]
    finally:
        for key in options:
            hadoop.unset(key)
    assert delta_storage_options("s3a://b/k", storage.from_spark(spark)) is None


from spark_fixtures import spark  # noqa: E402,F401  (the shared session fixture)


def test_storage_imports_no_spark_and_the_decoder_imports_no_storage():
    import subprocess
    import sys

    code = ("import sys; import pipelines.binlog.stream, pipelines.binlog.changes; "
            "assert 'pipelines.storage' not in sys.modules, 'the decoder imported storage'; "
            "import pipelines.storage; assert 'pyspark' not in sys.modules, 'storage imported pyspark'")
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
