"""A new schema for a column-mapped table, with delta-rs (:func:`reshape_rs`).

deltalake 1.6 writes a table with column mapping only with the schema it has ("Schema evolution
on column-mapped tables is not yet supported"). Silver needs more when the source table changes:
a column's type changes, a column is added with a DEFAULT or added again under a dropped name, a
CREATE TABLE replaces a table with another schema. So the new rows are written as a Delta table of
their own, in a folder inside the table's (with column mapping, so under physical names of their
own), and one overwrite commit of the table takes that table's files and its schema. Until that
commit the table is what it was; a run that dies before it leaves only the folder's files, which
no commit names (VACUUM removes them). Also where columns delta-rs cannot add in place are added
(:func:`add_columns_rs_elsewhere`).
"""
from __future__ import annotations

import json
import uuid

import pyarrow as pa

from collections.abc import Sequence

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from pipelines import storage
from pipelines.delta_io.arrow import fit_columns
from pipelines.delta_io.backend import DeltaIOError
from pipelines.delta_io.commits import commit_retried
from pipelines.delta_io.features import (
    COLUMN_MAPPING_ID, COLUMN_MAPPING_MODE, needs_column_mapping, uses_column_mapping,
)
from pipelines.delta_io.reads import schema
from pipelines.delta_io.rs_tables import rs_table, read_arrow
from pipelines.delta_io.rs_writes import rs_commit_properties, rs_create, rs_ensure_mapping_feature, rs_landed
from pipelines.delta_io.writes import new_fields, add_columns

MAX_COLUMN_ID = "delta.columnMapping.maxColumnId"
STAGE_PREFIX = "reshape-"

# the features a legacy protocol (no feature lists) implies, by minimum writer version
_LEGACY_WRITER_FEATURES = {
    2: {"appendOnly", "invariants"},
    3: {"checkConstraints"},
    4: {"changeDataFeed", "generatedColumns"},
    5: {"columnMapping"},
    6: {"identityColumns"},
}


def protocol_features(protocol) -> set[str]:
    """The writer features a delta-rs ``ProtocolVersions`` has: its list, or what its legacy
    version implies.

    >>> from types import SimpleNamespace as P
    >>> sorted(protocol_features(P(min_writer_version=5, writer_features=None)))
    ['appendOnly', 'changeDataFeed', 'checkConstraints', 'columnMapping', 'generatedColumns', 'invariants']
    >>> protocol_features(P(min_writer_version=7, writer_features=["timestampNtz"]))
    {'timestampNtz'}
    """
    if protocol.writer_features is not None:
        return set(protocol.writer_features)
    out: set[str] = set()
    for version, names in _LEGACY_WRITER_FEATURES.items():
        if protocol.min_writer_version >= version:
            out |= names
    return out


def max_column_id(schema_json: str) -> int:
    """The largest column-mapping id in a Delta schema's JSON (0: none).

    >>> max_column_id('{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,'
    ...               '"metadata":{"delta.columnMapping.id":3}}]}')
    3
    """
    def ids(fields):
        for f in fields:
            meta = f.get("metadata") or {}
            if COLUMN_MAPPING_ID in meta:
                yield int(meta[COLUMN_MAPPING_ID])
            kind = f.get("type")
            if isinstance(kind, dict) and kind.get("type") == "struct":
                yield from ids(kind["fields"])

    return max(ids(json.loads(schema_json)["fields"]), default=0)


def reshape_rs(path: str, data: pa.Table, user_metadata: str | None = None) -> None:
    """Replace the rows and the schema of the column-mapped table at ``path`` with ``data`` in one
    commit (see the module's docstring) that records ``user_metadata``; each commit made against
    the table's pinned version when this thread pinned it (:mod:`pipelines.delta_io.pins`)."""
    from deltalake import TableFeatures, write_deltalake

    folder = f"{STAGE_PREFIX}{uuid.uuid4().hex}"
    stage = f"{str(path).rstrip('/')}/{folder}"
    rs_create(stage, data.schema, {COLUMN_MAPPING_MODE: "name"})
    write_deltalake(rs_table(stage), data, mode="append")
    staged = rs_table(stage)
    table = rs_table(path)
    # the staged schema's ids count from 1: the table's largest id must cover them (set first:
    # on a table-features protocol, delta-rs 1.6 also lists every feature it knows in the commit)
    top = max_column_id(staged.schema().to_json())
    if top > int(table.metadata().configuration.get(MAX_COLUMN_ID, "0")):
        table.alter.set_table_properties({MAX_COLUMN_ID: str(top)}, raise_if_not_exists=False,
                                         commit_properties=rs_commit_properties(None, None, None, path))
        rs_landed(path)
        table = rs_table(path)
    # features the new schema needs (a TIMESTAMP_NTZ column) that the table does not have yet
    named = {"timestampNtz": TableFeatures.TimestampWithoutTimezone, "columnMapping": TableFeatures.ColumnMapping}
    # (the staged table's own features: a legacy protocol lists none, and only allows the ones
    # its version implies)
    needs = set(staged.protocol().writer_features or ()) | {"columnMapping"}
    missing = needs - protocol_features(table.protocol())
    for feature in sorted(missing):
        if feature not in named:
            raise DeltaIOError(f"overwrite({path}): the new schema needs the Delta feature {feature!r}, "
                               "which delta-rs cannot add to this table")
        table.alter.add_feature(named[feature], allow_protocol_versions_increase=True,
                                commit_properties=rs_commit_properties(None, None, None, path))
        rs_landed(path)
        table = rs_table(path)
    if missing:
        rs_ensure_mapping_feature(str(path))
        table = rs_table(path)
    table.create_write_transaction(_staged_adds(stage, staged, folder), "overwrite", staged.schema(),
                                   commit_properties=rs_commit_properties(None, None, user_metadata, path))
    rs_landed(path)
    fs, root = storage.arrow_filesystem(stage)  # the staged table's log: its files now belong to the table
    try:
        fs.delete_dir(f"{root}/_delta_log")
    except (FileNotFoundError, OSError):
        pass


def _staged_adds(stage: str, staged, folder: str) -> list:
    """The staged table's files as add actions of the table around it (paths under ``folder``),
    with the staged table's statistics as delta-rs wrote them (read from its log, wherever the
    table is: :func:`pipelines.storage.arrow_filesystem`)."""
    from deltalake.transaction import AddAction
    from pyarrow import fs as pafs

    stats: dict[str, str] = {}
    fs, root = storage.arrow_filesystem(stage)
    for info in sorted(fs.get_file_info(pafs.FileSelector(f"{root}/_delta_log")), key=lambda i: i.base_name):
        if info.base_name.endswith(".json"):
            with fs.open_input_stream(info.path) as f:
                for line in f.read().decode("utf-8").splitlines():
                    add = json.loads(line).get("add") if line.strip() else None
                    if add is not None and add.get("stats"):
                        stats[add["path"]] = add["stats"]
    adds = pa.table(staged.get_add_actions(flatten=True)).to_pylist()
    return [AddAction(f"{folder}/{a['path']}", a["size_bytes"], {}, int(a["modification_time"]), True,
                      stats.get(a["path"], json.dumps({"numRecords": a["num_records"]})))
            for a in adds]


def rs_needs_spark_to_add(path: str, adding: Sequence[T.StructField]) -> bool:
    """True when delta-rs cannot add ``adding`` in place: it cannot change the schema of a
    column-mapped table (deltalake 1.6: "Schema evolution on column-mapped tables is not yet
    supported"), nor turn column mapping on for a table that has none."""
    dt = rs_table(path)
    return uses_column_mapping(dt.metadata().configuration) or needs_column_mapping(adding)


def add_columns_rs_elsewhere(path: str, adding: Sequence[T.StructField], spark: SparkSession | None) -> list[str]:
    """Columns that delta-rs cannot add in place (see :func:`rs_needs_spark_to_add`) are added by
    delta-spark when this session has it (a change of the schema alone); else, to a column-mapped
    table, by writing its rows again with the new columns empty
    (:func:`~pipelines.delta_io.rs_reshape.reshape_rs`, one commit). Only turning column mapping
    on for a table without it needs delta-spark."""
    from pipelines.spark_session import delta_spark_available

    if spark is not None and delta_spark_available(spark):
        return add_columns(path, adding, spark=spark, backend="spark")
    if uses_column_mapping(rs_table(path).metadata().configuration):
        def attempt(n: int) -> list[str]:
            current = schema(path, backend="rs")
            new = new_fields(T.StructType(list(adding)), current)
            if new:
                reshape_rs(path, fit_columns(read_arrow(path), T.StructType(current.fields + new)))
            return [f.name for f in new]

        return commit_retried("add_columns", path, attempt)
    names = [f.name for f in adding]
    raise DeltaIOError(
        f"add_columns({path}): cannot add {names} with delta-rs: their names need column mapping "
        "(a column name holds one of ' ,;{}()\\n\\t='), which deltalake 1.6 cannot turn on for a table "
        "created without it. Run this step with delta-spark on the classpath (make setup fetches the "
        "jars; set delta.backend: spark, or --delta-backend spark)")
