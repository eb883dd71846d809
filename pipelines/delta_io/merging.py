"""The MERGE primitive: clauses as SQL text both Spark SQL and delta-rs (DataFusion) parse the same
way (:class:`MergeClause`), what a MERGE did (:class:`MergeResult`), and :func:`merge`, run by the
backend: delta-spark (:func:`~pipelines.delta_io.spark_writes.merge_spark`) or delta-rs
(:func:`~pipelines.delta_io.rs_writes.merge_rs`, in chunks:
:class:`~pipelines.delta_io.rs_backend.RsBackend`)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pipelines.delta_io.backend import backend_for
from pipelines.delta_io.commits import NO_COMMIT_INFO, CommitInfo

SOURCE_ALIAS, TARGET_ALIAS = "s", "t"  # what ``on`` and the clauses call the source and the table


MergeKind = Literal["update", "delete", "insert"]


@dataclass(frozen=True)
class MergeClause:
    """One WHEN clause: ``update`` and ``delete`` act on matched rows, ``insert`` on unmatched ones.

    ``condition`` and the values of ``assignments`` are SQL text over the aliases (``s`` for the
    source, ``t`` for the target: :data:`SOURCE_ALIAS`, :data:`TARGET_ALIAS`); the keys of ``assignments`` are raw target column names
    (quoted here).

    >>> MergeClause("update", "s.`_seq` > t.`_seq`", {"v": "s.`v`"}).kind
    'update'
    """

    kind: MergeKind
    condition: str | None = None
    assignments: Mapping[str, str] | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("update", "delete", "insert"):
            raise ValueError(f"MergeClause kind must be update, delete or insert, got {self.kind!r}")
        if self.kind == "delete" and self.assignments:
            raise ValueError("a delete MergeClause takes no assignments")
        if self.kind != "delete" and not self.assignments:
            raise ValueError(f"an {self.kind} MergeClause needs assignments")


@dataclass(frozen=True)
class MergeResult:
    """What a MERGE did: the backend's row counts (``inserted``, ``updated``, ``deleted``)."""

    inserted: int
    updated: int
    deleted: int
    backend: str


def check_merge(on: str, clauses: Sequence[MergeClause]) -> None:
    if not on or not isinstance(on, str):
        raise ValueError(f"'on' in merge must be a non-empty SQL predicate, got {on!r}")
    if not clauses:
        raise ValueError("merge needs at least one MergeClause")


def merge(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    on: str,
    clauses: Sequence[MergeClause],
    commit: CommitInfo = NO_COMMIT_INFO,
    *,
    backend: str = "auto",
    source_schema: T.StructType | None = None,
    split_by: Sequence[str] | None = None,
    source_rows: int | None = None,
    local_source: bool = False,
) -> MergeResult:
    """MERGE ``source`` into the table at ``path`` with the chosen backend (same clauses for both).

    For delta-rs the source goes to the driver as Arrow, typed by ``source_schema`` (default: its
    own schema), which should carry the target's column types. A source of more than
    :data:`~pipelines.delta_io.rs_backend.MERGE_CHUNK_ROWS` rows (``source_rows``, when the caller
    knows it) is MERGEd in parts that split it by a hash of the ``split_by`` columns (the MERGE key:
    a key's rows stay in one part), so the driver holds one part at a time. The parts are separate commits and only the
    last carries ``commit`` (its metadata and transaction id): the clauses must be idempotent (silver's
    apply a change only when it is newer than the row), so that a run that dies between parts
    can simply be done again. On delta-spark a source of few rows (``source_rows``) into a small
    table is MERGEd by delta-rs the same way (:mod:`~pipelines.delta_io.spark_backend`).
    ``local_source``: the source is rows the driver holds (delta-spark then reads it as it is,
    without copying it first).

    >>> merge(spark, path, df, "t.`id` = s.`id`",
    ...       [MergeClause("update", "s.`_seq` > t.`_seq`", {"v": "s.`v`"}),
    ...        MergeClause("insert", None, {"id": "s.`id`", "v": "s.`v`"})])  # doctest: +SKIP
    """
    return backend_for(spark, backend).merge(spark, path, source, on, clauses, commit, source_schema=source_schema,
                                             split_by=split_by, source_rows=source_rows, local_source=local_source)


def merge_rows(path: str, source: pa.Table, on: str, clauses: Sequence[MergeClause],
               commit: CommitInfo = NO_COMMIT_INFO, *, spark: SparkSession | None = None, backend: str = "auto",
               source_schema: T.StructType | None = None) -> MergeResult:
    """MERGE the driver's ``source`` rows (Arrow; ``source_schema``: their Spark types, default
    Arrow's) into the table at ``path``:
    delta-rs from Arrow, no Spark job; delta-spark from a local relation. Alias ``s`` for the
    source, ``t`` for the table, in ``on`` and ``clauses``."""
    check_merge(on, clauses)
    return backend_for(spark, backend).merge_rows(spark, path, source, source_schema, on, clauses, commit)
