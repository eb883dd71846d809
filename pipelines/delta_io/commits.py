"""What every commit shares: what it records beside its rows (:class:`CommitInfo`), transaction ids
(checked, looked up in the backend's snapshot) and
:func:`commit_retried`: fault points and the retry of a commit that lost a race with another writer. The
backends' own commit details (delta-spark's session settings, delta-rs's commit properties) are
in :mod:`~pipelines.delta_io.spark_commits` and :mod:`~pipelines.delta_io.rs_writes`."""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pyspark.sql import SparkSession

from pipelines import faults
from pipelines.delta_io import pins
from pipelines.delta_io.backend import DeltaIOError, backend_for
from pipelines.delta_io.reads import table_exists, version
from pipelines.logs import get_logger

_log = get_logger(__name__)


def check_txn(txn_app_id: str | None, txn_version: int | None) -> None:
    """Fail fast unless the transaction identifier is complete (both parts) or absent.

    >>> check_txn("loader", 3)
    """
    if (txn_app_id is None) != (txn_version is None):
        raise ValueError(
            f"txn_app_id and txn_version go together: got txn_app_id={txn_app_id!r}, "
            f"txn_version={txn_version!r}"
        )
    if txn_app_id is not None:
        if not isinstance(txn_app_id, str) or not txn_app_id:
            raise ValueError(f"txn_app_id must be a non-empty string, got {txn_app_id!r}")
        if isinstance(txn_version, bool) or not isinstance(txn_version, int) or txn_version < 0:
            raise ValueError(f"txn_version must be an int >= 0, got {txn_version!r}")


def last_txn_version(
    path: str, app_id: str, *, spark: SparkSession | None = None, backend: str = "auto"
) -> int | None:
    """The last transaction version recorded for ``app_id`` on the table, or None.

    >>> last_txn_version(str(tmp_path / "t"), "bronze-loader")  # doctest: +SKIP
    7
    """
    check_txn(app_id, 0)
    if not table_exists(path, spark=spark, backend=backend):
        return None
    return backend_for(spark, backend).last_txn_version(spark, path, app_id)


@dataclass(frozen=True)
class CommitInfo:
    """What a commit records beside its rows.

    ``txn``: the transaction id ``(app id, version)``; a commit whose id the table already holds
    (that version or a later one of the app) is skipped, so a re-run lands nothing twice.
    ``metadata``: the commit's user metadata, text a reader finds in the table's history (silver
    records its watermark there).

    >>> CommitInfo(txn=("loader", -1))
    Traceback (most recent call last):
    ...
    ValueError: txn_version must be an int >= 0, got -1
    """

    txn: tuple[str, int] | None = None
    metadata: str | None = None

    def __post_init__(self) -> None:
        if self.txn is not None:
            check_txn(*self.txn)

    @classmethod
    def of(cls, app_id: str | None, version: int | None, metadata: str | None = None) -> CommitInfo:
        """From a transaction id's two parts, both given or both None (one alone is refused).

        >>> CommitInfo.of(None, None).txn is None, CommitInfo.of("loader", 3).txn
        (True, ('loader', 3))
        """
        return cls(None if app_id is None and version is None else (app_id, version), metadata)

    @property
    def app_id(self) -> str | None:
        return None if self.txn is None else self.txn[0]

    @property
    def version(self) -> int | None:
        return None if self.txn is None else self.txn[1]


NO_COMMIT_INFO = CommitInfo()


R = TypeVar("R")


COMMIT_ATTEMPTS = 5  # tries of one commit that keeps losing races with other writers


_BACKOFF_S = 0.25  # pause before the 2nd try; doubled each time, jittered x0.5..1.5


_retry_lock = threading.Lock()


_retry_count = 0


# the JVM class every delta-spark conflict extends (io.delta.exceptions.ConcurrentAppendException,
# MetadataChangedException, ProtocolChangedException...: DeltaConcurrentModificationException under it)
_SPARK_CONFLICT = "java.util.ConcurrentModificationException"


def is_commit_conflict(error: BaseException) -> bool:
    """True when ``error`` says that another writer committed first (the commit did not happen):
    delta-rs's ``CommitFailedError``, or a Java exception (or its cause) of delta-spark's conflicts.

    >>> is_commit_conflict(ValueError("bad predicate"))
    False
    """
    from deltalake.exceptions import CommitFailedError

    if isinstance(error, CommitFailedError):
        return True
    java = getattr(error, "java_exception", None) or getattr(error, "_origin", None)  # (Py4JJavaError, pyspark's)
    if java is None:
        return False
    from py4j.java_gateway import is_instance_of
    from pyspark import SparkContext

    for _ in range(8):  # (the commit's own exception, or one a job wrapped it in)
        if java is None or SparkContext._gateway is None:
            return False
        if is_instance_of(SparkContext._gateway, java, _SPARK_CONFLICT):
            return True
        java = java.getCause()
    return False


def conflict_retries() -> int:
    """How many commits this process has tried again after a conflict (logs, tests)."""
    return _retry_count


def commit_retried(op: str, path: str, attempt: Callable[[int], R]) -> R:
    """Run one commit ``attempt(n)`` (``n`` = 0 for the first try) between the fault points
    ``<op>.<kind>.before`` and ``.after``, trying again after commit conflicts.

    ``attempt`` must be safe to call again after a conflict: on a retry (``n > 0``) it looks at
    the table again before writing. A table this thread pinned (:mod:`pipelines.delta_io.pins`)
    gets one try: a conflict there means the plan is stale, and raises
    :class:`~pipelines.delta_io.pins.StaleRead` for the caller to plan again.
    """
    global _retry_count
    kind = faults.table_kind(path)
    faults.point(f"{op}.{kind}.before")
    pin = pins.pin_of(path)
    if pin is not None:
        try:
            result = attempt(0)
        except pins.StaleRead:
            raise
        except Exception as e:  # noqa: BLE001 - a conflict, or any failure on a table that moved
            if not is_commit_conflict(e) and not _moved(path, pin):
                raise
            raise pin.stale(op, _first_line(e)) from e
        faults.point(f"{op}.{kind}.after")
        return result
    for n in range(COMMIT_ATTEMPTS):
        try:
            result = attempt(n)
            break
        except Exception as e:  # noqa: BLE001 - only conflicts are tried again
            if not is_commit_conflict(e):
                raise
            if n + 1 == COMMIT_ATTEMPTS:
                raise DeltaIOError(
                    f"{op} {path}: lost {COMMIT_ATTEMPTS} commit races in a row to other writers; last: {e}"
                ) from e
            pause = _BACKOFF_S * (2 ** n) * (0.5 + random.random())
            _log.warning(f"delta_io: {op} {path}: commit conflict ({_first_line(e)}); trying again in "
                         f"{pause:.2f} s ({n + 2}/{COMMIT_ATTEMPTS})")
            with _retry_lock:
                _retry_count += 1
            time.sleep(pause)
    faults.point(f"{op}.{kind}.after")
    return result


def _moved(path: str, pin: pins.Pin) -> bool:
    """True when the table is no longer at the pinned version: a write that failed there failed on
    another writer's table (e.g. delta-spark's schema check against columns that writer added
    after this one looked), so its plan is stale, whatever the error says."""
    try:
        now = version(path, spark=pin.spark, backend=pin.backend) if pins.pin_of(path) is pin else None
    except Exception:  # noqa: BLE001 - a table that cannot be looked at is not judged moved here
        return False
    return now != pin.version


def _first_line(error: BaseException) -> str:
    """The first line of what ``error`` says (of a Java exception's own text for a Py4JJavaError,
    whose text starts with the py4j call, e.g. ``An error occurred while calling o42.save``)."""
    java = getattr(error, "java_exception", None)
    text = (str(java) if java is not None else str(error)).strip()
    return text.splitlines()[0] if text else type(error).__name__


def txn_recorded(path: str, txn_app_id: str | None, txn_version: int | None, spark, backend: str) -> bool:
    """True when the table already holds ``txn_version`` (or later) for ``txn_app_id``."""
    if txn_app_id is None:
        return False
    last = last_txn_version(path, txn_app_id, spark=spark, backend=backend)
    return last is not None and last >= txn_version

