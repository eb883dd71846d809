"""The names MySQL and MariaDB use for binlog event types, column types and flags.

Values come from ``libbinlogevents/include/binlog_event.h`` and ``field_types.h``
(MySQL) and ``sql/log_event.h`` (MariaDB).
"""
from __future__ import annotations

from enum import IntEnum, IntFlag

BINLOG_MAGIC = b"\xfebin"
COMMON_HEADER_LEN = 19
CHECKSUM_LEN = 4


class EventType(IntEnum):
    UNKNOWN = 0
    START_V3 = 1
    QUERY = 2
    STOP = 3
    ROTATE = 4
    INTVAR = 5
    LOAD = 6
    SLAVE = 7
    CREATE_FILE = 8
    APPEND_BLOCK = 9
    EXEC_LOAD = 10
    DELETE_FILE = 11
    NEW_LOAD = 12
    RAND = 13
    USER_VAR = 14
    FORMAT_DESCRIPTION = 15
    XID = 16
    BEGIN_LOAD_QUERY = 17
    EXECUTE_LOAD_QUERY = 18
    TABLE_MAP = 19
    PRE_GA_WRITE_ROWS = 20
    PRE_GA_UPDATE_ROWS = 21
    PRE_GA_DELETE_ROWS = 22
    WRITE_ROWS_V1 = 23
    UPDATE_ROWS_V1 = 24
    DELETE_ROWS_V1 = 25
    INCIDENT = 26
    HEARTBEAT = 27
    IGNORABLE = 28
    ROWS_QUERY = 29
    WRITE_ROWS = 30
    UPDATE_ROWS = 31
    DELETE_ROWS = 32
    GTID = 33
    ANONYMOUS_GTID = 34
    PREVIOUS_GTIDS = 35
    TRANSACTION_CONTEXT = 36
    VIEW_CHANGE = 37
    XA_PREPARE = 38
    PARTIAL_UPDATE_ROWS = 39
    TRANSACTION_PAYLOAD = 40
    HEARTBEAT_V2 = 41
    GTID_TAGGED = 42
    # MariaDB
    MARIA_ANNOTATE_ROWS = 160
    MARIA_BINLOG_CHECKPOINT = 161
    MARIA_GTID = 162
    MARIA_GTID_LIST = 163
    MARIA_START_ENCRYPTION = 164
    MARIA_QUERY_COMPRESSED = 165
    MARIA_WRITE_ROWS_COMPRESSED_V1 = 166
    MARIA_UPDATE_ROWS_COMPRESSED_V1 = 167
    MARIA_DELETE_ROWS_COMPRESSED_V1 = 168
    MARIA_WRITE_ROWS_COMPRESSED = 169
    MARIA_UPDATE_ROWS_COMPRESSED = 170
    MARIA_DELETE_ROWS_COMPRESSED = 171


def event_type_name(code: int) -> str:
    """Name of an event type code, or ``UNKNOWN_<code>`` for codes we do not know."""
    try:
        return EventType(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


class EventFlag(IntFlag):
    """Flags in the common event header (``LOG_EVENT_*_F``)."""

    BINLOG_IN_USE = 0x0001
    FORCED_ROTATE = 0x0002
    THREAD_SPECIFIC = 0x0004
    SUPPRESS_USE = 0x0008
    UPDATE_TABLE_MAP_VERSION = 0x0010
    ARTIFICIAL = 0x0020
    RELAY_LOG = 0x0040
    IGNORABLE = 0x0080
    NO_FILTER = 0x0100
    MTS_ISOLATE = 0x0200
    SKIP_REPLICATION = 0x8000


class ChecksumAlg(IntEnum):
    OFF = 0
    CRC32 = 1
    UNDEF = 255


class ColumnType(IntEnum):
    DECIMAL = 0
    TINY = 1
    SHORT = 2
    LONG = 3
    FLOAT = 4
    DOUBLE = 5
    NULL = 6
    TIMESTAMP = 7
    LONGLONG = 8
    INT24 = 9
    DATE = 10
    TIME = 11
    DATETIME = 12
    YEAR = 13
    NEWDATE = 14
    VARCHAR = 15
    BIT = 16
    TIMESTAMP2 = 17
    DATETIME2 = 18
    TIME2 = 19
    TYPED_ARRAY = 20
    VECTOR = 242
    INVALID = 243
    BOOL = 244
    JSON = 245
    NEWDECIMAL = 246
    ENUM = 247
    SET = 248
    TINY_BLOB = 249
    MEDIUM_BLOB = 250
    LONG_BLOB = 251
    BLOB = 252
    VAR_STRING = 253
    STRING = 254
    GEOMETRY = 255


def column_type_name(code: int) -> str:
    try:
        return ColumnType(code).name
    except ValueError:
        return f"TYPE_{code}"


# Rows-event flags (post-header ``flags`` of rows events).
ROWS_FLAG_STMT_END = 0x0001
ROWS_FLAG_NO_FOREIGN_KEY_CHECKS = 0x0002
ROWS_FLAG_RELAXED_UNIQUE_CHECKS = 0x0004
ROWS_FLAG_COMPLETE_ROWS = 0x0008

# Row operations, as the pipeline and the jsonl dump name them.
OP_INSERT = "insert"
OP_UPDATE = "update"
OP_DELETE = "delete"

ROWS_EVENT_OPS = {
    EventType.PRE_GA_WRITE_ROWS: OP_INSERT,
    EventType.PRE_GA_UPDATE_ROWS: OP_UPDATE,
    EventType.PRE_GA_DELETE_ROWS: OP_DELETE,
    EventType.WRITE_ROWS_V1: OP_INSERT,
    EventType.UPDATE_ROWS_V1: OP_UPDATE,
    EventType.DELETE_ROWS_V1: OP_DELETE,
    EventType.WRITE_ROWS: OP_INSERT,
    EventType.UPDATE_ROWS: OP_UPDATE,
    EventType.DELETE_ROWS: OP_DELETE,
    EventType.PARTIAL_UPDATE_ROWS: OP_UPDATE,
    EventType.MARIA_WRITE_ROWS_COMPRESSED_V1: OP_INSERT,
    EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1: OP_UPDATE,
    EventType.MARIA_DELETE_ROWS_COMPRESSED_V1: OP_DELETE,
    EventType.MARIA_WRITE_ROWS_COMPRESSED: OP_INSERT,
    EventType.MARIA_UPDATE_ROWS_COMPRESSED: OP_UPDATE,
    EventType.MARIA_DELETE_ROWS_COMPRESSED: OP_DELETE,
}
