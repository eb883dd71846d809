"""Opening and reading delta-rs tables (the ``deltalake`` package) on the driver: a table at the
version this thread pinned (or its latest), its storage options, its history, its files above a value, its rows as Arrow
(:func:`read_arrow`, :func:`read_arrow_in`, :func:`count_rows`, through delta-rs's query engine when
needed). No commits (:mod:`~pipelines.delta_io.rs_writes`) and no Spark reads
(:class:`~pipelines.delta_io.rs_backend.RsBackend`)."""
from __future__ import annotations

import datetime as _dt
import os
import sys
from collections.abc import Sequence
from urllib.parse import unquote

import pyarrow as pa

from pipelines import storage
from pipelines.delta_io.arrow import delta_schema_to_spark
from pipelines.delta_io import pins
from pipelines.delta_io.features import uses_column_mapping
from pipelines.delta_io.reads import Commit


def rs_options(path: str) -> dict[str, str] | None:
    """delta-rs's storage options for the table at ``path``: the process's storage settings
    (:mod:`pipelines.storage`; the session's Hadoop options)."""
    return storage.delta_storage_options(str(path))


def rs_table(path: str):
    """The table at ``path`` as delta-rs loads it: at the version this thread pinned, else the latest."""
    import deltalake

    pin = pins.pin_of(path)
    if pin is None:
        return deltalake.DeltaTable(str(path), storage_options=rs_options(path))
    if pin.version is None:  # (pinned as missing: whoever reads it now reads another writer's table)
        raise pin.stale("read", "the table was created meanwhile")
    return deltalake.DeltaTable(str(path), version=pin.version, storage_options=rs_options(path))


def rs_latest(path: str):
    """The table at its latest version, whatever this thread pinned (what a pin is checked against)."""
    import deltalake

    return deltalake.DeltaTable(str(path), storage_options=rs_options(path))


def rs_size(dt) -> tuple[int, int]:
    """``(files, bytes)`` of the delta-rs table ``dt``'s live files, from its log."""
    adds = dt.get_add_actions(flatten=True)
    files = adds.num_rows
    return files, (sum(v or 0 for v in adds.column("size_bytes").to_pylist()) if files else 0)


def rs_history(dt, limit: int | None) -> list[Commit]:
    """The commits of the delta-rs table ``dt``, newest first (``limit`` of them)."""
    return [
        Commit(
            version=int(e["version"]),
            timestamp_ms=int(e.get("timestamp", 0)),
            operation=str(e.get("operation", "")),
            parameters={k: str(v) for k, v in (e.get("operationParameters") or {}).items()},
            user_metadata=e.get("userMetadata"),
        )
        for e in sorted(dt.history(limit), key=lambda e: -int(e["version"]))
    ]


def rs_arrow_filesystem(dt):
    """pyarrow's own filesystem rooted at a remote table, for reading its files (None for a local
    one: delta-rs's default). Reading a remote table through deltalake's default filesystem can
    abort the process at exit ("terminate called without an active exception",
    delta-io/delta-rs#2184): seen here on S3 in about half the runs."""
    if not storage.is_remote(dt.table_uri):
        return None
    from pyarrow import fs as pafs

    fs, root = storage.arrow_filesystem(dt.table_uri)
    return pafs.SubTreeFileSystem(root, fs)


def deltalake_table_exists(path: str) -> bool:
    import deltalake

    return bool(deltalake.DeltaTable.is_deltatable(str(path), storage_options=rs_options(path)))


# -- reads


def rs_files_above(dt, column: str, value) -> set[str] | None:
    """The table's files (relative paths, unescaped) that may hold a row with ``column`` above
    ``value``: those whose ``max`` statistic is above it, or that have none. ``None`` when the
    column has no statistics at all (every file is read). A timestamp's ``max`` may be cut to the
    millisecond (delta-spark writes it so): the file may hold up to a millisecond more."""
    adds = pa.table(dt.get_add_actions(flatten=True))
    stat = f"max.{column}"
    if stat not in adds.column_names:
        return None
    return {unquote(p) for p, m in zip(adds.column("path").to_pylist(), adds.column(stat).to_pylist())
            if m is None or (m + _STAT_MS if isinstance(m, _dt.datetime) else m) > value}


_STAT_MS = _dt.timedelta(milliseconds=1)


def read_arrow(path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """The table's rows as Arrow on the driver, with delta-rs and without Spark (small tables,
    tools, tests). Column-mapped tables are read by their logical names (a plain
    ``DeltaTable.to_pyarrow_table`` reads their columns as nulls).

    >>> read_arrow(str(tmp_path / "t"), ["id"]).to_pylist()  # doctest: +SKIP
    [{'id': 1}]
    """
    dt = rs_table(path)
    if uses_column_mapping(dt.metadata().configuration):
        return rs_query(dt, list(columns) if columns is not None else
                         [f.name for f in delta_schema_to_spark(dt.schema().to_json()).fields])
    if "deletionVectors" in set(dt.protocol().reader_features or ()):  # to_pyarrow_table refuses them
        return rs_query(dt, list(columns) if columns is not None else
                         [f.name for f in delta_schema_to_spark(dt.schema().to_json()).fields])
    return dt.to_pyarrow_table(columns=list(columns) if columns is not None else None,
                               filesystem=rs_arrow_filesystem(dt))


def read_arrow_in(path: str, columns: Sequence[str], column: str, values: Sequence[str]) -> pa.Table:
    """The rows of the table whose string ``column`` is one of ``values``, as Arrow, through delta-rs's
    query engine (its files' statistics skip the files that cannot hold them): a few rows of a big
    table (``pipelines.status`` looks up bronze's rows at silver's watermarks).

    >>> read_arrow_in(str(tmp_path / "bronze"), ["_seq", "gtid"], "_seq", ["0000000001..."])  # doctest: +SKIP
    """
    if not values:
        return rs_query(rs_table(path), columns, where="FALSE")
    listed = ", ".join("'" + str(v).replace("'", "''") + "'" for v in values)
    return rs_query(rs_table(path), columns, where=f"{_quoted(column)} IN ({listed})")


def exit_process(code: int) -> None:
    """End a command-line tool that read tables through delta-rs/pyarrow: flush, then leave without
    the interpreter's teardown, where their reader threads at times abort the process ("terminate
    called without an active exception", exit 134, after the tool's work and output are done:
    apache/arrow#34314, delta-io/delta-rs#2184; about 1 run in 6 of ``pipelines.quarantine`` here)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def count_rows(path: str) -> int:
    """The number of rows of the table's current snapshot (deletion vectors counted), through delta-rs."""
    from deltalake import QueryBuilder

    out = QueryBuilder().register("t", rs_table(path)).execute("SELECT count(*) AS n FROM t").read_all()
    return int(out.column("n")[0].as_py()) if out.num_rows else 0


def _quoted(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def rs_query(dt, columns: Sequence[str], where: str | None = None) -> pa.Table:
    """The table's rows through delta-rs's own query engine, which knows every reader feature
    (column mapping, deletion vectors, partitions); the rows pass through the driver."""
    from deltalake import QueryBuilder

    select = ", ".join(_quoted(c) for c in columns)
    sql = f"SELECT {select} FROM t" + (f" WHERE {where}" if where else "")
    return pa.table(QueryBuilder().register("t", dt).execute(sql).read_all())
