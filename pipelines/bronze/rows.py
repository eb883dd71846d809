"""Bronze rows from decoded row changes: the generic column form of each value (see
:mod:`pipelines.bronze.schema`), one row at a time: :func:`bronze_row` (the reference) and
:func:`snapshot_row` for a dump's INSERTs (op ``r``), from a table map's :class:`TableLayout`.
The column-wise builders the staging tasks use, which give the same rows as Arrow record
batches, are :mod:`pipelines.bronze.arrow_rows`.
"""
from __future__ import annotations

import datetime as _dt
import json
import functools
import os
from decimal import Decimal

from pipelines.binlog.changes import RowChange
from pipelines.binlog.constants import ColumnType
from pipelines.binlog.jsonb import PartialJson
from pipelines.binlog.typetext import column_fsp, column_type_text
from pipelines.binlog.values import InvalidText, canonical_text, datetime_text, decimal_text
from pipelines.bronze.schema import DECODER_VERSION, PARTIAL_JSON_MARK, seq_key, shape_text

OPS = {"insert": "c", "update": "u", "delete": "d"}
_UTC = _dt.timezone.utc


# -- column types and values ---------------------------------------------------------

# types whose zero/invalid values silver turns into NULL (the decoder gives MySQL's text for
# them, YEAR gives 0): counted per row in _zero_dates
_DATE_TYPES = frozenset({ColumnType.DATE, ColumnType.NEWDATE, ColumnType.DATETIME, ColumnType.DATETIME2,
                         ColumnType.TIMESTAMP, ColumnType.TIMESTAMP2, ColumnType.YEAR})


class TableLayout:
    """What the rows of one table map need, computed once per table map."""

    __slots__ = ("tm", "names", "types", "fsps", "key", "heads", "dates", "_shapes", "invalid_text")

    def __init__(self, tm):
        n = tm.column_count
        self.tm = tm
        names = tm.column_names
        self.names = tuple(names[i] if names and i < len(names) else None for i in range(n))
        self.types = tuple(column_type_text(tm, i) for i in range(n))
        self.fsps = tuple(column_fsp(tm, i) for i in range(n))
        self.key = tuple(c for c, _prefix in tm.primary_key) if tm.primary_key else None
        self.heads = tuple((i, self.names[i], self.types[i]) for i in range(n))  # a cell's first fields
        self.dates = frozenset(i for i in range(n) if tm.column_types[i] in _DATE_TYPES)
        self._shapes: dict[tuple, str] = {}
        self.invalid_text = 0  # values seen by cell() whose bytes are not valid in their charset

    def shape(self, cols_before, cols_after) -> str:
        """The ``_shape`` of rows logging these columns (``None``: the image is absent)."""
        key = (cols_before, cols_after)
        text = self._shapes.get(key)
        if text is None:
            text = self._shapes[key] = shape_text(self.heads[i] for cols in key if cols is not None for i in cols)
        return text

    def zero_dates(self, cols, values) -> int:
        """How many of one image's values are zero or invalid dates (0 for an absent image)."""
        if values is None or not self.dates:
            return 0
        return sum(1 for i, v in zip(cols, values) if i in self.dates and is_zero_date(v))

    def cell(self, i: int, v) -> tuple:
        if type(v) is bytes or type(v) is bytearray or type(v) is memoryview:
            return (i, self.names[i], self.types[i], None, bytes(v))
        if type(v) is InvalidText:  # the text with replacements, and the exact bytes beside it
            self.invalid_text += 1
            return (i, self.names[i], self.types[i], str(v), v.raw)
        if type(v) is PartialJson:  # the diffs, marked: silver cannot read them as the document
            return (i, self.names[i], self.types[i], json.dumps(v.as_json()), PARTIAL_JSON_MARK)
        return (i, self.names[i], self.types[i], canonical_text(v, self.fsps[i]), None)

    def image(self, cols, values) -> list | None:
        """The cells of one row image: :meth:`cell` of each value, with the common types
        (str, int, NULL, bytes) done inline; this loop runs once per logged value."""
        if values is None:
            return None
        heads = self.heads
        out = []
        add = out.append
        for i, v in zip(cols, values):
            t = type(v)
            if t is str:
                add(heads[i] + (v, None))
            elif v is None:
                add(heads[i] + _NULL_CELL)
            elif t is int:
                add(heads[i] + (str(v), None))
            elif t is bytes:
                add(heads[i] + (None, v))
            elif t is _dt.datetime:
                add(heads[i] + (datetime_text(v, self.fsps[i]), None))
            elif t is Decimal:
                add(heads[i] + (decimal_text(v), None))
            else:
                add(self.cell(i, v))
        return out


_NULL_CELL = (None, None)


def is_zero_date(v) -> bool:
    """A value of a date type that is a zero or invalid date: MySQL's text, or YEAR 0."""
    return type(v) is str or (type(v) is int and v == 0)


@functools.lru_cache(maxsize=4096)
def epoch_datetime(epoch: int | None) -> _dt.datetime | None:
    return _dt.datetime.fromtimestamp(epoch, _UTC) if epoch is not None else None


file_basename = functools.lru_cache(maxsize=256)(os.path.basename)


def bronze_row(ch: RowChange, layout: TableLayout, file_seq: int, run_id: str, ingested_at) -> tuple:
    """One bronze row (in ``BRONZE_LAYOUT`` order) of one row change."""
    before = layout.image(ch.columns_before, ch.before)
    after = layout.image(ch.columns_after, ch.after)
    pk = None
    if layout.key is not None:
        cells = {}
        for img in ((before, after) if ch.op != "delete" else (after, before)):
            for cell in img or ():
                cells[cell[0]] = cell  # later images win: after for c/u, before for d
        if all(c in cells for c in layout.key):
            pk = [cells[c] for c in layout.key]
    tx = ch.tx
    return (
        file_basename(ch.file), file_seq, ch.pos, ch.row_idx, seq_key(file_seq, ch.pos, ch.row_idx),
        ch.server_id, tx.gtid, Decimal(tx.xid) if tx.xid is not None else None,
        epoch_datetime(tx.commit_ts), epoch_datetime(ch.event_ts), ch.db, ch.table, OPS[ch.op], before, after, pk,
        DECODER_VERSION, run_id, ingested_at,
        layout.shape(ch.columns_before if ch.before is not None else None,
                     ch.columns_after if ch.after is not None else None),
        layout.zero_dates(ch.columns_before, ch.before) + layout.zero_dates(ch.columns_after, ch.after),
    )


def snapshot_row(layout: TableLayout, cols, values, *, source_file: str, file_seq: int, event_pos: int,
                 row_idx: int, seq: str, db: str, table: str, run_id: str, ingested_at) -> tuple:
    """One bronze row (in ``BRONZE_LAYOUT`` order) of a row read from a snapshot (op ``r``): its
    after image of the dumped ``values`` of columns ``cols``, keyed at ``seq``
    (:func:`pipelines.bronze.schema.snapshot_seq`); no transaction, no before image."""
    after = layout.image(cols, values)
    pk = None
    if layout.key is not None:
        cells = {cell[0]: cell for cell in after}
        if all(c in cells for c in layout.key):
            pk = [cells[c] for c in layout.key]
    return (
        source_file, file_seq, event_pos, row_idx, seq, None, None, None, None, None, db, table, "r", None, after, pk,
        DECODER_VERSION, run_id, ingested_at, layout.shape(None, cols), layout.zero_dates(cols, values),
    )
