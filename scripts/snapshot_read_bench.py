"""How fast :mod:`pipelines.snapshot` reads a dump, on one core: a synthetic mariadb-dump-like file
of one OLTP-ish table (ids, names with accents and quotes, e-mails, DECIMAL, ENUM, DATETIME,
TIMESTAMP(3), TEXT with escapes, JSON), read four ways.

    .venv/bin/python -m scripts.snapshot_read_bench [--mb 100] [--path .bench/snapshot.sql]

=========================  =========================================================================
step                       what is timed
=========================  =========================================================================
outline                    ``DELIMITER`` lines, then the statements that are not data (INSERTs skipped)
statements + VALUES        every statement, and each INSERT's rows as raw literals
rows -> decoder values     and each literal as the binlog decoder's value for its column
rows -> bronze cells       and each value as its bronze cell ``(idx, name, type, text, bin)``
=========================  =========================================================================

MB/s are of CPU time (the process's), so a busy machine shows in the wall-clock column only.
"""
from __future__ import annotations

import argparse
import mmap
import os
import random
import time

from pipelines.snapshot.reader import DumpReading
from pipelines.snapshot.session import DumpState
from pipelines.snapshot.split import delimiter_blocks, delimiter_lines, outline
from pipelines.snapshot.statements import iter_statements

HEADER = """/*M!999999\\- enable the sandbox mode */ 
-- MariaDB dump 10.19  Distrib 10.11.19-MariaDB, for debian-linux-gnu (x86_64)
--
-- Host: localhost    Database: shop
-- ------------------------------------------------------
-- Server version	10.11.19-MariaDB-0+deb12u1-log

/*!40101 SET NAMES utf8mb4 */;
/*!40103 SET TIME_ZONE='+00:00' */;

-- CHANGE MASTER TO MASTER_LOG_FILE='binlog.000004', MASTER_LOG_POS=56962;

DROP TABLE IF EXISTS `orders`;
/*!40101 SET @saved_cs_client     = @@character_set_client */;
/*!40101 SET character_set_client = utf8mb4 */;
CREATE TABLE `orders` (
  `id` bigint(20) unsigned NOT NULL,
  `user_id` int(11) NOT NULL,
  `name` varchar(64) NOT NULL,
  `email` varchar(128) DEFAULT NULL,
  `amount` decimal(12,2) NOT NULL,
  `status` enum('new','paid','shipped','cancelled') NOT NULL,
  `created` datetime NOT NULL,
  `updated` timestamp(3) NULL DEFAULT NULL,
  `note` text DEFAULT NULL,
  `payload` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`payload`)),
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci;
/*!40101 SET character_set_client = @saved_cs_client */;

LOCK TABLES `orders` WRITE;
"""
WORDS = ["alpha", "beta", "gamma", "delta", "café", "straße", "o'brien", "naïve", "zoë", "smith", "jones"]


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace('"', '\\"')


def write_dump(path: str, mb: int, seed: int = 5) -> None:
    """About ``mb`` MiB of extended INSERTs of 2000 rows each, one row per line (mariadb-dump's form)."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as out:
        out.write(HEADER)
        size, i = len(HEADER), 0
        while size < mb << 20:
            rows = []
            for _ in range(2000):
                i += 1
                name = " ".join(rng.choice(WORDS) for _ in range(2))
                note = "NULL" if rng.random() < 0.6 else \
                    "'" + _esc(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 25)))) + "'"
                payload = "'" + _esc('{"sku": "A-%d", "qty": %d, "tags": ["%s"]}' % (
                    rng.randint(1, 99999), rng.randint(1, 9), rng.choice(WORDS))) + "'"
                updated = "NULL" if rng.random() < 0.3 else \
                    f"'2024-05-{rng.randint(1, 28):02d} 10:11:12.{rng.randint(0, 999):03d}'"
                rows.append(
                    f"({i},{rng.randint(1, 10**6)},'{_esc(name)}','{_esc(name.split()[0])}{i}@example.com',"
                    f"{rng.randint(0, 10**7)}.{rng.randint(0, 99):02d},'{rng.choice(['new', 'paid', 'shipped'])}',"
                    f"'2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:"
                    f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}',{updated},{note},{payload})")
            statement = "INSERT INTO `orders` VALUES " + ",\n".join(rows) + ";\n"
            out.write(statement)
            size += len(statement.encode())
        out.write("UNLOCK TABLES;\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--path", default=".bench/snapshot.sql")
    args = ap.parse_args()
    os.makedirs(os.path.dirname(args.path) or ".", exist_ok=True)
    if not os.path.exists(args.path) or os.path.getsize(args.path) < args.mb << 20:
        write_dump(args.path, args.mb)
    with open(args.path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        mb = len(buf) / 2**20

        def timed(label, fn):
            wall, cpu = time.perf_counter(), time.process_time()
            n = fn()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"{label:26s} {mb:7.1f} MB {n:>9} {mb / cpu:7.1f} MB/s cpu {mb / wall:7.1f} MB/s wall")

        def outlined():
            return len(outline(buf, 0, None, blocks=delimiter_blocks(delimiter_lines(buf)))[0])

        def statements():
            return sum(len(st.insert.rows) for st in iter_statements(buf, 0, None, DumpState()) if st.insert)

        def rows(cells):
            def run():
                reading = DumpReading(DumpState.from_header(buf[:4096]), name=args.path)
                return sum(1 for _ in reading.rows(iter_statements(buf, 0, None, reading.state), cells=cells))
            return run

        timed("outline", outlined)
        timed("statements + VALUES", statements)
        timed("rows -> decoder values", rows(False))
        timed("rows -> bronze cells", rows(True))


if __name__ == "__main__":
    main()
