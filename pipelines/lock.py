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

>>> with warehouse_lock(str(tmp_path / "wh")) as owner:  # doctest: +SKIP
...     owner.pid == os.getpid()
True
>>> with warehouse_lock("s3a://bucket/wh", timeout=600):  # doctest: +SKIP
...     bronze.run(spark, cfg)
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
import threading
import time
import uuid
import weakref
from dataclasses import asdict, dataclass
from typing import Iterator
from urllib.parse import unquote, urlparse

from pipelines.errors import EXIT_LOCKED, PipelineError
from pipelines import storage
from pipelines.logs import get_logger

_log = get_logger(__name__)

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
        found = _lease_store(warehouse, settings).read()
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


def is_remote_lock(warehouse: str) -> bool:
    """True for a warehouse locked by a lease (S3, HDFS), whose settings come from the session.

    >>> is_remote_lock("s3a://b/wh"), is_remote_lock("hdfs://nn:8020/wh"), is_remote_lock("/data/wh")
    (True, True, False)
    """
    return storage.scheme(warehouse) in REMOTE_SCHEMES


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


# -- S3 and HDFS: a lease -----------------------------------------------------------------------


def _record(owner: LockOwner, lease: Lease) -> bytes:
    """The lock object's content: the owner, when its lease ends, and a token new to each write."""
    expires = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(seconds=lease.seconds)
    raw = {**asdict(owner), "lease_expires": expires.isoformat(timespec="milliseconds"),
           "lease_seconds": lease.seconds, "token": uuid.uuid4().hex}
    return (json.dumps(raw) + "\n").encode()


def _field(data: bytes, name: str) -> str | None:
    try:
        value = json.loads(data.decode("utf-8")).get(name)
    except (ValueError, AttributeError):
        return None
    return None if value is None else str(value)


def _expired(data: bytes, modified: _dt.datetime, lease: Lease) -> bool:
    """Has the lease in ``data`` run out? A record without a readable expiry (half written, or
    damaged) counts from its object's last change, for ``lease.seconds``."""
    now = _dt.datetime.now(_dt.timezone.utc)
    try:
        expires = _dt.datetime.fromisoformat(_field(data, "lease_expires") or "")
    except ValueError:
        expires = modified + _dt.timedelta(seconds=lease.seconds)
    return now > (expires if expires.tzinfo is not None else expires.replace(tzinfo=_dt.timezone.utc))


class _ObjectLease:
    """The lease object on S3, through obstore: conditional writes (``If-None-Match``, ``If-Match``);
    a version is its e_tag."""

    def __init__(self, uri: str, settings: storage.StorageSettings | None):
        self.store, self.path = storage.object_store(uri, settings)

    def create(self, data: bytes) -> str | None:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            return obstore.put(self.store, self.path, data, mode="create")["e_tag"]
        except (AlreadyExistsError, PreconditionError):
            return None

    def read(self) -> tuple[bytes, str, _dt.datetime] | None:
        import obstore

        try:
            got = obstore.get(self.store, self.path)
            return bytes(got.bytes()), got.meta["e_tag"], got.meta["last_modified"]
        except FileNotFoundError:
            return None

    def replace(self, data: bytes, version: str) -> str | None:
        """``data`` in place of ``version`` (``If-Match``); None when the object is another version."""
        import obstore
        from obstore.exceptions import PreconditionError

        try:
            return obstore.put(self.store, self.path, data, mode={"e_tag": version})["e_tag"]
        except (PreconditionError, FileNotFoundError):
            return None

    renew = take_over = replace

    def delete(self, version: str) -> None:
        import obstore

        try:
            if obstore.head(self.store, self.path)["e_tag"] == version:
                obstore.delete(self.store, self.path)
        except FileNotFoundError:
            pass


class _HdfsLease:
    """The lease file on HDFS, through hdfs-native; a version is the token in the record (for a
    record without one, its modification time). HDFS renames without overwriting are atomic, and
    fail when the target exists: a record is written beside the lock and renamed onto it
    (create); an expired version is taken over by moving the lock aside under a name that holds
    the version (``.lock.<version>.old``: a second run taking over the same version collides
    with it, so the name stays until the new holder releases), checking what was moved, then
    renaming the new record in; the holder renews by checking its token, then renaming its new
    record over the lock (the lock never goes missing while it is held)."""

    LEFTOVER_SECONDS = 3600  # moved-aside and half-written files older than this are removed on release

    def __init__(self, uri: str, settings: storage.StorageSettings | None):
        self.client = storage.hdfs_client(uri, settings)
        self.path = unquote(urlparse(uri).path)
        self._aside: str | None = None  # the expired version this process moved aside

    def _written(self, data: bytes) -> str:
        """``data`` in a new file beside the lock (its path)."""
        from hdfs_native import WriteOptions

        tmp = f"{self.path}.{uuid.uuid4().hex}.new"
        self.client.mkdirs(os.path.dirname(self.path), create_parent=True)
        with self.client.create(tmp, WriteOptions(overwrite=False)) as w:
            w.write(data)
        return tmp

    def _renamed_in(self, tmp: str) -> bool:
        """``tmp`` renamed onto the lock unless one exists (then deleted)."""
        try:
            self.client.rename(tmp, self.path, overwrite=False)
            return True
        except (FileExistsError, FileNotFoundError, OSError):
            self.client.delete(tmp)
            return False

    def _put_new(self, data: bytes) -> bool:
        return self._renamed_in(self._written(data))

    def _read(self, path: str) -> bytes | None:
        try:
            with self.client.read(path) as r:
                return r.read()
        except FileNotFoundError:
            return None

    def create(self, data: bytes) -> str | None:
        return _field(data, "token") if self._put_new(data) else None

    def read(self) -> tuple[bytes, str, _dt.datetime] | None:
        try:
            status = self.client.get_file_info(self.path)
        except FileNotFoundError:
            return None
        data = self._read(self.path)
        if data is None:
            return None
        modified = _dt.datetime.fromtimestamp(status.modification_time / 1000, _dt.timezone.utc)
        return data, _hdfs_version(data, status.modification_time), modified

    def renew(self, data: bytes, version: str) -> str | None:
        """The holder's ``data`` over its ``version``; None when the file holds another version."""
        from hdfs_native import WriteOptions

        found = self.read()
        if found is None or found[1] != version:
            return None
        tmp = f"{self.path}.{uuid.uuid4().hex}.new"
        with self.client.create(tmp, WriteOptions(overwrite=False)) as w:
            w.write(data)
        self.client.rename(tmp, self.path, overwrite=True)
        return _field(data, "token")

    def take_over(self, data: bytes, version: str) -> str | None:
        """``data`` in place of the expired ``version``; None when another run was first."""
        aside, tmp = f"{self.path}.{version}.old", self._written(data)  # (written first: the lock is
        try:                                                                 # missing for a moment only)
            self.client.rename(self.path, aside, overwrite=False)
        except (FileExistsError, FileNotFoundError, OSError):
            self.client.delete(tmp)
            return None  # gone, or another run took this same version over
        moved = self._read(aside) or b""
        if _hdfs_version(moved, self.client.get_file_info(aside).modification_time) != version:
            try:  # changed since it was read (its holder renewed it late): put it back
                self.client.rename(aside, self.path, overwrite=False)
            except (FileExistsError, FileNotFoundError, OSError):
                pass
            self.client.delete(tmp)
            return None
        self._aside = aside
        return _field(data, "token") if self._renamed_in(tmp) else None

    def delete(self, version: str) -> None:
        found = self.read()
        if found is not None and found[1] == version:
            self.client.delete(self.path)
        self._remove_leftovers()

    def _remove_leftovers(self) -> None:
        """The version this process moved aside, and moved-aside or half-written files of the
        lock older than :attr:`LEFTOVER_SECONDS` (crashed runs')."""
        folder, base = os.path.dirname(self.path), os.path.basename(self.path)
        old = (time.time() - self.LEFTOVER_SECONDS) * 1000
        for status in self.client.list_status(folder):
            name = os.path.basename(status.path)
            mine = os.path.join(folder, name) == self._aside
            if name.startswith(base + ".") and name.endswith((".old", ".new")) and (mine or status.modification_time < old):
                self.client.delete(os.path.join(folder, name))


def _hdfs_version(data: bytes, modified_ms: int) -> str:
    """An HDFS lock file's version: the token of its record, else its modification time."""
    return _field(data, "token") or f"unreadable-{modified_ms}"


def _lease_store(warehouse: str, settings: storage.StorageSettings | None):
    uri = f"{str(warehouse).rstrip('/')}/{LOCK_FILE}"
    if storage.scheme(warehouse) in storage.HDFS_SCHEMES:
        return _HdfsLease(uri, settings)
    return _ObjectLease(uri, settings)


_HELD: "weakref.WeakSet[RemoteLock]" = weakref.WeakSet()


class RemoteLock:
    """A held remote lock: its owner record, the version last written, and whether it was
    lost (:attr:`lost`, :meth:`check`). A daemon thread renews it until :meth:`release`."""

    def __init__(self, warehouse: str, store, lease: Lease, owner: LockOwner, version: str):
        self.warehouse, self.lease, self.owner = warehouse, lease, owner
        self._store, self._version = store, version
        self.lost = False
        self.why = ""
        self._renewed = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew_loop, name=f"lease {warehouse}", daemon=True)
        self._thread.start()
        _HELD.add(self)

    def check(self) -> None:
        """Raise :class:`LockLost` when this run no longer holds the lock."""
        if self.lost:
            raise LockLost(f"lost the lock of warehouse {self.warehouse}: {self.why}; stopped before the next "
                           f"commit (another run may be writing)")

    def renew(self) -> bool:
        """Renew the lease once (the thread does it every ``lease.renew_every`` seconds); False
        when the lock is lost."""
        if self.lost:
            return False
        try:
            version = self._store.renew(_record(self.owner, self.lease), self._version)
        except Exception as e:  # noqa: BLE001 - a network error: try again, until the lease runs out
            if time.monotonic() - self._renewed > self.lease.seconds:
                self._lose(f"its lease could not be renewed for {self.lease.seconds:g} s ({type(e).__name__}: {e})")
                return False
            _log.warning(f"warehouse {self.warehouse}: renewing the lock failed ({type(e).__name__}: {e}); "
                         f"trying again")
            return True
        if version is None:
            self._lose("another run changed or took over the lock object")
            return False
        self._version, self._renewed = version, time.monotonic()
        return True

    def _lose(self, why: str) -> None:
        self.lost, self.why = True, why
        _log.error(f"LOST THE WAREHOUSE LOCK of {self.warehouse}: {why}. This run stops before its next "
                   f"commit; Delta's conflict checks guard the commits under way")

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.lease.renew_every):
            if not self.renew():
                return

    def release(self) -> None:
        """Stop renewing and delete the lock object (when it is still this run's version)."""
        self._stop.set()
        self._thread.join()
        _HELD.discard(self)
        if self.lost:
            return
        try:
            self._store.delete(self._version)
        except Exception as e:  # noqa: BLE001 - the lease runs out by itself
            _log.warning(f"warehouse {self.warehouse}: the lock could not be deleted ({type(e).__name__}: {e}); "
                         f"it expires {self.lease.seconds:g} s after its last renewal")


def check_held() -> None:
    """Raise :class:`LockLost` when a remote lock this process holds was lost (nothing for
    local locks: the kernel keeps a flock while the process lives)."""
    for held in list(_HELD):
        held.check()


def _acquire(warehouse: str, store, lease: Lease, timeout: float, poll: float) -> RemoteLock:
    start, told = time.monotonic(), False
    while True:
        owner = LockOwner.me()
        version = store.create(_record(owner, lease))
        if version is not None:
            return RemoteLock(warehouse, store, lease, owner, version)
        found = store.read()
        if found is None:
            continue  # released in between: try again at once
        data, stale, modified = found
        holder = LockOwner.parse(data.decode("utf-8", "replace"))
        if _expired(data, modified, lease):
            version = store.take_over(_record(owner, lease), stale)
            if version is not None:
                who = f"pid {holder.pid} on host {holder.host}" if holder else "an unknown holder"
                _log.info(f"warehouse {warehouse}: took over the lock of {who}, whose lease expired at "
                          f"{_field(data, 'lease_expires') or '(unknown)'} (that run stopped without releasing it)")
                return RemoteLock(warehouse, store, lease, owner, version)
            continue  # another run took it over first, or its holder renewed: look again
        waited = time.monotonic() - start
        if waited >= timeout:
            raise WarehouseLocked(warehouse, holder, waited if timeout > 0 else 0.0)
        if not told:
            told = True
            who = f"pid {holder.pid} on host {holder.host}" if holder else "another run"
            _log.info(f"warehouse {warehouse} is locked by {who}: waiting up to {timeout:g} s")
        time.sleep(min(poll, max(timeout - waited, 0.01)))


@contextlib.contextmanager
def remote_lock(warehouse: str, *, timeout: float = 0.0, poll: float = 0.5,
                settings: storage.StorageSettings | None = None, lease: Lease = DEFAULT_LEASE) -> Iterator[RemoteLock]:
    """Hold the lease of an S3 or HDFS warehouse for the ``with`` block (see the module's
    docstring); yields the :class:`RemoteLock`. Refuses or waits like :func:`warehouse_lock`.

    >>> with remote_lock("s3a://bucket/wh", lease=Lease(60, 15)) as held:  # doctest: +SKIP
    ...     held.check()
    """
    if not is_remote_lock(warehouse):
        raise storage.StorageError(f"{warehouse}: a remote lock needs an S3 or HDFS warehouse")
    held = _acquire(warehouse, _lease_store(warehouse, settings), lease, timeout, poll)
    try:
        yield held
    finally:
        held.release()
