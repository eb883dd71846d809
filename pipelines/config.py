"""The pipeline configuration: ``conf/pipeline.yaml`` validated into typed,
frozen dataclasses.

Every problem is reported at once, each with the file, the key and what was
expected, so one run of ``load_config`` tells the whole story:

>>> cfg = load_config("conf/pipeline.yaml", {"warehouse": "/tmp/wh"})
>>> cfg.warehouse_path("bronze/binlog_changes")
'/tmp/wh/bronze/binlog_changes'

Layout of the YAML file (every key but ``input`` and ``warehouse`` is optional)::

    input: ../samples/binlogs          # folder of binlog files: local path, file:/, hdfs:/, s3a:/ ...
    warehouse: ../warehouse            # Delta tables go under here
    tables:
      include: ["*"]                   # glob patterns over "db.table"
      exclude: ["*.tmp_*"]
    keys:                              # key overrides for tables without a usable primary key
      shop.orders: [order_id]
    delete_mode: hard                  # hard | soft
    scd2: ["shop.customers"]           # tables kept as SCD type 2 (glob patterns)
    silver:
      column_prefix: "_"               # silver's own columns: _seq, _op, _commit_ts, _deleted (+ SCD2's)
      table_column_prefix:             # per table, for source tables with columns of those names
        shop.events: "_cdc_"
    maintenance:                       # jobs/maintain.py (and the main job every N runs)
      retention_hours: 168             # VACUUM keeps files a version of the last 7 days uses
      log_retention_hours: 720         # delta.logRetentionDuration: log entries kept 30 days
      compact_min_files: 8             # a table with more data files than this is compacted
      target_file_bytes: 134217728     # compaction's target file size (128 MiB)
      every_runs: 0                    # 0: only the maintain job; N: run_pipeline maintains every N runs
    lock:                              # S3 and HDFS warehouses (pipelines/lock.py)
      lease_seconds: 120               # a run that stops renewing (killed) frees the warehouse after this
    time_zone: UTC                     # IANA name
    strict: false                      # true: bad input fails the run; false: it is quarantined
    accept_gaps: false                 # true: a missing file in the sequence is not an error
    schema_seed: null                  # folder of SHOW CREATE TABLE files
    progress: true                     # tqdm progress bars (only when stderr is a terminal)
    parallelism:
      target_bytes_per_task: 16777216  # bytes of binlog per Spark task (16 MiB)
      max_batch_bytes: 2147483648      # bytes of binlog per bronze commit (2 GiB)
    delta:
      backend: auto                    # auto | spark | rs
      packages: ["io.delta:delta-spark_2.13:4.0.0"]
    spark:
      master: local[2]
      app_name: binlog-delta
      conf: {spark.sql.shuffle.partitions: "4"}

Relative paths in the file resolve against the folder of the YAML file; paths
given as overrides (the ``--binlog-dir`` / ``--warehouse`` flags) resolve
against the current directory. Paths with a scheme (``hdfs://``, ``s3a://``,
``file:/``) are kept as they are.
"""
from __future__ import annotations

import fnmatch
import os
import re
import zoneinfo
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

DELETE_MODES = ("hard", "soft")
DELTA_BACKENDS = ("auto", "spark", "rs")  # the one list of Delta backends (delta_io, the jobs' flag, sql --engine)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


class ConfigError(ValueError):
    """Every problem found in one configuration, each naming file, key and expectation.

    ``problems`` holds ``(key, message)`` pairs.
    """

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        self.source = source
        self.problems = list(problems)
        lines = [f"{source}: {len(self.problems)} problem(s) in the configuration:"]
        lines += [f"  - {key}: {msg}" for key, msg in self.problems]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class TableFilter:
    """Which tables the pipeline applies: glob patterns over ``db.table``."""

    include: tuple[str, ...] = ("*",)
    exclude: tuple[str, ...] = ()

    def matches(self, db: str, table: str) -> bool:
        """True when ``db.table`` matches an include pattern and no exclude pattern.

        >>> TableFilter(("shop.*",), ("*.tmp_*",)).matches("shop", "orders")
        True
        """
        name = f"{db}.{table}"
        return any(fnmatch.fnmatchcase(name, p) for p in self.include) and not any(
            fnmatch.fnmatchcase(name, p) for p in self.exclude
        )


WHOLE_FILE_READERS = ("binaryFile", "binaryFiles", "ranges")


@dataclass(frozen=True)
class Parallelism:
    target_bytes_per_task: int = 16 << 20
    max_batch_bytes: int = 2 << 30
    # how a task reads a file it decodes whole: Spark's binaryFile source ("binaryFile"), Spark's
    # whole-file RDD reader ("binaryFiles": no query planning, ~1 s less in a new process), or the
    # byte-range reader every split file uses ("ranges")
    whole_files: str = "binaryFile"


@dataclass(frozen=True)
class DeltaConfig:
    backend: str = "auto"
    packages: tuple[str, ...] = ()  # maven coordinates for spark.jars.packages


@dataclass(frozen=True)
class SparkConfig:
    master: str | None = None  # None: whatever spark-submit set (or local[*])
    app_name: str = "binlog-delta"
    conf: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SilverConfig:
    """Names of silver's own columns: ``<prefix>seq``, ``<prefix>op``, ... (see pipelines.silver)."""

    column_prefix: str = "_"
    table_column_prefix: Mapping[str, str] = field(default_factory=dict)  # "db.table" -> prefix
    # new silver tables that delta-spark creates take deletion vectors: a MERGE that touches a few
    # rows marks them deleted instead of rewriting whole files (delta-rs reads and MERGEs such tables
    # too, rewriting the files it touches; it cannot write deletion vectors itself)
    deletion_vectors: bool = True

    def prefix_for(self, db: str, table: str) -> str:
        """The prefix of a new silver table's own columns.

        >>> SilverConfig("_", {"shop.t": "_cdc_"}).prefix_for("shop", "t")
        '_cdc_'
        """
        return self.table_column_prefix.get(f"{db}.{table}", self.column_prefix)


@dataclass(frozen=True)
class MaintenanceConfig:
    retention_hours: int = 168  # Delta's default VACUUM retention (7 days)
    log_retention_hours: int = 720  # Delta's default delta.logRetentionDuration (30 days)
    compact_min_files: int = 8
    target_file_bytes: int = 128 << 20
    every_runs: int = 0


@dataclass(frozen=True)
class LockConfig:
    lease_seconds: int = 120  # a remote warehouse lease (pipelines.lock.Lease); renewed every quarter of it


@dataclass(frozen=True)
class PipelineConfig:
    """The validated configuration. Build it with :func:`load_config`."""

    input: str
    warehouse: str
    tables: TableFilter = TableFilter()
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    delete_mode: str = "hard"
    scd2: tuple[str, ...] = ()
    time_zone: str = "UTC"
    strict: bool = False
    accept_gaps: bool = False
    schema_seed: str | None = None
    progress: bool = True
    parallelism: Parallelism = Parallelism()
    delta: DeltaConfig = DeltaConfig()
    spark: SparkConfig = SparkConfig()
    silver: SilverConfig = SilverConfig()
    maintenance: MaintenanceConfig = MaintenanceConfig()
    lock: LockConfig = LockConfig()
    source: str = "<defaults>"  # the YAML file this came from

    def warehouse_path(self, *parts: str) -> str:
        """``<warehouse>/<parts...>`` with one slash between parts."""
        return "/".join([self.warehouse.rstrip("/")] + [p.strip("/") for p in parts])

    def pipeline_path(self, name: str) -> str:
        """The job's own state: ``<warehouse>/_pipeline/<name>``."""
        return self.warehouse_path("_pipeline", name)  # pipelines.state.PIPELINE_FOLDER

    def is_scd2(self, db: str, table: str) -> bool:
        return any(fnmatch.fnmatchcase(f"{db}.{table}", p) for p in self.scd2)

    def key_override(self, db: str, table: str) -> tuple[str, ...] | None:
        return self.keys.get(f"{db}.{table}")


# -- loading -------------------------------------------------------------------

_TOP_KEYS = {
    "input", "warehouse", "tables", "keys", "delete_mode", "scd2", "time_zone", "strict",
    "accept_gaps", "schema_seed", "progress", "parallelism", "delta", "spark", "silver", "maintenance",
    "lock",
}
_SECTION_KEYS = {
    "tables": {"include", "exclude"},
    "parallelism": {"target_bytes_per_task", "max_batch_bytes", "whole_files"},
    "delta": {"backend", "packages"},
    "spark": {"master", "app_name", "conf"},
    "silver": {"column_prefix", "table_column_prefix", "deletion_vectors"},
    "maintenance": {"retention_hours", "log_retention_hours", "compact_min_files", "target_file_bytes", "every_runs"},
    "lock": {"lease_seconds"},
}


def resolve_path(value: str, base: Path) -> str:
    """A path with a URI scheme stays as is; a plain path becomes absolute against ``base``."""
    if _SCHEME.match(value) and not _WINDOWS_DRIVE.match(value):
        return value
    p = Path(os.path.expanduser(value))
    return str(p if p.is_absolute() else (base / p).resolve())


class _Checker:
    """Collects problems while reading values of one raw mapping."""

    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def bad(self, key: str, expected: str, got: Any) -> None:
        self.problems.append((key, f"expected {expected}, got {got!r}"))

    def section(self, raw: Mapping, key: str) -> Mapping:
        v = raw.get(key, {})
        if v is None:
            return {}
        if not isinstance(v, Mapping):
            self.bad(key, "a mapping", v)
            return {}
        unknown = sorted(set(map(str, v)) - _SECTION_KEYS[key])
        for k in unknown:
            self.problems.append((f"{key}.{k}", f"unknown key; expected one of {sorted(_SECTION_KEYS[key])}"))
        return v

    def string(self, raw: Mapping, key: str, name: str, default=None, required=False) -> str | None:
        if key not in raw or raw[key] is None:
            if required:
                self.problems.append((name, "missing; expected a path"))
            return default
        v = raw[key]
        if not isinstance(v, str) or not v.strip():
            self.bad(name, "a non-empty string", v)
            return default
        return v.strip()

    def boolean(self, raw: Mapping, key: str, name: str, default: bool) -> bool:
        v = raw.get(key, default)
        if not isinstance(v, bool):
            self.bad(name, "true or false", v)
            return default
        return v

    def choice(self, raw: Mapping, key: str, name: str, choices: tuple[str, ...], default: str) -> str:
        v = raw.get(key, default)
        if v not in choices:
            self.bad(name, f"one of {' | '.join(choices)}", v)
            return default
        return v

    def positive_int(self, raw: Mapping, key: str, name: str, default: int) -> int:
        v = raw.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            self.bad(name, "a positive integer (bytes)", v)
            return default
        return v

    def count(self, raw: Mapping, key: str, name: str, default: int) -> int:
        v = raw.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            self.bad(name, "a whole number >= 0", v)
            return default
        return v

    def patterns(self, raw: Mapping, key: str, name: str, default: tuple[str, ...]) -> tuple[str, ...]:
        v = raw.get(key, list(default))
        if v is None:
            return ()
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(p, str) and p for p in v):
            self.bad(name, "a list of glob patterns like 'shop.*'", v)
            return default
        for p in v:
            if "." not in p and p != "*":
                self.bad(name, "patterns over 'db.table' (with a dot, or '*')", p)
        return tuple(v)


def _parse(raw: Mapping, base: Path, source: str, override_keys: set[str]) -> PipelineConfig:
    c = _Checker()
    for k in sorted(set(map(str, raw)) - _TOP_KEYS):
        c.problems.append((k, f"unknown key; expected one of {sorted(_TOP_KEYS)}"))

    cwd = Path.cwd()
    paths: dict[str, str | None] = {}
    for key, required in (("input", True), ("warehouse", True), ("schema_seed", False)):
        v = c.string(raw, key, key, required=required)
        paths[key] = resolve_path(v, cwd if key in override_keys else base) if v else None

    tables_raw = c.section(raw, "tables")
    tables = TableFilter(
        include=c.patterns(tables_raw, "include", "tables.include", ("*",)),
        exclude=c.patterns(tables_raw, "exclude", "tables.exclude", ()),
    )

    keys: dict[str, tuple[str, ...]] = {}
    keys_raw = raw.get("keys") or {}
    if not isinstance(keys_raw, Mapping):
        c.bad("keys", "a mapping of 'db.table' to a list of column names", keys_raw)
    else:
        for t, cols in keys_raw.items():
            if not isinstance(t, str) or t.count(".") != 1 or any(ch in t for ch in "*?["):
                c.bad(f"keys.{t}", "a 'db.table' name (no patterns)", t)
            elif not isinstance(cols, list) or not cols or not all(isinstance(x, str) and x for x in cols):
                c.bad(f"keys.{t}", "a non-empty list of column names", cols)
            else:
                keys[t] = tuple(cols)

    tz = raw.get("time_zone", "UTC")
    try:
        if not isinstance(tz, str):
            raise ValueError
        zoneinfo.ZoneInfo(tz)
    except (ValueError, zoneinfo.ZoneInfoNotFoundError):
        c.bad("time_zone", "an IANA time zone name like 'UTC' or 'Europe/Paris'", tz)
        tz = "UTC"

    par_raw = c.section(raw, "parallelism")
    parallelism = Parallelism(
        target_bytes_per_task=c.positive_int(par_raw, "target_bytes_per_task", "parallelism.target_bytes_per_task",
                                             Parallelism.target_bytes_per_task),
        max_batch_bytes=c.positive_int(par_raw, "max_batch_bytes", "parallelism.max_batch_bytes",
                                       Parallelism.max_batch_bytes),
        whole_files=c.choice(par_raw, "whole_files", "parallelism.whole_files", WHOLE_FILE_READERS,
                             Parallelism.whole_files),
    )

    delta_raw = c.section(raw, "delta")
    packages = delta_raw.get("packages", list(DeltaConfig.packages))
    if packages is None:
        packages = []
    if isinstance(packages, str):
        packages = [p.strip() for p in packages.split(",") if p.strip()]
    if not isinstance(packages, list) or not all(isinstance(p, str) and p.count(":") == 2 for p in packages):
        c.bad("delta.packages", "a list of maven coordinates 'group:artifact:version'", packages)
        packages = list(DeltaConfig.packages)
    delta = DeltaConfig(
        backend=c.choice(delta_raw, "backend", "delta.backend", DELTA_BACKENDS, "auto"),
        packages=tuple(packages),
    )

    spark_raw = c.section(raw, "spark")
    conf_raw = spark_raw.get("conf") or {}
    conf: dict[str, str] = {}
    if not isinstance(conf_raw, Mapping):
        c.bad("spark.conf", "a mapping of Spark setting to value", conf_raw)
    else:
        for k, v in conf_raw.items():
            if not isinstance(k, str) or isinstance(v, (Mapping, list)) or v is None:
                c.bad(f"spark.conf.{k}", "a scalar value", v)
            else:
                conf[k] = str(v).lower() if isinstance(v, bool) else str(v)
    spark = SparkConfig(
        master=c.string(spark_raw, "master", "spark.master"),
        app_name=c.string(spark_raw, "app_name", "spark.app_name", default=SparkConfig.app_name),
        conf=dict(conf),
    )

    silver_raw = c.section(raw, "silver")
    prefix = silver_raw.get("column_prefix", SilverConfig.column_prefix)
    if not _good_prefix(prefix):
        c.bad("silver.column_prefix", _PREFIX_RULE, prefix)
        prefix = SilverConfig.column_prefix
    per_table: dict[str, str] = {}
    per_table_raw = silver_raw.get("table_column_prefix") or {}
    if not isinstance(per_table_raw, Mapping):
        c.bad("silver.table_column_prefix", "a mapping of 'db.table' to a prefix", per_table_raw)
    else:
        for t, p in per_table_raw.items():
            if not isinstance(t, str) or "." not in t or any(ch in t for ch in "*?["):
                c.bad(f"silver.table_column_prefix.{t}", "a 'db.table' name (no patterns)", t)
            elif not _good_prefix(p):
                c.bad(f"silver.table_column_prefix.{t}", _PREFIX_RULE, p)
            else:
                per_table[t] = p
    silver = SilverConfig(column_prefix=prefix, table_column_prefix=dict(per_table),
                          deletion_vectors=c.boolean(silver_raw, "deletion_vectors", "silver.deletion_vectors",
                                                     SilverConfig.deletion_vectors))

    m_raw = c.section(raw, "maintenance")
    m = MaintenanceConfig
    maintenance = MaintenanceConfig(
        retention_hours=c.count(m_raw, "retention_hours", "maintenance.retention_hours", m.retention_hours),
        log_retention_hours=c.count(m_raw, "log_retention_hours", "maintenance.log_retention_hours",
                                    m.log_retention_hours),
        compact_min_files=c.count(m_raw, "compact_min_files", "maintenance.compact_min_files", m.compact_min_files),
        target_file_bytes=c.positive_int(m_raw, "target_file_bytes", "maintenance.target_file_bytes",
                                         m.target_file_bytes),
        every_runs=c.count(m_raw, "every_runs", "maintenance.every_runs", m.every_runs),
    )
    lock_raw = c.section(raw, "lock")
    lock = LockConfig(lease_seconds=c.positive_int(lock_raw, "lease_seconds", "lock.lease_seconds",
                                                   LockConfig.lease_seconds))

    cfg = PipelineConfig(
        input=paths["input"] or "",
        warehouse=paths["warehouse"] or "",
        tables=tables,
        keys=dict(keys),
        delete_mode=c.choice(raw, "delete_mode", "delete_mode", DELETE_MODES, "hard"),
        scd2=c.patterns(raw, "scd2", "scd2", ()),
        time_zone=tz,
        strict=c.boolean(raw, "strict", "strict", False),
        accept_gaps=c.boolean(raw, "accept_gaps", "accept_gaps", False),
        schema_seed=paths["schema_seed"],
        progress=c.boolean(raw, "progress", "progress", True),
        parallelism=parallelism,
        delta=delta,
        spark=spark,
        silver=silver,
        maintenance=maintenance,
        lock=lock,
        source=source,
    )
    if c.problems:
        raise ConfigError(source, c.problems)
    return cfg


_PREFIX_RULE = "a non-empty prefix for silver's own column names, e.g. '_' or '_cdc_' (not '__silver_...')"


def _good_prefix(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 32 and not value.lower().startswith("__silver_")


def _set_dotted(raw: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = raw
    for p in parts[:-1]:
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            nxt = node[p] = {}
        node = nxt
    node[parts[-1]] = value


def load_config(path: str | os.PathLike | None, overrides: Mapping[str, Any] | None = None) -> PipelineConfig:
    """Read and validate a YAML config; ``overrides`` (dotted keys, e.g.
    ``{"input": "/data/binlogs", "spark.master": "local[2]"}``) win over the file.

    ``path`` may be None to build a config from the overrides alone.
    Raises :class:`ConfigError` listing every problem.
    """
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if path is None:
        source, base, raw = "<overrides>", Path.cwd(), {}
    else:
        p = Path(path)
        source, base = str(p), p.resolve().parent
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(source, [("(file)", f"cannot read the configuration: {e.strerror or e}")]) from None
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(source, [("(file)", f"not valid YAML: {e}")]) from None
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ConfigError(source, [("(file)", f"expected a mapping at the top level, got {type(raw).__name__}")])
    raw = dict(raw)
    for k, v in overrides.items():
        _set_dotted(raw, k, v)
    return _parse(raw, base, source, set(overrides))
