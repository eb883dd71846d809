"""What a command prints for an error, and its exit code (docs/errors.md).

Every command of the project reports an error as one line, ``error: <message>``, on stderr (the
traceback too with ``--debug``), and exits with:

====  ===========================================================================================
code  meaning
====  ===========================================================================================
0     done; ``warning:`` lines (and ``warnings`` in ``_pipeline/runs``) say what it did not do
1     the run failed: bad input in strict mode, a broken sequence, changed input, a failed query
2     the configuration or the command line is wrong: a missing or unreadable input folder, a
      warehouse that cannot be written, two binlog series in one folder, a ``--dump`` that does not
      exist or is an unfinished mydumper folder (found before Spark starts)
3     the warehouse is locked by another run (``--lock-timeout`` waits)
====  ===========================================================================================

>>> exit_code(ValueError("x")), one_line(ValueError("bad\\nsecond line"))
(1, 'ValueError: bad')
"""
from __future__ import annotations

import re

from pipelines.binlog.errors import BinlogError

EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED = 1, 2, 3


class PipelineError(Exception):
    """Root of the project's errors outside the decoder (whose own root,
    :class:`pipelines.binlog.errors.BinlogError`, keeps it free of the rest; a dump's errors are of
    that kind too). A class says its exit code (``exit_code``) and whether its message is the whole
    report (``report``: it names its file, offset, key or holder); the others print as
    ``Class: message``."""

    exit_code = EXIT_FAILED
    report = False


def exit_code(error: BaseException) -> int:
    """The exit code for ``error`` (see the table above)."""
    return error.exit_code if isinstance(error, PipelineError) else EXIT_FAILED


def one_line(error: BaseException) -> str:
    """``error`` as the line a command prints after ``error:``: a user error's own message; another
    error of the project's, its class and message (a failed silver step: a line per table after
    it); a Spark task's Python error, that error (:func:`worker_error`); any other error, its class
    and the first line of its message (a Spark ``AnalysisException``'s text without the plan and
    the Java stack that follow it)."""
    text = str(error).strip()
    if isinstance(error, BinlogError) or (isinstance(error, PipelineError) and error.report):
        return text
    if type(error).__module__.partition(".")[0] == "pipelines":  # the project's own: written as a report
        return f"{type(error).__name__}: {text}"  # (a step's error lists each table that failed, a line each)
    raised = worker_error(text)
    if raised is not None:
        return raised
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


# the last line of a Python traceback: ``package.module.Class: message`` (not indented)
_RAISED = re.compile(r"^(?:[A-Za-z_]\w*\.)*(?P<cls>[A-Za-z_]\w*): (?P<msg>.+)$")
_USER_ERROR_NAMES = frozenset({"BinlogChangesError"})  # their message is the report (file and offset)


def worker_error(text: str) -> str | None:
    """The error a Spark task's Python raised, from the text of the ``PythonException`` that
    carries its traceback (a ``binlog_changes`` query over a file that is not a sound binlog);
    None when ``text`` holds no Python traceback.

    >>> worker_error("\\n".join(["Traceback (most recent call last):", '  File "x.py", line 1, in f',
    ...     "pipelines.binlog_udf.BinlogChangesError: binlog_changes: b.000001: offset 0: NotABinlog: not a binlog"]))
    'binlog_changes: b.000001: offset 0: NotABinlog: not a binlog'
    """
    if "Traceback (most recent call last)" not in text:
        return None
    for line in reversed(text.splitlines()):
        m = _RAISED.match(line)
        if m is not None:
            return m["msg"] if m["cls"] in _USER_ERROR_NAMES else f"{m['cls']}: {m['msg']}"
    return None
