"""MySQL column types -> silver Spark types: the one table of type rules (bronze's values are typed
to them by :mod:`pipelines.silver.arrow_typing`, on the driver and in Spark's tasks alike).

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
become NULL, counted per row in ``_zero_dates`` so the run log can keep the number.  Any other
value whose text does not convert is an error naming the column, its type and the text (never a
silent NULL).

Silver columns are all nullable: zero dates turn into NULL even in NOT NULL columns, and rows
written before an ADD COLUMN have NULL in it.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from pyspark.sql import types as T
from pipelines.errors import PipelineError

ZERO_DATES_COL = "_zero_dates"


class UnsupportedColumnType(PipelineError, ValueError):
    """The MySQL type of a column has no silver mapping."""


@dataclass(frozen=True)
class ColumnSpec:
    """One source column as silver needs it.

    ``mysql_type`` is the lower-case SQL type name without arguments (``int``, ``bigint``,
    ``decimal``, ``varchar``, ``datetime``, ``enum``, ...).  ``precision``/``scale`` are DECIMAL's
    (or FLOAT(p)'s) numbers, ``length`` the declared length of CHAR/BINARY/BIT columns.
    ``ordinal`` is the column's 0-based position in the row image (the bronze ``idx``); when None,
    the spec's position in the list of specs is used.

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
# type rules: a MySQL type's silver Spark type, and how its bronze cell holds the value (the
# typing itself: pipelines.silver.arrow_typing)


@dataclass(frozen=True)
class _Rule:
    spark_type: Callable[[ColumnSpec], T.DataType]
    temporal: bool = False  # NULL from a non-NULL text is a zero/invalid date, not an error
    from_bin: bool = False  # the value lives in `bin`


def _fixed(dt: T.DataType) -> Callable[[ColumnSpec], T.DataType]:
    return lambda spec: dt


def _by_sign(signed: T.DataType, unsigned: T.DataType) -> Callable[[ColumnSpec], T.DataType]:
    return lambda spec: unsigned if spec.unsigned else signed


def decimal_type(spec: ColumnSpec) -> T.DataType:
    precision = 10 if spec.precision is None else spec.precision
    scale = 0 if spec.scale is None else spec.scale
    if not (1 <= precision <= 65 and 0 <= scale <= 38 and scale <= precision):
        raise UnsupportedColumnType(
            f"column {spec.name!r}: DECIMAL({precision},{scale}) is outside MySQL's range"
        )
    return T.DecimalType(precision, scale) if precision <= 38 else T.StringType()


def _float_type(spec: ColumnSpec) -> T.DataType:
    # FLOAT(p) with p > 24 is a DOUBLE; FLOAT(M,D) (scale given) is always single precision.
    if spec.scale is None and spec.precision is not None and spec.precision > 24:
        return T.DoubleType()
    return T.FloatType()


_INT_RULES = {
    "tinyint": _by_sign(T.ByteType(), T.ShortType()),
    "smallint": _by_sign(T.ShortType(), T.IntegerType()),
    "mediumint": _fixed(T.IntegerType()),
    "int": _by_sign(T.IntegerType(), T.LongType()),
    "bigint": _by_sign(T.LongType(), T.DecimalType(20, 0)),
}

_RULES: dict[str, _Rule] = {
    **{name: _Rule(st) for name, st in _INT_RULES.items()},
    "float": _Rule(_float_type),
    "double": _Rule(_fixed(T.DoubleType())),
    "decimal": _Rule(decimal_type),
    "date": _Rule(_fixed(T.DateType()), temporal=True),
    "datetime": _Rule(_fixed(T.TimestampNTZType()), temporal=True),
    "timestamp": _Rule(_fixed(T.TimestampType()), temporal=True),
    "time": _Rule(_fixed(T.StringType())),
    "year": _Rule(_fixed(T.ShortType()), temporal=True),
    **{
        name: _Rule(_fixed(T.StringType()))
        for name in (
            "char", "varchar", "tinytext", "text", "mediumtext", "longtext",
            "enum", "set", "json", "inet4", "inet6", "uuid", "vector", "xmltype",
        )
    },
    **{
        name: _Rule(_fixed(T.BinaryType()), from_bin=True)
        for name in (
            "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob",
            "geometry", "point", "linestring", "polygon", "multipoint",
            "multilinestring", "multipolygon", "geometrycollection",
        )
    },
    "bit": _Rule(_fixed(T.LongType())),
    # SERIAL is BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE
    "serial": _Rule(_fixed(T.DecimalType(20, 0))),
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
