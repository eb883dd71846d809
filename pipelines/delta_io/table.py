"""One Delta table, opened once: :func:`open_table` binds a path to its backend and Spark session,
and the :class:`Table` it returns is how the rest of the pipeline reads, writes and keeps a table.
What a commit carries beside its rows is one value, :class:`~pipelines.delta_io.commits.CommitInfo`.

The operations are the package's modules (``reads``, ``writes``, ``merging``, ``upkeep``: their
checks, the retried commit and its fault points), each handing what differs to the backend
(:class:`~pipelines.delta_io.backend.DeltaBackend`); a :class:`Table` only fixes their ``path``,
``spark`` and ``backend`` arguments, so a caller names them once and never branches on a backend.

>>> t = open_table("/wh/_pipeline/runs", "rs")
>>> t.backend.name, t.backend.on_driver
('rs', True)
>>> CommitInfo(txn=("bronze", 3), metadata='{"watermark": "..."}').txn
('bronze', 3)
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import types as T

from pipelines.delta_io import commits, merging, pins, reads, rs_tables, upkeep, writes
from pipelines.delta_io.commits import NO_COMMIT_INFO, CommitInfo
from pipelines.delta_io.backend import DeltaBackend, backend_for
from pipelines.delta_io.merging import MergeClause, MergeResult
from pipelines.delta_io.rs_scan import RsScan


class Table:
    """The Delta table at ``path``, read and written by ``backend`` (see :func:`open_table`)."""

    __slots__ = ("path", "spark", "backend")

    def __init__(self, path: str, backend: DeltaBackend, spark: SparkSession | None) -> None:
        self.path = str(path)
        self.backend = backend
        self.spark = spark

    def __repr__(self) -> str:
        return f"Table({self.path!r}, {self.backend.name!r})"

    @property
    def _kw(self) -> dict:
        return {"spark": self.spark, "backend": self.backend.name}

    # -- what the table is

    def exists(self) -> bool:
        """True when ``path`` holds a Delta table (inside :meth:`pinned`: when it did at the pinned version)."""
        return reads.table_exists(self.path, **self._kw)

    def version(self) -> int | None:
        """The current version; None when there is no table."""
        return reads.version(self.path, **self._kw)

    def schema(self) -> T.StructType:
        return reads.schema(self.path, **self._kw)

    def history(self, limit: int | None = None) -> list[reads.Commit]:
        """The commits, newest first."""
        return reads.history(self.path, limit=limit, **self._kw)

    def last_txn(self, app_id: str) -> int | None:
        """The last transaction version recorded for ``app_id``; None when none is (or no table)."""
        return commits.last_txn_version(self.path, app_id, **self._kw)

    @contextlib.contextmanager
    def pinned(self) -> Iterator[pins.Pin]:
        """Every commit to the table in the ``with`` block (this thread) is conditional on its
        version now: one that finds it moved raises :class:`~pipelines.delta_io.pins.StaleRead`."""
        with reads.pinned(self.path, **self._kw) as pin:
            yield pin

    # -- reads

    def read_df(self, columns: Sequence[str] | None = None, predicate: str | Column | None = None, *,
                above: tuple[str, object] | None = None) -> DataFrame:
        """The rows as a Spark DataFrame (:func:`pipelines.delta_io.reads.read`: ``above`` skips files)."""
        return reads.read(self.spark, self.path, columns, predicate, above=above, backend=self.backend.name)

    def read_rows(self, columns: Sequence[str] | None = None, *, above: tuple[str, object] | None = None) -> list:
        """A small table's rows on the driver, as ``Row`` objects; none when there is no table."""
        return reads.read_rows(self.spark, self.path, columns, above=above, backend=self.backend.name)

    def nothing_above(self, column: str, value) -> bool:
        """True when the files' statistics prove no row has ``column`` above ``value``."""
        return reads.nothing_above(self.spark, self.path, column, value, backend=self.backend.name)

    def read_arrow(self, columns: Sequence[str] | None = None) -> pa.Table:
        """The rows as Arrow on the driver, read by delta-rs whichever backend writes the table."""
        return rs_tables.read_arrow(self.path, columns)

    def read_arrow_in(self, columns: Sequence[str], column: str, values: Sequence[str]) -> pa.Table:
        """The rows whose string ``column`` is one of ``values``, as Arrow (files skipped by statistics)."""
        return rs_tables.read_arrow_in(self.path, columns, column, values)

    def count(self) -> int:
        """The rows of the current snapshot, counted by delta-rs."""
        return rs_tables.count_rows(self.path)

    def scan_arrow(self, above: tuple[str, object] | None = None) -> RsScan | None:
        """The live Parquet files read by pyarrow, row group by row group (``above``: only the files
        that may hold a row above it); None when the files alone do not give the rows."""
        return RsScan.open(self.path, above=above)

    # -- writes

    def create(self, schema: T.StructType, properties: Mapping[str, str] | None = None) -> bool:
        """An empty table with ``schema`` unless one exists; True when created (on delta-spark also
        when a writer racing this one created it: ``CREATE TABLE IF NOT EXISTS`` does not say)."""
        return writes.create_if_missing(self.path, schema, properties=properties, **self._kw)

    def add_columns(self, fields: Sequence[T.StructField] | T.StructType) -> list[str]:
        """Nullable columns added where missing; the names really added."""
        return writes.add_columns(self.path, fields, **self._kw)

    def append(self, df: DataFrame, commit: CommitInfo = NO_COMMIT_INFO, *, schema_evolution: bool = True) -> bool:
        """``df`` appended (the table created when missing); False when ``commit.txn`` was already recorded."""
        return writes.append(self.spark, df, self.path, txn_app_id=commit.app_id, txn_version=commit.version,
                             schema_evolution=schema_evolution, backend=self.backend.name)

    def append_rows(self, rows: Sequence[tuple], schema: str | T.StructType, commit: CommitInfo = NO_COMMIT_INFO,
                    *, schema_evolution: bool = True) -> bool:
        """A few rows the driver holds appended (delta-rs: no Spark job); False when skipped."""
        return writes.append_rows(self.spark, rows, schema, self.path, txn_app_id=commit.app_id,
                                  txn_version=commit.version, schema_evolution=schema_evolution,
                                  backend=self.backend.name)

    def overwrite(self, df: DataFrame, commit: CommitInfo = NO_COMMIT_INFO, *, overwrite_schema: bool = False) -> None:
        """The rows replaced with ``df`` (its schema too with ``overwrite_schema``)."""
        writes.overwrite(self.spark, df, self.path, overwrite_schema=overwrite_schema, user_metadata=commit.metadata,
                         backend=self.backend.name)

    def overwrite_rows(self, rows: Sequence[tuple], schema: str | T.StructType) -> None:
        """A small table's rows replaced with rows the driver holds, in one commit."""
        writes.overwrite_rows(self.spark, rows, schema, self.path, backend=self.backend.name)

    def create_with_rows(self, schema: T.StructType, rows, commit: CommitInfo = NO_COMMIT_INFO,
                         properties: Mapping[str, str] | None = None) -> bool:
        """A new table and its first rows in one commit; False when it needs column mapping."""
        return writes.create_with_rows(self.path, schema, rows, user_metadata=commit.metadata,
                                       properties=properties, **self._kw)

    def append_with_rows(self, schema: T.StructType, rows, commit: CommitInfo = NO_COMMIT_INFO) -> bool:
        """Rows the driver holds appended in one commit: a MERGE that only inserts, without its read."""
        return writes.append_with_rows(self.path, schema, rows, user_metadata=commit.metadata, **self._kw)

    def merge(self, source: DataFrame, on: str, clauses: Sequence[MergeClause], commit: CommitInfo = NO_COMMIT_INFO,
              *, source_schema: T.StructType | None = None, split_by: Sequence[str] | None = None,
              source_rows: int | None = None, local_source: bool = False) -> MergeResult:
        """MERGE ``source`` (alias ``s``) into the table (alias ``t``): :func:`pipelines.delta_io.merging.merge`."""
        return merging.merge(self.spark, self.path, source, on, clauses, commit, backend=self.backend.name,
                             source_schema=source_schema, split_by=split_by, source_rows=source_rows,
                             local_source=local_source)

    def merge_rows(self, source: pa.Table, on: str, clauses: Sequence[MergeClause],
                   commit: CommitInfo = NO_COMMIT_INFO, *, source_schema: T.StructType | None = None) -> MergeResult:
        """MERGE rows the driver holds (Arrow) into the table: delta-rs without a Spark job."""
        return merging.merge_rows(self.path, source, on, clauses, commit, spark=self.spark, backend=self.backend.name,
                                  source_schema=source_schema)

    # -- upkeep

    def storage(self) -> upkeep.Storage:
        """Data files of the snapshot and their bytes, against what is on disk and in the log."""
        return upkeep.storage(self.path, **self._kw)

    def compact(self, target_bytes: int, commit: CommitInfo = NO_COMMIT_INFO) -> tuple[int, int]:
        """Small files bin-packed near ``target_bytes``: (files removed, files added)."""
        return upkeep.compact(self.path, target_bytes=target_bytes, user_metadata=commit.metadata, **self._kw)

    def checkpoint(self) -> None:
        """A checkpoint of the current version, and the log files it covers cleaned up."""
        upkeep.checkpoint(self.path, **self._kw)

    def set_properties(self, wanted: Mapping[str, str], commit: CommitInfo = NO_COMMIT_INFO) -> bool:
        """The properties ``wanted`` set where the table says otherwise; True when it changed."""
        return upkeep.set_properties(self.path, dict(wanted), user_metadata=commit.metadata, **self._kw)

    def keep_properties(self, log_retention_hours: int, commit: CommitInfo = NO_COMMIT_INFO) -> bool:
        """The log retention and every new table's properties set where missing; True when it changed."""
        return upkeep.keep_properties(self.path, log_retention_hours, user_metadata=commit.metadata, **self._kw)

    def vacuum(self, retention_hours: int, commit: CommitInfo = NO_COMMIT_INFO) -> int:
        """Files no version younger than ``retention_hours`` uses, and staged files no version names, deleted."""
        return upkeep.vacuum(self.path, retention_hours, user_metadata=commit.metadata, **self._kw)


def open_table(path: str, backend: str = "auto", spark: SparkSession | None = None) -> Table:
    """The table at ``path`` (which need not exist yet), with the backend :func:`backend_for` picks
    for ``backend`` and ``spark``."""
    return Table(path, backend_for(spark, backend), spark)
