"""Named fault points for crash and failure tests: at the n-th time a point is reached, SIGKILL
the process or raise :class:`InjectedFault`.

One environment variable arms them, read when this module is imported::

    BINLOG_DELTA_FAULT="<point>[#<n>]:kill"    # SIGKILL this process the n-th time (default 1st)
    BINLOG_DELTA_FAULT="<point>[#<n>]:raise"   # raise InjectedFault there instead
    BINLOG_DELTA_FAULT="<point>[#<n>]:wait=<file>"  # stop there until <file> exists (at most
                                               # WAIT_LIMIT s); <file>.waiting says it stopped
    BINLOG_DELTA_FAULT="trace:<file>"          # append every point reached to <file>:
                                               # "<point>\t<unix time>\t<pid>" per line

``<point>`` is a point name or a glob over names (``merge.silver.*``); ``#<n>`` counts the times a
matching point is reached in this process. Unset (or empty), :func:`point` returns at once.

The points are in :mod:`pipelines.delta_io`, around every commit, named
``<operation>.<table kind>.<when>``:

* operation: ``append``, ``merge``, ``overwrite``, ``create``, ``add_columns``;
* table kind (:func:`table_kind`): ``bronze``, ``silver``, or the name of a ``_pipeline`` table
  (``manifest``, ``quarantine``, ``ddl``, ``xa``, ``runs``, ``schema_history``, ``watermarks``);
* when: ``before`` (about to commit), ``after`` (committed), and for appends ``materialize``
  (before the DataFrame is computed; for bronze with delta-rs: the tasks have staged their Parquet
  files, the driver has not committed them).

A run with the trace mode lists every point a job reaches, which is how ``tests/test_faults.py``
enumerates them:

>>> parse("merge.silver.after#2:kill")
FaultSpec(pattern='merge.silver.after', nth=2, action='kill', trace_file=None)
>>> table_kind("/wh/_pipeline/silver_watermarks")
'watermarks'
"""
from __future__ import annotations

import fnmatch
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pipelines.errors import PipelineError
from pipelines.logs import get_logger

_log = get_logger(__name__)

ENV = "BINLOG_DELTA_FAULT"
ACTIONS = ("kill", "raise", "wait")
_FORMAT = "<point>[#<n>]:<kill|raise|wait=<file>> or trace:<file>"
WAIT_LIMIT = 600.0  # seconds a ``wait`` point waits for its file before it raises

# ``_pipeline/<name>`` tables whose kind is spelled shorter than their folder
_KIND_ALIASES = {"silver_watermarks": "watermarks"}


class InjectedFault(PipelineError, RuntimeError):
    """Raised at an armed fault point (``BINLOG_DELTA_FAULT=<point>:raise``)."""


class FaultSpecError(PipelineError, ValueError):
    """``BINLOG_DELTA_FAULT`` does not parse."""


@dataclass(frozen=True)
class FaultSpec:
    """What ``BINLOG_DELTA_FAULT`` asks for: a fault (``pattern``, ``nth``, ``action``) or a trace."""

    pattern: str | None
    nth: int
    action: str  # kill | raise | wait | trace
    trace_file: str | None = None  # trace: the file written; wait: the file waited for


def parse(text: str) -> FaultSpec:
    """Parse a ``BINLOG_DELTA_FAULT`` value.

    >>> parse("append.bronze.before:raise")
    FaultSpec(pattern='append.bronze.before', nth=1, action='raise', trace_file=None)
    >>> parse("trace:/tmp/points.txt").trace_file
    '/tmp/points.txt'
    >>> parse("merge.silver.before:wait=/tmp/go")
    FaultSpec(pattern='merge.silver.before', nth=1, action='wait', trace_file='/tmp/go')
    """
    text = text.strip()
    if text.startswith("trace:"):
        path = text[len("trace:"):]
        if not path:
            raise FaultSpecError(f"{ENV}={text!r}: trace needs a file, expected {_FORMAT}")
        return FaultSpec(None, 0, "trace", path)
    waited = None
    if ":wait=" in text:
        text, _, waited = text.partition(":wait=")
        text += ":wait"
        if not waited:
            raise FaultSpecError(f"{ENV}={text!r}: wait needs a file, expected {_FORMAT}")
    where, sep, action = text.rpartition(":")
    if not sep or not where or action not in ACTIONS or (action == "wait") != (waited is not None):
        raise FaultSpecError(f"{ENV}={text!r}: expected {_FORMAT}")
    pattern, sep, count = where.partition("#")
    nth = 1
    if sep:
        if not count.isdigit() or int(count) < 1:
            raise FaultSpecError(f"{ENV}={text!r}: the count after '#' must be an integer >= 1, got {count!r}")
        nth = int(count)
    if not pattern:
        raise FaultSpecError(f"{ENV}={text!r}: the point name is empty, expected {_FORMAT}")
    return FaultSpec(pattern, nth, action, waited)


class _Armed:
    """The armed spec of this process and how often its pattern was reached (thread safe)."""

    def __init__(self, spec: FaultSpec):
        self.spec = spec
        self.seen = 0
        self.lock = threading.Lock()

    def reach(self, name: str) -> None:
        spec = self.spec
        if spec.action == "trace":
            fd = os.open(spec.trace_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:  # one write per line: a kill right after cannot lose or tear it
                os.write(fd, f"{name}\t{time.time():.3f}\t{os.getpid()}\n".encode())
            finally:
                os.close(fd)
            return
        if not fnmatch.fnmatchcase(name, spec.pattern):
            return
        with self.lock:
            self.seen += 1
            hit = self.seen == spec.nth
        if not hit:
            return
        where = f"{name} (#{spec.nth} of {spec.pattern})"
        if spec.action == "wait":
            _wait_for(spec.trace_file, where)
            return
        if spec.action == "kill":
            _log.info(f"fault: SIGKILL at {where}")
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        raise InjectedFault(f"injected fault at {where}")


def _wait_for(path: str, where: str) -> None:
    """Stop here until ``path`` exists; ``<path>.waiting`` tells the test that this point was reached."""
    _log.info(f"fault: waiting at {where} for {path}")
    with open(path + ".waiting", "w", encoding="utf-8") as f:
        f.write(f"{where}\t{os.getpid()}\n")
    deadline = time.monotonic() + WAIT_LIMIT
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise InjectedFault(f"injected wait at {where}: {path} did not appear in {WAIT_LIMIT:g} s")
        time.sleep(0.05)


def _from_env() -> _Armed | None:
    text = os.environ.get(ENV, "").strip()
    return _Armed(parse(text)) if text else None


_armed: _Armed | None = _from_env()


def point(name: str) -> None:
    """A fault point: nothing unless ``BINLOG_DELTA_FAULT`` arms it (or traces).

    >>> point("append.bronze.before")  # unarmed: returns at once
    """
    if _armed is None:
        return
    _armed.reach(name)


def configure(text: str | None) -> FaultSpec | None:
    """Arm (or with None/"" disarm) the points of this process, as ``BINLOG_DELTA_FAULT`` would;
    the count starts again. Returns the parsed spec.

    >>> configure(None)
    """
    global _armed
    _armed = _Armed(parse(text)) if text and text.strip() else None
    return None if _armed is None else _armed.spec


def armed() -> FaultSpec | None:
    """The spec in force, or None."""
    return None if _armed is None else _armed.spec


def table_kind(path: str) -> str:
    """The kind of Delta table at ``path`` (for point names): ``bronze``, ``silver``, the name of a
    ``<warehouse>/_pipeline/<name>`` table (``silver_watermarks`` is ``watermarks``), else ``table``.

    >>> table_kind("s3a://b/wh/silver/shop/orders"), table_kind("/wh/bronze/binlog_changes")
    ('silver', 'bronze')
    >>> table_kind("/wh/_pipeline/manifest"), table_kind("/tmp/somewhere")
    ('manifest', 'table')
    """
    parts = [p for p in str(path).rstrip("/").split("/") if p]
    if len(parts) >= 3 and parts[-3] == "silver":
        return "silver"
    if len(parts) >= 2 and parts[-2] == "_pipeline":
        return _KIND_ALIASES.get(parts[-1], parts[-1])
    if len(parts) >= 2 and parts[-2] == "bronze":
        return "bronze"
    return "table"
