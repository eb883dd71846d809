"""SQL dump text -> statements: split where the ``mysql`` client would split it, classified, with
the session state a dump sets as it goes (database, connection charset, time zone, delimiter).

Splitting follows the client's rules over bytes: quoted strings (``'...'``, ``"..."`` with
backslash and doubled-quote escapes), backticked identifiers, ``-- `` and ``#`` comments to the end
of the line, ``/* */`` comments; a ``/*!NNNNN ... */`` or ``/*M!NNNNNN ... */`` comment is code (the
server runs it: ``/*!40101 SET NAMES utf8mb4 */``), except MariaDB's ``/*M!999999\\- enable the
sandbox mode */`` marker, which no server runs; ``DELIMITER x`` at the start of a line sets the
statement terminator (triggers and routines come in ``DELIMITER ;;`` blocks).

``INSERT``/``REPLACE`` statements are not scanned as text: their ``VALUES`` list is read by
:func:`pipelines.snapshot.values.parse_values` and the statement ends where the list does.

Kinds: ``insert``, ``create_table``, ``create_database``, ``use``, ``set``, ``delimiter``,
``position`` (``CHANGE MASTER``/``CHANGE REPLICATION SOURCE``, ``SET GLOBAL gtid_slave_pos``,
``SET @@GLOBAL.GTID_PURGED``), ``other`` (everything else: ``DROP TABLE``, ``LOCK TABLES``, views,
triggers, and the ``/*!50001 CREATE TABLE`` a MySQL dump writes as a view's stand-in before the
view itself; counted by their first words, :attr:`Statement.head`).

The session state the statements change lives in :mod:`.session`; splitting a file in byte ranges
and its outline in :mod:`.split`.

>>> dump = b"/*!40101 SET NAMES utf8mb4 */;\\nUSE `shop`;\\nINSERT INTO `t` VALUES (1,'a'),(2,'b');\\n"
>>> state = DumpState()
>>> [(s.kind, s.offset) for s in iter_statements(dump, state=state)], state.db, state.client_charset
([('set', 0), ('use', 31), ('insert', 43)], 'shop', 'utf8mb4')
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from pipelines.binlog.charsets import CHARSET_CODECS
from pipelines.schema.ddl import strip_comments

from .errors import CorruptDump, DumpError, TruncatedDump, UnsupportedDump
from .session import UNSAFE_CHARSETS, DumpState
from .values import parse_values

# -- statements --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Insert:
    """The data of one ``INSERT``/``REPLACE``: the table (``db`` when the statement names one),
    the column list (``--complete-insert``; None without one), and the rows of raw literals."""

    db: str | None
    table: str
    columns: tuple[str, ...] | None
    rows: list[tuple]
    verb: str  # INSERT | INSERT IGNORE | REPLACE


@dataclass(frozen=True)
class Statement:
    """One statement: ``[offset, end)`` in the buffer (the end after its delimiter), its kind,
    ``head`` (its first words, upper case: ``DROP TABLE``), ``sql`` (the text with comments removed
    and executable comments' bodies kept, as ``str``; empty for inserts), ``name`` (the database of
    ``USE``/``CREATE DATABASE``, the table of ``CREATE TABLE``, the new delimiter), ``raw`` (the
    statement's bytes; None for inserts) and ``insert``."""

    offset: int
    end: int
    kind: str
    head: str
    sql: str = ""
    name: str | None = None
    raw: bytes | None = None
    insert: Insert | None = None


_IDENT = rb"`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|[A-Za-z0-9_$\x80-\xff]+"
_WSB = rb"[ \t\r\n]"
INSERT_HEAD = re.compile(
    rb"(?i:(INSERT(?:" + _WSB + rb"+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY))?(?:" + _WSB + rb"+IGNORE)?"
    rb"|REPLACE(?:" + _WSB + rb"+(?:LOW_PRIORITY|DELAYED))?)" + _WSB + rb"+INTO)" + _WSB + rb"+"
    rb"(" + _IDENT + rb")(?:" + _WSB + rb"*\." + _WSB + rb"*(" + _IDENT + rb"))?" + _WSB + rb"*"
    rb"(\((?:" + _WSB + rb"*(?:" + _IDENT + rb")" + _WSB + rb"*,)*" + _WSB + rb"*(?:" + _IDENT + rb")" + _WSB
    + rb"*\))?" + _WSB + rb"*(?i:VALUES?)")
_IDENTS = re.compile(_IDENT)
INSERT_WORD = re.compile(rb"(?i:INSERT|REPLACE)\b")
_DELIMITER_LINE = re.compile(rb"(?i:DELIMITER)[ \t]+(\S+)[ \t]*\r?(?:\n|\Z)")
# whitespace and plain comments between statements (an executable comment starts a statement)
GAP = re.compile(rb"(?:[ \t\r\n]+|--(?:[ \t\r][^\n]*)?(?:\n|\Z)|#[^\n]*(?:\n|\Z)"
                  rb"|/\*(?!M?!)(?:[^*]|\*(?!/))*\*/|/\*M?!999999(?:[^*]|\*(?!/))*\*/)*")
_SCANNERS: dict[bytes, re.Pattern] = {}


def _scanner(delimiter: bytes) -> re.Pattern:
    rx = _SCANNERS.get(delimiter)
    if rx is None:
        rx = _SCANNERS[delimiter] = re.compile(
            rb"'|\"|`|/\*|\*/|--(?=[ \t\r\n])|--\Z|#|" + re.escape(delimiter))
    return rx


_QUOTED = {39: re.compile(rb"'(?:[^'\\]++|\\.|'')*+'", re.S), 34: re.compile(rb'"(?:[^"\\]++|\\.|"")*+"', re.S),
           96: re.compile(rb"`(?:[^`]++|``)*+`")}
_COND = re.compile(rb"/\*M?!([0-9]*)")


def _scan_end(buf, pos: int, delimiter: bytes) -> int:
    """The offset just after the delimiter that ends the statement starting at ``pos``."""
    rx = _scanner(delimiter)
    n = len(buf)
    i = pos
    while True:
        m = rx.search(buf, i)
        if m is None:
            raise TruncatedDump(f"the dump ends inside a statement (no {delimiter.decode()!r} after it)", offset=pos)
        tok = m.group(0)
        c = tok[0]
        if c in _QUOTED and len(tok) == 1:
            q = _QUOTED[c].match(buf, m.start())
            if q is None:
                raise TruncatedDump(f"the dump ends inside a quoted {'identifier' if c == 96 else 'string'}",
                                    offset=m.start())
            i = q.end()
        elif tok == b"/*":
            cond = _COND.match(buf, m.start())
            if cond is not None and cond.group(1) != b"999999":
                i = cond.end()  # executable: its body is code, its */ is skipped below
            else:
                close = buf.find(b"*/", m.end())
                if close < 0:
                    raise TruncatedDump("the dump ends inside a /* comment */", offset=m.start())
                i = close + 2
        elif tok == b"*/":
            i = m.end()
        elif c == 35 or tok[:2] == b"--":  # '#' or '-- ' comment: to the end of the line
            eol = buf.find(b"\n", m.end())
            i = n if eol < 0 else eol + 1
            if eol < 0:
                raise TruncatedDump(f"the dump ends inside a statement (no {delimiter.decode()!r} after it)",
                                    offset=pos)
        else:
            return m.end()


_KINDS = re.compile(
    r"\s*(?:(?P<create_table>CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\b)"
    r"|(?P<create_database>CREATE\s+(?:OR\s+REPLACE\s+)?(?:DATABASE|SCHEMA)\b)"
    r"|(?P<use>USE\b)"
    r"|(?P<position>CHANGE\s+(?:MASTER|REPLICATION\s+SOURCE)\b|SET\s+(?:GLOBAL\s+gtid_slave_pos|@@GLOBAL\.GTID_PURGED)\b)"
    r"|(?P<set>SET\b))", re.IGNORECASE)
_HEAD_WORDS = re.compile(r"\s*([A-Za-z_]+)(?:\s+([A-Za-z_]+))?")


def ident_text(raw: bytes, codec: str) -> str:
    q = raw[:1]
    if q in (b"`", b'"'):
        raw = raw[1:-1].replace(q + q, q)
    return raw.decode(codec, "replace")


def _identifier_codec(state: DumpState) -> str:
    """Identifiers are text in the connection charset; a binary connection (mydumper) sends them
    as the server keeps them, UTF-8."""
    cs = state.client_charset
    codec = CHARSET_CODECS.get(cs) if cs else None
    return codec or "utf-8"


def read_statement(buf, pos: int, state: DumpState) -> Statement | None:
    """The statement that starts at the first non-blank, non-comment byte at or after ``pos``
    (None when only blanks and comments are left). Does not change ``state``."""
    gap = GAP.match(buf, pos)
    start = gap.end()
    if start >= len(buf):
        return None
    if buf[start:start + 9].upper() == b"DELIMITER":
        m = _DELIMITER_LINE.match(buf, start)
        if m is None:
            if buf.find(b"\n", start) < 0:
                raise TruncatedDump("the dump ends inside a DELIMITER line", offset=start)
            raise CorruptDump("a DELIMITER line without a delimiter", offset=start)
        name = m.group(1).decode("latin-1")
        return Statement(start, m.end(), "delimiter", "DELIMITER", name=name)
    if INSERT_WORD.match(buf, start) and state.delimiter == b";":
        return _read_insert(buf, start, state)
    end = _scan_end(buf, start, state.delimiter)
    raw = bytes(buf[start:end])
    text = raw[:len(raw) - len(state.delimiter)].decode(_identifier_codec(state), "replace")
    sql = strip_comments(text).strip()
    m = _KINDS.match(sql)
    kind = m.lastgroup if m else "other"
    words = _HEAD_WORDS.match(sql)
    head = " ".join(w.upper() for w in words.groups() if w) if words else ""
    if kind == "create_table" and raw.startswith(b"/*!50001 "):
        kind, head = "other", "CREATE TABLE (view placeholder)"  # mysqldump's stand-in for a view
    name = None
    if kind in ("use", "create_database", "create_table"):
        name = _statement_name(sql, kind)
    return Statement(start, end, kind, head, sql, name, raw)


_NAME_AFTER = {
    "use": re.compile(r"\s*USE\s+(`(?:[^`]|``)+`|\S+)", re.IGNORECASE),
    "create_database": re.compile(r"\s*CREATE\s+(?:OR\s+REPLACE\s+)?(?:DATABASE|SCHEMA)\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                                  r"(`(?:[^`]|``)+`|[^\s;]+)", re.IGNORECASE),
    "create_table": re.compile(r"\s*CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                               r"(`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|[^\s(.]+)"
                               r"(?:\s*\.\s*(`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\"|[^\s(]+))?", re.IGNORECASE),
}


def _unquote_ident(text: str) -> str:
    if text[:1] in "`\"" and text[-1:] == text[:1]:
        q = text[0]
        return text[1:-1].replace(q + q, q)
    return text.rstrip(";")


def _statement_name(sql: str, kind: str) -> str | None:
    m = _NAME_AFTER[kind].match(sql)
    if m is None:
        return None
    if kind == "create_table" and m.group(2):
        return _unquote_ident(m.group(1)) + "." + _unquote_ident(m.group(2))
    return _unquote_ident(m.group(1))


def _read_insert(buf, start: int, state: DumpState) -> Statement:
    m = INSERT_HEAD.match(buf, start)
    if m is None:
        if len(buf) - start < 64 * 1024 and _scan_maybe_truncated(buf, start):
            raise TruncatedDump("the dump ends inside an INSERT statement's head", offset=start)
        raise CorruptDump(f"an INSERT this reader does not follow: {bytes(buf[start:start + 120])!r}", offset=start)
    cs = state.client_charset
    if cs in UNSAFE_CHARSETS:
        raise UnsupportedDump(f"string literals in the connection charset {cs} (SET NAMES {cs}): a multi-byte "
                              "character can end with the byte of a quote or a backslash; dump with "
                              "--default-character-set=utf8mb4", offset=start)
    codec = _identifier_codec(state)
    verb = " ".join(m.group(1).decode("ascii").upper().split()[:-1])
    verb = "REPLACE" if verb.startswith("REPLACE") else ("INSERT IGNORE" if verb.endswith("IGNORE") else "INSERT")
    first, second = m.group(2), m.group(3)
    db, table = (ident_text(first, codec), ident_text(second, codec)) if second else (None, ident_text(first, codec))
    columns = tuple(ident_text(c, codec) for c in _IDENTS.findall(m.group(4))) if m.group(4) else None
    try:
        rows, end = parse_values(buf, m.end())
    except DumpError as e:
        if e.offset is None:
            e.offset = start
        raise
    return Statement(start, end, "insert", verb, insert=Insert(db, table, columns, rows, verb))


def _scan_maybe_truncated(buf, start: int) -> bool:
    return buf.find(b"\n", start) < 0 or buf.find(b"VALUES", start) < 0


def iter_statements(buf, start: int = 0, stop: int | None = None, state: DumpState | None = None, *,
                    name: str | None = None, base: int = 0, final: bool = True) -> Iterator[Statement]:
    """The statements that start in ``buf[start:stop]`` (the last one may end after ``stop``),
    in order; ``state`` is updated as each is read (an INSERT's rows belong to the state at the
    time it is yielded). ``base`` is added to offsets (``buf`` starts at that byte of the file).

    With ``final`` False (a stream read in chunks) a statement cut by the end of ``buf`` stops
    the iteration instead of raising; :func:`iter_stream` then reads on.
    """
    state = state if state is not None else DumpState()
    stop = len(buf) if stop is None else stop
    pos = start
    while pos < stop:
        pos = GAP.match(buf, pos).end()
        if pos >= stop:
            return
        try:
            st = read_statement(buf, pos, state)
        except TruncatedDump as e:
            if not final:
                return
            raise _located(e, name, base)
        except DumpError as e:
            raise _located(e, name, base)
        if st is None or st.offset >= stop:
            return
        if base:
            st = _shift(st, base)
        state.apply(st)
        yield st
        pos = st.end - base


def _located(e: DumpError, name: str | None, base: int) -> DumpError:
    if e.offset is not None and base:
        e.offset += base
    return e.at(name)


def _shift(st: Statement, base: int) -> Statement:
    return Statement(st.offset + base, st.end + base, st.kind, st.head, st.sql, st.name, st.raw, st.insert)


def iter_stream(chunks: Iterable[bytes], state: DumpState | None = None, *, name: str | None = None,
                chunk_floor: int = 1 << 20) -> Iterator[Statement]:
    """:func:`iter_statements` over a stream (a decompressing reader's chunks): the unread tail of
    each buffer is kept and the next chunks appended until a statement is complete; when none
    completes, the next attempt waits for twice the bytes (one huge statement, a long blob, is read
    a logarithmic number of times). A statement still incomplete when the stream ends raises
    :class:`TruncatedDump` with its offset."""
    state = state if state is not None else DumpState()
    pending: list[bytes] = []
    size = 0
    need = chunk_floor
    base = 0
    for chunk in chunks:
        if not chunk:
            continue
        pending.append(chunk)
        size += len(chunk)
        if size < need:
            continue
        buf = b"".join(pending)
        pos = 0
        for st in iter_statements(buf, 0, None, state, name=name, base=base, final=False):
            pos = st.end - base
            yield st
        rest = buf[pos:]
        base += pos
        pending, size = [rest], len(rest)
        need = chunk_floor if pos else max(chunk_floor, 2 * size)
    yield from iter_statements(b"".join(pending), 0, None, state, name=name, base=base, final=True)
