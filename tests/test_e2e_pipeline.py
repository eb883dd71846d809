"""End to end: a private MariaDB server -> binlog files -> bronze -> silver, then every silver table
against ``SELECT *`` on the server (and the corpus against its recorded final state).

One server writes the workload twice into the same binlog stream: into database ``e2e_full`` with
``binlog_row_metadata=FULL`` (column names in the table maps) and into ``e2e_min`` with ``MINIMAL``
(names from the DDL history). The workload covers every column type, a composite key with key
changes, a keyless table with duplicate rows, a multi-table transaction, a rolled-back
transaction, ``FLUSH BINARY LOGS`` between transactions and ``ALTER TABLE ... ADD COLUMN ... AFTER``
mid-stream; the second phase appends more files (with a ``TRUNCATE``) and runs the pipeline as a
``jobs/run_pipeline.py`` subprocess.

Values are compared as Python values after converting both sides to the silver types of
:mod:`pipelines.schema.typemap`: the server side is read as text (``HEX()`` for strings and binaries) and
converted per column type; zero/invalid dates become None as in silver.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mariadb_server import MariaDBServer, mariadb_available
from oracle import (  # noqa: F401  (also imported from here by other tests)
    _BINARY,
    _TEXT,
    _diff,
    _sort_key,
    copy_binlogs,
    expected_value,
    server_columns,
    server_rows,
    silver_rows,
)
from spark_fixtures import require_delta_spark, spark  # noqa: F401  (the shared session fixture)

from pipelines import bronze, delta_io
from pipelines.silver import step as silver_step
from pipelines.silver.columns import SilverStepError
from pipelines.config import load_config
from pipelines.paths import silver_table_path
from pipelines.schema import ColumnDef, SchemaHistory

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# ---------------------------------------------------------------------------------------------------
# the workload

DDL = """
CREATE TABLE t_types (
  id INT NOT NULL PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED, mi MEDIUMINT, miu MEDIUMINT UNSIGNED,
  i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED, b BOOL,
  d52 DECIMAL(5,2), d3838 DECIMAL(38,38), d6530 DECIMAL(65,30), du DECIMAL(10,4) UNSIGNED,
  f FLOAT, dbl DOUBLE, f72 FLOAT(7,2),
  b1 BIT(1), b17 BIT(17), b64 BIT(64),
  dte DATE, y YEAR, t0 TIME, t6 TIME(6), dt0 DATETIME, dt3 DATETIME(3), ts0 TIMESTAMP NULL DEFAULT NULL,
  ts6 TIMESTAMP(6) NULL DEFAULT NULL,
  c10 CHAR(10) CHARACTER SET utf8mb4, vc VARCHAR(40) CHARACTER SET utf8mb4, vl VARCHAR(20) CHARACTER SET latin1,
  cu CHAR(5) CHARACTER SET ucs2, txt TEXT, mt MEDIUMTEXT CHARACTER SET latin1,
  bn BINARY(8), vb VARBINARY(20), bl BLOB, lb LONGBLOB,
  e ENUM('a','b','c'), s SET('x','y','z'), j JSON, g GEOMETRY, p POINT,
  ip6 INET6, u UUID, ip4 INET4
) ENGINE=InnoDB;
CREATE TABLE t_cpk (a INT NOT NULL, b VARCHAR(10) NOT NULL, c DATE NOT NULL, v INT, PRIMARY KEY (a, b, c)) ENGINE=InnoDB;
CREATE TABLE t_nopk (a INT, b VARCHAR(20), c DATETIME(3)) ENGINE=InnoDB;
"""

ROWS = r"""
INSERT INTO t_types VALUES
 (1, -128,0,-32768,0,-8388608,0,-2147483648,0,-9223372036854775808,0,0,
     0,0,0,0, 0,0,0, b'0',0,0,
     '1000-01-01',1901,'-838:59:59','-838:59:59.999999','1000-01-01 00:00:00','1000-01-01 00:00:00.000',
     '1970-01-01 00:00:01','1970-01-01 00:00:01.000000',
     '','','','','','', X'00',X'',X'',X'', 'a','', '[]', ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(0 0)'),
     '::','00000000-0000-0000-0000-000000000000','0.0.0.0'),
 (2, 127,255,32767,65535,8388607,16777215,2147483647,4294967295,9223372036854775807,18446744073709551615,1,
     999.99,0.99999999999999999999999999999999999999,
     99999999999999999999999999999999999.999999999999999999999999999999,999999.9999,
     3.40282e38,1.7976931348623157e308,9999.99, b'1',131071,18446744073709551615,
     '9999-12-31',2155,'838:59:59','838:59:59.999999','9999-12-31 23:59:59','9999-12-31 23:59:59.999',
     '2038-01-19 03:14:07','2038-01-19 03:14:07.999999',
     'abc','😀🎉 emoji','café ß','Ωж','text ✓','latin ÿ ¡¿',
     X'0102',X'00FF00',REPEAT(X'01',300),REPEAT(X'C0',70000), 'c','x,z', '{"a": [1, true, null], "b": "é😀"}',
     ST_GeomFromText('LINESTRING(0 0,1 1,2 0)', 4326), ST_GeomFromText('POINT(-1.5 2.25)'),
     '2001:db8::ff00:42:8329','123e4567-e89b-12d3-a456-426614174000','192.168.1.1'),
 (3, -1,1,-1,1,-1,1,-1,1,-1,1,1, -0.01,0.00000000000000000000000000000000000001,-0.000000000000000000000000000001,0.0001,
     0.1,0.30000000000000004,-9999.99, b'1',65537,81985529216486895,
     '2024-02-29',2024,'-00:00:01','-00:00:00.000001','2024-02-29 12:34:56','2024-02-29 12:34:56.123',
     '2024-02-29 12:34:56','2024-02-29 12:34:56.123456',
     '  lead','trail   ','tab\there','ab','nl\nx','quote''s \\ bs', 'a',X'5C27',X'',NULL, 'b','y','"str"',NULL,NULL,
     '::ffff:192.0.2.1','6ccd780c-baba-1026-9564-5b8c656024db','10.0.0.1'),
 (4, NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL, NULL,NULL,NULL,NULL, NULL,NULL,NULL, NULL,NULL,NULL,
     NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL, NULL,NULL,NULL,NULL,NULL,NULL, NULL,NULL,NULL,NULL,
     NULL,NULL,NULL,NULL,NULL, NULL,NULL,NULL);
SET SESSION sql_mode = '';
INSERT INTO t_types (id, dte, y, dt0, dt3, ts0, e) VALUES
 (5, '0000-00-00', 0, '0000-00-00 00:00:00', '2024-02-00 00:00:00.000', '0000-00-00 00:00:00', 'not-a-member');
SET SESSION sql_mode = DEFAULT;
INSERT INTO t_cpk VALUES (1,'x','2020-01-01',1),(1,'y','2020-01-01',2),(2,'x','2020-01-02',3),(2,'y','2020-01-02',NULL);
INSERT INTO t_nopk VALUES (1,'dup','2020-01-01 00:00:00.000'),(1,'dup','2020-01-01 00:00:00.000'),
 (2,'two','2020-01-02 00:00:00.002'),(3,NULL,NULL),(4,'four','2020-01-04 00:00:00.004');
"""

CHANGES = [
    # updates, a primary-key change, a composite-key change, keyless updates and deletes
    """
UPDATE t_types SET ti = ti - 1, vc = CONCAT(vc, '!'), biu = 18446744073709551614, e = 'a' WHERE id = 2;
UPDATE t_types SET id = 30 WHERE id = 3;
UPDATE t_cpk SET a = 10 WHERE a = 1 AND b = 'x';
UPDATE t_cpk SET c = '2030-12-31', v = v + 100 WHERE a = 2;
UPDATE t_nopk SET b = 'dup-1' WHERE a = 1 LIMIT 1;
DELETE FROM t_nopk WHERE a = 3;
""",
    # a multi-table transaction and a rolled-back one
    """
START TRANSACTION;
INSERT INTO t_cpk VALUES (3,'z','2021-01-01',7);
UPDATE t_types SET txt = 'in a transaction', dbl = -2.5e-10 WHERE id = 1;
INSERT INTO t_nopk VALUES (5,'txn','2021-01-01 00:00:00.005');
DELETE FROM t_cpk WHERE a = 1 AND b = 'y';
COMMIT;
START TRANSACTION;
INSERT INTO t_cpk VALUES (99,'ghost','2021-01-01',0);
DELETE FROM t_types WHERE id = 1;
UPDATE t_nopk SET b = 'rolled back';
ROLLBACK;
""",
    # ADD COLUMN mid-stream, then rows that use it
    """
ALTER TABLE t_types ADD COLUMN added VARCHAR(20) CHARACTER SET utf8mb4 DEFAULT 'dflt' AFTER id;
ALTER TABLE t_cpk ADD COLUMN w DECIMAL(6,1) NULL;
INSERT INTO t_types (id, added, i, vc) VALUES (6, 'new col', 6, 'after alter');
UPDATE t_types SET added = 'set later' WHERE id = 2;
UPDATE t_cpk SET w = 12.5 WHERE a = 3;
DELETE FROM t_types WHERE id = 4;
""",
]

APPEND = [
    """
INSERT INTO t_types (id, added, tiu, dte, e, s, ip6) VALUES (7, 'phase 2', 200, '2025-05-05', 'c', 'x,y,z', 'fe80::1');
UPDATE t_cpk SET b = 'renamed', v = NULL WHERE a = 10;
INSERT INTO t_nopk VALUES (6,'after flush',NULL),(6,'after flush',NULL);
""",
    """
TRUNCATE TABLE t_nopk;
INSERT INTO t_nopk VALUES (7,'after truncate','2025-01-01 00:00:00.007');
DELETE FROM t_types WHERE id = 30;
UPDATE t_types SET j = '{"k": 1}', u = '00000000-0000-0000-0000-000000000001' WHERE id = 2;
""",
]

DATABASES = {"e2e_full": "FULL", "e2e_min": "MINIMAL"}
TABLES = ("t_types", "t_cpk", "t_nopk")


def run_phase(srv: MariaDBServer, scripts: list[str], *, first: bool = False) -> None:
    """Every script into both databases, each under its binlog_row_metadata; FLUSH BINARY LOGS between."""
    for i, script in enumerate(scripts):
        for db, meta in DATABASES.items():
            srv.sql(f"SET GLOBAL binlog_row_metadata = {meta}")  # applies to the next sessions
            if first and i == 0:
                srv.sql(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
            srv.sql(script, db=db)
        srv.flush_logs()


def server_state(srv: MariaDBServer) -> dict[tuple[str, str], tuple[list[ColumnDef], list[tuple]]]:
    """Every table's columns and rows as the server returns them now (the oracle)."""
    state = {}
    for db in DATABASES:
        for table in TABLES:
            cols = server_columns(srv, db, table)
            state[(db, table)] = (cols, server_rows(srv, db, table, cols))
    return state


def assert_silver_matches(state: dict, warehouse: Path) -> None:
    problems = []
    for (db, table), (cols, want) in state.items():
        got = silver_rows(warehouse, db, table, cols) or []
        if got != want:
            problems.append(_diff(f"{db}.{table}", cols, want, got))
    assert not problems, "\n\n".join(problems)


def assert_silver_matches_server(srv: MariaDBServer, warehouse: Path) -> None:
    assert_silver_matches(server_state(srv), warehouse)


def silver_versions(warehouse: Path) -> dict[str, int]:
    from deltalake import DeltaTable

    out = {}
    for db in DATABASES:
        for table in TABLES:
            path = silver_table_path(warehouse, db, table)
            if DeltaTable.is_deltatable(path):
                out[f"{db}.{table}"] = DeltaTable(path).version()
    return out


# ---------------------------------------------------------------------------------------------------
# the test


@pytest.fixture(scope="module")
def workload(tmp_path_factory):
    """The workload's binlogs in two phases, and the server's tables after each (the oracle):
    one server run, replayed by each backend's test."""
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("e2e")
    srv = MariaDBServer(root / "mariadb", row_image="FULL", row_metadata="MINIMAL")
    srv.start()
    try:
        run_phase(srv, [DDL + ROWS] + CHANGES, first=True)
        copy_binlogs(srv, root / "phase1")
        first = server_state(srv)
        run_phase(srv, APPEND)
        copy_binlogs(srv, root / "phase2")
        second = server_state(srv)
    finally:
        srv.stop()
    return root / "phase1", first, root / "phase2", second


def _cfg(binlogs: Path, warehouse: Path, backend: str = "auto"):
    return load_config(REPO / "conf" / "pipeline.yaml",
                       {"input": str(binlogs), "warehouse": str(warehouse), "progress": False,
                        "delta.backend": backend})


@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_binlogs_to_silver_equal_the_server(spark, workload, backend, tmp_path):  # noqa: F811
    if backend == "spark":
        require_delta_spark(spark)
    phase1, first, phase2, second = workload
    binlogs, warehouse = tmp_path / "binlogs", tmp_path / "warehouse"
    shutil.copytree(phase1, binlogs)
    cfg = _cfg(binlogs, warehouse, backend)

    # 1. in-process, with the shared session
    b = bronze.run(spark, cfg)
    assert b.status == "ok" and b.quarantined == 0
    s = silver_step.run(spark, cfg)
    assert s.status == "ok" and s.quarantined == 0, s.summary()
    assert s.zero_dates > 0  # the zero-date row of t_types
    assert_silver_matches(first, warehouse)
    names = {t: info.get("name_source") for t, info in s.tables.items()}
    assert names["e2e_full.t_types"] == "table_map" and names["e2e_min.t_types"] == "ddl"
    keys = {t: tuple(info.get("keys", ())) for t, info in s.tables.items()}
    assert keys["e2e_min.t_cpk"] == ("a", "b", "c") and keys["e2e_full.t_nopk"] == ()

    # 2. the same input again: nothing changes
    before = silver_versions(warehouse)
    bronze.run(spark, cfg)
    again = silver_step.run(spark, cfg)
    assert again.segments == 0 and silver_versions(warehouse) == before

    # 3. more files (a TRUNCATE among them), applied by the job as a subprocess
    for f in sorted(phase2.iterdir()):
        if not (binlogs / f.name).exists():
            shutil.copy2(f, binlogs / f.name)
    proc = subprocess.run(
        [sys.executable, str(REPO / "jobs" / "run_pipeline.py"), "--binlog-dir", str(binlogs),
         "--warehouse", str(warehouse), "--no-progress", "--delta-backend", backend],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    assert "silver run" in proc.stdout and " ok:" in proc.stdout.split("silver run", 1)[1]
    assert_silver_matches(second, warehouse)


# ---------------------------------------------------------------------------------------------------
# the corpus against its recorded final state

CORPUS_EXCEPTIONS = {  # (db, table) -> why replaying the binlogs cannot give final_state (README)
    ("corpus", "fk_child"): "ON DELETE/UPDATE CASCADE changes are not logged in ROW format",
    ("corpus", "t_stmt"): "rows from STATEMENT/MIXED sections arrive as statements, not row images",
    ("corpus", "seq_a"): "SEQUENCE state is server-assigned",
    ("corpus", "t_versioned"): "ROW_START/ROW_END are server-assigned",
    ("corpus", "t_ddl2"): "renamed and truncated in 03_ddl",
    ("corpus", "t_recreate"): "dropped and re-created in 03_ddl",
    ("corpus", "t_aria"): "emptied by a multi-table DELETE",
}
# Our own open gaps (named in the closing note, not hidden).
KNOWN_GAPS = {
}
CORPUS_NOT_APPLIED = ["corpus.t_ddl", "corpus.t_ddl_renamed", "corpus.t_like", "corpus.t_dropme", "tmpdb.*"]  # gone
CORPUS_COLUMN_EXCEPTIONS = {("corpus", "t_invis"): {"g_virt"}}  # VIRTUAL: computed by the server
CORPUS_ROW_EXCEPTIONS = {  # (db, table) -> (column, value as in the TSV): rows logged as statements
    ("corpus", "t_comp"): ("id", "300"),  # INSERT logged as a compressed statement (10_compressed)
}


def _float_display(col: ColumnDef, v):
    """A FLOAT/DOUBLE as the server displays it: D decimals for FLOAT(M,D)/DOUBLE(M,D), 6
    significant digits for FLOAT (the final-state files hold the displayed text)."""
    if v is None or col.type.lower() not in ("float", "double"):
        return v
    if col.decimals is not None:
        return round(float(v), col.decimals)
    if col.type.lower() == "float":
        return float(f"{float(v):.6g}")
    return v


def _tsv_rows(path: Path) -> tuple[list[str], list[list[str | None]]]:
    lines = path.read_text(encoding="utf-8").split("\n")
    header = lines[0].split("\t")
    rows = []
    for line in lines[1:]:
        if not line:
            continue
        fields = []
        for f in line.split("\t"):
            if f == "\\N":
                fields.append(None)
            else:
                fields.append(f.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r").replace("\\\\", "\\"))
        rows.append(fields)
    return header, rows


def _corpus_expected(col: ColumnDef, text: str | None):
    t = col.type.lower()
    hex_types = _BINARY | {"bit"}
    if text is None:
        return None
    if t in hex_types or (col.charset == "binary" and t in _TEXT):
        return expected_value(col, text, bit_hex=True)
    return expected_value(col, text, hex_text=False)


@pytest.mark.corpus
@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_corpus_silver_equals_final_state(spark, backend, tmp_path):  # noqa: F811
    corpus = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "mariadb-10.11"
    if not corpus.is_dir():
        pytest.skip(f"binlog corpus not found at {corpus}")
    if backend == "spark":
        require_delta_spark(spark)
    warehouse = tmp_path / "warehouse"
    # the documented exceptions are not compared, so not applied either (saves minutes)
    skipped = [f"{db}.{t}" for db, t in {**CORPUS_EXCEPTIONS, **KNOWN_GAPS}] + CORPUS_NOT_APPLIED
    cfg = load_config(REPO / "conf" / "pipeline.yaml", {"input": str(corpus / "binlogs"), "warehouse": str(warehouse),
                                                        "progress": False, "tables.exclude": skipped,
                                                        "delta.backend": backend})
    bronze.run(spark, cfg)
    # only statements that changed rows are quarantined: not the CREATE of CREATE TABLE ... SELECT,
    # whose rows follow as row events (t_ctas), and nothing else but the statement-format rows
    quarantine = delta_io.open_table(str(warehouse / "_pipeline" / "quarantine"))
    reasons = [r["reason"] for r in quarantine.read_arrow().to_pylist()]
    assert not [r for r in reasons if "t_ctas" in r], reasons
    assert all(r.startswith("statement-format change") for r in reasons), reasons
    try:
        silver_step.run(spark, cfg)
    except SilverStepError as e:  # the tables it names differ below; the others were applied
        print(e)
    checked, problems = corpus_problems(corpus, warehouse)
    assert checked > 30
    assert not problems, f"{len(problems)} table(s) differ:\n\n" + "\n\n".join(problems)


def corpus_problems(corpus: Path, warehouse: Path) -> tuple[int, list[str]]:
    """(tables compared, differences) of silver against ``final_state`` (documented exceptions left out)."""
    problems, checked = [], 0
    for create in sorted((corpus / "final_state").glob("*/*.create.sql")):
        db, table = create.parent.name, create.name[: -len(".create.sql")]
        if (db, table) in CORPUS_EXCEPTIONS or (db, table) in KNOWN_GAPS:
            continue
        text = create.read_text(encoding="utf-8")
        h = SchemaHistory()
        try:
            h.add_seed(db, table, text)
        except ValueError as e:
            problems.append(f"{db}.{table}: cannot read {create.name}: {e}")
            continue
        cols = list(h.current(db, table).columns)
        skip = CORPUS_COLUMN_EXCEPTIONS.get((db, table), set())
        header, rows = _tsv_rows(create.with_name(f"{table}.tsv"))
        if (db, table) in CORPUS_ROW_EXCEPTIONS:
            column, value = CORPUS_ROW_EXCEPTIONS[(db, table)]
            rows = [r for r in rows if r[header.index(column)] != value]
        by_name = {c.name: c for c in cols}
        use = [n for n in header if n in by_name and n not in skip]
        use_cols = [by_name[n] for n in use]
        want = sorted((tuple(_float_display(by_name[n], _corpus_expected(by_name[n], r[header.index(n)]))
                             for n in use) for r in rows), key=_sort_key)
        got = sorted((tuple(_float_display(c, v) for c, v in zip(use_cols, r))
                      for r in silver_rows(warehouse, db, table, use_cols) or []), key=_sort_key)
        checked += 1
        if got != want:
            problems.append(_diff(f"{db}.{table}", use_cols, want, got))
    return checked, problems
