"""Big appends with delta-rs: Spark tasks write the Parquet files into the table folder themselves
(:class:`ParquetStager`, with the statistics Delta keeps) and the driver commits them all at once
(:func:`commit_staged`)."""
from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import types as T

from pipelines import faults, storage
from pipelines.delta_io.arrow import spark_schema_to_arrow
from pipelines.delta_io.backend import DeltaIOError
from pipelines.delta_io.commits import commit_retried, check_txn
from pipelines.delta_io.rs_tables import rs_table, deltalake_table_exists
from pipelines.delta_io.rs_writes import rs_commit_properties, rs_create, rs_txn_recorded


STAGED_BATCH_ROWS = 20_000  # rows held as Python tuples in a task before they become Arrow


STAGED_FILE_ROWS = 2_000_000  # rows per Parquet file, at most


@dataclass(frozen=True)
class StagedFile:
    """One Parquet file written into a table folder, not yet committed."""

    path: str  # relative to the table root
    size: int
    rows: int
    stats: str  # the add action's statistics (JSON)


def _stats_json(rows: int, lo: dict, hi: dict, nulls: dict) -> str:
    return json.dumps({"numRecords": rows, "minValues": {k: _stat_value(v, False) for k, v in lo.items()},
                       "maxValues": {k: _stat_value(v, True) for k, v in hi.items()}, "nullCount": nulls},
                      separators=(",", ":"))


def _stat_value(v, upper: bool):
    """A min/max statistic as Delta writes it: timestamps as UTC ISO text in milliseconds, the
    minimum rounded down and the maximum up (so a file is never skipped that holds a match)."""
    if not isinstance(v, _dt.datetime):
        return v
    if v.tzinfo is None:  # pyarrow gives tz-naive values for a timestamp without a zone: UTC
        v = v.replace(tzinfo=_dt.timezone.utc)
    v = v.astimezone(_dt.timezone.utc)
    ms = v.replace(microsecond=v.microsecond // 1000 * 1000)
    if upper and ms < v:
        ms += _dt.timedelta(milliseconds=1)
    return ms.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms.microsecond // 1000:03d}Z"


class ParquetStager:
    """Write rows (tuples in ``schema`` order) as Parquet files into the folder of the table at
    ``table_uri``, a few thousand rows at a time, so a task never holds more than
    :data:`STAGED_BATCH_ROWS` rows. ``stats_columns`` (top-level string, integer or timestamp columns) get
    min/max/null-count statistics in the add actions; every file gets its row count.
    ``parquet_options`` go to ``pyarrow.parquet.ParquetWriter`` (which columns get dictionaries
    and Parquet statistics, ...); whole record batches can be added with :meth:`add_batch`.

    Runs inside Spark tasks: it uses pyarrow only. ``settings`` are the storage settings of the
    table's filesystem (:mod:`pipelines.storage`): a task gets them from the driver, in its
    closure (default: this process's).

    >>> stager = ParquetStager("/wh/bronze/binlog_changes", arrow_schema, stats_columns=["_seq"])  # doctest: +SKIP
    >>> for row in rows: stager.add(row)  # doctest: +SKIP
    >>> files = stager.close()  # doctest: +SKIP
    """

    def __init__(self, table_uri: str, schema: pa.Schema, *, stats_columns: Sequence[str] = (),
                 batch_rows: int = STAGED_BATCH_ROWS, file_rows: int = STAGED_FILE_ROWS,
                 parquet_options: dict | None = None, settings: storage.StorageSettings | None = None):
        self.uri, self.schema = str(table_uri), schema
        self.parquet_options = dict(parquet_options or {})  # for pyarrow.parquet.ParquetWriter
        self.batch_rows, self.file_rows = batch_rows, file_rows
        self._stat_idx = [(schema.get_field_index(c), c) for c in stats_columns]
        missing = [c for i, c in self._stat_idx if i < 0]
        if missing:
            raise DeltaIOError(f"ParquetStager: no column(s) {missing} for statistics in {schema.names}")
        self._fs, self._root = storage.arrow_filesystem(self.uri, settings)
        self._rows: list[tuple] = []
        self._writer = None
        self._file: str | None = None
        self._file_rows = 0
        self._lo: dict = {}
        self._hi: dict = {}
        self._nulls: dict = {}
        self.files: list[StagedFile] = []

    def add(self, row: tuple) -> None:
        self._rows.append(row)
        if len(self._rows) >= self.batch_rows:
            self._flush()

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """Write a record batch of rows (in ``schema``) after the rows added so far."""
        self._flush()
        if batch.schema != self.schema:
            raise DeltaIOError(f"ParquetStager: batch schema {batch.schema} is not the table's {self.schema}")
        self._write(batch)

    def _flush(self) -> None:
        if not self._rows:
            return
        columns = list(zip(*self._rows))
        self._rows = []
        self._write(pa.RecordBatch.from_arrays(
            [pa.array(c, type=f.type) for c, f in zip(columns, self.schema)], schema=self.schema))

    def _write(self, batch: pa.RecordBatch) -> None:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        if self._writer is None:
            import uuid

            self._file = f"part-{len(self.files):05d}-{uuid.uuid4()}-c000.snappy.parquet"
            options = {"compression": "snappy", **self.parquet_options}
            self._writer = pq.ParquetWriter(f"{self._root}/{self._file}", self.schema, filesystem=self._fs, **options)
            self._file_rows, self._lo, self._hi, self._nulls = 0, {}, {}, {}
        self._writer.write_batch(batch)
        self._file_rows += batch.num_rows
        for i, name in self._stat_idx:
            col = batch.column(i)
            self._nulls[name] = self._nulls.get(name, 0) + col.null_count
            mm = pc.min_max(col).as_py()
            if mm["min"] is not None:
                self._lo[name] = mm["min"] if name not in self._lo else min(self._lo[name], mm["min"])
                self._hi[name] = mm["max"] if name not in self._hi else max(self._hi[name], mm["max"])
        if self._file_rows >= self.file_rows:
            self._close_file()

    def _close_file(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        size = self._fs.get_file_info(f"{self._root}/{self._file}").size
        self.files.append(StagedFile(self._file, size, self._file_rows,
                                     _stats_json(self._file_rows, self._lo, self._hi, self._nulls)))

    def close(self) -> list[StagedFile]:
        """Write what is left; the files written, to hand to :func:`commit_staged`."""
        self._flush()
        self._close_file()
        return list(self.files)

    def abort(self) -> None:
        """Delete every file this stager wrote (a task that cannot finish)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self.files.append(StagedFile(self._file, 0, 0, ""))
        for f in self.files:
            self._fs.delete_file(f"{self._root}/{f.path}")
        self.files = []

    def read(self, f: StagedFile, columns: Sequence[str] | None = None) -> pa.Table:
        """One staged file back as an Arrow table (to check or rewrite it)."""
        import pyarrow.parquet as pq

        return pq.read_table(f"{self._root}/{f.path}", columns=columns, filesystem=self._fs)

    def drop_rows(self, column: str, ranges: Sequence[tuple[int, int]]) -> int:
        """Rewrite the closed files without the rows whose integer ``column`` lies in one of the
        ``[lo, hi)`` ``ranges``; the number of rows dropped. Files left empty are deleted."""
        import pyarrow.compute as pc

        if not ranges:
            return 0
        self.close()
        kept, dropped = [], 0
        old = self.files
        self.files = []
        for f in old:
            table = self.read(f)
            values = table.column(column)
            bad = None
            for lo, hi in ranges:
                inside = pc.and_(pc.greater_equal(values, lo), pc.less(values, hi))
                bad = inside if bad is None else pc.or_(bad, inside)
            n_bad = pc.sum(bad.cast(pa.int64())).as_py() or 0
            if not n_bad:
                kept.append(f)
                continue
            dropped += n_bad
            remaining = table.filter(pc.invert(pc.fill_null(bad, False)))
            self._fs.delete_file(f"{self._root}/{f.path}")
            for batch in remaining.to_batches(max_chunksize=self.batch_rows):
                self._write(batch)
            self._close_file()
        self.files = kept + self.files
        return dropped


def discard_staged(path: str, files: Sequence[StagedFile]) -> None:
    """Delete staged files that will not be committed (missing ones are ignored)."""
    fs, root = storage.arrow_filesystem(str(path))
    for f in files:
        try:
            fs.delete_file(f"{root}/{f.path}")
        except FileNotFoundError:
            pass


def prepare_staging(path: str, table_schema: T.StructType) -> pa.Schema:
    """The Arrow schema staged files of the table at ``path`` must have; creates the folder
    of a local table that does not exist yet."""
    arrow_schema = spark_schema_to_arrow(table_schema, force_nullable=True)
    fs, root = storage.arrow_filesystem(str(path))
    fs.create_dir(root, recursive=True)
    return arrow_schema


def commit_staged(
    path: str,
    files: Sequence[StagedFile],
    table_schema: T.StructType,
    *,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
) -> bool:
    """Append the staged ``files`` to the table at ``path`` (delta-rs, created when missing) in
    one commit; False when skipped because ``txn_app_id`` already holds ``txn_version``.

    The fault points are those of :func:`append`: ``append.<kind>.materialize`` (the rows are
    computed: here, staged), then ``before`` / ``after`` the commit.
    """
    check_txn(txn_app_id, txn_version)
    faults.point(f"append.{faults.table_kind(path)}.materialize")
    now = int(time.time() * 1000)

    def attempt(n: int) -> bool:
        from deltalake.transaction import AddAction

        if not deltalake_table_exists(path):
            rs_create(path, table_schema)
        table = rs_table(path)
        if rs_txn_recorded(table, txn_app_id, txn_version):
            return False
        actions = [AddAction(f.path, f.size, {}, now, True, f.stats) for f in files]
        table.create_write_transaction(
            actions, "append", table.schema(),
            commit_properties=rs_commit_properties(txn_app_id, txn_version, None))
        return True

    return commit_retried("append", path, attempt)

