"""Regenerate the committed sample binlogs (``samples/binlogs/``) from a private MariaDB server.

    .venv/bin/python scripts/make_samples.py                  # writes samples/binlogs/
    .venv/bin/python scripts/make_samples.py --out /tmp/x --row-metadata FULL

The workload is a small shop (database ``shop``):

* ``customers``: INT UNSIGNED AUTO_INCREMENT key, ENUM, DATETIME(3), DECIMAL, utf8mb4 names;
* ``orders``: composite key ``(order_id, line)``, TIMESTAMP(6), DECIMAL;
* ``event_log``: no key at all (duplicates allowed), JSON payload.

In order: the tables are created and filled; a multi-table transaction places an order;
``ALTER TABLE customers ADD COLUMN phone ... AFTER email`` runs mid-stream, followed by rows
that use it; an UPDATE changes a primary key (``customers.id``) and another a composite key
part (``orders.line``); a transaction is rolled back (not logged); rows are deleted and
keyless rows updated. ``FLUSH BINARY LOGS`` separates the steps, so the result is several
files. The server runs with ROW format, FULL row image, CRC32 and
``binlog_row_metadata=MINIMAL`` (no column names in the table maps: silver takes them
from the DDL in the binlog); the final table contents are printed as a check.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from mariadb_server import MariaDBServer  # noqa: E402

SETUP = """
CREATE DATABASE shop CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
USE shop;
CREATE TABLE customers (
  id INT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  name VARCHAR(60) NOT NULL,
  email VARCHAR(120),
  tier ENUM('basic','gold','platinum') NOT NULL DEFAULT 'basic',
  created_at DATETIME(3) NOT NULL,
  balance DECIMAL(12,2) NOT NULL DEFAULT 0.00
) ENGINE=InnoDB;
CREATE TABLE orders (
  order_id INT UNSIGNED NOT NULL,
  line SMALLINT UNSIGNED NOT NULL,
  customer_id INT UNSIGNED NOT NULL,
  sku VARCHAR(20) NOT NULL,
  qty INT NOT NULL,
  price DECIMAL(10,2) NOT NULL,
  placed_at TIMESTAMP(6) NOT NULL DEFAULT '2024-01-01 00:00:00',
  PRIMARY KEY (order_id, line)
) ENGINE=InnoDB;
CREATE TABLE event_log (
  at DATETIME(6) NOT NULL,
  level ENUM('info','warn','error') NOT NULL,
  message TEXT,
  payload JSON
) ENGINE=InnoDB;
INSERT INTO customers (name, email, tier, created_at, balance) VALUES
  ('Ada Lovelace', 'ada@example.com', 'platinum', '2024-01-02 09:00:00.125', 120.50),
  ('Björn Ågren', 'bjorn@example.se', 'gold', '2024-01-03 10:30:00.000', 0.00),
  ('Chen Jing 陈静', NULL, 'basic', '2024-01-04 11:45:30.999', 15.75),
  ('Dmitri', 'dmitri@example.org', 'basic', '2024-01-05 08:00:00.001', 0.00);
INSERT INTO event_log VALUES ('2024-01-05 08:00:00.000001', 'info', 'shop opened', '{"by": "ops"}');
"""

STEPS = [
    # a multi-table transaction: an order with three lines, the customer's balance, a log row
    """
USE shop;
START TRANSACTION;
INSERT INTO orders VALUES
  (1001, 1, 1, 'SKU-RED', 2, 19.99, '2024-02-01 12:00:00.000001'),
  (1001, 2, 1, 'SKU-BLUE', 1, 5.00, '2024-02-01 12:00:00.000001'),
  (1001, 3, 1, 'SKU-GREEN', 10, 0.99, '2024-02-01 12:00:00.000001');
UPDATE customers SET balance = balance - 54.88 WHERE id = 1;
INSERT INTO event_log VALUES ('2024-02-01 12:00:00.5', 'info', 'order 1001 placed', '{"order": 1001, "lines": 3}');
COMMIT;
INSERT INTO orders VALUES (1002, 1, 2, 'SKU-RED', 1, 19.99, '2024-02-02 08:15:00');
INSERT INTO event_log VALUES ('2024-02-02 08:15:00', 'warn', 'stock low: SKU-RED', NULL);
""",
    # schema change mid-stream, then rows that use the new column; primary-key changes
    """
USE shop;
ALTER TABLE customers ADD COLUMN phone VARCHAR(20) NULL AFTER email;
UPDATE customers SET phone = '+44 20 7946 0000' WHERE id = 1;
INSERT INTO customers (name, email, phone, tier, created_at) VALUES
  ('Eve', 'eve@example.net', '+1 555 0100', 'gold', '2024-02-10 16:20:00.000');
UPDATE customers SET id = 100 WHERE id = 3;
UPDATE orders SET line = 5 WHERE order_id = 1001 AND line = 2;
UPDATE orders SET qty = qty + 1, price = 18.99 WHERE order_id = 1001 AND line = 1;
""",
    # a rolled-back transaction (InnoDB: nothing logged), then deletes and keyless updates
    """
USE shop;
START TRANSACTION;
INSERT INTO orders VALUES (1003, 1, 4, 'SKU-GHOST', 1, 1.00, '2024-02-11 00:00:00');
DELETE FROM customers WHERE id = 1;
ROLLBACK;
DELETE FROM orders WHERE order_id = 1002;
UPDATE customers SET tier = 'gold', balance = 42.00 WHERE id = 100;
INSERT INTO event_log VALUES
  ('2024-02-12 09:00:00', 'error', 'payment declined', '{"order": 1002}'),
  ('2024-02-12 09:00:00', 'error', 'payment declined', '{"order": 1002}');
UPDATE event_log SET message = 'stock low: SKU-RED (reordered)' WHERE level = 'warn';
DELETE FROM event_log WHERE level = 'error' LIMIT 1;
DELETE FROM customers WHERE id = 4;
""",
]


def make_samples(out: Path, row_metadata: str = "MINIMAL") -> list[Path]:
    """Run the workload on a fresh private server and copy its binlog files into ``out``
    (emptied first). Returns the copied files."""
    with tempfile.TemporaryDirectory(prefix="make-samples-") as tmp:
        srv = MariaDBServer(Path(tmp) / "mdb", row_metadata=row_metadata, row_image="FULL", checksum="CRC32")
        with srv:
            srv.sql(SETUP)
            for step in STEPS:
                srv.flush_logs()
                srv.sql(step)
            for table in ("customers", "orders", "event_log"):
                rows = srv.query_rows(f"SELECT * FROM shop.{table}")
                print(f"shop.{table}: {len(rows)} rows", file=sys.stderr)
                for r in rows:
                    print("   ", r, file=sys.stderr)
        files = srv.binlog_files()  # after the clean shutdown (STOP event written)
        out.mkdir(parents=True, exist_ok=True)
        for old in out.glob("binlog.*"):
            old.unlink()
        copied = []
        for f in files:
            dest = out / f.name
            shutil.copyfile(f, dest)
            copied.append(dest)
        return copied


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=REPO / "samples" / "binlogs", help="destination folder")
    p.add_argument("--row-metadata", default="MINIMAL", choices=["NO_LOG", "MINIMAL", "FULL"],
                   help="binlog_row_metadata of the server (default MINIMAL)")
    args = p.parse_args(argv)
    files = make_samples(args.out, args.row_metadata)
    total = sum(f.stat().st_size for f in files)
    for f in files:
        print(f)
    print(f"{len(files)} files, {total} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
