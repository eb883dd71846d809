"""One decoder per event type, dispatched through ``EVENT_DECODERS``.

Every decoded event is a frozen dataclass whose first field is ``header``
(:class:`~pipelines.binlog.framing.EventHeader`). Decoders are pure:
``decode_x(data, ctx, header) -> Event`` where ``data`` is the memoryview of the
event's post-header + body (common header and checksum stripped).

>>> from pipelines.binlog.framing import BinlogFile
>>> with BinlogFile("samples/binlogs/binlog.000001") as f:
...     ctx = DecodeContext(f.format)
...     [type(decode_event(raw, ctx)).__name__ for raw in f.events()][:3]
['FormatDescriptionEvent', 'GtidListEvent', 'BinlogCheckpointEvent']

:func:`decode_event` is the only entry point callers need: it picks the decoder,
turns unknown types into :class:`UnknownEvent`, records every decoded
:class:`TableMapEvent` in ``ctx.table_maps`` (for the stream and for the events
unpacked from a TRANSACTION_PAYLOAD alike) and puts the file and offset on every
error.

Post-headers are declared as :class:`~pipelines.binlog.layout.Layout` tables and
checked against the length the FORMAT_DESCRIPTION event declares for the type:
a longer declared post-header has its unknown tail skipped, a shorter one is
either an old format we know (4-byte table ids, pre-5.0 QUERY) or a
:class:`CorruptEvent`.

The decoders live by event family; this module dispatches to them and is what callers import:

* ``events_common``     :class:`DecodeContext`, :class:`UnknownEvent` and the helpers every family shares
* ``events_control``    FORMAT_DESCRIPTION, ROTATE, STOP, XID, XA_PREPARE, INCIDENT, HEARTBEAT, IGNORABLE, ROWS_QUERY
* ``events_query``      QUERY (and MariaDB's compressed one), EXECUTE_LOAD_QUERY, the status variables
* ``events_statement``  INTVAR, RAND, USER_VAR and the LOAD DATA family
* ``events_table_map``  TABLE_MAP and its optional metadata
* ``events_rows``       the rows events (v0-v2, partial updates, MariaDB's compressed ones)
* ``events_gtid``       MySQL's GTID, GTID_TAGGED, PREVIOUS_GTIDS, TRANSACTION_CONTEXT, VIEW_CHANGE
* ``events_payload``    TRANSACTION_PAYLOAD (its inner events go through :func:`decode_event`, which the
  dispatch passes in)
* ``events_mariadb``    ANNOTATE_ROWS, BINLOG_CHECKPOINT, GTID, GTID_LIST, START_ENCRYPTION

The wire-format readers are in :mod:`pipelines.binlog.wire`.

Sources for the layouts: MySQL ``libs/mysql/binlog/event/*.cpp`` (formerly
``libbinlogevents``), ``sql/log_event.cc``; MariaDB ``sql/log_event.cc`` and
``sql/log_event.h``.
"""
from __future__ import annotations

from .constants import EventFlag, EventType, ROWS_EVENT_OPS, event_type_name
from .errors import BinlogError, CorruptEvent
from .framing import RawEvent
from .events_common import DecodeContext, Event, EventDecoder, UnknownEvent
from .events_control import (
    decode_format_description, decode_heartbeat, decode_heartbeat_v2, decode_ignorable, decode_incident,
    decode_rotate, decode_rows_query, decode_stop, decode_xa_prepare, decode_xid,
)
from .events_gtid import (
    decode_gtid, decode_gtid_tagged, decode_previous_gtids, decode_transaction_context, decode_view_change,
)
from .events_mariadb import (
    decode_annotate_rows, decode_binlog_checkpoint, decode_gtid_list, decode_maria_gtid, decode_start_encryption,
)
from .events_payload import decode_transaction_payload
from .events_query import decode_execute_load_query, decode_query, decode_query_compressed
from .events_rows import RowsEvent, UNCOMPRESSED_KIND, rows_decoder
from .events_statement import (
    decode_append_block, decode_begin_load_query, decode_create_file, decode_delete_file, decode_exec_load,
    decode_intvar, decode_load, decode_new_load, decode_rand, decode_user_var,
)
from .events_table_map import TableMapEvent, decode_table_map

# what callers import from here (the event classes and the constants they test against)
from .events_control import (  # noqa: F401
    FormatDescriptionEvent, HeartbeatEvent, IgnorableEvent, IncidentEvent, RotateEvent, RowsQueryEvent, StopEvent,
    XaPrepareEvent, XidEvent,
)
from .events_gtid import GtidEvent, PreviousGtidsEvent, TransactionContextEvent, ViewChangeEvent  # noqa: F401
from .events_mariadb import (  # noqa: F401
    MARIA_FL_DDL, MARIA_FL_START_ALTER, MARIA_FL_TRANSACTIONAL, AnnotateRowsEvent, BinlogCheckpointEvent, GtidListEvent,
    MariaGtidEvent, StartEncryptionEvent,
)
from .events_payload import TransactionPayloadEvent  # noqa: F401
from .events_query import ExecuteLoadQueryEvent, QueryEvent  # noqa: F401
from .events_statement import BeginLoadQueryEvent, IntvarEvent, RandEvent, UserVarEvent  # noqa: F401
from .events_table_map import NUMERIC_TYPES  # noqa: F401


# =============================================================================
# dispatch
# =============================================================================

EVENT_DECODERS: dict[int, EventDecoder] = {
    EventType.QUERY: decode_query,
    EventType.STOP: decode_stop,
    EventType.ROTATE: decode_rotate,
    EventType.INTVAR: decode_intvar,
    EventType.LOAD: decode_load,
    EventType.CREATE_FILE: decode_create_file,
    EventType.APPEND_BLOCK: decode_append_block,
    EventType.EXEC_LOAD: decode_exec_load,
    EventType.DELETE_FILE: decode_delete_file,
    EventType.NEW_LOAD: decode_new_load,
    EventType.RAND: decode_rand,
    EventType.USER_VAR: decode_user_var,
    EventType.FORMAT_DESCRIPTION: decode_format_description,
    EventType.XID: decode_xid,
    EventType.BEGIN_LOAD_QUERY: decode_begin_load_query,
    EventType.EXECUTE_LOAD_QUERY: decode_execute_load_query,
    EventType.TABLE_MAP: decode_table_map,
    EventType.INCIDENT: decode_incident,
    EventType.HEARTBEAT: decode_heartbeat,
    EventType.IGNORABLE: decode_ignorable,
    EventType.ROWS_QUERY: decode_rows_query,
    EventType.GTID: decode_gtid,
    EventType.ANONYMOUS_GTID: decode_gtid,
    EventType.PREVIOUS_GTIDS: decode_previous_gtids,
    EventType.TRANSACTION_CONTEXT: decode_transaction_context,
    EventType.VIEW_CHANGE: decode_view_change,
    EventType.XA_PREPARE: decode_xa_prepare,
    EventType.TRANSACTION_PAYLOAD: lambda data, ctx, hdr: decode_transaction_payload(data, ctx, hdr, decode_event),
    EventType.HEARTBEAT_V2: decode_heartbeat_v2,
    EventType.GTID_TAGGED: decode_gtid_tagged,
    EventType.MARIA_ANNOTATE_ROWS: decode_annotate_rows,
    EventType.MARIA_BINLOG_CHECKPOINT: decode_binlog_checkpoint,
    EventType.MARIA_GTID: decode_maria_gtid,
    EventType.MARIA_GTID_LIST: decode_gtid_list,
    EventType.MARIA_START_ENCRYPTION: decode_start_encryption,
    EventType.MARIA_QUERY_COMPRESSED: decode_query_compressed,
}
EVENT_DECODERS.update({code: rows_decoder(code) for code in ROWS_EVENT_OPS if code not in UNCOMPRESSED_KIND})
EVENT_DECODERS.update({code: rows_decoder(code, compressed=True) for code in UNCOMPRESSED_KIND})


def decode_event(raw: RawEvent, ctx: DecodeContext) -> Event:
    """Decode one framed event.

    An unknown type becomes :class:`UnknownEvent` (``ignorable`` from the
    header's LOG_EVENT_IGNORABLE_F). A decoded :class:`TableMapEvent` is recorded
    in ``ctx.table_maps``. Every error is a :class:`BinlogError` carrying the
    file and the event's offset; anything else a decoder raises is reported as
    :class:`CorruptEvent`.
    """
    header, data = raw
    decoder = EVENT_DECODERS.get(header.type_code)
    if decoder is None:
        return UnknownEvent(header, bytes(data), bool(header.flags & EventFlag.IGNORABLE))
    try:
        ev = decoder(data, ctx, header)
    except BinlogError as e:
        raise e.at(header.file, header.pos)
    except Exception as e:
        where = f" (inside the payload at {header.inner_pos})" if header.in_payload else ""
        raise CorruptEvent(
            f"{event_type_name(header.type_code)} event{where} could not be decoded: {type(e).__name__}: {e}",
            file=header.file,
            offset=header.pos,
        ) from e
    if type(ev) is TableMapEvent:
        if ctx.table_map_hook is not None:
            try:
                ev = ctx.table_map_hook(ev)
            except BinlogError as e:
                raise e.at(header.file, header.pos)
        ctx.table_maps[ev.table_id] = ev
    elif type(ev) is RowsEvent and ev.stmt_end:
        # Table maps live until the end of their statement (as on a replica): a later
        # rows event without its own TABLE_MAP must not borrow a stale one.
        ctx.table_maps.clear()
    return ev
