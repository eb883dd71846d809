"""Schema history: DDL parsing (every ALTER form), renames, hostile names, seeds, priority order."""
from __future__ import annotations

import pytest
from spark_fixtures import spark  # noqa: F401  (the shared session fixture)

from pipelines import schema as sh
from pipelines.schema import (
    ColumnDef,
    DdlError,
    SchemaHistory,
    parse_statement,
    statement_kind,
)


def seq(n: int) -> str:
    """A _seq-like sortable key for statement number n."""
    return f"{n:032d}"


def history(*statements: str, db: str = "shop") -> SchemaHistory:
    h = SchemaHistory()
    for i, s in enumerate(statements, start=1):
        h.apply_statement(s, db, seq(i * 10))
    return h


def names(h: SchemaHistory, table: str, db: str = "shop", at: str | None = None) -> list[str]:
    schema = h.at(db, table, at or seq(10**9))
    assert schema is not None, f"{db}.{table} has no schema"
    return schema.names


def col(h: SchemaHistory, table: str, name: str, db: str = "shop") -> ColumnDef:
    schema = h.current(db, table)
    return schema.columns[schema.index_of(name)]


# ------------------------------------------------------------------------------------- CREATE TABLE


def test_create_table_types_keys_and_charsets():
    h = history(
        "CREATE DATABASE shop CHARACTER SET latin1",
        """CREATE TABLE IF NOT EXISTS `shop`.`orders` (
             id INT(10) UNSIGNED NOT NULL AUTO_INCREMENT,
             amount DECIMAL(10,2) DEFAULT NULL,
             note VARCHAR(40) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
             plain TEXT,
             state ENUM('new','it''s','a\\'b') NOT NULL,
             flags SET('x','y'),
             ip INET6, ip4 INET4, u UUID, j JSON, g POINT,
             b BINARY(4), vb VARBINARY(9), bl BLOB, cb CHAR(3) CHARACTER SET binary,
             t TIME(3), dt DATETIME(6), ts TIMESTAMP(2) NULL, y YEAR, d DATE,
             f FLOAT, f72 FLOAT(7,2), fp FLOAT(30), r REAL, dbl DOUBLE PRECISION,
             bits BIT(5), flag BOOL, i8 INT8, big BIGINT(20) UNSIGNED ZEROFILL, dec DECIMAL, nums NUMERIC(5),
             PRIMARY KEY (`id`, note(10)), UNIQUE KEY uk (amount), KEY k (plain(5))
           ) ENGINE=InnoDB /* trailing comment */""",
    )
    s = h.current("shop", "orders")
    assert s.primary_key == ("id", "note")
    assert s.unique_keys == (sh.UniqueKey("uk", ("amount",)),)
    types = {c.name: c.type_text() for c in s.columns}
    assert types == {
        "id": "INT(10) UNSIGNED", "amount": "DECIMAL(10,2)", "note": "VARCHAR(40)", "plain": "TEXT",
        "state": "ENUM('new','it''s','a''b')", "flags": "SET('x','y')", "ip": "INET6", "ip4": "INET4",
        "u": "UUID", "j": "JSON", "g": "POINT", "b": "BINARY(4)", "vb": "VARBINARY(9)", "bl": "BLOB",
        "cb": "BINARY(3)", "t": "TIME(3)", "dt": "DATETIME(6)", "ts": "TIMESTAMP(2)", "y": "YEAR(4)",
        "d": "DATE", "f": "FLOAT", "f72": "FLOAT(7,2)", "fp": "DOUBLE", "r": "DOUBLE", "dbl": "DOUBLE",
        "bits": "BIT(5)", "flag": "TINYINT(1)", "i8": "BIGINT", "big": "BIGINT(20) UNSIGNED",
        "dec": "DECIMAL(10,0)", "nums": "DECIMAL(5,0)",
    }
    assert col(h, "orders", "state").values == ("new", "it's", "a'b")
    assert not col(h, "orders", "id").nullable and not col(h, "orders", "note").nullable  # PK columns
    assert col(h, "orders", "amount").nullable
    assert col(h, "orders", "note").charset == "utf8mb4"
    assert col(h, "orders", "plain").charset == "latin1"  # the database default
    assert col(h, "orders", "b").charset == "binary"


def test_create_table_mariadb_syntax():
    h = history(
        "CREATE TABLE t_invis (id INT PRIMARY KEY, a INT, hidden VARCHAR(10) INVISIBLE DEFAULT 'hid', b INT,"
        " g_virt INT AS (a*2) VIRTUAL, g_stored VARCHAR(30) AS (CONCAT('s:',a,':',b)) PERSISTENT) ENGINE=InnoDB",
        "CREATE TABLE t_ver (id INT PRIMARY KEY, v VARCHAR(20)) WITH SYSTEM VERSIONING ENGINE=InnoDB",
        "CREATE TABLE t_seqdef (id INT PRIMARY KEY DEFAULT NEXTVAL(seq_a), v VARCHAR(10) COMPRESSED)",
        "CREATE OR REPLACE TABLE t_part (id INT NOT NULL, region INT NOT NULL, PRIMARY KEY (id, region))"
        " PARTITION BY LIST (region) (PARTITION p1 VALUES IN (1), PARTITION p2 VALUES IN (2))",
        "CREATE TABLE t_json (j longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`j`)))",
        "CREATE TABLE t_long (a LONG VARCHAR, b LONG VARBINARY, c NATIONAL VARCHAR(5), d MIDDLEINT, e SERIAL)",
    )
    assert names(h, "t_invis") == ["id", "a", "hidden", "b", "g_virt", "g_stored"]
    assert col(h, "t_invis", "hidden").invisible
    assert col(h, "t_invis", "g_stored").generated == "STORED"
    assert col(h, "t_invis", "g_virt").generated == "VIRTUAL"
    assert names(h, "t_ver") == ["id", "v", "row_start", "row_end"]
    assert names(h, "t_seqdef") == ["id", "v"]
    assert h.current("shop", "t_part").primary_key == ("id", "region")
    assert col(h, "t_json", "j").type == "JSON"
    assert [c.type_text() for c in h.current("shop", "t_long").columns] == [
        "MEDIUMTEXT", "MEDIUMBLOB", "VARCHAR(5)", "MEDIUMINT", "BIGINT UNSIGNED"]
    assert col(h, "t_long", "c").charset == "utf8mb3"
    assert h.current("shop", "t_long").effective_key() == ("e",)  # SERIAL is UNIQUE NOT NULL


def test_create_table_if_not_exists_keeps_the_existing_table():
    h = history("CREATE TABLE t (a INT)", "CREATE TABLE IF NOT EXISTS t (b INT, c INT)")
    assert names(h, "t") == ["a"]
    assert len(h.versions("shop", "t")) == 1


def test_create_table_like_copies_columns_and_key():
    h = history("CREATE TABLE src (id INT PRIMARY KEY, v TEXT)", "CREATE TABLE dst LIKE src",
                "CREATE TABLE other.dst2 (LIKE shop.src)")
    assert names(h, "dst") == ["id", "v"]
    assert h.current("shop", "dst").primary_key == ("id",)
    assert names(h, "dst2", db="other") == ["id", "v"]


def test_create_table_like_unknown_table_is_unparsed():
    h = history("CREATE TABLE dst LIKE nowhere")
    (v,) = h.versions("shop", "dst")
    assert v.kind == sh.UNPARSED and "nowhere" in v.reason and v.schema is None


# ------------------------------------------------------------------------------------- ALTER TABLE


@pytest.mark.parametrize(
    "alter, expected",
    [
        ("ALTER TABLE t ADD COLUMN x INT", ["id", "a", "b", "x"]),
        ("ALTER TABLE t ADD x INT", ["id", "a", "b", "x"]),
        ("ALTER TABLE t ADD COLUMN x INT FIRST", ["x", "id", "a", "b"]),
        ("ALTER TABLE t ADD COLUMN x INT AFTER a", ["id", "a", "x", "b"]),
        ("ALTER TABLE t ADD COLUMN IF NOT EXISTS a INT", ["id", "a", "b"]),
        ("ALTER TABLE t ADD COLUMN (x INT, y INT)", ["id", "a", "b", "x", "y"]),
        ("ALTER TABLE t ADD x INT FIRST, ADD y INT AFTER x", ["x", "y", "id", "a", "b"]),
        ("ALTER TABLE t DROP COLUMN a", ["id", "b"]),
        ("ALTER TABLE t DROP a", ["id", "b"]),
        ("ALTER TABLE t DROP COLUMN IF EXISTS zz", ["id", "a", "b"]),
        ("ALTER TABLE t DROP COLUMN a, DROP COLUMN b", ["id"]),
        ("ALTER TABLE t MODIFY b TEXT", ["id", "a", "b"]),
        ("ALTER TABLE t MODIFY COLUMN b TEXT FIRST", ["b", "id", "a"]),
        ("ALTER TABLE t MODIFY COLUMN IF EXISTS a BIGINT AFTER b", ["id", "b", "a"]),
        ("ALTER TABLE t CHANGE a a2 BIGINT", ["id", "a2", "b"]),
        ("ALTER TABLE t CHANGE COLUMN a a2 BIGINT FIRST", ["a2", "id", "b"]),
        ("ALTER TABLE t CHANGE a A INT", ["id", "A", "b"]),
        ("ALTER TABLE t RENAME COLUMN a TO c", ["id", "c", "b"]),
        ("ALTER TABLE t RENAME COLUMN a TO c, RENAME COLUMN b TO a", ["id", "c", "a"]),
        ("ALTER ONLINE TABLE t ADD COLUMN x INT", ["id", "a", "b", "x"]),
        ("ALTER IGNORE TABLE t ADD COLUMN x INT", ["id", "a", "b", "x"]),
        ("ALTER TABLE t ALGORITHM=INPLACE, LOCK=NONE, ADD COLUMN x INT", ["id", "a", "b", "x"]),
        ("alter table `t` add column `x y` int after `a`", ["id", "a", "x y", "b"]),
        ("/* pre */ ALTER TABLE t /* mid */ ADD COLUMN x INT -- post", ["id", "a", "b", "x"]),
        ("ALTER TABLE shop.t ADD COLUMN x INT", ["id", "a", "b", "x"]),
        ("ALTER TABLE t ADD INDEX i (a), ENGINE=InnoDB, COMMENT='c'", ["id", "a", "b"]),
    ],
)
def test_alter_table_columns(alter, expected):
    h = history("CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(10))", alter)
    assert names(h, "t") == expected
    assert names(h, "t", at=seq(15)) == ["id", "a", "b"]  # the old version before the ALTER's _seq


def test_defaults_and_renamed_columns_are_recorded():
    h = history("CREATE TABLE t (id INT PRIMARY KEY, a INT DEFAULT -3, b VARCHAR(5) DEFAULT 'x''y', "
                "c TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP, d BIT(3) DEFAULT b'101', e INT DEFAULT NULL)")
    assert [c.default for c in h.current("shop", "t").columns] == [None, "-3", "x'y", None, "5", None]
    (v,) = h.apply_statement("ALTER TABLE t CHANGE a a2 INT, RENAME COLUMN a2 TO a3, RENAME COLUMN b TO b2, "
                             "ADD COLUMN f INT NOT NULL DEFAULT 7", "shop", seq(20))
    assert v.renamed == (("a", "a3"), ("b", "b2"))
    assert h.current("shop", "t").columns[-1].default == "7"
    assert h.schema_before("shop", "t", seq(20)).names == ["id", "a", "b", "c", "d", "e"]


def test_partitioned_show_create_table_and_float_unsigned():
    h = history("""CREATE TABLE `t_part` (
  `id` int(11) NOT NULL,
  `region` int(11) NOT NULL,
  `f` float unsigned DEFAULT NULL,
  PRIMARY KEY (`id`,`region`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci
 PARTITION BY LIST (`region`)
(PARTITION `p1` VALUES IN (1) ENGINE = InnoDB,
 PARTITION `p2` VALUES IN (2) ENGINE = InnoDB)""")
    assert names(h, "t_part") == ["id", "region", "f"]
    assert h.current("shop", "t_part").primary_key == ("id", "region")


def test_alter_modify_change_types_and_charset():
    h = history("CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(10)) DEFAULT CHARSET=latin1",
                "ALTER TABLE t MODIFY a BIGINT UNSIGNED NOT NULL, CHANGE b b2 VARCHAR(20) CHARACTER SET utf8mb4")
    assert col(h, "t", "a").type_text() == "BIGINT UNSIGNED" and not col(h, "t", "a").nullable
    assert col(h, "t", "b2").type_text() == "VARCHAR(20)" and col(h, "t", "b2").charset == "utf8mb4"
    h.apply_statement("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb3", "shop", seq(99))
    assert col(h, "t", "b2").charset == "utf8mb3"
    h.apply_statement("ALTER TABLE t ADD c TEXT", "shop", seq(100))
    assert col(h, "t", "c").charset == "utf8mb3"  # the table default changed with CONVERT


def test_primary_key_changes():
    h = history("CREATE TABLE t (a INT, b INT, c INT)")
    assert h.current("shop", "t").primary_key == ()
    h.apply_statement("ALTER TABLE t ADD PRIMARY KEY (a, b)", "shop", seq(20))
    assert h.current("shop", "t").primary_key == ("a", "b")
    assert not col(h, "t", "a").nullable
    h.apply_statement("ALTER TABLE t CHANGE a a1 INT NOT NULL", "shop", seq(30))
    assert h.current("shop", "t").primary_key == ("a1", "b")
    h.apply_statement("ALTER TABLE t RENAME COLUMN b TO b1", "shop", seq(40))
    assert h.current("shop", "t").primary_key == ("a1", "b1")
    h.apply_statement("ALTER TABLE t DROP PRIMARY KEY, ADD CONSTRAINT pk PRIMARY KEY USING BTREE (c)", "shop", seq(50))
    assert h.current("shop", "t").primary_key == ("c",)
    h.apply_statement("ALTER TABLE t DROP PRIMARY KEY", "shop", seq(60))
    assert h.current("shop", "t").primary_key == ()
    assert h.at("shop", "t", seq(55)).primary_key == ("c",)


def test_unique_not_null_key_stands_in_for_a_missing_primary_key():
    h = history("CREATE TABLE t (a INT NOT NULL, b INT, UNIQUE KEY ub (b))", "CREATE UNIQUE INDEX ua ON t (a)")
    assert h.current("shop", "t").effective_key() == ("a",)  # b is nullable
    h.apply_statement("DROP INDEX ua ON t", "shop", seq(30))
    assert h.current("shop", "t").effective_key() == ()


@pytest.mark.parametrize(
    "alter, reason",
    [
        ("ALTER TABLE t DROP COLUMN nope", "nope"),
        ("ALTER TABLE t ADD COLUMN a INT", "already exists"),
        ("ALTER TABLE t ADD COLUMN x INT AFTER nope", "nope"),
        ("ALTER TABLE t CHANGE nope x INT", "nope"),
        ("ALTER TABLE t TRUNCATE PARTITION p1", "partition"),
        ("ALTER TABLE t ADD COLUMN x FROBNICATE(3)", "FROBNICATE"),
    ],
)
def test_alter_that_cannot_apply_is_unparsed_and_keeps_the_old_schema(alter, reason):
    h = history("CREATE TABLE t (id INT PRIMARY KEY, a INT)", alter)
    last = h.versions("shop", "t")[-1]
    assert last.kind == sh.UNPARSED
    assert reason.lower() in last.reason.lower()
    assert last.statement == alter
    assert names(h, "t") == ["id", "a"]


def test_alter_of_unknown_table_says_to_seed():
    h = history("ALTER TABLE legacy ADD COLUMN x INT")
    (v,) = h.versions("shop", "legacy")
    assert v.kind == sh.UNPARSED and "seed" in v.reason and v.schema is None


def test_two_phase_alter_statement_repeated():
    """MariaDB binlog_alter_two_phase logs the same ALTER at START and at COMMIT."""
    h = history("CREATE TABLE t (id INT PRIMARY KEY)",
                "ALTER TABLE t ADD COLUMN v VARCHAR(10) DEFAULT 'two-phase'",
                "ALTER TABLE t ADD COLUMN v VARCHAR(10) DEFAULT 'two-phase'")
    assert names(h, "t") == ["id", "v"]
    assert [v.kind for v in h.versions("shop", "t")] == [sh.CREATE, sh.ALTER]


# ------------------------------------------------------------------------------------- renames, drops, truncate


def test_rename_table_and_alter_rename():
    h = history("CREATE TABLE a (id INT PRIMARY KEY)",
                "RENAME TABLE a TO b",
                "ALTER TABLE b RENAME TO other.c",
                "ALTER TABLE other.c RENAME AS d, ADD COLUMN x INT")
    assert h.at("shop", "a", seq(15)).names == ["id"]
    assert h.at("shop", "a", seq(25)) is None
    assert h.at("shop", "b", seq(25)).names == ["id"]
    assert h.at("other", "c", seq(35)).names == ["id"]
    assert h.at("other", "d", seq(45)).names == ["id", "x"]
    kinds = [(v.db, v.table, v.kind, v.peer_db, v.peer_table) for v in h.all_versions() if v.valid_from == seq(20)]
    assert kinds == [("shop", "a", sh.RENAME_TO, "shop", "b"), ("shop", "b", sh.RENAME_FROM, "shop", "a")]


def test_rename_swap_in_one_statement():
    h = history("CREATE TABLE a (x INT)", "CREATE TABLE b (y INT)", "RENAME TABLE a TO tmp, b TO a, tmp TO b")
    assert names(h, "a") == ["y"] and names(h, "b") == ["x"]
    assert h.current("shop", "tmp") is None


def test_drop_truncate_and_recreate():
    h = history("CREATE TABLE t (id INT PRIMARY KEY, v INT)", "TRUNCATE TABLE t", "DROP TABLE IF EXISTS `t`,u /* generated by server */",
                "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20), w DOUBLE)", "TRUNCATE t")
    kinds = [v.kind for v in h.versions("shop", "t")]
    assert kinds == [sh.CREATE, sh.TRUNCATE, sh.DROP, sh.CREATE, sh.TRUNCATE]
    assert h.at("shop", "t", seq(25)).names == ["id", "v"]  # truncate keeps the schema
    assert h.at("shop", "t", seq(35)) is None
    assert names(h, "t") == ["id", "v", "w"]
    assert [v.kind for v in h.versions("shop", "u")] == [sh.DROP]
    boundaries = [(v.valid_from, v.kind) for v in h.events_between("shop", "t", seq(10))]
    assert boundaries == [(seq(20), sh.TRUNCATE), (seq(30), sh.DROP), (seq(40), sh.CREATE), (seq(50), sh.TRUNCATE)]


def test_drop_database_drops_its_tables():
    h = history("CREATE DATABASE tmpdb", "CREATE TABLE tmpdb.x (id INT)", "CREATE TABLE keep (id INT)", "DROP DATABASE tmpdb")
    assert h.current("tmpdb", "x") is None
    assert names(h, "keep") == ["id"]
    assert [v.kind for v in h.events_between("tmpdb", "never_seen", "")] == [sh.DROP_DATABASE]


def test_default_database_and_qualified_names():
    h = SchemaHistory()
    h.apply_statement("CREATE TABLE t (a INT)", "db1", seq(1))
    h.apply_statement("CREATE TABLE db2.t (b INT)", "db1", seq(2))
    assert h.current("db1", "t").names == ["a"] and h.current("db2", "t").names == ["b"]
    (v,) = h.apply_statement("CREATE TABLE t3 (a INT)", None, seq(3))
    assert v.kind == sh.UNPARSED and "default database" in v.reason


# ------------------------------------------------------------------------------------- hostile names


@pytest.mark.parametrize(
    "table",
    ["we ird.na`me 😀", "tëst_表 name", "a'b\"c", "t" * 64, "select", "..", "x/y", "100%"],
)
def test_hostile_table_and_column_names(table):
    q = "`" + table.replace("`", "``") + "`"
    column = "co l.`ü😀"
    qc = "`" + column.replace("`", "``") + "`"
    h = SchemaHistory()
    h.apply_statement(f"CREATE TABLE {q} ({qc} INT PRIMARY KEY, `select` VARCHAR(3))", "d b", seq(1))
    h.apply_statement(f"ALTER TABLE `d b`.{q} ADD COLUMN `new``col` INT AFTER {qc}", None, seq(2))
    h.apply_statement(f"RENAME TABLE {q} TO `d b`.`renamed {table.replace('`', '``')}`", "d b", seq(3))
    schema = h.current("d b", f"renamed {table}")
    assert schema.names == [column, "new`col", "select"]
    assert schema.primary_key == (column,)
    assert h.current("d b", table) is None


# ------------------------------------------------------------------------------------- statement kinds


@pytest.mark.parametrize(
    "sql",
    ["INSERT INTO t VALUES (1)", "BEGIN", "GRANT ALL ON *.* TO u", "CREATE TEMPORARY TABLE t (a INT)",
     "DROP TEMPORARY TABLE IF EXISTS t", "CREATE PROCEDURE p() BEGIN END", "CREATE VIEW v AS SELECT 1",
     "FLUSH PRIVILEGES", "SET PASSWORD = 'x'", "ANALYZE TABLE t"],
)
def test_statements_that_change_no_table_schema(sql):
    assert statement_kind(sql) is None
    assert parse_statement(sql, "shop") == []
    assert history(sql).all_versions() == []


def test_unparsable_table_statement_is_recorded_not_raised():
    h = history("CREATE TABLE t (a INT)", "ALTER TABLE t ADD COLUMN (((( broken")
    last = h.versions("shop", "t")[-1]
    assert last.kind == sh.UNPARSED and last.reason
    assert names(h, "t") == ["a"]


# ------------------------------------------------------------------------------------- seeds

SHOW_CREATE = """CREATE TABLE `customers` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `name` varchar(50) NOT NULL,
  `ip` inet6 DEFAULT NULL,
  `j` longtext CHARACTER SET utf8mb4 COLLATE utf8mb4_bin DEFAULT NULL CHECK (json_valid(`j`)),
  PRIMARY KEY (`id`)
) ENGINE=InnoDB AUTO_INCREMENT=3 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"""


def test_seed_folder_both_layouts(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "customers.sql").write_text(SHOW_CREATE)
    (tmp_path / "shop.orders.sql").write_text("Table\tCreate Table\norders\tCREATE TABLE `orders` (`id` int(11) NOT NULL, PRIMARY KEY (`id`))\n")
    (tmp_path / "we~2Fird").mkdir()
    (tmp_path / "we~2Fird" / "~2Ehidden.sql").write_text("CREATE TABLE x (a INT)")
    seeds = sh.read_seed_folder(tmp_path)
    assert sorted((db, t) for db, t, _, _ in seeds) == [("shop", "customers"), ("shop", "orders"), ("we/ird", ".hidden")]
    h = SchemaHistory()
    for db, table, text, path in seeds:
        h.add_seed(db, table, text, path)
    s = h.at("shop", "customers", "")
    assert s.names == ["id", "name", "ip", "j"] and s.primary_key == ("id",)
    assert [c.type for c in s.columns] == ["INT", "VARCHAR", "INET6", "JSON"]
    assert s.columns[1].charset == "utf8mb4"
    assert h.versions("shop", "customers")[0].kind == sh.SEED


def test_ddl_in_the_binlog_applies_on_top_of_a_seed():
    h = SchemaHistory()
    h.add_seed("shop", "customers", SHOW_CREATE, "seed/shop/customers.sql")
    h.apply_statement("ALTER TABLE customers ADD COLUMN email VARCHAR(80) AFTER name", "shop", seq(5))
    assert h.at("shop", "customers", seq(1)).names == ["id", "name", "ip", "j"]
    assert h.at("shop", "customers", seq(6)).names == ["id", "name", "email", "ip", "j"]
    h.apply_statement("CREATE TABLE customers2 LIKE customers", "shop", seq(7))
    assert h.current("shop", "customers2").primary_key == ("id",)


def test_bad_seed_files_are_all_reported(tmp_path):
    (tmp_path / "nodot.sql").write_text("CREATE TABLE x (a INT)")
    (tmp_path / "shop.bad.sql").write_text("SELECT 1")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c.sql").write_text("CREATE TABLE c (a INT)")
    with pytest.raises(DdlError) as e:
        sh.load_seeds(SchemaHistory(), tmp_path)
    msg = str(e.value)
    assert "nodot.sql" in msg and "shop.bad.sql" in msg and "c.sql" in msg


def test_missing_seed_folder_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="schema_seed"):
        sh.read_seed_folder(tmp_path / "nope")


# ------------------------------------------------------------------------------------- images -> specs, keys, priority

IC = sh.ImageColumn
ORDERS_DDL = ("CREATE TABLE orders (order_id INT UNSIGNED NOT NULL, line SMALLINT NOT NULL, state ENUM('new','paid'),"
              " note VARCHAR(20) CHARACTER SET latin1, ip INET6, PRIMARY KEY (order_id, line))")


def orders_version():
    h = history(ORDERS_DDL)
    return h.version_at("shop", "orders", seq(11))


def test_ddl_names_when_the_table_map_has_none():
    shape = [IC(0, None, "LONG UNSIGNED"), IC(1, None, "SHORT"), IC(2, None, "ENUM utf8mb4"),
             IC(3, None, "VARCHAR(20) latin1"), IC(4, None, "STRING(16) binary")]
    r = sh.resolve_columns("shop", "orders", orders_version(), [shape])
    assert r.names == ["order_id", "line", "state", "note", "ip"]
    assert r.name_source == "ddl" and r.keys == ("order_id", "line") and r.key_source == "ddl"
    assert [(s.mysql_type, s.unsigned, s.ordinal) for s in r.specs] == [
        ("int", True, 0), ("smallint", False, 1), ("enum", False, 2), ("varchar", False, 3), ("inet6", False, 4)]
    assert r.specs[2].enum_values == ("new", "paid")
    assert r.fixes == {2: (sh.FIX_ENUM, ("new", "paid")), 4: (sh.FIX_INET6,)}
    assert not r.rejected


def test_table_without_metadata_gets_value_fixes():
    """binlog_row_metadata=NO_LOG: no charsets, no signedness, ENUM as index."""
    shape = [IC(0, None, "LONG"), IC(1, None, "SHORT"), IC(2, None, "STRING(2)"), IC(3, None, "VARCHAR(20)"),
             IC(4, None, "STRING(16)")]
    r = sh.resolve_columns("shop", "orders", orders_version(), [shape])
    assert r.fixes[0] == (sh.FIX_UNSIGNED, 32)
    assert r.fixes[3] == (sh.FIX_DECODE, "latin1")
    assert sh.apply_fix(r.fixes[3], None, "café".encode("latin1")) == ("café", None)
    assert sh.apply_fix(r.fixes[0], "-2", None) == ("4294967294", None)


def test_table_map_names_win_over_ddl():
    """Priority 1: FULL metadata names, even when the DDL history is stale."""
    shape = [IC(0, "order_id", "LONG UNSIGNED"), IC(1, "line_no", "SHORT"), IC(2, "state", "ENUM utf8mb4"),
             IC(3, "note", "VARCHAR(20) latin1"), IC(4, "ip", "STRING(16) binary"), IC(5, "extra", "LONGLONG")]
    r = sh.resolve_columns("shop", "orders", orders_version(), [shape], table_map_key_idx=[0, 1])
    assert r.names == ["order_id", "line_no", "state", "note", "ip", "extra"]
    assert r.name_source == "table_map"
    assert r.keys == ("order_id", "line_no") and r.key_source == "table_map"
    assert r.specs[4].mysql_type == "inet6"  # the DDL still refines a column it knows by name
    assert r.specs[5].mysql_type == "bigint"
    assert not r.rejected


def test_table_map_names_without_any_ddl():
    shape = [IC(0, "id", "LONG"), IC(1, "v", "BLOB utf8mb4"), IC(2, "b", "VARCHAR(3) binary"), IC(3, "d", "NEWDECIMAL(10,2)")]
    r = sh.resolve_columns("x", "t", None, [shape])
    assert [(s.name, s.mysql_type, s.precision, s.scale) for s in r.specs] == [
        ("id", "int", None, None), ("v", "text", None, None), ("b", "varbinary", None, None), ("d", "decimal", 10, 2)]
    assert r.keys == () and r.key_source == "none"


def test_seed_schema_is_used_below_ddl():
    h = SchemaHistory()
    h.add_seed("shop", "customers", SHOW_CREATE, "seed.sql")
    r = sh.resolve_columns("shop", "customers", h.version_at("shop", "customers", seq(1)),
                           [[IC(0, None, "LONG"), IC(1, None, "VARCHAR(50) utf8mb4"), IC(2, None, "STRING(16) binary"),
                             IC(3, None, "LONG_BLOB utf8mb4")]])
    assert r.name_source == "seed" and r.names == ["id", "name", "ip", "j"] and r.keys == ("id",)


def test_config_keys_win_and_are_checked():
    shape = [IC(0, "a", "LONG"), IC(1, "b", "LONG")]
    r = sh.resolve_columns("d", "t", None, [shape], key_override=["B"], table_map_key_idx=[0])
    assert r.keys == ("b",) and r.key_source == "config"
    with pytest.raises(sh.KeyConfigError, match="zz"):
        sh.resolve_columns("d", "t", None, [shape], key_override=["zz"])


@pytest.mark.parametrize(
    "shape, reason",
    [
        ([IC(i, None, "LONG") for i in range(5)], "has 4 columns"),
        ([IC(0, None, "VARCHAR(3) utf8mb4")], "logged as VARCHAR"),
        ([IC(0, None, "LONG"), IC(1, None, "BLOB binary")], "declares"),
    ],
)
def test_rows_that_do_not_fit_the_schema_are_rejected(shape, reason):
    h = history("CREATE TABLE t (a INT, b INT, c INT, d INT)")
    r = sh.resolve_columns("shop", "t", h.version_at("shop", "t", seq(11)), [shape])
    assert list(r.rejected.values())[0].find(reason) >= 0, r.rejected
    assert r.names == ["a", "b", "c", "d"]  # the good schema still stands


def test_no_names_at_all_is_rejected():
    r = sh.resolve_columns("d", "t", None, [[IC(0, None, "LONG")]])
    (reason,) = r.rejected.values()
    assert "FULL" in reason and "seed" in reason
    assert r.specs == ()


def test_partial_images_keep_every_declared_column():
    h = history("CREATE TABLE t (id INT PRIMARY KEY, a INT, b TEXT)")
    r = sh.resolve_columns("shop", "t", h.version_at("shop", "t", seq(11)), [[IC(0, None, "LONG")],
                                                                            [IC(0, None, "LONG"), IC(1, None, "LONG")]])
    assert r.names == ["id", "a", "b"] and not r.rejected


def test_conflicting_table_maps_in_one_segment():
    a = [IC(0, "id", "LONG"), IC(1, "v", "LONG")]
    b = [IC(0, "id", "LONG"), IC(1, "w", "VARCHAR(3) utf8mb4")]
    r = sh.resolve_columns("d", "t", None, [a, a, b])
    assert len(r.rejected) == 1 and "disagree" in list(r.rejected.values())[0]


@pytest.mark.parametrize(
    "raw, text",
    [
        (bytes(16), "::"),
        (bytes(15) + b"\x01", "::1"),
        (bytes.fromhex("20010db8000000000000ff0000428329"), "2001:db8::ff00:42:8329"),
        (bytes.fromhex("00000000000000000000ffffc0000201"), "::ffff:192.0.2.1"),
        (bytes.fromhex("fe800000000000000000000000000001"), "fe80::1"),
        (bytes.fromhex("00000000000000000000000001020304"), "::1.2.3.4"),  # as MariaDB 10.11 prints them
        (bytes.fromhex("00000000000000000001"), "::1:0:0:0"),
        (bytes.fromhex("00010000000000010000000000000001"), "1:0:0:1::1"),
        (bytes.fromhex("0001"), "1::"),
    ],
)
def test_inet6_text(raw, text):
    assert sh.inet6_text(raw) == text


# ------------------------------------------------------------------------------------- persistence (Spark + Delta)


def _cfg(tmp_path, **extra):
    from pipelines.config import load_config

    return load_config(None, {"input": str(tmp_path / "in"), "warehouse": str(tmp_path / "wh"),
                              "delta.backend": "rs", **extra})


def _write_ddl(spark, cfg, statements):
    from pipelines import delta_io
    from pipelines.state import DDL_TABLE_LAYOUT

    rows = [("binlog.000001", 1, pos, f"{1:010d}{pos:013d}{0:09d}", db, q, None, False, None, 1, "r", None)
            for pos, db, q in statements]
    delta_io.open_table(cfg.pipeline_path("ddl"), "rs", spark).append(
        spark.createDataFrame(rows, delta_io.struct_of(DDL_TABLE_LAYOUT)))


def test_history_is_persisted_and_reruns_agree(spark, tmp_path):  # noqa: F811
    from pipelines import delta_io

    seed = tmp_path / "seed" / "shop"
    seed.mkdir(parents=True)
    (seed / "customers.sql").write_text(SHOW_CREATE)
    cfg = _cfg(tmp_path, schema_seed=str(tmp_path / "seed"))
    _write_ddl(spark, cfg, [(100, "shop", "CREATE TABLE orders (id INT PRIMARY KEY, v TEXT)"),
                            (200, "shop", "ALTER TABLE customers ADD COLUMN email TEXT"),
                            (300, "shop", "INSERT INTO x VALUES (1)")])
    h1, added1 = sh.update_history(spark, cfg, run_id="r1")
    assert [(v.table, v.kind) for v in added1] == [("customers", "seed"), ("orders", "create"), ("customers", "alter")]
    h2, added2 = sh.update_history(spark, cfg, run_id="r2")
    assert added2 == []
    assert h2.all_versions() == h1.all_versions()
    _write_ddl(spark, cfg, [(400, "shop", "ALTER TABLE orders ADD COLUMN w INT FIRST")])
    h3, added3 = sh.update_history(spark, cfg, run_id="r3")
    assert [(v.table, v.kind) for v in added3] == [("orders", "alter")]
    assert h3.current("shop", "orders").names == ["w", "id", "v"]
    assert h3.current("shop", "customers").names == ["id", "name", "ip", "j", "email"]
    history_table = delta_io.open_table(cfg.pipeline_path("schema_history"), "rs", spark)
    rows = history_table.read_df().orderBy("valid_from", "version")
    got = [(r["table"], r["version"], r["kind"], r["_run_id"]) for r in rows.collect()]
    assert got == [("customers", 0, "seed", "r1"), ("orders", 0, "create", "r1"), ("customers", 1, "alter", "r1"),
                   ("orders", 1, "alter", "r3")]


# ------------------------------------------------------------------------------------- value fixes in Spark's tasks

IMAGE = "ARRAY<STRUCT<idx INT, name STRING, type STRING, text STRING, bin BINARY>>"
_MYSQL_LATIN1 = "".join(chr(b) if b in (0x81, 0x8D, 0x8F, 0x90, 0x9D)
                        else bytes([b]).decode("cp1252") for b in range(0x20, 0x100))  # cp1252, its holes kept as C1


@pytest.mark.parametrize(
    "fix, text, raw, value",
    [
        ((sh.FIX_ENUM, ("a", "b''", "c,d")), "2", None, "b''"),
        ((sh.FIX_ENUM, ("a",)), "0", None, ""),
        ((sh.FIX_SET, tuple(f"m{i}" for i in range(64))), str((1 << 63) | 5), None, "m0,m2,m63"),
        ((sh.FIX_UNSIGNED, 64), "-1", None, "18446744073709551615"),
        ((sh.FIX_UNSIGNED, 8), "-128", None, "128"),
        ((sh.FIX_UNSIGNED, 32), "7", None, "7"),
        ((sh.FIX_DECODE, "latin1"), None, bytes(range(0x20, 0x100)), _MYSQL_LATIN1),
        ((sh.FIX_DECODE, "utf8mb4"), None, "é😀\\'".encode(), "é😀\\'"),
        ((sh.FIX_DECODE, "ucs2"), None, "Ωж".encode("utf-16-be"), "Ωж"),
        ((sh.FIX_DECODE, "cp1251"), None, "привет".encode("cp1251"), "привет"),
        ((sh.FIX_INET6,), None, bytes(16), "::"),
        ((sh.FIX_INET6,), None, bytes(15) + b"\x01", "::1"),
        ((sh.FIX_INET6,), None, bytes.fromhex("20010db8000000000000ff0000428329"), "2001:db8::ff00:42:8329"),
        ((sh.FIX_INET6,), None, bytes.fromhex("00010000000000000000000000000000"), "1::"),
        ((sh.FIX_INET6,), None, bytes.fromhex("20010db8000100000000000100000001"), "2001:db8:1::1:0:1"),
        ((sh.FIX_INET6,), None, bytes.fromhex("00000000000000000000ffffc00002"), "::ffff:192.0.2.0"),  # trailing zero byte stripped
        ((sh.FIX_INET6,), None, bytes.fromhex("000000000000000000000000c0000201"), "::192.0.2.1"),
        ((sh.FIX_INET6,), None, bytes.fromhex("00010000000000010000000000000001"), "1:0:0:1::1"),
        ((sh.FIX_INET4,), None, b"\xc0\xa8\x01", "192.168.1.0"),
        ((sh.FIX_UUID,), None, bytes.fromhex("123e4567e89b12d3a4564266141740"), "123e4567-e89b-12d3-a456-426614174000"),
        ((sh.FIX_UUID,), None, b"\xff" * 16, "ffffffff-ffff-ffff-ffff-ffffffffffff"),
        ((sh.FIX_UUID,), None, bytes(15) + b"\x01", "00000000-0000-0000-0000-000000000001"),
    ],
)
def test_value_fixes_complete_cells_in_sparks_tasks(spark, fix, text, raw, value):  # noqa: F811
    from pipelines.schema.typemap import ColumnSpec
    from pipelines.silver.spark_typing import typed_columns

    df = spark.createDataFrame([(1, [(3, None, "T", text, raw)], None)], f"k INT, after {IMAGE}, before {IMAGE}")
    got = typed_columns(df, [ColumnSpec("v", "varchar", ordinal=3)], fixes={3: fix}).collect()[0]
    assert got["after"]["v"] == value == sh.apply_fix(fix, text, raw)[0]


def test_enum_members_from_full_metadata_are_kept(spark):  # noqa: F811
    from pipelines.schema.typemap import ColumnSpec
    from pipelines.silver.spark_typing import typed_columns

    fix = (sh.FIX_ENUM, ("10", "20"))
    df = spark.createDataFrame([(1, [(0, "e", "ENUM", "10", None)], [(0, None, "ENUM", "2", None)])],
                               f"k INT, after {IMAGE}, before {IMAGE}")
    got = typed_columns(df, [ColumnSpec("e", "enum", enum_values=("10", "20"))], ("after", "before"),
                        fixes={0: fix}).collect()[0]
    assert got["after"]["e"] == "10" and got["before"]["e"] == "20"
    assert sh.apply_fix(fix, "10", None, named=True) == ("10", None)


def test_shape_key_round_trip(spark):  # noqa: F811
    from pipelines.silver.shapes import parse_shape, shape_key, with_shape

    df = spark.createDataFrame(
        [("u", [(1, "b c", "LONG", "1", None)], [(0, None, "VARCHAR(3) utf8mb4", "x", None), (1, "b c", "LONG", "2", None)])],
        f"op STRING, before {IMAGE}, after {IMAGE}")
    (key,) = [r["_shape"] for r in with_shape(df).collect()]
    shape = (IC(0, None, "VARCHAR(3) utf8mb4"), IC(1, "b c", "LONG"))
    assert parse_shape(key) == shape and shape_key(shape) == key


def test_shape_counts_equal_the_per_row_shapes(spark):  # noqa: F811
    """shape_counts groups by a hash of the images' idx/name/type arrays first; the result must be
    what grouping every row by its own with_shape gives (same shapes, counts, bounds, sizes)."""
    from chispa import assert_df_equality
    from pyspark.sql import functions as F

    from pipelines.silver.shapes import shape_counts, with_shape

    a = [(0, "id", "LONG", "1", None), (1, "v", "VARCHAR(3) utf8mb4", "x", None)]
    a_minimal = [(0, "id", "LONG", "1", None)]  # MINIMAL image: fewer columns, another shape
    a_unnamed = [(0, None, "LONG", "1", None), (1, None, "VARCHAR(3) utf8mb4", None, None)]
    pk = [(0, "id", "LONG", "1", None)]
    rows = [
        ("s", "t", "c", "01", None, a, pk), ("s", "t", "c", "02", None, a, pk),
        ("s", "t", "u", "03", a_minimal, a, pk), ("s", "t", "u", "04", a, a, pk),
        ("s", "t", "d", "05", a, None, pk), ("s", "t", "c", "06", None, a_unnamed, None),
        ("s", "u", "c", "07", None, a, pk), ("s", "t", "u", "08", a, a_minimal, pk),
    ]
    df = spark.createDataFrame(rows, f"db STRING, `table` STRING, op STRING, _seq STRING, before {IMAGE}, "
                                     f"after {IMAGE}, pk {IMAGE}")
    expected = (with_shape(df).groupBy("db", "table", "_shape", "op").agg(
        F.min("_seq").alias("min_seq"), F.max("_seq").alias("max_seq"), F.count(F.lit(1)).alias("n"),
        F.min(F.size("after")).alias("min_after"), F.min(F.size("before")).alias("min_before"),
        F.first(F.col("pk.idx"), ignorenulls=True).alias("pk_idx")))
    got = shape_counts(df).withColumn("n", F.col("n").cast("long"))
    # (t, c) x 2 shapes, (t, d), (u, c), and (t, u) once: its three hash groups (a MINIMAL before or
    # after image beside a whole one) have one shape, the union of their columns
    assert got.count() == 5
    assert_df_equality(got, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.parametrize("sql", [
    "CREATE TABLE t (a INT)", "/*!40101 ALTER TABLE t ADD c INT */", "-- note\nDROP TABLE t", "RENAME TABLE a TO b",
    "TRUNCATE t", "CREATE UNIQUE INDEX i ON t (a)", "DROP DATABASE d", "/* x */ ALTER DATABASE d CHARACTER SET utf8mb4",
])
def test_every_schema_statement_is_ddl(sql):
    """statement_kind names the kind of a statement :func:`is_ddl` says is DDL (one test for DDL)."""
    from pipelines.binlog.changes import is_ddl

    assert sh.statement_kind(sql) is not None and is_ddl(sql)
    assert not is_ddl("INSERT INTO t VALUES (1)") and sh.statement_kind("INSERT INTO t VALUES (1)") is None
