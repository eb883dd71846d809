"""The lease of an S3 or HDFS warehouse: the lock object on each store (conditional writes on S3,
renames on HDFS), the held :class:`RemoteLock` and its renewal thread, :func:`check_held` and
:func:`remote_lock`. The local flock and :func:`pipelines.lock.warehouse_lock` are in
:mod:`pipelines.lock`."""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import threading
import time
import uuid
import weakref
from dataclasses import asdict
from typing import Iterator
from urllib.parse import unquote, urlparse

from pipelines import storage
from pipelines.lock.model import (
    DEFAULT_LEASE, LOCK_FILE, Lease, LockLost, LockOwner, WarehouseLocked, is_remote_lock,
)
from pipelines.logs import get_logger

_log = get_logger(__name__)


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


def lease_store(warehouse: str, settings: storage.StorageSettings | None):
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
    held = _acquire(warehouse, lease_store(warehouse, settings), lease, timeout, poll)
    try:
        yield held
    finally:
        held.release()
