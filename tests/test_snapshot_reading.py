"""The dump reader's parts without a server: MySQL's header forms (no MySQL here: hand-written from
its documentation and mysqldump's source), mydumper folders (not installed: written by hand from
its documented layout), literals, statements and cells at their edges. The forms mariadb-dump
writes are read from real dumps in ``test_snapshot_dumps.py``."""
from __future__ import annotations

import datetime as dt
import gzip
from decimal import ROUND_HALF_EVEN, Decimal
import zstandard

import pytest
from hypothesis import given, settings, strategies as st

from pipelines.binlog.values import InvalidText
from pipelines.schema.model import ColumnDef, TableSchema
from pipelines.snapshot.cells import RowReader
from pipelines.snapshot.tablemap import create_table, table_map
from pipelines.snapshot.errors import CorruptDump, DumpError, NoPosition, TruncatedDump, UnsupportedDump
from pipelines.snapshot.mydumper import iter_chunk, not_loaded, read_mydumper_folder
from pipelines.snapshot.position import dump_position, mydumper_position, parse_user_gtid, parse_user_position
from pipelines.snapshot.reader import DumpReading
from pipelines.snapshot.session import DumpState
from pipelines.snapshot.split import delimiter_blocks, delimiter_lines, next_statement_start
from pipelines.snapshot.statements import iter_statements, iter_stream
from pipelines.snapshot.values import Binary, Introduced, parse_values, parse_values_exact, unescape

UUID1 = "3E11FA47-71CA-11E1-9E33-C80AA9429562"
UUID2 = "4f11fa47-71ca-11e1-9e33-c80aa9429563"


# -- positions -------------------------------------------------------------------------------------

MYSQL_57 = f"""-- MySQL dump 10.13  Distrib 5.7.25, for el7 (x86_64)
--
-- Host: 192.168.199.120    Database: test
-- ------------------------------------------------------
-- Server version	5.7.25-log

/*!40101 SET NAMES utf8 */;
SET @MYSQLDUMP_TEMP_LOG_BIN = @@SESSION.SQL_LOG_BIN;
SET @@SESSION.SQL_LOG_BIN= 0;

--
-- GTID state at the beginning of the backup
--

SET @@GLOBAL.GTID_PURGED='{UUID1}:1-5,
{UUID2}:1-3:7';

--
-- Position to start replication or point-in-time recovery from
--

-- CHANGE MASTER TO MASTER_LOG_FILE='mysql-bin.000002', MASTER_LOG_POS=6215;

--
-- Current Database: `test`
--
"""

MYSQL_84 = f"""-- MySQL dump 10.13  Distrib 8.4.0, for Linux (x86_64)
-- Server version	8.4.0

/*!50503 SET NAMES utf8mb4 */;
SET @@SESSION.SQL_LOG_BIN= 0;

--
-- GTID state at the beginning of the backup
--

SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ '{UUID1}:1-147115,
{UUID2}:1-61558';

--
-- Position to start replication or point-in-time recovery from
--

CHANGE REPLICATION SOURCE TO SOURCE_LOG_FILE='binlog.000045', SOURCE_LOG_POS=1568;
"""

MYSQL_REPLICA = """-- MySQL dump 10.13  Distrib 8.0.35
-- Server version	8.0.35

--
-- Position to start replication or point-in-time recovery from (the source of this replica)
--

-- CHANGE REPLICATION SOURCE TO SOURCE_LOG_FILE='source-bin.000003', SOURCE_LOG_POS=1234;
"""

MYSQL_CHANNELS = """-- Server version	8.0.35
--
-- Position to start replication or point-in-time recovery from (the source of this replica)
--

CHANGE REPLICATION SOURCE TO SOURCE_HOST='a', SOURCE_PORT=3306, SOURCE_LOG_FILE='a-bin.000001', SOURCE_LOG_POS=4 FOR CHANNEL 'one';
CHANGE REPLICATION SOURCE TO SOURCE_HOST='b', SOURCE_PORT=3306, SOURCE_LOG_FILE='b-bin.000009', SOURCE_LOG_POS=99 FOR CHANNEL 'two';
"""

MARIADB_103_GTID = """-- MySQL dump 10.17  Distrib 10.3.12-MariaDB, for Linux (x86_64)
-- Server version	10.3.12-MariaDB-log

--
-- Position to start replication or point-in-time recovery from
--

-- CHANGE MASTER TO MASTER_LOG_FILE='mariadb-bin.000004', MASTER_LOG_POS=928;

--
-- GTID to start replication from
--

CHANGE MASTER TO MASTER_HOST='test', MASTER_USE_GTID=slave_pos;
SET GLOBAL gtid_slave_pos='0-264-14318,1-264-7';
"""


@pytest.mark.parametrize("text, want", [
    (MYSQL_57, ("mysql-bin.000002", 6215, f"{UUID1}:1-5,{UUID2}:1-3:7", "mysql", "master-data", True, False)),
    (MYSQL_84, ("binlog.000045", 1568, f"{UUID1}:1-147115,{UUID2}:1-61558", "mysql", "source-data", False, False)),
    (MYSQL_REPLICA, ("source-bin.000003", 1234, None, None, "dump-slave", True, True)),
    (MARIADB_103_GTID, ("mariadb-bin.000004", 928, "0-264-14318,1-264-7", "mariadb", "master-data", True, False)),
    ("-- CHANGE MASTER TO MASTER_LOG_FILE='gbichot2-bin.000007',MASTER_LOG_POS=4;\n",
     ("gbichot2-bin.000007", 4, None, None, "master-data", True, False)),
    (f"SET @@GLOBAL.GTID_PURGED='{UUID1}:1-9';\n", (None, None, f"{UUID1}:1-9", "mysql", "gtid-purged", False, False)),
    (f"-- SET @@GLOBAL.GTID_PURGED=/*!80000 '+'*/ '{UUID1}:1-9,\n-- {UUID2}:4';\n",
     (None, None, f"{UUID1}:1-9,{UUID2}:4", "mysql", "gtid-purged", True, False)),
], ids=["mysql5.7", "mysql8.4", "dump-replica", "mariadb10.3-gtid", "old-spacing", "gtid-only", "gtid-commented"])
def test_mysql_and_old_header_forms(text, want):
    p = dump_position(text.encode())
    assert (p.file, p.pos, p.gtid, p.gtid_flavor, p.form, p.commented, p.of_source) == want


def test_the_position_after_the_data_is_read_from_the_tail():
    head = b"-- CHANGE MASTER TO MASTER_LOG_FILE='binlog.000004', MASTER_LOG_POS=56962;\n" + b"x" * 100
    tail = b"-- SET GLOBAL gtid_slave_pos='0-1-42';\n"
    p = dump_position(head, tail, tail_offset=10_000_000)
    assert (p.file, p.pos, p.gtid) == ("binlog.000004", 56962, "0-1-42")


def test_positions_that_cannot_be_chosen_are_refused():
    with pytest.raises(DumpError, match="several binlog positions.*--position FILE:POS"):
        dump_position(MYSQL_CHANNELS.encode(), name="replica.sql")
    with pytest.raises(NoPosition) as e:
        dump_position(b"-- MySQL dump\nCREATE TABLE t (a int);\n", name="plain.sql")
    message = str(e.value)
    assert message.startswith("plain.sql: offset 0: ") and "--position FILE:POS" in message and "--gtid SET" in message
    with pytest.raises(CorruptDump, match="neither a MySQL"):
        dump_position(b"SET GLOBAL gtid_slave_pos='0-1';\n")


def test_user_positions():
    p = parse_user_position("binlog.000004:56962")
    assert (p.file, p.pos, p.form) == ("binlog.000004", 56962, "user")
    assert parse_user_gtid(f" {UUID1}:1-5 ").gtid_flavor == "mysql"
    assert parse_user_gtid("0-1-42,1-2-3").gtid == "0-1-42,1-2-3"
    for bad in ("binlog.000004", ":4", "binlog.000004:x", "/tmp/binlog.000004:4"):
        with pytest.raises(DumpError, match="FILE:POS"):
            parse_user_position(bad)
    with pytest.raises(DumpError, match="--gtid"):
        parse_user_gtid("banana")


@pytest.mark.parametrize("text, want", [
    ("Started dump at: 2011-05-05 13:57:17\nSHOW MASTER STATUS:\n\tLog: linuxjedi-laptop-bin.000001\n\tPos: 106\n\n"
     "Finished dump at: 2011-05-05 13:57:17\n", ("linuxjedi-laptop-bin.000001", 106, None, False)),
    ("Started dump at: 2020-01-01\nSHOW MASTER STATUS:\n\tLog: mysql-bin.000003\n\tPos: 1234\n\tGTID:0-1-77\n\n"
     "SHOW SLAVE STATUS:\n\tHost: src\n\tLog: src-bin.000001\n\tPos: 4\n\n", ("mysql-bin.000003", 1234, "0-1-77", False)),
    (f"# Started dump at: 2023-06-09 11:47:18\n[master]\n# Channel_Name = '' # It can be use to setup replication FOR "
     f"CHANNEL\nFile = mydumper1-bin.000017\nPosition = 241149225\nExecuted_Gtid_Set = {UUID1}:1-147115,{UUID2}:1-61558\n\n"
     "[`sakila`.`store`]\nRows = 2\n", ("mydumper1-bin.000017", 241149225, f"{UUID1}:1-147115,{UUID2}:1-61558", False)),
    ("[source]\n#SOURCE_HOST = \"db1\"\n#SOURCE_PORT = \n#SOURCE_SSL = {0|1}\nexecuted_gtid_set = \"\"\n"
     "SOURCE_LOG_FILE = \"binlog.000012\"\nSOURCE_LOG_POS = 157\n#SOURCE_AUTO_POSITION = {0|1}\n",
     ("binlog.000012", 157, None, False)),
    ("SHOW SLAVE STATUS:\n\tHost: src\n\tLog: src-bin.000001\n\tPos: 4\n\n", ("src-bin.000001", 4, None, True)),
], ids=["0.9", "0.10-gtid", "0.14", "0.15-source-data", "replica-only"])
def test_mydumper_metadata(text, want):
    p = mydumper_position(text)
    assert (p.file, p.pos, p.gtid, p.of_source) == want and p.form == "mydumper"


# -- mydumper folders ---------------------------------------------------------------------------

CHUNK_HEAD = b"/*!40101 SET NAMES binary*/;\n/*!40014 SET FOREIGN_KEY_CHECKS=0*/;\n/*!40103 SET TIME_ZONE='+00:00' */;\n"


def test_mydumper_folder(tmp_path):
    (tmp_path / "metadata").write_text(f"# Started dump at: 2023-06-09\n[master]\nFile = bin.000017\nPosition = 4\n"
                                       f"Executed_Gtid_Set = 0-1-9\n")
    (tmp_path / "shop-schema-create.sql").write_bytes(b"CREATE DATABASE /*!32312 IF NOT EXISTS*/ `shop` "
                                                      b"/*!40100 DEFAULT CHARACTER SET utf8mb4 */;\n")
    (tmp_path / "shop.t-schema.sql").write_bytes(
        b"/*!40101 SET NAMES binary*/;\n/*!40014 SET FOREIGN_KEY_CHECKS=0*/;\n\nCREATE TABLE `t` (\n"
        b"  `id` int(11) NOT NULL,\n  `v` varchar(20) CHARACTER SET latin1 DEFAULT NULL,\n  `u` text,\n"
        b"  `b` varbinary(8) DEFAULT NULL,\n  `y` year(4) DEFAULT NULL,\n  `ts` timestamp NULL DEFAULT NULL,\n"
        b"  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;\n")
    (tmp_path / "shop.t-schema-triggers.sql").write_bytes(b"CREATE TRIGGER x BEFORE INSERT ON t FOR EACH ROW SET @a=1;\n")
    (tmp_path / "shop.t.00000.sql").write_bytes(
        CHUNK_HEAD + b'INSERT INTO `t` VALUES(1,"caf\xe9 \\"q\\" it\'s","\xf0\x9f\x98\x80",0x00FF0A,2024,'
                     b'"2024-01-02 03:04:05"),\n(2,NULL,"a\\nb",NULL,0,"0000-00-00 00:00:00");\n')
    (tmp_path / "shop.t.00001.sql.gz").write_bytes(gzip.compress(
        CHUNK_HEAD + b'INSERT INTO `t` (`id`,`v`) VALUES\n(3,"\x81\x8d"),\n(4,"");\n'))
    (tmp_path / "shop.t.00002.00000.sql.zst").write_bytes(zstandard.ZstdCompressor().compress(
        CHUNK_HEAD + b"INSERT INTO `t` VALUES(5,'x','y',X'',1901,NULL);\n"))
    folder = read_mydumper_folder(str(tmp_path))
    assert folder.position().file == "bin.000017" and folder.position().gtid_flavor == "mariadb"
    assert folder.skipped == ("shop.t-schema-triggers.sql",)
    (table,) = folder.tables
    assert (table.db, table.table) == ("shop", "t")
    assert [c.rsplit("/", 1)[1] for c in table.chunks] == ["shop.t.00000.sql", "shop.t.00001.sql.gz",
                                                           "shop.t.00002.00000.sql.zst"]
    rows = {}
    for chunk in table.chunks:
        for stmt, state in iter_chunk(table, chunk, flavor="mariadb"):
            assert state.client_charset == "binary" and state.time_zone == "+00:00"
            reader = RowReader(table.db, table.table, table.schema, client_charset=state.client_charset,
                               time_zone=state.time_zone, flavor="mariadb")
            for lits in stmt.insert.rows:
                cells = reader.cells(lits, stmt.insert.columns)
                rows[cells[0][3]] = {c[1]: (c[3], c[4]) for c in cells}
    assert rows["1"] == {"id": ("1", None), "v": ('café "q" it\'s', None), "u": ("😀", None), "b": (None, b"\x00\xff\n"),
                         "y": ("2024", None), "ts": ("2024-01-02 03:04:05", None)}
    assert rows["2"]["u"] == ("a\nb", None) and rows["2"]["ts"] == ("0000-00-00 00:00:00", None)
    assert rows["3"] == {"id": ("3", None), "v": ("\x81\x8d", None)}  # latin1's bytes 0x81 0x8D: MySQL's own map
    assert rows["5"]["b"] == (None, b"") and rows["5"]["y"] == ("1901", None)


def test_what_a_mydumper_folder_does_not_load(tmp_path):
    (tmp_path / "metadata").write_text("[master]\nFile = bin.000017\nPosition = 4\n")
    (tmp_path / "shop-schema-create.sql").write_bytes(b"CREATE DATABASE `shop`;\n")
    (tmp_path / "shop.t-schema.sql").write_bytes(b"CREATE TABLE `t` (`id` int NOT NULL PRIMARY KEY);\n")
    (tmp_path / "shop.v-schema.sql").write_bytes(b"CREATE TABLE `v` (`id` tinyint NOT NULL) ENGINE=MyISAM;\n")
    (tmp_path / "shop.v-schema-view.sql.gz").write_bytes(gzip.compress(
        b"DROP TABLE IF EXISTS `v`;\nCREATE ALGORITHM=UNDEFINED VIEW `v` AS select `t`.`id` AS `id` from `t`;\n"))
    (tmp_path / "shop-schema-post.sql").write_bytes(
        b"DELIMITER ;;\nCREATE PROCEDURE `p`() BEGIN SELECT 1; SELECT 2; END ;;\nDELIMITER ;\n")
    folder = read_mydumper_folder(str(tmp_path))
    assert [t.table for t in folder.tables] == ["t"]  # v's -schema.sql is the view's placeholder table
    assert folder.skipped == ("shop-schema-post.sql", "shop.v-schema-view.sql.gz", "shop.v-schema.sql")
    assert not_loaded(folder) == {"CREATE ALGORITHM": 1, "CREATE PROCEDURE": 1}
    (tmp_path / "shop.t.00000.csv").write_bytes(b"1\n")
    with pytest.raises(UnsupportedDump, match="--csv or --load-data") as e:
        not_loaded(read_mydumper_folder(str(tmp_path)))
    assert e.value.file.endswith("shop.t.00000.csv")


def test_an_unfinished_mydumper_folder(tmp_path):
    (tmp_path / "metadata.partial").write_text("# Started dump at: 2023-06-09\n")
    with pytest.raises(DumpError, match="did not finish"):
        read_mydumper_folder(str(tmp_path))


# -- literals -------------------------------------------------------------------------------------

def test_literal_forms():
    text = (b"(NULL,null,-0,+1,1e10,-1.5E-3,.5,'it''s \\' \\\" \\b\\n\\r\\t\\Z\\0\\\\ \\% \\_ \\q',\"d\"\"q\\\"\","
            b"0x0aF,X'00ff',x'',b'101',B'',0b11,_binary 'x\\0',_utf8mb4'\xc3\xa9',_latin1 0xE9,_binary X'41',TRUE,false);")
    rows, end = parse_values(text, 0)
    assert end == len(text)
    assert rows == [(None, None, "-0", "+1", "1e10", "-1.5E-3", ".5",
                     b"it's ' \" \b\n\r\t\x1a\0\\ \\% \\_ q", b'd"q"', Binary(b"\x00\xaf"), Binary(b"\x00\xff"),
                     Binary(b""), Binary(b"\x05"), Binary(b""), Binary(b"\x03"), Binary(b"x\0"),
                     Introduced(b"\xc3\xa9", "utf8mb4"), Introduced(b"\xe9", "latin1"), Binary(b"A"), "1", "0")]
    assert type(rows[0][17]) is Introduced and rows[0][17].charset == "latin1"
    assert unescape(b'a""b\\"', b'"') == b'a"b"'


_LITERALS = st.one_of(
    st.just(("NULL", None)),
    st.integers(-2**64, 2**64).map(lambda n: (str(n), str(n))),
    st.binary(max_size=30).map(lambda b: ("0x" + b.hex().upper(), Binary(b)) if b else ("''", b"")),
    st.binary(max_size=40).map(lambda b: (
        "'" + b.decode("latin-1").replace("\\", "\\\\").replace("'", "''").replace("\n", "\\n").replace("\r", "\\r")
        .replace("\0", "\\0") + "'", b)),
)


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(_LITERALS, min_size=1, max_size=6), min_size=1, max_size=5), width=st.booleans(),
       newline=st.sampled_from([",", ",\n", ", \r\n "]))
def test_the_fast_path_reads_what_the_exact_one_reads(rows, width, newline):
    if width:  # all rows of one width, as a dump writes them
        rows = [r[:1] * len(rows[0]) for r in rows]
    text = ("INSERT INTO t VALUES " + newline.join("(" + ",".join(t for t, _ in r) + ")" for r in rows) + ";\n")
    buf = text.encode("latin-1")
    start = len("INSERT INTO t VALUES ")
    want = [tuple(v for _, v in r) for r in rows]
    assert parse_values(buf, start) == parse_values_exact(buf, start) == (want, len(buf) - 1)


def _compiled_rows():
    from pipelines.snapshot import values

    assert values._c_values_rows is not None, "pipelines/snapshot/_speedups.c is not built: run make setup"
    return values


# every kind of literal, in the forms a dump writes and some it does not
_TOKENS = st.sampled_from([
    "NULL", "null", "Nope", "-0", "+1", "1e10", "-1.5E-3", ".5", "1.", ".", "1e", "0x", "0x0aF", "0xzz", "X'00ff'",
    "x''", "X'0g'", "b'101'", "B''", "0b11", "_binary 'x\\0'", "_utf8mb4'\xc3\xa9'", "_latin1 0xE9", "_binary X'41'",
    "_binary0x12", "_x", "TRUE", "false", "'it''s'", "'a\\'b'", "'\\\\'", "'\\q\\%'", '"d""q"', '"e\\"f"', "'", "\"",
    "@x", "(1", "1 2", "'a'b", "",
])


@settings(max_examples=400, deadline=None)
@given(rows=st.lists(st.lists(st.one_of(_TOKENS, _LITERALS.map(lambda t: t[0])), min_size=1, max_size=5),
                     min_size=1, max_size=4),
       seps=st.sampled_from([(",", ","), (" , ", ",\n"), ("\t,", " ,\r\n "), (",", ";"), (",", "),")]),
       end=st.sampled_from([";", " ;", ";x", ""]))
def test_the_compiled_reader_reads_what_the_python_one_reads(rows, seps, end):
    """The C VALUES reader gives the Python fast path's rows, or None (the exact parser then reads
    the statement) where the Python one does not read it either, on well-formed and odd text."""
    values = _compiled_rows()
    text = ("(" + seps[1].join("(" + seps[0].join(r) + ")" for r in rows)[1:] + end).encode("latin-1")
    py = values._py_rows(text, 0, len(text))
    c = values._c_values_rows(text, 0, len(text), values._other, values.Binary, values._NOT_READ)
    if c is not None:
        assert c == py and [list(map(type, r)) for r in c] == [list(map(type, r)) for r in py]
    elif py is not None:  # (only odd text the Python path takes: the exact parser must read it the same)
        assert parse_values_exact(b"(" + text, 0)[0] == py


_BODY_PART = st.one_of(
    st.binary(min_size=1, max_size=3).filter(lambda b: b"'" not in b and b"\\" not in b),
    st.binary(min_size=1, max_size=1).map(lambda b: b"\\" + b),  # any escape, MySQL's or not
    st.just(b"''"),
    st.sampled_from([b"\\0", b"\\01", b"\\%", b"\\_", b"\\Z", b"\\\\", b'""', b"\\'", b"\\\\''"]),
)


@settings(max_examples=400, deadline=None)
@given(parts=st.lists(_BODY_PART, max_size=12))
def test_the_compiled_reader_unescapes_as_python_does(parts):
    values = _compiled_rows()
    text = b"'" + b"".join(parts) + b"',1);"
    c = values._c_values_rows(text, 0, len(text), values._other, values.Binary, values._NOT_READ)
    assert c is not None and c == values._py_rows(text, 0, len(text))
    assert c[0][0] == unescape(b"".join(parts))


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.lists(_LITERALS, min_size=1, max_size=6), min_size=1, max_size=5))
def test_the_compiled_reader_reads_every_dump_literal(rows):
    """What dump tools write is read by the C reader itself (no fall back), as the Python one reads it."""
    values = _compiled_rows()
    text = (",\n".join("(" + ",".join(t for t, _ in r) + ")" for r in rows)[1:] + ";").encode("latin-1")
    want = [tuple(v for _, v in r) for r in rows]
    assert values._c_values_rows(text, 0, len(text), values._other, values.Binary, values._NOT_READ) == values._py_rows(text, 0, len(text)) == want


@pytest.mark.parametrize("text, error", [
    (b"(1,'a'", TruncatedDump), (b"(1,'a'),(2,", TruncatedDump), (b"(1,'a\\", TruncatedDump), (b"(1,nu", TruncatedDump),
    (b"(1,'a'),(2,'b')", TruncatedDump), (b"(1,@x);", CorruptDump), (b"(1,'a') x;", CorruptDump),
    (b"(1 2);", CorruptDump),
])
def test_bad_values(text, error):
    with pytest.raises(error) as e:
        parse_values(text, 0)
    assert e.value.offset is not None


# -- statements -----------------------------------------------------------------------------------

def test_splitting_as_the_client_splits():
    dump = (b"/*M!999999\\- enable the sandbox mode */ \n-- MariaDB dump\n# hash comment\n"
            b"/*!40101 SET NAMES utf8mb4 */;\n/*!40103 SET TIME_ZONE='+02:00' */;\nUSE `a;b`;\n"
            b"SELECT 'x;--y', \"z;\", `c;`, 1--1\n;\n"
            b"/* plain; comment */ DROP TABLE IF EXISTS `t`;\n"
            b"DELIMITER ;;\nCREATE PROCEDURE p() BEGIN SELECT 1; SELECT 'a;;'; END ;;\nDELIMITER ;\n"
            b"INSERT INTO `a;b`.`t` (`x`, `y``z`) VALUES (1,'a;\\n');\n")
    state = DumpState()
    got = [(s.kind, s.head) for s in iter_statements(dump, state=state, name="x.sql")]
    assert got == [("set", "SET NAMES"), ("set", "SET TIME_ZONE"), ("use", "USE"), ("other", "SELECT"),
                   ("other", "DROP TABLE"), ("delimiter", "DELIMITER"), ("other", "CREATE PROCEDURE"),
                   ("delimiter", "DELIMITER"), ("insert", "INSERT")]
    assert (state.db, state.client_charset, state.time_zone, state.delimiter) == ("a;b", "utf8mb4", "+02:00", b";")
    ins = list(iter_statements(dump, state=DumpState()))[-1].insert
    assert (ins.db, ins.table, ins.columns, ins.rows) == ("a;b", "t", ("x", "y`z"), [("1", b"a;\n")])
    # a stream in tiny chunks gives the same statements at the same offsets
    whole = [(s.offset, s.end, s.kind) for s in iter_statements(dump, state=DumpState())]
    chunks = [dump[i:i + 7] for i in range(0, len(dump), 7)]
    assert [(s.offset, s.end, s.kind) for s in iter_stream(chunks, DumpState(), chunk_floor=1)] == whole


def test_a_view_placeholder_is_not_a_table():
    # mysqldump (MySQL 5.x) writes a stand-in table for each view, then drops it for the view
    dump = (b"USE `d`;\n/*!50001 DROP VIEW IF EXISTS `v`*/;\n/*!50001 CREATE TABLE `v` (\n  `a` tinyint NOT NULL\n"
            b") ENGINE=MyISAM */;\nCREATE TABLE `t` (`a` int) DEFAULT CHARSET=utf8mb4;\n")
    got = [(s.kind, s.head, s.name) for s in iter_statements(dump, state=DumpState())]
    assert got[2] == ("other", "CREATE TABLE (view placeholder)", None) and got[3] == ("create_table", "CREATE TABLE", "t")


def test_saved_and_restored_session_settings():
    dump = (b"/*!40101 SET NAMES latin1 */;\n/*!40101 SET @saved_cs_client     = @@character_set_client */;\n"
            b"/*!40101 SET character_set_client = utf8mb4 */;\n")
    state = DumpState()
    list(iter_statements(dump, state=state))
    assert state.client_charset == "utf8mb4"
    list(iter_statements(b"/*!40101 SET character_set_client = @saved_cs_client */;\n", state=state))
    assert state.client_charset == "latin1"


def test_connection_charsets_that_can_hide_a_quote_are_refused():
    with pytest.raises(UnsupportedDump, match="gbk"):
        list(iter_statements(b"SET NAMES gbk;\nINSERT INTO t VALUES (1,'\x95\\');\n", state=DumpState(db="d"),
                             name="g.sql"))


def test_next_statement_start_steps_over_routine_bodies():
    dump = (b"CREATE TABLE `t` (\n  `a` int DEFAULT NULL COMMENT 'x;'\n) ENGINE=InnoDB;\n"
            b"INSERT INTO `t` VALUES\n(1),\n(2);\n"
            b"DELIMITER ;;\nCREATE PROCEDURE p() BEGIN\nSELECT 'a\nINSERT INTO `t` VALUES (3);\nDELIMITER ;\n';\nEND ;;\n"
            b"DELIMITER ;\nINSERT INTO `t` VALUES (4);\n")
    blocks = delimiter_blocks(delimiter_lines(dump))
    starts = {next_statement_start(dump, o, blocks) for o in range(len(dump))}
    truth = {s.offset for s in iter_statements(dump, state=DumpState())}
    assert starts - {None} <= truth | {dump.index(b"DELIMITER ;;"), dump.rindex(b"DELIMITER ;\n")}
    assert dump.index(b"INSERT INTO `t` VALUES (3)") not in starts


def test_a_statement_cut_at_the_end():
    for dump in (b"CREATE TABLE `t` (\n  `a` int", b"SELECT 'abc", b"/* a comment", b"DELIMITER"):
        with pytest.raises(TruncatedDump) as e:
            list(iter_statements(dump, state=DumpState(), name="c.sql"))
        assert e.value.file == "c.sql" and 0 <= e.value.offset < len(dump)


# -- cells --------------------------------------------------------------------------------------

SCHEMA = TableSchema((
    ColumnDef("id", "BIGINT", unsigned=True, nullable=False), ColumnDef("l", "VARCHAR", 10, charset="latin1"),
    ColumnDef("u", "TEXT", charset="utf8mb4"), ColumnDef("ts", "TIMESTAMP", decimals=3),
    ColumnDef("d", "DECIMAL", 10, 2), ColumnDef("b", "BIT", 12), ColumnDef("j", "JSON", charset="utf8mb4"),
    ColumnDef("y", "YEAR"), ColumnDef("bn", "BINARY", 3, charset="binary"), ColumnDef("e", "ENUM", values=("1", "2"),
                                                                                      charset="utf8mb4"),
), primary_key=("id",))


def _cells(reader, row, columns=None):
    return {c[1]: (c[2], c[3], c[4]) for c in reader.cells(row, columns)}


def test_text_is_read_in_the_charset_it_is_in():
    utf8 = RowReader("d", "t", SCHEMA, client_charset="utf8mb4", time_zone="+00:00")
    got = _cells(utf8, ("1", "é".encode(), b"\xff\xfe", None, "1.5", Binary(b"\x0f\xff"), b"{}", "0000",
                        Binary(b"a"), b"2"), None)
    assert got["l"] == ("VARCHAR(10) latin1", "é", None)  # converted by the server from the connection's utf8mb4
    assert got["u"][1] == "\ufffd\ufffd" and got["u"][2] == b"\xff\xfe"  # not UTF-8: kept as InvalidText does
    assert got["d"] == ("NEWDECIMAL(10,2)", "1.50", None) and got["b"][1] == "4095" and got["y"] == ("YEAR UNSIGNED", "0", None)
    assert got["bn"] == ("STRING(3) binary", None, b"a\0\0") and got["e"] == ("ENUM utf8mb4", "2", None)
    raw = RowReader("d", "t", SCHEMA, client_charset="binary", time_zone="+00:00")  # mydumper: the columns' own bytes
    assert _cells(raw, ("1", b"\xe9"), ("id", "l"))["l"][1] == "é"
    assert type(raw.values(("1", b"\xff"), ("id", "u"))[1]) is InvalidText
    with pytest.raises(CorruptDump, match="connection charset"):
        RowReader("d", "t", SCHEMA, client_charset="ascii", time_zone=None).values(("1", b"\xe9"), ("id", "l"))


@pytest.mark.parametrize("zone, text, utc", [
    ("+00:00", "2024-01-02 03:04:05.5", "2024-01-02 03:04:05.500"),
    ("+05:30", "2024-01-02 03:04:05.5", "2024-01-01 21:34:05.500"),
    ("-08:00", "2024-01-02 20:00:00", "2024-01-03 04:00:00.000"),
    ("Europe/Paris", "2024-07-01 12:00:00", "2024-07-01 10:00:00.000"),
    (None, "0000-00-00 00:00:00.000", "0000-00-00 00:00:00.000"),
])
def test_timestamps_in_the_dumps_zone(zone, text, utc):
    reader = RowReader("d", "t", SCHEMA, client_charset="utf8mb4", time_zone=zone)
    assert _cells(reader, ("1", text.encode()), ("id", "ts"))["ts"][1] == utc


def test_a_timestamp_without_a_zone_is_refused():
    reader = RowReader("d", "t", SCHEMA, client_charset="utf8mb4", time_zone=None)
    with pytest.raises(UnsupportedDump, match="no time zone"):
        reader.values(("1", b"2024-01-02 03:04:05"), ("id", "ts"))


def test_rows_that_do_not_fit_the_table():
    reader = RowReader("d", "t", SCHEMA, client_charset="utf8mb4", time_zone="+00:00")
    with pytest.raises(CorruptDump, match="a row of 2 values for 10 columns"):
        reader.values(("1", "2"))
    with pytest.raises(CorruptDump, match="column 'nope'"):
        reader.values(("1",), ("nope",))
    with pytest.raises(CorruptDump, match=r"d\.t\.d .*not a number"):
        reader.values(("1", b"abc"), ("id", "d"))


def test_mysql_logs_json_and_year_its_own_way():
    tm = table_map("d", "t", SCHEMA, "mysql")
    reader = RowReader("d", "t", SCHEMA, client_charset="utf8mb4", time_zone="+00:00", flavor="mysql")
    assert reader.types[6] == "JSON" and reader.types[7] == "YEAR" and tm.column_types[6] == 245
    with pytest.raises(UnsupportedDump, match="which server"):
        RowReader("d", "t", SCHEMA, client_charset="utf8mb4", time_zone="+00:00", flavor=None)
    # MySQL 8's own dump: a json column has no charset in its CREATE TABLE (its text is utf8mb4)
    _, _, schema = create_table("CREATE TABLE `t` (\n  `id` int NOT NULL,\n  `j` json DEFAULT NULL,\n"
                                "  PRIMARY KEY (`id`)\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_0900_ai_ci", "d")
    mysql = RowReader("d", "t", schema, client_charset="utf8mb4", time_zone="+00:00", flavor="mysql")
    assert mysql.cells(("1", b'{"a": [1, "\xc3\xa9"]}'))[1] == (1, "j", "JSON", '{"a": [1, "é"]}', None)


def test_create_table_keeps_float_unsigned():
    _, _, schema = create_table("CREATE TABLE `t` (\n  `f` float unsigned DEFAULT NULL,\n  `g` float(7,3) unsigned,\n"
                                "  `h` float\n) DEFAULT CHARSET=utf8mb4", "d")
    assert [c.unsigned for c in schema.columns] == [True, True, False]
    assert RowReader("d", "t", schema, client_charset="utf8mb4", time_zone=None).types == (
        "FLOAT UNSIGNED", "FLOAT UNSIGNED", "FLOAT")
    assert isinstance(create_table("CREATE TABLE t2 LIKE t", "d"), str)  # the reason it has no columns


def test_unknown_tables_and_skipped_statements_are_reported():
    dump = (b"/*!40101 SET NAMES utf8mb4 */;\nUSE `d`;\nCREATE TABLE t2 LIKE t1;\nCREATE VIEW v AS SELECT 1;\n"
            b"INSERT INTO `t2` VALUES (1);\n")
    reading = DumpReading(name="u.sql", flavor="mariadb")
    with pytest.raises(CorruptDump) as e:
        list(reading.rows(iter_statements(dump, state=reading.state, name="u.sql")))
    assert "d.t2" in str(e.value) and "not understood" in str(e.value) and e.value.file == "u.sql"
    assert reading.skipped["CREATE VIEW"] == 1 and reading.skipped["CREATE TABLE (not understood)"] == 1


def test_values_of_the_decoder_types():
    schema = TableSchema((ColumnDef("t", "TIME", decimals=2), ColumnDef("dt", "DATETIME"), ColumnDef("da", "DATE"),
                          ColumnDef("f", "FLOAT"), ColumnDef("i6", "INET6"), ColumnDef("u", "UUID")))
    reader = RowReader("d", "t", schema, client_charset="utf8mb4", time_zone=None)
    values = reader.values((b"-838:59:59.50", b"2024-02-30 01:02:03", b"2024-01-31", "0.1", b"::1",
                            b"123e4567-e89b-12d3-a456-426614174000"))
    assert values[0] == -dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=500000)
    assert values[1] == "2024-02-30 01:02:03" and values[2] == dt.date(2024, 1, 31)  # invalid: MySQL's text
    assert values[3] == 0.10000000149011612 and values[4] == bytes(15) + b"\x01"
    assert values[5].hex() == "123e4567e89b12d3a456426614174000"


@settings(max_examples=300, deadline=None)
@given(scale=st.integers(0, 6), sign=st.sampled_from(["", "-"]), whole=st.from_regex(r"[0-9]{1,20}", fullmatch=True),
       frac=st.from_regex(r"[0-9]{0,8}", fullmatch=True))
def test_decimal_literals_take_the_column_s_scale(scale, sign, whole, frac):
    """The DECIMAL literals a dump writes (its scale's digits: read at once) and others (quantized)
    give the value rounded to the column's scale, with no sign on a zero."""
    lit = sign + whole + ("." + frac if frac else "")
    schema = TableSchema((ColumnDef("d", "DECIMAL", 30, scale),))
    got = RowReader("d", "t", schema, client_charset="utf8mb4", time_zone="+00:00").values((lit,))[0]
    want = Decimal(lit).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_EVEN)
    want = abs(want) if want == 0 else want
    assert got.as_tuple() == want.as_tuple(), lit


def test_many_rows_convert_as_each_row_does():
    """An INSERT's rows, converted a column at a time, are each row's values; a bad row is named as
    it is when rows are converted one by one."""
    reader = RowReader("d", "t", SCHEMA, client_charset="utf8mb4", time_zone="+00:00")
    rows = [("1", b"a", b"\xff", b"2024-01-02 03:04:05", "1.5", Binary(b"\x01"), b"{}", "2024", Binary(b"z"), b"1"),
            ("2", None, "7", None, "-0.00", "5", None, None, None, None)]
    assert reader.values_of_rows(rows) == [reader.values(r) for r in rows]
    assert reader.values_of_rows(rows[1:], None)[0][4].as_tuple() == Decimal("0.00").as_tuple()
    with pytest.raises(CorruptDump, match=r"d\.t\.d .*not a number"):
        reader.values_of_rows([rows[0], ("3", b"b", b"c", None, b"x", None, None, None, None, None)])
    with pytest.raises(CorruptDump, match="a row of 2 values for 10 columns"):
        reader.values_of_rows([rows[0], ("1", "2")])
