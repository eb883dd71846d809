"""The pipeline's log: every module logs to ``logging.getLogger(__name__)`` (so under the
``pipelines`` logger), and one handler writes each record to stderr as one line: ``warning: ...``
and ``error: ...`` for those levels, the bare message below them (a run that waits for a lock,
takes one over, or meets an injected fault says so this way).  The tests, the docs and the Airflow
task read these lines, so their words are the interface; the level is how they are filtered:
``logging.getLogger("pipelines").setLevel(logging.ERROR)`` keeps only errors.

A job's results (the ``bronze run ...``, ``silver run ...`` and ``snapshot load ...`` summary lines)
are its output, not its log: they are printed to stdout, as are the CLI tools' listings.

    >>> import io, contextlib
    >>> err = io.StringIO()
    >>> with contextlib.redirect_stderr(err):
    ...     get_logger("pipelines.example").warning("the lock could not be deleted")
    >>> err.getvalue()
    'warning: the lock could not be deleted\\n'
"""
from __future__ import annotations

import logging
import sys

ROOT = "pipelines"
_PREFIX = {logging.WARNING: "warning: ", logging.ERROR: "error: ", logging.CRITICAL: "error: "}


class _OneLine(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = _PREFIX.get(record.levelno, "") + record.getMessage()
        if record.exc_info:  # only when a caller asks for it (``--debug``)
            line += "\n" + self.formatException(record.exc_info)
        return line


class _Stderr(logging.StreamHandler):
    """stderr as it is when the record is written (pytest and ``redirect_stderr`` replace it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(_OneLine())

    @property
    def stream(self):  # noqa: D401 - the handler's stream attribute
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


def _install() -> logging.Logger:
    root = logging.getLogger(ROOT)
    if not any(isinstance(h, _Stderr) for h in root.handlers):
        root.addHandler(_Stderr())
        root.setLevel(logging.INFO)
        root.propagate = False  # one line per record, whatever the application's root logger does
    return root


def get_logger(name: str) -> logging.Logger:
    """The logger of module ``name`` (``__name__``), under the pipeline's one handler (a module run
    with ``python -m`` is ``__main__``: its logger is put under ``pipelines`` too)."""
    _install()
    return logging.getLogger(name if name == ROOT or name.startswith(ROOT + ".") else f"{ROOT}.{name}")
