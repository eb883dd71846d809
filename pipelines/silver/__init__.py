"""Silver: each source table's current state, ``<warehouse>/silver/<database>/<table>``.

What each module holds (each imports only the ones above it in this list):

* :mod:`~pipelines.silver.columns`: silver's own column names per table, the working names a batch
  is planned with, and silver's errors.
* :mod:`~pipelines.silver.typed_values`: a bronze cell -> its silver Python value, one value at a
  time (what Arrow's typing falls back to where its casts do not take a column).
* :mod:`~pipelines.silver.segment_cells`: a batch's bronze rows as flat cells (read from bronze on
  the driver, or a record batch's image column).
* :mod:`~pipelines.silver.arrow_typing`: silver's one typing, in Arrow (value fixes first): a
  column, an image, a row, a record batch.
* :mod:`~pipelines.silver.spark_typing`: that typing as a Spark transform, inside Spark's tasks.
* :mod:`~pipelines.silver.arrow_fold`: which change wins, in Arrow: the latest event per key (the driver's).
* :mod:`~pipelines.silver.shapes`: which columns a row's images logged; rows grouped by shape.
* :mod:`~pipelines.silver.changes`: bronze rows -> per-key events (``DataFrame -> DataFrame``).
* :mod:`~pipelines.silver.plan`: the MERGE plans of one batch (``DataFrame -> DataFrame``, given the
  table as it is) and their clauses: "which change wins".
* :mod:`~pipelines.silver.merge`: one batch of one table MERGEd into its silver table, with Spark
  (:func:`apply_changes`: reads the table, evolves its schema, plans, MERGEs); the rules.
* :mod:`~pipelines.silver.driver`: small batches on the driver: which segments take that path, and
  their rows fetched in one Spark job.
* :mod:`~pipelines.silver.driver_writes`: what a batch folded on the driver is written to, and its
  one commit (create, append or MERGE from Arrow).
* :mod:`~pipelines.silver.columnar`: a batch's images typed, and a keyed batch's fold in Arrow.
* :mod:`~pipelines.silver.keyless`: a keyless batch's fold in Arrow, per identity.
* :mod:`~pipelines.silver.driver_fold`: small batches on the driver (either backend): typed and
  folded by Arrow, partial images made whole rows here; the same rules without a Spark job per
  table on delta-rs.
* :mod:`~pipelines.silver.big_segments`: big batches on delta-rs, read, typed and folded by Arrow
  part by part, and written.
* :mod:`~pipelines.silver.bronze_scan`: bronze's new rows read on the driver by delta-rs: shape
  counts per segment, and the small segments' rows.
* :mod:`~pipelines.silver.schema_events`: what schema events do to a silver table (CREATE, DROP,
  TRUNCATE, RENAME copies, ALTER TABLE's columns and their DEFAULTs, a new own-column prefix).
* :mod:`~pipelines.silver.stats`: what one run did: its summary and its row of ``_pipeline/runs``.
* :mod:`~pipelines.silver.marks`: which bronze rows are new: watermarks, the read-through mark, and
  the filters that keep the rows above them.
* :mod:`~pipelines.silver.snapshots`: what a loaded dump means to silver: the tables a pending
  snapshot rebuilds from its position (a reset there: its CREATE TABLE), and their rewind.
* :mod:`~pipelines.silver.segments`: a run's plan: each table's segments, their rows' shapes, and
  the lanes they run in.
* :mod:`~pipelines.silver.lanes`: a run's lanes: the state they share, the small segments' rows
  fetched for them, and each segment applied in turn (schema events, then its changes).
* :mod:`~pipelines.silver.step`: the silver step of a run: reads what is new, plans it, and runs the
  lanes that apply schema events and changes; then watermarks, quarantine and the run log.

>>> from pipelines.silver import apply_changes, changes_from_bronze  # doctest: +SKIP
"""
from pipelines.silver.changes import changes_from_bronze, fill_partial, key_events, latest_per_key
from pipelines.silver.columns import OwnColumns, SilverSchemaError, SilverStepError, working_changes
from pipelines.silver.merge import ApplyStats, apply_changes, silver_table_schema
from pipelines.silver.watermarks import fold_watermarks, read_watermark, watermark_metadata
from pipelines.silver.plan import keyed_clauses, keyless_clauses

__all__ = ["ApplyStats", "OwnColumns", "SilverSchemaError", "SilverStepError", "apply_changes", "changes_from_bronze",
           "fill_partial", "key_events", "keyed_clauses", "keyless_clauses", "latest_per_key", "read_watermark",
           "silver_table_schema", "fold_watermarks", "watermark_metadata", "working_changes"]
