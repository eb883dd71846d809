"""What a warehouse lock is: its file, the owner record it holds, the lease times of a remote one,
and the errors a run gets (:class:`WarehouseLocked`, :class:`LockLost`). Taking the lock is
:mod:`pipelines.lock` (the local flock) and :mod:`pipelines.lock.lease` (S3 and HDFS)."""
from __future__ import annotations

import datetime as _dt
import json
import os
import socket
import sys
from dataclasses import dataclass

from pipelines.errors import EXIT_LOCKED, PipelineError
from pipelines import storage

LOCK_FILE = "_pipeline/.lock"
REMOTE_SCHEMES = storage.S3_SCHEMES + storage.HDFS_SCHEMES  # warehouses locked by a lease


@dataclass(frozen=True)
class Lease:
    """How long a remote lock lives without its holder, and how often the holder renews it.

    ``seconds``: a run that stops renewing (killed, cut off) loses the lock this long after its
    last renewal; another run waits at most that long for a dead holder. ``renew_every``: the
    holder renews this often (a quarter of the lease leaves three renewals to fail before the
    lease runs out).

    >>> DEFAULT_LEASE
    Lease(seconds=120.0, renew_every=30.0)
    """

    seconds: float = 120.0
    renew_every: float = 30.0

    def __post_init__(self):
        if not 0 < self.renew_every < self.seconds:
            raise ValueError(f"a lease must be renewed more often than it lasts: renew_every={self.renew_every}, "
                             f"seconds={self.seconds}")


DEFAULT_LEASE = Lease()


def lease_of(seconds: float) -> Lease:
    """The lease of ``lock.lease_seconds`` in the configuration: renewed every quarter of it.

    >>> lease_of(20)
    Lease(seconds=20.0, renew_every=5.0)
    """
    return Lease(float(seconds), float(seconds) / 4)


class LockLost(PipelineError, RuntimeError):
    """This run's remote lock was taken over, or could not be renewed before its lease ran out."""

    report = True


class WarehouseLocked(PipelineError, RuntimeError):
    """Another run holds the warehouse lock (the message names it)."""

    exit_code = EXIT_LOCKED
    report = True

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



def is_remote_lock(warehouse: str) -> bool:
    """True for a warehouse locked by a lease (S3, HDFS), whose settings come from the session.

    >>> is_remote_lock("s3a://b/wh"), is_remote_lock("hdfs://nn:8020/wh"), is_remote_lock("/data/wh")
    (True, True, False)
    """
    return storage.scheme(warehouse) in REMOTE_SCHEMES
