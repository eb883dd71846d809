"""Bad input through the bronze step: real binlogs written by the suite's MariaDB server,
damaged on purpose (:mod:`binlog_surgery`), a real Spark session and real Delta tables.

One folder holds one damaged file of each kind, in one binlog series, so a single
run shows everything at once: what lands, what is quarantined (with the raw bytes,
file and offset), what the manifest records, and that a re-run reads nothing again.
"""
from __future__ import annotations

import contextlib
import datetime
import io
import json
import shutil
import tracemalloc
from pathlib import Path

import deltalake
import pytest

from binlog_surgery import (
    IGNORABLE,
    LENGTH_FIELD,
    NEXT_POS_FIELD,
    events,
    flip_byte,
    has_checksum,
    insert_event,
    make_event,
    remove_events,
)
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines import bronze, delta_io, quarantine, state
from pipelines.bronze import decode as bronze_decode
from pipelines.binlog.constants import EventType
from pipelines.binlog.txindex import scan
from pipelines.bronze.schema import DECODER_VERSION
from pipelines.config import load_config

pytestmark = [pytest.mark.spark, pytest.mark.mariadb]

TXS_PER_FILE = 4
ROWS_PER_TX = 2
WRITE_ROWS = (EventType.WRITE_ROWS_V1, EventType.WRITE_ROWS)  # MariaDB writes v1
CORPUS_SAMPLES = ("public/alibaba__canal/tsdb__mysql-bin.000001",
                  "public/apecloud__mysql-binlog-connector-rust/non-binlog")


# -- a binlog series written by the server ------------------------------------------------------------


def write_series(srv, db: str, n_files: int) -> list[tuple[str, bytes, list[list[int]]]]:
    """``n_files`` consecutive binlog files, each with ``TXS_PER_FILE`` transactions of
    ``ROWS_PER_TX`` inserted rows: ``(name, bytes, ids inserted by each transaction)``."""
    srv.sql(f"CREATE DATABASE `{db}`; CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(40))")
    srv.flush_logs()
    out = []
    for k in range(n_files):
        path = srv.binlog_files()[-1]
        ids = [[1000 * (k + 1) + 10 * i + j for j in range(ROWS_PER_TX)] for i in range(TXS_PER_FILE)]
        script = "".join(f"INSERT INTO `{db}`.t VALUES {_values(tx)};\n" for tx in ids)
        srv.sql(script + "FLUSH BINARY LOGS;")
        out.append((path.name, path.read_bytes(), ids))
    return out


def _values(ids: list[int]) -> str:
    return ", ".join(f"({x}, 'v{x}')" for x in ids)


def tx_events(data: bytes, tx_no: int):
    """The framed events of the ``tx_no``-th transaction of a file."""
    tx = scan(data).transactions[tx_no]
    return tx, [e for e in events(data) if tx.begin_pos <= e.pos < tx.end_pos]


def first_of(evs, *codes):
    return next(e for e in evs if e.type_code in codes)


def make_cfg(tmp_path: Path, folder: Path, **extra):
    over = {"input": str(folder), "warehouse": str(tmp_path / "wh"), "progress": False, "delta.backend": "rs"}
    over.update(extra)
    return load_config(None, over)


def read(path: str) -> list[dict]:
    if not deltalake.DeltaTable.is_deltatable(path):
        return []
    return deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()


def landed_ids(cfg) -> dict[str, list[int]]:
    """Inserted ids per source file, in landing order; duplicates would show twice."""
    out: dict[str, list[int]] = {}
    for r in sorted(read(cfg.warehouse_path("bronze/binlog_changes")), key=lambda r: r["_seq"]):
        out.setdefault(r["source_file"], []).append(int(r["after"][0]["text"]))
    return out


def manifest(cfg) -> dict[str, dict]:
    latest: dict[str, dict] = {}
    for r in read(cfg.pipeline_path("manifest")):
        if r["phase"] == "committed" and (r["name"] not in latest or r["batch"] >= latest[r["name"]]["batch"]):
            latest[r["name"]] = r
    return latest


def flat(ids: list[list[int]]) -> list[int]:
    return [x for tx in ids for x in tx]


# -- the damaged folder ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def series(mariadb):
    return write_series(mariadb, "bad_input", 10)


@pytest.fixture(scope="module")
def damaged(series):
    """name -> damaged bytes, and name:what -> what to expect, for the ten files of the series."""
    (n1, d1, _), (n2, d2, _), (n3, _, _), (n4, _, _), (n5, d5, _), (n6, d6, _), (n7, d7, _), (n8, d8, _), \
        (nu, du, _), (n9, d9, _) = series
    assert all(has_checksum(d) for _n, d, _i in series)
    out = {n1: d1}

    tx3, evs = tx_events(d2, 2)  # a flipped byte inside the rows of the third transaction
    rows_ev = first_of(evs, *WRITE_ROWS)
    out[n2] = flip_byte(d2, rows_ev.pos + 30, 0x5A)
    out[f"{n2}:bad"] = (rows_ev.pos, tx3.begin_pos)

    out[n3] = b"-- this is a SQL dump, not a binlog\nINSERT INTO t VALUES (1);\n" * 20
    out[n4] = b""

    tx2, _ = tx_events(d5, 1)  # an unknown, non-ignorable event between transactions 1 and 2 ...
    unknown = make_event(99, b"future event payload", crc=True)
    d = insert_event(d5, tx2.begin_pos, unknown)
    _tx3, evs = tx_events(d, 2)  # ... and an ignorable one inside transaction 3
    d = insert_event(d, first_of(evs, EventType.TABLE_MAP).pos, make_event(99, b"skip me", crc=True, flags=IGNORABLE))
    out[n5] = d
    out[f"{n5}:bad"] = tx2.begin_pos

    # the TABLE_MAP of the first transaction removed (the decoder keeps a table map for later
    # transactions of the same range, so the first one is the one that surely has none)
    tx1, evs = tx_events(d6, 0)
    tm = first_of(evs, EventType.TABLE_MAP)
    d = remove_events(d6, lambda e: e.pos == tm.pos)
    out[n6] = d
    out[f"{n6}:bad"] = (tm.pos, tx1.begin_pos, tx1.end_pos - (tm.end - tm.pos))  # rows event moved to tm.pos

    tx3, evs = tx_events(d7, 2)  # cut inside the third transaction's rows event
    cut = first_of(evs, *WRITE_ROWS).pos + 11
    out[n7] = d7[:cut]
    out[f"{n7}:bad"] = (first_of(evs, *WRITE_ROWS).pos, tx3.begin_pos)

    out[n8] = d8 + bytes.fromhex("deadbeef") * 25  # garbage after the ROTATE
    out[f"{n8}:bad"] = len(d8)

    tx4, evs = tx_events(du, 3)  # a file that is not the newest ends in the middle of a transaction
    out[nu] = du[: first_of(evs, EventType.XID).pos]
    out[f"{nu}:bad"] = tx4.begin_pos

    # the newest file, still being written: first cut inside an event of its third transaction,
    # then between two events of its fourth one, then whole
    tx3, evs = tx_events(d9, 2)
    out[n9] = d9[: first_of(evs, *WRITE_ROWS).pos + 7]
    out[f"{n9}:bad"] = tx3.begin_pos
    tx4, evs = tx_events(d9, 3)
    out[f"{n9}:more"] = d9[: first_of(evs, EventType.XID).pos]
    out[f"{n9}:more-until"] = tx4.begin_pos
    out[f"{n9}:full"] = d9
    return out


def fill(folder: Path, files: dict) -> Path:
    folder.mkdir(exist_ok=True)
    for name, data in files.items():
        if ":" not in name:
            (folder / name).write_bytes(data)
    return folder


# -- the tests ----------------------------------------------------------------------------------------------


def test_every_kind_of_damage_in_one_run(spark, series, damaged, tmp_path):  # noqa: F811
    names = [n for n, _d, _i in series]
    ids = {n: i for n, _d, i in series}
    n1, n2, n3, n4, n5, n6, n7, n8, nu, n9 = names
    folder = fill(tmp_path / "in", damaged)

    # strict: the first bad file fails the run before anything is written
    with pytest.raises(bronze.BronzeError, match=rf"bad input \(strict mode\): {n2}: offset \d+: CRC32 mismatch"):
        bronze.run(spark, make_cfg(tmp_path, folder, strict=True))
    cfg = make_cfg(tmp_path, folder)
    assert read(cfg.warehouse_path("bronze/binlog_changes")) == [] and manifest(cfg) == {}

    stats = bronze.run(spark, cfg)

    got = landed_ids(cfg)
    t = ids
    assert got == {
        n1: flat(t[n1]),
        n2: flat(t[n2][:2]),  # the transactions before the checksum mismatch
        n5: flat(t[n5]),  # everything around the unknown events
        n6: flat(t[n6][1:]),  # all but the transaction without its table map
        n7: flat(t[n7][:2]),  # the transactions before the cut
        n8: flat(t[n8]),  # everything before the garbage
        nu: flat(t[nu][:3]),  # the committed transactions
        n9: flat(t[n9][:2]),  # the newest file: its complete transactions
    }
    assert stats.quarantined == 8 and stats.ignorable_skipped == 1 and stats.status == "ok"

    q = {r["file"]: r for r in read(cfg.pipeline_path("quarantine"))}
    assert sorted(q) == sorted([n2, n3, n4, n5, n6, n7, n8, nu])
    for name, r in q.items():
        data = damaged[name]
        assert r["raw"] == data[r["offset"] : r["offset"] + len(r["raw"])], name
        assert r["decoder_version"] == DECODER_VERSION and r["batch"] is not None, name
        assert r["reason"].startswith(f"{name}: offset "), r["reason"]
    m = manifest(cfg)

    flip_at, tx_begin = damaged[f"{n2}:bad"]
    assert (q[n2]["error_class"], q[n2]["offset"]) == ("ChecksumMismatch", flip_at)
    assert len(q[n2]["raw"]) == int.from_bytes(damaged[n2][flip_at + LENGTH_FIELD : flip_at + 13], "little")
    assert (m[n2]["status"], m[n2]["complete_until"], m[n2]["error_offset"]) == ("quarantined", tx_begin, flip_at)

    assert (q[n3]["error_class"], q[n3]["offset"]) == ("NotABinlog", 0)
    assert "not a binlog: starts with 2d 2d 20 74" in q[n3]["reason"] and q[n3]["raw"] == damaged[n3][:4096]
    assert (q[n4]["error_class"], q[n4]["raw"]) == ("NotABinlog", b"") and "empty file" in q[n4]["reason"]
    assert m[n3]["status"] == m[n4]["status"] == "quarantined" and m[n3]["complete_until"] == 0

    at = damaged[f"{n5}:bad"]
    assert (q[n5]["error_class"], q[n5]["offset"]) == ("UnknownEvent", at)
    assert "unknown event type 99, not flagged ignorable" in q[n5]["reason"]
    assert q[n5]["raw"][4] == 99 and q[n5]["raw"].endswith(b"future event payload" + q[n5]["raw"][-4:])
    assert (m[n5]["status"], m[n5]["complete_until"], m[n5]["ignorable_skipped"]) == ("done", len(damaged[n5]), 1)

    rows_at, tx_begin, tx_end = damaged[f"{n6}:bad"]
    assert (q[n6]["error_class"], q[n6]["offset"]) == ("CorruptEvent", tx_begin)
    assert f"{n6}: offset {rows_at}: rows event for table_id" in q[n6]["reason"]
    assert "no preceding TABLE_MAP" in q[n6]["reason"] and q[n6]["raw"] == damaged[n6][tx_begin:tx_end]
    assert (m[n6]["status"], m[n6]["complete_until"]) == ("done", len(damaged[n6]))

    rows_at, tx_begin = damaged[f"{n7}:bad"]
    assert (q[n7]["error_class"], q[n7]["offset"]) == ("TruncatedEvent", rows_at)
    assert q[n7]["raw"] == damaged[n7][rows_at:]  # capped by what remains
    assert (m[n7]["status"], m[n7]["complete_until"]) == ("quarantined", tx_begin)

    end = damaged[f"{n8}:bad"]
    assert (q[n8]["error_class"], q[n8]["offset"]) == ("CorruptEvent", end)
    assert "garbage appended to a finished file" in q[n8]["reason"] and q[n8]["raw"] == damaged[n8][end:]
    assert (m[n8]["status"], m[n8]["complete_until"]) == ("quarantined", end)

    tx_begin = damaged[f"{nu}:bad"]
    assert (q[nu]["error_class"], q[nu]["offset"]) == ("UnfinishedTransaction", tx_begin)
    assert "unfinished transaction at the end of a file that is not the newest" in q[nu]["reason"]
    assert q[nu]["raw"] == damaged[nu][tx_begin:]
    assert (m[nu]["status"], m[nu]["complete_until"]) == ("quarantined", tx_begin)

    assert (m[n9]["status"], m[n9]["complete_until"]) == ("partial", damaged[f"{n9}:bad"])
    assert m[n1]["status"] == "done" and m[n1]["gtid_end"] and m[n1]["rotate_to"] == n2

    # nothing is read again: quarantined files until they change, the newest until it grows
    again = bronze.run(spark, cfg)
    assert (again.files, again.quarantined) == (0, 0) and landed_ids(cfg) == got

    (folder / n9).write_bytes(damaged[f"{n9}:more"])
    more = bronze.run(spark, cfg)
    assert more.files == 1 and landed_ids(cfg)[n9] == flat(t[n9][:3])
    assert (manifest(cfg)[n9]["status"], manifest(cfg)[n9]["complete_until"]) == (
        "partial", damaged[f"{n9}:more-until"])

    (folder / n9).write_bytes(damaged[f"{n9}:full"])
    grown = bronze.run(spark, cfg)

    assert grown.files == 1 and grown.quarantined == 0
    assert landed_ids(cfg)[n9] == flat(t[n9])  # the rest landed exactly once
    assert manifest(cfg)[n9]["status"] == "done"

    # a corrected copy of a quarantined file is read on from where it stopped
    (folder / n7).write_bytes(next(d for n, d, _i in series if n == n7))
    fixed = bronze.run(spark, cfg)
    assert fixed.files == 1 and landed_ids(cfg)[n7] == flat(t[n7])
    assert manifest(cfg)[n7]["status"] == "done"

    # the quarantine can be listed and decoded again; the damage is real, so it still fails
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert quarantine.main(["list", "--warehouse", cfg.warehouse, "--format", "jsonl"]) == 0
    assert out.getvalue().count("\n") == 8
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert quarantine.main(["redecode", "--warehouse", cfg.warehouse]) == 1
    lines = {line.split("\t")[0]: line for line in out.getvalue().splitlines()}
    assert "\tfails\t" in lines[n6] and "no preceding TABLE_MAP" in lines[n6]
    assert "\tfails\t" in lines[n5] and "event type 99 is still unknown" in lines[n5]
    assert "\tfails\t" in lines[n2] and "CRC32 mismatch" in lines[n2]

    # issue 36, finding 8: the row of the file restored above is resolved (its file landed past
    # it), not "still failing" for ever; redecode of that file has nothing left to fix
    assert "\tresolved\t" in lines[n7]
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        assert quarantine.main(["redecode", "--warehouse", cfg.warehouse, "--file", n7]) == 0
    assert "0 still failing, 1 resolved" in err.getvalue()
    # list groups the rows by class (all the decoder's: "binlog"), with counts and the resolved ones
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert quarantine.main(["list", "--warehouse", cfg.warehouse, "--limit", "1"]) == 0
    text = out.getvalue()
    assert "NotABinlog\tbinlog\t2 row(s)\n" in text and "  ... 1 more" in text
    assert "TruncatedEvent\tbinlog\t1 row(s), 1 resolved\n" in text and f"  {n7}\t" in text
    assert err.getvalue().startswith("8 quarantine row(s) in 6 group(s): 7 open, 1 resolved")
    rows = [json.loads(line) for line in _stdout(quarantine.main, ["list", "--warehouse", cfg.warehouse,
                                                                    "--format", "jsonl"]).splitlines()]
    assert [r["file"] for r in rows if r["resolved"]] == [n7] and {r["where"] for r in rows} == {"binlog"}


def _stdout(fn, argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert fn(argv) == 0
    return out.getvalue()


def test_quarantine_list_at_scale_groups_and_limits(tmp_path):
    """Issue 36, finding 8: ``list`` printed one line per row (7,297 on a real server). Now a line per
    group (class and table) with its count, and at most ``--limit`` rows of each (default 10).
    The quarantine here is a real ``_pipeline/quarantine`` table written in its layout."""
    wh = tmp_path / "wh"
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    rows = [(f"binlog.{k:06d}", k, 0, f"binlog.{k:06d}: offset 0: not a binlog", "NotABinlog", DECODER_VERSION,
             b"--", 0, "r1", now) for k in range(1, 26)]
    rows.append(("binlog.000030", 30, 900, "silver: shop.t _seq 00000000300000000000900000000000: no such column",
                 "SchemaMismatch", DECODER_VERSION, None, None, "r2", now))
    delta_io.open_table(str(wh / "_pipeline" / "quarantine"), "rs").append_rows(rows, state.QUARANTINE_LAYOUT)

    lines = _stdout(quarantine.main, ["list", "--warehouse", str(wh)]).splitlines()
    assert lines[0] == "NotABinlog\tbinlog\t25 row(s)"
    assert lines[1].startswith("  binlog.000001\t0\t") and lines[11] == "  ... 15 more (--limit N shows more; --file NAME one file's)"
    assert lines[12] == "SchemaMismatch\tshop.t\t1 row(s)" and "no such column" in lines[13]
    assert len(lines) == 14
    assert _stdout(quarantine.main, ["list", "--warehouse", str(wh), "--limit", "0"]).splitlines() == [
        "NotABinlog\tbinlog\t25 row(s)", "  ... 25 more (--limit N shows more; --file NAME one file's)",
        "SchemaMismatch\tshop.t\t1 row(s)", "  ... 1 more (--limit N shows more; --file NAME one file's)"]
    assert len(_stdout(quarantine.main, ["list", "--warehouse", str(wh), "--format", "jsonl", "--limit", "2"])
               .splitlines()) == 3
    # nothing resolves a silver row or a row of a file that never landed again: redecode tries
    # them (the silver row has no bytes: skipped, not failing)
    out = _stdout(quarantine.main, ["redecode", "--warehouse", str(wh), "--file", "binlog.000030"])
    assert "\tskipped\t" in out


def test_redecode_reports_bytes_that_decode_now(series, tmp_path):
    """What ``redecode`` says once the decoder copes with stored bytes: here the whole
    transaction a decoder bug would have quarantined, and the tail of an unfinished one."""
    name, data, ids = series[0]
    (tmp_path / name).write_bytes(data)
    tx = scan(data).transactions[1]
    row = {"file": name, "offset": tx.begin_pos, "raw": data[tx.begin_pos : tx.end_pos], "error_class": "X"}

    res = quarantine.redecode(row, str(tmp_path / name))

    assert (res.ok, res.rows) == (True, ROWS_PER_TX) and res.events == 5  # GTID, annotate, map, rows, XID
    assert quarantine.redecode(dict(row, raw=None), None).ok is None
    gone = quarantine.redecode(row, str(tmp_path / "nowhere"))
    assert gone.ok is None and "source file is not at" in gone.message
    head = quarantine.redecode({"file": name, "offset": 0, "raw": data[:4096]}, None)
    assert head.ok is True  # a file start carries its own format description


def test_strict_mode_fails_on_task_level_quarantine(spark, series, damaged, tmp_path):  # noqa: F811
    """An unknown event and an undecodable transaction are found by the Spark tasks:
    strict mode fails there, before the batch writes anything."""
    n5, n6 = series[4][0], series[5][0]
    folder = fill(tmp_path / "in", {n5: damaged[n5], n6: damaged[n6]})
    cfg = make_cfg(tmp_path, folder, strict=True)

    with pytest.raises(bronze.BronzeError, match=rf"strict mode\): {n5}: offset \d+: unknown event type 99.*"
                                                 r"\(and 1 more\)"):
        bronze.run(spark, cfg)
    assert read(cfg.warehouse_path("bronze/binlog_changes")) == [] and manifest(cfg) == {}


def test_flipped_bytes_without_checksums(spark, mariadb_factory, tmp_path):  # noqa: F811
    """Without CRC32s a flipped byte in an event's length is still caught, with its offset; the
    decoder neither loops nor allocates by the bogus length, and even the newest file is
    quarantined rather than left waiting. A next position that alone disagrees with the length
    (a sound event follows) is not damage: relay logs and some old servers count positions in
    another file. Events are framed by their length, and that file lands whole."""
    srv = mariadb_factory(checksum="NONE")
    series = write_series(srv, "nocrc", 4)
    (m1, d1, i1), (m2, d2, i2), (m3, d3, i3), (m4, d4, i4) = series
    assert not has_checksum(d1)

    tx2, evs = tx_events(d2, 1)
    r2 = first_of(evs, *WRITE_ROWS)
    bad2 = flip_byte(d2, r2.pos + LENGTH_FIELD + 3)  # length 0xFF......: far past the end of the file
    tx2b, evs = tx_events(d3, 1)
    r3 = first_of(evs, *WRITE_ROWS)
    bad3 = flip_byte(d3, r3.pos + NEXT_POS_FIELD, 0x01)
    tx3, evs = tx_events(d4, 2)
    r4 = first_of(evs, *WRITE_ROWS)
    bad4 = flip_byte(d4, r4.pos + LENGTH_FIELD + 2)
    folder = fill(tmp_path / "in", {m1: d1, m2: bad2, m3: bad3, m4: bad4})
    cfg = make_cfg(tmp_path, folder)

    # no unbounded allocation: planning and decoding the file with the huge length
    f = bronze.SourceFile(m2, str(folder / m2), len(bad2), 0, 2)
    tracemalloc.start()
    plan = bronze.plan_file(f, None, str(folder / m2), False, cfg)
    w = bronze.WorkRange(m2, str(folder / m2), 2, 4, plan.end, bronze_decode._sub_index(plan.index, 4, plan.end), "r", None)
    recs = list(bronze.decode_range(w))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2_000_000, peak
    assert plan.error_class == "CorruptEvent" and plan.error_offset == r2.pos and recs[-1][0] == "stat"

    stats = bronze.run(spark, cfg)

    assert landed_ids(cfg) == {m1: flat(i1), m2: flat(i2[:1]), m3: flat(i3), m4: flat(i4[:2])}
    assert stats.quarantined == 2
    q = {r["file"]: r for r in read(cfg.pipeline_path("quarantine"))}
    assert (q[m2]["error_class"], q[m2]["offset"]) == ("CorruptEvent", r2.pos)
    assert "runs past the end of the file" in q[m2]["reason"] and "disagrees with the event's next position" in \
        q[m2]["reason"]
    assert q[m2]["raw"] == bad2[r2.pos :]  # the bogus length is capped by what remains
    assert m3 not in q
    assert (q[m4]["error_class"], q[m4]["offset"]) == ("CorruptEvent", r4.pos)
    assert f"{m4}: offset {r4.pos}: event length" in q[m4]["reason"]
    m = manifest(cfg)
    assert [m[n]["status"] for n in (m1, m2, m3, m4)] == ["done", "quarantined", "done", "quarantined"]
    assert (m[m2]["complete_until"], m[m3]["complete_until"], m[m4]["complete_until"]) == (
        tx2.begin_pos, len(bad3), tx3.begin_pos)


def test_corpus_samples_that_are_not_binlogs(spark, series, corpus_dir, tmp_path):  # noqa: F811
    samples = [corpus_dir / rel for rel in CORPUS_SAMPLES]
    if not all(p.exists() for p in samples):
        pytest.skip("corpus samples missing")
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copyfile(samples[0], folder / "c.000001")  # tsdb: every byte >= 0x80 replaced by EF BF BD
    shutil.copyfile(samples[1], folder / "c.000002")  # a text file
    name, data, ids = series[0]
    (folder / "c.000003").write_bytes(data)  # a good file after them
    cfg = make_cfg(tmp_path, folder)

    stats = bronze.run(spark, cfg)

    assert stats.quarantined == 2
    q = {r["file"]: r for r in read(cfg.pipeline_path("quarantine"))}
    assert q["c.000001"]["reason"] == "c.000001: offset 0: not a binlog: starts with ef bf bd 62, expected fe 62 69 6e"
    assert q["c.000002"]["reason"].startswith("c.000002: offset 0: not a binlog: starts with 2d 2d 2d 2d")
    assert q["c.000001"]["raw"] == samples[0].read_bytes() and q["c.000002"]["raw"] == samples[1].read_bytes()
    assert landed_ids(cfg) == {"c.000003": flat(ids)}


def test_rows_that_do_not_fit_the_schema_history_are_quarantined_by_silver(spark, mariadb, tmp_path):  # noqa: F811
    """A column count or type that differs from the DDL the binlog carries (here: ALTERs run
    with ``sql_log_bin=0``, so the binlog never saw them). Bronze lands the rows as logged; the
    silver step matches them to the schema history and quarantines the ones that do not fit."""
    from pipelines.silver import step as silver_step
    from pipelines.paths import silver_table_path

    mariadb.flush_logs()
    first = mariadb.binlog_files()[-1]
    mariadb.sql(
        "CREATE DATABASE bad_schema; USE bad_schema;"
        "CREATE TABLE cnt (id INT PRIMARY KEY, v VARCHAR(10)); CREATE TABLE typ (id INT PRIMARY KEY, v VARCHAR(10));"
        "INSERT INTO cnt VALUES (1, 'a'); INSERT INTO typ VALUES (1, '1');"
        "SET sql_log_bin = 0; ALTER TABLE cnt ADD COLUMN w INT; ALTER TABLE typ MODIFY v INT; SET sql_log_bin = 1;"
        "INSERT INTO cnt VALUES (2, 'b', 7); INSERT INTO typ VALUES (2, 5);"
    )
    mariadb.flush_logs()
    folder = tmp_path / "in"
    folder.mkdir()
    files = mariadb.binlog_files()
    for p in files[files.index(first) : -1]:
        shutil.copyfile(p, folder / p.name)
    cfg = make_cfg(tmp_path, folder)

    b = bronze.run(spark, cfg)
    s = silver_step.run(spark, cfg)

    assert b.quarantined == 0 and b.rows["c"] == 4  # bronze keeps every row as logged
    assert s.quarantined == 2, s.summary()
    q = sorted((r for r in read(cfg.pipeline_path("quarantine")) if r["error_class"] == "SchemaMismatch"),
               key=lambda r: r["reason"])
    assert [r["raw"] for r in q] == [None, None] and all(r["file"] == first.name for r in q)
    assert "bad_schema.cnt" in q[0]["reason"] and "has a column #3 (LONG)" in q[0]["reason"]
    assert "has 2 columns: id, v" in q[0]["reason"]
    assert "bad_schema.typ" in q[1]["reason"] and "column #2 of bad_schema.typ is logged as LONG" in q[1]["reason"]
    assert "declares v VARCHAR(10)" in q[1]["reason"]
    for table in ("cnt", "typ"):  # the rows that fit landed
        rows = read(silver_table_path(cfg.warehouse, "bad_schema", table))
        assert [(r["id"], r["v"]) for r in rows] == [(1, "a" if table == "cnt" else "1")]

    # the quarantine by class and table: in `list`, and in status's line of each table
    lines = _stdout(quarantine.main, ["list", "--warehouse", cfg.warehouse]).splitlines()
    assert "SchemaMismatch\tbad_schema.cnt\t1 row(s)" in lines and "SchemaMismatch\tbad_schema.typ\t1 row(s)" in lines
    from pipelines import status

    st = status.gather(cfg.warehouse)
    assert {t.name: t.quarantine for t in st.tables} == {"bad_schema.cnt": {"SchemaMismatch": 1},
                                                         "bad_schema.typ": {"SchemaMismatch": 1}}
    assert st.quarantine == {"bad_schema.cnt": {"SchemaMismatch": 1}, "bad_schema.typ": {"SchemaMismatch": 1}}
