"""Splitting a plain dump file in byte ranges, and its outline: the statements that are not data,
found without reading the INSERTs' values, from which the session state and the schemas at any
offset follow.

How a loader uses it (each step a task per byte range, the driver joining small results):

1. :func:`delimiter_lines` of every range -> :func:`delimiter_blocks` of the file (routine bodies);
2. :func:`outline` of every range from its :func:`next_statement_start` -> the file's outline;
3. each range's rows from the state the outline gives at its start
   (:func:`pipelines.snapshot.reader.reading_at`).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

from .errors import DumpError, TruncatedDump
from .session import DumpState
from .statements import GAP, INSERT_HEAD, INSERT_WORD, Statement, ident_text, read_statement

def next_statement_start(buf, offset: int, blocks: Iterable[tuple[int, int]] = ()) -> int | None:
    """The first statement boundary at or after ``offset``: the start of a line whose previous line
    ends a statement (``;`` last on it) or is a comment or blank line; None when there is none.

    Why that cannot be inside a string: mysqldump and mariadb-dump write every value with
    ``mysql_real_escape_string`` (as ``_binary '...'`` on MySQL for binary columns) or as hex
    (``--hex-blob``), which turn a line feed into ``\\n`` and a carriage return into ``\\r``
    (binary and BIT columns too), and ``SHOW CREATE TABLE``/``VIEW`` print defaults, comments and
    CHECK expressions the same way. So outside routine bodies a raw line feed is never inside a
    literal; it follows a row (``,`` at the end of the line, or ``INSERT ... VALUES`` on MariaDB),
    a column definition, or a finished statement, and only the last ends with ``;``. Routine,
    trigger and event bodies are the exception (the user's own text, line breaks inside strings):
    they sit in ``DELIMITER`` blocks, which the caller passes as ``blocks`` (from
    :func:`delimiter_blocks`) and which are stepped over. (An identifier with a line feed in it,
    which MySQL allows and nobody uses, would break the rule.)
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
        gap = GAP.match(buf, pos)
        at = gap.end()
        if at >= len(buf) or at >= stop:
            break
        if state.delimiter == b";" and INSERT_WORD.match(buf, at):
            head = INSERT_HEAD.match(buf, at)
            end = _DATA_END.search(buf, head.end() if head else at)
            if end is None:
                raise TruncatedDump("the dump ends inside an INSERT statement", offset=at).at(name)
            table = ident_text(head.group(3) or head.group(2), "utf-8") if head else "?"
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
