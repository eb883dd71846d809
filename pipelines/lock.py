"""One run at a time per warehouse: an exclusive lock that a job holds from start to end.

An Airflow retry racing a manual run, or two schedulers, must not both write the same warehouse.
For a local warehouse (a plain path or a ``file:`` URI) the jobs take ``fcntl.flock`` on
``<warehouse>/_pipeline/.lock``, and write who holds it into the file (host, pid, start time,
command line). The kernel drops the lock when the holder exits in any way, SIGKILL included, so
a crashed run never leaves a stale lock behind; the file itself stays (it only names the last
holder).

A second run either refuses at once (``timeout=0``, the default of ``--lock-timeout``) with
"warehouse X is locked by pid N on host H since T; another run is in progress", or waits up to
``timeout`` seconds and then does whatever is left to do (usually nothing).

Other warehouses (``s3a://``, ``hdfs://``, ``abfss://``, ...) get no lock: object stores have no
flock, and a lock file there would not be atomic. Two runs there rest on what Delta gives:
every bronze append carries a transaction id (``txnAppId``/``txnVersion``), so a commit that
another run already made is skipped, and :mod:`pipelines.delta_io` retries a commit that lost a
race (conflict) after looking at the table again. Schedule such warehouses one run at a time
(Airflow ``max_active_runs=1``).

The lock is per file system node: flock over NFS is only as good as the NFS server's locking.

>>> with warehouse_lock(str(tmp_path / "wh")) as owner:  # doctest: +SKIP
...     owner.pid == os.getpid()
True
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import fcntl
import json
import os
import socket
import sys
import time
from dataclasses import asdict, dataclass
from typing import Iterator
from urllib.parse import unquote, urlparse

LOCK_FILE = "_pipeline/.lock"
EXIT_LOCKED = 3  # exit code of a job that found the warehouse locked (1: failed run, 2: bad config)


class WarehouseLocked(RuntimeError):
    """Another run holds the warehouse lock (the message names it)."""

    def __init__(self, warehouse: str, owner: "LockOwner | None", waited: float):
        self.warehouse, self.owner, self.waited = warehouse, owner, waited
        who = (f"pid {owner.pid} on host {owner.host} since {owner.started_at}" if owner is not None
               else "another process (owner not recorded yet)")
        wait = f" (waited {waited:.0f} s)" if waited > 0 else ""
        super().__init__(f"warehouse {warehouse} is locked by {who}; another run is in progress{wait}")


@dataclass(frozen=True)
class LockOwner:
    """Who holds (or last held) a warehouse lock: what the lock file says."""

    host: str
    pid: int
    started_at: str  # ISO 8601, UTC
    command: str = ""

    @classmethod
    def me(cls) -> "LockOwner":
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        return cls(socket.gethostname(), os.getpid(), now, " ".join(sys.argv))

    @classmethod
    def parse(cls, text: str) -> "LockOwner | None":
        """The owner written in a lock file; None when empty or unreadable."""
        try:
            raw = json.loads(text)
            return cls(str(raw["host"]), int(raw["pid"]), str(raw["started_at"]), str(raw.get("command", "")))
        except (ValueError, KeyError, TypeError):
            return None


def local_dir(warehouse: str) -> str | None:
    """The local folder of a warehouse given as a plain path or ``file:`` URI; None for any
    other scheme (no lock there).

    >>> local_dir("/data/wh"), local_dir("file:///data/wh"), local_dir("s3a://bucket/wh")
    ('/data/wh', '/data/wh', None)
    """
    text = str(warehouse)
    parsed = urlparse(text)
    if parsed.scheme == "file":
        return unquote(parsed.path)
    return text if parsed.scheme == "" else None


def lock_path(warehouse: str) -> str | None:
    """``<warehouse>/_pipeline/.lock`` for a local warehouse, else None."""
    folder = local_dir(warehouse)
    return None if folder is None else os.path.join(folder, LOCK_FILE)


def read_owner(warehouse: str) -> LockOwner | None:
    """The owner recorded in the warehouse's lock file (the holder, or the last one)."""
    path = lock_path(warehouse)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return LockOwner.parse(f.read())
    except FileNotFoundError:
        return None


def _holder(warehouse: str, patience: float = 2.0) -> LockOwner | None:
    """The holder of a lock just found taken: it writes its record right after taking the lock,
    so an empty or half-written file is read again for up to ``patience`` seconds."""
    deadline = time.monotonic() + patience
    while True:
        owner = read_owner(warehouse)
        if owner is not None or time.monotonic() >= deadline:
            return owner
        time.sleep(0.05)


@contextlib.contextmanager
def warehouse_lock(warehouse: str, *, timeout: float = 0.0, poll: float = 0.5) -> Iterator[LockOwner | None]:
    """Hold the warehouse's exclusive lock for the ``with`` block; yields the owner record written
    into the lock file, or None for a warehouse that cannot be locked (not local: a warning says so).

    ``timeout`` (seconds, >= 0) is how long to wait for a run in progress; then
    :class:`WarehouseLocked` is raised.

    >>> with warehouse_lock("/data/wh", timeout=600):  # doctest: +SKIP
    ...     bronze.run(spark, cfg)
    """
    if timeout < 0:
        raise ValueError(f"lock timeout must be >= 0 seconds, got {timeout}")
    path = lock_path(warehouse)
    if path is None:
        print(f"warning: no warehouse lock for {warehouse} (only local warehouses are locked): concurrent "
              f"runs rely on Delta transaction ids and commit-conflict retries", file=sys.stderr, flush=True)
        yield None
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        start, told = time.monotonic(), False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
            waited = time.monotonic() - start
            if waited >= timeout:
                raise WarehouseLocked(warehouse, _holder(warehouse), waited if timeout > 0 else 0.0)
            if not told:
                told = True
                holder = _holder(warehouse)
                who = f"pid {holder.pid} on host {holder.host}" if holder else "another run"
                print(f"warehouse {warehouse} is locked by {who}: waiting up to {timeout:g} s",
                      file=sys.stderr, flush=True)
            time.sleep(min(poll, max(timeout - waited, 0.01)))
        owner = LockOwner.me()
        record = (json.dumps(asdict(owner)) + "\n").encode()
        os.pwrite(fd, record, 0)
        os.ftruncate(fd, len(record))
        try:
            yield owner
        finally:
            os.ftruncate(fd, 0)  # nobody holds it now (the unlock happens at close)
    finally:
        os.close(fd)
