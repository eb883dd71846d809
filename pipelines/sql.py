"""SQL over the Delta tables of a warehouse: ``python -m pipelines.sql "SELECT ..."``.

Every Delta table found under the warehouse is registered under two names that
mean the same in both engines:

=======================================  ===========================  ===================================
folder                                   plain name                   qualified name (in backticks)
=======================================  ===========================  ===================================
``<warehouse>/bronze/binlog_changes``    ``bronze_binlog_changes``    ```bronze.binlog_changes```
``<warehouse>/silver/<db>/<table>``      ``silver_<db>_<table>``      ```silver.<db>.<table>```
``<warehouse>/_pipeline/<name>``         ``_pipeline_<name>``         ```_pipeline.<name>```
=======================================  ===========================  ===================================

* The qualified name is the folder path below the warehouse, with ``.`` between
  the parts and the MySQL names unescaped (see :mod:`pipelines.paths`). It is one
  identifier, so it needs backticks: ``SELECT * FROM `silver.shop.orders```.
* The plain name is the qualified name with every character other than
  ``a-z``, ``0-9`` and ``_`` replaced by ``_``; it needs no quoting.
* Both are lower case (Spark matches names ignoring case; DataFusion folds
  unquoted names to lower case). When two tables would get the same plain name,
  neither gets it and a warning says so; use the qualified form. Tables whose
  names differ only in case keep their qualified names as they are (DataFusion
  tells them apart; Spark only with ``spark.sql.caseSensitive=true``).
* Columns whose names are SQL keywords (bronze's ``table``) also take backticks.

Two engines, chosen by ``--engine`` (default: ``delta.backend`` of the config):

* ``spark``: Spark SQL with delta-spark; every table is a temporary view, and the function
  ``binlog_changes(content, path)`` (:mod:`pipelines.binlog_udf`) decodes raw binlog files read
  with Spark's ``binaryFile`` source. Such a query needs no Delta: on an empty warehouse it runs
  without delta-spark on the classpath.
* ``rs``: the Delta Lake Rust engine (``deltalake.QueryBuilder``, Apache
  DataFusion SQL). It starts no JVM, so it answers in well under a second.
* ``auto``: ``spark`` when :func:`pipelines.spark_session.delta_spark_available`,
  else ``rs``.

The warehouse is ``--warehouse``, else the environment variable
``BINLOG_DELTA_WAREHOUSE``, else ``warehouse`` of ``--config`` (default
``conf/pipeline.yaml``): a local path, or an S3 (``s3a://``) or HDFS (``hdfs://``) URI.
A remote warehouse is reached with the Hadoop options of the configuration's ``spark.conf``
(``spark.hadoop.fs.s3a.*``: :mod:`pipelines.storage`), by both engines; without any, the AWS
chain (``AWS_*`` variables, ``~/.aws``, the instance profile) decides.

Examples::

    python -m pipelines.sql "SELECT op, count(*) AS n FROM bronze_binlog_changes GROUP BY op"
    python -m pipelines.sql --format csv "SELECT * FROM `silver.shop.orders` ORDER BY id"
    python -m pipelines.sql --list
    python -m pipelines.sql --warehouse s3a://bucket/wh --engine rs "SELECT count(*) FROM bronze_binlog_changes"

From Python:

>>> result = query("SELECT count(*) AS n FROM silver_shop_orders", "/data/warehouse")  # doctest: +SKIP
>>> result.to_pylist()  # doctest: +SKIP
[{'n': 3}]
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import decimal
import importlib.util
import io
import json
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import pyarrow as pa

from pipelines import storage
from pipelines.config import DELTA_BACKENDS
from pipelines.paths import unescape_name
from pipelines.logs import get_logger

_log = get_logger(__name__)

ENGINES = DELTA_BACKENDS
FORMATS = ("table", "csv", "json", "jsonl")
WAREHOUSE_ENV = "BINLOG_DELTA_WAREHOUSE"
DELTA_JARS_ENV = "DELTA_JARS"  # as in pipelines.spark_settings, read here without importing pyspark
DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "conf" / "pipeline.yaml"
MAX_DEPTH = 4  # silver/<db>/<table> is three levels; leave one to spare

_PLAIN_UNSAFE = re.compile(r"[^a-z0-9_]")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class WarehouseTable:
    """One Delta table of the warehouse and the names SQL knows it by.

    ``name`` is the plain name (``None`` when another table claims it too) and
    ``qualified`` the dotted one, used in backticks.
    """

    name: str | None
    qualified: str
    path: str


def plain_name(qualified: str) -> str:
    """The unquoted name of a table from its qualified name.

    >>> plain_name("silver.Shop.order-items")
    'silver_shop_order_items'
    """
    return _PLAIN_UNSAFE.sub("_", qualified.lower())


def quote(identifier: str) -> str:
    """``identifier`` in backticks, for Spark SQL and DataFusion alike.

    >>> quote("silver.shop.orders")
    '`silver.shop.orders`'
    """
    return "`" + identifier.replace("`", "``") + "`"


def local_warehouse(warehouse: str | os.PathLike) -> Path | None:
    """The warehouse as a local folder (``file:`` URIs too); None for a remote one (``s3a://``,
    ``hdfs://``, ...).

    >>> local_warehouse("file:///data/wh"), local_warehouse("s3a://bucket/wh")
    (PosixPath('/data/wh'), None)
    """
    text = os.fspath(warehouse)
    if text.startswith("file:"):
        return Path(re.sub(r"^file:(//)?", "", text))
    if _SCHEME.match(text) and not re.match(r"^[A-Za-z]:[\\/]", text):
        return None
    return Path(text)


def _local_tables(root: Path) -> list[tuple[str, str]]:
    if not root.is_dir():
        raise FileNotFoundError(f"warehouse {str(root)!r} is not a folder (run the pipeline first, or pass --warehouse)")
    found: list[tuple[str, str]] = []

    def walk(folder: Path, parts: tuple[str, ...]) -> None:
        if (folder / "_delta_log").is_dir():
            if parts:
                found.append((".".join(unescape_name(p) for p in parts), str(folder)))
            return
        if len(parts) >= MAX_DEPTH:
            return
        for child in sorted(folder.iterdir()):
            if child.is_dir() and child.name != "_delta_log":
                walk(child, parts + (child.name,))

    walk(root, ())
    return found


def _remote_tables(warehouse: str) -> list[tuple[str, str]]:
    """As :func:`_local_tables`, listed through pyarrow with this process's storage settings;
    paths are URIs under ``warehouse``."""
    from pyarrow import fs as pafs

    fs, root = storage.arrow_filesystem(warehouse)
    if fs.get_file_info(root).type != pafs.FileType.Directory:
        raise FileNotFoundError(f"warehouse {warehouse!r} is not a folder (run the pipeline first, or pass --warehouse)")
    base = warehouse.rstrip("/")
    found: list[tuple[str, str]] = []

    def walk(folder: str, parts: tuple[str, ...]) -> None:
        children = {i.base_name: i for i in fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
                    if i.type == pafs.FileType.Directory}
        if "_delta_log" in children:
            if parts:
                found.append((".".join(unescape_name(p) for p in parts), "/".join((base, *parts))))
            return
        if len(parts) >= MAX_DEPTH:
            return
        for name in sorted(children):
            walk(children[name].path, parts + (name,))

    walk(root, ())
    return found


def discover_tables(warehouse: str | os.PathLike) -> list[WarehouseTable]:
    """Every Delta table (a folder holding ``_delta_log``) under ``warehouse`` (a local folder, or
    an S3/HDFS URI reached with :func:`pipelines.storage.current`), sorted by qualified name.

    Raises ``FileNotFoundError`` when the warehouse folder does not exist.
    """
    root = local_warehouse(warehouse)
    found = _local_tables(root) if root is not None else _remote_tables(os.fspath(warehouse))
    found.sort()
    lower_counts = Counter(q.lower() for q, _ in found)
    plain_counts = Counter(plain_name(q) for q, _ in found)
    tables = []
    for q, p in found:
        if lower_counts[q.lower()] > 1:  # e.g. silver/Shop/t and silver/shop/t (case-sensitive MySQL)
            tables.append(WarehouseTable(name=None, qualified=q, path=p))
        else:
            tables.append(WarehouseTable(name=plain_name(q) if plain_counts[plain_name(q)] == 1 else None,
                                         qualified=q.lower(), path=p))
    return tables


def _name_clashes(tables: Iterable[WarehouseTable]) -> list[str]:
    return sorted({t.qualified for t in tables if t.name is None})


# -- engines ---------------------------------------------------------------------


def query_rs(sql: str, tables: Sequence[WarehouseTable]) -> pa.Table:
    """Run ``sql`` with delta-rs (DataFusion) over ``tables``; no JVM is started."""
    from deltalake import DeltaTable, QueryBuilder

    qb = QueryBuilder({"datafusion.catalog.information_schema": "true"})
    for t in tables:
        dt = DeltaTable(t.path, storage_options=storage.delta_storage_options(t.path))
        # A double-quoted name registers as one identifier, so the dots in it stay part of the name.
        qb.register('"' + t.qualified.replace('"', '""') + '"', dt)
        if t.name:
            qb.register(f'"{t.name}"', dt)
    return pa.table(qb.execute(sql))


def query_spark(sql: str, tables: Sequence[WarehouseTable], spark) -> pa.Table:
    """Run ``sql`` with Spark SQL over ``tables``, each registered as a temporary view, with the
    ``binlog_changes`` function registered (:mod:`pipelines.binlog_udf`: SQL over raw binlog files)."""
    from pipelines import binlog_udf

    binlog_udf.register(spark)
    for t in tables:
        df = spark.read.format("delta").load(t.path)
        df.createOrReplaceTempView(quote(t.qualified))
        if t.name:
            df.createOrReplaceTempView(t.name)
    return spark.sql(sql).toArrow()


def _delta_spark_possible(cfg) -> bool:
    """Whether a Spark session could have delta-spark, judged without starting one: the
    delta-spark package imports, and jars are named (``DELTA_JARS``, ``delta.packages``) or a
    session already runs."""
    if importlib.util.find_spec("delta") is None:
        return False
    if os.environ.get(DELTA_JARS_ENV, "").strip() or (cfg is not None and cfg.delta.packages):
        return True
    if "pyspark" in sys.modules:
        from pyspark.sql import SparkSession

        return SparkSession.getActiveSession() is not None
    return False


def open_spark(engine: str, cfg=None, *, need_delta: bool = True):
    """``(session, owned)`` with delta-spark for ``engine`` ``spark`` or ``auto``, or ``None``
    when ``auto`` finds no delta-spark. ``owned`` sessions were built here; stop them after use.

    A running session is reused; otherwise one is built from ``cfg`` (master, ``delta.packages``,
    ``spark.conf``) and ``DELTA_JARS``. ``spark`` without delta-spark raises ``RuntimeError``.
    """
    if engine == "auto" and not _delta_spark_possible(cfg):
        return None
    from pyspark.sql import SparkSession

    from pipelines.spark_session import build_session, delta_spark_available
    from pipelines.spark_settings import uses_s3a

    owned = SparkSession.getActiveSession() is None
    spark = build_session(
        app_name=f"{cfg.spark.app_name}-sql" if cfg is not None else "binlog-delta-sql",
        master=cfg.spark.master if cfg is not None else None,
        delta_packages=",".join(cfg.delta.packages) if cfg is not None and cfg.delta.packages else None,
        extra_conf=dict(cfg.spark.conf) if cfg is not None else None,
        delta=True,  # DELTA_JARS, delta.packages, else the jars make setup fetched
        s3a=cfg is not None and uses_s3a(cfg.warehouse, cfg.input),  # (hadoop-aws: s3a:// paths)
    )
    if delta_spark_available(spark) or (engine == "spark" and not need_delta):
        return spark, owned  # (without tables to read, SQL over raw binlog files needs no Delta)
    if owned:
        spark.stop()
    if engine == "spark":
        raise RuntimeError(
            "engine 'spark' needs delta-spark on the JVM classpath: run make setup (it fetches the "
            "jars into jars/), or set DELTA_JARS to the local delta-spark and delta-storage jars, or "
            "delta.packages in the config; or use --engine rs"
        )
    return None


def query(sql: str, warehouse: str | os.PathLike, *, engine: str = "auto", spark=None, cfg=None) -> pa.Table:
    """The result of ``sql`` over every Delta table of ``warehouse`` (names in the module docstring).

    ``engine``, ``spark`` and ``cfg`` as for :func:`run`.

    >>> query("SELECT count(*) AS n FROM bronze_binlog_changes", "/data/wh", engine="rs").to_pylist()  # doctest: +SKIP
    [{'n': 1042}]
    """
    return run(sql, discover_tables(warehouse), engine=engine, spark=spark, cfg=cfg)


def run(sql: str, tables: Sequence[WarehouseTable], *, engine: str = "auto", spark=None, cfg=None) -> pa.Table:
    """The result of ``sql`` over ``tables`` (from :func:`discover_tables`).

    ``engine``: ``rs`` (delta-rs, no JVM), ``spark`` (Spark SQL with delta-spark) or ``auto``
    (``spark`` when delta-spark is there, else ``rs``). ``spark`` is a session to use; without
    one, a running session is reused or one is built from ``cfg`` and stopped afterwards.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {' | '.join(ENGINES)}, got {engine!r}")
    if not isinstance(sql, str) or not sql.strip():
        raise ValueError(f"query needs an SQL statement, got {sql!r}")
    if engine == "rs":
        return query_rs(sql, tables)
    if spark is not None:
        from pipelines.spark_session import delta_spark_available

        if delta_spark_available(spark) or (engine == "spark" and not tables):
            return query_spark(sql, tables, spark)  # no tables to read: raw files need no Delta
        if engine == "spark":
            raise RuntimeError("engine 'spark': the given session has no delta-spark on its classpath")
        return query_rs(sql, tables)
    opened = open_spark(engine, cfg, need_delta=bool(tables))
    if opened is None:
        return query_rs(sql, tables)
    session, owned = opened
    try:
        return query_spark(sql, tables, session)
    finally:
        if owned:
            session.stop()


# -- output ----------------------------------------------------------------------


def _jsonable(v: Any) -> Any:
    """A value as JSON sees it: exact text for decimals and times, ``{"hex": ...}`` for bytes."""
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"hex": bytes(v).hex()}
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (_dt.datetime, _dt.date, _dt.time)):
        return v.isoformat()
    if isinstance(v, _dt.timedelta):
        return str(v)
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return str(v)
    return v


def _text(v: Any, null: str) -> str:
    """A value as one table or CSV cell."""
    if v is None:
        return null
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "0x" + bytes(v).hex()
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(_jsonable(v), ensure_ascii=False, separators=(",", ":"))
    j = _jsonable(v)
    return j if isinstance(j, str) else str(v)


def render(result: pa.Table, fmt: str = "table") -> str:
    """``result`` as text: ``table`` (aligned columns), ``csv``, ``json`` (an array) or ``jsonl``.

    >>> print(render(pa.table({"id": [1, 22], "name": ["a", None]})), end="")
    id | name
    ---+-----
     1 | a
    22 | NULL
    (2 rows)
    """
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {' | '.join(FORMATS)}, got {fmt!r}")
    names = result.column_names
    rows = result.to_pylist()
    if fmt == "json":
        return json.dumps([_jsonable(r) for r in rows], ensure_ascii=False, indent=1) + "\n"
    if fmt == "jsonl":
        return "".join(json.dumps(_jsonable(r), ensure_ascii=False) + "\n" for r in rows)
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(names)
        w.writerows([_text(r[n], "") for n in names] for r in rows)
        return buf.getvalue()
    cells = [[_text(r[n], "NULL") for n in names] for r in rows]
    widths = [max([len(n)] + [len(c[i]) for c in cells]) for i, n in enumerate(names)]
    numeric = [pa.types.is_integer(f.type) or pa.types.is_floating(f.type) or pa.types.is_decimal(f.type)
               for f in result.schema]

    def line(values: Sequence[str], header: bool = False) -> str:
        out = []
        for v, w, num in zip(values, widths, numeric):
            out.append(v.rjust(w) if num and not header else v.ljust(w))
        return " | ".join(out).rstrip()

    lines = [line(names, header=True), "-+-".join("-" * w for w in widths)]
    lines += [line(c) for c in cells]
    lines.append(f"({len(rows)} row{'' if len(rows) == 1 else 's'})")
    return "\n".join(lines) + "\n"


def render_tables(tables: Sequence[WarehouseTable]) -> str:
    """The ``--list`` output: each table's plain name, qualified name and folder."""
    listing = pa.table({
        "name": [t.name for t in tables],
        "qualified": [quote(t.qualified) for t in tables],
        "path": [t.path for t in tables],
    })
    return render(listing, "table")


# -- command line ----------------------------------------------------------------


def warehouse_and_config(args: argparse.Namespace):
    """The warehouse to query (``args.warehouse``, else ``$BINLOG_DELTA_WAREHOUSE``, else the config's; the
    tools :mod:`pipelines.status` and this one) and the configuration of ``args.config`` (``None`` when it cannot be read but
    the warehouse was given explicitly, so a broken config file does not stop a query). The
    configuration's storage settings (``spark.conf``'s ``spark.hadoop.*``) become this process's
    until a Spark session brings its own."""
    from pipelines.config import ConfigError, load_config

    explicit = args.warehouse or os.environ.get(WAREHOUSE_ENV)
    try:
        cfg = load_config(args.config, {"warehouse": explicit} if explicit else None)
    except ConfigError:
        if not explicit:
            raise
        return explicit, None
    storage.use(storage.from_spark_conf(cfg.spark.conf))
    return cfg.warehouse, cfg


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m pipelines.sql",
        description="Run SQL over the bronze, silver and _pipeline Delta tables of a warehouse.",
        epilog="Tables: bronze_binlog_changes, silver_<db>_<table>, or `silver.<db>.<table>` in backticks. "
               "--list shows them all.",
    )
    p.add_argument("sql", nargs="?", help="the SQL statement (omit with --list)")
    p.add_argument("--warehouse", help=f"warehouse folder (default: ${WAREHOUSE_ENV}, else the config's warehouse)")
    p.add_argument("--config", default=str(DEFAULT_CONFIG), help="YAML configuration (default: conf/pipeline.yaml)")
    p.add_argument("--engine", choices=ENGINES, help="spark | rs | auto (default: the config's delta.backend, else rs)")
    p.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    p.add_argument("--list", action="store_true", help="list the tables and their names, then exit")
    p.add_argument("--debug", action="store_true", help="print the traceback of a failed query (default: one line)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit code (2 for a usage or config problem, 1 for a failed query)."""
    from pipelines.config import ConfigError

    args = parse_args(argv)
    if not args.list and not (args.sql and args.sql.strip()):
        _log.error("give an SQL statement (or --list); e.g. make sql Q='SELECT * FROM bronze_binlog_changes'")
        return 2
    try:
        warehouse, cfg = warehouse_and_config(args)
        tables = discover_tables(warehouse)
    except (ConfigError, FileNotFoundError, ValueError) as e:
        _log.error(str(e))
        return 2
    except OSError as e:  # a remote warehouse that cannot be listed (no such bucket, no access)
        _log.error(f"cannot list the warehouse's tables: {e}")
        return 2
    for q in _name_clashes(tables):
        _log.warning(f"{quote(q)} has no plain name: another table maps to {plain_name(q)!r}")
    if args.list:
        sys.stdout.write(render_tables(tables))
        return 0
    engine = args.engine or (cfg.delta.backend if cfg is not None else "auto")
    try:
        result = run(args.sql, tables, engine=engine, cfg=cfg)
    except Exception as e:  # noqa: BLE001 - the engine's message is what the user needs
        from pipelines.errors import one_line

        if args.debug:
            import traceback

            traceback.print_exc()
        _log.error(f"{one_line(e)}")  # (a Spark error: its text without plan or stack)
        return 1
    sys.stdout.write(render(result, args.format))
    return 0


if __name__ == "__main__":
    sys.exit(main())
