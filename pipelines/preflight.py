"""Checks a job makes before it starts Spark, so that a mistake on the command line costs well
under a second and one line (exit 2), and leaves nothing behind: no warehouse folder, no run row.

Only what can be known cheaply is checked, and only on local paths (an ``s3a://`` or ``hdfs://``
path is checked by the run itself, through the session's filesystem):

* the input folder exists, is a folder, and can be listed;
* it does not hold two binlog series (two names with one number: ``mysql-bin.000001`` and
  ``binlog.000001``), which bronze would refuse after Spark's start-up anyway;
* the warehouse is a folder (or can be made one) that this process can write to;
* a ``--dump`` exists, and a mydumper folder given as one is finished (``metadata``, not only
  ``metadata.partial``).

>>> check_input("/no/such/folder")
Traceback (most recent call last):
...
pipelines.preflight.InputError: input folder /no/such/folder does not exist
"""
from __future__ import annotations

import os
import re
import tempfile

from pipelines.config import ConfigError
from pipelines.storage import local_path

# a binlog file's name (pipelines.bronze.listing lists the folder with the same rule)
BINLOG_NAME = re.compile(r"^(?P<prefix>.+)\.(?P<seq>\d+)$")


class InputError(ConfigError):
    """A job's input or warehouse cannot be used as given (a user error: exit 2)."""

    def __init__(self, message: str):
        self.source, self.problems = "", [("", message)]
        ValueError.__init__(self, message)


def check_input(folder: str) -> None:
    """Raise :class:`InputError` when the local ``folder`` is missing, not a folder, unreadable, or
    holds two binlog series (a remote folder is not checked here)."""
    path = local_path(folder)
    if path is None:
        return
    if not os.path.exists(path):
        raise InputError(f"input folder {folder} does not exist")
    if not os.path.isdir(path):
        raise InputError(f"input {folder} is not a folder")
    try:
        names = os.listdir(path)
    except PermissionError:
        raise InputError(f"input folder {folder} cannot be read (permission denied)") from None
    clash = two_series(names)
    if clash is not None:
        a, b, number = clash
        raise InputError(f"input folder {folder} holds two binlog series: {a} and {b} have the same number "
                         f"{number}; one folder must hold one series (move one of them to a folder of its own)")


def two_series(names: list[str]) -> tuple[str, str, int] | None:
    """The first two binlog names (``<prefix>.<digits>``) of ``names`` that share a number, with
    the number, else None. A pure function.

    >>> two_series(["binlog.000001", "mysql-bin.000001", "binlog.index"])
    ('binlog.000001', 'mysql-bin.000001', 1)
    """
    seen: dict[int, str] = {}
    for name in sorted(names):
        m = BINLOG_NAME.match(name)
        if m is None or name.startswith("."):
            continue
        number = int(m.group("seq"))
        if number in seen:
            return seen[number], name, number
        seen[number] = name
    return None


def check_exist(paths: list[str], what: str) -> None:
    """Raise :class:`InputError` for the first local path of ``paths`` that does not exist
    (``what`` names it: ``dump``)."""
    for p in paths:
        path = local_path(p)
        if path is not None and not os.path.exists(path):
            raise InputError(f"{what} {p} does not exist")


def check_dumps(paths: list[str]) -> None:
    """:func:`check_exist` for ``--dump`` paths, and refuse one on object storage (``s3a://``,
    ``hdfs://``: the driver and the load's tasks read a dump by path) and a local mydumper folder
    that did not finish (``metadata.partial``, no ``metadata``: :func:`pipelines.snapshot.mydumper.check_finished`)."""
    for p in paths:
        if local_path(p) is None:
            raise InputError(f"dump {p} is not on a local or mounted file system: the load reads --dump by path; "
                             "copy it to a disk the driver and executors see (aws s3 cp, hdfs dfs -get) "
                             "and give that path")
    check_exist(paths, "dump")
    for p in paths:
        path = local_path(p)
        if path is not None and os.path.isdir(path):
            from pipelines.snapshot.errors import DumpError
            from pipelines.snapshot.mydumper import check_finished

            try:
                check_finished(path)
            except DumpError as e:
                raise InputError(str(e)) from None


def check_warehouse(warehouse: str) -> None:
    """Raise :class:`InputError` when the local ``warehouse`` is not a folder or cannot be written
    (tried with a temporary file in it, or in its nearest existing parent when it does not exist
    yet: that works for root on a read-only mount too, where permission bits say nothing)."""
    path = local_path(warehouse)
    if path is None:
        return
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise InputError(f"warehouse {warehouse} is not a folder")
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise InputError(f"warehouse {warehouse} cannot be made: {probe} is not a folder")
    try:
        with tempfile.TemporaryFile(dir=probe, prefix=".binlog-delta-probe-"):
            pass
    except OSError as e:
        where = "" if probe == path else f" (its nearest existing folder {probe})"
        raise InputError(f"warehouse {warehouse} cannot be written{where}: {e.strerror or e}") from None
