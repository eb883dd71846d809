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
right before it are even in number (:func:`next_row_start`), except in a table with BIT columns,
whose values the server writes unescaped.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Iterator

from pipelines.schema.model import TableSchema

from .tablemap import create_table
from .errors import CorruptDump, DumpError, TruncatedDump
from .session import DumpState
from .statements import iter_statements
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
    def splittable(self) -> bool:
        """Can the ``.txt`` be read by byte range (:func:`next_row_start`)? Not with a BIT column,
        whose raw bytes may hold a line feed."""
        return not any(c.type == "BIT" for c in self.schema.columns)

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
    charset; the text of a number, date or address as ``str``; None for ``\\N``.

    A BIT value is the one field the server writes unescaped (its result is a number, not a
    string): its bytes are read by the column's width, ``ceil(M/8)``, and where they could also be
    a NULL (``\\N``) the rest of the row decides; a row that reads both ways is refused. Raw bytes
    can hold a line feed, so a table with BIT columns is read from its first row
    (:attr:`TabTable.splittable`)."""
    stop = len(buf) if stop is None else stop
    own_bytes = table.txt_charset == "binary"
    parser = _RowParser(table, buf, tuple(
        Binary if (c.type in _RAW_TYPES or (own_bytes and c.type in _TEXT_TYPES))
        else bytes if c.type in _TEXT_TYPES else str for c in table.schema.columns),
        tuple(((c.length or 1) + 7) // 8 if c.type == "BIT" else 0 for c in table.schema.columns))
    pos = start
    while pos < stop:
        row, end = parser.row(pos)
        yield pos, tuple(row)
        pos = end


class _RowParser:
    def __init__(self, table: TabTable, buf, kinds: tuple, bits: tuple):
        self.table, self.buf, self.kinds, self.bits = table, buf, kinds, bits
        self.width = len(kinds)

    def row(self, pos: int) -> tuple[list, int]:
        found = self._fields(pos, 0)
        if isinstance(found, DumpError):
            raise found
        return found

    def _fields(self, pos: int, k: int):
        """The fields ``k`` and after of the row going on at ``pos``: ``(fields, end)`` or the error."""
        buf, table, width = self.buf, self.table, self.width
        out = []
        while True:
            n = self.bits[k] if k < width else 0
            if n:
                choices = []
                if buf[pos + n:pos + n + 1] in (b"\t", b"\n"):
                    choices.append((Binary(bytes(buf[pos:pos + n])), pos + n + 1, buf[pos + n:pos + n + 1] == b"\n"))
                if buf[pos:pos + 2] == b"\\N" and buf[pos + 2:pos + 3] in (b"\t", b"\n"):
                    choices.append((None, pos + 3, buf[pos + 2:pos + 3] == b"\n"))
                if not choices:
                    if pos + n >= len(buf):
                        return TruncatedDump("the .txt ends inside a row (no line feed after it)", file=table.txt_path,
                                             offset=pos)
                    return CorruptDump(f"a BIT field of {n} bytes is not followed by a tab or line feed",
                                       file=table.txt_path, offset=pos)
                if len(choices) == 1:
                    value, pos, last = choices[0]
                    out.append(value)
                    k += 1
                    if last:
                        break
                    continue
                ways = []
                for value, after, last in choices:
                    rest = ([], after) if last else self._fields(after, k + 1)
                    if not isinstance(rest, DumpError) and (k + 1 + len(rest[0]) == width):
                        ways.append(([value] + rest[0], rest[1]))
                if len(ways) != 1:
                    return CorruptDump("a BIT field that reads as a value and as NULL (\\N) alike (the server "
                                       "writes BIT unescaped)" if ways else "a row whose BIT field reads neither way",
                                       file=table.txt_path, offset=pos)
                return out + ways[0][0], ways[0][1]
            m = _FIELD.match(buf, pos)
            if m is None:
                return TruncatedDump("the .txt ends inside a row (no line feed after it)", file=table.txt_path,
                                     offset=pos)
            raw = m.group(1)
            pos = m.end()
            if raw == b"\\N":
                out.append(None)
            else:
                value = unescape_field(raw)
                kind = self.kinds[k] if k < width else str
                if kind is not str:
                    out.append(kind(value))
                else:
                    try:
                        out.append(value.decode("ascii"))
                    except UnicodeDecodeError:
                        return CorruptDump(f"column {k + 1} is a number, date or address but holds {value[:40]!r}",
                                           file=table.txt_path, offset=m.start())
            k += 1
            if m.group(2) == b"\n":
                break
        if k != width:
            return CorruptDump(f"a row of {k} fields for the {width} columns of {table.db}.{table.table}",
                               file=table.txt_path, offset=pos)
        return out, pos
