"""The one package that touches Delta tables, behind one small interface with two backends.

A caller opens a table once, ``t = open_table(path, backend, spark)``, and reads, writes and keeps it
through the :class:`Table` (``exists``, ``schema``, ``read_df``, ``read_rows``, ``read_arrow``,
``scan_arrow``, ``create``, ``append``, ``merge``, ``overwrite``, ``compact``, ``vacuum``, ...); what a
commit records beside its rows (a transaction id, silver's watermark) is one :class:`CommitInfo`.
Whatever differs between the backends is behind it: no caller branches on a backend's name, it
asks what the backend declares (``t.backend.on_driver``, ``t.backend.deletion_vectors``).

* ``"spark"``: delta-spark on the JVM (clusters; locally when ``DELTA_JARS`` names the jars).
* ``"rs"``: delta-rs (the ``deltalake`` package) on the driver, with Arrow between it and Spark.
  Reads are Spark Parquet reads of the files delta-rs lists; MERGE sources and small appends pass
  through the driver as Arrow (rows the driver already holds, :meth:`Table.append_rows`, without a Spark
  job); big appends (bronze) are staged: Spark tasks write the Parquet files
  into the table folder (:class:`ParquetStager`) and the driver commits them (:func:`commit_staged`).
* ``"auto"``: ``"spark"`` on a cluster whose classpath has delta-spark
  (:func:`pipelines.spark_session.delta_spark_available`), else ``"rs"`` (see :func:`resolve_backend`).

Both backends write the same Delta protocol, so a table written by one is read by the other.
Types are kept exact across the Arrow hop: Spark ``TimestampType`` <-> Delta ``timestamp`` <->
Arrow ``timestamp[us, tz=UTC]``; ``TimestampNTZType`` <-> ``timestamp_ntz`` <-> ``timestamp[us]``;
decimals keep precision and scale; bytes stay bytes; nested arrays of structs are kept.

MERGE logic lives in :mod:`pipelines.silver`; this module only offers the MERGE primitive
(:meth:`Table.merge`: delta-spark's ``merge_spark`` or delta-rs's ``merge_rs``).  Predicates and expressions
handed to it are SQL text that both Spark SQL and delta-rs (DataFusion) parse the same way;
quote every column name with :func:`quote_ident` (source column names come from the binlog and
may contain spaces, dots, quotes, backticks, emoji or SQL keywords).

Every commit (append, merge, overwrite, create, add_columns) goes through :func:`pipelines.delta_io.commits.commit_retried`:

* it passes the fault points of :mod:`pipelines.faults` (``<operation>.<table kind>.before`` /
  ``.after``, and ``append.<kind>.materialize`` before an append computes its DataFrame);
* a commit that loses a race with another writer (delta-rs ``CommitFailedError``, delta-spark's
  ``Concurrent*Exception`` / ``MetadataChangedException``..., known by their Java class) is tried again, the whole operation,
  up to :data:`COMMIT_ATTEMPTS` times with a growing, jittered pause. Each retry first looks at the
  table again: an append with a transaction id that is now recorded is skipped, ``create`` finds
  the table, ``add_columns`` adds only what is still missing, a MERGE is evaluated against the
  new snapshot (silver's MERGE clauses only apply a change newer than the row's ``_seq``).

With delta-rs, a write with a transaction id checks the id on the very snapshot it commits
against, so a writer that commits the same id in between makes this commit conflict (and the
retry skip it); a table that does not exist yet is first created empty, because delta-rs does not
check two racing creating writes against each other.

Modules (each imports only those above it; :func:`~pipelines.delta_io.backend.backend_for` finds the
backends in a table this ``__init__`` fills once it has imported them; callers use the names
re-exported here, and reach a table only through :func:`open_table`):

* ``backend``       which backend a call uses, the backend interface (``DeltaBackend``, ``backend_for``),
  errors, identifier quoting, a URI's Arrow filesystem; imports no other module of the package
* ``features``      Delta protocol features a schema needs (column mapping, timestamp without time
  zone), pure functions; imports none
* ``arrow``         types across the Arrow hop: Spark schemas <-> Arrow, the driver's rows -> Arrow;
  imports ``backend``
* ``pins``          commits conditional on the version a writer read (:func:`pinned`,
  :class:`StaleRead`): plain values and a context variable; imports ``backend``
* ``reads``         existence, schema, DataFrames, small tables' rows, history, versions and pins:
  checks, then the backend; imports ``backend``, ``pins``
* ``commits``       :class:`CommitInfo` (what a commit records beside its rows), transaction ids, the
  retried commit with its fault points
  (:func:`~pipelines.delta_io.commits.commit_retried`); imports ``backend``, ``reads``
* ``writes``        create, add columns, append, append rows, overwrite: checks, column checks, retried
  commits, then the backend; imports the above
* ``merging``       ``MergeClause``, ``MergeResult``, :func:`merge`: then the backend; imports ``backend``
* ``upkeep``        compaction, checkpoints, log retention, VACUUM (the backend's), storage figures;
  imports ``backend``
* ``rs_tables``     delta-rs tables opened (at a pinned version, or the latest) and read on the driver:
  :func:`read_arrow`, :func:`read_arrow_in`, :func:`count_rows`, history; imports ``arrow``, ``features``,
  ``pins``, ``reads``
* ``spark_commits`` what a delta-spark commit carries and is checked against: its session settings
  (:func:`commit_session`), log and snapshot through the JVM, pinned commits' checks; imports
  ``backend``, ``pins``
* ``spark_writes``  delta-spark's :func:`merge_spark` and the driver's rows' writes; imports the modules above
* ``spark_backend`` ``SparkBackend``: every delta-spark half, feature enabling; what the driver reads or writes itself goes to
  delta-rs; imports the modules above
* ``rs_writes``     delta-rs commits: commit properties, creating, appending Arrow rows,
  :func:`merge_rs` and the driver's rows' writes; imports the modules above but the ``spark_`` ones
* ``rs_reshape``    a column-mapped table's new schema written as staged rows and one overwrite commit,
  and the columns delta-rs cannot add in place; imports ``rs_tables``, ``rs_writes`` and those they import
* ``rs_backend``    ``RsBackend``: every delta-rs half (Spark reads of the files delta-rs lists, MERGE in
  chunks, upkeep), calling ``rs_tables`` and ``rs_writes``; imports the modules above but the ``spark_`` ones
* ``staging``       big delta-rs appends: Parquet written by tasks, committed by the driver; imports
  ``arrow``, ``backend``, ``commits``, ``rs_tables``, ``rs_writes``
* ``table``         :func:`open_table` and :class:`Table`: the face the pipeline
  uses, each method one of the operations above with the table's path, session and backend; imports them
"""
from __future__ import annotations

from pipelines.delta_io.backend import (
    BACKENDS, Backend, DELTA_LOG, DeltaBackend, DeltaIOError, backend_for, named, qualified, quote_ident, resolve_backend,
)
from pipelines.delta_io.arrow import (
    arrow_schema_to_spark, arrow_to_spark, delta_schema_to_spark, rows_to_arrow, spark_type_of, struct_of,
    spark_field_to_arrow, spark_schema_to_arrow, spark_to_arrow, spark_type_to_arrow,
)
from pipelines.delta_io.features import DELETION_VECTORS
from pipelines.delta_io.pins import PIN_APP_ID, StaleRead
from pipelines.delta_io.reads import Commit
from pipelines.delta_io.commits import COMMIT_ATTEMPTS, conflict_retries, is_commit_conflict
from pipelines.delta_io.merging import MergeClause, MergeKind, MergeResult
from pipelines.delta_io.upkeep import Storage
from pipelines.delta_io.rs_tables import exit_process
from pipelines.delta_io.rs_scan import RsScan as Scan
from pipelines.delta_io import rs_backend, spark_backend
from pipelines.delta_io.backend import register
from pipelines.delta_io.rs_backend import MERGE_CHUNK_ROWS
from pipelines.delta_io.staging import (
    ParquetStager, STAGED_BATCH_ROWS, STAGED_FILE_ROWS, StagedFile, commit_staged, discard_staged,
    prepare_staging,
)
from pipelines.delta_io.commits import CommitInfo
from pipelines.delta_io.table import Table, open_table

register(spark_backend.BACKEND)
register(rs_backend.BACKEND)

__all__ = [
    "BACKENDS", "Backend", "COMMIT_ATTEMPTS", "Commit", "CommitInfo", "DELETION_VECTORS", "DELTA_LOG", "DeltaBackend",
    "DeltaIOError", "MERGE_CHUNK_ROWS", "MergeClause", "MergeKind", "MergeResult", "PIN_APP_ID", "ParquetStager",
    "STAGED_BATCH_ROWS", "STAGED_FILE_ROWS", "Scan", "StagedFile", "StaleRead", "Storage", "Table",
    "arrow_schema_to_spark", "arrow_to_spark", "backend_for", "commit_staged", "conflict_retries",
    "delta_schema_to_spark", "discard_staged", "exit_process", "is_commit_conflict", "named", "open_table",
    "prepare_staging", "qualified", "quote_ident", "resolve_backend", "rows_to_arrow", "spark_field_to_arrow",
    "spark_schema_to_arrow", "spark_to_arrow", "spark_type_of", "spark_type_to_arrow", "struct_of",
]
