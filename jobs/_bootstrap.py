"""Shared plumbing of the ``jobs/*.py`` entry points.

Importing it puts the repository root on ``sys.path`` when ``pipelines`` is not
importable (``spark-submit jobs/x.py`` with a Python that did not install the
project). It also holds the command line every job shares::

    --config FILE       YAML configuration (default: conf/pipeline.yaml of this repo)
    --binlog-dir DIR    overrides ``input``      (contract: other tools use this flag)
    --warehouse DIR     overrides ``warehouse``  (contract: other tools use this flag)
    --no-progress       no progress bars
    --delta-backend B   overrides ``delta.backend``: auto | spark | rs
    --lock-timeout S    wait up to S seconds for a run in progress on the same warehouse
                        (default 0: refuse at once); see pipelines/lock/
    --debug             a traceback with an error (without it: one line, ``error: ...``)
    --verbose           Spark's own start-up lines, and its log at INFO once the session is up
                        (without it: Spark's errors only)

Exit codes (docs/errors.md): 0 done (``warning:`` lines say what it did not do), 1 failed run (bad
input in strict mode, a broken sequence, a lost remote lock, a failed query), 2 bad configuration or
command line (a missing or unreadable input folder, a warehouse that cannot be written: checked
before Spark starts, leaving nothing behind), 3 the warehouse is locked by another run.

The lock (:mod:`pipelines.lock`): a local warehouse's flock is taken before the Spark session is
built; an S3 or HDFS warehouse's lease right after, because its settings come from the session
(``spark.hadoop.fs.s3a.*``, ``core-site.xml``: :mod:`pipelines.storage`).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import sys
from pathlib import Path
from typing import Callable, Iterator, Sequence

REPO_ROOT = Path(__file__).resolve().parents[1]

_spec = importlib.util.find_spec("pipelines")
if _spec is None or _spec.origin is None or (  # not importable, only as a namespace package, or another
        (REPO_ROOT / "pipelines" / "__init__.py").is_file()  # checkout's (an editable install elsewhere):
        and not Path(_spec.origin).resolve().is_relative_to(REPO_ROOT)):  # the job runs the code beside it
    sys.path.insert(0, str(REPO_ROOT))


def parse_args(description: str | None, argv: Sequence[str] | None = None,
               extra: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """The flags every job takes (``extra`` adds a job's own)."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    if extra is not None:
        extra(p)
    p.add_argument("--config", default=str(REPO_ROOT / "conf" / "pipeline.yaml"), help="YAML configuration file")
    p.add_argument("--binlog-dir", help="folder of binlog files (any Hadoop path); overrides 'input'")
    p.add_argument("--warehouse", help="warehouse folder (any Hadoop path); overrides 'warehouse'")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    from pipelines.config import DELTA_BACKENDS

    p.add_argument("--delta-backend", choices=DELTA_BACKENDS,
                   help="Delta backend; overrides 'delta.backend' (auto: delta-rs on a local master, "
                        "delta-spark on a cluster whose classpath has it)")
    p.add_argument("--lock-timeout", type=_seconds, default=0.0, metavar="SECONDS",
                   help="wait this long for another run on the same warehouse to finish (default 0: refuse at once)")
    add_output_flags(p)
    return p.parse_args(argv)


def add_output_flags(p: argparse.ArgumentParser) -> None:
    """``--debug`` and ``--verbose``, which every command line of the project takes."""
    p.add_argument("--debug", action="store_true", help="print the traceback of an error (default: one line)")
    p.add_argument("--verbose", action="store_true",
                   help="Spark's start-up lines, and its log at INFO once the session is up "
                        "(default: its errors only)")


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def overrides(args: argparse.Namespace) -> dict:
    """The config keys the command line overrides (``None`` = not given)."""
    return {
        "input": args.binlog_dir,
        "warehouse": args.warehouse,
        "progress": False if args.no_progress else None,
        "delta.backend": args.delta_backend,
    }


def main(job: Callable[[], int]) -> int:
    """Run ``job`` and turn every error into one line on stderr and an exit code (the traceback
    too with ``--debug``): 2 for a bad configuration or command line, 3 for a warehouse locked by
    another run, 1 for a failed run (:func:`pipelines.errors.exit_code`)."""
    from pipelines.errors import exit_code, one_line
    from pipelines.logs import get_logger

    try:
        return job()
    except Exception as e:  # noqa: BLE001 - the report is the line; the traceback is --debug's
        if "--debug" in sys.argv[1:]:
            import traceback

            traceback.print_exc()
        get_logger("pipelines.jobs").error(one_line(e))
        return exit_code(e)


@contextlib.contextmanager
def warehouse_lock(cfg, args: argparse.Namespace) -> Iterator[None]:
    """Hold the warehouse lock (:mod:`pipelines.lock`) for the whole job."""
    from pipelines.lock import lease_of, warehouse_lock as lock

    with lock(cfg.warehouse, timeout=args.lock_timeout, lease=lease_of(cfg.lock.lease_seconds)):
        yield


def locks(cfg, args: argparse.Namespace) -> tuple[contextlib.AbstractContextManager, contextlib.AbstractContextManager]:
    """The lock to take before the session is built and the one to take right after it: a local
    warehouse's flock first, an S3 or HDFS warehouse's lease second (its settings come from the
    session)."""
    from pipelines.lock import is_remote_lock

    if is_remote_lock(cfg.warehouse):
        return contextlib.nullcontext(), warehouse_lock(cfg, args)
    return warehouse_lock(cfg, args), contextlib.nullcontext()


def session(cfg, verbose: bool = False):
    """The SparkSession for ``cfg`` (see :func:`pipelines.spark_session.build_session`).

    delta-spark goes on the classpath whenever its jars are at hand (``DELTA_JARS``,
    ``delta.packages``, or the ones ``make setup`` fetched): it costs no measurable start-up time,
    and the delta-rs backend hands it the few changes delta-rs cannot make (adding a column to a
    column-mapped table). Which backend writes is ``delta.backend``: ``auto`` keeps delta-rs on a
    local master, the faster one on one machine. hadoop-aws and its AWS SDK go on it when ``input``
    or ``warehouse`` is an ``s3a://`` path (``S3A_JARS``, or the ones ``make setup`` fetched): the
    SDK is large, so other runs go without. Under spark-submit the submit command decides.
    ``verbose``: Spark's start-up lines and its INFO log (:func:`pipelines.spark_settings.quiet_conf`).
    """
    from pipelines.spark_session import build_session
    from pipelines.spark_settings import uses_s3a

    packages = ",".join(cfg.delta.packages) if cfg.delta.backend != "rs" else ""
    return build_session(cfg.spark.app_name, cfg.spark.master, packages or None, dict(cfg.spark.conf), delta=True,
                         s3a=uses_s3a(cfg.input, cfg.warehouse), verbose=verbose)


def run_steps(description: str | None, argv: Sequence[str] | None, *steps: Callable,
              extra: Callable[[argparse.ArgumentParser], None] | None = None,
              settings: Callable[[argparse.Namespace], dict] | None = None, with_args: bool = False,
              reads_input: bool = False, checks: Callable[[argparse.Namespace], None] | None = None) -> int:
    """A job: parse the shared flags (and ``extra``'s), load the configuration with the command
    line's overrides (and ``settings(args)``'s), check the input folder (``reads_input``) and the
    warehouse before Spark starts, and what ``checks(args)`` checks of a job's own flags
    (:mod:`pipelines.preflight`: a mistake there is one line and exit 2, and leaves nothing
    behind), then, holding the warehouse lock (one run at a time per
    warehouse), run each of ``steps`` as ``step(spark, cfg)`` in one Spark session
    (``with_args``: ``step(spark, cfg, args)``, for a job's own flags).
    A lost remote lock stops the job before the next step (:func:`pipelines.lock.check_held`)."""
    from pipelines.config import load_config
    from pipelines.lock import check_held
    from pipelines.preflight import check_input, check_warehouse

    args = parse_args(description, argv, extra)
    cfg = load_config(args.config, {**overrides(args), **(settings(args) if settings else {})})
    if reads_input:
        check_input(cfg.input)
    if checks is not None:
        checks(args)
    check_warehouse(cfg.warehouse)
    before, after = locks(cfg, args)
    with before:
        spark = session(cfg, verbose=args.verbose)
        try:
            with after:
                for step in steps:
                    check_held()
                    step(spark, cfg, args) if with_args else step(spark, cfg)
        finally:
            spark.stop()
    return 0
