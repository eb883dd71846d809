"""Parser for ``mariadb-binlog -vvv --base64-output=decode-rows FILE`` output (our ground truth).

This is *not* a binlog decoder: it reads the text that MariaDB's own tool prints, so conformance tests
can compare the pipeline's decoder (``pipelines/binlog/``) against it.

``parse_binlog_text(text) -> list[dict]`` returns one dict per event, in file order::

    {"pos": 1853,              # from the "# at N" line (offset of the event in the file)
     "end_log_pos": 2175,      # offset just past the event
     "type": "Write_rows",     # see EVENT TYPES below
     "server_id": 1, "when": "261122  0:06:23", "crc32": 0xb698e367 | None,
     "info": "table id 22 flags: STMT_END_F",   # rest of the header line after the type
     "body": [...],            # the other printed lines of the event (not for rows events)
     ...type specific keys...}

Rows events (``Write_rows``/``Update_rows``/``Delete_rows`` and the ``*_compressed_rows`` variants)
have ``op`` ('insert'|'update'|'delete', from the header), ``db``, ``table``, ``table_id``, ``flags``,
``number_of_rows`` (from "# Number of rows: N") and ``rows``.

IMPORTANT quirk: mariadb-binlog buffers the rows events of one statement and prints all their row
images after the header of the LAST one (the event with ``flags: STMT_END_F``).  So the earlier events
of a multi-event statement have ``rows == []``, ``number_of_rows is None`` and ``stmt_end_pos`` (the
``pos`` of the statement's last event), while the last event holds every row image of the statement
(``number_of_rows`` counts them all) and ``stmt_events`` lists the ``pos`` of all the statement's rows
events.  A statement may even mix event types (a system-versioned UPDATE logs Update_rows +
Write_rows), so use each row's own ``op``.  Compare decoders per statement/transaction, not per event.
``rows`` is a list of::

    {"op": "update", "db": "corpus", "table": "t_int",
     "before": {1: "2", 2: "-1 (255)", ...} | None,     # "### WHERE" image, keyed by @N
     "after":  {1: "2", 2: "5", ...} | None,            # "### SET" image
     "before_types": {1: TypeComment(...), ...} | None,
     "after_types":  {...} | None}

The raw value text is exactly what was printed between ``@N=`` and the ``/* TYPE meta=...
nullable=... is_null=... */`` comment (trailing padding removed: FLOAT is printed ``%-20g``).  With
``binlog_row_image=MINIMAL`` the images hold only the logged columns.

Other event keys: ``Gtid``: ``gtid`` ("0-1-63"), ``domain_id``, ``seq_no``, ``gtid_flags`` ("trans",
"ddl", "cid=N trans", "ddl START ALTER", ...); ``Query``/``Query_compressed``/``Execute_load_query``:
``sql`` (statement text without the session SET lines), ``db`` (from a ``use`` line, else None),
``thread_id``, ``error_code``, ``xid``; ``Annotate_rows``: ``sql`` (the ``#Q>`` lines); ``Table_map``:
``db``, ``table``, ``table_id`` and - with ``--print-table-metadata`` - ``columns`` (list of
:class:`ColumnDecl`) and ``primary_key``; ``Xid``: ``xid``; ``XA_prepare``: ``xid`` (the X'..' text);
``Rotate``: ``next_file``, ``next_pos``; ``Gtid_list``: ``gtids``; ``Binlog_checkpoint``: ``file``;
``Format_desc``: ``server_version``.

EVENT TYPES (header text -> ``type``): "Start: binlog v 4" -> ``Format_desc``, "Gtid list" ->
``Gtid_list``, "Binlog checkpoint" -> ``Binlog_checkpoint``, "GTID" -> ``Gtid``, "Query",
"Query_compressed", "Annotate_rows", "Table_map", "Write_rows", "Update_rows", "Delete_rows",
"Write_compressed_rows", ..., "Xid = N" -> ``Xid``, "XID = X'..'" -> ``XA_prepare``, "Rotate to" ->
``Rotate``, "Stop", "Intvar", "Rand", "User_var", "Begin_load_query", "Execute_load_query"; anything else
-> the first word of the header text.

``parse_value(text, type_comment, unsigned=None)`` converts one printed value to Python (conventions
below; they match ``tests/workloads.py`` except where the text cannot carry the information: charset,
ENUM/SET member names, BINARY padding, exact FLOAT value - :mod:`workloads` finishes that job).

    NULL                         -> None
    TINYINT..LONGINT  "-1 (255)" -> int: the signed value, or the value in parentheses when
                                    ``unsigned=True`` (mariadb-binlog prints the unsigned reading in
                                    parentheses only when it differs, i.e. when the signed one is < 0)
    DECIMAL                      -> decimal.Decimal (scale as printed)
    FLOAT / DOUBLE               -> float (FLOAT is printed with only 6 significant digits!)
    YEAR                         -> int; the tool prints YEAR 0000 as 1900, mapped back to 0
    BIT(n)  b'0101'              -> int (printed big-endian, as stored)
    SET     b'00000001 10000000' -> int bitmask, bit i = member i+1.  The bytes are printed in storage
                                    order and SET is stored LITTLE-endian: that example (2 bytes) is
                                    0x8001 = members 1 and 16, not 0x0180
    ENUM    3                    -> int index (1-based; 0 = the '' error value)
    DATE    'YYYY:MM:DD'         -> datetime.date; zero/invalid dates -> str 'YYYY-MM-DD'
    TIME    '-838:59:59.5'       -> datetime.timedelta (negative allowed)
    DATETIME                     -> naive datetime.datetime; zero/invalid -> str as printed
    TIMESTAMP  1709210096.123    -> aware datetime.datetime in UTC; 0 -> str '0000-00-00 00:00:00[.000]'
    STRING/VARSTRING/*BLOB*/GEOMETRY 'a\\x09b' -> bytes (the text is byte-wise: bytes < 0x20 as
                                    ``\\xNN``, everything else raw, quotes and backslashes unescaped;
                                    CHAR/BINARY/INET6/UUID trailing pad is already stripped)

Caveat (inherent in the format): a value whose bytes literally contain ``\\x0a`` (backslash, 'x', two
hex digits of a byte < 0x20) cannot be told apart from an escaped control byte; we decode as escaped.
"""

from __future__ import annotations

import datetime as _dt
import re
import subprocess
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterable

try:  # tests/ is on sys.path under pytest; fall back to PATH lookup when used stand-alone
    from mariadb_server import MARIADB_BINLOG
except Exception:  # pragma: no cover
    import shutil

    MARIADB_BINLOG = shutil.which("mariadb-binlog") or shutil.which("mysqlbinlog")

__all__ = [
    "TypeComment",
    "ColumnDecl",
    "parse_type_comment",
    "parse_binlog_text",
    "parse_binlog_file",
    "parse_text_file",
    "run_mariadb_binlog",
    "parse_value",
    "unquote_bytes",
    "rows_events",
    "iter_rows",
    "UTC",
]

UTC = _dt.timezone.utc
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=UTC)


# --------------------------------------------------------------------------- type comments
@dataclass(frozen=True)
class TypeComment:
    """The ``/* TYPE(params) meta=N nullable=B is_null=B */`` comment after a printed value."""

    name: str  # "INT", "LONGINT", "VARSTRING", "BLOB/TEXT", "DECIMAL", "TIME", "ENUM", ...
    params: str | None  # text inside the parentheses: "256", "10,4", "1 byte", "3" (fsp); None if absent
    meta: int
    nullable: bool
    is_null: bool

    @property
    def full(self) -> str:
        return self.name if self.params is None else f"{self.name}({self.params})"

    @property
    def fsp(self) -> int:
        """Fractional-seconds precision for TIME/DATETIME/TIMESTAMP (0 when not printed)."""
        return int(self.params) if self.params and self.params.isdigit() else 0

    def __str__(self) -> str:
        return (
            f"/* {self.full} meta={self.meta} nullable={int(self.nullable)} "
            f"is_null={int(self.is_null)} */"
        )


_TYPE_COMMENT_RE = re.compile(
    r"/\* (?P<name>[A-Z][A-Za-z0-9_/]*)(?:\((?P<params>[^)]*)\))? meta=(?P<meta>\d+)"
    r" nullable=(?P<nullable>[01]) is_null=(?P<is_null>[01]) \*/"
)


def parse_type_comment(comment: str) -> TypeComment:
    m = _TYPE_COMMENT_RE.fullmatch(comment.strip())
    if not m:
        raise ValueError(f"not a mariadb-binlog type comment: {comment!r}")
    return TypeComment(
        m["name"], m["params"], int(m["meta"]), m["nullable"] == "1", m["is_null"] == "1"
    )


# "###   @3='x' /* VARSTRING(40) meta=40 nullable=1 is_null=0 */"  (value part is greedy: the
# comment is the LAST one on the line, so values containing "/* ... */" are still handled)
_COL_RE = re.compile(
    r"^###   @(?P<num>\d+)=(?P<value>.*?) ?(?P<comment>/\* [A-Z][A-Za-z0-9_/]*(?:\([^)]*\))? "
    r"meta=\d+ nullable=[01] is_null=[01] \*/)$"
)
_COL_NOCOMMENT_RE = re.compile(r"^###   @(?P<num>\d+)=(?P<value>.*)$")


@dataclass(frozen=True)
class ColumnDecl:
    """One column of a ``# Columns(...)`` block (``mariadb-binlog --print-table-metadata``)."""

    decl: str  # the printed declaration, e.g. "`tiu` TINYINT UNSIGNED"
    name: str | None  # only with binlog_row_metadata=FULL
    type: str  # "TINYINT UNSIGNED", "VARCHAR(64) NOT NULL CHARSET utf8mb4 COLLATE ..."
    unsigned: bool
    nullable: bool
    charset: str | None
    collation: str | None


def _parse_column_decl(decl: str) -> ColumnDecl:
    decl = decl.strip()
    name = None
    rest = decl
    if decl.startswith("`"):
        m = re.match(r"`((?:[^`]|``)*)`\s*(.*)$", decl, re.S)
        if m:
            name, rest = m.group(1).replace("``", "`"), m.group(2)
    # do not look inside ENUM/SET value lists for keywords
    head = re.sub(r"'(?:[^']|'')*'", "''", rest)
    cs = re.search(r"\bCHARSET (\S+)", head)
    coll = re.search(r"\bCOLLATE (\S+)", head)
    return ColumnDecl(
        decl=decl,
        name=name,
        type=rest,
        unsigned=bool(re.search(r"\bUNSIGNED\b", head)),
        nullable=not re.search(r"\bNOT NULL\b", head),
        charset=cs.group(1) if cs else None,
        collation=coll.group(1) if coll else None,
    )


# --------------------------------------------------------------------------- events
_HEADER_RE = re.compile(
    r"^#(?P<date>\d{6}) +(?P<time>\d{1,2}:\d\d:\d\d) server id (?P<server_id>\d+)"
    r" +end_log_pos (?P<end>\d+)(?: CRC32 0x(?P<crc>[0-9a-fA-F]+))? ?\t?(?P<rest>.*)$"
)
_AT_RE = re.compile(r"^# at (\d+)$")
_QNAME = r"`((?:[^`]|``)*)`"
_ROWS_HEAD_RE = re.compile(rf"^### (INSERT INTO|UPDATE|DELETE FROM) {_QNAME}\.{_QNAME}$")
_TABLE_MAP_RE = re.compile(rf"^Table_map: {_QNAME}\.{_QNAME} mapped to number (\d+)")
_ROWS_TYPE_RE = re.compile(r"^(Write|Update|Delete)_(rows|compressed_rows)(?:_v1)?:")
_OPS = {"INSERT INTO": "insert", "UPDATE": "update", "DELETE FROM": "delete"}
_OP_BY_PREFIX = {"Write": "insert", "Update": "update", "Delete": "delete"}
_SQL_SETUP_SUFFIX = "/*!*/;"


def _unq(name: str) -> str:
    return name.replace("``", "`")


def _classify(rest: str) -> tuple[str, str]:
    """(type, info) from the text after the header's end_log_pos/CRC part."""
    rest = rest.rstrip("\n")
    if rest.startswith("Start: "):
        return "Format_desc", rest[len("Start: ") :]
    if rest.startswith("Gtid list"):
        return "Gtid_list", rest[len("Gtid list") :].strip()
    if rest.startswith("Binlog checkpoint"):
        return "Binlog_checkpoint", rest[len("Binlog checkpoint") :].strip()
    if rest.startswith("GTID "):
        return "Gtid", rest[len("GTID ") :]
    if rest.startswith("Xid = "):
        return "Xid", rest[len("Xid = ") :]
    if rest.startswith("XID = "):
        return "XA_prepare", rest[len("XID = ") :]
    if rest.startswith("Rotate to "):
        return "Rotate", rest[len("Rotate to ") :]
    m = re.match(r"^([A-Za-z_]+)(?::|\t| |$)\s*(.*)$", rest, re.S)
    if m:
        return m.group(1), m.group(2)
    return rest.split(" ", 1)[0] if rest else "", rest


def _new_event(pos, m) -> dict:
    typ, info = _classify(m["rest"])
    return {
        "pos": pos,
        "end_log_pos": int(m["end"]),
        "type": typ,
        "server_id": int(m["server_id"]),
        "when": f"{m['date']} {m['time']}",
        "crc32": int(m["crc"], 16) if m["crc"] else None,
        "info": info,
        "body": [],
    }


def _finish_event(ev: dict, table_ids: dict) -> None:
    typ, info, body = ev["type"], ev["info"], ev.get("body", [])
    if typ == "" and body:  # e.g. Begin_load_query: header has no text, next line "#Begin_load_query: ..."
        m = re.match(r"^#([A-Za-z_]+):\s*(.*)$", body[0])
        if m:
            ev["type"], ev["info"] = m.group(1), m.group(2)
            typ = ev["type"]
    if "rows" in ev:
        ev.pop("_target", None)
        ev.pop("_cur", None)
        if ev.get("db") is None and ev.get("table_id") in table_ids:
            ev["db"], ev["table"] = table_ids[ev["table_id"]]
        return
    if typ == "Gtid":
        m = re.match(r"^(\d+)-(\d+)-(\d+)\s*(.*)$", info)
        if m:
            ev["gtid"] = f"{m.group(1)}-{m.group(2)}-{m.group(3)}"
            ev["domain_id"], ev["seq_no"] = int(m.group(1)), int(m.group(3))
            ev["gtid_flags"] = m.group(4)
    elif typ in ("Query", "Query_compressed", "Execute_load_query"):
        for k in ("thread_id", "exec_time", "error_code", "xid"):
            m = re.search(rf"\b{k}=(\d+)", info)
            if m:
                ev[k] = int(m.group(1))
        db = None
        start = 0
        while start < len(body) and body[start].endswith(_SQL_SETUP_SUFFIX):
            m = re.match(rf"^use {_QNAME}/\*!\*/;$", body[start])
            if m:
                db = _unq(m.group(1))
            start += 1
        end = len(body)
        for i in range(len(body) - 1, start - 1, -1):
            if body[i] == _SQL_SETUP_SUFFIX:
                end = i
                break
        ev["db"] = db
        ev["sql"] = "\n".join(l for l in body[start:end] if not l.startswith("# file_id:"))
    elif typ == "Annotate_rows":
        ev["sql"] = "\n".join(l[4:] if l.startswith("#Q> ") else l[3:] for l in body if l.startswith("#Q>"))
    elif typ == "Table_map":
        m = _TABLE_MAP_RE.match(f"Table_map: {info}")
        if m:
            ev["db"], ev["table"], ev["table_id"] = _unq(m.group(1)), _unq(m.group(2)), int(m.group(3))
            table_ids[ev["table_id"]] = (ev["db"], ev["table"])
        cols: list[str] = []
        in_cols = False
        for line in body:
            if line.startswith("# Columns("):
                in_cols = True
                line = "#         " + line[len("# Columns(") :]
            if in_cols and line.startswith("#         "):
                item = line[len("#         ") :]
                last = item.endswith(")") and not item.endswith(",")
                if item.endswith(",") or last:
                    item = item[:-1]
                cols.append(item)
                if last:
                    in_cols = False
            elif line.startswith("# Primary Key(") and line.endswith(")"):
                ev["primary_key"] = [c.strip() for c in line[len("# Primary Key(") : -1].split(",")]
        if cols:
            ev["columns"] = [_parse_column_decl(c) for c in cols]
    elif typ == "Xid":
        try:
            ev["xid"] = int(info.strip())
        except ValueError:
            pass
    elif typ == "XA_prepare":
        ev["xid"] = info.strip()
    elif typ == "Rotate":
        m = re.match(r"^(\S+)\s+pos: (\d+)", info)
        if m:
            ev["next_file"], ev["next_pos"] = m.group(1), int(m.group(2))
    elif typ == "Gtid_list":
        inner = info.strip().strip("[]")
        ev["gtids"] = [g.strip() for g in inner.split(",") if g.strip()]
    elif typ == "Binlog_checkpoint":
        ev["file"] = info.strip()
    elif typ == "Format_desc":
        m = re.search(r"server v (\S+)", info)
        if m:
            ev["server_version"] = m.group(1)


def _feed_rows_line(ev: dict, line: str) -> bool:
    """Handle a '###' line of a rows event; False if the line is not row data."""
    if line.startswith("###   @"):
        cur = ev.get("_cur")
        target = ev.get("_target")
        if cur is None or target is None:
            return False
        m = _COL_RE.match(line)
        if m:
            value, tc = m["value"].rstrip(" "), parse_type_comment(m["comment"])
        else:
            m = _COL_NOCOMMENT_RE.match(line)
            if not m:
                return False
            value, tc = m["value"], None
        num = int(m["num"])
        if cur[target] is None:
            cur[target] = {}
            cur[target + "_types"] = {}
        cur[target][num] = value
        cur[target + "_types"][num] = tc
        return True
    m = _ROWS_HEAD_RE.match(line)
    if m:
        op = _OPS[m.group(1)]
        row = {
            "op": op,
            "db": _unq(m.group(2)),
            "table": _unq(m.group(3)),
            "before": None,
            "after": None,
            "before_types": None,
            "after_types": None,
        }
        ev["rows"].append(row)
        ev["_cur"] = row
        ev["_target"] = "after" if op == "insert" else "before"
        if ev.get("db") is None:
            ev["db"], ev["table"] = row["db"], row["table"]
        if op == "insert":  # "### SET" follows; make sure an empty image is {} not None
            row["after"], row["after_types"] = {}, {}
        else:
            row["before"], row["before_types"] = {}, {}
        return True
    if line == "### WHERE":
        ev["_target"] = "before"
        return True
    if line == "### SET":
        ev["_target"] = "after"
        cur = ev.get("_cur")
        if cur is not None and cur["after"] is None:
            cur["after"], cur["after_types"] = {}, {}
        return True
    return False


def parse_binlog_text(text: str | bytes) -> list[dict]:
    """Parse ``mariadb-binlog -v[vv] --base64-output=decode-rows`` output into a list of events.

    ``bytes`` input is decoded as UTF-8 with ``surrogateescape`` (the output is byte-wise and not valid
    UTF-8 for e.g. latin1 columns); :func:`unquote_bytes` re-encodes the same way, so byte values
    survive exactly.  Lines are split on ``\\n`` only."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "surrogateescape")
    events: list[dict] = []
    pending: list[int] = []
    table_ids: dict[int, tuple[str, str]] = {}
    cur: dict | None = None
    last_end: int | None = None
    group: list[dict] = []  # rows events of the current statement (printed together at STMT_END_F)
    for line in text.split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        m = _AT_RE.match(line)
        if m:
            pending.append(int(m.group(1)))
            continue
        m = _HEADER_RE.match(line)
        if m:
            if cur is not None:
                _finish_event(cur, table_ids)
            pos = pending.pop(0) if pending else last_end
            cur = _new_event(pos, m)
            events.append(cur)
            last_end = cur["end_log_pos"]
            rm = _ROWS_TYPE_RE.match(m["rest"])
            if rm:
                cur["op"] = _OP_BY_PREFIX[rm.group(1)]
                cur["db"] = cur["table"] = None
                tm = re.search(r"table id (\d+)", cur["info"])
                cur["table_id"] = int(tm.group(1)) if tm else None
                fm = re.search(r"flags: (\S+)", cur["info"])
                cur["flags"] = fm.group(1) if fm else None
                cur["rows"] = []
                cur["number_of_rows"] = None
                del cur["body"]
                group.append(cur)
                if cur["flags"] and "STMT_END_F" in cur["flags"]:
                    cur["stmt_events"] = [e["pos"] for e in group]
                    for e in group[:-1]:
                        e["stmt_end_pos"] = cur["pos"]
                    group = []
            continue
        if cur is None:
            continue
        if "rows" in cur:
            if line.startswith("###") and _feed_rows_line(cur, line):
                continue
            if line.startswith("# Number of rows: "):
                cur["number_of_rows"] = int(line[len("# Number of rows: ") :])
                continue
            cur.setdefault("extra", []).append(line)
            continue
        if line in ("DELIMITER ;", "# End of log file") or line.startswith("ROLLBACK /* added by mysqlbinlog"):
            _finish_event(cur, table_ids)
            cur = None
            continue
        cur["body"].append(line)
    if cur is not None:
        _finish_event(cur, table_ids)
    return events


def run_mariadb_binlog(
    path: Path | str,
    *,
    print_table_metadata: bool = False,
    extra_args: Iterable[str] = (),
    check: bool = True,
    timeout: float = 300,
) -> bytes:
    """Run ``mariadb-binlog --no-defaults -vvv --base64-output=decode-rows [--print-table-metadata]
    FILE`` and return its stdout (bytes: the output is not always valid UTF-8).  With ``check`` a
    non-zero exit raises ``RuntimeError`` with stderr."""
    if MARIADB_BINLOG is None:
        raise RuntimeError("mariadb-binlog is not installed")
    cmd = [MARIADB_BINLOG, "--no-defaults", "-vvv", "--base64-output=decode-rows"]
    if print_table_metadata:
        cmd.append("--print-table-metadata")
    cmd += list(extra_args)
    cmd.append(str(path))
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} failed (rc={proc.returncode}):\n{proc.stderr.decode('utf-8', 'replace')}"
        )
    return proc.stdout


def parse_binlog_file(path: Path | str, **kwargs) -> list[dict]:
    """``parse_binlog_text(run_mariadb_binlog(path, **kwargs))``."""
    return parse_binlog_text(run_mariadb_binlog(path, **kwargs))


def parse_text_file(path: Path | str) -> list[dict]:
    """Parse a saved ``mariadb-binlog`` text file (e.g. ``corpus/.../binlog.000002.txt``)."""
    return parse_binlog_text(Path(path).read_bytes())


def rows_events(events: list[dict]) -> list[dict]:
    return [e for e in events if "rows" in e]


def iter_rows(events: list[dict]):
    """All row images of all rows events, in order (each a dict as described in the module doc)."""
    for e in events:
        for r in e.get("rows", ()):
            yield r


# --------------------------------------------------------------------------- values
_INT_TYPES = {"TINYINT", "SHORTINT", "MEDIUMINT", "INT", "LONGINT"}
_STRING_TYPES = {
    "STRING",
    "VARSTRING",
    "TINYBLOB/TINYTEXT",
    "BLOB/TEXT",
    "MEDIUMBLOB/MEDIUMTEXT",
    "LONGBLOB/LONGTEXT",
    "GEOMETRY",
    "JSON",
}
_INT_RE = re.compile(r"^(-?\d+)(?: \((\d+)\))?$")
_CTRL_ESCAPE_RE = re.compile(rb"\\x([01][0-9a-f])")
_TIME_RE = re.compile(r"^(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")
_DATETIME_RE = re.compile(r"^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")
_DATE_RE = re.compile(r"^(\d{4}):(\d\d):(\d\d)$")


def unquote_bytes(text: str) -> bytes:
    """``'ab\\x09c'`` (as printed by mariadb-binlog) -> ``b'ab\\tc'``.  Only ``\\xNN`` escapes of bytes
    below 0x20 exist in the format (lowercase hex); quotes and backslashes are printed raw."""
    if len(text) < 2 or text[0] != "'" or text[-1] != "'":
        raise ValueError(f"not a quoted mariadb-binlog string: {text[:80]!r}")
    raw = text[1:-1].encode("utf-8", "surrogateescape")
    return _CTRL_ESCAPE_RE.sub(lambda m: bytes([int(m.group(1), 16)]), raw)


def _frac_us(frac: str | None) -> int:
    return int((frac or "").ljust(6, "0")[:6] or 0)


def parse_value(text: str | None, type_comment: TypeComment | str | None, *, unsigned: bool | None = None) -> Any:
    """Convert one printed value (see the module docstring for the conventions).

    ``type_comment`` is a :class:`TypeComment`, the comment text, or None (then only NULL, ints,
    quoted strings are recognised and anything else is returned unchanged)."""
    if isinstance(type_comment, str):
        type_comment = parse_type_comment(type_comment)
    if text is None or text == "NULL" or (type_comment is not None and type_comment.is_null):
        return None
    name = type_comment.name if type_comment is not None else None

    if name in _INT_TYPES or (name is None and _INT_RE.match(text)):
        m = _INT_RE.match(text)
        if not m:
            raise ValueError(f"bad integer text {text!r}")
        if unsigned and m.group(2) is not None:
            return int(m.group(2))
        return int(m.group(1))
    if name is None:
        return unquote_bytes(text) if text.startswith("'") else text
    if name == "DECIMAL":
        return Decimal(text)
    if name in ("FLOAT", "DOUBLE"):
        return float(text)
    if name == "YEAR":
        y = int(text)
        return 0 if y == 1900 else y
    if name in ("BIT", "SET"):
        if not (text.startswith("b'") and text.endswith("'")):
            raise ValueError(f"bad bit text {text!r}")
        bits = text[2:-1]
        value = int(bits, 2) if bits else 0
        if name == "SET":  # bytes printed in storage order, and SET is stored little-endian
            nbytes = (len(bits) + 7) // 8
            value = int.from_bytes(value.to_bytes(nbytes, "big"), "little")
        return value
    if name == "ENUM":
        return int(text)
    if name in ("DATE", "NEWDATE"):
        m = _DATE_RE.match(text.strip("'"))
        if not m:
            raise ValueError(f"bad DATE text {text!r}")
        y, mo, d = (int(g) for g in m.groups())
        try:
            return _dt.date(y, mo, d)
        except ValueError:
            return f"{m.group(1)}-{m.group(2)}-{m.group(3)}"
    if name == "TIME":
        m = _TIME_RE.match(text.strip("'"))
        if not m:
            raise ValueError(f"bad TIME text {text!r}")
        sign, h, mi, s, frac = m.groups()
        td = _dt.timedelta(hours=int(h), minutes=int(mi), seconds=int(s), microseconds=_frac_us(frac))
        return -td if sign else td
    if name == "DATETIME":
        body = text.strip("'")
        m = _DATETIME_RE.match(body)
        if not m:
            raise ValueError(f"bad DATETIME text {text!r}")
        y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
        try:
            return _dt.datetime(y, mo, d, h, mi, s, _frac_us(m.group(7)))
        except ValueError:
            return body
    if name == "TIMESTAMP":
        sec, _, frac = text.partition(".")
        if int(sec) == 0 and not int(frac or "0"):
            return "0000-00-00 00:00:00" + (("." + "0" * len(frac)) if frac else "")
        return _EPOCH + _dt.timedelta(seconds=int(sec), microseconds=_frac_us(frac or None))
    if name in _STRING_TYPES or text.startswith("'"):
        return unquote_bytes(text)
    return text
