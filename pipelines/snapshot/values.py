"""The rows of an ``INSERT``/``REPLACE`` statement as tuples of raw literals, by a compiled regex
that matches one value and the separator after it, so a row costs one match per column.

Literals (what the server would receive, before it converts anything to the column's type):

=========================================  ==================================================
dump text                                  literal
=========================================  ==================================================
``NULL``                                   ``None``
``-0``, ``1.50``, ``1e10``, ``3.40282e38`` ``str``: the number's text, exactly
``'...'``, ``"..."`` (mydumper)            ``bytes``: the string's bytes after MySQL's escapes
                                           (``\\0 \\' \\" \\b \\n \\r \\t \\Z \\\\``, ``\\%`` and ``\\_``
                                           kept as two bytes, any other ``\\x`` is ``x``, doubled
                                           quotes); they are in the connection's character set
``0x4142``, ``X'4142'``, ``b'0101'``,      :class:`Binary`: bytes that carry no character set
``_binary '...'``                          (the column's own charset applies)
``_latin1'...'``, ``_utf8mb4 0x...``       :class:`Introduced`: bytes in the named charset
=========================================  ==================================================

>>> parse_values(b"(1,'a\\\\nb',NULL),(-0,0x00ff,_binary 'x');", 0)[0]
[('1', b'a\\nb', None), ('-0', Binary(b'\\x00\\xff'), Binary(b'x'))]
"""
from __future__ import annotations

import codecs
import re
from itertools import chain

from .errors import CorruptDump, TruncatedDump

try:  # the compiled VALUES reader (``_speedups.c``, built by ``make setup``); the same rows as _py_rows
    from ._speedups import values_rows as _c_values_rows
except ImportError:  # no compiler at set-up, or a --py-files zip: the Python reader
    _c_values_rows = None


class Binary(bytes):
    """A hex, bit or ``_binary`` literal: bytes without a character set of their own."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"Binary({bytes(self)!r})"

    def __reduce__(self):
        return Binary, (bytes(self),)


class Introduced(bytes):
    """A string with a character-set introducer (``_utf8mb4'...'``): its bytes and ``charset``."""

    charset: str

    def __new__(cls, raw: bytes, charset: str):
        self = super().__new__(cls, raw)
        self.charset = charset
        return self

    def __repr__(self) -> str:
        return f"Introduced({bytes(self)!r}, {self.charset!r})"

    def __reduce__(self):
        return Introduced, (bytes(self), self.charset)


_WS = rb"[ \t\r\n]*"
_SQ = rb"'((?:[^'\\]++|\\.|'')*+)'"
_DQ = rb'"((?:[^"\\]++|\\.|"")*+)"'
# one value and the separator after it: ',' (next value), '),(' (next row) or ');' (the end)
# one literal (the groups tell which kind)
_LITERAL = (
    rb"(?:"
    rb"(?i:(NULL))"                                                           # 1
    rb"|" + _SQ +                                                             # 2
    rb"|" + _DQ +                                                             # 3
    rb"|([-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"          # 4 number
    rb"|0x([0-9A-Fa-f]*)"                                                     # 5
    rb"|[Xx]'([0-9A-Fa-f]*)'"                                                 # 6
    rb"|[Bb]'([01]*)'"                                                        # 7
    rb"|0b([01]+)"                                                            # 8
    rb"|_([A-Za-z0-9]+)" + _WS + rb"(?:" + _SQ + rb"|0x([0-9A-Fa-f]*)|[Xx]'([0-9A-Fa-f]*)')"  # 9: 10 11 12
    rb"|(?i:(TRUE|FALSE))"                                                    # 13
    rb")")
# one value and the separator after it: ',' (next value), '),(' (next row) or ');' (the end)
_VALUE = re.compile(_WS + _LITERAL + _WS + rb"(?:,|\)" + _WS + rb"(?:," + _WS + rb"\(|;))", re.S)
_OPEN = re.compile(_WS + rb"\(")
_ESCAPES = {ord("0"): b"\0", ord("'"): b"'", ord('"'): b'"', ord("b"): b"\b", ord("n"): b"\n", ord("r"): b"\r",
            ord("t"): b"\t", ord("Z"): b"\x1a", ord("\\"): b"\\", ord("%"): b"\\%", ord("_"): b"\\_"}


# a backslash escape Python's ``codecs.escape_decode`` does not read as MySQL: anything but
# \\ \' \" \n \r \t \b, and \0 before an octal digit (Python reads \012 as one byte)
_PY_SAFE = re.compile(rb"\\(?:[^\\'\"nrtb0]|0[0-7])")
_escape_decode = codecs.escape_decode


def unescape(raw: bytes, quote: bytes = b"'") -> bytes:
    r"""The bytes of a quoted string's body, MySQL's escapes applied (``\%`` and ``\_`` stay two
    bytes, as the server keeps them outside LIKE patterns; any other ``\x`` is ``x``).

    >>> unescape(b"it''s \\%\\_ \\q\\\\ \\0\\Z")
    b"it's \\%\\_ q\\ \x00\x1a"
    """
    doubled = quote * 2
    if b"\\" not in raw:
        return raw.replace(doubled, quote) if doubled in raw else raw
    if doubled not in raw and _PY_SAFE.search(raw) is None:
        return _escape_decode(raw)[0]  # the escapes Python's bytes decoder reads as MySQL does, in C
    parts = raw.split(b"\\")
    first = parts[0]
    out = [first.replace(doubled, quote) if doubled in first else first]
    add = out.append
    i, n = 1, len(parts)
    while i < n:
        p = parts[i]
        if p:  # the escaped byte, then plain text
            e = _ESCAPES.get(p[0])
            add(p[:1] if e is None else e)
            rest = p[1:]
            add(rest.replace(doubled, quote) if doubled in rest else rest)
            i += 1
        else:  # '\\': an escaped backslash; the next part is plain text
            add(b"\\")
            if i + 1 < n:
                rest = parts[i + 1]
                add(rest.replace(doubled, quote) if doubled in rest else rest)
            i += 2
    return b"".join(out)


def _hex(digits: bytes) -> bytes:
    if len(digits) % 2:
        digits = b"0" + digits  # 0xABC is 0x0ABC
    return bytes.fromhex(digits.decode("ascii"))


def _bits(digits: bytes) -> bytes:
    if not digits:
        return b""
    return int(digits, 2).to_bytes((len(digits) + 7) // 8, "big")


def _literal(m: re.Match):
    k = m.lastindex
    if k == 2:
        return unescape(m.group(2))
    if k == 4:
        return m.group(4).decode("ascii")
    if k == 1:
        return None
    if k == 3:
        return unescape(m.group(3), b'"')
    if k == 5 or k == 6:
        return Binary(_hex(m.group(k)))
    if k == 7 or k == 8:
        return Binary(_bits(m.group(k)))
    if k in (10, 11, 12):
        raw = unescape(m.group(10)) if k == 10 else _hex(m.group(k))
        charset = m.group(9).decode("ascii").lower()
        return Binary(raw) if charset == "binary" else Introduced(raw, charset)
    return "1" if m.group(13).upper() == b"TRUE" else "0"


# The fast path: every value as (its text, the separator after it), found by one findall over the
# statement; the texts are classified by their first byte. Its pattern accepts a superset of the
# literals (any run of unquoted bytes), so each unquoted text is checked after.
_PAIR = re.compile(
    rb"""([ \t\r\n]*+(?:'(?:[^'\\]++|\\.|'')*+'|"(?:[^"\\]++|\\.|"")*+"|[Xx]'[0-9A-Fa-f]*+'|[Bb]'[01]*+'"""
    rb"""|_[A-Za-z0-9]++[ \t\r\n]*+(?:'(?:[^'\\]++|\\.|'')*+'|0x[0-9A-Fa-f]*+|[Xx]'[0-9A-Fa-f]*+')"""
    rb"""|[^,)'"\s]++))([ \t\r\n]*+(?:,|\)[ \t\r\n]*+(?:,[ \t\r\n]*+\(|;)))""", re.S)
_NUMBER = re.compile(rb"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?\Z")
_END = re.compile(rb";\r?\n")
_SPACE = frozenset(b" \t\r\n")


def parse_values(buf, pos: int) -> tuple[list[tuple], int]:
    """The rows of the ``VALUES`` list that starts at ``buf[pos]`` (at or before its first ``(``),
    and the offset just after the ``;`` that ends the statement.

    Raises :class:`TruncatedDump` when ``buf`` ends inside the list, and :class:`CorruptDump` where
    the text is not a list of literals; both carry the offset in ``buf`` of the value that does not
    parse.

    Dump tools write no raw line break inside a value (the escapes ``\n`` ``\r``), so the statement
    ends at the first ``;`` that ends a line: the values up to there are read at once and the
    result is kept only when the values tile that span exactly, their separators close it with
    ``);``, and every unquoted one is a literal. Anything else (a hand-written dump, an error) is
    read again value by value (:func:`parse_values_exact`), which gives the exact error.
    """
    m = _OPEN.match(buf, pos)
    if m is None:
        _fail(buf, pos, len(buf), "expected '(' to open the first row of VALUES")
    start = m.end()
    e = _END.search(buf, start)
    if e is not None:
        rows = _fast_rows(buf, start, e.start() + 1)
        if rows is not None:
            return rows, e.start() + 1
    return parse_values_exact(buf, pos)


def _fast_rows(buf, start: int, stop: int) -> list[tuple] | None:
    """The rows of ``buf[start:stop]`` (a VALUES list after its first ``(``, through the ``;``), or
    None when the text is not one the fast path reads (:func:`parse_values_exact` reads it then)."""
    if _c_values_rows is not None:
        return _c_values_rows(buf, start, stop, _other, Binary, _NOT_READ)
    return _py_rows(buf, start, stop)


_NOT_READ = object()  # what _other gives for a token that is no literal


def _other(v: bytes):
    """A token of the fast path that is not a plain string, number, NULL or 0x literal."""
    m = _VALUE.match(v + b",")
    return _NOT_READ if m is None else _literal(m)


def _py_rows(buf, start: int, stop: int) -> list[tuple] | None:
    """:func:`_fast_rows` in Python: one findall over the list, each value classified by its first byte."""
    pairs = _PAIR.findall(buf, start, stop)
    if not pairs or pairs[-1][1][-1:] != b";":
        return None
    if sum(map(len, chain.from_iterable(pairs))) != stop - start:
        return None  # something between the values that is not a value
    rows = []
    row = []
    add = row.append
    number = _NUMBER.match
    for v, sep in pairs:
        c = v[0]
        if c in _SPACE:
            v = v.lstrip(b" \t\r\n")
            c = v[0]
        if c == 39:  # '
            raw = v[1:-1]
            add(unescape(raw) if (b"\\" in raw or b"''" in raw) else raw)
        elif v.isdigit():
            add(v.decode("ascii"))
        elif c == 78:  # N
            if v != b"NULL":
                return None
            add(None)
        elif c == 48 and len(v) > 2 and v[1] == 120:  # 0x
            try:
                add(Binary(_hex(v[2:])))
            except ValueError:
                return None
        elif number(v):
            add(v.decode("ascii"))
        else:  # "...", X'', b'', 0b, an introducer, TRUE/FALSE, null
            value = _other(v)
            if value is _NOT_READ:
                return None
            add(value)
        if sep == b"," or sep[-1] == 44:
            continue
        rows.append(tuple(row))
        row = []
        add = row.append
    return rows


def parse_values_exact(buf, pos: int) -> tuple[list[tuple], int]:
    """:func:`parse_values` one value at a time, whatever the line breaks."""
    limit = len(buf)
    m = _OPEN.match(buf, pos)
    if m is None:
        _fail(buf, pos, limit, "expected '(' to open the first row of VALUES")
    pos = m.end()
    match = _VALUE.match
    rows = []
    row = []
    add = row.append
    while True:
        m = match(buf, pos)
        if m is None:
            _fail(buf, pos, limit, "expected a literal then ',' or ')'")
        add(_literal(m))
        pos = m.end()
        last = buf[pos - 1]
        if last == 44:  # ',': the next value of this row
            continue
        rows.append(tuple(row))
        if last == 59:  # ';': the statement ends
            return rows, pos
        row = []  # '(': the next row
        add = row.append


def _fail(buf, pos: int, limit: int, what: str):
    """Raise the error for a value that does not parse at ``pos``: truncated when the text up to
    ``limit`` could still be the start of a value (an unclosed quote, a cut number), else corrupt."""
    rest = bytes(buf[pos:min(limit, pos + 200)])
    body = rest.lstrip(b" \t\r\n")
    if not body or _could_continue(buf, pos, limit):
        raise TruncatedDump(f"the dump ends inside an INSERT's VALUES list ({len(rest)} bytes after the last "
                            "complete value)", offset=pos)
    raise CorruptDump(f"{what}, got {rest[:80]!r}", offset=pos)


# what the buffer may end with inside a VALUES list: a complete literal and part of its separator,
# or the start of a literal (an open quote, a cut number or keyword)
_PREFIX = re.compile(
    _WS + rb"(?:" + _LITERAL + _WS + rb"(?:,|\)" + _WS + rb"(?:," + _WS + rb")?)?"
    rb"|(?i:N(?:U(?:LL?)?)?|T(?:R(?:UE?)?)?|F(?:A(?:L(?:SE?)?)?)?)"
    rb"|'(?:[^'\\]++|\\.|'')*+\\?|\"(?:[^\"\\]++|\\.|\"\")*+\\?"
    rb"|[-+]?[0-9.]*+(?:[eE][-+]?[0-9]*+)?|0x[0-9A-Fa-f]*+|[Xx]'[0-9A-Fa-f]*+|[Bb]'[01]*+|0b[01]*+"
    rb"|_[A-Za-z0-9]*" + _WS + rb"(?:'(?:[^'\\]++|\\.|'')*+\\?|0x[0-9A-Fa-f]*+|[Xx]'[0-9A-Fa-f]*+)?"
    rb")\Z", re.S)


def _could_continue(buf, pos: int, limit: int) -> bool:
    """Is ``buf[pos:limit]`` (the rest of the buffer) a prefix of a value and its separator?"""
    if limit < len(buf):
        return False
    return _PREFIX.match(bytes(buf[pos:limit])) is not None
