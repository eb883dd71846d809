"""The pipeline's own tables under ``<warehouse>/_pipeline``: their names, their layouts, and the
reads and writes of them (through :mod:`pipelines.delta_io`, on the run's backend).

========================  =====================  ==============================================
table                     written by             one row per
========================  =====================  ==============================================
``manifest``              bronze                 file per batch, pending then committed
``quarantine``            bronze, silver         piece of bad input (with its bytes)
``ddl``                   bronze                 DDL statement (``_seq`` order)
``xa``                    bronze                 XA PREPARE / COMMIT / ROLLBACK
``runs``                  every step             run of a step (bronze, silver, maintenance)
``schema_history``        silver                 schema version of a table
``silver_watermarks``     silver                 table per run (maintenance folds it to one)
``snapshots``             the snapshot load      dump: pending, then committed (and one per table)
========================  =====================  ==============================================

>>> append(spark, cfg, RUNS, [row])  # doctest: +SKIP
>>> [r.name for r in read_rows(spark, cfg, MANIFEST, ["name"])]  # doctest: +SKIP
['binlog.000001']
"""
from __future__ import annotations

import datetime as _dt
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import pyarrow as pa

from pipelines import delta_io
from pipelines.config import PipelineConfig
from pipelines.logs import get_logger

_log = get_logger(__name__)

PIPELINE_FOLDER = "_pipeline"  # under the warehouse (PipelineConfig.pipeline_path)
MANIFEST, QUARANTINE, DDL, XA, RUNS = "manifest", "quarantine", "ddl", "xa", "runs"
SCHEMA_HISTORY, WATERMARKS = "schema_history", "silver_watermarks"
SNAPSHOTS = "snapshots"

_S, _I64, _I32, _TS = pa.string(), pa.int64(), pa.int32(), pa.timestamp("us", tz="UTC")

MANIFEST_LAYOUT = pa.schema([
    ("name", _S), ("file_seq", _I64), ("path", _S), ("size", _I64), ("mtime", _I64), ("start_pos", _I64),
    ("complete_until", _I64), ("sha256", _S), ("status", _S), ("phase", _S), ("batch", _I64), ("events", _I64),
    ("rows", _I64), ("error", _S), ("error_class", _S), ("error_offset", _I64), ("run_id", _S), ("processed_at", _TS),
    # what the next file is checked against (see "Sequence integrity"); unknown events skipped on purpose
    ("flavor", _S), ("gtid_start", _S), ("gtid_end", _S), ("rotate_to", _S), ("ignorable_skipped", _I64),
    # when a batch's committed row was written, right after its bronze commit (processed_at: the
    # run's start, its rows' _ingested_at): silver finds batches that landed after it read bronze
    ("committed_at", _TS),
    # the server that wrote the file (its FORMAT_DESCRIPTION): a later file of another server is
    # said in a warning (NULL in rows of older versions, and of a redone batch)
    ("server_version", _S), ("server_id", _I64),
])

QUARANTINE_LAYOUT = pa.schema([
    ("file", _S), ("file_seq", _I64), ("offset", _I64), ("reason", _S), ("error_class", _S),
    ("decoder_version", _S), ("raw", pa.binary()), ("batch", _I64), ("run_id", _S), ("ts", _TS),
])

DDL_TABLE_LAYOUT = pa.schema([  # query_raw: the exact bytes, when they are not valid in the statement's charset
    ("file", _S), ("file_seq", _I64), ("pos", _I64), ("_seq", _S), ("db", _S), ("query", _S),
    ("commit_ts", _TS), ("in_group", pa.bool_()), ("gtid", _S), ("server_id", _I64), ("_run_id", _S),
    ("query_raw", pa.binary()),
])

XA_LAYOUT = pa.schema([
    ("file", _S), ("file_seq", _I64), ("pos", _I64), ("_seq", _S), ("kind", _S), ("xa_xid", _S), ("gtid", _S),
    ("commit_ts", _TS), ("_run_id", _S),
])

RUNS_LAYOUT = pa.schema([
    ("run_id", _S), ("step", _S), ("started_at", _TS), ("ended_at", _TS), ("files", _I64),
    ("files_skipped", _I64), ("files_ignored", _I64), ("events", _I64), ("rows_c", _I64), ("rows_u", _I64),
    ("rows_d", _I64), ("statements", _I64), ("quarantined", _I64), ("bytes", _I64), ("seconds", pa.float64()),
    ("mb_per_s", pa.float64()), ("zero_dates", _I64), ("status", _S), ("error", _S),
    # the run's warning: lines (what it did not do: docs/errors.md); NULL in rows of older versions,
    # whose tables gain the column with the first run that writes it (schema evolution on append)
    ("warnings", _I64),
])

# a schema version (pipelines.schema.store turns versions into these rows and back)
COLUMN_DEF = pa.struct([
    ("name", _S), ("type", _S), ("length", _I32), ("decimals", _I32), ("unsigned", pa.bool_()),
    ("nullable", pa.bool_()), ("charset", _S), ("values", pa.list_(_S)), ("generated", _S),
    ("invisible", pa.bool_()), ("default", _S),
])

SCHEMA_HISTORY_LAYOUT = pa.schema([
    ("db", _S),
    ("table", _S),  # "" for database-level entries (kinds database, drop_database, unparsed)
    ("valid_from", _S),  # the statement's _seq; "" for seeds (valid from the start)
    ("version", _I32),  # per table, 0, 1, 2...: orders versions that share a valid_from
    ("kind", _S),  # create | alter | drop | truncate | rename_to | rename_from | seed | unparsed | ...
    ("columns", pa.list_(COLUMN_DEF)),  # NULL when the table is gone or unknown
    ("primary_key", pa.list_(_S)),
    ("unique_keys", pa.list_(pa.struct([("name", _S), ("columns", pa.list_(_S))]))),
    ("table_charset", _S),
    ("peer_db", _S),  # renames: the other name
    ("peer_table", _S),
    ("renamed_columns", pa.list_(pa.struct([("old", _S), ("new", _S)]))),  # ALTER: columns renamed by it
    ("statement", _S),  # the DDL text (seed: the SHOW CREATE TABLE text)
    ("reason", _S),  # why an `unparsed` statement could not be applied
    ("source_file", _S),  # binlog file (seed: the seed file)
    ("pos", _I64),
    ("_run_id", _S),
    ("recorded_at", _TS),
])

# the largest _seq a silver run dealt with, per table, and its run-wide marks (pipelines.silver.watermarks)
READ_THROUGH_DB = ""  # no source database has an empty name: the db of silver's read-through marks
WATERMARKS_LAYOUT = pa.schema([("db", _S), ("table", _S), ("max_seq", _S), ("rows", _I64), ("run_id", _S),
                               ("updated_at", _TS)])

# the dumps the snapshot load landed (pipelines.snapshot_load): a ``pending`` row (db and table NULL)
# before its writes, then ``committed`` rows, one per table it loaded (``_seq``: the snapshot's
# start, where its CREATE TABLE sits; ``rows``: its rows) and one for the dump (db and table NULL)
SNAPSHOTS_LAYOUT = pa.schema([("dump_id", _S), ("dump", _S), ("phase", _S), ("db", _S), ("table", _S), ("_seq", _S),
                              ("position", _S), ("rows", _I64), ("run_id", _S), ("loaded_at", _TS)])

# Each table's layout: its columns as Arrow types (delta_io.arrow_schema_to_spark: the Spark schema).
# Rows are tuples in this order; a column only ever joins at the end (an older table gains it on append).
LAYOUTS = {MANIFEST: MANIFEST_LAYOUT, QUARANTINE: QUARANTINE_LAYOUT, DDL: DDL_TABLE_LAYOUT, XA: XA_LAYOUT,
           RUNS: RUNS_LAYOUT, SCHEMA_HISTORY: SCHEMA_HISTORY_LAYOUT, WATERMARKS: WATERMARKS_LAYOUT,
           SNAPSHOTS: SNAPSHOTS_LAYOUT}


def row_of(layout: pa.Schema, **values) -> tuple:
    """A row of ``layout`` (a tuple in its column order) from its values by name: a column not named
    is NULL, a name the layout does not have raises.

    >>> row_of(WATERMARKS_LAYOUT, db="shop", table="orders", max_seq="0001")
    ('shop', 'orders', '0001', None, None, None)
    """
    unknown = sorted(set(values) - set(layout.names))
    if unknown:
        raise ValueError(f"no column {unknown} in the layout ({', '.join(layout.names)})")
    return tuple(values.get(name) for name in layout.names)


def path(cfg: PipelineConfig, table: str) -> str:
    """Where ``table`` (one of :data:`LAYOUTS`) lives."""
    return cfg.pipeline_path(table)


def rows_in(warehouse: str, table: str) -> list[dict]:
    """Every row of ``<warehouse>/_pipeline/<table>`` as dicts, through delta-rs with no Spark
    (for tools such as :mod:`pipelines.quarantine`); none when it does not exist yet."""
    p = "/".join([warehouse.rstrip("/"), PIPELINE_FOLDER, table])
    t = delta_io.open_table(p, "rs")
    return t.read_arrow().to_pylist() if t.exists() else []


def latest_files(manifest_rows: Sequence) -> dict[str, dict]:
    """The manifest as one row per file: its latest ``committed`` row (the highest ``batch``), by file
    name. The table itself holds a ``pending`` and a ``committed`` row per file per batch (a file
    that grew or was restored has several batches); this is the view to read it by
    (``docs/state.md``, ``pipelines.status``). A pure function over rows (dicts or Rows).

    >>> rows = [{"name": "b.1", "phase": "pending", "batch": 0, "status": "partial"},
    ...         {"name": "b.1", "phase": "committed", "batch": 0, "status": "partial"},
    ...         {"name": "b.1", "phase": "committed", "batch": 1, "status": "done"}]
    >>> latest_files(rows)["b.1"]["status"]
    'done'
    """
    latest: dict[str, dict] = {}
    for r in manifest_rows:
        if r["phase"] != "committed":
            continue
        cur = latest.get(r["name"])
        if cur is None or (r["batch"] if r["batch"] is not None else -1) >= (cur["batch"] if cur["batch"] is not None else -1):
            latest[r["name"]] = r
    return latest


def read_rows(spark, cfg: PipelineConfig, table: str, columns: Sequence[str] | None = None, *,
              above: tuple[str, object] | None = None) -> list:
    """The rows of ``table`` on the driver (none when it does not exist yet)."""
    return delta_io.open_table(path(cfg, table), cfg.delta.backend, spark).read_rows(columns, above=above)


def append(spark, cfg: PipelineConfig, table: str, rows: Sequence[tuple], *, app_id: str | None = None,
           version: int | None = None) -> bool:
    """Append ``rows`` (in the table's layout); with ``app_id``/``version``, at most once."""
    return append_at(spark, cfg, LAYOUTS[table], path(cfg, table), rows, app_id=app_id, version=version)


def log_run(spark, cfg: PipelineConfig, row: tuple, ok: bool) -> None:
    """A step's ``row`` in :data:`RUNS`. When the run itself failed (``ok`` false), a failure to
    write its row is printed as a warning instead of raised: it must not hide the run's own error."""
    try:
        append(spark, cfg, RUNS, [row])
    except Exception as log_error:  # noqa: BLE001 - never hide the run's own error
        if ok:
            raise
        _log.warning(f"could not write the run log: {log_error}")


def new_run_id(now: _dt.datetime) -> str:
    """A run's id: its start (to the second) and 8 random hex digits, for every step.

    >>> new_run_id(_dt.datetime(2026, 11, 27, 8, 15, 0, tzinfo=_dt.timezone.utc))[:16]
    '20261127T081500-'
    """
    return f"{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"


def _ended_now(stats) -> None:
    stats.ended_at = _dt.datetime.now(_dt.timezone.utc)


@contextmanager
def logged_run(spark, cfg: PipelineConfig, stats, *, ended: Callable = _ended_now) -> Iterator:
    """The run ``stats`` describes (a step's stats: ``status``, ``error``, ``summary()``,
    ``run_row()``, and ``warnings`` when the step has any to say): ``ok`` when the block ends, else
    ``failed`` with its error (raised again); then, whatever happened, ``ended(stats)`` (by default
    the end time), the summary on stdout and the run's row in :data:`RUNS` (:func:`log_run`), with
    the number of its warnings last."""
    try:
        yield stats
        stats.status = "ok"
    except BaseException as e:
        stats.status, stats.error = "failed", f"{type(e).__name__}: {e}"
        raise
    finally:
        ended(stats)
        print(stats.summary(), file=sys.stdout, flush=True)
        log_run(spark, cfg, stats.run_row() + (len(getattr(stats, "warnings", ())),), stats.status == "ok")


def append_at(spark, cfg: PipelineConfig, layout: pa.Schema, table_path: str, rows: Sequence[tuple], *,
              app_id: str | None = None, version: int | None = None) -> bool:
    """:func:`append` by layout and path (bronze's batch commit names them as it writes them)."""
    commit = delta_io.CommitInfo.of(app_id, version)
    return delta_io.open_table(table_path, cfg.delta.backend, spark).append_rows(rows, layout, commit)


def replace_rows(spark, cfg: PipelineConfig, table: str, rows: Sequence[tuple]) -> None:
    """Replace the rows of ``table`` with ``rows`` in one commit (a maintenance fold)."""
    delta_io.open_table(path(cfg, table), cfg.delta.backend, spark).overwrite_rows(rows, LAYOUTS[table])


def read_frame(spark, cfg: PipelineConfig, table: str):
    """``table`` as a Spark DataFrame (for joins in Spark), or None when it does not exist yet."""
    t = delta_io.open_table(path(cfg, table), cfg.delta.backend, spark)
    return t.read_df() if t.exists() else None


def read_arrow(spark, cfg: PipelineConfig, table: str, columns: Sequence[str]):
    """``table``'s ``columns`` as Arrow on the driver through delta-rs, with no Spark job on either
    backend (both write the same protocol); None when it does not exist yet."""
    t = delta_io.open_table(path(cfg, table), cfg.delta.backend, spark)
    return t.read_arrow(list(columns)) if t.exists() else None
