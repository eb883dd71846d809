"""What a delta-spark commit carries and is checked against: the session settings of its identity
(transaction id, user metadata) on a session of its own (:func:`commit_session`), the table's
``DeltaLog`` and snapshot through the JVM (:func:`spark_delta_log`, :func:`spark_snapshot`, the
transaction ids they hold), and a pinned commit's checks, before and after (the pin itself:
:mod:`~pipelines.delta_io.pins`). No commit is made here (:mod:`~pipelines.delta_io.spark_writes`)."""
from __future__ import annotations

import json
import time
from collections.abc import Mapping

from pyspark.sql import SparkSession

from pipelines.delta_io import pins
from pipelines.delta_io.backend import DeltaIOError


# Spark SQL settings delta-spark reads for idempotent DML and for the commit's user metadata.
SPARK_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"


SPARK_TXN_VERSION = "spark.databricks.delta.write.txnVersion"


SPARK_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


def spark_log_txn_version(spark: SparkSession, path: str, app_id: str) -> int | None:
    """The newest ``txn`` version for ``app_id`` in delta-spark's own snapshot of the table.

    The snapshot is the last checkpoint plus the commits after it (what Delta itself checks an
    idempotent write against), so the cost does not grow with the table's history and the ids
    survive log cleanup. Reached through the JVM (``DeltaLog.update().transactions()``): the
    Python API has no call for it.
    """
    found = spark_snapshot(spark, path).transactions().get(app_id)
    return int(found.get()) if found.isDefined() else None


def spark_delta_log(spark: SparkSession, path: str):
    """delta-spark's ``DeltaLog`` of the table (through the JVM: checkpoints and the snapshot's
    state have no Python API)."""
    return spark._jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path))


def spark_snapshot(spark: SparkSession, path: str):
    """The table's current delta-spark snapshot: its last checkpoint plus the commits after it."""
    log = spark_delta_log(spark, path)
    return log.update(*[getattr(log, f"update$default${i}")() for i in (1, 2, 3)])


_COMMIT_IDENTITY_KEYS = (SPARK_TXN_APP_ID, SPARK_TXN_VERSION, SPARK_USER_METADATA)


# -- pinned commits (pipelines.delta_io.pins): checked before, and found in the history after


_PIN_LOOKBACK = 20  # commits of the history searched for a pinned commit's token


def pin_before(spark: SparkSession, path: str, what: str) -> "pins.Pin | None":
    """The pin this thread holds on ``path``, checked against the table as it is now: a table that
    moved since raises :class:`~pipelines.delta_io.pins.StaleRead` before anything is written."""
    pin = pins.pin_of(path)
    if pin is None:
        return None
    from delta.tables import DeltaTable

    exists = bool(DeltaTable.isDeltaTable(spark, str(path)))
    now = spark_snapshot(spark, path).version() if exists else None
    if now != pin.version:
        raise pin.stale(what, "it is at " + ("no table" if now is None else f"version {now}") + " now")
    return pin


def pin_txn(pin: "pins.Pin | None", txn_app_id: str | None, txn_version: int | None) -> tuple[str | None, int | None]:
    """The transaction id a commit records: a pinned one records :data:`pins.PIN_APP_ID` at the version
    it must make, which delta-spark checks against any writer committing the same id meanwhile."""
    if pin is None or pin.version is None:
        return txn_app_id, txn_version
    if txn_app_id is not None:
        raise DeltaIOError(f"{pin.path}: a pinned commit records its own transaction id; got {txn_app_id!r}")
    return pins.PIN_APP_ID, pin.version + 1


def pin_after(spark: SparkSession, path: str, pin: "pins.Pin | None", what: str, *, guarded: bool) -> None:
    """Find the pinned commit just made (its token in the user metadata) and move the pin to it.
    Not found: delta-spark skipped it, another writer's commit having recorded the pin's transaction
    id first. Found after commits of others: allowed only for a commit ``guarded`` by the transaction
    id (delta-spark let through only commits that change neither rows nor schema); an unguarded
    one (ALTER TABLE) is stale then."""
    if pin is None:
        return
    first = 0 if pin.version is None else pin.version + 1
    found = _versions_with_token(spark, path, pin.token, first)
    if not found:
        raise pin.stale(what, "delta-spark skipped it: another writer's commit came first")
    at = max(found)
    if at != first and not guarded:
        raise pin.stale(what, f"it landed at version {at}, after another writer's version {first}")
    pin.landed(at)


def _versions_with_token(spark: SparkSession, path: str, token: str, first: int) -> list[int]:
    """The versions from ``first`` on (at most :data:`_PIN_LOOKBACK` of them, up to the log's last)
    whose commit's user metadata carries the pin ``token``, read from the commit files through
    the session's Hadoop file system: a few small reads, where the table's history is a Spark job."""
    jvm = spark._jvm
    log = spark_delta_log(spark, path)
    fs = log.logPath().getFileSystem(log.newDeltaHadoopConf())
    found = []
    for version in range(first, first + _PIN_LOOKBACK):
        file = jvm.org.apache.hadoop.fs.Path(log.logPath(), f"{version:020d}.json")
        if not fs.exists(file):
            break
        stream = fs.open(file)
        try:
            text = jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
        finally:
            stream.close()
        for line in text.splitlines():
            action = json.loads(line) if '"commitInfo"' in line else {}
            if "commitInfo" in action:
                if pins.token_of(action["commitInfo"].get("userMetadata")) == token:
                    found.append(version)
                break
    return found


_EXISTS_ERRORS = ("TABLE_OR_VIEW_ALREADY_EXISTS", "DELTA_PATH_EXISTS")  # a create that found a table there


# a CREATE TABLE that found another writer's log begun: its first commit not yet there
_BEGUN_ERRORS = ("DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION",)


BEGUN_WAIT_S = 5.0  # how long a create that found a log begun waits for that log's first commit


def created_meanwhile(spark: SparkSession, path: str, error: Exception) -> bool:
    """True when a create failed on a table another writer made since the table was looked at, or was
    making: delta-spark refuses a location whose log has begun (that log's first commit is waited for)."""
    text = str(error)
    if any(code in text for code in _EXISTS_ERRORS):
        return True
    return first_commit_seen(spark, path, BEGUN_WAIT_S if any(code in text for code in _BEGUN_ERRORS) else 0.0)


def first_commit_seen(spark: SparkSession, path: str, wait_s: float) -> bool:
    """True when the table has a commit, now or within ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    while spark_snapshot(spark, path).version() < 0:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def pin_created_meanwhile(spark: SparkSession, path: str, pin: "pins.Pin | None", what: str, error: Exception) -> None:
    """Turn a failed create of a table pinned as missing into :class:`~pipelines.delta_io.pins.StaleRead`
    when another writer made it (:func:`created_meanwhile`)."""
    if pin is None or pin.version is not None:
        return
    if created_meanwhile(spark, path, error):
        raise pin.stale(what, "another writer created it") from error


def pinned_writer(writer, pin: "pins.Pin | None", user_metadata: str | None, txn_app_id: str | None = None,
                   txn_version: int | None = None):
    """A DataFrameWriter with the commit's identity: its transaction id and user metadata, the pin's
    (a table pinned as missing is created, never written into: ``errorifexists``)."""
    app, version = pin_txn(pin, txn_app_id, txn_version)
    if app is not None:
        writer = writer.option("txnAppId", app).option("txnVersion", str(version))
    meta = pin.tag(user_metadata) if pin is not None else user_metadata
    if meta is not None:
        writer = writer.option("userMetadata", meta)
    if pin is not None and pin.version is None:
        writer = writer.mode("errorifexists")
    return writer


def commit_session(spark: SparkSession, settings: Mapping[str, str | None] | None = None) -> SparkSession:
    """A session of its own for one delta-spark command: ``spark.newSession()`` (same SparkContext,
    its own SQL conf) with the caller's runtime settings copied over and ``settings`` on top.

    delta-spark takes a MERGE's transaction id and a commit's user metadata from SQL session
    settings. Set on the shared session they would reach every commit that any thread makes
    meanwhile (a CREATE on another thread once recorded a MERGE's transaction id, and the MERGE
    was then skipped as already applied). On a session of its own they reach this command only.
    The identity keys are never copied from ``spark``: a commit carries only what it was given.
    """
    own = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if key in _COMMIT_IDENTITY_KEYS or own.conf.get(key, None) == value:
            continue
        if own.conf.isModifiable(key):
            own.conf.set(key, value)
    for key, value in (settings or {}).items():
        if value is not None:
            own.conf.set(key, value)
    return own
