"""The warehouse lock of an S3 warehouse (:mod:`pipelines.lock`): a lease object written with
conditional requests, on a private S3 server (moto's), with no ``AWS_*`` variable in the
environment: a second holder is refused with the first named, or waits; an expired lease (its
holder SIGKILLed) is taken over; renewal keeps a lease; a lease changed behind its holder's
back is lost, and the holder finds out; release deletes it.

Leases here last 2-2.5 s instead of two minutes (:class:`pipelines.lock.Lease`).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pipelines import lock, storage
from pipelines.lock import Lease, LockLost, WarehouseLocked, check_held, remote_lock, warehouse_lock
from s3_server import environment_without_aws

REPO = Path(__file__).resolve().parents[1]
SHORT = Lease(seconds=2.5, renew_every=0.25)  # (a stall of the test machine up to 2 s is not an expiry)


def race_for_the_lock(wh: str, runs: int, lease: Lease = SHORT) -> tuple[list, list]:
    """``runs`` threads take the lock of ``wh`` at once; the winner holds it until every other has
    its answer. Returns (the holders, the refusals)."""
    won, refused, go = [], [], threading.Barrier(runs)

    def contend():
        go.wait(10)
        try:
            with remote_lock(wh, lease=lease) as held:
                won.append(held)
                deadline = time.monotonic() + 30
                while len(refused) < runs - 1 and time.monotonic() < deadline:
                    time.sleep(0.05)
        except WarehouseLocked as e:
            refused.append(e)

    threads = [threading.Thread(target=contend) for _ in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return won, refused


@pytest.fixture
def s3_wh(s3_server, no_aws_env, monkeypatch):
    """``(server, bucket, warehouse URI, settings)``; the settings are this process's for the test."""
    monkeypatch.setattr(storage, "_current", [storage.NO_SETTINGS])
    settings = storage.use(storage.from_spark_conf(s3_server.spark_conf()))
    bucket = s3_server.bucket()
    return s3_server, bucket, f"s3a://{bucket}/wh", settings


def _record(server, bucket: str) -> dict | None:
    try:
        body = server.client().get_object(Bucket=bucket, Key="wh/_pipeline/.lock")["Body"].read()
    except server.client().exceptions.NoSuchKey:
        return None
    return json.loads(body)


def test_second_holder_is_refused_with_the_holder_named(s3_wh):
    server, bucket, wh, _settings = s3_wh
    with warehouse_lock(wh, lease=SHORT) as owner:
        assert owner.pid == os.getpid()
        assert lock.read_owner(wh) == owner
        record = _record(server, bucket)
        assert (record["pid"], record["host"], record["lease_seconds"]) == (owner.pid, owner.host, SHORT.seconds)
        with pytest.raises(WarehouseLocked) as e:
            with warehouse_lock(wh, lease=SHORT):
                pass
        assert str(e.value) == (f"warehouse {wh} is locked by pid {owner.pid} on host {owner.host} since "
                                f"{owner.started_at}; another run is in progress")
    assert _record(server, bucket) is None  # released: deleted
    with warehouse_lock(wh, lease=SHORT):
        pass


def test_waiting_holder_gets_the_lock_when_it_is_released(s3_wh):
    _server, _bucket, wh, _settings = s3_wh
    held, release = threading.Event(), threading.Event()

    def first():
        with warehouse_lock(wh, lease=SHORT):
            held.set()
            release.wait(30)

    t = threading.Thread(target=first)
    t.start()
    assert held.wait(30)
    threading.Timer(1.0, release.set).start()
    started = time.monotonic()
    with warehouse_lock(wh, timeout=20, poll=0.1, lease=SHORT) as owner:
        waited = time.monotonic() - started
        assert lock.read_owner(wh) == owner
    t.join()
    assert 0.8 < waited < 10
    with pytest.raises(WarehouseLocked, match=r"\(waited \d+ s\)"):  # a timeout that runs out
        with warehouse_lock(wh, lease=SHORT):
            with warehouse_lock(wh, timeout=0.5, poll=0.1, lease=SHORT):
                pass


def test_renewal_keeps_the_lease_past_its_length(s3_wh):
    server, bucket, wh, _settings = s3_wh
    with remote_lock(wh, lease=SHORT) as held:
        first = _record(server, bucket)["lease_expires"]
        time.sleep(2 * SHORT.seconds)  # two leases long: renewed all along
        assert not held.lost
        assert _record(server, bucket)["lease_expires"] > first
        with pytest.raises(WarehouseLocked):
            with warehouse_lock(wh, lease=SHORT):
                pass
        check_held()


_HOLDER = """
import sys, time
from pipelines import lock, storage
storage.use(storage.from_spark_conf(dict(a.split("=", 1) for a in sys.argv[2:])))
with lock.warehouse_lock(sys.argv[1], lease=lock.Lease(2.0, 0.4)):
    print("held", flush=True)
    time.sleep(600)
"""


def test_expired_lease_of_a_killed_holder_is_taken_over(s3_wh, capfd):
    server, bucket, wh, _settings = s3_wh
    env = environment_without_aws()
    env["PYTHONPATH"] = str(REPO)
    conf = [f"{k}={v}" for k, v in server.spark_conf().items()]
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, wh, *conf], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert _record(server, bucket)["pid"] == holder.pid
        with pytest.raises(WarehouseLocked, match=f"locked by pid {holder.pid} "):  # alive: refused
            with warehouse_lock(wh, lease=SHORT):
                pass
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
        killed = time.monotonic()
        with warehouse_lock(wh, timeout=30, poll=0.2, lease=SHORT) as owner:  # waits for the lease to run out
            assert 0.5 < time.monotonic() - killed < 20
            assert _record(server, bucket)["pid"] == owner.pid == os.getpid()
        assert f"took over the lock of pid {holder.pid} on host" in capfd.readouterr().err
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(10)


def test_two_runs_racing_for_an_expired_lease_one_wins(s3_wh):
    server, bucket, wh, _settings = s3_wh
    stale = {"host": "gone", "pid": 1, "started_at": "2020-01-01T00:00:00+00:00", "command": "x",
             "lease_expires": "2020-01-01T00:02:00.000+00:00", "lease_seconds": 120, "token": "t"}
    server.client().put_object(Bucket=bucket, Key="wh/_pipeline/.lock", Body=json.dumps(stale).encode())
    won, refused = race_for_the_lock(wh, 4)
    assert len(won) == 1 and len(refused) == 3
    assert all(not h.lost for h in won)


def test_a_lease_changed_behind_its_holders_back_is_lost_and_stops_the_run(s3_wh, capfd):
    server, bucket, wh, _settings = s3_wh
    with remote_lock(wh, lease=SHORT) as held:
        server.client().put_object(Bucket=bucket, Key="wh/_pipeline/.lock", Body=b'{"host": "other", "pid": 2}')
        deadline = time.monotonic() + 10
        while not held.lost and time.monotonic() < deadline:
            time.sleep(0.05)
        assert held.lost
        with pytest.raises(LockLost, match=f"lost the lock of warehouse {wh}: another run changed or took over"):
            check_held()
    assert "LOST THE WAREHOUSE LOCK" in capfd.readouterr().err
    assert _record(server, bucket)["pid"] == 2  # not deleted: it is not this run's
    check_held()  # (released: nothing held any more)


def test_lease_settings_are_checked():
    with pytest.raises(ValueError, match="renewed more often than it lasts"):
        Lease(seconds=10, renew_every=10)
    assert lock.DEFAULT_LEASE == Lease(120.0, 30.0)
