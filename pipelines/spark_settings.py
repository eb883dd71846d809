"""The settings of the SparkSession :func:`pipelines.spark_session.build_session` starts, as pure
functions: the local and common defaults, Delta and ``s3a://`` jars on the classpath (from the
environment or ``make setup``'s), the multi-driver LogStore, the quiet log4j file; whether a
master is local and whether spark-submit launched this process. Nothing here starts a session
(see :mod:`pipelines.spark_session`, whose docstring tells the ways to get Delta and S3A jars)."""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlparse

from pipelines import log_store
from pipelines.arrow_pool import ARROW_POOL_ENV

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
DELTA_JARS_ENV = "DELTA_JARS"
S3A_JARS_ENV = "S3A_JARS"
# jars Spark's launcher puts at the end of the JVM's classpath (Spark's "Hadoop free" builds name
# Hadoop's jars there); read when the launcher starts the JVM
LAUNCH_CLASSPATH_ENV = "SPARK_DIST_CLASSPATH"
JAVA_OPTIONS = "spark.driver.extraJavaOptions"

# Settings that hold for every session this module builds, local or on a cluster.
COMMON_DEFAULTS: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    # Generated classes kept per JVM (Spark's default: 100). One silver run compiles about 120
    # (two tables); with 100 the next run found none of them, compiled all again, and the JIT
    # optimised the new classes from scratch: a warm 4x silver run took 29 s instead of 22 s.
    "spark.sql.codegen.cache.maxEntries": "1000",
    # the console gets warnings and errors (Spark's INFO lines are hundreds per run, spark-submit
    # shows them); spark.conf of the configuration can set INFO or DEBUG
    "spark.log.level": "WARN",
    # Parquet timestamps as INT64 microseconds, not Spark's legacy INT96: delta-rs, which commits
    # the driver's rows into small silver tables on the delta-spark backend, reads INT96 as
    # nanoseconds, whose range ends in 2262 (a TIMESTAMP of 9999-12-31 in a row a delta-rs MERGE
    # copied came back as 1816-03-30). Silver's TIMESTAMP columns hold MySQL's 1970-2106, so none
    # did; this keeps it so for any value, and any reader reads the files as written.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}

# Settings for a small local session: no UI, few shuffle partitions, UTC everywhere.
LOCAL_DEFAULTS: dict[str, str] = {
    **COMMON_DEFAULTS,
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # Scan splits of 16 MB (default 128 MB, cut to total / parallelism): a 110 MB bronze table is
    # read in 7 tasks instead of 3, so neither core idles while the last task runs alone.
    "spark.sql.files.maxPartitionBytes": "16m",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "4g",  # local mode: the executors live in this JVM too
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    # The throughput collector: a batch job wants the most work per CPU second, and G1's concurrent
    # marking of the cached segments cost 10-15 % of a silver run on 2 cores (BENCHMARKS.md).
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC -XX:+UseParallelGC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    # delta-spark rebuilds a table's snapshot in this many tasks (default 50): on small local
    # tables that is 50 tiny tasks per table read, most of the time of a small run.
    "spark.databricks.delta.snapshotPartitions": "2",
}


def is_local_master(master: str | None) -> bool:
    """True for a master that runs in this process (``local``, ``local[N]``, or none given).

    >>> is_local_master("local[2]"), is_local_master(None), is_local_master("spark://h:7077")
    (True, True, False)
    """
    return master is None or master == "local" or master.startswith("local[")


def launched_by_spark_submit() -> bool:
    """True when this Python process was started by ``spark-submit`` (the JVM already runs)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def delta_jars_from_env(env: Mapping[str, str] | None = None) -> list[str]:
    """The jar paths named by ``DELTA_JARS``; every one must exist.

    >>> delta_jars_from_env({})
    []
    """
    return _jars_from_env(DELTA_JARS_ENV, env)


def _jars_from_env(name: str, env: Mapping[str, str] | None) -> list[str]:
    env = os.environ if env is None else env
    raw = env.get(name, "").strip()
    if not raw:
        return []
    jars = [p.strip() for p in raw.split(",") if p.strip()]
    missing = [p for p in jars if not Path(p).is_file()]
    if missing:
        raise FileNotFoundError(f"{name} names jars that do not exist: {missing} (all named: {jars})")
    return jars


def uses_s3a(*paths) -> bool:
    """True when any of ``paths`` is an ``s3a://`` path (the JVM then needs hadoop-aws).

    >>> uses_s3a("/data/binlogs", "s3a://bucket/wh"), uses_s3a("hdfs://nn/wh", None)
    (True, False)
    """
    return any(urlparse(str(p)).scheme.lower() == "s3a" for p in paths if p)


def s3a_jars(env: Mapping[str, str] | None = None, fetched: list[str] | None = None) -> list[str]:
    """The jars ``s3a://`` paths need: ``S3A_JARS`` when set (every one must exist), else
    ``fetched`` (default: the ones ``make setup`` fetched, :func:`pipelines.delta_jars.find_s3a_jars`);
    ``[]`` when there are none.

    >>> s3a_jars({}, fetched=[])
    []
    """
    named = _jars_from_env(S3A_JARS_ENV, env)
    if named:
        return named
    if fetched is None:
        from pipelines.delta_jars import find_s3a_jars

        fetched = find_s3a_jars()
    return list(fetched or [])


def _log_store_jars(built: list[str] | None) -> list[str]:
    """``built``, or (None) the LogStore jar ``make setup`` built, as a list (empty: none)."""
    if built is None:
        jar = log_store.find_jar()
        return [jar] if jar else []
    return list(built)


def local_classpath_env(jars: list[str], env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The launcher environment that puts ``jars`` at the end of a local driver JVM's classpath
    (after any the environment already names there); ``{}`` for no jars.

    >>> local_classpath_env(["/j/a.jar", "/j/b.jar"], {})
    {'SPARK_DIST_CLASSPATH': '/j/a.jar:/j/b.jar'}
    >>> local_classpath_env(["/j/a.jar"], {"SPARK_DIST_CLASSPATH": "/opt/hadoop/*"})
    {'SPARK_DIST_CLASSPATH': '/opt/hadoop/*:/j/a.jar'}
    """
    if not jars:
        return {}
    before = [p for p in (os.environ if env is None else env).get(LAUNCH_CLASSPATH_ENV, "").split(os.pathsep) if p]
    return {LAUNCH_CLASSPATH_ENV: os.pathsep.join(before + [j for j in jars if j not in before])}

def session_conf(
    master: str | None = None,
    delta_packages: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    local: bool | None = None,
    delta: bool = False,
    fetched_jars: list[str] | None = None,
    s3a: bool = False,
    fetched_s3a_jars: list[str] | None = None,
    log_store_jars: list[str] | None = None,
) -> dict[str, str]:
    """The Spark settings :func:`pipelines.spark_session.build_session` applies (a pure function,
    for tests and logs).

    ``local`` defaults to "not launched by spark-submit and no non-local master given".
    ``delta``: put delta-spark on the classpath even when neither ``DELTA_JARS`` nor
    ``delta_packages`` names it, from ``fetched_jars`` (default: :func:`pipelines.delta_jars.find_jars`).
    ``s3a``: a session that is not local gets :func:`s3a_jars` (``S3A_JARS``, else
    ``fetched_s3a_jars``) in ``spark.jars``; a local one gets them on the driver's classpath from
    :func:`pipelines.spark_session.build_session` (:func:`local_classpath_env`), not here. Both get
    the multi-driver Delta LogStore (:mod:`pipelines.log_store`) when its jar is built
    (``log_store_jars``, default: :func:`pipelines.log_store.find_jar`): the jar in ``spark.jars`` (its class extends
    delta-storage's, so it is loaded as delta-spark is) and :func:`pipelines.log_store.spark_conf`;
    ``extra_conf`` can name another LogStore.

    >>> conf = session_conf(env={}, local=True)
    >>> conf["spark.sql.session.timeZone"], conf["spark.ui.enabled"], "spark.sql.extensions" in conf
    ('UTC', 'false', False)
    >>> session_conf(delta_packages="io.delta:delta-spark_2.13:4.0.0", env={}, local=True)["spark.sql.extensions"]
    'io.delta.sql.DeltaSparkSessionExtension'
    """
    if local is None:
        local = not launched_by_spark_submit() and is_local_master(master)
    conf: dict[str, str] = dict(LOCAL_DEFAULTS if local else COMMON_DEFAULTS)
    # Arrow's allocator in the Python workers (bronze's tasks build and write Arrow): jemalloc as
    # on the driver, or the pool the user chose (pipelines.arrow_pool); PySpark gives a worker
    # the executorEnv settings
    conf[f"spark.executorEnv.{ARROW_POOL_ENV}"] = (os.environ if env is None else env).get(ARROW_POOL_ENV) or "jemalloc"
    extra = dict(extra_conf or {})

    jars = delta_jars_from_env(env)
    if not jars and not delta_packages and delta:
        if fetched_jars is None:
            from pipelines.delta_jars import find_jars

            fetched_jars = find_jars()
        jars = list(fetched_jars or [])
    store = _log_store_jars(log_store_jars) if s3a else []
    shipped = s3a_jars(env, fetched_s3a_jars) if s3a and not local else []
    if jars or store or shipped:
        existing = [j for j in extra.pop("spark.jars", "").split(",") if j]
        conf["spark.jars"] = ",".join(existing + [j for j in jars + store + shipped if j not in existing])
    if store:
        conf.update(log_store.spark_conf())
    if delta_packages and not jars:
        existing = [p for p in extra.pop("spark.jars.packages", "").split(",") if p]
        wanted = [p.strip() for p in delta_packages.split(",") if p.strip()]
        conf["spark.jars.packages"] = ",".join(existing + [p for p in wanted if p not in existing])
    if jars or delta_packages:
        conf["spark.sql.extensions"] = DELTA_EXTENSION
        conf["spark.sql.catalog.spark_catalog"] = DELTA_CATALOG
    conf.update({k: str(v) for k, v in extra.items()})
    return conf

QUIET_LOG4J = Path(__file__).resolve().parent / "jvm" / "log4j2-quiet.properties"


def quiet_conf(conf: Mapping[str, str], extra_conf: Mapping[str, str] | None, *, own_jvm: bool) -> dict[str, str]:
    """``conf`` for a session that prints only Spark's errors: a driver JVM this process starts
    (``own_jvm``: not under spark-submit) starts with :data:`QUIET_LOG4J` (no "Using Spark's default log4j profile", "Setting default log level",
    ``WARN NativeCodeLoader`` lines), and ``spark.log.level`` is left to that file unless the
    configuration's ``spark.conf`` sets it. A pure function.

    >>> quiet_conf({"spark.log.level": "WARN"}, {}, own_jvm=True)["spark.driver.extraJavaOptions"]  # doctest: +ELLIPSIS
    '-Dlog4j2.configurationFile=file:...log4j2-quiet.properties'
    """
    out = dict(conf)
    if "spark.log.level" not in (extra_conf or {}):
        if own_jvm:
            out.pop("spark.log.level", None)  # (the file's level, from the JVM's first line)
        else:  # under spark-submit the submit command's log4j decides until the context applies this:
            out["spark.log.level"] = "ERROR"  # (its INFO lines of the context's start-up would leak)
    options = out.get(JAVA_OPTIONS, "")
    if not own_jvm or "log4j2.configurationFile" in options or not QUIET_LOG4J.is_file():
        return out
    out[JAVA_OPTIONS] = f"{options} -Dlog4j2.configurationFile=file:{QUIET_LOG4J}".strip()
    return out
