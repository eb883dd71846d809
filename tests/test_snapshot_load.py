"""A database older than its binlogs: a private MariaDB runs a workload, ``mariadb-dump`` takes a
snapshot half-way, more workload follows (an ALTER, a RENAME, a key change, updates and deletes of
rows from before the dump), the binlogs before the dump are purged; then the snapshot load
(``pipelines.snapshot_load``, the code of ``jobs/load_snapshot.py``) and the pipeline, and every
silver table against the server's ``SELECT``, on both Delta backends.

Tables: keyed, composite-key, keyless with duplicate rows, one with ``binlog_row_metadata=NO_LOG``
(its columns only known from the dump's CREATE TABLE), an empty one, and one the configuration
excludes. Also: the binlogs before the dump present and applied *before* the dump is loaded
(silver is rebuilt from the snapshot), the same dump loaded twice, dumps written with other
options giving the same bronze rows, a dump cut mid-statement (one error naming file and offset,
nothing landed), a dump without a position, and a SIGKILL during the load then a re-run. A
mydumper folder (mydumper is not installed: its layout written from the server, chunks by
``mariadb-dump``) loads as the dumps do.
"""
from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

from mariadb_server import MariaDBServer, mariadb_available
from oracle import _diff, server_columns, server_rows, silver_rows
from snapshot_oracle import MARIADB_DUMP, dump as mariadb_dump
from spark_fixtures import delta_backend, spark  # noqa: F401  (the shared session fixtures)

from pipelines import bronze, delta_io
from pipelines import snapshot_load
from pipelines.bronze.schema import BRONZE_TABLE
from pipelines.config import load_config
from pipelines.silver import step as silver_step
from pipelines.silver.columns import SilverStepError
from pipelines.snapshot.errors import DumpError, NoPosition, TruncatedDump

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.spark, pytest.mark.slow]

DB, NOLOG = "snap", "snap_nolog"
TABLES = {DB: ("k", "cpk", "nk", "empty", "k3"), NOLOG: ("n",)}  # k3: renamed from k2 after the dump

BEFORE = {DB: """
CREATE TABLE k (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) CHARACTER SET utf8mb4, d DECIMAL(10,2), t DATETIME(3),
                b BLOB) ENGINE=InnoDB;
CREATE TABLE cpk (a INT NOT NULL, b VARCHAR(10) NOT NULL, v INT, PRIMARY KEY (a, b)) ENGINE=InnoDB;
CREATE TABLE nk (a INT, b VARCHAR(20)) ENGINE=InnoDB;
CREATE TABLE empty (id INT PRIMARY KEY) ENGINE=InnoDB;
CREATE TABLE k2 (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;
CREATE TABLE tmp_skip (id INT PRIMARY KEY) ENGINE=InnoDB;
INSERT INTO k VALUES (1,'one',1.50,'2020-01-01 10:00:00.125',X'00ff'),(2,'two',NULL,NULL,NULL),
                     (3,'it''s\\nnew',-3.25,'1999-12-31 23:59:59.999','a;b'),(4,'four',4,NULL,X'0a0d');
INSERT INTO cpk VALUES (1,'a',10),(1,'b',11),(2,'a',20);
INSERT INTO nk VALUES (1,'dup'),(1,'dup'),(1,'dup'),(2,NULL),(NULL,'x');
INSERT INTO k2 VALUES (1,1),(2,2);
INSERT INTO tmp_skip VALUES (1),(2);
UPDATE k SET v = 'ONE' WHERE id = 1;
DELETE FROM nk WHERE a = 2;
""", NOLOG: """
CREATE TABLE n (id INT NOT NULL, name VARCHAR(20), qty INT, PRIMARY KEY (id)) ENGINE=InnoDB;
INSERT INTO n VALUES (1,'a',1),(2,'b',2),(3,'c',3);
UPDATE n SET qty = 30 WHERE id = 3;
"""}

AFTER = {DB: """
INSERT INTO k VALUES (5,'five',5,NULL,NULL);
UPDATE k SET d = 2.75, v = 'TWO' WHERE id = 2;
DELETE FROM k WHERE id = 4;
ALTER TABLE k ADD COLUMN extra INT NOT NULL DEFAULT 7 AFTER v;
UPDATE k SET extra = 8 WHERE id = 3;
UPDATE cpk SET b = 'c' WHERE a = 1 AND b = 'b';
ALTER TABLE cpk DROP PRIMARY KEY, ADD PRIMARY KEY (b, a);
INSERT INTO cpk VALUES (3,'a',30);
DELETE FROM nk WHERE a = 1 LIMIT 1;
INSERT INTO nk VALUES (3,'new'),(1,'dup');
UPDATE nk SET b = 'y' WHERE a IS NULL;
RENAME TABLE k2 TO k3;
UPDATE k3 SET v = 20 WHERE id = 2;
INSERT INTO tmp_skip VALUES (3);
""", NOLOG: """
UPDATE n SET name = 'B' WHERE id = 2;
DELETE FROM n WHERE id = 1;
INSERT INTO n VALUES (4,'d',4);
"""}

LATER = {DB: """
UPDATE k SET v = 'late' WHERE id = 5;
DELETE FROM nk WHERE a = 3;
ALTER TABLE k3 ADD COLUMN w INT DEFAULT 1;
INSERT INTO k3 (id, v) VALUES (9, 9);
""", NOLOG: """
INSERT INTO n VALUES (5,'e',5);
"""}

META = {DB: "FULL", NOLOG: "NO_LOG"}


def _run_sql(srv: MariaDBServer, scripts: dict[str, str], first: bool = False) -> None:
    for db, script in scripts.items():
        srv.sql(f"SET GLOBAL binlog_row_metadata = {META[db]}")  # (the next sessions')
        if first:
            srv.sql(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
        srv.sql(script, db=db)
        srv.flush_logs()


def _mydumper_folder(srv: MariaDBServer, dest: Path) -> Path:
    """A mydumper output folder of the server as it is (mydumper's documented layout): ``metadata``
    with the binlog position, ``db-schema-create.sql``, ``db.t-schema.sql`` (``SET NAMES binary``,
    ``CREATE TABLE``) and the data chunks ``db.t.NNNNN.sql``, each written by ``mariadb-dump
    --no-create-info`` (its header's ``SET NAMES`` and ``TIME_ZONE``, then the INSERTs): ``k`` in
    two chunks (the second gzip), ``nk`` one row per INSERT, no chunk for the empty table; and a
    view's placeholder table with its ``-schema-view.sql``, which is no table."""
    dest.mkdir()
    file, pos = srv.master_status()
    (dest / "metadata").write_text(f"# Started dump at: 2026-11-27 09:00:00\n[master]\nFile = {file}\n"
                                   f"Position = {pos}\nExecuted_Gtid_Set = {srv.gtid_binlog_pos()}\n\n"
                                   "# Finished dump at: 2026-11-27 09:00:01\n")
    head = b"/*!40101 SET NAMES binary*/;\n/*!40014 SET FOREIGN_KEY_CHECKS=0*/;\n\n"
    tables = {DB: ("k", "cpk", "nk", "empty", "k2", "tmp_skip"), NOLOG: ("n",)}
    for db, names in tables.items():
        (dest / f"{db}-schema-create.sql").write_bytes(
            f"CREATE DATABASE /*!32312 IF NOT EXISTS*/ `{db}` /*!40100 DEFAULT CHARACTER SET utf8mb4 */;\n".encode())
        for table in names:
            create = srv.query_rows(f"SHOW CREATE TABLE `{table}`", db=db)[0][1]
            (dest / f"{db}.{table}-schema.sql").write_bytes(head + create.encode() + b";\n")
            wheres = {"k": ("id <= 2", "id > 2"), "empty": ()}.get(table, ("1",))
            for n, where in enumerate(wheres):
                more = ("--skip-extended-insert",) if table == "nk" else ()
                data = subprocess.run([MARIADB_DUMP, "--no-defaults", f"--socket={srv.socket}", "--user=root",
                                       "--single-transaction", "--no-create-info", "--hex-blob", "--skip-triggers",
                                       *more, f"--where={where}", db, table], capture_output=True, timeout=300)
                assert data.returncode == 0, data.stderr.decode()
                chunk = dest / f"{db}.{table}.{n:05d}.sql"
                if n == 1:
                    chunk.with_name(chunk.name + ".gz").write_bytes(gzip.compress(data.stdout))
                else:
                    chunk.write_bytes(data.stdout)
    (dest / f"{DB}.v-schema.sql").write_bytes(head + b"CREATE TABLE `v` (\n  `id` tinyint NOT NULL\n) ENGINE=MyISAM;\n")
    (dest / f"{DB}.v-schema-view.sql").write_bytes(
        head + b"DROP TABLE IF EXISTS `v`;\nDROP VIEW IF EXISTS `v`;\n"
        b"CREATE ALGORITHM=UNDEFINED SQL SECURITY DEFINER VIEW `v` AS select `k`.`id` AS `id` from `k`;\n")
    return dest


def _state(srv: MariaDBServer) -> dict:
    out = {}
    for db, tables in TABLES.items():
        for table in tables:
            cols = server_columns(srv, db, table)
            out[(db, table)] = (cols, server_rows(srv, db, table, cols))
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The server's story, run once: binlogs before and after the dump, the dumps, the final state."""
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("snapload")
    srv = MariaDBServer(root / "mariadb", row_image="FULL", row_metadata="FULL")
    srv.start()
    try:
        _run_sql(srv, BEFORE, first=True)
        dumps = {}
        for key, options in (("hex", ("--master-data=2", "--hex-blob")),
                             ("plain", ("--master-data=2",)),
                             ("single", ("--master-data=2", "--skip-extended-insert", "--complete-insert"))):
            dumps[key] = mariadb_dump(srv, root / f"{key}.sql", *options, databases=(DB, NOLOG))
        with open(dumps["hex"], "rb") as src, gzip.open(root / "hex.sql.gz", "wb") as out:
            shutil.copyfileobj(src, out)
        dumps["gzip"] = root / "hex.sql.gz"
        tab = srv.files_dir / "tab"  # --tab: the server writes the .txt files (secure_file_priv)
        tab.mkdir(parents=True)
        mariadb_dump(srv, tab / "position.sql", "--master-data=2", f"--tab={tab}", "--one-db", databases=(DB,))
        dumps["tab"] = root / "tab"
        shutil.copytree(tab, dumps["tab"])
        dumps["mydumper"] = _mydumper_folder(srv, root / "mydumper")
        dump_file = srv.master_status()[0]
        gtid = srv.gtid_binlog_pos()
        all_binlogs = root / "all"
        _run_sql(srv, AFTER)
        dumps["late"] = mariadb_dump(srv, root / "late.sql", "--master-data=2", databases=(DB, NOLOG))
        _run_sql(srv, LATER)
        all_binlogs.mkdir()
        for f in srv.binlog_files()[:-1]:
            shutil.copy(f, all_binlogs / f.name)
        srv.sql(f"PURGE BINARY LOGS TO '{dump_file}'")
        kept = root / "kept"  # what the server still has: the dump's file onward
        kept.mkdir()
        for f in srv.binlog_files()[:-1]:
            shutil.copy(f, kept / f.name)
        assert len(list(kept.iterdir())) < len(list(all_binlogs.iterdir()))
        state = _state(srv)
    finally:
        srv.stop()
    return {"dumps": dumps, "kept": kept, "all": all_binlogs, "state": state, "root": root, "gtid": gtid}


def _cfg(binlogs: Path, warehouse: Path, backend: str):
    return load_config(REPO / "conf" / "pipeline.yaml", {"input": str(binlogs), "warehouse": str(warehouse),
                                                         "progress": False, "delta.backend": backend})


def _assert_silver_is_the_server(state: dict, warehouse: Path) -> None:
    problems = []
    for (db, table), (cols, want) in state.items():
        got = silver_rows(warehouse, db, table, cols)
        if got != want:
            problems.append(_diff(f"{db}.{table}", cols, want, got or []))
    assert not problems, "\n\n".join(problems)


def _pipeline(spark, cfg) -> None:
    bronze.run(spark, cfg)
    stats = silver_step.run(spark, cfg)
    assert stats.status == "ok", stats.summary()


def test_dump_then_the_binlogs_after_it(spark, delta_backend, world, tmp_path):  # noqa: F811
    wh = tmp_path / "wh"
    cfg = _cfg(world["kept"], wh, delta_backend)
    stats = snapshot_load.run(spark, cfg, [str(world["dumps"]["hex"])])
    assert stats.rows[(DB, "k")] == 4 and stats.rows[(DB, "nk")] == 4 and stats.rows[(NOLOG, "n")] == 3
    assert stats.excluded == {(DB, "tmp_skip"): 2}  # conf/pipeline.yaml excludes *.tmp_*
    bronze_path = str(wh / BRONZE_TABLE)
    version = DeltaTable(bronze_path).version()
    again = snapshot_load.run(spark, cfg, [str(world["dumps"]["hex"])])  # the same dump: nothing changes
    assert again.already == 1 and again.dumps == 0
    assert DeltaTable(bronze_path).version() == version
    _pipeline(spark, cfg)
    _assert_silver_is_the_server(world["state"], wh)
    ops = {r["op"] for r in delta_io.open_table(bronze_path).read_arrow(["op"]).to_pylist()}
    assert "r" in ops


def test_binlogs_applied_first_then_the_dump(spark, delta_backend, world, tmp_path):  # noqa: F811
    # the binlogs the server kept through silver first (the tables older than them: their ALTERs
    # unparsed, rows missing, k3 renamed from a k2 it never saw); then the dump: those tables are
    # rebuilt from it (k3 too, from the rename on), and silver equals the server
    wh = tmp_path / "wh"
    cfg = _cfg(world["kept"], wh, delta_backend)
    _pipeline(spark, cfg)
    with pytest.raises(AssertionError):
        _assert_silver_is_the_server(world["state"], wh)
    snapshot_load.run(spark, cfg, [str(world["dumps"]["gzip"])])
    _pipeline(spark, cfg)
    _assert_silver_is_the_server(world["state"], wh)
    marks = silver_step.run(spark, cfg)  # the snapshot is applied: the next run rebuilds nothing
    assert marks.status == "ok" and marks.segments == 0, marks.summary()


def _r_rows(wh: Path) -> list:
    rows = delta_io.open_table(str(wh / BRONZE_TABLE)).read_arrow(["db", "table", "op", "after"]).to_pylist()
    return sorted(repr((r["db"], r["table"], [(c["idx"], c["name"], c["type"], c["text"], c["bin"]) for c in r["after"]]))
                  for r in rows if r["op"] == "r")


def test_dumps_of_other_options_land_the_same_rows(spark, world, tmp_path):  # noqa: F811
    want = None
    for key in ("hex", "plain", "single", "gzip", "hex in ranges of 600 bytes", "single in ranges of 256 bytes"):
        name, _, small = key.partition(" in ranges of ")
        cfg = _cfg(world["kept"], tmp_path / key.replace(" ", "-"), "rs")
        if small:  # a task per range, each from the first statement boundary in it (mid-INSERT cuts)
            size = int(small.split()[0])
            cfg = load_config(REPO / "conf" / "pipeline.yaml", {
                "input": str(world["kept"]), "warehouse": str(tmp_path / key.replace(" ", "-")), "progress": False,
                "delta.backend": "rs", "parallelism.target_bytes_per_task": size})
            assert world["dumps"][name].stat().st_size > 5 * size
        snapshot_load.run(spark, cfg, [str(world["dumps"][name])])
        got = _r_rows(tmp_path / key.replace(" ", "-"))
        if want is None:
            want = got
            assert len(want) == 4 + 3 + 4 + 2 + 3  # k, cpk, nk, k2, n
        assert got == want, key
    # a --tab folder of one database (its position from the command's output saved in the folder)
    snapshot_load.run(spark, _cfg(world["kept"], tmp_path / "tab", "rs"), [str(world["dumps"]["tab"])])
    assert _r_rows(tmp_path / "tab") == [r for r in want if r.startswith(repr((DB,))[:-2])]
    # a mydumper folder: a task per chunk, k's rows in two (one gzip)
    snapshot_load.run(spark, _cfg(world["kept"], tmp_path / "mydumper", "rs"), [str(world["dumps"]["mydumper"])])
    assert _r_rows(tmp_path / "mydumper") == want


def test_a_mydumper_folder_then_the_binlogs_after_it(spark, delta_backend, world, tmp_path):  # noqa: F811
    wh = tmp_path / "wh"
    cfg = _cfg(world["kept"], wh, delta_backend)
    folder = str(world["dumps"]["mydumper"])
    stats = snapshot_load.run(spark, cfg, [folder])
    assert stats.dumps == 1 and stats.rows[(DB, "k")] == 4 and stats.rows[(NOLOG, "n")] == 3, stats.summary()
    assert stats.excluded == {(DB, "tmp_skip"): 2}
    assert (DB, "v") not in stats.rows, stats.summary()  # a view's placeholder table is no table
    assert stats.skipped == {"DROP VIEW": 1, "CREATE ALGORITHM": 1}, stats.summary()  # its -schema-view.sql
    bronze_path = str(wh / BRONZE_TABLE)
    version = DeltaTable(bronze_path).version()
    again = snapshot_load.run(spark, cfg, [folder])
    assert again.already == 1 and again.dumps == 0 and DeltaTable(bronze_path).version() == version
    _pipeline(spark, cfg)
    _assert_silver_is_the_server(world["state"], wh)


def test_a_cut_dump_lands_nothing(spark, delta_backend, world, tmp_path):  # noqa: F811
    whole = world["dumps"]["single"].read_bytes()
    at = whole.index(b"INSERT INTO `k` ") + 30
    cut = tmp_path / "cut.sql"
    cut.write_bytes(whole[:at])
    wh = tmp_path / "wh"
    cfg = _cfg(world["kept"], wh, delta_backend)
    with pytest.raises(TruncatedDump) as e:
        snapshot_load.run(spark, cfg, [str(cut)])
    assert e.value.file == "cut.sql" and e.value.offset == at - 30, str(e.value)
    assert f"cut.sql: offset {at - 30}" in str(e.value)
    assert not delta_io.open_table(str(wh / BRONZE_TABLE), "rs").exists()
    assert not (wh / "_pipeline" / "snapshots").exists()
    staged = [p for p in (wh / BRONZE_TABLE).rglob("*.parquet")] if (wh / BRONZE_TABLE).exists() else []
    assert staged == []


def test_a_mydumper_folder_with_a_cut_chunk_lands_nothing(spark, world, tmp_path):  # noqa: F811
    folder = tmp_path / "mydumper"
    shutil.copytree(world["dumps"]["mydumper"], folder)
    gz = folder / f"{DB}.k.00001.sql.gz"  # the second chunk of k, its gzip stream cut short
    gz.write_bytes(gz.read_bytes()[:-20])
    wh = tmp_path / "wh"
    with pytest.raises(TruncatedDump, match="nothing of this dump was loaded") as e:
        snapshot_load.run(spark, _cfg(world["kept"], wh, "rs"), [str(folder)])
    assert e.value.file == gz.name, str(e.value)
    assert not delta_io.open_table(str(wh / BRONZE_TABLE), "rs").exists()
    assert not (wh / "_pipeline" / "snapshots").exists()
    staged = [p for p in (wh / BRONZE_TABLE).rglob("*.parquet")] if (wh / BRONZE_TABLE).exists() else []
    assert staged == []


def test_a_dump_without_a_position_is_refused(spark, world, tmp_path):  # noqa: F811
    text = world["dumps"]["plain"].read_bytes().replace(b"-- CHANGE MASTER TO", b"-- (no position)")
    text = text.replace(b"-- SET GLOBAL gtid_slave_pos", b"-- (no GTID)")
    path = tmp_path / "nopos.sql"
    path.write_bytes(text)
    cfg = _cfg(world["kept"], tmp_path / "wh", "rs")
    with pytest.raises(NoPosition, match="--position FILE:POS"):
        snapshot_load.run(spark, cfg, [str(path)])
    # the job says it in one line, naming the file
    done = subprocess.run([sys.executable, str(REPO / "jobs" / "load_snapshot.py"), "--dump", str(path),
                           "--warehouse", str(tmp_path / "wh2"), "--no-progress"], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1].startswith("error: nopos.sql: offset 0: the dump records no binlog")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("point", ["append.bronze.after", "append.snapshots.before#2"])
def test_a_kill_during_the_load_then_a_rerun(spark, world, tmp_path, point):  # noqa: F811
    # killed with bronze landed (the schema history not yet), or with only the committed rows missing
    wh = tmp_path / "wh"
    dump = str(world["dumps"]["hex"])
    job = [sys.executable, str(REPO / "jobs" / "load_snapshot.py"), "--dump", dump, "--warehouse", str(wh),
           "--binlog-dir", str(world["kept"]), "--no-progress"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "BINLOG_DELTA_FAULT": f"{point}:kill"}
    killed = subprocess.run(job, capture_output=True, text=True, timeout=300, env=env)
    assert killed.returncode == -9, killed.stderr[-2000:]
    cfg = _cfg(world["kept"], wh, "rs")
    with pytest.raises(SilverStepError, match="interrupted: run jobs/load_snapshot.py"):
        silver_step.run(spark, cfg)
    env.pop("BINLOG_DELTA_FAULT")
    done = subprocess.run(job, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    _pipeline(spark, cfg)
    _assert_silver_is_the_server(world["state"], wh)


def test_the_dump_first_with_the_older_binlogs_there_too(spark, world, tmp_path):  # noqa: F811
    # the binlogs from before the dump are in the folder as well: their changes land in bronze but
    # never on top of the snapshot (a keyless table would get its dumped rows twice)
    wh = tmp_path / "wh"
    cfg = _cfg(world["all"], wh, "rs")
    snapshot_load.run(spark, cfg, [str(world["dumps"]["hex"])])
    _pipeline(spark, cfg)
    _assert_silver_is_the_server(world["state"], wh)


def test_a_newer_dump_replaces_a_drifted_table(spark, world, tmp_path):  # noqa: F811
    wh = tmp_path / "wh"
    cfg = _cfg(world["kept"], wh, "rs")
    snapshot_load.run(spark, cfg, [str(world["dumps"]["hex"])])
    _pipeline(spark, cfg)
    k = DeltaTable(str(wh / "silver" / DB / "k"))
    k.delete("id = 3")  # drift: a row lost by hand
    k.update(updates={"v": "'wrong'"}, predicate="id = 5")
    with pytest.raises(AssertionError):
        _assert_silver_is_the_server(world["state"], wh)
    snapshot_load.run(spark, cfg, [str(world["dumps"]["late"])])  # taken after the ALTERs, before LATER
    _pipeline(spark, cfg)
    _assert_silver_is_the_server(world["state"], wh)


def test_a_position_given_only_as_a_gtid_set_is_found_in_bronze(spark, world, tmp_path):  # noqa: F811
    # MariaDB's gtid_slave_pos alone (MySQL's GTID_PURGED alike): the first change bronze holds
    # outside the set is where the snapshot sits; before bronze has it, the load says what to do
    text = world["dumps"]["hex"].read_bytes().replace(b"-- CHANGE MASTER TO", b"-- (no file position)")
    path = tmp_path / "gtid.sql"
    path.write_bytes(text)
    wh = tmp_path / "wh"
    cfg = _cfg(world["kept"], wh, "rs")
    with pytest.raises(DumpError, match=r"only a GTID set \(0-1-\d+\) and no change bronze holds is after it"):
        snapshot_load.run(spark, cfg, [str(path)])
    bronze.run(spark, cfg)
    stats = snapshot_load.run(spark, cfg, [str(path)])
    assert stats.dumps == 1
    _pipeline(spark, cfg)
    _assert_silver_is_the_server(world["state"], wh)
    again = snapshot_load.run(spark, cfg, [str(path)], gtid=world["gtid"])  # the same set given by hand
    assert again.already == 1
