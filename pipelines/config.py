"""The pipeline configuration: ``conf/pipeline.yaml`` validated into typed, frozen dataclasses
(pydantic dataclasses: unknown keys forbidden, each value checked by the validator its field
names).

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
    lock:                              # S3 and HDFS warehouses (pipelines/lock/)
      lease_seconds: 120               # a run that stops renewing (killed) frees the warehouse after this
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
from collections.abc import Callable
from dataclasses import field, replace
from pathlib import Path
from typing import Annotated, Any, Mapping

import yaml
from pydantic import BeforeValidator, ConfigDict, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass
from pydantic_core import PydanticCustomError
from pipelines.errors import EXIT_USAGE, PipelineError
from pipelines.logs import get_logger

_log = get_logger(__name__)

DELETE_MODES = ("hard", "soft")
DELTA_BACKENDS = ("auto", "spark", "rs")  # the one list of Delta backends (delta_io, the jobs' flag, sql --engine)
WHOLE_FILE_READERS = ("binaryFile", "binaryFiles", "ranges")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")


class ConfigError(PipelineError, ValueError):
    """Every problem found in one configuration, each naming file, key and expectation.

    ``problems`` holds ``(key, message)`` pairs.
    """

    exit_code = EXIT_USAGE
    report = True

    def __init__(self, source: str, problems: list[tuple[str, str]]):
        self.source = source
        self.problems = list(problems)
        lines = [f"{source}: {len(self.problems)} problem(s) in the configuration:"]
        lines += [f"  - {key}: {msg}" for key, msg in self.problems]
        super().__init__("\n".join(lines))


# -- the values' checks: each turns the YAML value into the field's value or says what it expected

def _problem(message: str) -> PydanticCustomError:
    return PydanticCustomError("config", "{message}", {"message": message})


def _bad(expected: str, got: Any) -> PydanticCustomError:
    return _problem(f"expected {expected}, got {got!r}")


def _check(fn: Callable[[Any], Any]):
    return BeforeValidator(fn)


def _string(default: str | None = None, required: bool = False):
    def check(v):
        if v is None:
            if required:
                raise _problem("missing; expected a path")
            return default
        if not isinstance(v, str) or not v.strip():
            raise _bad("a non-empty string", v)
        return v.strip()
    return _check(check)


def _boolean(v):
    if not isinstance(v, bool):
        raise _bad("true or false", v)
    return v


def _choice(choices: tuple[str, ...]):
    def check(v):
        if v not in choices:
            raise _bad(f"one of {' | '.join(choices)}", v)
        return v
    return _check(check)


def _positive_int(v):
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise _bad("a positive integer (bytes)", v)
    return v


def _count(v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise _bad("a whole number >= 0", v)
    return v


def _patterns(v):
    if v is None:
        return ()
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, (list, tuple)) or not all(isinstance(p, str) and p for p in v):
        raise _bad("a list of glob patterns like 'shop.*'", v)
    return tuple(v)


def _pattern(p):
    if "." not in p and p != "*":
        raise _bad("patterns over 'db.table' (with a dot, or '*')", p)
    return p


def _mapping(expected: str):
    def check(v):
        if v is None:
            return {}
        if not isinstance(v, Mapping):
            raise _bad(expected, v)
        return v
    return _check(check)


def _table_name(v):
    if not isinstance(v, str) or v.count(".") != 1 or any(ch in v for ch in "*?["):
        raise _bad("a 'db.table' name (no patterns)", v)
    return v


def _prefixed_table(v):
    if not isinstance(v, str) or "." not in v or any(ch in v for ch in "*?["):
        raise _bad("a 'db.table' name (no patterns)", v)
    return v


def _columns(v):
    if not isinstance(v, (list, tuple)) or not v or not all(isinstance(x, str) and x for x in v):
        raise _bad("a non-empty list of column names", v)
    return tuple(v)


def _packages(v):
    if v is None:
        return ()
    if isinstance(v, str):
        v = [p.strip() for p in v.split(",") if p.strip()]
    if not isinstance(v, (list, tuple)) or not all(isinstance(p, str) and p.count(":") == 2 for p in v):
        raise _bad("a list of maven coordinates 'group:artifact:version'", v)
    return tuple(v)


def _conf_value(v):
    if isinstance(v, (Mapping, list)) or v is None:
        raise _bad("a scalar value", v)
    return str(v).lower() if isinstance(v, bool) else str(v)


_PREFIX_RULE = "a non-empty prefix for silver's own column names, e.g. '_' or '_cdc_' (not '__silver_...')"


def _good_prefix(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 32 and not value.lower().startswith("__silver_")


def _prefix(v):
    if not _good_prefix(v):
        raise _bad(_PREFIX_RULE, v)
    return v


def _section(v):
    return {} if v is None else v


Bool = Annotated[bool, _check(_boolean)]
PositiveInt = Annotated[int, _check(_positive_int)]
Count = Annotated[int, _check(_count)]
Patterns = Annotated[tuple[Annotated[str, _check(_pattern)], ...], _check(_patterns)]
TableName = Annotated[str, _check(_table_name)]
Prefix = Annotated[str, _check(_prefix)]
_FORBID = ConfigDict(extra="forbid")


# -- the configuration -----------------------------------------------------------

@dataclass(frozen=True, config=_FORBID)
class TableFilter:
    """Which tables the pipeline applies: glob patterns over ``db.table``."""

    include: Patterns = ("*",)
    exclude: Patterns = ()

    def matches(self, db: str, table: str) -> bool:
        """True when ``db.table`` matches an include pattern and no exclude pattern.

        >>> TableFilter(("shop.*",), ("*.tmp_*",)).matches("shop", "orders")
        True
        """
        name = f"{db}.{table}"
        return any(fnmatch.fnmatchcase(name, p) for p in self.include) and not any(
            fnmatch.fnmatchcase(name, p) for p in self.exclude
        )


@dataclass(frozen=True, config=_FORBID)
class Parallelism:
    target_bytes_per_task: PositiveInt = 16 << 20
    max_batch_bytes: PositiveInt = 2 << 30
    # how a task reads a file it decodes whole: Spark's binaryFile source ("binaryFile"), Spark's
    # whole-file RDD reader ("binaryFiles": no query planning, ~1 s less in a new process), or the
    # byte-range reader every split file uses ("ranges")
    whole_files: Annotated[str, _choice(WHOLE_FILE_READERS)] = "binaryFile"


@dataclass(frozen=True, config=_FORBID)
class DeltaConfig:
    backend: Annotated[str, _choice(DELTA_BACKENDS)] = "auto"
    packages: Annotated[tuple[str, ...], _check(_packages)] = ()  # maven coordinates for spark.jars.packages


@dataclass(frozen=True, config=_FORBID)
class SparkConfig:
    master: Annotated[str | None, _string()] = None  # None: whatever spark-submit set (or local[*])
    app_name: Annotated[str, _string("binlog-delta")] = "binlog-delta"
    conf: Annotated[Mapping[str, Annotated[str, _check(_conf_value)]],
                    _mapping("a mapping of Spark setting to value")] = field(default_factory=dict)


@dataclass(frozen=True, config=_FORBID)
class SilverConfig:
    """Names of silver's own columns: ``<prefix>seq``, ``<prefix>op``, ... (see pipelines.silver)."""

    column_prefix: Prefix = "_"
    table_column_prefix: Annotated[Mapping[Annotated[str, _check(_prefixed_table)], Prefix],
                                   _mapping("a mapping of 'db.table' to a prefix")] = field(default_factory=dict)
    # new silver tables that delta-spark creates take deletion vectors: a MERGE that touches a few
    # rows marks them deleted instead of rewriting whole files (delta-rs reads and MERGEs such tables
    # too, rewriting the files it touches; it cannot write deletion vectors itself)
    deletion_vectors: Bool = True
    # every silver table records its row changes (Delta's change data feed: table_changes,
    # readChangeFeed, delta-rs load_cdf), for downstream jobs that read silver incrementally
    change_data_feed: Bool = False

    def prefix_for(self, db: str, table: str) -> str:
        """The prefix of a new silver table's own columns.

        >>> SilverConfig("_", {"shop.t": "_cdc_"}).prefix_for("shop", "t")
        '_cdc_'
        """
        return self.table_column_prefix.get(f"{db}.{table}", self.column_prefix)


@dataclass(frozen=True, config=_FORBID)
class MaintenanceConfig:
    retention_hours: Count = 168  # Delta's default VACUUM retention (7 days)
    log_retention_hours: Count = 720  # Delta's default delta.logRetentionDuration (30 days)
    compact_min_files: Count = 8
    target_file_bytes: PositiveInt = 128 << 20
    every_runs: Count = 0


@dataclass(frozen=True, config=_FORBID)
class LockConfig:
    lease_seconds: PositiveInt = 120  # a remote warehouse lease (pipelines.lock.Lease); renewed every quarter of it


def _in(section):
    """A section of the YAML file: absent or null is every default."""
    return Annotated[section, _check(_section)]


@dataclass(frozen=True, config=_FORBID)
class PipelineConfig:
    """The validated configuration. Build it with :func:`load_config`."""

    input: Annotated[str, _string(required=True)]
    warehouse: Annotated[str, _string(required=True)]
    tables: _in(TableFilter) = TableFilter()
    keys: Annotated[Mapping[TableName, Annotated[tuple[str, ...], _check(_columns)]],
                    _mapping("a mapping of 'db.table' to a list of column names")] = field(default_factory=dict)
    delete_mode: Annotated[str, _choice(DELETE_MODES)] = "hard"
    scd2: Patterns = ()
    strict: Bool = False
    accept_gaps: Bool = False
    schema_seed: Annotated[str | None, _string()] = None
    progress: Bool = True
    parallelism: _in(Parallelism) = Parallelism()
    delta: _in(DeltaConfig) = DeltaConfig()
    spark: _in(SparkConfig) = SparkConfig()
    silver: _in(SilverConfig) = SilverConfig()
    maintenance: _in(MaintenanceConfig) = MaintenanceConfig()
    lock: _in(LockConfig) = LockConfig()
    source: str = "<defaults>"  # the YAML file this came from (not a key of the file)

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

_VALIDATOR = TypeAdapter(PipelineConfig)
_PATH_KEYS = ("input", "warehouse", "schema_seed")


def resolve_path(value: str, base: Path) -> str:
    """A path with a URI scheme stays as is; a plain path becomes absolute against ``base``."""
    if _SCHEME.match(value) and not _WINDOWS_DRIVE.match(value):
        return value
    p = Path(os.path.expanduser(value))
    return str(p if p.is_absolute() else (base / p).resolve())


_SECTIONS = {"tables": TableFilter, "parallelism": Parallelism, "delta": DeltaConfig, "spark": SparkConfig,
             "silver": SilverConfig, "maintenance": MaintenanceConfig, "lock": LockConfig}


def _known_keys(loc: tuple) -> list[str]:
    """The keys of the file's top level (``loc`` empty) or of one of its sections."""
    if not loc:
        return sorted(k for k in PipelineConfig.__dataclass_fields__ if k != "source")
    return sorted(_SECTIONS[loc[0]].__dataclass_fields__)


def _problems(e: ValidationError) -> list[tuple[str, str]]:
    """``(dotted key, message)`` of every error pydantic found, in our words."""
    out = []
    for err in e.errors(include_url=False):
        loc = tuple(str(p) for p in err["loc"] if p != "[key]" and not isinstance(p, int))  # (list items: their list)
        key = ".".join(loc)
        if err["type"] == "config":
            out.append((key, err["ctx"]["message"]))
        elif err["type"] == "missing":
            out.append((key, "missing; expected a path"))
        elif err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            out.append((key, f"unknown key; expected one of {_known_keys(loc[:-1])}"))
        elif err["type"] in ("dataclass_type", "dataclass_args_type", "dict_type", "model_type"):
            out.append((key, f"expected a mapping, got {err['input']!r}"))
        else:
            out.append((key, f"expected {err['msg'].lower()}, got {err['input']!r}"))
    return out


def _parse(raw: Mapping, base: Path, source: str, override_keys: set[str]) -> PipelineConfig:
    raw = dict(raw)
    problems = []
    if "source" in raw:
        raw.pop("source")
        problems.append(("source", f"unknown key; expected one of {_known_keys(())}"))
    try:
        cfg = _VALIDATOR.validate_python(raw)
    except ValidationError as e:
        problems += _problems(e)
    if problems:
        raise ConfigError(source, problems)
    cwd = Path.cwd()
    paths = {k: resolve_path(v, cwd if k in override_keys else base)
             for k in _PATH_KEYS if (v := getattr(cfg, k)) is not None}
    return replace(cfg, source=source, **paths)


def _set_dotted(raw: dict, dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = raw
    for p in parts[:-1]:
        nxt = node.get(p)
        if not isinstance(nxt, dict):
            nxt = node[p] = {}
        node = nxt
    node[parts[-1]] = value


# What `time_zone` (removed) could not do, and what sets it instead (docs/sql.md, "Times").
TIME_ZONE_GONE = ("DATETIME columns are kept as the server stored them (TIMESTAMP_NTZ), TIMESTAMP columns and "
                  "_commit_ts as instants (UTC); how a reader shows instants is its session's time zone "
                  "(spark.sql.session.timeZone in spark.conf)")


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
    if "time_zone" in raw:
        _log.warning(f"{source}: time_zone ({raw.pop('time_zone')!r}) is ignored, and may be refused "
                     f"later: {TIME_ZONE_GONE}")
    for k, v in overrides.items():
        _set_dotted(raw, k, v)
    return _parse(raw, base, source, set(overrides))
