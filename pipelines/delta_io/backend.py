"""Which backend a call uses (:func:`resolve_backend`), the interface both backends implement
(:class:`DeltaBackend`, reached with :func:`backend_for`), the errors and SQL identifier quoting.
(A URI's Arrow filesystem and delta-rs options: :mod:`pipelines.storage`.)"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol

import pyarrow as pa
from pyspark.sql import SparkSession

from pipelines.errors import PipelineError
from pipelines.config import DELTA_BACKENDS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql import types as T

    from pipelines.delta_io.commits import CommitInfo
    from pipelines.delta_io.merging import MergeClause, MergeResult
    from pipelines.delta_io.reads import Commit


Backend = Literal["auto", "spark", "rs"]


BACKENDS = DELTA_BACKENDS  # the one list (pipelines.config: the config checks it too)


DELTA_LOG = "_delta_log"


CHECKPOINT_INTERVAL = "delta.checkpointInterval"
# Table properties of every table this package creates, on both backends: a checkpoint every 10
# commits (delta-spark's default; delta-rs's is 100), so that reading a table's state costs a
# checkpoint and at most 9 commit files, each a request on an object store.
NEW_TABLE_PROPERTIES = {CHECKPOINT_INTERVAL: "10"}


class DeltaIOError(PipelineError, RuntimeError):
    """A Delta table operation could not be carried out as asked."""


def quote_ident(name: str) -> str:
    """Quote one column name for Spark SQL and delta-rs predicates: backticks, inner ones doubled.

    >>> quote_ident("select")
    '`select`'
    >>> quote_ident("we`ird.name")
    '`we``ird.name`'
    """
    if not isinstance(name, str) or name == "":
        raise ValueError(f"a column name must be a non-empty string, got {name!r}")
    return "`" + name.replace("`", "``") + "`"


def qualified(alias: str, name: str) -> str:
    """``alias.`name``` for MERGE predicates.

    >>> qualified("t", "a b")
    't.`a b`'
    """
    return f"{alias}.{quote_ident(name)}"


def resolve_backend(spark: SparkSession | None, backend: str = "auto") -> str:
    """Turn ``"auto"`` into ``"spark"`` or ``"rs"``; check that ``"spark"`` can run.

    ``"auto"`` is delta-spark on a cluster (a master that is not local) whose classpath has it,
    and delta-rs everywhere else: on one machine delta-rs commits without Spark jobs and is the
    faster of the two. Ask for ``"spark"`` to use delta-spark locally.

    >>> resolve_backend(None, "rs")
    'rs'
    >>> resolve_backend(None, "auto")
    'rs'
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "rs":
        return "rs"
    from pipelines.spark_session import delta_spark_available
    from pipelines.spark_settings import is_local_master

    available = spark is not None and delta_spark_available(spark)
    if backend == "spark":
        if not available:
            raise DeltaIOError(
                "backend='spark' needs delta-spark on the JVM classpath and a SparkSession: run make "
                "setup (it fetches the jars into jars/) and build the session with delta=True, set "
                "DELTA_JARS to local jar paths, or pass delta_packages to build_session()"
            )
        return "spark"
    return "spark" if available and not is_local_master(_master(spark)) else "rs"


def _master(spark: SparkSession) -> str | None:
    context = getattr(spark, "sparkContext", None)
    return None if context is None else context.master


class DeltaBackend(Protocol):
    """What differs between the two backends. An operation module (``reads``, ``commits``,
    ``writes``, ``merging``, ``upkeep``) checks the arguments, runs the shared steps (the retried
    :func:`~pipelines.delta_io.commits.commit_retried`, its fault points) and hands the rest to the
    method of the same name: :class:`~pipelines.delta_io.spark_backend.SparkBackend` (delta-spark)
    or :class:`~pipelines.delta_io.rs_backend.RsBackend` (delta-rs). Each method takes the
    caller's ``spark`` (None where the caller may have none: delta-rs ignores it)."""

    name: str  # "spark" or "rs", what resolve_backend() says
    # What the callers choose by, declared here and nowhere else:
    on_driver: bool  # the driver reads and commits tables itself (Arrow, no Spark job); tasks only
    # stage data files for it to commit. Else reading or writing a table is a Spark job.
    deletion_vectors: bool  # deletes may mark rows in deletion vectors instead of rewriting files

    # reads (pipelines.delta_io.reads)
    def table_exists(self, spark: SparkSession | None, path: str) -> bool: ...

    def schema(self, spark: SparkSession | None, path: str) -> T.StructType: ...

    def version(self, spark: SparkSession | None, path: str) -> int:
        """The current version of an existing table."""

    def read(self, spark: SparkSession, path: str, columns: Sequence[str] | None,
             above: tuple[str, object] | None, keep: Column | None) -> DataFrame:
        """The table's rows (``columns`` of them), those that ``keep`` keeps (``above`` may skip files)."""

    def nothing_above(self, spark: SparkSession | None, path: str, column: str, value) -> bool: ...

    def read_rows(self, spark: SparkSession | None, path: str, columns: Sequence[str] | None,
                  above: tuple[str, object] | None) -> list: ...

    def history(self, spark: SparkSession | None, path: str, limit: int | None) -> list[Commit]: ...

    # commits (pipelines.delta_io.commits)
    def last_txn_version(self, spark: SparkSession | None, path: str, app_id: str) -> int | None: ...

    # writes (pipelines.delta_io.writes)
    def create(self, spark: SparkSession | None, path: str, table_schema: T.StructType,
               properties: Mapping[str, str] | None = None) -> bool:
        """One try at creating the empty table with the properties its names need and
        ``properties`` (create_if_missing checks and retries); False when another writer made it
        meanwhile."""

    def add_columns_elsewhere(self, spark: SparkSession | None, path: str,
                              adding: Sequence[T.StructField]) -> list[str] | None:
        """Columns this backend cannot add itself, added another way (their names); None when it can."""

    def add_columns(self, spark: SparkSession | None, path: str, adding: Sequence[T.StructField]) -> None:
        """One try at adding the columns (add_columns checks and retries)."""

    def append(self, spark: SparkSession, df: DataFrame, path: str, txn_app_id: str | None,
               txn_version: int | None, schema_evolution: bool) -> bool: ...

    def append_rows(self, spark: SparkSession | None, rows: Sequence[tuple], struct: T.StructType, path: str,
                    txn_app_id: str | None, txn_version: int | None, schema_evolution: bool) -> bool: ...

    def overwrite(self, spark: SparkSession, df: DataFrame, path: str, overwrite_schema: bool,
                  user_metadata: str | None = None) -> None: ...

    def overwrite_rows(self, spark: SparkSession | None, rows: Sequence[tuple], struct: T.StructType,
                       path: str) -> None: ...

    # merging (pipelines.delta_io.merging)
    def merge(self, spark: SparkSession, path: str, source: DataFrame, on: str, clauses: Sequence[MergeClause],
              commit: CommitInfo, *, source_schema: T.StructType | None, split_by: Sequence[str] | None,
              source_rows: int | None, local_source: bool = False) -> MergeResult: ...

    # the driver's rows (pipelines.delta_io.writes / merging): Arrow or tuples in the schema's order
    def create_with_rows(self, spark: SparkSession | None, path: str, table_schema: T.StructType, rows,
                         user_metadata: str | None, properties: Mapping[str, str] | None) -> bool: ...

    def append_with_rows(self, spark: SparkSession | None, path: str, table_schema: T.StructType, rows,
                         user_metadata: str | None) -> bool: ...

    def merge_rows(self, spark: SparkSession | None, path: str, source: pa.Table, source_schema: T.StructType | None,
                   on: str, clauses: Sequence[MergeClause], commit: CommitInfo) -> MergeResult: ...

    # upkeep (pipelines.delta_io.upkeep)
    def snapshot_size(self, spark: SparkSession | None, path: str) -> tuple[int, int, int]:
        """(data files, their bytes, version) of the table's current snapshot."""

    def compact(self, spark: SparkSession | None, path: str, target_bytes: int,
                user_metadata: str | None) -> tuple[int, int]: ...

    def checkpoint(self, spark: SparkSession | None, path: str) -> None: ...

    def set_properties(self, spark: SparkSession | None, path: str, wanted: Mapping[str, str],
                       user_metadata: str | None) -> bool:
        """Set the table properties of ``wanted`` that the table does not have with that value, in one
        commit; True when there was one."""

    def vacuum(self, spark: SparkSession | None, path: str, retention_hours: int,
               user_metadata: str | None) -> int: ...


# The backends by name. They build on the operation modules (writes, merging, ...), which reach
# them only through this table: the package's ``__init__`` fills it once it has imported them.
_BACKENDS: dict[str, DeltaBackend] = {}


def register(impl: DeltaBackend) -> None:
    """Make ``impl`` the backend :func:`backend_for` returns for its name."""
    _BACKENDS[impl.name] = impl


def backend_for(spark: SparkSession | None, backend: str = "auto") -> DeltaBackend:
    """The :class:`DeltaBackend` that :func:`resolve_backend` picks.

    >>> backend_for(None, "rs").name
    'rs'
    """
    return _BACKENDS[resolve_backend(spark, backend)]


def named(backend: str) -> DeltaBackend:
    """The backend of a name :func:`resolve_backend` gave (``"rs"`` or ``"spark"``): what it can do.

    >>> named("rs").on_driver, named("spark").deletion_vectors
    (True, True)
    """
    if backend not in _BACKENDS:
        raise ValueError(f"no backend named {backend!r} (resolved names: {sorted(_BACKENDS)})")
    return _BACKENDS[backend]
