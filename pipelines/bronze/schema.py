"""The bronze change-log schema: one row per row change, in a generic column form.

Every value keeps its exact meaning: ``text`` holds the canonical text of typed
values (see :mod:`pipelines.binlog.values`), ``bin`` holds the bytes of binary values;
both NULL means SQL NULL; both set: text not valid in its charset (``text`` with U+FFFD, ``bin``
the exact bytes), or a JSON value logged as diffs (``bin`` is :data:`PARTIAL_JSON_MARK`,
``text`` the diffs). ``type`` records the MySQL column type as logged
(e.g. ``LONG UNSIGNED``, ``NEWDECIMAL(10,2)``, ``VARCHAR(40) utf8mb4``).

The total-order key ``_seq`` sorts as the changes happened:
``{file_seq:010d}{event_pos:013d}{row_idx:09d}`` (32 digits, fixed width). A snapshot's rows (op
``r``, a logical dump loaded by :mod:`pipelines.snapshot_load`) sort at the snapshot's position
``FILE:POS`` (the first event the dump does not hold): :func:`snapshot_start` is
``seq_key(FILE, POS - 1, 0)``, where no event can start (an event is at least 19 bytes long, and
the next one starts at ``POS``), so it is after every change before the position and before every
change at or after it; each row's key is that start followed by its place in the dump
(:func:`snapshot_seq`, 56 digits), unique as keyless tables need, and still between the two.

``_shape`` (added after the first release: NULL in rows written before it) names the logged
columns of the row's images (:func:`shape_text`); silver matches each shape to a schema once.
``_zero_dates`` (added later still: NULL in rows written before it) counts the row's zero and
invalid temporal values (``0000-00-00``, ``2024-02-30``, YEAR 0, both images): the values silver
turns into NULL, so silver keeps their count without reading the images again.
"""
from __future__ import annotations

import pyarrow as pa

BRONZE_TABLE = "bronze/binlog_changes"
DECODER_VERSION = "0.1.0"

# ``bin`` of a cell whose JSON value was logged as diffs only (MySQL 8 PARTIAL_UPDATE_ROWS without
# the document in the before image): ``text`` then holds the diffs, ``[{"op", "path", "value"}]``.
PARTIAL_JSON_MARK = b"binlog-delta:partial-json"

# Column form of one image: one struct per column present in the image.
COLUMN_VALUE = pa.struct([("idx", pa.int32()), ("name", pa.string()), ("type", pa.string()), ("text", pa.string()),
                          ("bin", pa.binary())])
IMAGE = pa.list_(COLUMN_VALUE)
_TS = pa.timestamp("us", tz="UTC")

# bronze's layout: its columns as Arrow types (pipelines.delta_io.struct_of: the Spark schema); rows
# are tuples in this order
BRONZE_LAYOUT = pa.schema([
    ("source_file", pa.string()),  # base name, e.g. binlog.000042
    ("file_seq", pa.int64()),  # numeric suffix of the file name
    ("event_pos", pa.int64()),  # start offset of the rows event (outer event when in a payload)
    ("row_idx", pa.int32()),  # index of the row change within that event
    ("_seq", pa.string()),  # sortable total-order key
    ("server_id", pa.int64()),
    ("gtid", pa.string()),  # MySQL uuid[:tag]:gno or MariaDB domain-server-seq
    ("xid", pa.decimal128(20, 0)),
    ("commit_ts", _TS),  # commit event timestamp (UTC)
    ("event_ts", _TS),  # rows event timestamp (UTC)
    ("db", pa.string()),
    ("table", pa.string()),
    ("op", pa.string()),  # c | u | d | r (a snapshot's row: OPS)
    ("before", IMAGE),
    ("after", IMAGE),
    ("pk", IMAGE),  # key values (after image, or before for deletes)
    ("decoder_version", pa.string()),
    ("_run_id", pa.string()),
    ("_ingested_at", _TS),
    ("_shape", pa.string()),  # shape_text of the logged columns of both images (silver groups by it)
    ("_zero_dates", pa.int32()),  # zero/invalid temporal values in both images (silver nulls them)
])

# Columns added after the first release: NULL in the rows an older version wrote.
WRITTEN_LATER = ("_shape", "_zero_dates")


# The image shape of a row: its logged columns (both images) as ``idx<US>name<US>type`` cells,
# distinct, sorted as strings, joined by <RS>; a column without a name (no table-map metadata)
# has the name <NUL>. Silver computes the same text from the images for rows without ``_shape``.
SHAPE_SEP_FIELD, SHAPE_SEP_COL, SHAPE_NO_NAME = "\x1f", "\x1e", "\x00"


def shape_text(cells) -> str:
    r"""The ``_shape`` text of ``(idx, name, type)`` cells.

    >>> shape_text([(1, "b", "LONG"), (0, None, "VARCHAR(5) utf8mb4"), (1, "b", "LONG")]).split("\x1e")
    ['0\x1f\x00\x1fVARCHAR(5) utf8mb4', '1\x1fb\x1fLONG']
    """
    return SHAPE_SEP_COL.join(sorted({
        f"{idx}{SHAPE_SEP_FIELD}{SHAPE_NO_NAME if name is None else name}{SHAPE_SEP_FIELD}{typ}"
        for idx, name, typ in cells}))


SEQ_ROW_DIGITS = 9  # the last part of _seq: the row's index within its event


def seq_key(file_seq: int, event_pos: int, row_idx: int) -> str:
    """The total-order key of one row change."""
    return f"{file_seq:010d}{event_pos:013d}{row_idx:0{SEQ_ROW_DIGITS}d}"


# Ops: an insert, an update, a delete, a row read from a snapshot (a logical dump: an insert into
# the table the snapshot's CREATE TABLE emptied at its position, as Debezium names it).
OPS = ("c", "u", "d", "r")
INSERT_OPS = ("c", "r")  # ops whose after image is a whole new row
UPSERT_OPS = ("c", "r", "u")  # ops with an after image


def snapshot_start(file_seq: int, pos: int) -> str:
    """The ``_seq`` of a snapshot taken at binlog ``file_seq``:``pos`` (``pos``: the first event it
    does not hold): its schema events (the dump's CREATE TABLE) sit there; its rows just after.

    >>> snapshot_start(4, 56962) < seq_key(4, 56962, 0) and snapshot_start(4, 56962) > seq_key(4, 56943, 999)
    True
    """
    if pos < 4:
        raise ValueError(f"a binlog position is at least 4 (after the magic bytes), got {pos}")
    return seq_key(file_seq, pos - 1, 0)


SNAPSHOT_OFFSET_DIGITS = 15  # a statement's byte offset in its dump (up to 1 PB)


def snapshot_seq(start: str, offset: int, row: int) -> str:
    """The ``_seq`` of a snapshot's row: :func:`snapshot_start`, then the byte offset of its INSERT
    in the dump and its index in that INSERT.

    >>> a, b = snapshot_seq(snapshot_start(4, 100), 9, 0), snapshot_seq(snapshot_start(4, 100), 10, 0)
    >>> snapshot_start(4, 100) < a < b < seq_key(4, 100, 0)
    True
    """
    return f"{start}{offset:0{SNAPSHOT_OFFSET_DIGITS}d}{row:0{SEQ_ROW_DIGITS}d}"
