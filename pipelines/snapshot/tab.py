"""A ``mysqldump --tab`` folder: per table ``t.sql`` (the header ``SET`` lines and ``CREATE TABLE``)
and ``t.txt``, the server's ``SELECT ... INTO OUTFILE`` with mysqldump's defaults
``FIELDS TERMINATED BY '\\t' ESCAPED BY '\\\\' LINES TERMINATED BY '\\n'``.

The ``.txt`` format, as ``LOAD DATA`` reads it: a field is the bytes up to an unescaped tab, a row
ends at an unescaped line feed; ``\\N`` alone is NULL; ``\\0 \\b \\n \\r \\t \\Z`` are NUL, backspace,
LF, CR, tab and ^Z, and a backslash before any other byte (a raw tab or line feed inside a value,
the backslash itself) stands for that byte. The server writes the values' own bytes when the
dump's connection charset is mysqldump's default (``CHARACTER SET binary`` in its query), else in
that charset; numbers and dates are their text; binary columns are raw bytes, with or without
``--hex-blob``.

The binlog position of a ``--tab`` dump goes to mysqldump's standard output, not to the folder:
keep it (``> header.sql``) and pass it to :func:`tab_position`, or give ``--position``.

Rows of one ``.txt`` can be read by byte range too: a line feed ends a row when the backslashes
right before it are even in number (:func:`next_row_start`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterator

from pipelines.schema.model import TableSchema

from .cells import create_table
from .errors import CorruptDump, DumpError, TruncatedDump
from .statements import DumpState, iter_statements
from .values import Binary

# the field and the separator after it (tab: next field; line feed: end of row)
_FIELD = re.compile(rb"((?:[^\\\t\n]++|\\.)*+)([\t\n])", re.S)
_LOAD_ESCAPES = {ord("0"): b"\0", ord("b"): b"\b", ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t",
                 ord("Z"): b"\x1a"}
_BACKSLASH_RUN = re.compile(rb"\\+\Z")
# columns whose .txt field is text in the file's charset; bytes kept as they are; the others'
# fields are the text of a number, date or address
_TEXT_TYPES = frozenset({"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "ENUM", "SET", "JSON"})
_RAW_TYPES = frozenset({"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "BIT", "GEOMETRY",
                        "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON",
                        "GEOMETRYCOLLECTION"})
_UNIVERSAL = frozenset({"utf8mb4"})  # mysqldump's default charset: the .txt then holds raw bytes


def unescape_field(raw: bytes) -> bytes:
    r"""A ``.txt`` field's bytes (``LOAD DATA``'s escapes undone).

    >>> unescape_field(b"a\\\tb\\\nc\\0\\\\")
    b'a\tb\nc\x00\\'
    """
    if b"\\" not in raw:
        return raw
    parts = raw.split(b"\\")
    out = [parts[0]]
    i, n = 1, len(parts)
    while i < n:
        p = parts[i]
        if p:
            e = _LOAD_ESCAPES.get(p[0])
            out.append(p[:1] if e is None else e)
            out.append(p[1:])
            i += 1
        else:
            out.append(b"\\")
            if i + 1 < n:
                out.append(parts[i + 1])
            i += 2
    return b"".join(out)


def next_row_start(buf, offset: int) -> int | None:
    """The first row start at or after ``offset``: just after a line feed that no backslash
    escapes (an even run of backslashes before it); None when there is none."""
    if offset == 0:
        return 0
    p = offset - 1
    while True:
        nl = buf.find(b"\n", p)
        if nl < 0:
            return None
        run = _BACKSLASH_RUN.search(bytes(buf[max(0, nl - 4096):nl]))
        if run is None or len(run.group(0)) % 2 == 0:
            return nl + 1 if nl + 1 < len(buf) else None
        p = nl + 1


@dataclass(frozen=True)
class TabTable:
    """One table of a ``--tab`` folder: its names, schema, the header's session state (time zone,
    connection charset) and the ``.txt``."""

    db: str
    table: str
    schema: TableSchema
    state: DumpState
    txt_path: str
    sql_path: str

    @property
    def txt_charset(self) -> str:
        """The charset of the ``.txt`` bytes: ``binary`` (each value's own bytes) when the dump used
        mysqldump's default connection charset, else that charset."""
        cs = self.state.session.get("character_set_results") or "utf8mb4"  # SET NAMES, the query's session
        cs = "utf8mb3" if cs.lower() == "utf8" else cs.lower()
        return "binary" if cs in _UNIVERSAL else cs


def read_tab_table(sql_path: str, db: str | None = None) -> TabTable:
    """The ``t.sql`` of a ``--tab`` folder parsed: ``CREATE TABLE`` and the session it runs in.
    ``db`` defaults to the ``-- Host: ... Database: x`` line mysqldump writes at the top."""
    with open(sql_path, "rb") as f:
        text = f.read()
    name = os.path.basename(sql_path)
    state = DumpState.from_header(text[:4096])
    if db is not None:
        state.db = db
    if state.db is None:
        raise DumpError("the file does not say its database (no '-- Host: ... Database:' line); give it",
                        file=name, offset=0)
    db = state.db
    schema = table = None
    creation = None
    for st in iter_statements(text, state=state, name=name):
        if st.kind == "create_table":
            found = create_table(st.raw.decode("utf-8", "replace"), db, state.db_charsets)
            if isinstance(found, str):
                raise CorruptDump(f"CREATE TABLE not understood: {found}", file=name, offset=st.offset)
            _, table, schema = found
            creation = state.copy()
    if schema is None:
        raise CorruptDump("no CREATE TABLE in the file", file=name, offset=0)
    txt = os.path.splitext(sql_path)[0] + ".txt"
    return TabTable(db, table, schema, creation, txt, sql_path)


def read_tab_folder(path: str, db: str | None = None) -> list[TabTable]:
    """Every table of a ``--tab`` folder (a ``.sql`` with a ``.txt`` beside it), by file name."""
    out = []
    for entry in sorted(os.listdir(path)):
        if entry.endswith(".sql") and os.path.exists(os.path.join(path, entry[:-4] + ".txt")):
            out.append(read_tab_table(os.path.join(path, entry), db))
    return out


def iter_tab_rows(table: TabTable, buf, start: int = 0, stop: int | None = None) -> Iterator[tuple[int, tuple]]:
    """``(offset, literals)`` of each row of ``table``'s ``.txt`` bytes ``buf`` that starts in
    ``[start, stop)``, as :class:`~pipelines.snapshot.cells.RowReader` takes them with
    ``client_charset=table.txt_charset``: a binary column's bytes as ``Binary``; a text column's
    bytes as ``Binary`` too when the file holds values' own bytes, else as ``bytes`` in the file's
    charset; the text of a number, date or address as ``str``; None for ``\\N``."""
    stop = len(buf) if stop is None else stop
    width = len(table.schema.columns)
    own_bytes = table.txt_charset == "binary"
    kinds = tuple(Binary if (c.type in _RAW_TYPES or (own_bytes and c.type in _TEXT_TYPES))
                  else bytes if c.type in _TEXT_TYPES else str for c in table.schema.columns)
    match = _FIELD.match
    pos = start
    while pos < stop:
        row_start = pos
        row = []
        while True:
            m = match(buf, pos)
            if m is None:
                raise TruncatedDump("the .txt ends inside a row (no line feed after it)", file=table.txt_path,
                                    offset=row_start)
            raw = m.group(1)
            pos = m.end()
            if raw == b"\\N":
                row.append(None)
            else:
                value = unescape_field(raw)
                k = len(row)
                kind = kinds[k] if k < width else str
                if kind is not str:
                    row.append(kind(value))
                else:
                    try:
                        row.append(value.decode("ascii"))
                    except UnicodeDecodeError:
                        raise CorruptDump(f"column {k + 1} is a number, date or address but holds {value[:40]!r}",
                                          file=table.txt_path, offset=m.start()) from None
            if m.group(2) == b"\n":
                break
        if len(row) != width:
            raise CorruptDump(f"a row of {len(row)} fields for the {width} columns of {table.db}.{table.table}",
                              file=table.txt_path, offset=row_start)
        yield row_start, tuple(row)
