"""The bronze step on real binlog files (the shared corpus written by MariaDB 10.11),
a real Spark session and real Delta tables under tmp_path.

Ground truth for row counts: the ``### INSERT INTO / ### UPDATE / ### DELETE FROM``
lines of ``mariadb-binlog -vvv`` (``binlogs/FILE.txt`` in the corpus).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines import bronze
from pipelines.bronze import commit as bronze_commit
from pipelines.bronze import decode as bronze_decode
from pipelines.bronze import files as bronze_files
from pipelines.bronze import listing as bronze_listing
from pipelines.bronze import bookkeeping
from pipelines.binlog.framing import BinlogFile
from pipelines.binlog.txindex import FileIndex, TxInfo
from pipelines.bronze import BronzeError, SourceFile, check_sequence, cut_event, sha256_prefixes, split_range
from pipelines.config import load_config
from spark_fixtures import spark  # noqa: F401,E402  (the shared session: one per worker, with delta-spark)

REPO = Path(__file__).resolve().parents[1]
_ROW_LINE = re.compile(r"^### (INSERT INTO|UPDATE|DELETE FROM) ", re.M)
_OP = {"INSERT INTO": "c", "UPDATE": "u", "DELETE FROM": "d"}


# -- fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def corpus_binlogs(corpus_dir) -> Path:
    return corpus_dir / "mariadb-10.11" / "binlogs"


def truth(corpus_binlogs: Path, name: str) -> dict[str, int]:
    """Row changes per op in ``name`` according to mariadb-binlog."""
    counts = {"c": 0, "u": 0, "d": 0}
    for m in _ROW_LINE.finditer((corpus_binlogs / f"{name}.txt").read_text(errors="replace")):
        counts[_OP[m.group(1)]] += 1
    return counts


_READ_PATH = ["binaryFile"]


def pytest_generate_tests(metafunc):
    # every test of the step runs on both read paths: whole files through Spark's binaryFile
    # source, and byte ranges (what split files always use)
    if metafunc.definition.get_closest_marker("spark") and "read_path" in metafunc.fixturenames:
        metafunc.parametrize("read_path", ["binaryFile", "ranges"], indirect=True)


@pytest.fixture(autouse=True)
def read_path(request):
    _READ_PATH[0] = getattr(request, "param", "binaryFile")
    yield _READ_PATH[0]
    _READ_PATH[0] = "binaryFile"


def make_cfg(tmp_path: Path, **extra):
    over = {"input": str(tmp_path / "in"), "warehouse": str(tmp_path / "wh"), "progress": False,
            "delta.backend": "rs", "parallelism.whole_files": _READ_PATH[0]}
    over.update(extra)
    return load_config(None, over)


def copy_in(corpus_binlogs: Path, tmp_path: Path, *names: str) -> Path:
    d = tmp_path / "in"
    d.mkdir(exist_ok=True)
    for n in names:
        shutil.copyfile(corpus_binlogs / n, d / n)
    return d


def _read(cfg, path: str) -> list:
    import deltalake

    return deltalake.DeltaTable(path).to_pyarrow_table().to_pylist()


def bronze_rows(cfg) -> list[dict]:
    return _read(cfg, cfg.warehouse_path("bronze/binlog_changes"))


def committed_manifest(cfg) -> list[dict]:
    return [r for r in _read(cfg, cfg.pipeline_path("manifest")) if r["phase"] == "committed"]


def ops(rows) -> dict[str, int]:
    out = {"c": 0, "u": 0, "d": 0}
    for r in rows:
        out[r["op"]] += 1
    return out


def bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


# -- pure helpers --------------------------------------------------------------------------


def _f(name: str, seq: int) -> SourceFile:
    return SourceFile(name, f"/x/{name}", 10, 0, seq)


def test_check_sequence_gaps_duplicates_and_known_files():
    check_sequence([_f("b.000002", 2), _f("b.000003", 3)], {1: "b.000001"}, accept_gaps=False)
    with pytest.raises(BronzeError, match=r"missing from the sequence, the first between b.000001 and b.000004"):
        check_sequence([_f("b.000001", 1), _f("b.000004", 4)], {}, accept_gaps=False)
    check_sequence([_f("b.000001", 1), _f("b.000004", 4)], {}, accept_gaps=True)
    with pytest.raises(BronzeError, match="same number 7"):
        check_sequence([_f("a.000007", 7), _f("b.000007", 7)], {}, accept_gaps=True)


def test_a_local_folder_is_listed_as_hadoop_lists_it(spark, tmp_path):
    # os.scandir for local folders (fast at thousands of files); the same entries, URIs, sizes
    # and mtimes as the Hadoop listing any other folder takes
    folder = tmp_path / "in put ☕"
    folder.mkdir()
    for name, data in (("binlog.000002", b"\xfebin" + b"x" * 10), ("binlog.000001", b"\xfebin"),
                       ("mysql-bin.000010", b"abc"), ("notes.txt", b"n"), (".binlog.000003", b""),
                       ("binlog.000004.bak", b"b")):
        (folder / name).write_bytes(data)
    (folder / "binlog.000005").mkdir()
    (folder / "binlog.000006").symlink_to(folder / "binlog.000002")
    for uri in (str(folder), "file:" + str(folder)):
        local = bronze_listing._list_local(bronze.local_path(uri), uri)
        assert [f.name for f in local[0]] == ["binlog.000001", "binlog.000002", "binlog.000006", "mysql-bin.000010"]
        hadoop = bronze_listing._list_hadoop(spark, uri)
        assert local[0] == hadoop[0]
        assert [f.name for f in local[1]] == [f.name for f in hadoop[1]] == [
            ".binlog.000003", "binlog.000004.bak", "binlog.000005", "notes.txt"]
    with pytest.raises(BronzeError, match="does not exist"):
        bronze.list_folder(spark, str(tmp_path / "nowhere"))
    with pytest.raises(BronzeError, match="is not a folder"):
        bronze.list_folder(spark, str(folder / "notes.txt"))


def test_split_range_cuts_on_transaction_boundaries():
    txs = [TxInfo(b, b + 100, "commit") for b in range(100, 1100, 100)]
    idx = FileIndex("f", 1100, "10.11", txs, complete_until=1100)
    assert split_range(idx, 0, 1100, 10_000) == [(4, 1100)]
    parts = split_range(idx, 0, 1100, 300)
    assert parts == [(4, 400), (400, 700), (700, 1000), (1000, 1100)]
    assert split_range(idx, 500, 900, 200) == [(500, 700), (700, 900)]
    assert split_range(idx, 900, 900, 200) == []


def test_cut_event_uses_the_length_field_capped_by_what_remains():
    header = bytes(9) + (50).to_bytes(4, "little") + bytes(6)
    buf = b"\xfebin" + header + b"x" * 31 + b"tail"
    assert cut_event(buf, 4) == buf[4:54]
    huge = b"\xfebin" + bytes(9) + (10**9).to_bytes(4, "little") + bytes(10)
    assert cut_event(huge, 4) == huge[4:]
    assert cut_event(b"\xfebin\x01\x02", 4) == b"\x01\x02"
    assert cut_event(b"\xfebin", 4) == b""


def test_sha256_prefixes(tmp_path):
    import hashlib

    p = tmp_path / "f"
    p.write_bytes(b"abcdefgh")
    got = sha256_prefixes(str(p), [3, 0, 8])
    assert got == {n: hashlib.sha256(b"abcdefgh"[:n]).hexdigest() for n in (0, 3, 8)}
    with pytest.raises(BronzeError, match="expected at least 9 bytes"):
        sha256_prefixes(str(p), [9])


# -- the step on real files ------------------------------------------------------------------


@pytest.mark.spark
def test_lands_every_row_change_once_and_rerun_adds_nothing(spark, corpus_binlogs, tmp_path):
    names = ["binlog.000007", "binlog.000008", "binlog.000009"]
    d = copy_in(corpus_binlogs, tmp_path, *names)
    (d / "binlog.index").write_text("\n".join(names))
    (d / "notes.txt").write_text("not a binlog")
    cfg = make_cfg(tmp_path, **{"parallelism.target_bytes_per_task": 1024})  # several ranges per file

    stats = bronze.run(spark, cfg)

    expected = {n: truth(corpus_binlogs, n) for n in names}
    rows = bronze_rows(cfg)
    for n in names:
        assert ops(r for r in rows if r["source_file"] == n) == expected[n], n
    assert stats.rows == ops(rows)
    assert stats.files == 3 and stats.files_ignored == 2 and stats.quarantined == 0
    assert len({r["_seq"] for r in rows}) == len(rows)
    r0 = min(rows, key=lambda r: r["_seq"])
    assert r0["source_file"] == "binlog.000007" and r0["file_seq"] == 7
    assert r0["_seq"] == f"{7:010d}{r0['event_pos']:013d}{r0['row_idx']:09d}"
    assert r0["commit_ts"] is not None and r0["gtid"] and r0["decoder_version"]
    for r in rows:
        assert (r["before"] is None) == (r["op"] == "c") and (r["after"] is None) == (r["op"] == "d")
        for cell in (r["after"] or r["before"]):
            assert cell["type"] and (cell["text"] is None or cell["bin"] is None)
    manifest = committed_manifest(cfg)
    assert {(m["name"], m["status"], m["complete_until"]) for m in manifest} == {
        (n, "done", (d / n).stat().st_size) for n in names
    }

    again = bronze.run(spark, cfg)

    assert again.files == 0 and again.files_skipped == 3
    assert len(bronze_rows(cfg)) == len(rows)
    assert len(committed_manifest(cfg)) == 3
    runs = _read(cfg, cfg.pipeline_path("runs"))
    assert sorted((r["status"], r["files"]) for r in runs) == [("ok", 0), ("ok", 3)]


_READER_RDD = {"binaryFile": "FileScanRDD", "binaryFiles": "BinaryFileRDD", "ranges": "ParallelCollectionRDD"}


@pytest.mark.spark
def test_whole_files_are_read_by_spark_binaryfile(spark, corpus_binlogs, tmp_path, read_path, monkeypatch):
    lineages = []
    real = bronze_commit._task_records

    def recording(*args):
        rdd = real(*args)
        lineages.append(rdd.toDebugString().decode())
        return rdd

    monkeypatch.setattr(bronze_commit, "_task_records", recording)
    names = ["binlog.000007", "binlog.000008"]
    # the binaryFile source's path, then (once) the binaryFiles RDD reader that setting offers too
    for reader in [read_path] + (["binaryFiles"] if read_path == "binaryFile" else []):
        work = tmp_path / reader
        work.mkdir()
        copy_in(corpus_binlogs, work, *names)
        cfg = make_cfg(work, **{"parallelism.whole_files": reader})
        stats = bronze.run(spark, cfg)
        assert ops(bronze_rows(cfg)) == {op: sum(truth(corpus_binlogs, n)[op] for n in names) for op in "cud"}
        assert stats.files == 2 and stats.read_whole == (0 if reader == "ranges" else 2)
        for other, rdd in _READER_RDD.items():
            assert (rdd in lineages[-1]) == (other == reader), (reader, lineages[-1])
        # a file that must be split is read by byte ranges whatever the setting
        copy_in(corpus_binlogs, work, "binlog.000009")
        split = bronze.run(spark, make_cfg(work, **{"parallelism.whole_files": reader,
                                                    "parallelism.target_bytes_per_task": 1024}))
        assert split.files == 1 and split.read_whole == 0
        assert "ParallelCollectionRDD" in lineages[-1]
        assert "BinaryFileRDD" not in lineages[-1] and "FileScanRDD" not in lineages[-1]


@pytest.mark.spark
def test_xa_and_rollback_groups(spark, corpus_binlogs, tmp_path):
    name = "binlog.000003"  # keys, transactions, rollbacks, XA
    copy_in(corpus_binlogs, tmp_path, name)
    cfg = make_cfg(tmp_path)

    bronze.run(spark, cfg)

    assert ops(bronze_rows(cfg)) == truth(corpus_binlogs, name)
    xa = sorted(_read(cfg, cfg.pipeline_path("xa")), key=lambda r: r["pos"])
    assert [r["kind"] for r in xa] == ["xa_prepare", "xa_commit", "xa_prepare", "xa_rollback"]
    assert xa[0]["xa_xid"] == xa[1]["xa_xid"] and xa[2]["xa_xid"] == xa[3]["xa_xid"]
    prepared = {r["gtid"] for r in xa if r["kind"] == "xa_prepare"}
    assert prepared <= {r["gtid"] for r in bronze_rows(cfg)}  # the branch's rows can be found by gtid


def test_remote_task_bytes_hold_only_the_header_and_the_range(corpus_binlogs, tmp_path, monkeypatch):
    from pipelines.binlog.changes import iter_changes
    from pipelines.binlog.txindex import scan

    src = corpus_binlogs / "binlog.000004"
    idx = scan(str(src))
    (s, e), *_ = split_range(idx, idx.transactions[len(idx.transactions) // 2].begin_pos, idx.complete_until, 1 << 30)
    sub = bronze_decode._sub_index(idx, s, e)
    expected = [(c.pos, c.row_idx) for c in iter_changes(str(src), sub, s, e) if hasattr(c, "row_idx")]
    monkeypatch.setattr(bronze_files, "local_path", lambda uri: None)  # read it as a non-local Hadoop path would be
    with bronze_files.task_bytes(src.as_uri(), s, e) as buf:
        assert len(buf) == e and bytes(buf[s:e]) == src.read_bytes()[s:e]
        assert s > 1010 and not any(buf[1000:1010])  # the gap between header and range is a hole
        got = [(c.pos, c.row_idx) for c in iter_changes(buf, sub, s, e, name=src.name) if hasattr(c, "row_idx")]
    assert got == expected and got


@pytest.mark.spark
def test_truncated_newest_file_waits_then_resumes_when_it_grows(spark, corpus_binlogs, tmp_path):
    name = "binlog.000004"  # DDL mixed with DML
    full = (corpus_binlogs / name).read_bytes()
    d = tmp_path / "in"
    d.mkdir()
    cut = len(full) // 2 + 7  # almost surely inside an event
    (d / name).write_bytes(full[:cut])
    cfg = make_cfg(tmp_path)

    first = bronze.run(spark, cfg)

    assert first.quarantined == 0
    m = committed_manifest(cfg)
    assert len(m) == 1 and m[0]["status"] == "partial" and 4 < m[0]["complete_until"] <= cut
    landed = bronze_rows(cfg)
    assert 0 < len(landed) < sum(truth(corpus_binlogs, name).values())
    assert all(r["event_pos"] < m[0]["complete_until"] for r in landed)

    assert bronze.run(spark, cfg).files == 0  # nothing new: the newest file still waits

    (d / name).write_bytes(full)
    grown = bronze.run(spark, cfg)

    assert grown.files == 1
    rows = bronze_rows(cfg)
    assert ops(rows) == truth(corpus_binlogs, name)
    assert len({r["_seq"] for r in rows}) == len(rows)
    last = max(committed_manifest(cfg), key=lambda r: r["batch"])
    assert (last["start_pos"], last["complete_until"], last["status"]) == (m[0]["complete_until"], len(full), "done")
    ddl = _read(cfg, cfg.pipeline_path("ddl"))
    assert ddl and all(r["query"] for r in ddl)


@pytest.mark.spark
def test_changed_content_is_an_error(spark, corpus_binlogs, tmp_path):
    name = "binlog.000009"
    d = copy_in(corpus_binlogs, tmp_path, name)
    cfg = make_cfg(tmp_path)
    bronze.run(spark, cfg)
    data = bytearray((d / name).read_bytes())
    data[1000] ^= 0xFF
    (d / name).write_bytes(bytes(data))
    bump_mtime(d / name)

    with pytest.raises(BronzeError, match=r"binlog.000009: content changed since it was processed at .*\(sha256 "):
        bronze.run(spark, cfg)
    runs = _read(cfg, cfg.pipeline_path("runs"))
    assert sorted(r["status"] for r in runs) == ["failed", "ok"]


@pytest.mark.spark
def test_corrupt_file_is_quarantined_and_the_rest_lands(spark, corpus_binlogs, tmp_path):
    d = copy_in(corpus_binlogs, tmp_path, "binlog.000007", "binlog.000008")
    bad = d / "binlog.000007"
    data = bytearray(bad.read_bytes())
    with BinlogFile(bytes(data)) as bf:  # a byte in the body of the event in the middle of the file
        ev = next(raw.header for raw in bf.events() if raw.header.end_pos > len(data) // 2)
    flip = ev.pos + 20
    data[flip] ^= 0x5A  # CRC32 mismatch
    bad.write_bytes(bytes(data))
    cfg = make_cfg(tmp_path, strict=True)

    with pytest.raises(BronzeError, match=r"strict mode.*binlog.000007: offset \d+"):
        bronze.run(spark, cfg)
    assert not (tmp_path / "wh" / "bronze").exists()

    cfg = make_cfg(tmp_path)
    stats = bronze.run(spark, cfg)

    assert stats.quarantined == 1
    (q,) = _read(cfg, cfg.pipeline_path("quarantine"))
    assert q["file"] == "binlog.000007" and q["offset"] <= flip < q["offset"] + len(q["raw"])
    assert f"offset {q['offset']}" in q["reason"] and q["error_class"] == "ChecksumMismatch"
    assert q["raw"] == bytes(data[q["offset"] : q["offset"] + len(q["raw"])])
    m = {r["name"]: r for r in committed_manifest(cfg)}
    assert m["binlog.000007"]["status"] == "quarantined" and m["binlog.000007"]["complete_until"] <= q["offset"]
    rows = bronze_rows(cfg)
    assert ops(r for r in rows if r["source_file"] == "binlog.000008") == truth(corpus_binlogs, "binlog.000008")
    good = [r for r in rows if r["source_file"] == "binlog.000007"]
    assert good and all(r["event_pos"] < m["binlog.000007"]["complete_until"] for r in good)

    assert bronze.run(spark, cfg).files == 0  # a quarantined file is not read again until it changes


@pytest.mark.spark
def test_delta_spark_lands_what_delta_rs_lands_around_a_bad_event(spark, corpus_binlogs, tmp_path, read_path):
    """On delta-spark the tasks hand their Arrow batches to Spark as one DataFrame and the driver
    keeps what lands by a filter: a file cut at a bad event lands the same rows, quarantine row and
    counts as on delta-rs, whose tasks drop those rows from their own files."""
    d = copy_in(corpus_binlogs, tmp_path, "binlog.000007", "binlog.000008")
    data = bytearray((d / "binlog.000007").read_bytes())
    with BinlogFile(bytes(data)) as bf:
        ev = next(raw.header for raw in bf.events() if raw.header.end_pos > len(data) // 2)
    data[ev.pos + 20] ^= 0x5A  # CRC32 mismatch in the middle of the file
    (d / "binlog.000007").write_bytes(bytes(data))
    landed = {}
    for backend in ("rs", "spark"):
        cfg = make_cfg(tmp_path, warehouse=str(tmp_path / f"wh-{backend}"), **{"delta.backend": backend})
        stats = bronze.run(spark, cfg)
        rows = sorted(({k: v for k, v in r.items() if k not in ("_run_id", "_ingested_at")} for r in bronze_rows(cfg)),
                      key=lambda r: r["_seq"])
        (q,) = _read(cfg, cfg.pipeline_path("quarantine"))
        landed[backend] = (stats.rows, stats.quarantined, rows, {k: q[k] for k in ("file", "offset", "error_class", "raw")})
    assert landed["spark"] == landed["rs"]
    rows_, quarantined, rows, q = landed["spark"]
    assert quarantined == 1 and q["file"] == "binlog.000007" and q["error_class"] == "ChecksumMismatch"
    assert ops(r for r in rows if r["source_file"] == "binlog.000008") == truth(corpus_binlogs, "binlog.000008")
    good = [r for r in rows if r["source_file"] == "binlog.000007"]
    assert good and all(r["event_pos"] < q["offset"] for r in good)
    assert rows_ == ops(rows)


def test_the_landing_filter_is_the_records_rule(spark):
    """What the delta-spark path keeps of a batch's rows (before a file's cut, outside the
    transactions skipped whole) is what :func:`_row_filters` keeps of the same records, and cut
    files are counted again."""
    from collections import Counter

    recs = [("a", 100, "c"), ("a", 199, "u"), ("a", 200, "d"), ("a", 500, "c"), ("b", 10, "c"), ("b", 20, "u"),
            ("b", 29, "c"), ("b", 30, "d"), ("c", 7, "c")]
    cuts, skips = {"a": 200}, {"b": [(20, 30)], "a": [(50, 150)]}
    frame = spark.createDataFrame([(f, p, op, None) for f, p, op in recs] + [(None, None, None, b"stat")],
                                  "source_file STRING, event_pos BIGINT, op STRING, _small BINARY")
    counts = Counter({("a", "c"): 99, ("b", "c"): 2})
    kept = bronze_commit._bronze_rows(frame, cuts, skips, counts)
    keep, outside = bronze_commit._row_filters(cuts, skips)
    want = [r for r in recs if keep(("row", (r[0], 0, r[1]))) and outside(("row", (r[0], 0, r[1])))]
    assert sorted(tuple(r) for r in kept.collect()) == sorted(want) == [("a", 199, "u"), ("b", 10, "c"), ("b", 30, "d"),
                                                                        ("c", 7, "c")]
    assert counts == Counter({("a", "u"): 1, ("b", "c"): 2})  # a's counted again, b's as the tasks said


@pytest.mark.spark
def test_truncated_file_that_is_not_the_newest_is_quarantined(spark, corpus_binlogs, tmp_path):
    d = copy_in(corpus_binlogs, tmp_path, "binlog.000008")
    full = (corpus_binlogs / "binlog.000007").read_bytes()
    (d / "binlog.000007").write_bytes(full[: len(full) - 10])
    cfg = make_cfg(tmp_path)

    stats = bronze.run(spark, cfg)

    assert stats.quarantined == 1
    (q,) = _read(cfg, cfg.pipeline_path("quarantine"))
    assert q["file"] == "binlog.000007" and q["error_class"] == "TruncatedEvent"


@pytest.mark.spark
def test_interrupted_batch_is_redone_exactly_once(spark, corpus_binlogs, tmp_path, monkeypatch):
    name = "binlog.000008"
    full = (corpus_binlogs / name).read_bytes()
    d = tmp_path / "in"
    d.mkdir()
    (d / name).write_bytes(full[: len(full) // 2 + 3])
    cfg = make_cfg(tmp_path)
    real_append = bookkeeping.append_rows

    def crash_on_commit(spark_, cfg_, rows, ddl, path, app_id=None, version=None):
        if path.endswith("manifest") and app_id == bronze.TXN_APP_ID:
            raise RuntimeError("simulated crash before the manifest commit")
        return real_append(spark_, cfg_, rows, ddl, path, app_id, version)

    monkeypatch.setattr(bronze_commit, "append_rows", crash_on_commit)
    with pytest.raises(RuntimeError, match="simulated crash"):
        bronze.run(spark, cfg)
    monkeypatch.setattr(bronze_commit, "append_rows", real_append)
    partial = len(bronze_rows(cfg))
    assert partial > 0 and committed_manifest(cfg) == []

    (d / name).write_bytes(full)  # the file grew while we were down
    bronze.run(spark, cfg)

    rows = bronze_rows(cfg)
    assert ops(rows) == truth(corpus_binlogs, name)
    assert len({r["_seq"] for r in rows}) == len(rows)
    assert [m["batch"] for m in sorted(committed_manifest(cfg), key=lambda r: r["batch"])] == [0, 1]


@pytest.mark.spark
@pytest.mark.slow
def test_job_runs_as_a_subprocess(corpus_binlogs, tmp_path):
    copy_in(corpus_binlogs, tmp_path, "binlog.000009")
    wh = tmp_path / "wh"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    proc = subprocess.run(
        [sys.executable, str(REPO / "jobs" / "ingest_bronze.py"), "--binlog-dir", str(tmp_path / "in"),
         "--warehouse", str(wh), "--no-progress"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "bronze run" in proc.stdout and "rows c=" in proc.stdout
    cfg = make_cfg(tmp_path)
    assert ops(bronze_rows(cfg)) == truth(corpus_binlogs, "binlog.000009")


def test_job_reports_a_bad_config_and_exits_2(tmp_path):
    conf = tmp_path / "p.yaml"
    conf.write_text("input: in\nwarehouse: wh\ndelete_mode: maybe\n")
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / "ingest_bronze.py"), "--config", str(conf)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "delete_mode: expected one of hard | soft, got 'maybe'" in proc.stderr


def test_the_records_tasks_hand_the_driver_are_named_as_their_tables_columns():
    """A quarantine row is read by name on the driver and lands as a ``_pipeline/quarantine`` row
    by position: its fields are that layout's columns, in order; a bronze row's op is where the
    decode counts it."""
    from pipelines.bronze.records import Quarantined, RangeError, RangeStat
    from pipelines.bronze.schema import BRONZE_LAYOUT
    from pipelines.state import QUARANTINE_LAYOUT

    assert list(Quarantined._fields) == QUARANTINE_LAYOUT.names
    assert BRONZE_LAYOUT.names[bronze_decode._OP] == "op"
    stat = RangeStat("binlog.000001", 4, 100, 3, {"c": 2}, RangeError(50, 40, "bad event", "BadEvent"), [], 0, 0)
    assert (stat.error.cut, stat.ops) == (40, {"c": 2})
