"""The rows events: WRITE/UPDATE/DELETE v0-v2, PARTIAL_UPDATE_ROWS, MariaDB's compressed ones
(see :mod:`pipelines.binlog.events`)."""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from .constants import EventType, ROWS_EVENT_OPS, ROWS_FLAG_STMT_END, event_type_name
from .errors import CorruptEvent, UnsupportedType, need
from .framing import EventHeader
from .layout import Layout
from .wire import packed_int
from .events_common import EventDecoder, bits_lsb, declared_post_header, maria_uncompress, post_header
from .events_table_map import TABLE_ID_4_POST_HEADER, TableMapEvent


@dataclass(frozen=True, slots=True)
class RowsEvent:
    """WRITE/UPDATE/DELETE rows (v0, v1, v2, partial, MariaDB compressed).

    ``rows`` holds one ``(before, after)`` pair per row change; each image is a
    tuple of values for the columns listed in ``columns_before`` /
    ``columns_after`` (column indexes, in order), or ``None`` (insert has no
    before image, delete no after image).

    With ``DecodeContext.decode_rows`` false, ``rows`` is ``()`` and ``body``
    holds the row images undecoded (decompressed for MariaDB compressed events).
    With ``DecodeContext.row_cells``, ``rows`` is ``()`` and ``cells`` holds the images as
    canonical-text cells (:class:`~pipelines.binlog.rows.RowCells`) when the compiled decoder
    takes the event; otherwise ``rows`` holds the values as usual.
    ``extra_data`` (v2 only) may hold ``"ndb"`` (``{"format": int, "data": bytes}``),
    ``"partition_id"``, ``"source_partition_id"`` (updates), and ``"_unparsed"``
    (the bytes from an unknown extra-data type on, which stops the parse as in
    the server).
    """

    header: EventHeader
    op: str  # "insert" | "update" | "delete"
    table_id: int
    flags: int
    extra_data: dict[str, Any]
    column_count: int
    columns_before: tuple[int, ...]
    columns_after: tuple[int, ...]
    table_map: TableMapEvent | None
    rows: tuple[tuple[tuple | None, tuple | None], ...]
    partial: bool = False
    compressed: bool = False
    body: bytes = b""
    cells: Any = None  # RowCells, with DecodeContext.row_cells

    @property
    def row_count(self) -> int:
        return self.cells.rows if self.cells is not None else len(self.rows)

    @property
    def stmt_end(self) -> bool:
        return bool(self.flags & ROWS_FLAG_STMT_END)


# =============================================================================
# rows events
# =============================================================================

ROWS_POST_HEADER_V1 = Layout("table_id:u6 flags:H", "RowsPostHeaderV1")
ROWS_POST_HEADER_V2 = Layout("table_id:u6 flags:H extra_len:H", "RowsPostHeaderV2")
_V2_KINDS = frozenset(
    {EventType.WRITE_ROWS, EventType.UPDATE_ROWS, EventType.DELETE_ROWS, EventType.PARTIAL_UPDATE_ROWS,
     EventType.MARIA_WRITE_ROWS_COMPRESSED, EventType.MARIA_UPDATE_ROWS_COMPRESSED,
     EventType.MARIA_DELETE_ROWS_COMPRESSED}
)
# MariaDB compressed kinds -> the uncompressed kind they decode as
UNCOMPRESSED_KIND = {
    EventType.MARIA_WRITE_ROWS_COMPRESSED_V1: EventType.WRITE_ROWS_V1,
    EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1: EventType.UPDATE_ROWS_V1,
    EventType.MARIA_DELETE_ROWS_COMPRESSED_V1: EventType.DELETE_ROWS_V1,
    EventType.MARIA_WRITE_ROWS_COMPRESSED: EventType.WRITE_ROWS,
    EventType.MARIA_UPDATE_ROWS_COMPRESSED: EventType.UPDATE_ROWS,
    EventType.MARIA_DELETE_ROWS_COMPRESSED: EventType.DELETE_ROWS,
}
_EXTRA_NDB, _EXTRA_PART = 0, 1
_PART_ID = struct.Struct("<H")
# The "dummy" rows event that only carries STMT_END_F (no table behind it).
DUMMY_TABLE_IDS = frozenset({0x00FFFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFF})


def _extra_row_info(raw, op: str) -> dict[str, Any]:
    """v2 extra data: (type byte, value) chunks. NDB info = [length incl. itself,
    format, data]; partition info = partition id (+ source partition id for updates)."""
    out: dict[str, Any] = {}
    off = 0
    while off < len(raw):
        kind = raw[off]
        off += 1
        if kind == _EXTRA_NDB:
            need(raw, off, 2, "NDB extra row info")
            n = raw[off]
            if n < 2:
                raise CorruptEvent(f"NDB extra row info of length {n}")
            need(raw, off, n, "NDB extra row info")
            if "ndb" not in out:  # the server keeps the first and skips the others
                out["ndb"] = {"format": raw[off + 1], "data": bytes(raw[off + 2 : off + n])}
            off += n
        elif kind == _EXTRA_PART:
            need(raw, off, 2, "partition extra row info")
            out["partition_id"] = _PART_ID.unpack_from(raw, off)[0]
            off += 2
            if op == "update":
                need(raw, off, 2, "source partition extra row info")
                out["source_partition_id"] = _PART_ID.unpack_from(raw, off)[0]
                off += 2
        else:
            out["_unparsed"] = bytes(raw[off - 1 :])
            break
    return out


def _decode_rows_kind(data, ctx, header, code: int, *, compressed: bool = False) -> RowsEvent:
    op = ROWS_EVENT_OPS[code]
    kind = UNCOMPRESSED_KIND.get(code, code)
    v2 = code in _V2_KINDS
    declared = declared_post_header(ctx, code, ROWS_POST_HEADER_V2.size if v2 else ROWS_POST_HEADER_V1.size)
    extra: dict[str, Any] = {}
    if v2:
        ph, off = post_header(data, ctx, code, ROWS_POST_HEADER_V2)
        if ph.extra_len < 2:
            raise CorruptEvent(f"rows event extra-data length {ph.extra_len} (counts its own 2 bytes)")
        need(data, off, ph.extra_len - 2, "rows event extra data")
        extra = _extra_row_info(data[off : off + ph.extra_len - 2], op)
        off += ph.extra_len - 2
    else:
        layout = TABLE_ID_4_POST_HEADER if declared == TABLE_ID_4_POST_HEADER.size else ROWS_POST_HEADER_V1
        ph, off = post_header(data, ctx, code, layout)
    width, off = packed_int(data, off, "rows event column count")
    nbytes = (width + 7) // 8
    need(data, off, nbytes, "rows event column bitmap")
    present = bits_lsb(data, off, width)
    off += nbytes
    present_after = present
    if op == "update":
        need(data, off, nbytes, "rows event after-image bitmap")
        present_after = bits_lsb(data, off, width)
        off += nbytes
    cols = tuple(i for i, p in enumerate(present) if p)
    cols_after = tuple(i for i, p in enumerate(present_after) if p)
    before, after = {"insert": ((), cols), "delete": (cols, ()), "update": (cols, cols_after)}[op]

    body = maria_uncompress(data[off:], f"{event_type_name(code)} rows") if compressed else data[off:]
    partial = code == EventType.PARTIAL_UPDATE_ROWS

    table_map = ctx.table_maps.get(ph.table_id)
    if table_map is None:
        if ph.table_id in DUMMY_TABLE_IDS and ph.flags & ROWS_FLAG_STMT_END:
            return RowsEvent(
                header, op, ph.table_id, ph.flags, extra, width, before, after, None, (), partial, compressed, bytes(body)
            )
        raise CorruptEvent(f"rows event for table_id {ph.table_id} has no preceding TABLE_MAP")
    if width != table_map.column_count:
        raise CorruptEvent(
            f"rows event for table_id {ph.table_id} has {width} columns, its TABLE_MAP "
            f"({table_map.schema}.{table_map.table}) {table_map.column_count}"
        )
    if not ctx.decode_rows:
        return RowsEvent(
            header, op, ph.table_id, ph.flags, extra, width, before, after, table_map, (), partial, compressed, bytes(body)
        )
    try:
        from .rows import decode_rows
    except ImportError as e:  # pragma: no cover - depends on the checkout
        raise UnsupportedType(f"row images need pipelines.binlog.rows ({e}); decode with decode_rows=False") from None
    if ctx.row_cells and not partial:
        from .rows import decode_cells

        cells = decode_cells(op, table_map, body, before, after)
        if cells is not None:
            return RowsEvent(header, op, ph.table_id, ph.flags, extra, width, before, after, table_map, (), partial,
                             compressed, cells=cells)
    rows = tuple(decode_rows(op, table_map, body, before, after, partial=partial, event_type=kind))
    return RowsEvent(header, op, ph.table_id, ph.flags, extra, width, before, after, table_map, rows, partial, compressed)


def rows_decoder(code: int, compressed: bool = False) -> EventDecoder:
    def decode(data, ctx, header):
        return _decode_rows_kind(data, ctx, header, code, compressed=compressed)

    decode.__name__ = f"decode_{EventType(code).name.lower()}"
    return decode
