"""Conformance: every row value of every real corpus file equals the
``mariadb-binlog -vvv`` decode (allowing for the quirks in the corpus README),
and the event counts equal FILES.tsv / MANIFEST.tsv."""
from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

import pytest

from binlog_text import parse_text_file
from conformance_check import check_rows
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


@pytest.mark.parametrize("name", _mdb_files())
def test_mariadb_rows_equal_mariadb_binlog(name):
    path = MDB / "binlogs" / name
    check_rows(path, parse_text_file(path.with_name(name + ".txt")))


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
