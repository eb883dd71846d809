"""Column definitions of CREATE/ALTER TABLE (sqlglot's trees) to :class:`ColumnDef` values: each
type with the lengths MySQL fills in, its attributes, and a table's elements (columns, keys) with
the table's charset applied. Pure; :mod:`pipelines.schema.ddl` parses the statements around them."""
from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from pipelines.schema.ddl_ops import DdlError
from pipelines.schema.model import (
    ColumnDef, UniqueKey, BINARY_OF, BINARY_TYPES, FSP_TYPES, GEOMETRY_TYPES, MB_MAXLEN, TEXT_TYPES,
    norm_charset, charset_of_collation,
)
from pipelines.schema.sql_text import MariaDBDialect


# sqlglot DataType.Type name -> (MySQL type, unsigned)
_SQLGLOT_TYPES: dict[str, tuple[str, bool]] = {
    "TINYINT": ("TINYINT", False), "UTINYINT": ("TINYINT", True),
    "SMALLINT": ("SMALLINT", False), "USMALLINT": ("SMALLINT", True),
    "MEDIUMINT": ("MEDIUMINT", False), "UMEDIUMINT": ("MEDIUMINT", True),
    "INT": ("INT", False), "UINT": ("INT", True),
    "BIGINT": ("BIGINT", False), "UBIGINT": ("BIGINT", True),
    "DECIMAL": ("DECIMAL", False), "UDECIMAL": ("DECIMAL", True),
    "FLOAT": ("FLOAT", False), "UFLOAT": ("FLOAT", True),
    "DOUBLE": ("DOUBLE", False), "UDOUBLE": ("DOUBLE", True),
    "BIT": ("BIT", False), "BOOLEAN": ("TINYINT", False), "SERIAL": ("BIGINT", True),
    "DATE": ("DATE", False), "DATETIME": ("DATETIME", False), "TIMESTAMP": ("TIMESTAMP", False),
    "TIMESTAMPTZ": ("TIMESTAMP", False), "TIMESTAMPLTZ": ("TIMESTAMP", False), "TIME": ("TIME", False),
    "YEAR": ("YEAR", False),
    "CHAR": ("CHAR", False), "VARCHAR": ("VARCHAR", False), "NCHAR": ("CHAR", False),
    "NVARCHAR": ("VARCHAR", False), "BINARY": ("BINARY", False), "VARBINARY": ("VARBINARY", False),
    "TINYTEXT": ("TINYTEXT", False), "TEXT": ("TEXT", False), "MEDIUMTEXT": ("MEDIUMTEXT", False),
    "LONGTEXT": ("LONGTEXT", False), "TINYBLOB": ("TINYBLOB", False), "BLOB": ("BLOB", False),
    "MEDIUMBLOB": ("MEDIUMBLOB", False), "LONGBLOB": ("LONGBLOB", False),
    "ENUM": ("ENUM", False), "SET": ("SET", False), "JSON": ("JSON", False),
    "GEOMETRY": ("GEOMETRY", False), "UUID": ("UUID", False), "VECTOR": ("VECTOR", False),
}


_USER_TYPES = GEOMETRY_TYPES | {"INET6", "INET4", "UUID", "XMLTYPE"}


def ident(node) -> str:
    if isinstance(node, exp.Identifier):
        return node.this
    if isinstance(node, (exp.Column, exp.Table)):
        return node.this.this if isinstance(node.this, exp.Identifier) else node.name
    if isinstance(node, (exp.Ordered, exp.ColumnPrefix)):  # `c DESC`, prefix `c(10)`
        return ident(node.this)
    if isinstance(node, (exp.Var, exp.Literal)):
        return node.this
    if isinstance(node, str):
        return node
    # prefix index part: c(10) parses as an Anonymous function call
    if isinstance(node, exp.Anonymous):
        return node.name
    if isinstance(node, exp.Func) and node.this is not None:
        return ident(node.this)
    raise DdlError(f"expected a name, got {node.sql(dialect=MariaDBDialect)!r}")


def _int_param(p) -> int:
    node = p.this if isinstance(p, exp.DataTypeParam) else p
    try:
        return int(node.this if isinstance(node, exp.Literal) else node.name)
    except (TypeError, ValueError):
        raise DdlError(f"expected a number in the type, got {p.sql(dialect=MariaDBDialect)!r}") from None


def column_def(cd: exp.ColumnDef) -> tuple[ColumnDef, str | None, bool, bool]:
    """(column, inline key 'primary'|'unique'|None, explicit charset given, json check)."""
    name = ident(cd.this)
    tname, mtype, unsigned, length, decimals, values = _column_type(name, cd.args.get("kind"))
    charset = "utf8mb3" if tname in ("NCHAR", "NVARCHAR") else None
    a = _column_attributes(cd, charset)
    if a["zerofill"]:
        unsigned = True
    nullable, key, charset = a["nullable"], a["key"], a["charset"]
    if tname == "SERIAL":
        nullable, key = False, key or "unique"
    if a["json_check"] and mtype == "LONGTEXT":
        mtype = "JSON"
    if charset == "binary" and mtype in BINARY_OF:
        mtype = BINARY_OF[mtype]
    if mtype in BINARY_TYPES:
        charset = "binary"
    col = ColumnDef(name, mtype, length, decimals, unsigned, nullable, charset, values, a["generated"],
                    a["invisible"], a["default"])
    return col, key, a["explicit_charset"], a["json_check"]


def _column_type(name: str, dtype) -> tuple[str, str, bool, int | None, int | None, tuple[str, ...]]:
    """``(sqlglot's type name, MySQL type, unsigned, length, decimals, ENUM/SET values)`` of a
    column's type, with the lengths MySQL fills in."""
    if not isinstance(dtype, exp.DataType):
        raise DdlError(f"column {name!r} has no type")
    tname = dtype.this.name if hasattr(dtype.this, "name") else str(dtype.this)
    if tname == "USERDEFINED":
        udt = str(dtype.args.get("kind") or "").upper()
        if udt not in _USER_TYPES:
            raise DdlError(f"column {name!r} has an unknown type {udt!r}")
        mtype, unsigned = udt, False
    elif tname in _SQLGLOT_TYPES:
        mtype, unsigned = _SQLGLOT_TYPES[tname]
    else:
        raise DdlError(f"column {name!r} has an unsupported type {dtype.sql(dialect=MariaDBDialect)!r}")
    params = [p for p in dtype.expressions or []]
    length = decimals = None
    values: tuple[str, ...] = ()
    if mtype in ("ENUM", "SET"):
        values = tuple(str(p.this) for p in params)
    elif mtype == "VECTOR":
        length = _int_param(params[0]) if params else None
    elif params:
        nums = [_int_param(p) for p in params]
        if mtype in FSP_TYPES:
            decimals = nums[0]
        elif mtype != "YEAR":
            length = nums[0]
            if len(nums) > 1:
                decimals = nums[1]
    if tname == "BOOLEAN":
        length = 1
    # defaults MySQL fills in
    if mtype == "DECIMAL":
        length = 10 if length is None else length
        decimals = 0 if decimals is None else decimals
    elif mtype in ("CHAR", "BINARY", "BIT") and length is None:
        length = 1
    elif mtype == "FLOAT" and length is not None and decimals is None:
        mtype = "DOUBLE" if length > 24 else "FLOAT"  # FLOAT(p): precision in bits
        length = None
    elif mtype == "YEAR":
        length = 4
    return tname, mtype, unsigned, length, decimals, values


def _column_attributes(cd: exp.ColumnDef, charset: str | None) -> dict:
    """A column definition's attributes after its type: NULL, inline key, generated, INVISIBLE,
    DEFAULT, charset and collation (``charset``: the type's own, NCHAR's), ZEROFILL, a JSON check."""
    a = dict(nullable=True, key=None, generated=None, invisible=False, default=None, charset=charset,
             explicit_charset=charset is not None, json_check=False, zerofill=False)
    for c in cd.args.get("constraints") or []:
        k = c.args.get("kind") if isinstance(c, exp.ColumnConstraint) else c
        if isinstance(k, exp.NotNullColumnConstraint):
            a["nullable"] = bool(k.args.get("allow_null"))
        elif isinstance(k, exp.PrimaryKeyColumnConstraint):
            a["key"], a["nullable"] = "primary", False
        elif isinstance(k, exp.UniqueColumnConstraint):
            a["key"] = a["key"] or "unique"
        elif isinstance(k, exp.ComputedColumnConstraint):
            a["generated"] = "STORED" if k.args.get("persisted") else "VIRTUAL"
        elif isinstance(k, exp.GeneratedAsIdentityColumnConstraint) and k.args.get("expression") is not None:
            a["generated"] = "STORED" if k.args.get("persisted") else "VIRTUAL"
        elif isinstance(k, exp.InvisibleColumnConstraint):
            a["invisible"] = True
        elif isinstance(k, exp.DefaultColumnConstraint):
            a["default"] = _literal_text(k.this)
        elif isinstance(k, exp.CharacterSetColumnConstraint):
            a["charset"], a["explicit_charset"] = norm_charset(ident(k.this)), True
        elif isinstance(k, exp.CollateColumnConstraint):
            if a["charset"] is None:
                a["charset"] = charset_of_collation(ident(k.this))
            a["explicit_charset"] = True
        elif isinstance(k, exp.ZeroFillColumnConstraint):
            a["zerofill"] = True
        elif isinstance(k, exp.CheckColumnConstraint):
            a["json_check"] = a["json_check"] or _is_json_check(k.this)
        # (BINARY: the binary collation of the charset, not the binary charset: nothing to keep)
    return a


def _is_json_check(body) -> bool:
    """``CHECK (json_valid(c))``, as MariaDB writes a JSON column's definition."""
    if isinstance(body, exp.Anonymous):
        return body.name.lower() == "json_valid"
    name = type(body).__name__.lower()
    return isinstance(body, exp.Func) and name.startswith("json") and "valid" in name


def _literal_text(node) -> str | None:
    """The value of a literal DEFAULT as text (``-3``, ``x'y``, ``5`` for ``b'101'``); None for
    NULL and for expressions (``CURRENT_TIMESTAMP``, ``NEXTVAL(s)``)."""
    if isinstance(node, exp.Paren):
        return _literal_text(node.this)
    if isinstance(node, exp.Literal):
        return str(node.this)
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        return "-" + str(node.this.this)
    if isinstance(node, exp.BitString):
        return str(int(str(node.this), 2))
    if isinstance(node, exp.Boolean):
        return "1" if node.this else "0"
    return None


def finish_charset(col: ColumnDef, table_charset: str | None) -> ColumnDef:
    """Fill in the table's default charset for character columns; size TEXT(n)/BLOB(n)."""
    if col.type in TEXT_TYPES and col.charset is None and table_charset:
        col = replace(col, charset=table_charset)
    if col.type in ("TEXT", "BLOB") and col.length is not None:
        nbytes = col.length * MB_MAXLEN.get(col.charset or "", 4 if col.type == "TEXT" else 1)
        size = "TINY" if nbytes < 256 else "" if nbytes < 65536 else "MEDIUM" if nbytes < 1 << 24 else "LONG"
        col = replace(col, type=size + col.type, length=None)
    elif col.type in ("TINYTEXT", "MEDIUMTEXT", "LONGTEXT", "TINYBLOB", "MEDIUMBLOB", "LONGBLOB"):
        col = replace(col, length=None)
    return col


def column_position(cd: exp.Expression) -> tuple[str, str | None] | None:
    pos = cd.args.get("position")
    if pos is None:
        return None
    where = str(pos.args.get("position") or "").upper()
    if where == "FIRST":
        return ("first", None)
    if where == "AFTER":
        return ("after", ident(pos.this))
    raise DdlError(f"unknown column position {pos.sql(dialect=MariaDBDialect)!r}")


def key_columns(node) -> tuple[str, ...]:
    if isinstance(node, exp.Schema):
        return tuple(ident(e) for e in node.expressions)
    return tuple(ident(e) for e in node.expressions)


def table_elements(elements, table_charset: str | None):
    """Column definitions and keys of a CREATE TABLE body."""
    cols: list[ColumnDef] = []
    pk: tuple[str, ...] = ()
    uniques: list[UniqueKey] = []
    like = None
    for el in elements:
        if isinstance(el, exp.ColumnDef):
            col, key, _explicit, _ = column_def(el)
            cols.append(finish_charset(col, table_charset))
            if key == "primary":
                pk = (col.name,)
            elif key == "unique":
                uniques.append(UniqueKey(col.name, (col.name,)))
            continue
        name = None
        if isinstance(el, exp.Constraint):
            name = ident(el.this) if el.this is not None else None
            inner = el.expressions[0] if el.expressions else None
        else:
            inner = el
        if isinstance(inner, exp.PrimaryKey):
            pk = key_columns(inner)
        elif isinstance(inner, exp.UniqueColumnConstraint):
            schema = inner.this
            cols_ = key_columns(schema) if schema is not None else ()
            iname = name or (ident(schema.this) if schema is not None and schema.this is not None else None)
            uniques.append(UniqueKey(iname or (cols_[0] if cols_ else ""), cols_))
        elif isinstance(inner, exp.LikeProperty):
            like = inner.this
        # other indexes, foreign keys, checks, periods: no effect on the row layout
    # PK columns are NOT NULL
    if pk:
        low = {p.lower() for p in pk}
        cols = [replace(c, nullable=False) if c.name.lower() in low else c for c in cols]
        pk = tuple(next((c.name for c in cols if c.name.lower() == p.lower()), p) for p in pk)
    return cols, pk, tuple(uniques), like


def table_charset_of(props) -> str | None:
    cs = None
    for p in props:
        if isinstance(p, exp.CharacterSetProperty):
            cs = norm_charset(ident(p.this))
        elif isinstance(p, exp.CollateProperty) and cs is None:
            cs = charset_of_collation(ident(p.this))
    return cs
