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
triggers...; counted by their first words, :attr:`Statement.head`).

Splitting a dump in byte ranges: :func:`next_statement_start`; the statements that are not data
(the dump's outline, cheap to find): :func:`outline`; the state at any offset from it:
:func:`state_at`.

>>> dump = b"/*!40101 SET NAMES utf8mb4 */;\\nUSE `shop`;\\nINSERT INTO `t` VALUES (1,'a'),(2,'b');\\n"
>>> state = DumpState()
>>> [(s.kind, s.offset) for s in iter_statements(dump, state=state)], state.db, state.client_charset
([('set', 0), ('use', 31), ('insert', 43)], 'shop', 'utf8mb4')
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from pipelines.binlog.charsets import CHARSET_CODECS
from pipelines.schema.ddl import strip_comments

from .errors import CorruptDump, DumpError, TruncatedDump, UnsupportedDump
from .values import parse_values

# -- state -------------------------------------------------------------------------------------

# connection charsets in which a multi-byte character can end with the byte of a quote or a
# backslash: the lexer needs the charset to find where a string ends, and this reader does not
_UNSAFE_CHARSETS = frozenset({"big5", "cp932", "gbk", "sjis", "gb18030"})


@dataclass
class DumpState:
    """The session a dump sets up as it runs: current database, session variables
    (``character_set_client``, ``time_zone``, ``sql_mode``, ...), user variables (mysqldump saves
    and restores settings through them), the client's delimiter, and the server flavor read from
    the header (``mysql``/``mariadb``/None)."""

    db: str | None = None
    session: dict[str, str | None] = field(default_factory=dict)
    user: dict[str, str | None] = field(default_factory=dict)
    delimiter: bytes = b";"
    flavor: str | None = None
    db_charsets: dict[str, str] = field(default_factory=dict)

    @property
    def client_charset(self) -> str | None:
        """The charset of string literals' bytes (``SET NAMES``, ``SET character_set_client``)."""
        cs = self.session.get("character_set_client")
        return None if cs is None else _norm_charset(cs)

    @property
    def time_zone(self) -> str | None:
        return self.session.get("time_zone")

    @classmethod
    def from_header(cls, head: bytes) -> "DumpState":
        """The state a dump starts in, from its first lines: the server flavor
        (:func:`flavor_of`) and, for a dump of one database (no ``USE`` in it), that database from
        mysqldump's ``-- Host: ... Database: x`` line."""
        m = re.search(rb"^-- Host: .*?Database: ([^\r\n]*?)[ \t]*\r?$", head[:4096], re.M)
        db = m.group(1).decode("utf-8", "replace") if m and m.group(1) else None
        return cls(db=db, flavor=flavor_of(head))

    def copy(self) -> "DumpState":
        return DumpState(self.db, dict(self.session), dict(self.user), self.delimiter, self.flavor,
                         dict(self.db_charsets))

    def apply(self, st: "Statement") -> None:
        """Change the state as the statement would (``USE``, ``SET``, ``DELIMITER``, ``CREATE
        DATABASE``'s default charset); other statements leave it."""
        if st.kind == "use":
            self.db = st.name
        elif st.kind == "set":
            _apply_set(self, st.sql)
        elif st.kind == "delimiter":
            self.delimiter = st.name.encode("utf-8")
        elif st.kind == "create_database":
            m = re.search(r"CHARACTER\s+SET\s*=?\s*(\w+)|CHARSET\s*=?\s*(\w+)", st.sql, re.IGNORECASE)
            if m and st.name:
                self.db_charsets[st.name] = _norm_charset(m.group(1) or m.group(2))


def _norm_charset(cs: str) -> str:
    cs = cs.strip().strip("'\"`").lower()
    return "utf8mb3" if cs == "utf8" else cs


_ASSIGN = re.compile(
    r"\s*(?:(?P<names>NAMES)\s+(?P<nv>'[^']*'|\"[^\"]*\"|[\w@]+)(?:\s+COLLATE\s+\S+)?"
    r"|(?P<cs>CHARACTER\s+SET|CHARSET)\s+(?P<csv>'[^']*'|\"[^\"]*\"|[\w@]+)"
    r"|(?P<target>@@(?:SESSION\.|GLOBAL\.|LOCAL\.)?\w+|@`[^`]*`|@\w+|(?:SESSION\s+|LOCAL\s+)?\w+)"
    r"\s*:?=\s*(?P<value>'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|/\*.*?\*/\s*'[^']*'|[^,]+?))\s*(?:,|$)",
    re.IGNORECASE | re.DOTALL)


def _apply_set(state: DumpState, sql: str) -> None:
    body = re.sub(r"^\s*SET\s+", "", sql, flags=re.IGNORECASE).rstrip().rstrip(";").rstrip()
    pos = 0
    while pos < len(body):
        m = _ASSIGN.match(body, pos)
        if m is None or m.end() == pos:
            return  # an assignment we do not follow (an expression): it sets nothing we read
        pos = m.end()
        if m.group("names"):
            cs = _value(state, m.group("nv"))
            for var in ("character_set_client", "character_set_results", "character_set_connection"):
                state.session[var] = cs
        elif m.group("cs"):
            cs = _value(state, m.group("csv"))
            state.session["character_set_client"] = state.session["character_set_results"] = cs
        else:
            target = m.group("target")
            value = _value(state, m.group("value"))
            if target.startswith("@@"):
                scope, _, var = target[2:].rpartition(".")
                if scope.upper() != "GLOBAL":
                    state.session[var.lower()] = value
            elif target.startswith("@"):
                state.user[target[1:].strip("`").lower()] = value
            else:
                state.session[target.split()[-1].lower()] = value


def _value(state: DumpState, text: str) -> str | None:
    text = text.strip()
    if text.startswith("/*"):
        text = text[text.index("*/") + 2:].strip()
    if text[:1] in "'\"":
        return re.sub(r"\\(.)|''|\"\"", lambda m: m.group(1) or m.group(0)[0], text[1:-1])
    if text.startswith("@@"):
        return state.session.get(text[2:].rpartition(".")[2].lower())
    if text.startswith("@"):
        return state.user.get(text[1:].strip("`").lower())
    if text.upper() in ("DEFAULT", "NULL"):
        return None
    return text


def flavor_of(head: bytes) -> str | None:
    r"""``mariadb`` or ``mysql`` from a dump's first lines: the ``-- Server version`` line (the
    server whose binlogs follow), else the tool's ``-- MariaDB dump`` / ``-- MySQL dump`` line.

    >>> flavor_of(b"-- MySQL dump 10.13\n-- Server version\t10.11.19-MariaDB-log\n")
    'mariadb'
    """
    m = re.search(rb"^-- Server version\s+(\S+)", head, re.M)
    if m:
        return "mariadb" if b"mariadb" in m.group(1).lower() else "mysql"
    if re.search(rb"^-- MariaDB dump", head, re.M):
        return "mariadb"
    if re.search(rb"^-- MySQL dump", head, re.M):
        return "mysql"
    return None


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
_INSERT_HEAD = re.compile(
    rb"(?i:(INSERT(?:" + _WSB + rb"+(?:LOW_PRIORITY|DELAYED|HIGH_PRIORITY))?(?:" + _WSB + rb"+IGNORE)?"
    rb"|REPLACE(?:" + _WSB + rb"+(?:LOW_PRIORITY|DELAYED))?)" + _WSB + rb"+INTO)" + _WSB + rb"+"
    rb"(" + _IDENT + rb")(?:" + _WSB + rb"*\." + _WSB + rb"*(" + _IDENT + rb"))?" + _WSB + rb"*"
    rb"(\((?:" + _WSB + rb"*(?:" + _IDENT + rb")" + _WSB + rb"*,)*" + _WSB + rb"*(?:" + _IDENT + rb")" + _WSB
    + rb"*\))?" + _WSB + rb"*(?i:VALUES?)")
_IDENTS = re.compile(_IDENT)
_INSERT_WORD = re.compile(rb"(?i:INSERT|REPLACE)\b")
_DELIMITER_LINE = re.compile(rb"(?i:DELIMITER)[ \t]+(\S+)[ \t]*\r?(?:\n|\Z)")
# whitespace and plain comments between statements (an executable comment starts a statement)
_GAP = re.compile(rb"(?:[ \t\r\n]+|--(?:[ \t\r][^\n]*)?(?:\n|\Z)|#[^\n]*(?:\n|\Z)"
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


def _ident_text(raw: bytes, codec: str) -> str:
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
    gap = _GAP.match(buf, pos)
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
    if _INSERT_WORD.match(buf, start) and state.delimiter == b";":
        return _read_insert(buf, start, state)
    end = _scan_end(buf, start, state.delimiter)
    raw = bytes(buf[start:end])
    text = raw[:len(raw) - len(state.delimiter)].decode(_identifier_codec(state), "replace")
    sql = strip_comments(text).strip()
    m = _KINDS.match(sql)
    kind = m.lastgroup if m else "other"
    words = _HEAD_WORDS.match(sql)
    head = " ".join(w.upper() for w in words.groups() if w) if words else ""
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
    m = _INSERT_HEAD.match(buf, start)
    if m is None:
        if len(buf) - start < 64 * 1024 and _scan_maybe_truncated(buf, start):
            raise TruncatedDump("the dump ends inside an INSERT statement's head", offset=start)
        raise CorruptDump(f"an INSERT this reader does not follow: {bytes(buf[start:start + 120])!r}", offset=start)
    cs = state.client_charset
    if cs in _UNSAFE_CHARSETS:
        raise UnsupportedDump(f"string literals in the connection charset {cs} (SET NAMES {cs}): a multi-byte "
                              "character can end with the byte of a quote or a backslash; dump with "
                              "--default-character-set=utf8mb4", offset=start)
    codec = _identifier_codec(state)
    verb = " ".join(m.group(1).decode("ascii").upper().split()[:-1])
    verb = "REPLACE" if verb.startswith("REPLACE") else ("INSERT IGNORE" if verb.endswith("IGNORE") else "INSERT")
    first, second = m.group(2), m.group(3)
    db, table = (_ident_text(first, codec), _ident_text(second, codec)) if second else (None, _ident_text(first, codec))
    columns = tuple(_ident_text(c, codec) for c in _IDENTS.findall(m.group(4))) if m.group(4) else None
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
        pos = _GAP.match(buf, pos).end()
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
    each buffer is kept and the next chunk appended until a statement is complete. A statement
    still incomplete when the stream ends raises :class:`TruncatedDump` with its offset."""
    state = state if state is not None else DumpState()
    buf = b""
    base = 0
    for chunk in chunks:
        if not chunk:
            continue
        buf = buf + chunk if buf else chunk
        if len(buf) < chunk_floor:
            continue
        pos = 0
        for st in iter_statements(buf, 0, None, state, name=name, base=base, final=False):
            pos = st.end - base
            yield st
        buf = buf[pos:]
        base += pos
    yield from iter_statements(buf, 0, None, state, name=name, base=base, final=True)


# -- splitting a file ---------------------------------------------------------------------------

_LINE_END_STATEMENT = re.compile(rb";[ \t\r]*\n")


def next_statement_start(buf, offset: int, blocks: Iterable[tuple[int, int]] = ()) -> int | None:
    """The first statement boundary at or after ``offset``: the start of a line whose previous line
    ends a statement (``;`` last on it) or is a comment or blank line; None when there is none.

    Why that cannot be inside a string: mysqldump, mariadb-dump and mydumper write every value
    with ``mysql_real_escape_string`` or as hex, which turn a line feed into ``\\n`` and a carriage
    return into ``\\r`` (binary columns too, with or without ``--hex-blob``), and
    ``SHOW CREATE TABLE``/``VIEW`` print defaults, comments and CHECK expressions the same way. So
    outside routine bodies a raw line feed is never inside a literal; it follows a row
    (``,`` at the end of the line, ``INSERT ... VALUES`` on MariaDB), a column definition, or a
    finished statement, and only the last ends with ``;``. Routine, trigger and event bodies are
    the exception (the user's own text, line breaks inside strings): they sit in ``DELIMITER``
    blocks, which the caller passes as ``blocks`` (from :func:`delimiter_blocks`) and which are
    stepped over.
    """
    blocks = sorted(blocks)
    n = len(buf)
    p = offset
    while p <= n:
        if p == 0:
            cand = 0
        else:
            nl = buf.find(b"\n", p - 1)
            if nl < 0:
                return None
            cand = nl + 1
            line_start = buf.rfind(b"\n", max(0, nl - 65536), nl) + 1 if nl else 0
            tail = bytes(buf[max(line_start, nl - 64):nl]).rstrip(b" \t\r")
            blank = not tail and nl - line_start <= 64
            if not (tail.endswith(b";") or blank or bytes(buf[line_start:line_start + 2]) in (b"--", b"#")
                    or buf[line_start:line_start + 1] == b"#"):
                p = cand + 1
                continue
        inside = next(((a, b) for a, b in blocks if a < cand < b), None)
        if inside is not None:
            p = inside[1]
            continue
        if cand >= n:
            return None
        return cand
    return None


def delimiter_lines(buf, start: int = 0, stop: int | None = None) -> list[tuple[int, int, str, str]]:
    """``(offset, end, delimiter, before)`` of every ``DELIMITER x`` line that starts in
    ``[start, stop)``, ``before`` the end of the line above it; found by line, not by statement,
    so any byte range can be searched (the ranges' lists, concatenated, are the file's)."""
    stop = len(buf) if stop is None else stop
    out = []
    for m in _DELIMITER_AT_LINE.finditer(buf, start, min(len(buf), stop + 64)):
        if m.start() < stop:
            above = bytes(buf[max(0, m.start() - 33):max(0, m.start() - 1)]).rstrip(b" \t\r")
            out.append((m.start(), m.end(), m.group(1).decode("latin-1"), above.decode("latin-1")))
    return out


_DELIMITER_AT_LINE = re.compile(rb"(?m)^(?i:DELIMITER)[ \t]+(\S+)[ \t]*\r?$")


def delimiter_blocks(lines: Iterable[tuple]) -> list[tuple[int, int]]:
    """The byte spans ``(start, end)`` where the delimiter is not ``;``, from :func:`delimiter_lines`
    of a whole file: from a line that changes it to the line that sets ``;`` again. A closing line
    counts only after a statement that ended with the block's delimiter (mysqldump writes
    ``END */;;`` then ``DELIMITER ;``): a routine body's string may hold a ``DELIMITER ;`` line of its
    own, after a line that does not end so."""
    spans, opened, delim = [], None, None
    for off, end, new, above in sorted(lines):
        if opened is None and new != ";":
            opened, delim = end, new
        elif opened is not None and new == ";" and above.endswith(delim):
            spans.append((opened, off))
            opened = None
    if opened is not None:
        spans.append((opened, 1 << 62))
    return spans


# -- the outline -------------------------------------------------------------------------------

_DATA_END = re.compile(rb";[ \t\r]*\n|;[ \t\r]*\Z")


def outline(buf, start: int = 0, stop: int | None = None, *, blocks: Iterable[tuple[int, int]] = (),
            name: str | None = None, state: DumpState | None = None) -> tuple[list[Statement], Counter]:
    """The statements that are not data (``USE``, ``SET``, ``CREATE TABLE``, positions, ...) that
    start in ``[start, stop)``, and the number of INSERT statements per table name, without
    reading the INSERTs' values: an INSERT ends at the first ``;`` that ends a line (see
    :func:`next_statement_start` for why). ``start`` is moved to the next statement boundary.
    The state at any offset is then :func:`state_at` of the outlines of all ranges, in order.
    """
    stop = len(buf) if stop is None else stop
    state = state if state is not None else DumpState()
    blocks = list(blocks)
    pos = next_statement_start(buf, start, blocks) if start else 0
    found, inserts = [], Counter()
    while pos is not None and pos < stop:
        gap = _GAP.match(buf, pos)
        at = gap.end()
        if at >= len(buf) or at >= stop:
            break
        if state.delimiter == b";" and _INSERT_WORD.match(buf, at):
            head = _INSERT_HEAD.match(buf, at)
            end = _DATA_END.search(buf, head.end() if head else at)
            if end is None:
                raise TruncatedDump("the dump ends inside an INSERT statement", offset=at).at(name)
            table = _ident_text(head.group(3) or head.group(2), "utf-8") if head else "?"
            inserts[table] += 1
            pos = end.end()
            continue
        try:
            st = read_statement(buf, at, state)
        except DumpError as e:
            raise e.at(name)
        if st is None:
            break
        state.apply(st)
        found.append(st)
        pos = st.end
    return found, inserts


def state_at(statements: Iterable[Statement], offset: int, initial: DumpState | None = None) -> DumpState:
    """The session state just before byte ``offset``: ``initial`` (the header's flavor) with every
    outline statement that starts before ``offset`` applied in order."""
    state = initial.copy() if initial is not None else DumpState()
    for st in statements:
        if st.offset >= offset:
            break
        state.apply(st)
    return state
