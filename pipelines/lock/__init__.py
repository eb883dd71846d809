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

**S3 and HDFS warehouses** (``s3a://``, ``s3://``, ``s3n://``, ``hdfs://``) have no flock; they
get a *lease*: the object ``<warehouse>/_pipeline/.lock`` holds the same owner record plus
``lease_expires``, and

* is created only where none exists: S3 ``If-None-Match: *`` (obstore ``put(mode="create")``);
  HDFS a file written beside it, then renamed onto the name without overwriting (atomic);
* is renewed by a daemon thread every ``Lease.renew_every`` seconds while the run lives, each
  time a conditional update of the version it wrote last (S3 ``If-Match: <e_tag>``; HDFS, which
  has no conditional update, a check that the file still holds the holder's token, then a new
  record renamed over it: nobody else writes a lease that has not expired);
* is taken over by another run only once its lease has expired (its holder died, or lost the
  network, for ``Lease.seconds``), with a conditional update against the stale version (S3
  ``If-Match``; HDFS the file moved aside under a name that holds the stale token, which two
  runs cannot both do, checked, then a new record renamed in without overwriting): of two runs
  racing for a dead holder's lease one wins;
* is deleted on release (when it is still the version the holder wrote).

A holder whose renewal finds the lock changed, or that could not renew it before its lease ran
out, has *lost* it: the renewal thread says so at once on stderr, :attr:`RemoteLock.lost` turns
true, and :func:`check_held` (called by the jobs before each step, by bronze before each batch's
commits and by maintenance before each table) raises :class:`LockLost`. Commits already under
way are guarded by Delta itself: every bronze append carries a transaction id, and delta-rs and
delta-spark check each commit against the versions written since its snapshot. The lock keeps
two runs apart; it is not the only guarantee.

The S3 and HDFS settings come from the Spark session (:mod:`pipelines.storage`), so the jobs take
a remote lock right after building it (a local one before). Lease times are :class:`Lease`
(defaults: :data:`DEFAULT_LEASE`). Machines that share a remote warehouse must agree on the time
(NTP): an expiry is judged by the waiting run's clock against the time the holder wrote. The S3
service must honour conditional writes (AWS S3 does since 2024, MinIO does; one that ignored
``If-None-Match`` would let two runs both create the lock).

Other warehouses (``abfss://``, ``gs://``, ...) get no lock: a warning says so, and two runs
there rest on what Delta gives (transaction ids, commits retried after a conflict). Schedule
such warehouses one run at a time (Airflow ``max_active_runs=1``).

The flock is per file system node: flock over NFS is only as good as the NFS server's locking.

Modules (callers import every name from here): this one holds the local flock,
:func:`warehouse_lock` and :func:`read_owner`; ``model`` the lock file, the owner record,
:class:`Lease` and the errors (imports no module of the package); ``lease`` the S3 and HDFS lease
stores, :class:`RemoteLock`, :func:`remote_lock` and :func:`check_held` (imports ``model``).

>>> with warehouse_lock(str(tmp_path / "wh")) as owner:  # doctest: +SKIP
...     owner.pid == os.getpid()
True
>>> with warehouse_lock("s3a://bucket/wh", timeout=600):  # doctest: +SKIP
...     bronze.run(spark, cfg)
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from dataclasses import asdict
from typing import Iterator
from urllib.parse import unquote, urlparse

from pipelines.errors import EXIT_LOCKED
from pipelines import storage
from pipelines.lock.lease import RemoteLock, lease_store, check_held, remote_lock
from pipelines.lock.model import (
    DEFAULT_LEASE, LOCK_FILE, REMOTE_SCHEMES, Lease, LockLost, LockOwner, WarehouseLocked, is_remote_lock,
    lease_of,
)
from pipelines.logs import get_logger

__all__ = [
    "DEFAULT_LEASE", "EXIT_LOCKED", "LOCK_FILE", "REMOTE_SCHEMES", "Lease", "LockLost", "LockOwner", "RemoteLock",
    "WarehouseLocked", "check_held", "is_remote_lock", "lease_of", "local_dir", "lock_path", "read_owner",
    "remote_lock", "warehouse_lock",
]

_log = get_logger(__name__)


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


def read_owner(warehouse: str, settings: storage.StorageSettings | None = None) -> LockOwner | None:
    """The owner recorded in the warehouse's lock file (the holder, or the last one); for an S3
    or HDFS warehouse, the holder of its lease (``settings``: how to reach it)."""
    if storage.scheme(warehouse) in REMOTE_SCHEMES:
        found = lease_store(warehouse, settings).read()
        return None if found is None else LockOwner.parse(found[0].decode("utf-8", "replace"))
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
def warehouse_lock(warehouse: str, *, timeout: float = 0.0, poll: float = 0.5,
                   settings: storage.StorageSettings | None = None,
                   lease: Lease = DEFAULT_LEASE) -> Iterator[LockOwner | None]:
    """Hold the warehouse's exclusive lock for the ``with`` block; yields the owner record written
    into the lock file, or None for a warehouse that cannot be locked (neither local, S3 nor HDFS:
    a warning says so).

    ``timeout`` (seconds, >= 0) is how long to wait for a run in progress; then
    :class:`WarehouseLocked` is raised. ``settings`` and ``lease`` are those of a remote lock
    (:func:`remote_lock`; default settings: this process's, :func:`pipelines.storage.current`).

    >>> with warehouse_lock("/data/wh", timeout=600):  # doctest: +SKIP
    ...     bronze.run(spark, cfg)
    """
    if timeout < 0:
        raise ValueError(f"lock timeout must be >= 0 seconds, got {timeout}")
    if is_remote_lock(warehouse):
        with remote_lock(warehouse, timeout=timeout, poll=poll, settings=settings, lease=lease) as held:
            yield held.owner
        return
    path = lock_path(warehouse)
    if path is None:
        _log.warning(f"no warehouse lock for {warehouse} (only local, S3 and HDFS warehouses are locked): "
                     f"concurrent runs rely on Delta transaction ids and commit-conflict retries")
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
                _log.info(f"warehouse {warehouse} is locked by {who}: waiting up to {timeout:g} s")
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
