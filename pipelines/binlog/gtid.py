"""GTIDs and GTID sets as plain values: parse, print, contain, advance and subtract, for both
flavours. The decoder (PREVIOUS_GTIDS, GTID_LIST), bronze's sequence checks and the snapshot's
positions all read and write GTID sets here, in one spelling.

MySQL: a GTID is ``uuid:gno`` or, tagged (8.3+), ``uuid:tag:gno``. A set is printed the way the
server prints ``gtid_executed``: one entry per UUID, its untagged intervals first, then each tag
followed by its intervals, UUIDs and tags in lower case and sorted::

    3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7:domain_1:1-3:domain_2:8

The parser also takes the form with the UUID repeated per tag (``uuid:tag:1-3,uuid:tag2:8``), which
MySQL accepts as input too.

MariaDB: a GTID is ``domain-server-seq``; a GTID state (``gtid_slave_pos``, GTID_LIST) keeps the last
GTID logged per ``(domain, server)``.

>>> s = MysqlGtidSet.parse("3E11FA47-71CA-11E1-9E33-C80AA9429562:Domain_1:1-3:15,3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")
>>> str(s)
'3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:domain_1:1-3:15'
>>> s.contains("3e11fa47-71ca-11e1-9e33-c80aa9429562:domain_1:15"), s.contains("3e11fa47-71ca-11e1-9e33-c80aa9429562:6")
(True, False)
>>> str(MariadbGtidState.parse("1-2-5, 0-1-18"))
'0-1-18,1-2-5'
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

MARIADB, MYSQL = "mariadb", "mysql"

Interval = tuple[int, int]  # inclusive
Tsid = tuple[str, str | None]  # (uuid, tag or None), lower case

_UUID = r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
_TAG = r"[A-Za-z_][A-Za-z0-9_]{0,31}"
_MYSQL_ELEM = re.compile(rf"{_UUID}(?::(?:{_TAG}|\d+(?:-\d+)?))+\Z")
_MARIADB_SET = re.compile(r"\d+-\d+-\d+(?:,\d+-\d+-\d+)*\Z")


def gtid_flavor(flat: str) -> str | None:
    """The flavour of a GTID set's text (whitespace removed), or None when it is neither.

    >>> gtid_flavor("0-1-4,1-2-9"), gtid_flavor("3e11fa47-71ca-11e1-9e33-c80aa9429562:t:1-5"), gtid_flavor("x")
    ('mariadb', 'mysql', None)
    """
    if _MARIADB_SET.match(flat):
        return MARIADB
    if flat and all(_MYSQL_ELEM.match(e) for e in flat.split(",")):
        return MYSQL
    return None


def mysql_gtid(uuid: str, tag: str | None, gno: int) -> str:
    """One MySQL GTID: ``uuid:gno`` or ``uuid:tag:gno``."""
    return f"{uuid}:{tag}:{gno}" if tag else f"{uuid}:{gno}"


def merge_intervals(ivs) -> tuple[Interval, ...]:
    """Sorted, with touching and overlapping intervals joined.

    >>> merge_intervals([(7, 9), (1, 5), (6, 6)])
    ((1, 9),)
    """
    out: list[list[int]] = []
    for a, b in sorted(ivs):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def _subtract(ivs: tuple[Interval, ...], have: tuple[Interval, ...]) -> list[Interval]:
    out = []
    for a, b in ivs:
        cur = a  # both lists are sorted and merged
        for ha, hb in have:
            if hb < cur:
                continue
            if ha > b:
                break
            if ha > cur:
                out.append((cur, ha - 1))
            cur = hb + 1
            if cur > b:
                break
        if cur <= b:
            out.append((cur, b))
    return out


def _intervals_text(ivs) -> str:
    return ":".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ivs)


@dataclass(frozen=True)
class MysqlGtidSet:
    """``(uuid, tag)`` -> merged inclusive intervals; empty entries are dropped."""

    intervals: dict[Tsid, tuple[Interval, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, pairs) -> "MysqlGtidSet":
        """From ``((uuid, tag), intervals)`` pairs (a TSID may come more than once)."""
        acc: dict[Tsid, list[Interval]] = {}
        for (uuid, tag), ivs in pairs:
            acc.setdefault((uuid.lower(), tag.lower() if tag else None), []).extend(ivs)
        return cls({k: merge_intervals(v) for k, v in acc.items() if v})

    @classmethod
    def parse(cls, text: str) -> "MysqlGtidSet":
        """MySQL's GTID set text: ``uuid:1-5:7:tag:1-3`` (a tag applies to the intervals after it),
        entries separated by commas, whitespace ignored."""
        pairs = []
        for part in filter(None, (p.strip() for p in re.sub(r"\s+", "", text).split(","))):
            bits = part.split(":")
            tsid: Tsid = (bits[0], None)
            for b in bits[1:]:
                if b[:1].isdigit():
                    lo, _, hi = b.partition("-")
                    pairs.append((tsid, [(int(lo), int(hi or lo))]))
                else:
                    tsid = (bits[0], b)
        return cls.of(pairs)

    def __str__(self) -> str:
        by_uuid: dict[str, list[str]] = {}
        for (uuid, tag), ivs in sorted(self.intervals.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            by_uuid.setdefault(uuid, []).append((f"{tag}:" if tag else "") + _intervals_text(ivs))
        return ",".join(f"{u}:" + ":".join(chunks) for u, chunks in by_uuid.items())

    def contains(self, gtid: str) -> bool:
        """Is one GTID (``uuid[:tag]:gno``) in the set?"""
        key, _, gno = gtid.lower().rpartition(":")
        uuid, _, tag = key.partition(":")
        n = int(gno)
        return any(a <= n <= b for a, b in self.intervals.get((uuid, tag or None), ()))

    def add(self, gtids) -> "MysqlGtidSet":
        """This set plus GTIDs (``uuid[:tag]:gno``)."""
        pairs = list(self.intervals.items())
        for g in gtids:
            key, _, gno = g.rpartition(":")
            uuid, _, tag = key.partition(":")
            pairs.append(((uuid, tag or None), [(int(gno), int(gno))]))
        return MysqlGtidSet.of(pairs)

    def minus(self, other: "MysqlGtidSet") -> "MysqlGtidSet":
        """The GTIDs of this set that ``other`` lacks."""
        return MysqlGtidSet.of((k, _subtract(ivs, other.intervals.get(k, ()))) for k, ivs in self.intervals.items())


@dataclass(frozen=True)
class MariadbGtidState:
    """``(domain, server)`` -> the last sequence number logged."""

    last: dict[tuple[int, int], int] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> "MariadbGtidState":
        last = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            d, srv, n = part.split("-")
            last[(int(d), int(srv))] = int(n)
        return cls(last)

    @classmethod
    def of(cls, gtids) -> "MariadbGtidState":
        """From ``(domain, server, seq)`` triples (GTID_LIST's entries)."""
        return cls({(d, srv): n for d, srv, n in gtids})

    def __str__(self) -> str:
        return ",".join(f"{d}-{srv}-{n}" for (d, srv), n in sorted(self.last.items()))

    def contains(self, gtid: str) -> bool:
        """A state holds every GTID of its domains up to the domain's highest sequence number.

        >>> s = MariadbGtidState.parse("0-1-18,1-2-5")
        >>> s.contains("0-1-18"), s.contains("0-3-19"), s.contains("1-2-4"), s.contains("2-1-1")
        (True, False, True, False)
        """
        d, _srv, n = gtid.split("-")
        top = max((m for (dom, _), m in self.last.items() if dom == int(d)), default=-1)
        return int(n) <= top

    def add(self, gtids) -> "MariadbGtidState":
        """The state after GTIDs (``d-s-n``) were logged, in order: the last one per server counts."""
        last = dict(self.last)
        for g in gtids:
            d, srv, n = g.split("-")
            last[(int(d), int(srv))] = int(n)
        return MariadbGtidState(last)

    def missing_from(self, have: "MariadbGtidState") -> str | None:
        """What this state logged that ``have`` lacks, as ``d-s-first..last`` (``d-s-..last`` for a
        server ``have`` never saw), or None."""
        out = []
        for (d, srv), n in sorted(self.last.items()):
            seen = have.last.get((d, srv))
            if seen is None:
                out.append(f"{d}-{srv}-..{n}")
            elif n > seen:
                out.append(f"{d}-{srv}-{seen + 1}" + (f"..{n}" if n > seen + 1 else ""))
        return ", ".join(out) or None


def parse_gtid_set(flavor: str, text: str) -> MysqlGtidSet | MariadbGtidState:
    return (MariadbGtidState if flavor == MARIADB else MysqlGtidSet).parse(text)
