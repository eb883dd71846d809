"""Which Delta protocol features a table needs for its schema, as plain functions of the schema.

Two features follow from what the source database allows, and both backends must agree on them
so that a table written by one can be written by the other:

* **Column mapping** (``delta.columnMapping.mode = name``). Without it Delta stores a column under
  its own name in Parquet, and delta-spark refuses names holding any of `` ,;{}()\\n\\t=``
  (``DELTA_INVALID_CHARACTERS_IN_COLUMN_NAMES``). MySQL allows them (`` `new col` ``,
  `` `a=b` ``). A table gets column mapping when, and only when, one of its names needs it: the
  Parquet files of every other table stay plain, readable by any Parquet reader.
* **timestampNtz**: a ``TIMESTAMP_NTZ`` column (silver's DATETIME). delta-spark enables it by
  itself when a table is created with such a column, but not when one is added later
  (``DELTA_FEATURES_REQUIRE_MANUAL_ENABLEMENT``), so it is enabled before the column is added.

The pipeline uses no other feature that needs enabling: no deletion vectors, type widening,
generated columns, constraints or partitioning.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from pyspark.sql import types as T

COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
DELETION_VECTORS = "delta.enableDeletionVectors"  # a table property; its reader and writer feature: deletionVectors
COLUMN_MAPPING_PHYSICAL = "delta.columnMapping.physicalName"
COLUMN_MAPPING_ID = "delta.columnMapping.id"
TIMESTAMP_NTZ_FEATURE = "delta.feature.timestampNtz"
# characters delta-spark refuses in a column name of a table without column mapping
COLUMN_MAPPING_CHARS = frozenset(" ,;{}()\n\t=")


def _names(dt: T.DataType) -> Iterable[str]:
    if isinstance(dt, T.StructType):
        for f in dt.fields:
            yield f.name
            yield from _names(f.dataType)
    elif isinstance(dt, T.ArrayType):
        yield from _names(dt.elementType)
    elif isinstance(dt, T.MapType):
        yield from _names(dt.keyType)
        yield from _names(dt.valueType)


def needs_column_mapping(fields: T.StructType | Iterable[T.StructField]) -> bool:
    """True when a column (or nested field) name can only be stored with column mapping.

    >>> needs_column_mapping(T.StructType([T.StructField("new col", T.StringType())]))
    True
    >>> needs_column_mapping([T.StructField("select", T.StringType()), T.StructField("😀", T.LongType())])
    False
    """
    struct = fields if isinstance(fields, T.StructType) else T.StructType(list(fields))
    return any(COLUMN_MAPPING_CHARS.intersection(name) for name in _names(struct))


def _has_ntz(dt: T.DataType) -> bool:
    if isinstance(dt, T.TimestampNTZType):
        return True
    if isinstance(dt, T.StructType):
        return any(_has_ntz(f.dataType) for f in dt.fields)
    if isinstance(dt, T.ArrayType):
        return _has_ntz(dt.elementType)
    if isinstance(dt, T.MapType):
        return _has_ntz(dt.keyType) or _has_ntz(dt.valueType)
    return False


def needs_timestamp_ntz(fields: T.StructType | Iterable[T.StructField]) -> bool:
    """True when a column (or nested field) is a ``TIMESTAMP_NTZ``.

    >>> needs_timestamp_ntz([T.StructField("d", T.TimestampNTZType())])
    True
    """
    return any(_has_ntz(f.dataType) for f in fields)


def uses_column_mapping(configuration: Mapping[str, str]) -> bool:
    """True when a table's configuration says its columns are mapped.

    >>> uses_column_mapping({"delta.columnMapping.mode": "name"}), uses_column_mapping({})
    (True, False)
    """
    return configuration.get(COLUMN_MAPPING_MODE, "none") != "none"


def create_properties(fields: T.StructType | Iterable[T.StructField]) -> dict[str, str]:
    """The table properties a new table with ``fields`` is created with (both backends).

    >>> create_properties([T.StructField("a b", T.StringType())])
    {'delta.columnMapping.mode': 'name'}
    >>> create_properties([T.StructField("ab", T.StringType())])
    {}
    """
    return {COLUMN_MAPPING_MODE: "name"} if needs_column_mapping(fields) else {}


def strip_mapping_metadata(schema: T.StructType) -> T.StructType:
    """The schema without column mapping's per-field metadata (ids, physical names): what a
    reader sees, and what a DataFrame written to another table must not carry.

    >>> f = T.StructField("a b", T.LongType(), True, {"delta.columnMapping.id": 1, "comment": "x"})
    >>> strip_mapping_metadata(T.StructType([f]))[0].metadata
    {'comment': 'x'}
    """
    def field(f: T.StructField) -> T.StructField:
        meta = {k: v for k, v in (f.metadata or {}).items() if not k.startswith("delta.columnMapping.")}
        return T.StructField(f.name, strip_type(f.dataType), f.nullable, meta)

    def strip_type(dt: T.DataType) -> T.DataType:
        if isinstance(dt, T.StructType):
            return T.StructType([field(f) for f in dt.fields])
        if isinstance(dt, T.ArrayType):
            return T.ArrayType(strip_type(dt.elementType), dt.containsNull)
        if isinstance(dt, T.MapType):
            return T.MapType(strip_type(dt.keyType), strip_type(dt.valueType), dt.valueContainsNull)
        return dt

    return T.StructType([field(f) for f in schema.fields])


def physical_names(delta_schema_json: str) -> dict[str, str] | None:
    """Logical -> physical name of each top-level column of a column-mapped table, or None when a
    nested field is mapped too (a plain rename of the top-level columns cannot read it).

    >>> physical_names('{"type":"struct","fields":[{"name":"a b","type":"long","nullable":true,'
    ...                '"metadata":{"delta.columnMapping.physicalName":"col-1"}}]}')
    {'a b': 'col-1'}
    """
    fields = json.loads(delta_schema_json)["fields"]
    if any(isinstance(f["type"], dict) for f in fields):
        return None
    return {f["name"]: (f.get("metadata") or {}).get(COLUMN_MAPPING_PHYSICAL, f["name"]) for f in fields}
