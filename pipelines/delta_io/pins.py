"""Commits conditional on the version a writer read: a *pin*.

A writer that decides what to write from what a table holds (silver: its watermark, its stored
keys, its schema) must not commit once another writer's commit has made that read stale: two runs
of the pipeline at once would otherwise MERGE the same changes twice into a keyless table, bring
back a row the other run deleted, or overwrite the other run's MERGE with a rewrite of the rows it
read. Inside ``with pinned(path):`` every commit to that table through this package is made
against the version the pin holds, and moves the pin to the version it made; a commit that finds
the table moved on raises :class:`StaleRead` (no retry): the caller plans again from what the
table holds now.

* delta-rs: the commit is made from the table loaded at the pinned version with
  ``max_commit_retries=0``, so delta-rs refuses it when any version follows (no conflict
  resolution, no rebase); a table pinned as missing is created with ``mode="error"``.
* delta-spark: the commit records the transaction id ``(PIN_APP_ID, version + 1)`` and a token of
  the pin in its user metadata. delta-spark reads that id in the transaction, so another writer's
  commit with the same id fails this one (``ConcurrentTransactionException``), or, if it came
  before the transaction began, makes delta-spark skip it as already done: the token, looked for
  in the history after the command, tells which. Only commits that change neither data nor schema
  (maintenance's compaction, table properties) may come in between; delta-spark's conflict checks
  fail the others.

Reads inside the pin see the table as the pin says (existence; delta-rs reads at the pinned
version); a read that sees a later version can only make the conditional commit fail, never land
on a stale plan.

>>> with pinned(path, spark=spark, backend="rs"):  # doctest: +SKIP
...     mark = read_watermark(path)           # plan from what the table holds...
...     merge(spark, path, source, on, clauses)  # ...and commit only if nothing came in between
"""
from __future__ import annotations

import contextlib
import contextvars
import json
import uuid
from dataclasses import dataclass, field
from typing import Iterator

from pipelines.delta_io.backend import DeltaIOError

PIN_APP_ID = "binlog-delta-pin"  # delta-spark: the transaction id every pinned commit records


class StaleRead(DeltaIOError):
    """A pinned commit found that the table changed since the version it was planned on (another
    writer committed): nothing of it landed; plan again from the table as it is now."""


@dataclass
class Pin:
    """The version of one table a writer planned on; ``None``: the table did not exist."""

    path: str
    version: int | None
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    spark: object = field(default=None, repr=False, compare=False)  # how to look at the table again
    backend: str = field(default="auto", compare=False)

    def landed(self, version: int | None = None) -> None:
        """One commit of ours landed: at ``version`` (delta-spark finds it), else the next one."""
        self.version = version if version is not None else (0 if self.version is None else self.version + 1)

    def stale(self, what: str, detail: str = "") -> StaleRead:
        had = "no table" if self.version is None else f"version {self.version}"
        more = f" ({detail})" if detail else ""
        return StaleRead(f"{what} {self.path}: the table changed after {had}, which this commit was planned "
                         f"on; another writer committed first{more}")

    def tag(self, user_metadata: str | None) -> str:
        """``user_metadata`` with this pin's token (a JSON object; other text is kept under ``text``)."""
        meta: dict = {}
        if user_metadata:
            try:
                parsed = json.loads(user_metadata)
            except ValueError:
                parsed = None
            meta = dict(parsed) if isinstance(parsed, dict) else {"text": user_metadata}
        meta[TOKEN_KEY] = self.token
        return json.dumps(meta)


TOKEN_KEY = "pin"  # the user-metadata key of a pinned delta-spark commit's token


def token_of(user_metadata: str | None) -> str | None:
    """The pin token a commit's user metadata carries, or None.

    >>> token_of('{"silver_watermark": "0001", "pin": "ab12"}'), token_of("not json")
    ('ab12', None)
    """
    try:
        meta = json.loads(user_metadata or "")
    except ValueError:
        return None
    return meta.get(TOKEN_KEY) if isinstance(meta, dict) else None


_PINS: contextvars.ContextVar[dict[str, Pin]] = contextvars.ContextVar("delta_io_pins", default={})


def _key(path: str) -> str:
    return str(path).rstrip("/")


def pin_of(path: str) -> Pin | None:
    """The pin this thread holds on ``path``, if any."""
    return _PINS.get().get(_key(path))


@contextlib.contextmanager
def pinned(path: str, version: int | None, *, spark=None, backend: str = "auto") -> Iterator[Pin]:
    """Pin ``path`` at ``version`` (None: the table does not exist) for the ``with`` block, in this
    thread (see the module's docstring); :func:`pipelines.delta_io.reads.pinned` finds the version."""
    pins = dict(_PINS.get())
    if _key(path) in pins:
        raise ValueError(f"{path} is pinned already in this thread")
    pin = Pin(_key(path), version, spark=spark, backend=backend)
    pins[pin.path] = pin
    reset = _PINS.set(pins)
    try:
        yield pin
    finally:
        _PINS.reset(reset)
