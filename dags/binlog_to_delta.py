"""Airflow DAG ``binlog_to_delta``: load_snapshot >> ingest_bronze >> apply_silver, hourly, one run
at a time; and ``binlog_to_delta_maintenance``: maintain (compact, checkpoint, VACUUM), daily.

``load_snapshot`` runs only in a run triggered with the param ``dump`` (a logical dump, as
``jobs/load_snapshot.py --dump`` takes it: docs/snapshots.md); in every other run it is skipped
and bronze goes on. Bronze runs after a load or a skip, never after a failed load::

    airflow dags trigger binlog_to_delta -c '{"dump": "/backups/shop.sql.gz"}'

Each task is a ``spark-submit`` (``SparkSubmitOperator``, connection ``spark_default``)
of one of the repository's jobs::

    spark-submit --py-files dist/binlog_delta.zip --packages io.delta:delta-spark_2.13:4.0.0 \\
        --conf spark.sql.extensions=... jobs/ingest_bronze.py \\
        --config conf/pipeline.yaml --binlog-dir DIR --warehouse DIR

Where the paths come from, first match wins (``docs/deploy.md`` has the whole setup):

==============  =======================  ================================  ===================================
argument        trigger param            Airflow Variable                  default
==============  =======================  ================================  ===================================
--config        ``config``               ``binlog_delta_config``           ``$BINLOG_DELTA_CONFIG``, else
                                                                           ``<repo>/conf/pipeline.yaml``
--binlog-dir    ``binlog_dir``           ``binlog_delta_binlog_dir``       ``input`` of that config file
--warehouse     ``warehouse``            ``binlog_delta_warehouse``        ``warehouse`` of that config file
--py-files      (none)                   ``binlog_delta_py_files``         ``<repo>/dist/binlog_delta.zip``
--jars          (none)                   ``binlog_delta_jars``             ``$DELTA_JARS`` (comma-separated jars)
--packages      (none)                   ``binlog_delta_packages``         none when there are jars, else
                                                                           ``delta.packages`` of the config,
                                                                           else io.delta:delta-spark_2.13:4.0.0
==============  =======================  ================================  ===================================

A Variable set to an empty string drops its flag: ``binlog_delta_packages=""``
for a cluster whose Spark already has the Delta jars, or that gets them from
``binlog_delta_jars`` (a cluster without Maven access).

``<repo>`` is ``$BINLOG_DELTA_HOME``, else the folder above this file's ``dags/``.
Variables are read when a task runs (Jinja templates), never while the DAG file
is parsed, so parsing needs no metadata database. The config file is read at
parse time for the defaults; ``$BINLOG_DELTA_SCHEDULE`` overrides ``@hourly``
and ``$BINLOG_DELTA_SPARK_CONN`` the connection id.

``max_active_runs=1``: two runs would race on the bronze offsets and the silver
MERGEs, so a run starts only when the one before it has finished.
"""
from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import pendulum
import yaml
from airflow.exceptions import AirflowSkipException
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:  # Airflow 3
    from airflow.sdk import DAG, Param
except ImportError:  # Airflow 2.10 / 2.11
    from airflow import DAG
    from airflow.models.param import Param

DAG_ID = "binlog_to_delta"
MAINTENANCE_DAG_ID = "binlog_to_delta_maintenance"
REPO = Path(os.environ.get("BINLOG_DELTA_HOME") or Path(__file__).resolve().parents[1])
CONFIG = Path(os.environ.get("BINLOG_DELTA_CONFIG") or REPO / "conf" / "pipeline.yaml")
JOBS = REPO / "jobs"
PY_FILES = REPO / "dist" / "binlog_delta.zip"
DELTA_PACKAGES = ("io.delta:delta-spark_2.13:4.0.0",)
# delta-spark's SQL extension and catalog: what `configure_spark_with_delta_pip` sets.
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _config_path(value: str, base: Path) -> str:
    """A path of the config file as ``pipelines.config`` reads it: URIs as they are,
    plain paths against the config file's folder."""
    if _SCHEME.match(value):
        return value
    p = Path(os.path.expanduser(value))
    return str(p if p.is_absolute() else (base / p).resolve())


def read_defaults(config: Path) -> dict[str, str]:
    """The defaults of the settings in the module docstring, from the YAML config and ``$DELTA_JARS``.

    A missing or broken config fails the DAG import with a message naming the file,
    rather than scheduling jobs that could only fail.
    """
    try:
        raw = yaml.safe_load(config.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise RuntimeError(
            f"{DAG_ID}: cannot read the pipeline config {str(config)!r} ({e}); "
            "set BINLOG_DELTA_CONFIG or BINLOG_DELTA_HOME to where the repository is deployed"
        ) from None
    missing = [k for k in ("input", "warehouse") if not isinstance(raw.get(k), str) or not raw[k].strip()]
    if missing:
        raise RuntimeError(f"{DAG_ID}: {config}: expected a path for {', '.join(missing)}")
    packages = (raw.get("delta") or {}).get("packages") or []
    if isinstance(packages, str):
        packages = [p.strip() for p in packages.split(",") if p.strip()]
    # An empty list in the config means "no Maven here" on the developer machine; a cluster
    # submit still needs delta-spark, so the default falls back to DELTA_PACKAGES, unless
    # DELTA_JARS names local jars (pipelines.spark_session's order: jars first, then packages).
    jars = ",".join(j.strip() for j in os.environ.get("DELTA_JARS", "").split(",") if j.strip())
    packages = [] if jars else packages or list(DELTA_PACKAGES)
    base = config.resolve().parent
    return {
        "config": str(config),
        "binlog_dir": _config_path(raw["input"].strip(), base),
        "warehouse": _config_path(raw["warehouse"].strip(), base),
        "packages": ",".join(packages),
        "jars": jars,
        "py_files": str(PY_FILES),
    }


DEFAULTS = read_defaults(CONFIG)


def _setting(name: str, param: str | None = None) -> str:
    """Jinja for one setting: the trigger param, else the Variable, else the default."""
    lookup = f"var.value.get('binlog_delta_{name}', defaults.{name})"
    return "{{ " + (f"params.{param} or " if param else "") + lookup + " }}"


def job_args() -> list[str]:
    """The command line every job takes (see ``jobs/_bootstrap.py``)."""
    return [
        "--config", _setting("config", "config"),
        "--binlog-dir", _setting("binlog_dir", "binlog_dir"),
        "--warehouse", _setting("warehouse", "warehouse"),
        "--no-progress",
    ]


class DumpLoad(SparkSubmitOperator):
    """``spark-submit jobs/load_snapshot.py --dump <params.dump>``, skipped when the run has no ``dump``
    param (no Python task in between: the skip is this operator's own)."""

    def execute(self, context):
        if not (context.get("params") or {}).get("dump"):
            raise AirflowSkipException("no dump to load (trigger the run with the param dump to load one)")
        return super().execute(context)


def spark_job(task_id: str, script: str, extra_args: tuple[str, ...] = (), operator=SparkSubmitOperator,
              **kwargs) -> SparkSubmitOperator:
    """One ``spark-submit`` of ``jobs/<script>`` (``kwargs``: more operator arguments)."""
    return operator(
        task_id=task_id,
        application=str(JOBS / script),
        application_args=job_args() + list(extra_args),
        py_files=_setting("py_files"),
        packages=_setting("packages"),
        jars=_setting("jars"),
        conf=dict(DELTA_CONF),
        name=f"binlog-delta-{task_id.replace('_', '-')}",
        conn_id=os.environ.get("BINLOG_DELTA_SPARK_CONN", "spark_default"),
        **kwargs,
    )


def run_params(dump: bool = False) -> dict:
    """The trigger params both DAGs take: a run's own --config, --binlog-dir, --warehouse (and the
    pipeline's ``dump``: a logical dump to load first)."""
    params = {name: Param(None, type=["null", "string"], description=f"override --{flag} for this run")
              for name, flag in (("config", "config"), ("binlog_dir", "binlog-dir"), ("warehouse", "warehouse"))}
    if dump:
        params["dump"] = Param(None, type=["null", "string"],
                               description="a logical dump to load before bronze (jobs/load_snapshot.py --dump)")
    return params


with DAG(
    dag_id=DAG_ID,
    description="MySQL/MariaDB binlog files -> Delta Lake bronze change log -> silver tables",
    schedule=os.environ.get("BINLOG_DELTA_SCHEDULE", "@hourly"),
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={
        "owner": "data-eng",
        "retries": 2,
        "retry_delay": timedelta(minutes=5),
        "retry_exponential_backoff": True,
        "execution_timeout": timedelta(hours=3),
    },
    params=run_params(dump=True),
    user_defined_macros={"defaults": DEFAULTS},
    tags=["binlog", "delta", "cdc"],
    doc_md=__doc__,
) as dag:
    load_snapshot = spark_job("load_snapshot", "load_snapshot.py", ("--dump", "{{ params.dump }}"), operator=DumpLoad)
    # after a load, or when there was none to run (skipped); never after a failed one
    ingest_bronze = spark_job("ingest_bronze", "ingest_bronze.py", trigger_rule="none_failed")
    apply_silver = spark_job("apply_silver", "apply_silver.py")

    load_snapshot >> ingest_bronze >> apply_silver


# Warehouse upkeep (compaction, checkpoints and log cleanup, VACUUM: jobs/maintain.py), daily. It
# waits for the warehouse lock, so it never runs beside an ingest of the DAG above.
with DAG(
    dag_id=MAINTENANCE_DAG_ID,
    description="binlog_to_delta's warehouse upkeep: compact, checkpoint, clean up logs, VACUUM",
    schedule=os.environ.get("BINLOG_DELTA_MAINTENANCE_SCHEDULE", "@daily"),
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"owner": "data-eng", "retries": 1, "retry_delay": timedelta(minutes=30),
                  "execution_timeout": timedelta(hours=6)},
    params=run_params(),
    user_defined_macros={"defaults": DEFAULTS},
    tags=["binlog", "delta", "maintenance"],
) as maintenance_dag:
    maintain = spark_job("maintain", "maintain.py", ("--lock-timeout", "3600"))
