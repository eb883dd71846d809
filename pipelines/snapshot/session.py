"""The session a dump sets up as it runs, as the server would keep it: the current database,
session variables (``character_set_client`` from ``SET NAMES``, ``time_zone``, ``sql_mode``), user
variables (mysqldump saves and restores settings through them), the client's delimiter, and the
server flavor from the dump's header.

>>> state = DumpState()
>>> _apply_set(state, "SET NAMES utf8mb4"); _apply_set(state, "SET @saved = @@character_set_client, TIME_ZONE='+00:00'")
>>> state.client_charset, state.time_zone, state.user["saved"]
('utf8mb4', '+00:00', 'utf8mb4')
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipelines.schema.model import norm_charset

# connection charsets in which a multi-byte character can end with the byte of a quote or a
# backslash: the lexer needs the charset to find where a string ends, and this reader does not
UNSAFE_CHARSETS = frozenset({"big5", "cp932", "gbk", "sjis", "gb18030"})


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

    def apply(self, st) -> None:
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
    """A charset name as the dump writes it (quoted or not), by :func:`pipelines.schema.model.norm_charset`."""
    return norm_charset(cs.strip().strip("'\"`"))


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
