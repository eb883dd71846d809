"""Sequence integrity of the bronze step: gaps (by ROTATE, numbering and GTIDs), files that
arrive out of order, the same file twice, copies, and files that change after they were read.

The binlog series come from the suite's MariaDB server (several GTID domains); MySQL GTID sets
are checked on files built with ``event_builders``. Real Spark, real Delta tables under tmp_path.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import deltalake
import pytest

import event_builders as eb
from binlog_surgery import flip_byte, remove_events, with_rotate_to
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines import bronze
from pipelines.binlog.constants import EventType
from pipelines.binlog.gtid import MysqlGtidSet
from pipelines.bronze import BronzeError, Link, SourceFile, advance_gtid_state, gtid_head, gtids_missing, link_problem
from pipelines.config import load_config

TXS = 3


def write_series(srv, db: str, n_files: int, domains=(0,)) -> list[tuple[str, bytes, list[int]]]:
    """``n_files`` consecutive binlog files of ``TXS`` single-row inserts each, the
    transactions spread over the GTID ``domains``: ``(name, bytes, ids)``."""
    srv.sql(f"CREATE DATABASE `{db}`; CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    srv.flush_logs()
    out = []
    for k in range(n_files):
        path = srv.binlog_files()[-1]
        ids = [100 * (k + 1) + i for i in range(TXS)]
        script = "".join(f"SET SESSION gtid_domain_id = {domains[(k + i) % len(domains)]};"
                         f"INSERT INTO `{db}`.t VALUES ({x});\n" for i, x in enumerate(ids))
        srv.sql(script + "FLUSH BINARY LOGS;")
        out.append((path.name, path.read_bytes(), ids))
    return out


@pytest.fixture(scope="module")
def series(mariadb):
    return write_series(mariadb, "seq", 5, domains=(0, 3))


def make_cfg(tmp_path: Path, **extra):
    over = {"input": str(tmp_path / "in"), "warehouse": str(tmp_path / "wh"), "progress": False,
            "delta.backend": "rs"}
    over.update(extra)
    return load_config(None, over)


def put(tmp_path: Path, *files: tuple[str, bytes]) -> Path:
    d = tmp_path / "in"
    d.mkdir(exist_ok=True)
    for name, data in files:
        (d / name).write_bytes(data)
    return d


def landed(cfg) -> dict[str, list[int]]:
    path = cfg.warehouse_path("bronze/binlog_changes")
    out: dict[str, list[int]] = {}
    if deltalake.DeltaTable.is_deltatable(path):
        for r in sorted(deltalake.DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda r: r["_seq"]):
            out.setdefault(r["source_file"], []).append(int(r["after"][0]["text"]))
    return out


def head_of(tmp_path: Path, name: str, data: bytes):
    p = tmp_path / f"head-{name}"
    p.write_bytes(data)
    return gtid_head(str(p))


def seq_of(name: str) -> int:
    return int(name.rsplit(".", 1)[1])


def plan_link(tmp_path: Path, name: str, data: bytes) -> Link:
    p = tmp_path / f"plan-{name}"
    p.write_bytes(data)
    cfg = load_config(None, {"input": str(tmp_path), "warehouse": str(tmp_path / "wh")})
    return bronze.plan_file(SourceFile(name, str(p), len(data), 0, seq_of(name)), None, str(p), False, cfg).link


def src(name: str) -> SourceFile:
    return SourceFile(name, f"/x/{name}", 100, 0, seq_of(name))


# -- the step on a folder ------------------------------------------------------------------------------


@pytest.mark.spark
def test_a_missing_file_holds_back_the_rest_until_it_arrives(spark, series, tmp_path):  # noqa: F811
    """``000004`` arrives before ``000003`` (or ``000003`` was purged): the files before the
    gap land, the rest waits and the run fails saying what is missing; once it arrives,
    everything lands in order, exactly once."""
    (a, da, ia), (b, db, ib), (c, dc, ic), (d, dd, id_), _ = series
    folder = put(tmp_path, (a, da), (b, db), (d, dd))
    cfg = make_cfg(tmp_path)

    with pytest.raises(BronzeError, match=rf"{b} ends with a ROTATE to {c}, but the next file here is {d}: "
                                          rf"{c} is missing\. Held back until the sequence is whole: {d} "):
        bronze.run(spark, cfg)
    assert landed(cfg) == {a: ia, b: ib}

    (folder / c).write_bytes(dc)
    stats = bronze.run(spark, cfg)

    assert stats.status == "ok" and stats.files == 2 and stats.files_skipped == 2 and not stats.held_back
    assert landed(cfg) == {a: ia, b: ib, c: ic, d: id_}


@pytest.mark.spark
def test_accept_gaps_goes_on_with_a_warning(spark, series, tmp_path):  # noqa: F811
    (a, da, ia), (b, db, ib), (c, dc, ic), (d, dd, id_), _ = series
    put(tmp_path, (a, da), (b, db), (d, dd))
    cfg = make_cfg(tmp_path, accept_gaps=True)

    stats = bronze.run(spark, cfg)

    assert stats.status == "ok" and landed(cfg) == {a: ia, b: ib, d: id_}
    assert len(stats.warnings) == 1 and f"{c} is missing" in stats.warnings[0] and "accept_gaps" in stats.warnings[0]


@pytest.mark.spark
def test_a_renumbered_file_is_caught_by_gtid_continuity(spark, series, tmp_path):  # noqa: F811
    """``000003`` purged and ``000004`` renamed to ``000003``: numbering and the ROTATE of
    ``000002`` look right, but its GTID_LIST says transactions were logged in between."""
    (a, da, ia), (b, db, ib), (c, _dc, _ic), (_d, dd, _id), _ = series
    put(tmp_path, (a, da), (b, db), (c, dd))
    cfg = make_cfg(tmp_path)

    with pytest.raises(BronzeError, match=rf"GTIDs \S+.* were logged between {b} and {c} but are in neither file "
                                          rf"\({c} starts after .* by its GTID_LIST, {b} ends at .*\): "
                                          rf"a binlog file is missing\. Held back .*: {c} "):
        bronze.run(spark, cfg)
    assert landed(cfg) == {a: ia, b: ib}


@pytest.mark.spark
def test_the_same_file_twice_and_copies_under_other_names(spark, series, tmp_path):  # noqa: F811
    (a, da, ia), (b, db, ib), (c, dc, ic), (d, _dd, _id), _ = series
    folder = put(tmp_path, (a, da), (b, db))
    cfg = make_cfg(tmp_path)
    bronze.run(spark, cfg)

    # the same name with the same bytes (touched): read past what was done, nothing lands twice
    os.utime(folder / a, ns=(0, (folder / a).stat().st_mtime_ns + 5_000_000_000))
    shutil.copyfile(folder / b, folder / f"{b}.bak")  # a copy under a name that is not a binlog name
    (folder / f"{a}~").write_bytes(flip_byte(da, len(da) // 2))  # a different file under such a name
    again = bronze.run(spark, cfg)

    assert again.files == 1 and again.files_skipped == 1 and again.files_ignored == 2
    assert landed(cfg) == {a: ia, b: ib}
    assert again.warnings == [f"{b}.bak is a copy of {b} (same size and sha256): ignored, {b} is read once"]

    # a re-numbered copy is refused (after the files before it landed)
    (folder / c).write_bytes(dc)
    (folder / d).write_bytes(db)
    with pytest.raises(BronzeError, match=rf"{d} has the same content \(size and sha256\) as {b}, which was read "
                                          rf"already: a copy under another name is never landed twice"):
        bronze.run(spark, cfg)
    assert landed(cfg) == {a: ia, b: ib, c: ic}


@pytest.mark.spark
def test_bytes_that_change_after_they_were_read(spark, series, tmp_path):  # noqa: F811
    (a, da, ia), (b, db, ib), *_ = series
    folder = put(tmp_path, (a, da), (b, db))
    cfg = make_cfg(tmp_path)
    bronze.run(spark, cfg)

    (folder / a).write_bytes(flip_byte(da, len(da) // 2))  # same size, one byte different
    os.utime(folder / a, ns=(0, (folder / a).stat().st_mtime_ns + 5_000_000_000))
    with pytest.raises(BronzeError, match=rf"{a}: content changed since it was processed at .* \(sha256 of bytes "
                                          rf"\[0, {len(da)}\) [0-9a-f]{{64}} != [0-9a-f]{{64}}\)"):
        bronze.run(spark, cfg)

    (folder / a).write_bytes(da[:100])
    with pytest.raises(BronzeError, match=rf"{a}: content changed .*: it is now 100 bytes, {len(da)} were processed"):
        bronze.run(spark, cfg)
    assert landed(cfg) == {a: ia, b: ib}


# -- the rules, on single links -----------------------------------------------------------------------


def test_consecutive_files_of_a_server_link_up(series, tmp_path):
    links = [plan_link(tmp_path, n, d) for n, d, _i in series]
    for prev, (name, data, _ids) in zip(links, series[1:]):
        assert link_problem(prev, src(name), head_of(tmp_path, name, data)) is None
    assert links[0].flavor == "mariadb" and links[0].rotate_to == series[1][0]
    assert {g.split("-")[0] for g in links[-1].gtid_end.split(",")} >= {"0", "3"}  # both domains


def test_numbering_rotate_and_gtid_rules(series, tmp_path):
    (a, da, _), (b, db, _), (c, dc, _), (d, dd, _), (e, de, _) = series
    no_rotate = plan_link(tmp_path, b, remove_events(db, lambda ev: ev.type_code == EventType.ROTATE))
    assert no_rotate.rotate_to is None
    assert link_problem(no_rotate, src(d), head_of(tmp_path, d, dd)) == f"{c} is missing between {b} and {d}"
    assert link_problem(no_rotate, src(e), head_of(tmp_path, e, de)) == (
        f"2 files are missing between {b} and {e}, the first {c}")

    elsewhere = plan_link(tmp_path, b, with_rotate_to(db, "binlog.000077"))
    assert link_problem(elsewhere, src(c), head_of(tmp_path, c, dc)) == (
        f"{b} ends with a ROTATE to binlog.000077, but the next file here is {c}")

    # GTIDs only count when both sides are known, and only a definite gap
    unknown_end = Link(b, seq_of(b), "mariadb", "0-1-1", None, c)
    assert link_problem(unknown_end, src(c), ("mariadb", "0-1-99")) is None
    assert link_problem(Link(b, seq_of(b), "mariadb", "", "0-1-5,1-1-3", c), src(c), ("mariadb", "0-1-5")) is None
    assert link_problem(Link(b, seq_of(b), "mariadb", "", "0-1-5", c), src(c), ("mariadb", "0-1-4")) is None
    assert "GTIDs 0-1-6..8, 2-1-..1 were logged" in link_problem(
        Link(b, seq_of(b), "mariadb", "", "0-1-5", c), src(c), ("mariadb", "0-1-8,2-1-1"))
    assert link_problem(None, src(c), ("mariadb", "0-1-8")) is None  # the first file starts the history


def test_gtid_state_arithmetic():
    assert advance_gtid_state("mariadb", "", []) == ""
    assert advance_gtid_state("mariadb", "0-1-9", ["0-1-3"]) == "0-1-3"  # the last one logged counts
    assert gtids_missing("mariadb", "0-1-3", "0-1-3,0-2-1") == "0-2-..1"
    u1, u2 = "3e11fa47-71ca-11e1-9e33-c80aa9429562", "4d22fa47-71ca-11e1-9e33-c80aa9429563"
    end = advance_gtid_state("mysql", f"{u1}:1-5:7", [f"{u1}:6", f"{u1}:9", f"{u2}:blue:1"])
    assert end == f"{u1}:1-7:9,{u2}:blue:1"
    assert gtids_missing("mysql", end, f"{u1}:1-9,{u2}:blue:1-2:red:4") == f"{u1}:8,{u2}:blue:2:red:4"
    assert gtids_missing("mysql", end, f"{u1.upper()}:1-7") is None
    assert gtids_missing("mysql", "", "") is None


def test_tagged_gtid_sets_have_one_spelling():
    """MySQL prints a set as gtid_executed shows it (one entry per UUID, untagged intervals, then
    each tag); the form with the UUID repeated per tag reads the same."""
    u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    server = f"{u}:1-5:domain_1:1-3:15-21:domain_2:8-52"
    repeated = f"{u.upper()}:Domain_1:1-3:15-21, {u}:Domain_2:8-52,{u}:1-5"
    assert str(MysqlGtidSet.parse(repeated)) == server
    assert advance_gtid_state("mysql", repeated, []) == server
    assert advance_gtid_state("mysql", server, [f"{u}:domain_1:4", f"{u}:6"]) == f"{u}:1-6:domain_1:1-4:15-21:domain_2:8-52"
    assert gtids_missing("mysql", server, repeated) is None
    assert MysqlGtidSet.parse(server).contains(f"{u}:domain_2:9") and not MysqlGtidSet.parse(server).contains(f"{u}:9")


def _mysql_file(prev_sets, gnos, rotate_to: str | None, uuid: str) -> bytes:
    evs = [(EventType.PREVIOUS_GTIDS, eb.previous_gtids(prev_sets))]
    for g in gnos:
        evs += [(EventType.GTID, eb.gtid(uuid, g)), (EventType.QUERY, eb.query("BEGIN", schema="d")),
                (EventType.QUERY, eb.query("COMMIT", schema="d"))]
    if rotate_to:
        evs.append((EventType.ROTATE, eb.rotate(4, rotate_to)))
    return eb.binlog_file(evs, eb.fmt("mysql80"))


def test_mysql_previous_gtids_continuity(tmp_path):
    """Files built like a MySQL 8.0 server writes them: PREVIOUS_GTIDS then GTID groups."""
    u = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    f1 = _mysql_file([(u, None, [(1, 6)])], [6, 7], "mysql-bin.000002", u)  # before: 1-5
    f2 = _mysql_file([(u, None, [(1, 8)])], [8], "mysql-bin.000003", u)  # before: 1-7, as f1 left it
    f3 = _mysql_file([(u, None, [(1, 10)])], [10], None, u)  # before: 1-9; 8 and 9 are nowhere in f1
    assert head_of(tmp_path, "mysql-bin.000002", f2) == ("mysql", f"{u}:1-7")

    l1 = plan_link(tmp_path, "mysql-bin.000001", f1)

    assert (l1.flavor, l1.gtid_start, l1.gtid_end) == ("mysql", f"{u}:1-5", f"{u}:1-7")
    assert link_problem(l1, src("mysql-bin.000002"), head_of(tmp_path, "x2", f2)) is None
    renamed = link_problem(l1, src("mysql-bin.000002"), head_of(tmp_path, "x3", f3))
    assert renamed.startswith(f"GTIDs {u}:8-9 were logged between mysql-bin.000001 and mysql-bin.000002")
    assert "by its PREVIOUS_GTIDS" in renamed
