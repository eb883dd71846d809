"""Safe, reversible mapping of MySQL database/table names to warehouse paths.

The silver contract is ``<warehouse>/silver/<database>/<table>``. MySQL names may
hold almost any character (quoted identifiers allow everything but NUL), so each
name is escaped into exactly one path component that can never leave its folder:

====================================  ============================================
character                             written as
====================================  ============================================
``/`` ``\\`` ``:``                   ``~2F`` ``~5C`` ``~3A``
control characters (U+0000-U+001F,    ``~XX`` (two upper-case hex digits)
U+007F)
``%`` ``[`` ``]`` ``^`` ``|``         ``~25`` ``~5B`` ``~5D`` ``~5E`` ``~7C``
``~`` (the escape character itself)   ``~7E``
``.`` first, or right after a ``.``   ``~2E`` (so ``.``, ``..``, ``.hidden`` and
                                      ``a..b`` never appear literally)
everything else, including spaces     itself
and any Unicode letter
====================================  ============================================

``~`` rather than ``%`` is the escape character because the Delta Lake Rust
engine percent-decodes table paths (``a%2Fb`` would be read from ``a/b``), and it
rejects ``[ ] ^ |`` in a path; those are escaped for the same reason.
Plain names (letters, digits, ``_``, ``$``, spaces, Unicode) map to themselves:

>>> silver_table_path("/wh", "shop", "orders")
'/wh/silver/shop/orders'
>>> silver_table_path("/wh", "shop", "../etc")
'/wh/silver/shop/~2E~2E~2Fetc'
>>> unescape_name("~2E~2E~2Fetc")
'../etc'
"""
from __future__ import annotations

import os
import re

SILVER_DIR = "silver"
ESCAPE = "~"
NAME_MAX_BYTES = 255  # one path component on ext4/xfs/apfs

_ALWAYS_ESCAPED = frozenset("/\\:%[]^|~" + "".join(map(chr, range(0x20))) + "\x7f")
_ESCAPED_RE = re.compile(r"~([0-9A-Fa-f]{2})")


def escape_name(name: str) -> str:
    """One path component for a database or table name (see the module table).

    >>> escape_name("tëst_表 name")
    'tëst_表 name'
    >>> escape_name("a/b%c")
    'a~2Fb~25c'
    """
    if not isinstance(name, str):
        raise TypeError(f"a database or table name must be a str, got {type(name).__name__}: {name!r}")
    if name == "":
        raise ValueError("an empty database or table name cannot be mapped to a path")
    out = []
    prev = ""
    for ch in name:
        if ch in _ALWAYS_ESCAPED or (ch == "." and (prev == "" or prev == ".")):
            out.append(f"{ESCAPE}{ord(ch):02X}")
        else:
            out.append(ch)
        prev = ch
    escaped = "".join(out)
    size = len(escaped.encode("utf-8", "surrogatepass"))
    if size > NAME_MAX_BYTES:
        raise ValueError(
            f"name {name!r} needs {size} bytes as a path component, more than the {NAME_MAX_BYTES} a file "
            "system allows (MySQL names are at most 64 characters of the Basic Multilingual Plane)"
        )
    return escaped


def unescape_name(component: str) -> str:
    """The name a path component stands for; the inverse of :func:`escape_name`.

    >>> unescape_name("a~2Fb~25c")
    'a/b%c'
    """
    return _ESCAPED_RE.sub(lambda m: chr(int(m.group(1), 16)), component)


def silver_table_path(warehouse, db: str, table: str) -> str:
    """``<warehouse>/silver/<db>/<table>`` with both names escaped by :func:`escape_name`.

    The result always lies two levels below ``<warehouse>/silver``, whatever the names hold.

    >>> silver_table_path("/wh", "shop", ".hidden")
    '/wh/silver/shop/~2Ehidden'
    """
    if warehouse is None or str(warehouse) == "":
        raise ValueError("silver_table_path needs a warehouse path, got an empty value")
    root = os.path.join(os.fspath(warehouse), SILVER_DIR)
    path = os.path.join(root, escape_name(db), escape_name(table))
    # Belt and braces: the escaping above makes this impossible, keep it impossible.
    if os.path.dirname(os.path.dirname(path)) != root:
        raise ValueError(f"table path {path!r} for {db!r}.{table!r} escapes {root!r}")
    return path


def silver_table_name(path) -> tuple[str, str]:
    """``(db, table)`` of a silver table folder: the inverse of :func:`silver_table_path`.

    >>> silver_table_name("/wh/silver/shop/a~2Fb")
    ('shop', 'a/b')
    """
    path = os.path.normpath(os.fspath(path))
    table = os.path.basename(path)
    db = os.path.basename(os.path.dirname(path))
    return unescape_name(db), unescape_name(table)
