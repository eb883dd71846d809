"""Conformance: every row value of every real corpus file equals the
``mariadb-binlog -vvv`` decode (allowing for the quirks in the corpus README),
and the event counts equal FILES.tsv / MANIFEST.tsv."""
from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from binlog_text import parse_text_file
from conformance_check import check_rows, decoded_rows
from pipelines.binlog.columns import override_metas
from pipelines.binlog.values import canonical_text
from pipelines.binlog.constants import event_type_name
from pipelines.binlog.errors import BinlogError
from pipelines.binlog.stream import EventStream

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus"
MDB = CORPUS / "mariadb-10.11"
pytestmark = pytest.mark.skipif(not CORPUS.exists(), reason="../shared/corpus is not present")


def _mdb_files() -> list[str]:
    if not MDB.exists():
        return []
    return sorted(p.name for p in (MDB / "binlogs").glob("binlog.0000??"))


def _public_pairs() -> list[tuple[str, str]]:
    """(binlog, second-opinion text) for public files the tool decoded; the MySQL 8
    compressed files are held against the decode of their unpacked copies."""
    manifest = CORPUS / "public" / "MANIFEST.tsv"
    if not manifest.exists():
        return []
    pairs = []
    with open(manifest, newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            rel, status = row["file"], row["second_opinion_status"]
            if status.startswith("ok"):
                pairs.append((rel, rel + ".mariadb-binlog.txt", False))
            elif "TRANSACTION_PAYLOAD" in status:
                derived = "derived/" + rel.replace("/", "_") + ".unpacked"
                # the tool stops at MySQL JSON (type 245): hold us to the prefix it printed
                partial = _derived_status().get(derived, "").startswith("FAILED")
                if (CORPUS / "public" / (derived + ".mariadb-binlog.txt")).exists():
                    pairs.append((rel, derived + ".mariadb-binlog.txt", partial))
    return pairs


def _derived_status() -> dict[str, str]:
    with open(CORPUS / "public" / "derived" / "DERIVED.tsv", newline="") as fh:
        return {row["file"]: row["status"] for row in csv.DictReader(fh, delimiter="\t")}


# MariaDB 5.3 temporal columns carry no precision in the binlog: it comes from the schema
_OLDTIME_DECIMALS = {1: 0, 2: 3, 3: 6, 4: 0, 5: 2, 6: 6, 7: 0, 8: 4}


def _oldtime_hook(tm):
    return override_metas(tm, _OLDTIME_DECIMALS) if (tm.schema, tm.table) == ("corpus", "t_oldtime") else tm


@pytest.mark.parametrize("name", _mdb_files())
def test_mariadb_rows_equal_mariadb_binlog(name):
    path = MDB / "binlogs" / name
    check_rows(path, parse_text_file(path.with_name(name + ".txt")), table_map_hook=_oldtime_hook)


def test_mariadb53_temporal_rows_equal_final_state():
    """The tool cannot print these rows; their truth is the final table content."""
    table = {}
    for op, db, tbl, b, a, tm, cb, ca in decoded_rows(MDB / "binlogs" / "binlog.000017", _oldtime_hook):
        if (db, tbl) != ("corpus", "t_oldtime"):
            continue
        if b is not None:
            del table[b[0]]
        if a is not None:
            fsp = [None] + [_OLDTIME_DECIMALS[i] for i in range(1, 9)]
            table[a[0]] = [str(a[0])] + [
                "\\N" if v is None else canonical_text(v, fsp[i]) for i, v in enumerate(a) if i
            ]
    lines = (MDB / "final_state" / "corpus" / "t_oldtime.tsv").read_text().splitlines()[1:]
    assert [table[k] for k in sorted(table)] == [line.split("\t") for line in lines]


@pytest.mark.parametrize("rel,text,partial", _public_pairs(), ids=[p[0] for p in _public_pairs()])
def test_public_rows_equal_mariadb_binlog(rel, text, partial):
    check_rows(CORPUS / "public" / rel, parse_text_file(CORPUS / "public" / text), partial)


def _files_tsv() -> dict[str, Counter]:
    out = {}
    with open(MDB / "FILES.tsv", newline="") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            out[row["file"]] = Counter(
                {k: int(v) for k, v in (kv.split(":") for kv in row["event_types"].split(",") if kv)}
            )
    return out


_TSV_ALIASES = {  # FILES.tsv spells a few names differently
    "MARIA_WRITE_ROWS_COMPRESSED": "MARIA_WRITE_ROWS_COMPRESSED_V1",
    "MARIA_UPDATE_ROWS_COMPRESSED": "MARIA_UPDATE_ROWS_COMPRESSED_V1",
    "MARIA_DELETE_ROWS_COMPRESSED": "MARIA_DELETE_ROWS_COMPRESSED_V1",
}


@pytest.mark.parametrize("name", _mdb_files())
def test_mariadb_event_counts_equal_files_tsv(name):
    expected = Counter({_TSV_ALIASES.get(k, k): v for k, v in _files_tsv()[name].items()})
    got = Counter()
    with EventStream(MDB / "binlogs" / name, decode_rows=False) as s:
        for ev in s.events(flatten=False):
            got[event_type_name(ev.header.type_code)] += 1
    got = Counter({k.replace("WRITE_ROWS_V1", "WRITE_ROWS_V1"): v for k, v in got.items()})
    assert got == expected


@pytest.mark.parametrize(
    "rel",
    ["apecloud__mysql-binlog-connector-rust/non-binlog", "alibaba__canal/tsdb__mysql-bin.000001"],
)
def test_broken_public_files_fail_cleanly(rel):
    path = CORPUS / "public" / rel
    with pytest.raises(BinlogError) as e:
        with EventStream(path) as s:
            for _ in s.events():
                pass
    assert str(path) in str(e.value) and e.value.offset is not None
