"""What the snapshot tests compare: a private MariaDB with a table of every column type MariaDB
has and hostile values, its binlog decoded into bronze cells (the oracle: the decoder's cells of
the very rows the dump holds), and dumps of it written by ``mariadb-dump`` and read back by
:mod:`pipelines.snapshot`.

The decoder's cells come from ``pipelines.bronze.rows.TableLayout`` over the real table map
(``binlog_row_metadata=FULL``); the dump's from :class:`pipelines.snapshot.reader.DumpReading`.
Both are keyed by the row's ``id`` text, so a test compares cell for cell.
"""
from __future__ import annotations

import random
import subprocess
from collections import Counter
from pathlib import Path

from mariadb_server import MariaDBServer, find_binary

from pipelines.binlog.changes import RowChange, iter_changes
from pipelines.binlog.txindex import scan
from pipelines.bronze.rows import TableLayout
from pipelines.snapshot.reader import DumpReading
from pipelines.snapshot.source import DumpFile
from pipelines.snapshot.session import DumpState
from pipelines.snapshot.statements import iter_statements, iter_stream

MARIADB_DUMP = find_binary("mariadb-dump", "mysqldump")
DB, DB2 = "snap", "snap two"

# every MariaDB 10.11 column type (VALUE_TYPES of the soak, the table-map test's list, the rest)
COLUMNS = [
    ("ti", "TINYINT"), ("tiu", "TINYINT UNSIGNED"), ("si", "SMALLINT"), ("siu", "SMALLINT UNSIGNED"),
    ("mi", "MEDIUMINT"), ("miu", "MEDIUMINT UNSIGNED"), ("i", "INT"), ("iu", "INT UNSIGNED"), ("bi", "BIGINT"),
    ("biu", "BIGINT UNSIGNED"), ("bo", "BOOL"),
    ("d1", "DECIMAL(10,2)"), ("d2", "DECIMAL(30,10) UNSIGNED"), ("d3", "DECIMAL(65,30)"), ("d4", "DECIMAL(4,0)"),
    ("d5", "DECIMAL(5,2) UNSIGNED"),
    ("f", "FLOAT"), ("fu", "FLOAT UNSIGNED"), ("f53", "FLOAT(53)"), ("fmd", "FLOAT(7,3)"), ("dbl", "DOUBLE"),
    ("b1", "BIT(1)"), ("b3", "BIT(3)"), ("b17", "BIT(17)"), ("b64", "BIT(64)"),
    ("y", "YEAR"), ("dt", "DATE"), ("t0", "TIME"), ("t3", "TIME(3)"), ("dtm0", "DATETIME"), ("dtm6", "DATETIME(6)"),
    ("ts0", "TIMESTAMP NULL"), ("ts2", "TIMESTAMP(2) NULL"),
    ("c5", "CHAR(5) CHARACTER SET utf8mb4"), ("c3l", "CHAR(3) CHARACTER SET latin1"),
    ("v40", "VARCHAR(40) CHARACTER SET utf8mb4"), ("v20l", "VARCHAR(20) CHARACTER SET latin1"),
    ("v3u", "VARCHAR(10) CHARACTER SET utf8mb3"),
    ("tt", "TINYTEXT CHARACTER SET latin1"), ("tx", "TEXT"), ("mt", "MEDIUMTEXT"), ("lt", "LONGTEXT CHARACTER SET latin1"),
    ("bn", "BINARY(4)"), ("vb", "VARBINARY(300)"), ("tb", "TINYBLOB"), ("bl", "BLOB"), ("mb", "MEDIUMBLOB"),
    ("lb", "LONGBLOB"),
    ("e", "ENUM('a','b c','ü')"), ("el", "ENUM('q','é') CHARACTER SET latin1"), ("s", "SET('x','y','z')"),
    ("sl", "SET('m','ñ') CHARACTER SET latin1"),
    ("j", "JSON"), ("i4", "INET4"), ("i6", "INET6"), ("u", "UUID"),
    ("g", "GEOMETRY"), ("p", "POINT"), ("ls", "LINESTRING"), ("pg", "POLYGON"), ("mp", "MULTIPOINT"),
    ("mls", "MULTILINESTRING"), ("mpg", "MULTIPOLYGON"), ("gc", "GEOMETRYCOLLECTION"),
]
NAMES = [n for n, _ in COLUMNS]

HOSTILE = "it's \"q\" \\ back\\\\slash\nnew\rline\ttab\0nul\x1asub 😀 %_ ;\nINSERT INTO `t` VALUES (1);\n-- x\nDELIMITER ;;"


def sql_string(text: str) -> str:
    """A MySQL string literal of ``text`` (utf8mb4 connection), every byte escaped that needs it."""
    out = text.replace("\\", "\\\\").replace("'", "\\'").replace("\0", "\\0").replace("\n", "\\n") \
        .replace("\r", "\\r").replace("\x1a", "\\Z")
    return "'" + out + "'"


def _geo(wkt: str, srid: int = 0) -> str:
    return f"ST_GeomFromText('{wkt}', {srid})"


def hostile_rows(rng: random.Random) -> list[dict[str, str]]:
    """Rows as ``{column: SQL expression}`` (missing columns are NULL)."""
    blob = bytes(rng.getrandbits(8) for _ in range(300_000)) + b";\nINSERT INTO `t` VALUES (9);\n\r\n\\'\"\0"
    latin1_all = bytes(range(0x20, 0x100))  # every byte a latin1 column can hold (0x81 0x8D ... included)
    rows = [
        {},  # everything NULL
        {  # the largest values
            "ti": "127", "tiu": "255", "si": "32767", "siu": "65535", "mi": "8388607", "miu": "16777215",
            "i": "2147483647", "iu": "4294967295", "bi": "9223372036854775807", "biu": "18446744073709551615",
            "bo": "1", "d1": "99999999.99", "d2": "99999999999999999999.9999999999",
            "d3": "99999999999999999999999999999999999.999999999999999999999999999999", "d4": "9999", "d5": "999.99",
            "f": "3.40282e38", "fu": "123456", "f53": "1.7976931348623157e308", "fmd": "9999.999",
            "dbl": "1.7976931348623157e308", "b1": "b'1'", "b3": "b'111'", "b17": "b'11111111111111111'",
            "b64": "0xFFFFFFFFFFFFFFFF", "y": "2155", "dt": "'9999-12-31'", "t0": "'838:59:59'",
            "t3": "'838:59:59.000'", "dtm0": "'9999-12-31 23:59:59'", "dtm6": "'9999-12-31 23:59:59.999999'",
            "ts0": "'2038-01-19 03:14:07'", "ts2": "'2038-01-19 03:14:07.99'",
            "c5": "'ÿÿÿÿÿ'", "c3l": "'ÿÿÿ'", "v40": sql_string("😀" * 40), "v20l": "'ÿ'", "v3u": "'€€'",
            "tt": "X'" + (b"\xff" * 255).hex() + "'", "tx": sql_string("x" * 65535),
            "mt": sql_string(HOSTILE * 2000), "lt": "X'" + (latin1_all * 200).hex() + "'",
            "bn": "0xFFFFFFFF", "vb": "X'" + bytes(range(256)).hex() + "'", "tb": "X'" + (b"\n" * 255).hex() + "'",
            "bl": "X'" + bytes(rng.getrandbits(8) for _ in range(65535)).hex() + "'",
            "mb": "X'" + blob.hex() + "'", "lb": "X'" + (blob * 3).hex() + "'",
            "e": "'ü'", "el": "'é'", "s": "'x,y,z'", "sl": "'m,ñ'",
            "j": sql_string('{"a": "x\\ny", "b": [1, 2.5, null, true], "ü": "😀", "q": "\\"\'"}'),
            "i4": "'255.255.255.255'", "i6": "'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'",
            "u": "'ffffffff-ffff-4fff-bfff-ffffffffffff'",
            "g": _geo("POLYGON((0 0,10 0,10 10,0 10,0 0),(1 1,2 1,2 2,1 1))", 4326), "p": _geo("POINT(1e308 -1e-308)"),
            "ls": _geo("LINESTRING(0 0,1 1,2 0.5)"), "pg": _geo("POLYGON((0 0,1 0,1 1,0 0))"),
            "mp": _geo("MULTIPOINT(0 0,1 1)"), "mls": _geo("MULTILINESTRING((0 0,1 1),(2 2,3 3))"),
            "mpg": _geo("MULTIPOLYGON(((0 0,1 0,1 1,0 0)))"),
            "gc": _geo("GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))", 3857),
        },
        {  # the smallest values, zero dates, empty strings
            "ti": "-128", "tiu": "0", "si": "-32768", "siu": "0", "mi": "-8388608", "miu": "0", "i": "-2147483648",
            "iu": "0", "bi": "-9223372036854775808", "biu": "0", "bo": "0", "d1": "-99999999.99", "d2": "0",
            "d3": "-0.000000000000000000000000000001", "d4": "-9999", "d5": "0.01", "f": "-1.17549e-38",
            "fu": "0", "f53": "-4.9e-324", "fmd": "-9999.999", "dbl": "-2.2250738585072014e-308", "b1": "b'0'",
            "b3": "0", "b17": "0", "b64": "0", "y": "0000", "dt": "'0000-00-00'", "t0": "'-838:59:59'",
            "t3": "'-00:00:00.001'", "dtm0": "'0000-00-00 00:00:00'", "dtm6": "'0000-00-00 00:00:00.000000'",
            "ts0": "'0000-00-00 00:00:00'", "ts2": "'1970-01-01 00:00:01.01'", "c5": "''", "c3l": "''", "v40": "''",
            "v20l": "''", "v3u": "''", "tt": "''", "tx": "''", "mt": "''", "lt": "''", "bn": "0x00", "vb": "''",
            "tb": "''", "bl": "''", "mb": "''", "lb": "''", "e": "''", "el": "'q'", "s": "''", "sl": "''",
            "j": "'null'", "i4": "'0.0.0.0'", "i6": "'::'", "u": "'00000000-0000-0000-0000-000000000000'",
            "g": _geo("POINT(0 0)"), "p": _geo("POINT(-0 0)"), "ls": _geo("LINESTRING(0 0,0 0)"),
            "pg": _geo("POLYGON((0 0,0 0,0 0,0 0))"), "mp": _geo("MULTIPOINT(0 0)"),
            "mls": _geo("MULTILINESTRING((0 0,0 0))"), "mpg": _geo("MULTIPOLYGON(((0 0,0 0,0 0,0 0)))"),
            "gc": _geo("GEOMETRYCOLLECTION EMPTY"),
        },
        {  # hostile text, invalid and partial dates, trailing spaces and zeros
            "i": "-1", "d1": "-0.5", "d3": "0", "f": "-0.5", "fu": "1e-05", "f53": "0.1", "fmd": "0.001",
            "dbl": "0.1", "b17": "b'10101'", "b64": "0x8000000000000000", "y": "1901", "dt": "'2024-02-30'",
            "t0": "'00:00:00'", "t3": "'-00:00:01.5'", "dtm0": "'2024-00-10 12:00:00'", "dtm6": "'2024-02-30 01:02:03.5'",
            "ts0": "'1970-01-01 00:00:01'", "ts2": "'2024-06-30 23:59:59.5'",
            "c5": "'a  '", "c3l": "X'819D'", "v40": sql_string(HOSTILE[:40]), "v20l": "X'00808D8F909D0aFF'",
            "v3u": "'a\\\\b'", "tt": sql_string("é\n\t\\"), "tx": sql_string(HOSTILE), "mt": sql_string("\n" * 1000),
            "lt": "X'0D0A5C2722'", "bn": "0x61000000", "vb": "0x000A0D1A5C27225F25FF", "tb": "0x00",
            "bl": sql_string("DELIMITER ;;\nCREATE TRIGGER x;;\n"), "mb": "0x3B0A", "lb": "0x0A",
            "e": "'b c'", "s": "'z,x'", "j": sql_string('[]'), "i4": "'10.0.0.1'", "i6": "'::ffff:1.2.3.4'",
            "u": "'123e4567-e89b-12d3-a456-426614174000'", "p": _geo("POINT(1 2)", 4326),
        },
    ]
    for k in range(40):  # ordinary rows: many, so splitting has rows to split
        rows.append({
            "i": str(rng.randint(-2**31, 2**31 - 1)), "biu": str(rng.getrandbits(64)),
            "d1": f"{rng.randint(-10**7, 10**7)}.{rng.randint(0, 99):02d}", "f": str(rng.randint(-9999, 9999) / 4),
            "dbl": repr(rng.uniform(-1e6, 1e6)), "b17": str(rng.getrandbits(17)), "y": str(rng.randint(1901, 2155)),
            "dt": f"'2{rng.randint(0, 999):03d}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}'",
            "t3": f"'{rng.randint(-838, 838)}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}'",
            "dtm6": f"'20{rng.randint(10, 37)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 0{rng.randint(0, 9)}:3{rng.randint(0, 9)}"
                    f":0{rng.randint(0, 9)}.{rng.getrandbits(19):06d}'",
            "ts2": f"'20{rng.randint(10, 37)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 0{rng.randint(0, 9)}:3{rng.randint(0, 9)}"
                   f":0{rng.randint(0, 9)}.{rng.randint(0, 99):02d}'",
            "v40": sql_string("".join(rng.choice("ab'\\\n\t\"é😀;()") for _ in range(rng.randint(0, 40)))),
            "v20l": "X'" + bytes(rng.getrandbits(8) | 0x20 for _ in range(rng.randint(0, 20))).hex() + "'",
            "vb": "X'" + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 300))).hex() + "'",
            "bl": "X'" + bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 5000))).hex() + "'",
            "e": rng.choice(["'a'", "'b c'", "'ü'", "NULL"]), "s": rng.choice(["'x'", "'y,z'", "''", "'x,y,z'"]),
            "j": sql_string('{"k": %d, "s": "%s"}' % (k, rng.choice(["a", "\\n", "é", "😀"]))),
            "i6": f"'{':'.join(f'{rng.getrandbits(16):x}' for _ in range(8))}'",
            "u": f"'{rng.getrandbits(32):08x}-{rng.getrandbits(16):04x}-4{rng.getrandbits(12):03x}-a{rng.getrandbits(12):03x}"
                 f"-{rng.getrandbits(48):012x}'",
            "g": _geo(f"POINT({rng.randint(-99, 99)} {rng.randint(-99, 99)}.5)", rng.choice([0, 4326])),
        })
    return rows


def create_tables(srv: MariaDBServer) -> None:
    """``snap.every_type`` (every column type), ``snap.generated`` (virtual, stored and invisible
    columns: mariadb-dump writes its INSERTs with a column list), ``snap.keyless`` (no key) and
    ```snap two`.`odd name``` (another database, names that need quoting), with a trigger and a
    procedure whose bodies hold lines that look like statements."""
    cols = ", ".join(f"`{n}` {t}" for n, t in COLUMNS)
    srv.sql(f"CREATE DATABASE `{DB}` CHARACTER SET utf8mb4; CREATE DATABASE `{DB2}` CHARACTER SET latin1")
    srv.sql(f"CREATE TABLE every_type (id INT PRIMARY KEY, {cols}) CHARACTER SET utf8mb4", db=DB)
    srv.sql("CREATE TABLE generated (id INT PRIMARY KEY, a VARCHAR(10) DEFAULT 'x\\ny;' COMMENT 'multi\\nline;', "
            "b INT AS (id * 2) VIRTUAL, c INT AS (id + 1) STORED, h INT INVISIBLE DEFAULT 7, "
            "CONSTRAINT ck CHECK (a <> 'q\\nr;')) COMMENT='t\\nc'", db=DB)
    srv.sql("CREATE TABLE keyless (n INT, t TEXT)", db=DB)
    srv.sql("CREATE TABLE `odd name` (`id` INT PRIMARY KEY, `a``b` VARCHAR(10), `größe` TEXT) CHARACTER SET latin1",
            db=DB2)
    srv.sql("DELIMITER ;;\n"
            "CREATE TRIGGER keyless_ai AFTER INSERT ON keyless FOR EACH ROW BEGIN\n"
            "SET @x = 'a\n;\nINSERT INTO `keyless` VALUES (1,\\'t\\');\n-- not a comment\n';\n"
            "END;;\n"
            "CREATE PROCEDURE p()\nBEGIN\nSELECT 'line one;\nINSERT INTO `every_type` (id) VALUES (99);\nUSE `x`;\n"
            "DELIMITER ;\n' AS s;\nEND;;\nDELIMITER ;\n", db=DB)


def fill(srv: MariaDBServer, seed: int = 7) -> None:
    rng = random.Random(seed)
    statements = []
    for k, row in enumerate(hostile_rows(rng), 1):
        names = ["id"] + list(row)
        statements.append(f"INSERT INTO every_type ({', '.join(f'`{n}`' for n in names)}) "
                          f"VALUES ({', '.join([str(k)] + list(row.values()))});")
    srv.sql("SET SESSION sql_mode = 'ALLOW_INVALID_DATES,NO_ENGINE_SUBSTITUTION';\n" + "\n".join(statements), db=DB)
    srv.sql("INSERT INTO generated (id, a, h) VALUES (1, 'z', 9), (2, NULL, NULL), (3, 'a\\nb', 7);"
            "INSERT INTO keyless VALUES (1, 'one'), (1, 'one'), (NULL, NULL), (2, 'two\\n;');", db=DB)
    srv.sql("INSERT INTO `odd name` VALUES (1, 'q''t', 'größe ÿ'), (2, NULL, X'FF00');", db=DB2)


def binlog_cells(srv: MariaDBServer, dbs: tuple[str, ...] = (DB, DB2)) -> dict[tuple[str, str], Counter]:
    """Every inserted row of ``dbs`` in the server's closed binlogs as the decoder's bronze cells,
    per table: a multiset of cell tuples (keyless tables may repeat a row)."""
    out: dict[tuple[str, str], Counter] = {}
    layouts: dict[int, TableLayout] = {}
    for path in srv.binlog_files()[:-1]:
        for ch in iter_changes(str(path), scan(str(path))):
            if isinstance(ch, RowChange) and ch.db in dbs:
                assert ch.op == "insert", ch
                layout = layouts.setdefault(id(ch.table_map), TableLayout(ch.table_map))
                out.setdefault((ch.db, ch.table), Counter())[tuple(layout.image(ch.columns_after, ch.after))] += 1
    return out


def dump(srv: MariaDBServer, dest: Path, *options: str, databases: tuple[str, ...] = (DB, DB2)) -> Path:
    """``mariadb-dump`` of the server with ``options`` into ``dest`` (``--databases`` of
    ``databases`` unless the options choose otherwise)."""
    args = [MARIADB_DUMP, "--no-defaults", f"--socket={srv.socket}", "--user=root", "--single-transaction",
            "--routines", "--triggers", *options]
    if not any(o.startswith(("--all-databases", "--tab")) for o in options) and "--one-db" not in options:
        args += ["--databases", *databases]
    elif "--one-db" in options:
        args.remove("--one-db")
        args.append(databases[0])
    with open(dest, "wb") as out:
        done = subprocess.run(args, stdout=out, stderr=subprocess.PIPE, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    return dest


def read_cells(buf, name: str = "dump.sql", start: int = 0, stop: int | None = None, reading: DumpReading | None = None
               ) -> dict[tuple[str, str], Counter]:
    """The dump's rows as cells per table, read with :mod:`pipelines.snapshot`."""
    reading = reading or DumpReading(DumpState.from_header(bytes(buf[:4096])), name=name)
    out: dict[tuple[str, str], Counter] = {}
    for row in reading.rows(iter_statements(buf, start, stop, reading.state, name=name)):
        out.setdefault((row.db, row.table), Counter())[tuple(row.cells)] += 1
    return out


def read_file_cells(path: Path) -> dict[tuple[str, str], Counter]:
    """A dump file of any compression, read as a stream."""
    d = DumpFile(path)
    reading = DumpReading(DumpState.from_header(d.head(4096)), name=d.name)
    out: dict[tuple[str, str], Counter] = {}
    for row in reading.rows(iter_stream(d.chunks(1 << 16), reading.state, name=d.name, chunk_floor=1 << 16)):
        out.setdefault((row.db, row.table), Counter())[tuple(row.cells)] += 1
    return out


def differences(expected: dict, got: dict, limit: int = 8) -> list[str]:
    """Readable differences between two ``{table: Counter(cells)}`` maps: rows of one side missing
    from the other, and for each the cells that differ from the nearest row of the other side."""
    out = []
    for table in sorted(set(expected) | set(got)):
        want, have = expected.get(table, Counter()), got.get(table, Counter())
        missing, extra = want - have, have - want
        for cells in list(missing)[:limit]:
            close = min(extra, key=lambda c: sum(a != b for a, b in zip(c, cells)), default=())
            diff = [(a, b) for a, b in zip(cells, close) if a != b]
            out.append(f"{table}: a binlog row is not in the dump; the nearest dump row differs in "
                       + "; ".join(f"binlog {a!r:.300} dump {b!r:.300}" for a, b in diff[:6]))
        if len(missing) > limit:
            out.append(f"{table}: and {len(missing) - limit} rows more")
        if not missing and extra:
            out.append(f"{table}: {sum(extra.values())} dump rows are not in the binlog")
    return out
