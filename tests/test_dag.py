"""dags/binlog_to_delta.py parsed by a real Airflow ``DagBag`` (tests/test_docs.py runs it with ``airflow dags test``).

Airflow lives in its own venv, ``.venv-airflow/`` (``make setup`` builds it from
``requirements-airflow.txt``), because its pins clash with ours. The DagBag runs in a
subprocess with that venv's Python; it writes what it found as JSON for the asserts
here. Parsing needs no metadata database: ``AIRFLOW_HOME`` is a temporary folder.
"""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from pipelines.config import load_config

REPO = Path(__file__).resolve().parents[1]
AIRFLOW_PYTHON = REPO / ".venv-airflow" / "bin" / "python"
DAG_ID = "binlog_to_delta"
MAINTENANCE_DAG_ID = "binlog_to_delta_maintenance"
OPERATOR = "airflow.providers.apache.spark.operators.spark_submit.SparkSubmitOperator"
PARSE_SECONDS = 60

# Runs inside .venv-airflow: fill a DagBag, describe every DAG and render its templates with a
# stand-in context (params, and Variables as a plain dict: `var.value.get(name, default)`).
INSPECT = r'''
import json, sys, time
t0 = time.monotonic()
try:
    from airflow.dag_processing.dagbag import DagBag  # Airflow >= 3.1
except ImportError:
    from airflow.models.dagbag import DagBag
bag = DagBag(dag_folder=sys.argv[1], include_examples=False)
contexts = {
    "defaults": {"params": {"config": None, "binlog_dir": None, "warehouse": None, "dump": None},
                 "var": {"value": {}}},
    "dump_given": {"params": {"config": None, "binlog_dir": None, "warehouse": None, "dump": "/backups/shop.sql"},
                   "var": {"value": {}}},
    "overrides": {"params": {"config": None, "binlog_dir": "/param/binlogs", "warehouse": None, "dump": None},
                  "var": {"value": {"binlog_delta_warehouse": "/var/warehouse", "binlog_delta_packages": ""}}},
}
try:
    from airflow.serialization.serialized_objects import DagSerialization as Serializer  # Airflow >= 3.2
except ImportError:
    from airflow.serialization.serialized_objects import SerializedDAG as Serializer
out = {"import_errors": {str(k): str(v) for k, v in bag.import_errors.items()}, "dags": {}}
for dag_id, dag in bag.dags.items():
    try:  # what the scheduler stores: a DAG that does not serialize never runs
        serialized = sorted(Serializer.from_dict(Serializer.to_dict(dag)).task_dict)
    except Exception as e:
        serialized = f"{type(e).__name__}: {e}"
    tasks = {}
    for t in dag.tasks:
        info = {
            "operator": type(t).__module__ + "." + type(t).__name__,
            "upstream": sorted(t.upstream_task_ids),
            "downstream": sorted(t.downstream_task_ids),
            "retries": t.retries,
            "application": getattr(t, "application", None),
            "application_args": getattr(t, "application_args", None),
            "conf": getattr(t, "conf", None),
            "trigger_rule": str(getattr(t.trigger_rule, "value", t.trigger_rule)),
        }
        for name, ctx in contexts.items():
            info[name] = {f: t.render_template(getattr(t, f, None), ctx)
                          for f in ("application_args", "py_files", "packages", "jars")}
        tasks[t.task_id] = info
    out["dags"][dag_id] = {
        "fileloc": dag.fileloc,
        "serialized": serialized,
        "max_active_runs": dag.max_active_runs,
        "catchup": dag.catchup,
        "schedule": str(getattr(dag, "schedule", None) or getattr(dag, "schedule_interval", None)),
        "tasks": tasks,
    }
out["seconds"] = time.monotonic() - t0
with open(sys.argv[2], "w") as f:
    json.dump(out, f)
'''


def _require_airflow() -> None:
    if not AIRFLOW_PYTHON.exists():
        pytest.fail(
            f"{AIRFLOW_PYTHON.relative_to(REPO)} is missing: run `make setup` "
            "(it builds .venv-airflow/ from requirements-airflow.txt)",
            pytrace=False,
        )


def _inspect(tmp: Path, **env_extra: str) -> dict:
    """Fill a DagBag from dags/ with .venv-airflow's Python; what it found, as a dict."""
    _require_airflow()
    home = tmp / "airflow-home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AIRFLOW", "BINLOG_DELTA_", "DELTA_JARS", "PYTHON", "VIRTUAL_ENV"))}
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
        **env_extra,
    })
    out = tmp / "dagbag.json"
    started = time.monotonic()
    r = subprocess.run([str(AIRFLOW_PYTHON), "-c", INSPECT, str(REPO / "dags"), str(out)],
                       cwd=tmp, env=env, capture_output=True, text=True, timeout=PARSE_SECONDS * 2)
    elapsed = time.monotonic() - started
    assert r.returncode == 0, f"DagBag subprocess failed ({r.returncode}):\n{r.stderr[-4000:]}"
    assert elapsed < PARSE_SECONDS, f"parsing dags/ took {elapsed:.1f} s (limit {PARSE_SECONDS} s)"
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def bag(tmp_path_factory) -> dict:
    return _inspect(tmp_path_factory.mktemp("dagbag"))


@pytest.fixture(scope="module")
def dag(bag) -> dict:
    assert DAG_ID in bag["dags"], f"{DAG_ID} not found; DAGs: {sorted(bag['dags'])}"
    return bag["dags"][DAG_ID]


def _arg(args: list[str], flag: str) -> str:
    assert flag in args, f"{flag} missing from {args}"
    i = args.index(flag)
    assert i + 1 < len(args) and not args[i + 1].startswith("--"), f"{flag} has no value in {args}"
    return args[i + 1]


def test_dag_folder_imports_cleanly(bag):
    assert bag["import_errors"] == {}
    assert sorted(bag["dags"]) == [DAG_ID, MAINTENANCE_DAG_ID]
    assert Path(bag["dags"][DAG_ID]["fileloc"]) == REPO / "dags" / "binlog_to_delta.py"
    assert bag["dags"][DAG_ID]["serialized"] == ["apply_silver", "ingest_bronze", "load_snapshot"]


def test_tasks_run_bronze_then_silver(dag):
    tasks = dag["tasks"]
    assert sorted(tasks) == ["apply_silver", "ingest_bronze", "load_snapshot"]
    assert (tasks["load_snapshot"]["upstream"], tasks["load_snapshot"]["downstream"]) == ([], ["ingest_bronze"])
    assert (tasks["ingest_bronze"]["upstream"], tasks["ingest_bronze"]["downstream"]) == (["load_snapshot"],
                                                                                          ["apply_silver"])
    # bronze runs after the optional load, or when it was skipped (no dump), never after a failed one
    assert tasks["ingest_bronze"]["trigger_rule"] == "none_failed"
    assert tasks["apply_silver"]["trigger_rule"] == "all_success"
    assert (tasks["apply_silver"]["upstream"], tasks["apply_silver"]["downstream"]) == (["ingest_bronze"], [])


def test_runs_never_overlap_and_do_not_catch_up(dag):
    assert dag["max_active_runs"] == 1
    assert dag["catchup"] is False
    assert dag["schedule"] == "@hourly"
    assert all(t["retries"] >= 1 for t in dag["tasks"].values())


def test_tasks_spark_submit_the_repository_jobs(dag):
    for task_id, script in (("ingest_bronze", "ingest_bronze.py"), ("apply_silver", "apply_silver.py"),
                            ("load_snapshot", "load_snapshot.py")):
        task = dag["tasks"][task_id]
        # (the load is SparkSubmitOperator's subclass that skips itself in a run without a dump;
        # Airflow loads the DAG file under a module name of its own)
        assert task["operator"] == OPERATOR if task_id != "load_snapshot" else task["operator"].endswith(
            "binlog_to_delta.DumpLoad")
        assert Path(task["application"]) == REPO / "jobs" / script
        assert (REPO / "jobs" / script).is_file()
        assert task["conf"]["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
        assert task["conf"]["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
        for flag in ("--config", "--binlog-dir", "--warehouse"):
            _arg(task["application_args"], flag)


def test_the_optional_load_takes_the_runs_dump(dag):
    task = dag["tasks"]["load_snapshot"]
    assert _arg(task["dump_given"]["application_args"], "--dump") == "/backups/shop.sql"
    assert _arg(task["dump_given"]["application_args"], "--warehouse") == load_config(REPO / "conf" /
                                                                                      "pipeline.yaml").warehouse


def test_default_arguments_agree_with_the_pipeline_config(dag):
    conf = REPO / "conf" / "pipeline.yaml"
    cfg = load_config(conf)
    for task in dag["tasks"].values():
        rendered = task["defaults"]
        args = rendered["application_args"]
        assert _arg(args, "--config") == str(conf)
        assert _arg(args, "--binlog-dir") == cfg.input
        assert _arg(args, "--warehouse") == cfg.warehouse
        assert rendered["py_files"] == str(REPO / "dist" / "binlog_delta.zip")
        assert rendered["packages"] == (",".join(cfg.delta.packages) or "io.delta:delta-spark_2.13:4.0.0")
        assert rendered["jars"] == ""


def test_params_and_variables_override_the_defaults(dag):
    for task in dag["tasks"].values():
        rendered = task["overrides"]
        assert _arg(rendered["application_args"], "--binlog-dir") == "/param/binlogs"
        assert _arg(rendered["application_args"], "--warehouse") == "/var/warehouse"
        assert rendered["packages"] == ""  # an empty Variable drops --packages


def test_delta_jars_replace_packages(tmp_path):
    jars = "/opt/jars/delta-spark_2.13-4.0.0.jar,/opt/jars/delta-storage-4.0.0.jar"
    bag = _inspect(tmp_path, DELTA_JARS=jars)
    for task in bag["dags"][DAG_ID]["tasks"].values():
        assert (task["defaults"]["jars"], task["defaults"]["packages"]) == (jars, "")


def test_unreadable_config_is_an_import_error_naming_the_file(tmp_path):
    missing = tmp_path / "nowhere" / "pipeline.yaml"
    bag = _inspect(tmp_path, BINLOG_DELTA_CONFIG=str(missing))
    assert bag["dags"] == {}
    [error] = bag["import_errors"].values()
    assert str(missing) in error and "BINLOG_DELTA_CONFIG" in error


def test_maintenance_dag_submits_the_maintain_job_and_waits_for_the_lock(bag):
    m = bag["dags"][MAINTENANCE_DAG_ID]
    assert m["serialized"] == ["maintain"] and m["max_active_runs"] == 1
    task = m["tasks"]["maintain"]
    assert task["operator"] == OPERATOR and Path(task["application"]) == REPO / "jobs" / "maintain.py"
    args = task["defaults"]["application_args"]
    assert _arg(args, "--lock-timeout") == "3600"
    cfg = load_config(REPO / "conf" / "pipeline.yaml")
    assert _arg(args, "--warehouse") == cfg.warehouse


# A real run, `airflow dags test` of this DAG as docs/deploy.md gives it: tests/test_docs.py runs that
# block as written and checks silver.
