"""Where a snapshot sits in the binlogs: read from the dump's own header lines, from a mydumper
``metadata`` file, or from what the user gives (``--position FILE:POS``, ``--gtid SET``).

The forms (what each tool writes, commented with ``-- `` or not):

=====================================================  ==============================================
header                                                 written by
=====================================================  ==============================================
``CHANGE MASTER TO MASTER_LOG_FILE='f', MASTER_LOG_POS=n;``  ``--master-data=1|2`` (MySQL < 8.0.23, MariaDB)
``CHANGE REPLICATION SOURCE TO SOURCE_LOG_FILE='f', SOURCE_LOG_POS=n;``  MySQL 8.0.23+ ``--source-data``
``CHANGE MASTER '' TO MASTER_LOG_FILE=...`` after a         MariaDB ``--dump-slave=1|2`` (the coordinates
``SHOW SLAVE STATUS`` comment                           are the *source's*, see ``of_source``)
the same with ``... (the source of this replica)``      MySQL ``--dump-slave`` / ``--dump-replica``
``SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ 'set';``     MySQL with GTIDs (``--set-gtid-purged``); the set
                                                       may span lines
``SET GLOBAL gtid_slave_pos='d-s-n,...';``             MariaDB ``--gtid`` (in the header) or after
                                                       ``--master-data`` (at the *end* of the file)
``[master]`` / ``[source]``: ``File =``, ``Position =``, mydumper ``metadata`` (0.14.1+); older ones
``Executed_Gtid_Set =``; ``SHOW MASTER STATUS:`` block  write ``Log:``/``Pos:``/``GTID:`` lines
=====================================================  ==============================================

A dump's position lines are in its first few kilobytes, except MariaDB's deferred
``gtid_slave_pos`` (written after the data): :func:`read_position` reads the head and, for a file
that can seek, the tail. GTID sets are kept as text, whitespace removed and the syntax checked;
their syntax and algebra live in :mod:`pipelines.binlog.gtid`.

>>> p = dump_position(b"-- CHANGE MASTER TO MASTER_LOG_FILE='binlog.000004', MASTER_LOG_POS=56962;\\n")
>>> p.file, p.pos, p.form, p.commented
('binlog.000004', 56962, 'master-data', True)
>>> parse_user_position("binlog.000004:56962").pos
56962
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

from pipelines.binlog.gtid import MARIADB, MYSQL, gtid_flavor

from .errors import CorruptDump, DumpError, NoPosition

HEAD_BYTES = 64 * 1024  # the header (SET lines, CHANGE MASTER, GTID_PURGED) ends well before this
TAIL_BYTES = 16 * 1024  # MariaDB's deferred gtid_slave_pos, then the closing SET lines



@dataclass(frozen=True)
class SnapshotPosition:
    """The binlog coordinates a snapshot corresponds to.

    ``file``/``pos``: the first binlog event *not* in the snapshot (None when only a GTID set is
    known); ``gtid``: the GTID set text the snapshot includes (MySQL: ``uuid:1-5,...``, every GTID
    executed; MariaDB: ``domain-server-seq,...``, the last GTID per domain), None when unknown;
    ``gtid_flavor``: ``mysql`` | ``mariadb`` for ``gtid``; ``form``: which header it came from
    (``master-data``, ``source-data``, ``dump-slave``, ``gtid-purged``, ``gtid-slave-pos``,
    ``mydumper``, ``user``); ``commented``: the CHANGE line was a ``-- `` comment (``=2``);
    ``of_source``: the coordinates are in the binlogs of the dumped server's *source*
    (``--dump-slave``/``--dump-replica``, a mydumper replica section), not its own.
    """

    file: str | None
    pos: int | None
    gtid: str | None = None
    gtid_flavor: str | None = None
    form: str = "user"
    commented: bool = False
    of_source: bool = False

    def text(self) -> str:
        """``binlog.000004:56962`` and/or the GTID set, as a user writes them."""
        parts = [f"{self.file}:{self.pos}"] if self.file is not None else []
        if self.gtid:
            parts.append(f"gtid {self.gtid}")
        return " ".join(parts) or "(none)"


# -- GTID sets -------------------------------------------------------------------------------


def normalize_gtid(text: str, where: str = "GTID set") -> tuple[str | None, str | None]:
    """``(set text without whitespace, flavor)``; ``(None, None)`` for an empty set. A MySQL set may
    span lines (mysqldump copies ``gtid_executed`` as the server prints it) and, commented, carry
    ``--`` on its continuation lines.

    >>> normalize_gtid("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5,\\n-- 4F11FA47-71CA-11E1-9E33-C80AA9429562:7")
    ('3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5,4F11FA47-71CA-11E1-9E33-C80AA9429562:7', 'mysql')
    >>> normalize_gtid("0-1-4, 1-2-9")
    ('0-1-4,1-2-9', 'mariadb')
    """
    flat = re.sub(r"--|\s+", "", text)
    if not flat:
        return None, None
    flavor = gtid_flavor(flat)
    if flavor is not None:
        return flat, flavor
    raise CorruptDump(f"{where} {text.strip()[:200]!r} is neither a MySQL (uuid:1-5) nor a MariaDB (0-1-42) GTID set")


# -- the user's forms -------------------------------------------------------------------------

def parse_user_position(text: str) -> SnapshotPosition:
    """``--position FILE:POS``.

    >>> parse_user_position("mysql-bin.000012:4").file
    'mysql-bin.000012'
    """
    file, sep, pos = text.strip().rpartition(":")
    if not sep or not file or not pos.isdigit() or "/" in file:
        raise DumpError(f"--position {text!r}: expected FILE:POS with a binlog file name and a byte offset, "
                        "e.g. --position binlog.000004:56962")
    return SnapshotPosition(file, int(pos), form="user")


def parse_user_gtid(text: str) -> SnapshotPosition:
    """``--gtid SET`` (MySQL ``uuid:1-100,...`` or MariaDB ``0-1-42,...``)."""
    try:
        gtid, flavor = normalize_gtid(text, "--gtid")
    except DumpError as e:
        raise DumpError(e.message) from None
    if gtid is None:
        raise DumpError("--gtid: the GTID set is empty")
    return SnapshotPosition(None, None, gtid, flavor, form="user")


# -- dump headers ----------------------------------------------------------------------------

_STRING = r"'(?:[^'\\]|\\.|'')*'"
_CHANGE = re.compile(
    rf"^(?P<comment>--[ \t]*)?CHANGE[ \t]+(?P<what>MASTER|REPLICATION[ \t]+SOURCE)(?:[ \t]+(?P<conn>{_STRING}))?"
    rf"[ \t]+TO[ \t]+(?P<opts>(?:{_STRING}|[^;'\n])*);",
    re.IGNORECASE | re.MULTILINE)
_OPTION = re.compile(rf"(\w+)[ \t]*=[ \t]*({_STRING}|[^,\s;]+)")
_CHANNEL = re.compile(rf"FOR[ \t]+CHANNEL[ \t]+({_STRING})", re.IGNORECASE)
_GTID_PURGED = re.compile(
    r"SET[ \t]+@@GLOBAL\.GTID_PURGED[ \t]*=[ \t]*(?:/\*!\d+[ \t]*'\+'[ \t]*\*/[ \t]*)?'(?P<set>[^']*)'",
    re.IGNORECASE)
_GTID_SLAVE_POS = re.compile(r"SET[ \t]+GLOBAL[ \t]+gtid_slave_pos[ \t]*=[ \t]*'(?P<set>[^']*)'", re.IGNORECASE)
# the comment blocks mysqldump writes before the coordinates of a replica's source
_REPLICA_NOTE = re.compile(r"SHOW SLAVE STATUS|SHOW REPLICA STATUS|source of this replica|dump-slave|dump-replica",
                           re.IGNORECASE)


def _unquote(value: str) -> str:
    if value[:1] == "'" and value[-1:] == "'":
        return re.sub(r"\\(.)|''", lambda m: m.group(1) or "'", value[1:-1])
    return value


def _comments_before(text: str, at: int) -> str:
    """The comment lines just above ``at`` (blank lines between them allowed), up to the statement
    before them: the note mysqldump writes over a CHANGE line."""
    lines = text[max(0, at - 2000):at].split("\n")[:-1]
    note = []
    for line in reversed(lines):
        if line.strip() and not line.lstrip().startswith("--"):
            break
        note.append(line)
    return "\n".join(reversed(note))


@dataclass(frozen=True)
class _Found:
    offset: int
    position: SnapshotPosition


def _change_lines(text: str, base: int) -> list[_Found]:
    found = []
    prev_end, prev_of_source = None, False
    for m in _CHANGE.finditer(text):
        opts = {k.upper(): _unquote(v) for k, v in _OPTION.findall(m.group("opts"))}
        file = opts.get("MASTER_LOG_FILE", opts.get("SOURCE_LOG_FILE"))
        pos = opts.get("MASTER_LOG_POS", opts.get("SOURCE_LOG_POS"))
        if file is None or pos is None:
            continue  # CHANGE MASTER TO MASTER_USE_GTID=slave_pos: the GTID follows
        if not pos.isdigit():
            raise CorruptDump(f"binlog position {pos!r} in {m.group(0)[:200]!r} is not a number", offset=base + m.start())
        of_source = m.group("conn") is not None or bool(_REPLICA_NOTE.search(_comments_before(text, m.start())))
        if prev_end is not None and all(not line.strip() or line.lstrip().startswith("--")
                                        for line in text[prev_end:m.start()].split("\n")[1:]):
            of_source = of_source or prev_of_source  # one block of CHANGE lines: a replica's channels
        prev_end, prev_of_source = m.end(), of_source
        source = "SOURCE" in m.group("what").upper()
        form = "dump-slave" if of_source else ("source-data" if source else "master-data")
        found.append(_Found(base + m.start(), SnapshotPosition(
            file, int(pos), form=form, commented=m.group("comment") is not None, of_source=of_source)))
    return found


def _gtid_lines(text: str, base: int) -> list[_Found]:
    found = []
    for rx, form in ((_GTID_PURGED, "gtid-purged"), (_GTID_SLAVE_POS, "gtid-slave-pos")):
        for m in rx.finditer(text):
            gtid, flavor = normalize_gtid(m.group("set"), f"{form} at offset {base + m.start()}")
            line_start = text.rfind("\n", 0, m.start()) + 1
            commented = text[line_start:m.start()].lstrip().startswith("--")
            found.append(_Found(base + m.start(), SnapshotPosition(None, None, gtid, flavor, form, commented)))
    return found


def dump_position(head: bytes, tail: bytes = b"", *, tail_offset: int | None = None,
                  name: str | None = None) -> SnapshotPosition:
    """The position a dump records, from its first bytes (``head``) and, when read, its last ones
    (``tail``, starting at byte ``tail_offset``). Raises :class:`NoPosition` when there is none.

    A dump of one server (``--master-data``/``--source-data``) wins over the coordinates of its
    source (``--dump-slave``) when both are there; two different coordinates of one form (a
    multi-source replica's channels) are refused: the loader cannot choose, the user can
    (``--position``). GTID sets found are attached; a file that has only a GTID set gives a
    position with ``file`` None.
    """
    texts = [(head.decode("latin-1"), 0)]
    if tail:
        if tail_offset is None:
            raise ValueError("dump_position: a tail needs its tail_offset")
        texts.append((tail.decode("latin-1"), tail_offset))
    changes, gtids = [], []
    try:
        for text, base in texts:
            changes += _change_lines(text, base)
            gtids += _gtid_lines(text, base)
    except DumpError as e:
        raise e.at(name)
    own = [f for f in changes if not f.position.of_source] or changes
    coords = {(f.position.file, f.position.pos) for f in own}
    if len(coords) > 1:
        raise DumpError("the dump records several binlog positions (" + ", ".join(
            f"{f.position.file}:{f.position.pos} at offset {f.offset}" for f in own)
            + "); choose one with --position FILE:POS", file=name, offset=own[0].offset)
    sets = {(f.position.gtid, f.position.gtid_flavor) for f in gtids if f.position.gtid}
    if len(sets) > 1:
        raise DumpError("the dump records several GTID sets (" + ", ".join(sorted(s for s, _ in sets))
                        + "); choose one with --gtid SET", file=name, offset=gtids[0].offset)
    gtid, flavor = next(iter(sets)) if sets else (None, None)
    if own:
        return replace(own[0].position, gtid=gtid, gtid_flavor=flavor)
    if gtid is not None:
        g = next(f for f in gtids if f.position.gtid)
        return g.position
    raise NoPosition(file=name, offset=0)


# -- mydumper ---------------------------------------------------------------------------------

_INI_SECTION = re.compile(r"^\[(?P<name>[^\]]*)\][ \t]*$")
_INI_KEY = re.compile(r"^(?P<key>[A-Za-z_][\w ]*?)[ \t]*=[ \t]*(?P<value>.*?)[ \t]*$")
_OLD_BLOCK = re.compile(r"^(?P<name>SHOW (?:MASTER|SLAVE) STATUS):[ \t]*$")
_OLD_KEY = re.compile(r"^[ \t]+(?P<key>\w+):[ \t]*(?P<value>.*?)[ \t]*$")


def _strip_quotes(v: str) -> str:
    return v[1:-1] if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'" else v


def mydumper_position(text: str, name: str = "metadata") -> SnapshotPosition:
    """The position in a mydumper ``metadata`` file: the ``[master]``/``[source]`` section (0.14.1+:
    ``File``, ``Position``, ``Executed_Gtid_Set``; with ``--source-data``: ``SOURCE_LOG_FILE``,
    ``SOURCE_LOG_POS``, ``executed_gtid_set``) or the older ``SHOW MASTER STATUS:`` block
    (``Log:``, ``Pos:``, ``GTID:``). A replica's ``SHOW SLAVE STATUS`` / ``[replication...]``
    sections are the source's coordinates: used only when the dumped server logged nothing itself.

    >>> mydumper_position("[master]\\nFile = mysql-bin.000017\\nPosition = 241149225\\nExecuted_Gtid_Set = \\n").pos
    241149225
    """
    sections: dict[str, dict[str, str]] = {}
    current = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _INI_SECTION.match(line) or _OLD_BLOCK.match(line)
        if m:
            current = sections.setdefault(m.group("name").strip().lower(), {})
            continue
        m = _INI_KEY.match(line) or _OLD_KEY.match(line)
        if m and current is not None:
            current.setdefault(m.group("key").strip().lower(), _strip_quotes(m.group("value")))
    for section, of_source in (("master", False), ("source", False), ("show master status", False),
                               *((s, True) for s in sections if s.startswith(("replication", "show slave status")))):
        kv = sections.get(section)
        if not kv:
            continue
        file = kv.get("file", kv.get("source_log_file", kv.get("log")))
        pos = kv.get("position", kv.get("source_log_pos", kv.get("pos")))
        gtid_text = kv.get("executed_gtid_set", kv.get("gtid", ""))
        gtid, flavor = normalize_gtid(gtid_text, f"{name} [{section}] GTID set") if gtid_text else (None, None)
        if file and pos:
            if not pos.isdigit():
                raise CorruptDump(f"[{section}] position {pos!r} is not a number", file=name)
            return SnapshotPosition(file, int(pos), gtid, flavor, "mydumper", of_source=of_source)
        if gtid:
            return SnapshotPosition(None, None, gtid, flavor, "mydumper", of_source=of_source)
    raise NoPosition(file=name)
