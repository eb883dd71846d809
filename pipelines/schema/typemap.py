"""MySQL column types -> silver Spark types, and the conversion of bronze values to them.

The contract (one row per MySQL type; ``unsigned`` where it matters):

==========================  ==========================================================
MySQL                       silver Spark type
==========================  ==========================================================
TINYINT (BOOL)              ByteType, ShortType if unsigned
SMALLINT                    ShortType, IntegerType if unsigned
MEDIUMINT                   IntegerType
INT                         IntegerType, LongType if unsigned
BIGINT                      LongType, DecimalType(20,0) if unsigned
FLOAT / DOUBLE              FloatType / DoubleType (FLOAT(p) with p > 24 is DOUBLE)
DECIMAL(p,s)                DecimalType(p,s) when p <= 38, else StringType (exact text)
DATE                        DateType
DATETIME                    TimestampNTZType
TIMESTAMP                   TimestampType (UTC)
TIME                        StringType, its text (``-12:00:00.5``)
YEAR                        ShortType
CHAR/VARCHAR/TEXT/ENUM/SET  StringType (SET as ``a,b``)
JSON/INET4/INET6/UUID       StringType
VECTOR / XMLTYPE            StringType (VECTOR as the decoder's JSON array text)
BINARY/VARBINARY/BLOB       BinaryType (BINARY(n) right-padded with 0x00 to n bytes)
BIT                         LongType (BIT(64) values >= 2^63 keep their bits: two's complement)
GEOMETRY (and subtypes)     BinaryType
==========================  ==========================================================

Bronze holds every value in a generic form (see :mod:`pipelines.bronze.schema`): ``text`` is the
canonical text of typed values, ``bin`` the bytes of binary values, both NULL for SQL NULL.
Canonical texts: integers and decimals plain, floats as Python ``repr``, DATE ``YYYY-MM-DD``,
DATETIME and TIMESTAMP ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (TIMESTAMP in UTC), TIME
``[-]H:MM:SS[.ffffff]``, BIT and unsigned BIGINT as unsigned integer text.

Zero and invalid temporal values (``0000-00-00``, ``2024-02-30``, ``2024-00-10``, YEAR ``0000``)
become NULL; :func:`typed_columns` counts them per row in ``_zero_dates`` so the run log can keep
the number.  Any other value whose text does not convert is an error: the Spark job fails with a
message naming the column, its type and the text (never a silent NULL).

Silver columns are all nullable: zero dates turn into NULL even in NOT NULL columns, and rows
written before an ADD COLUMN have NULL in it.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pipelines.errors import PipelineError

ZERO_DATES_COL = "_zero_dates"
_TMP = "__typemap_v"


class UnsupportedColumnType(PipelineError, ValueError):
    """The MySQL type of a column has no silver mapping."""


@dataclass(frozen=True)
class ColumnSpec:
    """One source column as silver needs it.

    ``mysql_type`` is the lower-case SQL type name without arguments (``int``, ``bigint``,
    ``decimal``, ``varchar``, ``datetime``, ``enum``, ...).  ``precision``/``scale`` are DECIMAL's
    (or FLOAT(p)'s) numbers, ``length`` the declared length of CHAR/BINARY/BIT columns.
    ``ordinal`` is the column's 0-based position in the row image (the bronze ``idx``); when None,
    the spec's position in the list handed to :func:`typed_columns` is used.

    >>> ColumnSpec("price", "decimal", precision=10, scale=2)
    ColumnSpec(name='price', mysql_type='decimal', unsigned=False, precision=10, scale=2, length=None, charset=None, nullable=True, enum_values=(), set_values=(), ordinal=None)
    """

    name: str
    mysql_type: str
    unsigned: bool = False
    precision: int | None = None
    scale: int | None = None
    length: int | None = None
    charset: str | None = None
    nullable: bool = True
    enum_values: tuple[str, ...] = ()
    set_values: tuple[str, ...] = ()
    ordinal: int | None = None


# ---------------------------------------------------------------------------------------------
# type rules: the Spark type and the SQL that converts the bronze text/bin to it


@dataclass(frozen=True)
class _Rule:
    spark_type: Callable[[ColumnSpec], T.DataType]
    # (spec, text_sql, bin_sql) -> SQL of the typed value
    convert: Callable[[ColumnSpec, str, str], str]
    temporal: bool = False  # NULL from a non-NULL text is a zero/invalid date, not an error
    from_bin: bool = False  # the value lives in `bin`


def _fixed(dt: T.DataType) -> Callable[[ColumnSpec], T.DataType]:
    return lambda spec: dt


def _by_sign(signed: T.DataType, unsigned: T.DataType) -> Callable[[ColumnSpec], T.DataType]:
    return lambda spec: unsigned if spec.unsigned else signed


def _try_cast_to(spec_type: Callable[[ColumnSpec], T.DataType]) -> Callable[[ColumnSpec, str, str], str]:
    return lambda spec, t, b: f"try_cast({t} AS {spec_type(spec).simpleString()})"


def decimal_type(spec: ColumnSpec) -> T.DataType:
    precision = 10 if spec.precision is None else spec.precision
    scale = 0 if spec.scale is None else spec.scale
    if not (1 <= precision <= 65 and 0 <= scale <= 38 and scale <= precision):
        raise UnsupportedColumnType(
            f"column {spec.name!r}: DECIMAL({precision},{scale}) is outside MySQL's range"
        )
    return T.DecimalType(precision, scale) if precision <= 38 else T.StringType()


def _convert_decimal(spec: ColumnSpec, t: str, b: str) -> str:
    dt = decimal_type(spec)
    return t if isinstance(dt, T.StringType) else f"try_cast({t} AS {dt.simpleString()})"


def _float_type(spec: ColumnSpec) -> T.DataType:
    # FLOAT(p) with p > 24 is a DOUBLE; FLOAT(M,D) (scale given) is always single precision.
    if spec.scale is None and spec.precision is not None and spec.precision > 24:
        return T.DoubleType()
    return T.FloatType()


def _no_year_zero(t: str, value: str) -> str:
    """Year 0000 is MySQL's zero date (or a partial zero date): NULL, never year 0 / 1 BC."""
    return f"CASE WHEN substr({t}, 1, 4) = '0000' THEN NULL ELSE {value} END"


def _convert_date(spec: ColumnSpec, t: str, b: str) -> str:
    return _no_year_zero(t, f"try_cast({t} AS DATE)")


def _convert_datetime(spec: ColumnSpec, t: str, b: str) -> str:
    return _no_year_zero(t, f"try_cast({t} AS TIMESTAMP_NTZ)")


def _convert_timestamp(spec: ColumnSpec, t: str, b: str) -> str:
    # The text is UTC: say so with a zone suffix, whatever the session time zone is.
    return _no_year_zero(t, f"try_cast(concat({t}, 'Z') AS TIMESTAMP)")


def _convert_year(spec: ColumnSpec, t: str, b: str) -> str:
    return f"nullif(try_cast({t} AS SMALLINT), 0)"


def _convert_text(spec: ColumnSpec, t: str, b: str) -> str:
    return t


def _convert_bin(spec: ColumnSpec, t: str, b: str) -> str:
    return b


def _convert_binary_padded(spec: ColumnSpec, t: str, b: str) -> str:
    # The binlog drops BINARY(n)'s trailing 0x00 bytes; MySQL returns them.
    if spec.length is None:
        return b
    return f"CASE WHEN length({b}) < {int(spec.length)} THEN rpad({b}, {int(spec.length)}, X'00') ELSE {b} END"


def _convert_bit(spec: ColumnSpec, t: str, b: str) -> str:
    d = f"try_cast({t} AS DECIMAL(20,0))"
    return (
        f"CAST(CASE WHEN {d} > 9223372036854775807 THEN {d} - 18446744073709551616 "
        f"ELSE {d} END AS BIGINT)"
    )


_INT_RULES = {
    "tinyint": _by_sign(T.ByteType(), T.ShortType()),
    "smallint": _by_sign(T.ShortType(), T.IntegerType()),
    "mediumint": _fixed(T.IntegerType()),
    "int": _by_sign(T.IntegerType(), T.LongType()),
    "bigint": _by_sign(T.LongType(), T.DecimalType(20, 0)),
}

_RULES: dict[str, _Rule] = {
    **{name: _Rule(st, _try_cast_to(st)) for name, st in _INT_RULES.items()},
    "float": _Rule(_float_type, _try_cast_to(_float_type)),
    "double": _Rule(_fixed(T.DoubleType()), _try_cast_to(_fixed(T.DoubleType()))),
    "decimal": _Rule(decimal_type, _convert_decimal),
    "date": _Rule(_fixed(T.DateType()), _convert_date, temporal=True),
    "datetime": _Rule(_fixed(T.TimestampNTZType()), _convert_datetime, temporal=True),
    "timestamp": _Rule(_fixed(T.TimestampType()), _convert_timestamp, temporal=True),
    "time": _Rule(_fixed(T.StringType()), _convert_text),
    "year": _Rule(_fixed(T.ShortType()), _convert_year, temporal=True),
    **{
        name: _Rule(_fixed(T.StringType()), _convert_text)
        for name in (
            "char", "varchar", "tinytext", "text", "mediumtext", "longtext",
            "enum", "set", "json", "inet4", "inet6", "uuid", "vector", "xmltype",
        )
    },
    "binary": _Rule(_fixed(T.BinaryType()), _convert_binary_padded, from_bin=True),
    **{
        name: _Rule(_fixed(T.BinaryType()), _convert_bin, from_bin=True)
        for name in (
            "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
            "geometry", "point", "linestring", "polygon", "multipoint",
            "multilinestring", "multipolygon", "geometrycollection",
        )
    },
    "bit": _Rule(_fixed(T.LongType()), _convert_bit),
    # SERIAL is BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE
    "serial": _Rule(_fixed(T.DecimalType(20, 0)), _try_cast_to(_fixed(T.DecimalType(20, 0)))),
}

# Other spellings MySQL and MariaDB accept for the same types.
_ALIASES: dict[str, str] = {
    "bool": "tinyint",
    "boolean": "tinyint",
    "int1": "tinyint",
    "int2": "smallint",
    "int3": "mediumint",
    "middleint": "mediumint",
    "integer": "int",
    "int4": "int",
    "int8": "bigint",
    "float4": "float",
    "real": "double",
    "float8": "double",
    "double precision": "double",
    "dec": "decimal",
    "numeric": "decimal",
    "fixed": "decimal",
    "nchar": "char",
    "national char": "char",
    "character": "char",
    "nvarchar": "varchar",
    "national varchar": "varchar",
    "character varying": "varchar",
    "long": "mediumtext",
    "long varchar": "mediumtext",
    "long varbinary": "mediumblob",
    "geomcollection": "geometrycollection",
}


def type_rule(spec: ColumnSpec) -> tuple[str, _Rule]:
    if not isinstance(spec, ColumnSpec):
        raise TypeError(f"expected a ColumnSpec, got {type(spec).__name__}: {spec!r}")
    name = " ".join(spec.mysql_type.lower().split())
    name = _ALIASES.get(name, name)
    rule = _RULES.get(name)
    if rule is None:
        raise UnsupportedColumnType(
            f"column {spec.name!r}: MySQL type {spec.mysql_type!r} has no silver mapping "
            f"(known: {sorted(_RULES)})"
        )
    return name, rule


def spark_type(spec: ColumnSpec) -> T.DataType:
    """The silver Spark type of one column.

    >>> spark_type(ColumnSpec("n", "bigint", unsigned=True))
    DecimalType(20,0)
    >>> spark_type(ColumnSpec("d", "decimal", precision=65, scale=30))
    StringType()
    >>> spark_type(ColumnSpec("t", "datetime"))
    TimestampNTZType()
    """
    return type_rule(spec)[1].spark_type(spec)


def _check_names(specs: Sequence[ColumnSpec]) -> None:
    seen: dict[str, str] = {}
    duplicates = []
    for spec in specs:
        if not isinstance(spec, ColumnSpec):
            raise TypeError(f"expected ColumnSpec items, got {type(spec).__name__}: {spec!r}")
        if not spec.name:
            raise ValueError(f"a ColumnSpec needs a non-empty name: {spec!r}")
        key = spec.name.lower()
        if key in seen:
            duplicates.append((seen[key], spec.name))
        seen[key] = spec.name
    if duplicates:
        raise ValueError(f"duplicate column names (MySQL names are case-insensitive): {duplicates}")


def silver_schema(specs: Sequence[ColumnSpec]) -> T.StructType:
    """The silver value columns for ``specs`` (source names, all nullable), in spec order.

    >>> silver_schema([ColumnSpec("id", "int"), ColumnSpec("tag", "set")]).simpleString()
    'struct<id:int,tag:string>'
    """
    _check_names(specs)
    return T.StructType([T.StructField(s.name, spark_type(s), True) for s in specs])


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ordinals(specs: Sequence[ColumnSpec]) -> list[int]:
    ordinals = [i if s.ordinal is None else s.ordinal for i, s in enumerate(specs)]
    bad = [(s.name, o) for s, o in zip(specs, ordinals) if not isinstance(o, int) or o < 0]
    if bad:
        raise ValueError(f"column ordinals must be ints >= 0: {bad}")
    if len(set(ordinals)) != len(ordinals):
        raise ValueError(f"two specs share one column ordinal: {list(zip([s.name for s in specs], ordinals))}")
    return ordinals


def _type_label(spec: ColumnSpec) -> str:
    return spec.mysql_type + (" unsigned" if spec.unsigned else "")


def _value_sql(spec: ColumnSpec, t: str, b: str) -> tuple[str, str]:
    """(SQL of the typed value, SQL that is 1 when a zero/invalid date was nulled, else 0) of
    the cell whose text and bin are the SQL expressions ``t`` and ``b``.

    A non-temporal value that does not convert raises (``raise_error``) with the column named.
    """
    _, rule = type_rule(spec)
    value = rule.convert(spec, t, b)
    if rule.temporal:
        return value, f"CASE WHEN {t} IS NOT NULL AND ({value}) IS NULL THEN 1 ELSE 0 END"
    if value == t:  # the text itself (character types): nothing can fail
        return value, "0"
    if rule.from_bin:
        failed, what = f"{t} IS NOT NULL AND {b} IS NULL", "bin is NULL but text is "
    else:
        failed, what = f"{t} IS NOT NULL AND ({value}) IS NULL", "text "
    label = f"typemap: column {spec.name!r} ({_type_label(spec)}): cannot convert {what}"
    message = f"concat({_sql_string(label)}, substr({t}, 1, 80))"
    return f"CASE WHEN {failed} THEN raise_error({message}) ELSE {value} END", "0"


def _locate(image: str, ordinal: int) -> Column:
    """The image's struct for column ``ordinal``: by position when ``idx`` agrees, else by search."""
    at = f"get({image}, {ordinal})"
    return F.expr(
        f"CASE WHEN {at}.idx = {ordinal} THEN {at} "
        f"ELSE get(filter({image}, x -> x.idx = {ordinal}), 0) END"
    )


def image_struct_type(specs: Sequence[ColumnSpec]) -> T.StructType:
    """The struct type :func:`typed_columns` gives an image column (same as :func:`silver_schema`)."""
    return silver_schema(specs)


def typed_columns(
    df: DataFrame,
    specs: Sequence[ColumnSpec],
    image_col: str = "after",
    *,
    zero_dates_col: str = ZERO_DATES_COL,
    cells: Mapping[int, Callable[[str], tuple[str, str]]] | None = None,
    guard: str | None = None,
) -> DataFrame:
    """Replace the generic image column ``image_col`` by a struct with one typed field per spec.

    Each field is found by the column's ``idx`` (``spec.ordinal``, else its position in
    ``specs``); a column missing from the image is NULL, a NULL image gives a NULL struct.
    ``zero_dates_col`` (INT) counts the temporal values of this image that were nulled; when the
    column exists already (another image was typed first) the count is added to it.
    ``cells`` maps a column ``idx`` to a function from the SQL of its cell to the SQL of the
    ``(text, bin)`` to type instead of the cell's own (e.g. a charset decode of its bytes): it
    runs on that one cell only, inside the generated code.
    ``guard`` names a BOOLEAN column: the image is typed only in rows where it is true (elsewhere
    it is NULL and counts no zero dates), so only there can a value that does not convert raise.
    A caller that types rows of a filtered read sets it to the filter itself: rows the filter
    drops never raise, even where Spark evaluates a later filter on the typed values before it.
    Spark SQL expressions only (no Python UDFs).

    >>> bronze = spark.createDataFrame(
    ...     [("c", [(0, "id", "LONG", "7", None), (1, "d", "DATE", "0000-00-00", None)])],
    ...     "op STRING, after ARRAY<STRUCT<idx INT, name STRING, type STRING, text STRING, bin BINARY>>")  # doctest: +SKIP
    >>> typed_columns(bronze, [ColumnSpec("id", "int"), ColumnSpec("d", "date")]).collect()  # doctest: +SKIP
    [Row(op='c', after=Row(id=7, d=None), _zero_dates=1)]
    """
    if image_col not in df.columns:
        raise ValueError(f"typed_columns: no column {image_col!r}; columns: {df.columns}")
    _check_names(specs)
    ordinals = _ordinals(specs)
    image = "`" + image_col.replace("`", "``") + "`"
    tmp = [f"{_TMP}{i}" for i in range(len(specs))]
    clash = [c for c in tmp if c in df.columns]
    if clash:
        raise ValueError(f"typed_columns: reserved column names in input: {clash}")
    located = df.select("*", *[_locate(image, o).alias(n) for o, n in zip(ordinals, tmp)])
    values, zeros = [], []
    cells = cells or {}
    for spec, o, name in zip(specs, ordinals, tmp):
        cell = f"`{name}`"
        t, b = cells[o](cell) if o in cells else (f"{cell}.text", f"{cell}.bin")
        value, zero = _value_sql(spec, t, b)
        values.append(F.expr(value).cast(spark_type(spec)).alias(spec.name))
        zeros.append(zero)
    skip = F.col(image).isNull()
    zero_count = F.expr(" + ".join(zeros) if zeros else "0").cast("int")
    if guard is not None:  # one test per row, before any cell is typed
        skip = skip | ~F.coalesce(F.col("`" + guard.replace("`", "``") + "`"), F.lit(False))
        zero_count = F.when(skip, F.lit(0)).otherwise(zero_count)
    struct = F.when(skip, F.lit(None)).otherwise(F.struct(*values))
    if zero_dates_col in df.columns:
        zero_count = F.coalesce(F.col(f"`{zero_dates_col}`"), F.lit(0)) + zero_count
    out = located.withColumns({image_col: struct, zero_dates_col: zero_count.cast("int")})
    return out.drop(*tmp)
