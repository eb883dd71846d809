"""Build the SparkSession the pipeline runs on, with or without delta-spark.

Four ways to get Delta Lake support on the JVM, tried in this order:

1. ``DELTA_JARS`` (environment): comma-separated local jar paths (``delta-spark_2.13-4.0.0.jar``,
   ``delta-storage-4.0.0.jar``), added to ``spark.jars``. Always used when set.
2. ``delta_packages``: Maven coordinates (e.g. ``io.delta:delta-spark_2.13:4.0.0``) resolved by
   Spark's own resolver through ``spark.jars.packages``.
3. ``delta=True`` (the caller wants delta-spark): the jars ``make setup`` fetched into ``jars/``
   (:mod:`pipelines.delta_jars`), when they are there.
4. None of these: plain Spark, which starts faster. :mod:`pipelines.delta_io` then uses delta-rs.

In cases 1 to 3 the Delta SQL extension and catalog are configured as well.  Whether delta-spark
really is loadable is answered by :func:`delta_spark_available`, not by the configuration.

``s3a://`` paths need hadoop-aws and its AWS SDK bundle on the JVM. A session asked for them
(``s3a=True``; the jobs ask when ``input`` or ``warehouse`` is an ``s3a://`` path,
:func:`pipelines.spark_settings.uses_s3a`) gets ``S3A_JARS`` (environment: comma-separated local
jar paths) when set, else the ones ``make setup`` fetched into ``jars/``
(:func:`pipelines.delta_jars.find_s3a_jars`). A local session puts them at the end of the driver
JVM's own classpath (:func:`pipelines.spark_settings.local_classpath_env`), not in ``spark.jars``:
a local executor copies every ``spark.jars`` jar into its work folder when it starts, and the SDK
bundle is 560 MB (3 s of CPU and 230 MB of memory more per session, measured in BENCHMARKS.md);
the end of the classpath also keeps the class-data archive (:mod:`pipelines.jvm_archive`) usable.
A session on a cluster master (not under ``spark-submit``) gets them in ``spark.jars``, which
ships them to the executors. Sessions not asked pay nothing.
Both also get :mod:`pipelines.log_store`'s LogStore, which makes delta-spark's commits to S3 safe
with several writers in several JVMs: its small jar in ``spark.jars`` (next to delta-spark's) and
``spark.delta.logStore.s3a.impl`` / ``.s3.impl`` (:func:`pipelines.log_store.spark_conf`).

Storage: the session's Hadoop configuration (``core-site.xml``, ``spark.hadoop.*``) is also what
the pipeline's non-Spark readers and writers use (pyarrow, delta-rs, the warehouse lock):
:func:`build_session` makes it this process's storage settings (:func:`pipelines.storage.use`).

A session that is already active (``spark-submit``, notebooks, a test fixture) is reused as it is:
static settings (jars, driver memory, master) cannot change once the JVM runs. Under
``spark-submit`` the submit command's ``--master``, ``--jars`` and ``--packages`` decide: the
builder never sets a master there (a master from the configuration is reported, not applied).

The settings themselves (:func:`pipelines.spark_settings.session_conf` and its helpers: pure
functions) are :mod:`pipelines.spark_settings`; this module starts the session, tells whether
delta-spark loads on its JVM (:func:`delta_spark_available`) and labels Spark jobs
(:func:`job_description`).
"""
from __future__ import annotations

import contextlib
import os
import sys
import weakref
from collections.abc import Mapping

from pyspark.sql import SparkSession

from pipelines import log_store, storage
from pipelines.arrow_pool import use_fast_pool
from pipelines.logs import get_logger
from pipelines.spark_settings import (
    JAVA_OPTIONS, DELTA_CATALOG, DELTA_EXTENSION, S3A_JARS_ENV, launched_by_spark_submit, is_local_master,
    local_classpath_env, quiet_conf, s3a_jars, session_conf,
)

_log = get_logger(__name__)

DELTA_PROBE_CLASS = "io.delta.tables.DeltaTable"
DEFAULT_MASTER = "local[2]"


@contextlib.contextmanager
def _environment(values: Mapping[str, str]):
    """``values`` in ``os.environ`` inside the block (the JVM Spark's launcher starts inherits them),
    the earlier values after it."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def build_session(
    app_name: str = "binlog-delta",
    master: str | None = None,
    delta_packages: str | None = None,
    extra_conf: dict | None = None,
    *,
    delta: bool = False,
    s3a: bool = False,
    log_level: str | None = None,
    verbose: bool = False,
) -> SparkSession:
    """Return the active SparkSession, or build one for this pipeline.

    Locally (not under ``spark-submit``) the master is ``master``, default ``local[2]``; under
    ``spark-submit`` the master and resources come from the submit command and ``master`` is
    not applied (a warning names it when it differs). ``delta`` asks for delta-spark, ``s3a`` for
    what ``s3a://`` paths need (see the module's docstring; under ``spark-submit`` the submit
    command's ``--jars``/``--packages`` decide both). ``log_level`` overrides the JVM's log level
    (``spark.log.level``, WARN). Without ``verbose`` a local session is quiet
    (:func:`pipelines.spark_settings.quiet_conf`: Spark's errors only, none of its start-up lines);
    ``verbose`` sets INFO.

    Example::

        spark = build_session()                                   # plain Spark, delta-rs backend
        spark = build_session(delta_packages="io.delta:delta-spark_2.13:4.0.0")
        spark = build_session(delta=True, s3a=True)               # the jars make setup fetched
        DELTA_JARS=/opt/jars/delta-spark_2.13-4.0.0.jar,/opt/jars/delta-storage-4.0.0.jar python job.py
    """
    use_fast_pool()  # (before a local JVM starts: its Python workers inherit the choice)
    active = SparkSession.getActiveSession()
    if active is not None:
        storage.use(storage.from_spark(active))
        return active
    submitted = launched_by_spark_submit()
    if submitted:
        _report_ignored_master(master)
        master = None
    local = not submitted and is_local_master(master)
    if local:
        # local Python workers run this interpreter (its venv has pyarrow and the decoder's C
        # accelerator), not whatever ``python3`` is first on PATH; PySpark reads the variable
        # when it starts the context
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    elif local:
        builder = builder.master(DEFAULT_MASTER)
    conf = session_conf(master, delta_packages, extra_conf, local=local, delta=delta, s3a=s3a and not submitted)
    launch_env = _local_s3a_classpath() if s3a and local else {}
    if s3a and not submitted and log_store.conf_key("s3a") not in conf:
        _log.warning("the multi-driver Delta LogStore is not built, so delta-spark commits to s3a:// "
                     "through Delta's default, which is safe only when every writer runs in this JVM: run make "
                     "setup (python -m pipelines.log_store build)")
    if submitted:
        conf.pop("spark.master", None)  # the submit command's master decides
        if delta:
            conf.update(_submitted_delta_conf())
    conf = quiet_conf(conf, extra_conf, own_jvm=not submitted) if not verbose else {
        **conf, **({"spark.log.level": "INFO"} if "spark.log.level" not in (extra_conf or {}) else {})}
    archive = _with_jvm_archive(conf) if local else None
    for key, value in conf.items():
        builder = builder.config(key, value)
    with _environment(launch_env):
        session = _started(builder, conf, archive)
    if log_level:
        session.sparkContext.setLogLevel(log_level.upper())
    elif submitted and not verbose and "spark.log.level" not in (extra_conf or {}):
        session.sparkContext.setLogLevel("ERROR")  # (the submit command's own start-up lines came before)
    if not verbose:
        _quiet_pyspark_loggers()
    storage.use(storage.from_spark(session))  # the S3/HDFS settings of pyarrow, delta-rs and the lock
    return session


def _started(builder, conf: dict, archive: str | None) -> SparkSession:
    """``builder``'s session; a JVM that cannot map its class-data archive (written by another
    build, damaged) is started again without it."""
    try:
        return builder.getOrCreate()
    except Exception as e:
        if archive is None or "JAVA_GATEWAY_EXITED" not in str(e):
            raise
        _log.warning(f"the JVM did not start with its class-data archive {archive} ({type(e).__name__}); "
                     f"starting without it. Remove the file, or make it again: python -m pipelines.jvm_archive "
                     f"create --force")
        return builder.config(JAVA_OPTIONS, conf[JAVA_OPTIONS].replace(archive, "").strip()).getOrCreate()



def _quiet_pyspark_loggers() -> None:
    """PySpark logs every failed query to stderr as one JSON line with the whole Java stack
    (``SQLQueryContextLogger``); the command's ``error:`` line says it once."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True


def _local_s3a_classpath() -> dict[str, str]:
    """The launcher environment of a local session asked for ``s3a://``: :func:`s3a_jars` at the end
    of the driver's classpath; a warning, and nothing, when there are none."""
    jars = s3a_jars()
    if not jars:
        _log.warning(f"s3a:// paths need hadoop-aws and the AWS SDK bundle on the JVM, and none were "
                     f"found: run make setup (python -m pipelines.delta_jars fetch), or set {S3A_JARS_ENV} to "
                     f"their local paths")
    return local_classpath_env(jars)


def _with_jvm_archive(conf: dict[str, str]) -> str | None:
    """Add the class-data archive's options (:mod:`pipelines.jvm_archive`) to a local driver's JVM
    options, unless they name an archive of their own; returns what was added (None: nothing)."""
    from pipelines import jvm_archive

    options = conf.get(JAVA_OPTIONS, "")
    if any(flag in options for flag in ("SharedArchiveFile", "ArchiveClassesAtExit", "-Xshare")):
        return None
    archive = jvm_archive.java_options()
    if not archive:
        return None
    conf[JAVA_OPTIONS] = f"{options} {archive}".strip()
    return archive


def _report_ignored_master(master: str | None) -> None:
    """Under spark-submit the submit command's master wins; say so when the config named another."""
    if not master:
        return
    submitted = _submitted_master()
    if submitted and submitted != master:
        _log.warning(f"spark.master {master!r} from the configuration is not applied: this job was "
                     f"submitted with --master {submitted}, which decides")


def _submitted_delta_conf() -> dict[str, str]:
    """Under spark-submit with delta-spark on the driver's classpath (``--jars``, ``--packages``):
    the Delta SQL extension (added to any the command named) and catalog, which delta-spark needs
    and the submit command may not have set."""
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()
    if not _delta_classes_load(SparkContext._jvm):
        return {}
    submitted = SparkConf()
    extensions = [e for e in submitted.get("spark.sql.extensions", "").split(",") if e.strip()]
    out = {"spark.sql.extensions": ",".join(extensions + ([DELTA_EXTENSION] if DELTA_EXTENSION not in extensions else []))}
    if not submitted.get("spark.sql.catalog.spark_catalog", ""):
        out["spark.sql.catalog.spark_catalog"] = DELTA_CATALOG
    return out


def _submitted_master() -> str | None:
    """The master spark-submit launched this job with (read off the running JVM's SparkConf)."""
    from pyspark import SparkConf, SparkContext

    try:
        SparkContext._ensure_initialized()  # the JVM spark-submit started: its conf has the master
        return SparkConf().get("spark.master", None)
    except Exception:  # noqa: BLE001 - only used for a warning
        return None


# SparkContext -> whether Delta's classes load in its JVM. The JVM's jars are fixed once it runs,
# and a failed lookup costs two Java exceptions (tens of ms): asked on every Delta access, the
# answer is kept per context (a stopped context's entry goes with it).
_DELTA_ON_JVM: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def delta_spark_available(spark: SparkSession) -> bool:
    """True when delta-spark can be used: its Python package imports and its classes load on the JVM.

    Spark Connect sessions have no JVM handle here and answer False. The JVM's answer is kept per
    SparkContext (its classpath does not change while it runs).

    >>> delta_spark_available(spark)  # doctest: +SKIP
    False
    """
    try:
        import delta.tables  # noqa: F401  (the delta-spark Python package)
    except ImportError:
        return False
    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        return False
    context = getattr(spark, "sparkContext", None)
    if context is None:
        return _delta_classes_load(jvm)
    found = _DELTA_ON_JVM.get(context)
    if found is None:
        found = _DELTA_ON_JVM[context] = _delta_classes_load(jvm)
    return found


def _delta_classes_load(jvm) -> bool:
    from py4j.protocol import Py4JError

    try:  # Spark's own lookup: context class loader, where spark.jars/packages land
        jvm.org.apache.spark.util.Utils.classForName(DELTA_PROBE_CLASS, False, False)
        return True
    except Py4JError:
        pass
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(DELTA_PROBE_CLASS, False, loader)
        return True
    except Py4JError:
        return False


_JOB_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")  # setJobGroup's
_DESCRIPTION = ("spark.job.description",)  # setJobDescription's


@contextlib.contextmanager
def job_description(spark: SparkSession, text: str, group: str | None = None):
    """The Spark jobs this thread starts inside are described as ``text`` (the Spark UI's job
    list, and a prefix to Delta's own descriptions), in job group ``group`` when given; the
    thread's earlier description and group are back afterwards, so a step's label does not
    stay on the next step's jobs. A Spark Connect session (no SparkContext) is left as it is."""
    context = getattr(spark, "sparkContext", None) if getattr(spark, "_jvm", None) is not None else None
    if context is None:
        yield
        return
    # (what the call below sets, and only that, is read and put back: a py4j call each, and silver
    # describes each of its tables, which may be a thousand with no Spark job of their own)
    before = {key: context.getLocalProperty(key) for key in (_JOB_PROPERTIES if group is not None else _DESCRIPTION)}
    if group is not None:
        context.setJobGroup(group, text)
    else:
        context.setJobDescription(text)
    try:
        yield
    finally:
        for key, value in before.items():
            context.setLocalProperty(key, value)
