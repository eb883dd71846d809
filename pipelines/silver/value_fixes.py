"""Value fixes in Spark SQL: a bronze cell completed with what only the schema knows (a character
column's bytes decoded in its charset, ENUM/SET numbers to members, signed to unsigned, INET/UUID
bytes to text), as :func:`pipelines.schema.resolve.apply_fix` defines them in Python.
"""
from __future__ import annotations

import functools

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipelines.schema import resolve as schema_resolve
from pipelines.silver.columns import SilverStepError


# MySQL charset -> Java charset Spark's decode() knows (others: a Python UDF)
_JAVA_CHARSETS = {"utf8mb4": "UTF-8", "utf8mb3": "UTF-8", "utf8": "UTF-8", "ascii": "US-ASCII",
                  "ucs2": "UTF-16BE", "utf16": "UTF-16BE", "utf16le": "UTF-16LE", "utf32": "UTF-32",
                  "latin1": "ISO-8859-1"}


def _sql_str(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _latin1_translation() -> tuple[str, str]:
    """MySQL's latin1 is cp1252: ISO-8859-1 text whose C1 controls become cp1252's letters."""
    from pipelines.binlog import charsets  # noqa: F401  (registers the mysql_latin1 codec)

    c1 = bytes(range(0x80, 0xA0))
    return c1.decode("iso-8859-1"), c1.decode("mysql_latin1")


def _hex_of(raw: str, length: int) -> str:
    return f"lower(hex(CASE WHEN length({raw}) < {length} THEN rpad({raw}, {length}, X'00') ELSE {raw} END))"


def _dotted(h: str, offset: int) -> str:
    """Dotted quad of the 4 bytes at hex offset ``offset`` (0-based) of hex string ``h``."""
    parts = [f"CAST(conv(substr({h}, {offset + 1 + 2 * i}, 2), 16, 10) AS STRING)" for i in range(4)]
    return "concat_ws('.', " + ", ".join(parts) + ")"


def _inet6_sql(h: str) -> str:
    """INET6 text of 32 hex digits ``h`` as MariaDB prints it (the leftmost longest run of zero
    groups as ``::``, one group long too; IPv4-mapped and -compatible addresses with a dotted
    quad): :func:`pipelines.schema.resolve.inet6_text` in Spark SQL."""
    groups = ", ".join(f"lower(conv(substr({h}, {4 * i + 1}, 4), 16, 16))" for i in range(8))
    padded = f"concat(':', concat_ws(':', {groups}), ':')"
    # the first of the longest runs: try 8 zero groups, then 7, ... 1
    runs = [f"':{'0:' * n}'" for n in range(8, 0, -1)]
    pick = "CASE " + " ".join(f"WHEN locate({r}, p) > 0 THEN concat(substr(p, 1, locate({r}, p) - 1), '::', "
                              f"substr(p, locate({r}, p) + length({r})))" for r in runs) + " ELSE p END"
    strip = ("CASE WHEN q LIKE ':%' AND q NOT LIKE '::%' THEN substr(q, 2) ELSE q END")
    strip2 = ("CASE WHEN r LIKE '%:' AND r NOT LIKE '%::' THEN substr(r, 1, length(r) - 1) ELSE r END")
    plain = (f"element_at(transform(array(element_at(transform(array(element_at(transform(array({padded}), "
             f"p -> {pick}), 1)), q -> {strip}), 1)), r -> {strip2}), 1)")
    return (f"CASE WHEN substr({h}, 1, 24) = '00000000000000000000ffff' THEN concat('::ffff:', {_dotted(h, 24)}) "
            f"WHEN substr({h}, 1, 24) = '000000000000000000000000' AND substr({h}, 25, 4) != '0000' "
            f"THEN concat('::', {_dotted(h, 24)}) ELSE {plain} END")


def _uuid_sql(h: str) -> str:
    return (f"concat_ws('-', substr({h}, 1, 8), substr({h}, 9, 4), substr({h}, 13, 4), substr({h}, 17, 4), "
            f"substr({h}, 21, 12))")


def _fix_sql(fix: tuple, x: str) -> tuple[str, str] | None:
    """``(text SQL, bin SQL)`` of one cell ``x`` completed by ``fix``; None when SQL cannot do it."""
    kind = fix[0]
    t, b = f"{x}.text", f"{x}.bin"
    raw_only = f"{t} IS NULL AND {b} IS NOT NULL"
    if kind == schema_resolve.FIX_DECODE:
        java = _JAVA_CHARSETS.get(fix[1])
        if java is None:
            return None
        text = f"decode({b}, '{java}')"
        if fix[1] == "latin1":
            c1, cp = _latin1_translation()
            text = f"translate({text}, {_sql_str(c1)}, {_sql_str(cp)})"
        return f"CASE WHEN {raw_only} THEN {text} ELSE {t} END", f"CASE WHEN {raw_only} THEN NULL ELSE {b} END"
    if kind == schema_resolve.FIX_ENUM:
        members = ", ".join(_sql_str(m) for m in ("",) + tuple(fix[1]))
        # only without FULL metadata (no column name): with it the decoder gave the member itself
        return (f"CASE WHEN {x}.name IS NULL AND {t} RLIKE '^[0-9]+$' "
                f"THEN element_at(array({members}), CAST({t} AS INT) + 1) ELSE {t} END", b)
    if kind == schema_resolve.FIX_SET:
        members = ", ".join(_sql_str(m) for m in fix[1])
        pick = f"(m, i) -> substr(reverse(conv({t}, 10, 2)), i + 1, 1) = '1'"
        return (f"CASE WHEN {x}.name IS NULL AND {t} RLIKE '^[0-9]+$' "
                f"THEN array_join(filter(array({members}), {pick}), ',') ELSE {t} END", b)
    if kind == schema_resolve.FIX_UNSIGNED:
        span = 1 << int(fix[1])
        return (f"CASE WHEN {t} LIKE '-%' THEN CAST(CAST({t} AS DECIMAL(20,0)) + CAST('{span}' AS DECIMAL(21,0)) "
                f"AS STRING) ELSE {t} END", b)
    if kind in (schema_resolve.FIX_INET6, schema_resolve.FIX_UUID, schema_resolve.FIX_INET4):
        size = 4 if kind == schema_resolve.FIX_INET4 else 16
        fmt = {schema_resolve.FIX_INET6: _inet6_sql, schema_resolve.FIX_UUID: _uuid_sql}.get(kind)
        body = fmt("h") if fmt else _dotted("h", 0)
        text = f"element_at(transform(array({_hex_of(b, size)}), h -> {body}), 1)"
        return f"CASE WHEN {raw_only} THEN {text} ELSE {t} END", f"CASE WHEN {raw_only} THEN NULL ELSE {b} END"
    raise ValueError(f"unknown value fix {fix!r}")


def cell_fixes(fixes: dict[int, tuple]) -> tuple[dict, dict[int, tuple]]:
    """``fixes`` split into the ones typing applies to its own cell of the column (``cells`` of
    :func:`pipelines.schema.typemap.typed_columns`: plain SQL inside the generated code, instead of
    :func:`complete_values` rewriting every cell of every image), and the rest (charsets only
    Python can decode), for :func:`complete_values`."""
    cells, rest = {}, {}
    for idx, fix in fixes.items():
        if _fix_sql(fix, "x") is None:
            rest[idx] = fix
        else:
            cells[idx] = functools.partial(_fix_sql, fix)
    return cells, rest


def _decode_udf(codecs_by_idx: dict[int, str], image_type: T.ArrayType):
    """A Python UDF decoding the bytes of the given columns with Python codecs; it uses only
    the standard library, so any Python on the executors runs it. ``image_type``: the images'
    type (bronze's, or a :func:`slim_image`)."""
    fields = image_type.elementType.fieldNames()

    def fix_image(image):
        if image is None:
            return None
        out = []
        for cell in image:
            codec = codecs_by_idx.get(cell["idx"])
            if codec is not None and cell["text"] is None and cell["bin"] is not None:
                text = bytes(cell["bin"]).decode(codec)
                out.append(tuple(text if f == "text" else None if f == "bin" else cell[f] for f in fields))
            else:
                out.append(cell)
        return out

    return F.udf(fix_image, image_type)


def complete_values(df: DataFrame, fixes: dict[int, tuple]) -> DataFrame:
    """Finish the bronze values of ``before``/``after`` that need the schema (see
    :func:`pipelines.schema.resolve.apply_fix` for the same rules in Python): bytes of a
    character column -> text in its charset, ENUM/SET numbers -> names, signed -> unsigned,
    INET6/INET4/UUID bytes -> text. Spark SQL expressions; a Python UDF only for charsets
    Spark cannot decode.

    >>> complete_values(bronze, {2: ("enum", ("new", "paid"))})  # doctest: +SKIP
    """
    if not fixes:
        return df
    image_type = df.schema["after"].dataType
    keep = ", ".join(f"'{f}', x.{f}" for f in image_type.elementType.fieldNames() if f not in ("text", "bin"))
    cases, python_codecs = [], {}
    for idx, fix in sorted(fixes.items()):
        sql = _fix_sql(fix, "x")
        if sql is None:
            from pipelines.binlog.charsets import CHARSET_CODECS

            codec = CHARSET_CODECS.get(fix[1])
            if codec is None:
                raise SilverStepError(f"column #{idx + 1}: no way to decode the MySQL charset {fix[1]!r}")
            python_codecs[idx] = codec
            continue
        text, raw = sql
        cases.append(f"WHEN {int(idx)} THEN named_struct({keep}, 'text', {text}, 'bin', {raw})")
    out = df
    if cases:
        lam = "x -> CASE x.idx " + " ".join(cases) + " ELSE x END"
        out = out.withColumns({c: F.expr(f"transform({c}, {lam})") for c in ("before", "after")})
    if python_codecs:
        udf = _decode_udf(python_codecs, image_type)
        out = out.withColumns({c: udf(F.col(c)) for c in ("before", "after")})
    return out

