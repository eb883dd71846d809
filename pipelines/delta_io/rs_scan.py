"""A Delta table's rows read on the driver by delta-rs and pyarrow, without Spark: whole columns
as record batches, or only some leaves of nested columns (the ``idx`` of every image cell, not
the cells' values).

The files are the table's live files as delta-rs lists them, optionally only those that may hold
a row with a column above a value (their ``max`` statistic), as Spark's read of the table with
``above`` takes them (:meth:`pipelines.delta_io.rs_backend.RsBackend.read`): the same rows.

>>> scan = RsScan.open(str(tmp_path / "bronze"), above=("_ingested_at", since))  # doctest: +SKIP
>>> scan.leaves(["db", "after.list.element.idx"], pc.field("db") == "shop").num_rows  # doctest: +SKIP
12
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from pipelines.delta_io.features import uses_column_mapping


class RsScan:
    """The live Parquet files of a table (see the module doc)."""

    def __init__(self, dataset: ds.FileSystemDataset) -> None:
        self.dataset = dataset

    @classmethod
    def open(cls, path: str, above: tuple[str, object] | None = None) -> RsScan | None:
        """The scan of the table at ``path`` (``above``: only the files that may hold a row with
        that column above that value); None when its files alone do not give its rows (partition
        columns, deletion vectors, column mapping)."""
        from pipelines.delta_io.rs_tables import rs_arrow_filesystem, rs_files_above, rs_table

        dt = rs_table(path)
        meta, features = dt.metadata(), set(dt.protocol().reader_features or ())
        if meta.partition_columns or "deletionVectors" in features or "columnMapping" in features \
                or uses_column_mapping(meta.configuration):
            return None
        whole = dt.to_pyarrow_dataset(filesystem=rs_arrow_filesystem(dt))
        only = None if above is None else rs_files_above(dt, *above)
        fragments = list(whole.get_fragments())
        if only is not None:  # (a fragment's path: relative to the table, or its location then that)
            root = unquote(urlparse(dt.table_uri).path).rstrip("/") + "/"
            every = {unquote(p) for p in pa.table(dt.get_add_actions(flatten=True)).column("path").to_pylist()}

            def relative(path: str) -> str:
                path = unquote(path)
                return path[path.find(root) + len(root):] if root in path else path

            # (a path that names no file of the table: unsure, read it)
            fragments = [f for f in fragments if relative(f.path) in only or relative(f.path) not in every]
        return cls(ds.FileSystemDataset(fragments, whole.schema, whole.format, whole.filesystem))

    @property
    def columns(self) -> list[str]:
        return self.dataset.schema.names

    def batches(self, columns: Sequence[str], where: ds.Expression | None = None) -> Iterator[pa.RecordBatch]:
        """Whole ``columns`` of the rows ``where`` holds, a few batches read ahead (not pyarrow's
        default dozens: the caller keeps only part of each)."""
        return self.dataset.to_batches(columns=list(columns), filter=where, batch_readahead=2, fragment_readahead=1)

    def parts(self, columns: Sequence[str], where: ds.Expression | None = None, *,
              rows: bool = True) -> Iterator[pa.Table]:
        """``columns`` of the rows ``where`` holds, a row group at a time (only the rows it keeps),
        where a column may be a path to leaves of a nested one (``after.list.element.idx``: the
        lists, with only that field of their structs); ``where``'s columns must be among them.
        Only the row groups whose statistics ``where`` may hold are read; ``rows=False``: their
        rows are not filtered by it (the caller splits them). Raises when a path names no column
        of the files (ArrowInvalid, KeyError)."""
        for fragment in self.dataset.get_fragments():
            groups = [rg.id for rg in (fragment.subset(filter=where) if where is not None else fragment).row_groups]
            with self.dataset.filesystem.open_input_file(fragment.path) as f:
                file = pq.ParquetFile(f)
                for group in groups:
                    part = file.read_row_group(group, columns=list(columns))
                    part = _kept(part, where) if where is not None and rows else part
                    if part.num_rows:
                        yield part

    def leaves(self, columns: Sequence[str], where: ds.Expression | None = None,
               max_bytes: int | None = None) -> pa.Table | None:
        """:meth:`parts` as one table; None when the rows kept take more than ``max_bytes``."""
        parts, size = [], 0
        for part in self.parts(columns, where):
            parts.append(part)
            size += part.nbytes
            if max_bytes is not None and size > max_bytes:
                return None
        if not parts:
            return pa.Table.from_batches([], schema=self._leaf_schema(columns))
        return pa.concat_tables(parts)

    def _leaf_schema(self, columns: Sequence[str]) -> pa.Schema:
        """The schema :meth:`leaves` gives for ``columns`` (of a table with no row)."""
        fields = []
        for column in columns:
            name, *path = column.split(".")
            typ = self.dataset.schema.field(name).type
            if path:  # a.list.element.f: a list of structs of that one field
                item = typ.value_type
                typ = pa.list_(pa.struct([item.field(path[-1])]))
            fields.append(pa.field(name, typ))
        return pa.schema(fields)


def _kept(part: pa.Table, where: ds.Expression) -> pa.Table:
    """The rows of ``part`` that ``where`` holds. ``where`` is tested on the flat columns alone
    and the rows taken by number: a filter of the whole part would copy its nested lists even
    when it keeps every row (a table's own row groups, the common case of one big table).
    ``where`` on a nested column: the whole part filtered."""
    flat = [n for n, t in zip(part.column_names, part.schema.types) if not pa.types.is_nested(t)]
    try:
        at = part.select(flat).append_column("_kept_at", pa.array(np.arange(part.num_rows, dtype=np.int64))) \
            .filter(where).column("_kept_at")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, KeyError):
        return part.filter(where)
    return part if len(at) == part.num_rows else part.take(at)

