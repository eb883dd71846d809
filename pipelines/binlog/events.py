"""One decoder per event type, dispatched through ``EVENT_DECODERS``.

Every decoded event is a frozen dataclass whose first field is ``header``
(:class:`~pipelines.binlog.framing.EventHeader`). Decoders are pure:
``decode_x(data, ctx, header) -> Event`` where ``data`` is the memoryview of the
event's post-header + body (common header and checksum stripped).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .framing import EventHeader, FormatDescription


@dataclass(slots=True)
class DecodeContext:
    """State an event decoder may read: the format and the table maps seen so far.

    The stream (``decoder.py``) owns it and records each TableMapEvent in
    ``table_maps`` after decoding it.
    """

    format: FormatDescription
    table_maps: dict[int, "TableMapEvent"] = field(default_factory=dict)
    decode_rows: bool = True


@dataclass(frozen=True, slots=True)
class UnknownEvent:
    """An event type this decoder does not know; kept whole, never dropped."""

    header: EventHeader
    raw: bytes


@dataclass(frozen=True, slots=True)
class TableMapEvent:
    """TABLE_MAP: the layout of one table's rows, valid until the next statement.

    Per-column tuples all have ``column_count`` entries; optional-metadata
    fields are ``None`` when the server did not log them.
    """

    header: EventHeader
    table_id: int
    flags: int
    schema: str
    table: str
    column_count: int
    column_types: tuple[int, ...]  # ColumnType codes as logged (STRING may hide ENUM/SET)
    column_metas: tuple[Any, ...]  # per-column metadata, as columns.read_metadata returns it
    nullable: tuple[bool, ...]
    # optional metadata (MySQL 8.0.1+ binlog_row_metadata, MariaDB 10.5+)
    signedness: tuple[bool | None, ...] | None = None  # True = unsigned; None for non-numeric
    column_charsets: tuple[int | None, ...] | None = None  # collation id per column, None if n/a
    column_names: tuple[str, ...] | None = None
    set_values: tuple[tuple[str, ...] | None, ...] | None = None  # per column, None if not SET
    enum_values: tuple[tuple[str, ...] | None, ...] | None = None  # per column, None if not ENUM
    geometry_types: tuple[int | None, ...] | None = None
    primary_key: tuple[tuple[int, int], ...] | None = None  # (column index, prefix length 0=whole)
    visibility: tuple[bool, ...] | None = None  # True = visible
    vector_dimensions: tuple[int | None, ...] | None = None
    raw_optional_metadata: bytes = b""


@dataclass(frozen=True, slots=True)
class RowsEvent:
    """WRITE/UPDATE/DELETE rows (v0, v1, v2, partial, MariaDB compressed).

    ``rows`` holds one ``(before, after)`` pair per row change; each image is a
    tuple of values for the columns listed in ``columns_before`` /
    ``columns_after`` (column indexes, in order), or ``None`` (insert has no
    before image, delete no after image).
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


Event = Any  # any of the dataclasses in this module
EventDecoder = Callable[[memoryview, DecodeContext, EventHeader], Event]

EVENT_DECODERS: dict[int, EventDecoder] = {}
