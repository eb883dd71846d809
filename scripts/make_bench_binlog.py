"""Generate a real ROW-format binlog for benchmarks from a private MariaDB server.

    .venv/bin/python -m scripts.make_bench_binlog --rows 1000000 --out .bench/

The workload is an order-processing schema: a 10-column ``orders`` table
(BIGINT key, INT, ENUM, DECIMAL(12,2), DATETIME(6), TIMESTAMP, VARCHAR utf8mb4,
TINYINT UNSIGNED, SMALLINT, DOUBLE) and a narrow ``events`` log table without a
key. Rows are inserted in transactions of ``--batch`` rows with
``INSERT ... SELECT`` from MariaDB's sequence engine, then a fifth of them are
updated (before and after images) and a tenth deleted. The server runs with
ROW format, FULL row image, CRC32 and a 1 GB max_binlog_size, so the result is
normally one file. Prints the path(s) of the binlog file(s) written.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from mariadb_server import MariaDBServer  # noqa: E402

DDL = """
CREATE DATABASE bench;
USE bench;
CREATE TABLE orders (
  id BIGINT NOT NULL PRIMARY KEY,
  customer_id INT NOT NULL,
  status ENUM('new','paid','shipped','cancelled') NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  created DATETIME(6) NOT NULL,
  updated TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
  note VARCHAR(64) CHARACTER SET utf8mb4,
  flags TINYINT UNSIGNED NOT NULL,
  qty SMALLINT,
  price DOUBLE
) ENGINE=InnoDB;
CREATE TABLE events (
  order_id BIGINT,
  kind VARCHAR(16),
  at DATETIME
) ENGINE=InnoDB;
"""


def _insert(lo: int, hi: int) -> str:
    return f"""
BEGIN;
INSERT INTO orders
SELECT seq, seq % 50000, ELT(1 + seq % 4, 'new','paid','shipped','cancelled'),
       (seq % 100000) / 100 + 0.99, TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND + INTERVAL (seq % 1000000) MICROSECOND,
       TIMESTAMP'2024-06-01 00:00:00' + INTERVAL seq SECOND,
       IF(seq % 7 = 0, NULL, CONCAT('order ', seq, ' für kunde ', seq % 50000)),
       seq % 256, IF(seq % 11 = 0, NULL, seq % 30000), seq / 7
FROM seq_{lo}_to_{hi};
INSERT INTO events SELECT seq, 'created', TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq SECOND FROM seq_{lo}_to_{hi} WHERE seq % 4 = 0;
COMMIT;
"""


def generate(rows: int, out: Path, batch: int = 2000) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bench-mdb-"))
    try:
        with MariaDBServer(base, extra_args=("--max-binlog-size=1073741824", "--plugin-load-add=ha_sequence")) as srv:
            srv.sql(DDL)
            script = []
            for lo in range(1, rows + 1, batch):
                script.append(_insert(lo, min(lo + batch - 1, rows)))
                if len(script) >= 50:
                    srv.sql("".join(script), db="bench")
                    script = []
            if script:
                srv.sql("".join(script), db="bench")
            step = max(batch, 1)
            upd = []
            for lo in range(1, rows + 1, step * 5):
                hi = min(lo + step - 1, rows)
                upd.append(f"UPDATE orders SET status='paid', amount=amount+1, note=CONCAT('upd ', id) WHERE id BETWEEN {lo} AND {hi};")
                upd.append(f"DELETE FROM orders WHERE id BETWEEN {lo} AND {lo + step // 2 - 1};")
            srv.sql("\n".join(upd), db="bench")
            srv.flush_logs()
            return _copy_binlogs(srv, out)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def generate_single(inserts: int, out: Path, batch: int = 10_000) -> list[Path]:
    """One keyed table: ``inserts`` inserts, then updates of half the rows and deletes of a quarter
    (300,000 inserts: 525,000 row changes)."""
    out.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bench-mdb-"))
    try:
        with MariaDBServer(base, extra_args=("--max-binlog-size=1073741824", "--plugin-load-add=ha_sequence")) as srv:
            srv.sql(DDL)
            script = [_insert(lo, min(lo + batch - 1, inserts)).split("INSERT INTO events")[0] + "COMMIT;"
                      for lo in range(1, inserts + 1, batch)]
            srv.sql("".join(script), db="bench")
            srv.sql("".join(f"UPDATE orders SET status='paid', amount=amount+1 WHERE id BETWEEN {lo} AND {lo + batch - 1} "
                            f"AND id % 2 = 0;" for lo in range(1, inserts + 1, batch)), db="bench")
            srv.sql("".join(f"DELETE FROM orders WHERE id BETWEEN {lo} AND {lo + batch - 1} AND id % 4 = 1;"
                            for lo in range(1, inserts + 1, batch)), db="bench")
            srv.flush_logs()
            return _copy_binlogs(srv, out)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _copy_binlogs(srv: MariaDBServer, out: Path) -> list[Path]:
    files = []
    for f in srv.binlog_files():
        if f.stat().st_size > 1024:
            dest = out / f.name
            shutil.copyfile(f, dest)
            files.append(dest)
    return files


def _table_workload(n_tables: int, changes: int) -> tuple[str, str]:
    """(DDL, DML) for ``n_tables`` small tables of ``changes`` row changes each: two thirds inserts,
    then updates and deletes (about 2:1) of those rows, one transaction per table."""
    ddl = ["CREATE DATABASE many;", "USE many;"]
    dml = []
    inserts = max(1, (changes * 2 + 2) // 3)
    rest = changes - inserts
    updates = min(inserts, (rest * 2 + 2) // 3)
    deletes = min(inserts - updates, rest - updates) if rest > updates else 0
    for t in range(n_tables):
        ddl.append(f"CREATE TABLE t{t:04d} (id INT NOT NULL PRIMARY KEY, name VARCHAR(40), qty INT, "
                   f"price DECIMAL(10,2), at DATETIME, flag TINYINT UNSIGNED) ENGINE=InnoDB;")
        values = ",".join(f"({i},'name {i} of t{t}',{i * 7 % 1000},{i}.25,'2024-01-01 00:00:{i % 60:02d}',{i % 256})"
                          for i in range(1, inserts + 1))
        stmts = [f"INSERT INTO t{t:04d} VALUES {values};"]
        stmts += [f"UPDATE t{t:04d} SET qty = qty + 1, name = 'renamed {i}' WHERE id = {i};" for i in range(1, updates + 1)]
        stmts += [f"DELETE FROM t{t:04d} WHERE id = {inserts - i};" for i in range(deletes)]
        dml.append("BEGIN;" + "".join(stmts) + "COMMIT;")
    return "\n".join(ddl), "\n".join(dml)


def generate_tables(n_tables: int, changes: int, out: Path, then_updates: int = 0) -> list[Path]:
    """A binlog of ``n_tables`` tables x ``changes`` row changes each (FULL row metadata) in ``out``;
    with ``then_updates``, a second binlog that updates that many of each table's rows (the rows
    silver holds after the first: a run after the first)."""
    out.mkdir(parents=True, exist_ok=True)
    ddl, dml = _table_workload(n_tables, changes)
    base = Path(tempfile.mkdtemp(prefix="bench-mdb-"))
    try:
        with MariaDBServer(base, row_metadata="FULL", extra_args=("--max-binlog-size=1073741824",)) as srv:
            srv.sql(ddl)
            srv.sql(dml, db="many")
            srv.flush_logs()
            if then_updates:
                srv.sql("\n".join(f"UPDATE t{t:04d} SET qty = qty + 100 ORDER BY id LIMIT {then_updates};"
                                  for t in range(n_tables)), db="many")
                srv.flush_logs()
            return _copy_binlogs(srv, out)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=2000)
    p.add_argument("--out", type=Path, default=Path(".bench"))
    p.add_argument("--tables", type=int, default=0, help="instead: this many small tables of --changes each")
    p.add_argument("--changes", type=int, default=30)
    a = p.parse_args(argv)
    files = generate_tables(a.tables, a.changes, a.out) if a.tables else generate(a.rows, a.out, a.batch)
    for f in files:
        print(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
