"""Types across the Arrow hop between Spark and delta-rs: Spark schemas to Arrow and back, our tables'
Arrow layouts as Spark schemas, the driver's rows to Arrow tables, kept exact (timestamps with and without time zone,
decimals, bytes, nested arrays of structs)."""
from __future__ import annotations

import datetime as _dt
import functools
import json
from collections.abc import Iterable, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pipelines.delta_io.backend import DeltaIOError, quote_ident


_SIMPLE_TO_ARROW: dict[type, pa.DataType] = {
    T.NullType: pa.null(),
    T.BooleanType: pa.bool_(),
    T.ByteType: pa.int8(),
    T.ShortType: pa.int16(),
    T.IntegerType: pa.int32(),
    T.LongType: pa.int64(),
    T.FloatType: pa.float32(),
    T.DoubleType: pa.float64(),
    T.StringType: pa.string(),
    T.BinaryType: pa.binary(),
    T.DateType: pa.date32(),
    T.TimestampType: pa.timestamp("us", tz="UTC"),
    T.TimestampNTZType: pa.timestamp("us"),
}


def spark_type_to_arrow(dt: T.DataType, *, force_nullable: bool = False) -> pa.DataType:
    """The Arrow type that carries a Spark type exactly (and that delta-rs maps to the same Delta type).

    >>> spark_type_to_arrow(T.TimestampType())
    TimestampType(timestamp[us, tz=UTC])
    >>> spark_type_to_arrow(T.DecimalType(20, 0))
    Decimal128Type(decimal128(20, 0))
    """
    simple = _SIMPLE_TO_ARROW.get(type(dt))
    if simple is not None:
        return simple
    if isinstance(dt, T.DecimalType):
        return pa.decimal128(dt.precision, dt.scale)
    if isinstance(dt, T.ArrayType):
        element = spark_type_to_arrow(dt.elementType, force_nullable=force_nullable)
        return pa.list_(pa.field("element", element, nullable=force_nullable or dt.containsNull))
    if isinstance(dt, T.MapType):
        key = spark_type_to_arrow(dt.keyType, force_nullable=force_nullable)
        value = spark_type_to_arrow(dt.valueType, force_nullable=force_nullable)
        return pa.map_(key, pa.field("value", value, nullable=force_nullable or dt.valueContainsNull))
    if isinstance(dt, T.StructType):
        return pa.struct([spark_field_to_arrow(f, force_nullable=force_nullable) for f in dt.fields])
    raise TypeError(f"no Arrow mapping for Spark type {dt.simpleString()}")


def spark_field_to_arrow(f: T.StructField, *, force_nullable: bool = False) -> pa.Field:
    """One Spark field as an Arrow field (same name, exact type)."""
    return pa.field(
        f.name,
        spark_type_to_arrow(f.dataType, force_nullable=force_nullable),
        nullable=force_nullable or f.nullable,
    )


def spark_schema_to_arrow(schema: T.StructType, *, force_nullable: bool = False) -> pa.Schema:
    """A Spark schema as an Arrow schema.

    >>> spark_schema_to_arrow(T.StructType([T.StructField("ts", T.TimestampNTZType())]))
    ts: timestamp[us]
    """
    return pa.schema([spark_field_to_arrow(f, force_nullable=force_nullable) for f in schema.fields])


def arrow_schema_to_spark(arrow_schema: pa.Schema) -> T.StructType:
    """The inverse of :func:`spark_schema_to_arrow`: a zoned timestamp is ``TimestampType``, a
    naive one ``TimestampNTZType``.

    >>> arrow_schema_to_spark(pa.schema([("t", pa.timestamp("us"))]))
    StructType([StructField('t', TimestampNTZType(), True)])
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema, prefer_timestamp_ntz=True)


def delta_schema_to_spark(delta_schema_json: str) -> T.StructType:
    """A Delta schema (its JSON form, which is Spark's own schema JSON) as a Spark StructType.

    >>> delta_schema_to_spark('{"type":"struct","fields":[{"name":"t","type":"timestamp_ntz","nullable":true,"metadata":{}}]}')
    StructType([StructField('t', TimestampNTZType(), True)])
    """
    return T.StructType.fromJson(json.loads(delta_schema_json))


def delta_field_json(f: T.StructField) -> str:
    """A Spark field as Delta field JSON (delta-rs ``Field.from_json``)."""
    return json.dumps(f.jsonValue())


def check_columns(wanted: Iterable[str], present: Sequence[str], what: str) -> None:
    missing = [c for c in wanted if c not in present]
    if missing:
        raise DeltaIOError(f"{what}: missing columns {missing}; present columns: {list(present)}")


def arrow_to_spark(
    spark: SparkSession, table: pa.Table, schema: T.StructType | None = None
) -> DataFrame:
    """A pyarrow Table as a Spark DataFrame with an explicit, exact Spark schema.

    The table is first cast to the Arrow form of ``schema`` (columns by name, in schema order),
    so Arrow quirks such as string views, large types or naive-vs-zoned timestamps cannot leak
    into the Spark types.  An empty table gives an empty DataFrame with ``schema``.
    Without ``schema`` the Spark types follow the Arrow types.

    >>> df = arrow_to_spark(spark, pa.table({"a": pa.array([1], pa.int8())}),
    ...                     T.StructType([T.StructField("a", T.ByteType())]))  # doctest: +SKIP
    """
    if schema is None:
        return spark.createDataFrame(table)
    check_columns(schema.fieldNames(), table.column_names, "arrow_to_spark")
    if table.num_rows == 0:  # pyspark's Arrow path cannot take chunk-less columns
        return spark.createDataFrame([], schema=schema)
    target = spark_schema_to_arrow(schema)
    columns = []
    for f in target:
        column = table.column(f.name)
        columns.append(column if column.type == f.type else column.cast(f.type))
    cast = pa.Table.from_arrays(columns, schema=target)
    return spark.createDataFrame(cast, schema=schema)


def spark_to_arrow(df: DataFrame, schema: T.StructType | None = None) -> pa.Table:
    """A Spark DataFrame as a pyarrow Table whose types delta-rs maps back to the same Delta types.

    ``schema`` (default: the DataFrame's) picks and orders the columns and fixes their types;
    every Arrow field is nullable, as Delta tables written from Spark are.
    """
    schema = df.schema if schema is None else schema
    check_columns(schema.fieldNames(), df.columns, "spark_to_arrow")
    if len(set(df.columns)) != len(df.columns):
        raise DeltaIOError(f"spark_to_arrow: duplicate column names in {df.columns}")
    selected = df.select(*[F.col(quote_ident(f.name)).cast(f.dataType) for f in schema.fields])
    table = selected.toArrow()
    target = spark_schema_to_arrow(schema, force_nullable=True)
    columns = []
    for f in target:
        column = table.column(f.name)
        columns.append(column if column.type == f.type else column.cast(f.type))
    return pa.Table.from_arrays(columns, schema=target)


@functools.lru_cache(maxsize=64)
def _struct_of_layout(layout: pa.Schema) -> T.StructType:
    return arrow_schema_to_spark(layout)


def struct_of(layout: pa.Schema | T.StructType) -> T.StructType:
    """A table's layout as a Spark schema: our tables are declared as Arrow schemas (a zoned
    timestamp is ``TimestampType``); a Spark schema is returned as it is.

    >>> struct_of(pa.schema([("a", pa.string()), ("b c", pa.int64())]))
    StructType([StructField('a', StringType(), True), StructField('b c', LongType(), True)])
    """
    if isinstance(layout, T.StructType):
        return layout
    if not isinstance(layout, pa.Schema):
        raise DeltaIOError(f"a table layout is an Arrow or a Spark schema, got {type(layout).__name__}")
    return _struct_of_layout(layout)


def spark_type_of(arrow_type: pa.DataType) -> T.DataType:
    """One column type of a layout as its Spark type (as :func:`struct_of` types the column).

    >>> spark_type_of(pa.list_(pa.struct([("idx", pa.int32())]))).simpleString()
    'array<struct<idx:int>>'
    """
    return _struct_of_layout(pa.schema([("c", arrow_type)]))["c"].dataType


def rows_to_arrow(rows: Sequence[tuple], schema: T.StructType) -> pa.Table:
    """Python rows (tuples in ``schema`` order) as an Arrow table with the types
    :func:`spark_to_arrow` gives (every field nullable).

    >>> rows_to_arrow([("a", 1)], T.StructType([T.StructField("s", T.StringType()), T.StructField("n", T.LongType())])).num_rows
    1
    """
    target = spark_schema_to_arrow(schema, force_nullable=True)
    width = len(target)
    for i, row in enumerate(rows):
        if len(row) != width:
            raise DeltaIOError(f"row {i} has {len(row)} value(s), the schema {len(target)}: {schema.simpleString()}")
    columns = []
    for j, field in enumerate(target):
        values = [row[j] for row in rows]
        if pa.types.is_nested(field.type):  # Spark takes a struct as a list too, Arrow only a tuple
            values = [_for_arrow(v, schema[j].dataType) for v in values]
        if pa.types.is_timestamp(field.type) and field.type.tz is not None:
            naive = next((v for v in values if isinstance(v, _dt.datetime) and v.tzinfo is None), None)
            if naive is not None:
                raise DeltaIOError(f"column {field.name!r}: timestamp {naive} has no time zone")
        try:
            columns.append(pa.array(values, type=field.type))
        except (pa.ArrowException, TypeError, ValueError) as e:
            raise DeltaIOError(f"column {field.name!r} ({schema[j].dataType.simpleString()}): {e}") from e
    return pa.Table.from_arrays(columns, schema=target)


def as_arrow(rows: Sequence[tuple] | pa.Table, schema: T.StructType) -> pa.Table:
    """``rows`` (Python tuples, or an Arrow table with ``schema``'s columns) as :func:`rows_to_arrow` makes them."""
    if isinstance(rows, pa.Table):
        return rows.select(schema.fieldNames()).cast(spark_schema_to_arrow(schema, force_nullable=True))
    return rows_to_arrow(rows, schema)


def _for_arrow(value, dt: T.DataType):
    """A nested Python value in the form ``pa.array`` takes (structs as tuples or dicts)."""
    if value is None:
        return None
    if isinstance(dt, T.StructType):
        if isinstance(value, dict):
            return {f.name: _for_arrow(value.get(f.name), f.dataType) for f in dt.fields}
        if len(value) != len(dt.fields):
            raise DeltaIOError(f"struct value {value!r} has {len(value)} field(s), the type {len(dt.fields)}: "
                               f"{dt.simpleString()}")
        return tuple(_for_arrow(v, f.dataType) for v, f in zip(value, dt.fields))
    if isinstance(dt, T.ArrayType):
        return [_for_arrow(v, dt.elementType) for v in value]
    return value


def fit_columns(data: pa.Table, table_schema: T.StructType) -> pa.Table:
    """``data`` with exactly the table's columns, in its order: columns it lacks are nulls."""
    columns = []
    for f in spark_schema_to_arrow(table_schema, force_nullable=True):
        if f.name in data.column_names:
            column = data.column(f.name)
            columns.append(column if column.type == f.type else column.cast(f.type))
        else:
            columns.append(pa.nulls(data.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=spark_schema_to_arrow(table_schema, force_nullable=True))

