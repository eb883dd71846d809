"""Airflow's logging for trying the pipeline DAG on one machine with ``airflow dags test``.

Airflow 3.0's ``dags test`` adds a stdout handler to the task logger, which also passes every record
on to the console handler: each task line (the jobs' summaries among them) came out twice. This
configuration gives the task logger the console handler beside its file handler, and stops it
passing records on::

    export AIRFLOW__LOGGING__LOGGING_CONFIG_CLASS=local_logging.LOGGING_CONFIG

(Airflow puts its DAGs folder on ``sys.path`` before it reads the logging configuration; the
folder's ``.airflowignore`` keeps this file out of DAG parsing.)
"""
from copy import deepcopy

from airflow.config_templates.airflow_local_settings import DEFAULT_LOGGING_CONFIG

LOGGING_CONFIG = deepcopy(DEFAULT_LOGGING_CONFIG)
LOGGING_CONFIG["loggers"]["airflow.task"].update(handlers=["task", "console"], propagate=False)
