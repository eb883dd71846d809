"""What a segment folded on the driver is written to and the write: the silver table as it is and
as the segment's specs make it (:class:`Target`, :func:`target_of`), and the folded rows' one
commit (:func:`write`: a new table created with its rows, an append, or a MERGE), shared by the
small segments (:mod:`pipelines.silver.driver_fold`) and the big ones
(:mod:`pipelines.silver.big_segments`). No typing, no folding."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines import delta_io
from pipelines.delta_io import qualified
from pipelines.silver.columns import ACTION, DEFAULT_PREFIX, OwnColumns, own_columns_of
from pipelines.silver.merge import ApplyStats, check_reserved, plan_schema, resolve_keys
from pipelines.silver.watermarks import read_watermark, watermark_metadata
from pipelines.silver.plan import key_on, value_schema, keyed_clauses, keyless_clauses
from pipelines.schema.typemap import ColumnSpec


@dataclass
class Target:
    """What a segment is applied to (:func:`target_of`): the silver table as it is and as the
    segment's specs make it, and silver's value columns mapped to the specs."""
    path: str
    exists: bool
    own: OwnColumns
    target: T.StructType  # the table's schema after the segment (columns added)
    to_add: list
    keys: list[str] | None  # silver's names of the key columns (None: a keyless table)
    watermark: str | None
    values: T.StructType  # silver's value columns (not its own), in table order
    value_idx: list[int | None]  # per value column: the spec it holds (None: a column the specs lack)
    key_spec: list[int] | None  # per key: its spec's index

    @property
    def source_schema(self) -> T.StructType:
        """The MERGE source's columns: the values, silver's own columns and the action."""
        by_name = {f.name: f for f in self.target.fields}
        own = self.own
        return T.StructType([*self.values.fields, *[by_name[n] for n in (own.seq, own.op, own.commit_ts, own.deleted)],
                             T.StructField(ACTION, T.StringType())])


def target_of(spark: SparkSession | None, path: str, specs: Sequence[ColumnSpec], keys: Sequence[str] | None, *,
              column_prefix: str | None, backend: str) -> Target:
    """The :class:`Target` of a segment of ``path`` with ``specs`` and ``keys`` (spec names; None or
    empty: a keyless table). Reads the table's schema and watermark; writes nothing."""
    table = delta_io.open_table(path, backend, spark)
    keys = resolve_keys(list(keys), specs) if keys else None
    exists = table.exists()
    current = table.schema() if exists else None
    own = own_columns_of(current.fieldNames(), column_prefix) if current is not None else \
        OwnColumns(column_prefix or DEFAULT_PREFIX)
    check_reserved([s.name for s in specs], own)
    target, to_add, names = plan_schema(current, specs, False, own)
    silver_name = {spec: silver for silver, spec in names.items()}
    values = value_schema(target, own)
    spec_at = {s.name: i for i, s in enumerate(specs)}
    return Target(path=path, exists=exists, own=own, target=target, to_add=to_add,
                  keys=None if keys is None else [silver_name[k] for k in keys],
                  watermark=read_watermark(path, spark=spark, backend=backend) if exists else None, values=values,
                  value_idx=[spec_at.get(names.get(f.name)) for f in values.fields],
                  key_spec=None if keys is None else [spec_at[k] for k in keys])



def write(spark: SparkSession | None, t: Target, source: list[tuple] | pa.Table | None, counts: dict | None, *,
          new_mark: str | None, changes: int, skipped: int, zeros: int, delete_mode: str, backend: str,
          properties: dict[str, str] | None) -> ApplyStats:
    """Write a folded segment: the MERGE ``source`` rows (:attr:`Target.source_schema`; None: no
    change above the watermark) into ``t``'s table, its columns added first, in one commit that
    records ``new_mark`` as the watermark (a new table: created with its rows). ``counts`` None:
    delta-spark's MERGE metrics count them."""
    path, table = t.path, delta_io.open_table(t.path, backend, spark)
    added = table.add_columns(t.to_add) if t.exists and t.to_add else []
    base = dict(changes=changes, skipped_by_watermark=skipped, zero_dates_nulled=zeros,
                columns_added=tuple(added), backend=backend, table_path=path)
    if source is None:
        if not t.exists:
            table.create(t.target, properties)
        return ApplyStats(watermark=t.watermark, **base)

    schema, own, target = t.source_schema, t.own, t.target
    if t.keys is None:
        on, clauses = f"{qualified('t', own.seq)} = {qualified('s', own.seq)}", keyless_clauses(target.fieldNames(),
                                                                                                delete_mode, own)
    else:
        on, clauses = key_on(t.keys), keyed_clauses(target.fieldNames(), delete_mode, own)
    arrow = source if isinstance(source, pa.Table) else delta_io.rows_to_arrow(source, schema)
    commit = delta_io.CommitInfo(metadata=watermark_metadata(new_mark))
    if not t.exists:  # a new table: created with its rows, one commit (what the MERGE would insert)
        first = arrow.select(target.fieldNames())
        made = table.create_with_rows(target, first, commit, properties)
        if made:
            return ApplyStats(watermark=new_mark, committed=True, **counts, **base)
        table.create(target, properties)
        # an empty table: nothing matches, so only the insert clause can act (delta-spark then
        # takes its insert-only MERGE, a join fewer)
        clauses = [c for c in clauses if c.kind == "insert"]
    if counts is not None and arrow.num_rows and counts.get("inserted") == arrow.num_rows:
        # every source row is one the MERGE would insert (no stored row has its key, or its _seq):
        # appended, in one commit with the watermark, without the MERGE's read of the stored rows
        # (an append-only log's cost then follows its new rows, not the rows it holds)
        rows = arrow.select(target.fieldNames())
        table.append_with_rows(target, rows, commit)
        return ApplyStats(watermark=new_mark, committed=True, **counts, **base)
    # (no source row: the commit still moves the watermark, as apply_changes's MERGE does)
    done = table.merge_rows(arrow, on, clauses, commit, source_schema=schema)
    if counts is None:  # (delta-spark's MERGE metrics)
        counts = {"inserted": done.inserted, "updated": done.updated, "deleted": done.deleted,
                  "unchanged": arrow.num_rows - done.inserted - done.updated - done.deleted}
    return ApplyStats(watermark=new_mark, committed=True, **counts, **base)
