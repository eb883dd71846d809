"""Seeded random end-to-end workloads with the source server as the oracle.

Each seed makes, on a private MariaDB server under one of :data:`MODES` (``binlog_row_metadata``
x ``binlog_row_image``):

* random tables: columns of every type family MariaDB offers (signed and unsigned integers,
  decimals, floats, BIT, YEAR, temporal types with fractions, strings in several charsets, binaries,
  blobs, ENUM/SET, JSON, INET4/INET6/UUID, geometry) in random order; a key, no key, or a
  composite key; random identifiers (spaces, dots, quotes, backticks, unicode, SQL keywords, and
  names that collide with silver's own columns);
* random DML: multi-row inserts, updates (some change the key), deletes, multi-statement
  transactions, rolled-back transactions, ``FLUSH BINARY LOGS``, and mid-stream
  ``ALTER TABLE ... ADD / DROP / MODIFY / RENAME / CHANGE COLUMN`` (some to another silver type,
  some DROP and ADD a column in one statement), ``RENAME TABLE``, ``TRUNCATE TABLE``, and DROP
  then CREATE of a table with another schema.

The binlogs then go through the pipeline in two runs (the files closed halfway, then the rest),
and every silver table must equal ``SELECT *`` on the server (:mod:`oracle`). Seeds run in
batches (``--batch``, 20 by default): a batch's seeds share one server, each in a database of its
own, and the pipeline's two runs, as a user's many tables do. A seed reproduces exactly, alone or
in its batch: the same seed and mode give the same statements.

    python tests/soak.py --seeds 20                    # every mode, seeds 0..19, both backends
    python tests/soak.py --seed 7 --mode minimal/noblob --backend spark -v   # one seed alone, its SQL
    make soak SEEDS=200

With ``--kill`` (and in the batches whose first seed :func:`fault_seed` picks), the main job runs
as a subprocess and is SIGKILLed at a random moment, then run again: nothing may be lost or
applied twice.

``--place`` says where the pipeline runs (:data:`PLACES`): ``local`` folders (the default);
``s3``, binlogs and warehouse in a bucket of a private S3 API server (moto's, on 127.0.0.1), the
S3 settings only in the job's ``spark.conf`` (the jobs run as subprocesses; a killed run's lease
frees the warehouse after ``lock.lease_seconds``); ``overlap``, two silver runs at once on the
same warehouse after each bronze run, in this process and without a lock (what a lease that
expired lets happen): each table's commits are made only on the version its plan read; ``dump``,
the database older than its binlogs: ``mariadb-dump --master-data=2`` half-way through the first
seed's workload, the binlogs before the dump's file never shipped, the dump loaded first
(``jobs/load_snapshot.py``: in this process, or as a subprocess SIGKILLed once and run again in
the batches that kill), then the pipeline. About one local batch in four starts from a dump too
(:func:`dump_seed`).
"""
from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
for _path in (TESTS, REPO):  # this checkout's pipelines, whatever the venv installed
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from mariadb_server import MariaDBServer  # noqa: E402
from oracle import _diff, as_dumped, q, server_columns, server_rows, silver_rows  # noqa: E402
from workloads import Col, random_value, sql_literal  # noqa: E402

PLACES = ("local", "s3", "overlap", "dump")
S3_LEASE_SECONDS = 5  # place s3: a killed run's lease; the next run waits for it (--lock-timeout)

MODES = {
    "full/full": dict(row_metadata="FULL", row_image="FULL"),
    "full/minimal": dict(row_metadata="FULL", row_image="MINIMAL"),
    "full/noblob": dict(row_metadata="FULL", row_image="NOBLOB"),
    "minimal/full": dict(row_metadata="MINIMAL", row_image="FULL"),
    "minimal/minimal": dict(row_metadata="MINIMAL", row_image="MINIMAL"),
    "minimal/noblob": dict(row_metadata="MINIMAL", row_image="NOBLOB"),
}

# ------------------------------------------------------------------------------------------ types


def _int(base: str, unsigned: bool) -> Col:
    bits = {"TINYINT": 8, "SMALLINT": 16, "MEDIUMINT": 24, "INT": 32, "BIGINT": 64}[base]
    return Col("", base + (" UNSIGNED" if unsigned else ""), "int", unsigned=unsigned, bits=bits)


VALUE_TYPES: list[Col] = [
    *[_int(b, u) for b in ("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT") for u in (False, True)],
    Col("", "DECIMAL(10,2)", "dec", precision=10, scale=2),
    Col("", "DECIMAL(30,10) UNSIGNED", "dec", unsigned=True, precision=30, scale=10),
    Col("", "DECIMAL(65,30)", "dec", precision=65, scale=30),
    Col("", "DECIMAL(4,0)", "dec", precision=4, scale=0),
    Col("", "FLOAT", "float"),
    Col("", "DOUBLE", "double"),
    Col("", "BIT(1)", "bit", bits=1),
    Col("", "BIT(17)", "bit", bits=17),
    Col("", "BIT(64)", "bit", bits=64),
    Col("", "YEAR", "year"),
    Col("", "DATE", "date"),
    Col("", "TIME", "time", fsp=0),
    Col("", "TIME(3)", "time", fsp=3),
    Col("", "DATETIME", "datetime", fsp=0),
    Col("", "DATETIME(6)", "datetime", fsp=6),
    Col("", "TIMESTAMP(2) NULL", "timestamp", fsp=2),
    Col("", "CHAR(5) CHARACTER SET utf8mb4", "char", length=5, charset="utf8mb4"),
    Col("", "VARCHAR(40) CHARACTER SET utf8mb4", "varchar", length=40, charset="utf8mb4"),
    Col("", "VARCHAR(20) CHARACTER SET latin1", "varchar", length=20, charset="latin1"),
    Col("", "TEXT CHARACTER SET utf8mb4", "text", length=300, charset="utf8mb4"),
    Col("", "TINYTEXT CHARACTER SET latin1", "text", length=60, charset="latin1"),
    Col("", "BINARY(4)", "binary", length=4),
    Col("", "VARBINARY(30)", "varbinary", length=30),
    Col("", "BLOB", "blob", length=200),
    Col("", "ENUM('a','b c','ü') CHARACTER SET utf8mb4", "enum", members=("a", "b c", "ü"), charset="utf8mb4"),
    Col("", "SET('x','y','z') CHARACTER SET utf8mb4", "set", members=("x", "y", "z"), charset="utf8mb4"),
    Col("", "JSON", "json", charset="utf8mb4"),
    Col("", "INET4", "inet4"),
    Col("", "INET6", "inet6"),
    Col("", "UUID", "uuid"),
    Col("", "POINT", "geometry"),
    Col("", "GEOMETRY", "geometry"),
]
KEY_TYPES: list[Col] = [
    Col("", "INT", "int", bits=32), Col("", "BIGINT UNSIGNED", "int", unsigned=True, bits=64),
    Col("", "VARCHAR(20) CHARACTER SET utf8mb4", "varchar", length=20, charset="utf8mb4"),
    Col("", "DATE", "date"), Col("", "CHAR(3) CHARACTER SET latin1", "char", length=3, charset="latin1"),
]
# same silver type as the original: a MODIFY that silver follows without a type change
WIDER = {"VARCHAR(40) CHARACTER SET utf8mb4": "VARCHAR(80) CHARACTER SET utf8mb4",
         "VARCHAR(20) CHARACTER SET latin1": "VARCHAR(25) CHARACTER SET latin1",
         "VARBINARY(30)": "VARBINARY(60)", "TINYTEXT CHARACTER SET latin1": "TINYTEXT CHARACTER SET latin1 NULL"}

NAMES = ["a", "b2", "qty", "my col", "a.b", "it's", 'q"x', "a`b", "größe", "名前", "☕ cup", "select", "order",
         "key", "from", "group", "_seq", "_op", "_deleted", "_commit_ts", "x=y", "p(1)", "semi;colon", "tab\tname",
         "UPPER", "with,comma", "{brace}", "op", "after", "before"]
OWN_NAMES = ("_seq", "_op", "_deleted", "_commit_ts")  # silver's own columns under the default prefix
TABLE_NAMES = ["t", "orders", "my table", "a.b", "it's", "select", "日本", "t`x", "x-y", "☕"]


def _literal(col: Col, rng: random.Random) -> str:
    if col.kind == "inet4":
        return "'" + ".".join(str(rng.randint(0, 255)) for _ in range(4)) + "'"
    if col.kind == "inet6":
        return "'" + ":".join(f"{rng.getrandbits(16):x}" for _ in range(8)) + "'"
    if col.kind == "uuid":  # MariaDB takes only the RFC 4122 variant
        return f"'{uuid.UUID(int=rng.getrandbits(128), version=rng.choice([1, 4]))}'"
    if col.kind == "geometry":
        return f"ST_GeomFromText('POINT({rng.randint(-99, 99)} {rng.randint(-99, 99)}.5)')"
    return sql_literal(col, random_value(rng, col))


# ------------------------------------------------------------------------------------------ schema


@dataclass
class Table:
    name: str
    columns: list[Col]  # in table order
    key: list[str]  # [] for a keyless table
    next_id: int = 1
    collides: bool = False  # a source column takes a name of silver's own (see write_config)

    def value_columns(self) -> list[Col]:
        return [c for c in self.columns if c.name not in self.key]


def _name(rng: random.Random, taken: set[str], pool: list[str]) -> str:
    for _ in range(50):
        n = rng.choice(pool) if rng.random() < 0.6 else f"{rng.choice(pool)}{rng.randint(1, 99)}"
        n = n[:64]
        if n.lower() not in taken:
            taken.add(n.lower())
            return n
    n = f"c{len(taken)}"
    taken.add(n)
    return n


def _named(col: Col, name: str, *, nullable: bool = True) -> Col:
    return Col(name, col.sql, col.kind, unsigned=col.unsigned, bits=col.bits, precision=col.precision,
               scale=col.scale, fsp=col.fsp, length=col.length, charset=col.charset, members=col.members,
               nullable=nullable)


def random_table(rng: random.Random, name: str) -> Table:
    taken: set[str] = set()
    kind = rng.choice(["pk", "pk", "cpk", "none"])
    key_cols = [] if kind == "none" else [
        _named(rng.choice(KEY_TYPES), _name(rng, taken, NAMES), nullable=False)
        for _ in range(1 if kind == "pk" else rng.randint(2, 3))]
    values = [_named(rng.choice(VALUE_TYPES), _name(rng, taken, NAMES)) for _ in range(rng.randint(2, 7))]
    columns = key_cols + values
    rng.shuffle(columns)
    return Table(name, columns, [c.name for c in key_cols],
                 collides=any(c.name.lower() in OWN_NAMES for c in columns))


def create_sql(db: str, t: Table) -> str:
    defs = [f"{q(c.name)} {c.sql}{'' if c.nullable else ' NOT NULL'}" for c in t.columns]
    if t.key:
        defs.append(f"PRIMARY KEY ({', '.join(q(k) for k in t.key)})")
    return f"CREATE TABLE {q(db)}.{q(t.name)} ({', '.join(defs)}) ENGINE=InnoDB"


# ------------------------------------------------------------------------------------------ DML


def _key_literal(t: Table, col: Col, rng: random.Random) -> str:
    """A key value never used before in this table (ids count up; rolled-back ones are not reused)."""
    n = t.next_id
    t.next_id += 1
    if col.kind == "int":
        return str(n)
    if col.kind == "date":
        return f"'{(dt.date(2000, 1, 1) + dt.timedelta(days=n)).isoformat()}'"
    if col.kind == "char":
        return "'" + f"{n:03d}"[-3:] + "'" if n < 1000 else "'" + chr(0xC0 + n % 32) + f"{n % 100:02d}'"
    return sql_literal(col, f"k{n}·{rng.choice(['', 'é', ' x', '☕'])}")


def _row(t: Table, rng: random.Random) -> str:
    values = []
    for c in t.columns:
        if c.name in t.key:
            values.append(_key_literal(t, c, rng))
        elif c.nullable and rng.random() < 0.15:
            values.append("NULL")
        else:
            values.append(_literal(c, rng))
    return "(" + ", ".join(values) + ")"


def insert_sql(db: str, t: Table, rng: random.Random) -> str:
    rows = ", ".join(_row(t, rng) for _ in range(rng.randint(1, 4)))
    return f"INSERT INTO {q(db)}.{q(t.name)} ({', '.join(q(c.name) for c in t.columns)}) VALUES {rows}"


def _where_existing(srv: MariaDBServer, db: str, t: Table, rng: random.Random) -> str | None:
    """A WHERE clause that picks one row the server has now (by key), or None when empty."""
    if not t.key:
        return "1 = 1"
    cols = ", ".join(f"HEX({q(k)})" for k in t.key)
    rows = srv.query_rows(f"SELECT {cols} FROM {q(db)}.{q(t.name)}")
    if not rows:
        return None
    row = rng.choice(rows)
    return " AND ".join(f"HEX({q(k)}) = '{v}'" for k, v in zip(t.key, row))


def update_sql(srv: MariaDBServer, db: str, t: Table, rng: random.Random) -> str | None:
    where = _where_existing(srv, db, t, rng)
    if where is None:
        return None
    sets = []
    for c in rng.sample(t.value_columns(), k=rng.randint(1, len(t.value_columns()))):
        sets.append(f"{q(c.name)} = {'NULL' if c.nullable and rng.random() < 0.1 else _literal(c, rng)}")
    if t.key and rng.random() < 0.25:  # a key change
        k = rng.choice([c for c in t.columns if c.name in t.key])
        sets.append(f"{q(k.name)} = {_key_literal(t, k, rng)}")
    return f"UPDATE {q(db)}.{q(t.name)} SET {', '.join(sets)} WHERE {where} LIMIT 1"


def delete_sql(srv: MariaDBServer, db: str, t: Table, rng: random.Random) -> str | None:
    where = _where_existing(srv, db, t, rng)
    return None if where is None else f"DELETE FROM {q(db)}.{q(t.name)} WHERE {where} LIMIT 1"


# another silver type, every value kept as the server converts it: a MODIFY that silver casts
RETYPED = {**{c.sql: "BIGINT" for c in VALUE_TYPES if c.kind == "int" and not c.unsigned and c.bits < 64},
           **{c.sql: "VARCHAR(40) CHARACTER SET utf8mb4" for c in VALUE_TYPES if c.kind == "int"}}
# added NOT NULL with a DEFAULT: the server's rows take it
DEFAULTED = {"INT": ("int", "-7"), "VARCHAR(40) CHARACTER SET utf8mb4": ("varchar", "'zz ☕'")}


def _placed(t: Table, col: Col, rng: random.Random) -> str:
    """Put ``col`` somewhere in ``t``; the ADD COLUMN position clause."""
    if rng.random() < 0.5:
        t.columns.insert(0, col)
        return " FIRST"
    after = rng.choice(t.columns)
    t.columns.insert(t.columns.index(after) + 1, col)
    return f" AFTER {q(after.name)}"


def _new_column(rng: random.Random, name: str) -> tuple[Col, str]:
    """A column to add and its DDL: any type, or now and then NOT NULL with a DEFAULT."""
    if rng.random() < 0.2:
        sql = rng.choice(sorted(DEFAULTED))
        kind, default = DEFAULTED[sql]
        base = _int("INT", False) if kind == "int" else next(c for c in VALUE_TYPES if c.sql == sql)
        return _named(base, name, nullable=False), f"{sql} NOT NULL DEFAULT {default}"
    col = _named(rng.choice(VALUE_TYPES), name)
    return col, col.sql


def alter_sql(db: str, t: Table, rng: random.Random) -> str | None:
    """ADD (somewhere; now and then NOT NULL with a DEFAULT), DROP (a value column), MODIFY (the
    same silver type, or another that silver casts), or DROP and ADD again under the same name in
    one statement, one column. An added column never takes a name of silver's own: the table's
    prefix was chosen when it was made."""
    what = rng.choice(["add", "add", "drop", "modify", "retype", "readd", "rename"])
    target = f"{q(db)}.{q(t.name)}"
    if what == "add" or len(t.value_columns()) < 2:
        taken = {c.name.lower() for c in t.columns} | set(OWN_NAMES)
        col, ddl = _new_column(rng, _name(rng, taken, NAMES))
        where = _placed(t, col, rng)
        return f"ALTER TABLE {target} ADD COLUMN {q(col.name)} {ddl}{where}"
    if what == "drop":
        col = rng.choice(t.value_columns())
        t.columns.remove(col)
        return f"ALTER TABLE {target} DROP COLUMN {q(col.name)}"
    if what == "readd":
        old = rng.choice(t.value_columns())
        t.columns.remove(old)
        col, ddl = _new_column(rng, old.name)
        where = _placed(t, col, rng) if rng.random() < 0.5 else (t.columns.append(col) or "")
        return f"ALTER TABLE {target} DROP COLUMN {q(old.name)}, ADD COLUMN {q(col.name)} {ddl}{where}"
    if what == "rename":  # RENAME COLUMN, or CHANGE COLUMN (the same type) to a new name
        col = rng.choice(t.value_columns())
        taken = {c.name.lower() for c in t.columns} | set(OWN_NAMES)
        renamed = _named(col, _name(rng, taken, NAMES), nullable=col.nullable)
        t.columns[t.columns.index(col)] = renamed
        if rng.random() < 0.5:
            return f"ALTER TABLE {target} RENAME COLUMN {q(col.name)} TO {q(renamed.name)}"
        null = "" if col.nullable else " NOT NULL"
        return f"ALTER TABLE {target} CHANGE COLUMN {q(col.name)} {q(renamed.name)} {col.sql}{null}"
    table = RETYPED if what == "retype" else WIDER
    candidates = [c for c in t.value_columns() if c.sql in table]
    if not candidates:
        return None
    col = rng.choice(candidates)
    sql = table[col.sql]
    new = _int("BIGINT", False) if sql == "BIGINT" else next(c for c in VALUE_TYPES if c.sql == sql) \
        if what == "retype" else Col("", sql, col.kind, length=col.length, charset=col.charset)
    t.columns[t.columns.index(col)] = _named(new, col.name, nullable=col.nullable)
    null = "" if col.nullable else " NOT NULL"
    return f"ALTER TABLE {target} MODIFY COLUMN {q(col.name)} {sql}{null}"


# ------------------------------------------------------------------------------------------ a seed


@dataclass
class Workload:
    seed: int
    mode: str
    db: str
    tables: list[Table]
    statements: list[str] = field(default_factory=list)  # what ran, in order (for -v and reports)
    # every name a table whose source columns take silver's own names had (renamed, or created
    # again): the configuration gives them another prefix
    prefixed: set[str] = field(default_factory=set)


def run_workload(srv: MariaDBServer, seed: int, mode: str, *, steps: int = 40, at_half=None) -> Workload:
    """Create the seed's tables and run its random statements on ``srv``; FLUSH halfway too (and
    call ``at_half()`` there: place dump takes its dump)."""
    rng = random.Random(f"{seed}/{mode}")
    db = rng.choice(["soak", "soak db", "soak`d", "sœak"]) + f"_{seed}"
    names = rng.sample(TABLE_NAMES, k=rng.randint(1, 3))
    tables = [random_table(rng, n) for n in names]
    w = Workload(seed, mode, db, tables)

    def run(sql: str) -> None:
        w.statements.append(sql)
        srv.sql(sql)

    run(f"CREATE DATABASE {q(db)} CHARACTER SET utf8mb4")
    for t in tables:
        run(create_sql(db, t))
        run(insert_sql(db, t, rng))
    w.prefixed |= {t.name for t in tables if t.collides}
    for step in range(steps):
        t = rng.choice(tables)
        r = rng.random()
        if r < 0.05:
            run("FLUSH BINARY LOGS")
        elif r < 0.10:
            sql = alter_sql(db, t, rng)
            if sql:
                run(sql)
        elif r < 0.12:
            for sql in table_sql(db, tables, t, rng):
                run(sql)
        elif r < 0.22:  # a transaction over several tables, committed or rolled back
            body = [s for s in (_dml(srv, db, rng.choice(tables), rng) for _ in range(rng.randint(2, 4))) if s]
            end = "ROLLBACK" if rng.random() < 0.3 else "COMMIT"
            if body:
                run("BEGIN; " + "; ".join(body) + f"; {end}")
        else:
            sql = _dml(srv, db, t, rng)
            if sql:
                run(sql)
        if step == steps // 2:
            run("FLUSH BINARY LOGS")
            if at_half is not None:
                at_half()
        w.prefixed |= {u.name for u in tables if u.collides}
    return w


def table_sql(db: str, tables: list[Table], t: Table, rng: random.Random) -> list[str]:
    """RENAME TABLE (to a name no table of the seed has), TRUNCATE TABLE, or DROP TABLE and CREATE
    TABLE again under its name with another schema (and rows): ``tables`` follows."""
    what = rng.choice(["rename", "rename", "truncate", "recreate"])
    target = f"{q(db)}.{q(t.name)}"
    if what == "rename":
        free = [n for n in TABLE_NAMES if n.lower() not in {u.name.lower() for u in tables}]
        if not free:
            return []
        old, t.name = target, rng.choice(free)
        return [f"RENAME TABLE {old} TO {q(db)}.{q(t.name)}"]
    if what == "truncate":
        return [f"TRUNCATE TABLE {target}"]
    new = random_table(rng, t.name)
    new.next_id = t.next_id
    tables[tables.index(t)] = new
    return [f"DROP TABLE {target}", create_sql(db, new), insert_sql(db, new, rng)]


def _dml(srv: MariaDBServer, db: str, t: Table, rng: random.Random) -> str | None:
    r = rng.random()
    if r < 0.45:
        return insert_sql(db, t, rng)
    if r < 0.8:
        return update_sql(srv, db, t, rng)
    return delete_sql(srv, db, t, rng)


# ------------------------------------------------------------------------------------------ checking


def compare(srv: MariaDBServer, w: Workload, warehouse: Path, *, from_dump: bool = False) -> list[str]:
    """One entry per silver table that differs from the server's ``SELECT *``; ``from_dump``: the
    tables started from a logical dump, whose FLOAT values carry the dump's precision
    (:func:`oracle.as_dumped`, both sides)."""
    problems = []
    for t in w.tables:
        cols = server_columns(srv, w.db, t.name)
        want = server_rows(srv, w.db, t.name, cols)
        got = silver_rows(warehouse, w.db, t.name, cols, deleted=deleted_column(warehouse, w.db, t.name))
        if from_dump and got is not None:
            want, got = as_dumped(cols, want), as_dumped(cols, got)
        if (got or []) != want:
            problems.append(_diff(f"{w.db}.{t.name}", cols, want, got or []))
    return problems


def deleted_column(warehouse: Path, db: str, table: str) -> str:
    """The silver table's own tombstone column (its prefix may not be ``_``)."""
    from pipelines.paths import silver_table_path
    from pipelines.silver.columns import own_columns_of

    from pipelines.delta_io import open_table

    path = silver_table_path(str(warehouse), db, table)
    if not open_table(path, "rs").exists():
        return "_deleted"
    return own_columns_of(open_table(path).read_arrow().column_names).deleted


def closed_binlogs(srv: MariaDBServer) -> list[Path]:
    return srv.binlog_files()[:-1]


def copy_files(files: list[Path], dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for f in files:
        if not (dest / f.name).exists():
            shutil.copy2(f, dest / f.name)


def write_config(workloads: "Workload | list[Workload]", workdir: Path, backend: str,
                 s3: "tuple | None" = None) -> Path:
    """The job's configuration: the shipped one, with another prefix for silver's own columns of
    every table whose source columns take the default names (as a user would set it); ``s3``
    ``(server, bucket)``: binlogs and warehouse in that bucket, its settings in ``spark.conf``."""
    import yaml

    workloads = workloads if isinstance(workloads, list) else [workloads]
    cfg = yaml.safe_load((REPO / "conf" / "pipeline.yaml").read_text())
    cfg.update(input=str(workdir / "binlogs"), warehouse=str(workdir / "warehouse"), progress=False)
    if s3 is not None:
        server, bucket = s3
        cfg.update(input=f"s3a://{bucket}/binlogs", warehouse=f"s3a://{bucket}/warehouse",
                   lock={"lease_seconds": S3_LEASE_SECONDS})
        cfg["spark"] = {**cfg.get("spark", {}), "conf": {**cfg.get("spark", {}).get("conf", {}), **server.spark_conf()}}
    cfg["delta"] = {**cfg.get("delta", {}), "backend": backend}
    cfg["silver"] = {"column_prefix": "_", "table_column_prefix": {
        f"{w.db}.{name}": "_cdc_" for w in workloads for name in w.prefixed}}
    path = workdir / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True))
    return path


def job(config: Path, backend: str, *, kill_after: float | None = None,
        timeout: float = 900, script: str = "run_pipeline.py", extra: tuple = ()) -> subprocess.CompletedProcess | None:
    """The main job as users run it; with ``kill_after`` SIGKILLed after that many seconds
    (None back when it was killed, the completed process when it ended first). It waits for a
    killed run's lease (place s3), and sees no ``AWS_*`` variable: only the config's settings."""
    cmd = [sys.executable, str(REPO / "jobs" / script), "--config", str(config), "--no-progress",
           "--delta-backend", backend, "--lock-timeout", str(4 * S3_LEASE_SECONDS), *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if kill_after is None:
        return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=kill_after)
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        return None


def bronze_duplicates(warehouse: Path) -> int:
    """Row changes bronze holds more than once (by file, position and row; a snapshot's rows, which
    share their dump's file and position, by ``_seq`` too)."""
    from pipelines import delta_io

    path = f"{str(warehouse).rstrip('/')}/bronze/binlog_changes"
    if not delta_io.open_table(path, "rs").exists():
        return 0
    keys = delta_io.open_table(str(path)).read_arrow(["source_file", "event_pos", "row_idx", "_seq"]).to_pylist()
    return len(keys) - len({(k["source_file"], k["event_pos"], k["row_idx"], k["_seq"]) for k in keys})


def seed_backend(seed: int) -> str:
    """The backend a seed runs on when none is asked for: both, alternately."""
    return "rs" if seed % 2 == 0 else "spark"


def fault_seed(seed: int) -> bool:
    """The seeds that SIGKILL the job once (about one in five)."""
    return random.Random(f"kill/{seed}").random() < 0.2


def dump_seed(seed: int) -> bool:
    """The local batches (by their first seed) that start from a dump, as place dump does (about
    one in four)."""
    return random.Random(f"dump/{seed}").random() < 0.25


_SYSTEM_DBS = frozenset({"information_schema", "performance_schema", "mysql", "sys"})


def take_dump(srv: MariaDBServer, dest: Path) -> Path:
    """``mariadb-dump`` of every user database, with its binlog position (as README says)."""
    from snapshot_oracle import dump as mariadb_dump

    dbs = tuple(r[0] for r in srv.query_rows("SHOW DATABASES") if r[0] not in _SYSTEM_DBS)
    return mariadb_dump(srv, dest, "--master-data=2", "--hex-blob", databases=dbs)


def load_job(config: Path, dump: Path, backend: str, *, kill_after: float | None = None,
             timeout: float = 900) -> subprocess.CompletedProcess | None:
    """``jobs/load_snapshot.py`` as users run it (``kill_after``: as :func:`job`)."""
    return job(config, backend, kill_after=kill_after, timeout=timeout,
               script="load_snapshot.py", extra=("--dump", str(dump)))


def arrow_seed(seed: int) -> bool:
    """The seeds whose tables silver applies as it applies big ones (about one in two; see
    :func:`run_batch`'s ``arrow``)."""
    return random.Random(f"arrow/{seed}").random() < 0.5


def parts_seed(seed: int) -> bool:
    """Of the seeds folded in Arrow, those whose segments are read by parts (about one in two)."""
    return random.Random(f"parts/{seed}").random() < 0.5


@contextlib.contextmanager
def as_big_tables(on: bool, by_parts: bool = False):
    """With ``on``, silver fetches no segment for its small segments' path (:data:`pipelines.silver.driver.FETCH_ROWS`
    0), so every segment goes the way a big table's does (the soak's tables are small): on delta-rs
    the big segments' way (:mod:`pipelines.silver.big_segments`: read from bronze by delta-rs,
    folded in Arrow, keyed and keyless tables); on delta-spark Spark's MERGE path
    (:mod:`pipelines.silver.changes`, :mod:`pipelines.silver.plan`), as a cluster's big tables take.
    ``by_parts``: each segment is read and folded by parts, a part per record batch of bronze, as
    a segment of more than :data:`pipelines.silver.segment_cells.BIG_BYTES` is. Either way, with ``on``
    every segment is typed by Arrow's casts, however few its changes
    (:data:`pipelines.silver.arrow_typing.VECTORIZE_FROM` 0)."""
    from pipelines.silver import arrow_typing, driver, segment_cells

    budget, together, part = driver.FETCH_ROWS, segment_cells.BIG_BYTES, segment_cells.CHUNK_BYTES
    vectorize = arrow_typing.VECTORIZE_FROM
    driver.FETCH_ROWS = 0 if on else budget
    arrow_typing.VECTORIZE_FROM = 0 if on else vectorize
    if on and by_parts:
        segment_cells.BIG_BYTES, segment_cells.CHUNK_BYTES = 0, 1
    try:
        yield
    finally:
        driver.FETCH_ROWS, segment_cells.BIG_BYTES, segment_cells.CHUNK_BYTES = budget, together, part
        arrow_typing.VECTORIZE_FROM = vectorize


@dataclass
class Outcome:
    seed: int
    mode: str
    backend: str
    problems: list[str]
    killed: bool = False
    arrow: bool = False
    rows: int = 0
    columns: int = 0
    statements: int = 0
    seconds: float = 0.0
    place: str = "local"
    by_parts: bool = False  # (keyed in Arrow) each segment read and folded by parts

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        big = ("Spark's path" if self.backend == "spark" else "keyed in Arrow" + (", by parts" if self.by_parts else ""))
        head = (f"seed {self.seed} {self.mode} {self.backend}{' (killed once)' if self.killed else ''}"
                f"{f' ({big})' if self.arrow else ''}"
                f"{'' if self.place == 'local' else f' ({self.place})'}")
        if self.ok:
            return f"ok    {head}: {self.statements} statements, {self.columns} columns, {self.rows} rows, {self.seconds:.1f} s"
        first = self.problems[0].splitlines()
        return f"FAIL  {head}: {first[0]}" + (f" | {first[-1].strip()}" if len(first) > 1 else "")


def run_seed(seed: int, mode: str, workdir: Path, *, backend: str = "rs", spark=None, kill: bool | None = None,
             steps: int = 40, verbose: bool = False, arrow: bool = False, place: str = "local") -> Outcome:
    """One seed alone: :func:`run_batch` of that seed (``kill`` defaults to :func:`fault_seed`)."""
    kill = fault_seed(seed) if kill is None else kill
    return run_batch([seed], mode, workdir, backend=backend, spark=spark, kill=kill, steps=steps,
                     verbose=verbose, arrow=arrow, place=place)[0]


_S3: list = []  # the private S3 API server of place s3, started once per process


def s3_server():
    """The process's private S3 API server (moto's; stopped at exit)."""
    if not _S3:
        from s3_server import S3Server

        _S3.append(S3Server().start())
    return _S3[0]


def upload(files: list[Path], server, bucket: str) -> None:
    """Place s3: the binlog files under ``binlogs/`` in the bucket (each whole, once)."""
    client = server.client()
    for f in files:
        client.put_object(Bucket=bucket, Key=f"binlogs/{f.name}", Body=f.read_bytes())


def silver_at_once(spark, cfg, rng: random.Random) -> str:
    """Place overlap: two silver runs on one warehouse at once (the second a random moment later),
    no lock between them; the failures they report, if any."""
    from pipelines.silver import step as silver_step

    errors: list[str] = []

    def one(delay: float) -> None:
        time.sleep(delay)
        try:
            silver_step.run(spark, cfg)
        except Exception as e:  # noqa: BLE001 - compared with the server below; named in the outcome
            errors.append(f"{type(e).__name__}: {e}")

    threads = [threading.Thread(target=one, args=(d,)) for d in (0.0, rng.uniform(0.0, 3.0))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return "\n".join(errors)


def run_batch(seeds: list[int], mode: str, workdir: Path, *, backend: str = "rs", spark=None,
              kill: bool = False, steps: int = 40, verbose: bool = False, arrow: bool = False,
              place: str = "local") -> list[Outcome]:
    """Seeds side by side: each seed's workload in a database of its own on one fresh server, one
    after another, then the pipeline in two runs over all their binlogs (the files closed halfway,
    then the rest), as a user's many tables go through one run; then every seed's silver tables
    against the server. A seed's statements do not depend on the others (its random draws and its
    server look-ups are its own), so a seed reproduces alone: ``run_seed``.

    With ``spark`` the pipeline runs in this process (bronze then silver, as the main job does);
    without it, or with ``kill``, as the job itself (``kill``: SIGKILLed once in the second run at
    a random moment, then run again).

    ``arrow`` (in this process): silver applies every segment as a big table's
    (:func:`as_big_tables`: on delta-rs folded in Arrow, on delta-spark by Spark's MERGE path). ``place``: where the binlogs and the warehouse are, and
    whether two silver runs overlap (:data:`PLACES`; s3 runs the job as a subprocess).
    """
    from pipelines import bronze, snapshot_load, storage
    from pipelines.silver import step as silver_step
    from pipelines.silver.columns import SilverStepError
    from pipelines.config import load_config
    from pipelines.snapshot.source import DumpFile, read_position

    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    srv = MariaDBServer(workdir / "mariadb", **MODES[mode]).start()
    try:
        srv.flush_logs()  # the install's own events stay out: the binlogs start with the workload
        first = len(srv.binlog_files()) - 1
        workloads = []
        dump: list[Path] = []
        from_dump = place == "dump" or (place == "local" and dump_seed(seeds[0]))
        for seed in seeds:
            at_half = (lambda: dump.append(take_dump(srv, workdir / "dump.sql"))) if from_dump and not dump else None
            w = run_workload(srv, seed, mode, steps=steps, at_half=at_half)
            if verbose:
                print(f"-- seed {seed}\n" + ";\n".join(w.statements) + ";")
            workloads.append(w)
        srv.flush_logs()
        files = srv.binlog_files()[first:-1]
        if dump:  # the files before the dump's are gone (purged), as on a server that keeps a few days
            since = read_position(DumpFile(dump[0])).file
            files = [f for f in files if int(f.name.rsplit(".", 1)[1]) >= int(since.rsplit(".", 1)[1])]
        binlogs, warehouse = workdir / "binlogs", workdir / "warehouse"
        s3 = None
        if place == "s3":  # (this process's checks read the bucket with the same settings)
            s3 = (s3_server(), s3_server().bucket("soak"))
            storage.use(storage.StorageSettings.of(s3[0].hadoop_options()))
            warehouse = f"s3a://{s3[1]}/warehouse"
        config = write_config(workloads, workdir, backend, s3=s3)
        half = max(1, len(files) // 2)
        shared: list[str] = []  # problems of the runs themselves: every seed of the batch has them
        silver_failed = ""
        rng = random.Random(f"kill/{seeds[0]}/{mode}")
        if dump:  # the dump first (killed once in the batches that kill)
            if spark is not None and not kill:
                snapshot_load.run(spark, load_config(config), [str(dump[0])])
            else:
                if kill:
                    load_job(config, dump[0], backend, kill_after=rng.uniform(2.0, 15.0))
                done = load_job(config, dump[0], backend)
                if done.returncode != 0:
                    shared.append(f"load job exit {done.returncode}: "
                                  + (done.stderr.strip().splitlines() or ["?"])[-1])
        for part, files_now in enumerate((files[:half], files[half:])):
            if not files_now:
                continue
            if s3 is not None:
                upload(files_now, *s3)
            else:
                copy_files(files_now, binlogs)
            if spark is not None and not kill and s3 is None:
                cfg = load_config(config)
                bronze.run(spark, cfg)
                if place == "overlap":
                    silver_failed = silver_at_once(spark, cfg, rng) or silver_failed
                    continue
                try:
                    with as_big_tables(arrow, by_parts=parts_seed(seeds[0])):
                        silver_step.run(spark, cfg)
                except SilverStepError as e:  # the tables it names differ below
                    silver_failed = str(e)
                continue
            if kill and part == 1:  # SIGKILL somewhere in the second run, then run again
                job(config, backend, kill_after=rng.uniform(3.0, 25.0))
            done = job(config, backend)
            if done.returncode != 0:
                shared.append(f"job exit {done.returncode}: " + (done.stderr.strip().splitlines() or ["?"])[-1])
        in_process = spark is not None and not kill and s3 is None
        dup = bronze_duplicates(warehouse)
        if dup:
            shared.append(f"bronze holds {dup} row change(s) twice")
        seconds = (time.monotonic() - started) / len(seeds)
        out = []
        named = [w.db for w in workloads if w.db in silver_failed]  # the step names the tables it failed
        for w in workloads:
            problems = shared + compare(srv, w, warehouse, from_dump=bool(dump))
            if silver_failed and (w.db in named or not named):
                problems.append(silver_failed)
            rows = sum(int(srv.query_value(f"SELECT COUNT(*) FROM {q(w.db)}.{q(t.name)}")) for t in w.tables)
            out.append(Outcome(w.seed, mode, backend, problems, kill, arrow and in_process, rows,
                               sum(len(t.columns) for t in w.tables),
                               len(w.statements), seconds, place="dump" if dump else place,
                               by_parts=arrow and in_process and backend == "rs" and parts_seed(seeds[0])))
        return out
    finally:
        srv.stop()


def plan_batches(seeds: list[int], modes: list[str], backends: list[str] | None, batch: int,
                 kill: bool | None, arrow: bool | None = None) -> list[tuple[str, str, list[int], bool, bool]]:
    """(mode, backend, seeds, kill, arrow) for every pipeline run: seeds in batches of ``batch``;
    without ``backends`` the batches take delta-rs and delta-spark in turn (a batch of one: even
    seeds on delta-rs, odd on delta-spark); without ``kill`` a batch SIGKILLs when its first seed
    is a :func:`fault_seed`; without ``arrow`` a batch that does not SIGKILL applies its tables as
    big ones (:func:`as_big_tables`) when its first seed is an :func:`arrow_seed`."""
    runs = []
    for mode in modes:
        for n, at in enumerate(range(0, len(seeds), batch)):
            group = seeds[at:at + batch]
            auto = seed_backend(group[0]) if batch == 1 else ("rs", "spark")[n % 2]
            for backend in backends or [auto]:
                kills = fault_seed(group[0]) if kill is None else kill
                arrows = not kills and (arrow_seed(group[0]) if arrow is None else arrow)
                runs.append((mode, backend, group, kills, arrows))
    return runs


def child_argvs(argv: list[str], modes: list[str], jobs: int, workdir: Path) -> list[list[str]]:
    """The arguments of ``jobs`` processes that run ``argv`` side by side: the modes dealt out
    among them (a mode's batches are planned per mode, so each is the batch one process would
    run), each with a work folder of its own."""
    rest, skip = [], False
    for a in argv:  # (this run's --jobs, --mode and --workdir are the children's own)
        if skip:
            skip = False
        elif a in ("--jobs", "--mode", "--workdir"):
            skip = True
        elif not a.startswith(("--jobs=", "--mode=", "--workdir=")):
            rest.append(a)
    return [[*rest, *[x for m in modes[i::jobs] for x in ("--mode", m)], "--workdir", str(workdir / f"job{i}")]
            for i in range(min(jobs, len(modes)))]


def _side_by_side(argv: list[str], modes: list[str], jobs: int, workdir: Path) -> int:
    """:func:`child_argvs`'s processes; their lines interleave, each prints its own summary and
    reproduce lines. Failed when any failed."""
    children = [subprocess.Popen([sys.executable, str(Path(__file__).resolve()), *args])
                for args in child_argvs(argv, modes, jobs, workdir)]
    codes = [child.wait() for child in children]  # (a child killed by a signal: a negative code)
    return 0 if all(code == 0 for code in codes) else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=10, help="seeds 0..N-1 (with --start)")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--seed", type=int, help="just this seed, alone")
    p.add_argument("--batch", type=int, default=20,
                   help="seeds that share a server and the pipeline's runs, each in a database of its own "
                        "(default 20; 1: each seed alone)")
    p.add_argument("--mode", action="append", choices=list(MODES), help="default: every mode")
    p.add_argument("--backend", action="append", choices=["rs", "spark"],
                   help="default: batches on delta-rs and delta-spark in turn")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--kill", action="store_true", help="every batch SIGKILLs the job once")
    p.add_argument("--no-kill", action="store_true", help="no batch SIGKILLs the job (all run in this process)")
    p.add_argument("--arrow", action="store_true",
                   help="every batch applies its tables as big ones: delta-rs folds them in Arrow "
                        "(silver.big_segments), delta-spark MERGEs them by Spark's path")
    p.add_argument("--no-arrow", action="store_true", help="no batch does (small tables take the small segments' path)")
    p.add_argument("--place", choices=PLACES, default="local",
                   help="local folders (default); s3: binlogs and warehouse on a private S3 server; overlap: "
                        "two silver runs at once after each bronze run")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/binlog-delta-soak"))
    p.add_argument("--jobs", type=int, default=1,
                   help="processes side by side, each taking some of the modes (the same batches as one process); "
                        "each holds a Spark session (about 5 GB), and a batch that SIGKILLs its job has the job's beside it")
    p.add_argument("-v", "--verbose", action="store_true", help="print each seed's SQL")
    args = p.parse_args(argv)
    if args.jobs > 1 and args.seed is None:
        return _side_by_side(argv if argv is not None else sys.argv[1:], args.mode or list(MODES), args.jobs,
                             args.workdir)

    from spark_fixtures import TEST_CONF

    from pipelines.spark_session import build_session

    spark = build_session(app_name="binlog-delta-soak", master="local[2]", extra_conf=TEST_CONF, delta=True)
    seeds = [args.seed] if args.seed is not None else list(range(args.start, args.start + args.seeds))
    batch = 1 if args.seed is not None else max(1, args.batch)
    kill = True if args.kill else False if args.no_kill else None
    arrow = True if args.arrow else False if args.no_arrow else None
    failed: list[tuple[Outcome, list[int]]] = []
    counts: dict = {}
    for mode, backend, group, kills, arrows in plan_batches(seeds, args.mode or list(MODES), args.backend, batch,
                                                            kill, arrow):
        work = args.workdir / f"{mode.replace('/', '-')}-{backend}-{group[0]}"
        shutil.rmtree(work, ignore_errors=True)
        try:
            outs = run_batch(group, mode, work, backend=backend, spark=spark, kill=kills, steps=args.steps,
                             verbose=args.verbose, arrow=arrows and args.place == "local", place=args.place)
        except Exception as e:  # noqa: BLE001 - a batch that crashes fails every seed of it
            outs = [Outcome(s, mode, backend, [f"{type(e).__name__}: {e}"], kills, arrows, place=args.place)
                    for s in group]
        for out in outs:
            print(out.line(), flush=True)
            if not out.ok:
                failed.append((out, group))
            counts.setdefault((mode, backend), [0, 0])[0 if out.ok else 1] += 1
        if all(out.ok for out in outs):
            shutil.rmtree(work, ignore_errors=True)
    spark.stop()
    print("\nper mode and backend: clean / failed")
    for (mode, backend), (ok, bad) in sorted(counts.items()):
        print(f"  {mode:16s} {backend:6s} {ok:4d} / {bad}")
    for out, group in failed:
        kill_flag = ((" --kill" if out.killed else " --no-kill") + (" --arrow" if out.arrow else " --no-arrow")
                     + ("" if out.place == "local" else f" --place {out.place}"))
        print(f"\nreproduce: python tests/soak.py --seed {out.seed} --mode {out.mode} --backend {out.backend}"
              f"{kill_flag} -v")
        if len(group) > 1:
            print(f"  (with its batch: python tests/soak.py --start {group[0]} --seeds {len(group)} "
                  f"--batch {len(group)} --mode {out.mode} --backend {out.backend}{kill_flag})")
        print("\n".join(out.problems))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
