"""Small encoders that build binlog event bytes for tests, following the MySQL and
MariaDB layouts (the inverse of ``pipelines/binlog/events.py``).

Event builders return the event's ``data``: post-header + body, without the
19-byte common header and without a checksum, which is what the decoders get.
:func:`raw` wraps such bytes into a :class:`RawEvent`; :func:`inner_event` makes
a complete checksum-less event as found inside a TRANSACTION_PAYLOAD;
:func:`binlog_file` makes a whole file (magic, FORMAT_DESCRIPTION, events, CRC32).
"""
from __future__ import annotations

import struct
import uuid as _uuid
import zlib

from pipelines.binlog.constants import BINLOG_MAGIC, COMMON_HEADER_LEN, EventType
from pipelines.binlog.framing import EVENT_HEADER, EventHeader, FormatDescription, RawEvent

# ----------------------------------------------------------------------------- formats

# Post-header lengths as MySQL 8.0 and MariaDB 10.11 declare them in their
# FORMAT_DESCRIPTION events (read from real files of the corpus).
MYSQL80_POST_HEADERS = bytes(
    [0, 13, 0, 8, 0, 0, 0, 0, 4, 0, 4, 0, 0, 0, 98, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0,
     10, 10, 10, 42, 42, 0, 18, 52, 0, 10, 40, 0]
)
MYSQL56_POST_HEADERS = bytes(
    [56, 13, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0, 92, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0,
     10, 10, 10, 25, 25, 0]
)
_MARIA_HEAD = [56, 13, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0, 228, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0,
               10, 10, 10, 0, 0, 0, 0, 0, 0]
MARIADB1011_POST_HEADERS = bytes(
    _MARIA_HEAD + [0] * (159 - len(_MARIA_HEAD)) + [0, 4, 19, 4, 0, 13, 8, 8, 8, 10, 10, 10]
)
assert len(MARIADB1011_POST_HEADERS) == 171


def fmt(kind: str = "mysql80", post_headers: bytes | None = None, checksum_alg: int = 1) -> FormatDescription:
    """A FormatDescription like the one a real server writes."""
    version, table = {
        "mysql80": ("8.0.36", MYSQL80_POST_HEADERS),
        "mysql56": ("5.6.35-log", MYSQL56_POST_HEADERS),
        "mariadb": ("10.11.19-MariaDB-log", MARIADB1011_POST_HEADERS),
    }[kind]
    return FormatDescription(4, version, 0, 19, table if post_headers is None else post_headers, checksum_alg)


def with_post_header(f: FormatDescription, code: int, length: int) -> FormatDescription:
    """``f`` with the declared post-header length of ``code`` replaced."""
    table = bytearray(f.post_header_lengths)
    if len(table) < code:
        table.extend(b"\0" * (code - len(table)))
    table[code - 1] = length
    return FormatDescription(f.binlog_version, f.server_version, f.create_timestamp, f.header_length, bytes(table), f.checksum_alg)


def header(type_code: int, *, pos: int = 4, length: int = 0, file: str = "test-bin.000001", server_id: int = 1,
           timestamp: int = 1700000000, flags: int = 0, next_pos: int | None = None) -> EventHeader:
    end = pos + length
    return EventHeader(file, pos, end, timestamp, int(type_code), server_id, end if next_pos is None else next_pos, flags)


def raw(type_code: int, data: bytes, **kw) -> RawEvent:
    """A framed event as ``BinlogFile.events()`` yields it."""
    kw.setdefault("length", COMMON_HEADER_LEN + len(data) + 4)
    return RawEvent(header(type_code, **kw), memoryview(bytes(data)))


# ----------------------------------------------------------------------------- integers

def u(n: int, width: int) -> bytes:
    return int(n).to_bytes(width, "little")


def packed_int(n: int) -> bytes:
    """MySQL length-encoded integer (net_store_length)."""
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + u(n, 2)
    if n < 1 << 24:
        return b"\xfd" + u(n, 3)
    return b"\xfe" + u(n, 8)


def varlen_uint(n: int) -> bytes:
    """MySQL serialization-library integer (write_varlen_bytes_unsigned)."""
    bits = n.bit_length()
    count = ((bits * 575) >> 12) + 1
    first = ((1 << (count - 1)) - 1) | ((n << count) & 0xFF)
    if count == 1:
        return bytes([first])
    rest = n >> (8 - count + ((count + 7) >> 4))
    return bytes([first]) + rest.to_bytes(8, "little")[: count - 1]


def varlen_int(n: int) -> bytes:
    return varlen_uint((n << 1) if n >= 0 else ((-(n + 1)) << 1) | 1)


def lstr8(b: bytes | str) -> bytes:
    b = b.encode() if isinstance(b, str) else b
    return bytes([len(b)]) + b


def bitmap(bits) -> bytes:
    """Bits LSB first (rows-event column bitmaps, null bitmaps)."""
    bits = list(bits)
    out = bytearray((len(bits) + 7) // 8)
    for i, b in enumerate(bits):
        if b:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def bits_msb(bits) -> bytes:
    """Bits MSB first (optional-metadata bit fields)."""
    bits = list(bits)
    out = bytearray((len(bits) + 7) // 8)
    for i, b in enumerate(bits):
        if b:
            out[i >> 3] |= 0x80 >> (i & 7)
    return bytes(out)


def maria_compress(data: bytes) -> bytes:
    """MariaDB compressed record (binlog_buf_compress)."""
    n = len(data)
    lenlen = 1 if n < 1 << 8 else 2 if n < 1 << 16 else 3 if n < 1 << 24 else 4
    return bytes([0x80 | lenlen]) + n.to_bytes(lenlen, "big") + zlib.compress(data)


# ----------------------------------------------------------------------------- control events

def rotate(position: int, name: str) -> bytes:
    return u(position, 8) + name.encode()


def xid(value: int) -> bytes:
    return u(value, 8)


def xa_prepare(one_phase: bool, format_id: int, gtrid: bytes, bqual: bytes) -> bytes:
    return bytes([one_phase]) + u(format_id, 4) + u(len(gtrid), 4) + u(len(bqual), 4) + gtrid + bqual


def incident(number: int, message: str) -> bytes:
    return u(number, 2) + lstr8(message)


def heartbeat_v2(log_file: str, position: int) -> bytes:
    name = log_file.encode()
    pos = packed_int(position)
    return packed_int(1) + packed_int(len(name)) + name + packed_int(2) + packed_int(len(pos)) + pos + packed_int(0)


def rows_query(query: str) -> bytes:
    q = query.encode()
    return bytes([len(q) & 0xFF]) + q


# ----------------------------------------------------------------------------- QUERY

def sv(code: int, value: bytes) -> bytes:
    return bytes([code]) + value


def query(query_text: bytes | str, *, schema: str = "", thread_id: int = 7, exec_time: int = 0, error_code: int = 0,
          status: bytes = b"", extra_post_header: bytes = b"", compressed: bool = False) -> bytes:
    """QUERY (or QUERY_COMPRESSED) data; ``extra_post_header`` goes after the 13 known bytes
    (EXECUTE_LOAD_QUERY's fields, or unknown bytes of a longer declared post-header)."""
    q = query_text.encode() if isinstance(query_text, str) else query_text
    db = schema.encode()
    ph = u(thread_id, 4) + u(exec_time, 4) + bytes([len(db)]) + u(error_code, 2) + u(len(status), 2)
    return ph + extra_post_header + status + db + b"\0" + (maria_compress(q) if compressed else q)


def execute_load_query(query_text: str, *, file_id: int, fn_start: int, fn_end: int, dup: int = 0, **kw) -> bytes:
    return query(query_text, extra_post_header=u(file_id, 4) + u(fn_start, 4) + u(fn_end, 4) + bytes([dup]), **kw)


# ----------------------------------------------------------------------------- statement-based

def intvar(kind: int, value: int) -> bytes:
    return bytes([kind]) + u(value, 8)


def rand(seed1: int, seed2: int) -> bytes:
    return u(seed1, 8) + u(seed2, 8)


def user_var(name: str, value: bytes | None, *, value_type: int = 0, charset: int = 45, flags: int | None = 0) -> bytes:
    n = name.encode()
    out = u(len(n), 4) + n
    if value is None:
        return out + b"\x01"
    out += b"\x00" + bytes([value_type]) + u(charset, 4) + u(len(value), 4) + value
    return out if flags is None else out + bytes([flags])


def file_block(file_id: int, data: bytes) -> bytes:
    """BEGIN_LOAD_QUERY / APPEND_BLOCK data."""
    return u(file_id, 4) + data


# ----------------------------------------------------------------------------- TABLE_MAP / rows

def tlv(field_type: int, value: bytes) -> bytes:
    return bytes([field_type]) + packed_int(len(value)) + value


def packed_ints(values) -> bytes:
    return b"".join(packed_int(v) for v in values)


def packed_strs(values) -> bytes:
    out = b""
    for v in values:
        b = v.encode() if isinstance(v, str) else v
        out += packed_int(len(b)) + b
    return out


def str_lists(lists) -> bytes:
    return b"".join(packed_int(len(values)) + packed_strs(values) for values in lists)


def table_map(table_id: int, schema: str, table: str, types, meta: bytes, nullable, *, flags: int = 1,
              optional: bytes = b"", table_id_width: int = 6) -> bytes:
    return (
        u(table_id, table_id_width) + u(flags, 2) + lstr8(schema) + b"\0" + lstr8(table) + b"\0"
        + packed_int(len(types)) + bytes(types) + packed_int(len(meta)) + meta + bitmap(nullable) + optional
    )


def rows(table_id: int, width: int, present, body: bytes, *, present_after=None, flags: int = 1,
         v2: bool = True, extra: bytes = b"", compressed: bool = False, table_id_width: int = 6) -> bytes:
    """Rows event data; ``extra`` is the v2 extra data without its length field."""
    ph = u(table_id, table_id_width) + u(flags, 2) + (u(len(extra) + 2, 2) + extra if v2 else b"")
    out = ph + packed_int(width) + bitmap(present)
    if present_after is not None:
        out += bitmap(present_after)
    return out + (maria_compress(body) if compressed else body)


# ----------------------------------------------------------------------------- MySQL GTIDs

def gtid(sid: str, gno: int, *, flags: int = 0, logical_clock: tuple[int, int] | None = None,
         immediate_ts: int | None = None, original_ts: int | None = None, transaction_length: int | None = None,
         immediate_version: int | None = None, original_version: int | None = None,
         ticket: int | None = None) -> bytes:
    out = bytes([flags]) + _uuid.UUID(sid).bytes + struct.pack("<q", gno)
    if logical_clock is None:
        return out
    out += b"\x02" + struct.pack("<qq", *logical_clock)
    if immediate_ts is None:
        return out
    if original_ts is not None and original_ts != immediate_ts:
        out += u(immediate_ts | 1 << 55, 7) + u(original_ts, 7)
    else:
        out += u(immediate_ts, 7)
    if transaction_length is None:
        return out
    out += packed_int(transaction_length)
    if immediate_version is None:
        return out
    if original_version is not None and original_version != immediate_version:
        out += u(immediate_version | 1 << 31, 4) + u(original_version, 4)
    else:
        out += u(immediate_version, 4)
    return out if ticket is None else out + u(ticket, 8)


def gtid_tagged(sid: str, gno: int, tag: str, *, flags: int = 0, last_committed: int = 0, sequence_number: int = 1,
                immediate_ts: int = 0, original_ts: int | None = None, transaction_length: int = 0,
                immediate_version: int = 80400, original_version: int | None = None,
                ticket: int | None = None, unknown_fields: bytes = b"", last_non_ignorable: int | None = None) -> bytes:
    """GTID_TAGGED_LOG_EVENT as the MySQL serialization library writes it."""
    fields = [
        (0, varlen_uint(flags)),
        (1, b"".join(varlen_uint(b) for b in _uuid.UUID(sid).bytes)),
        (2, varlen_int(gno)),
        (3, varlen_uint(len(tag.encode())) + tag.encode()),
        (4, varlen_int(last_committed)),
        (5, varlen_int(sequence_number)),
        (6, varlen_uint(immediate_ts)),
    ]
    if original_ts is not None and original_ts != immediate_ts:
        fields.append((7, varlen_uint(original_ts)))
    fields += [(8, varlen_uint(transaction_length)), (9, varlen_uint(immediate_version))]
    if original_version is not None and original_version != immediate_version:
        fields.append((10, varlen_uint(original_version)))
    if ticket is not None:
        fields.append((11, varlen_uint(ticket)))
    body = b"".join(varlen_uint(fid) + value for fid, value in fields) + unknown_fields
    lnif = varlen_uint(fields[-1][0] + 1 if last_non_ignorable is None else last_non_ignorable)
    version = varlen_uint(1)
    size = len(version) + 1 + len(lnif) + len(body)
    while len(version) + len(varlen_uint(size)) + len(lnif) + len(body) != size:
        size = len(version) + len(varlen_uint(size)) + len(lnif) + len(body)
    return version + varlen_uint(size) + lnif + body


def previous_gtids(sids, *, tagged: bool = False) -> bytes:
    """``sids``: [(uuid, tag or None, [(start, end_exclusive), ...]), ...]."""
    n = len(sids)
    out = u((1 << 56) | (n << 8) | 1 if tagged else n, 8)
    for sid, tag, intervals in sids:
        out += _uuid.UUID(sid).bytes
        if tagged:
            t = (tag or "").encode()
            out += varlen_uint(len(t)) + t
        out += u(len(intervals), 8) + b"".join(struct.pack("<qq", a, b) for a, b in intervals)
    return out


def transaction_context(server_uuid: str, thread_id: int, gtid_specified: bool, snapshot: bytes, write_set, read_set) -> bytes:
    su = server_uuid.encode()
    ph = bytes([len(su)]) + u(thread_id, 4) + bytes([gtid_specified]) + u(len(snapshot), 4) + u(len(write_set), 4) + u(len(read_set), 4)
    sets = b"".join(u(len(s), 2) + s.encode() for s in list(write_set) + list(read_set))
    return ph + su + snapshot + sets


def view_change(view_id: str, seq_number: int, cert: dict[str, str]) -> bytes:
    out = view_id.encode().ljust(40, b"\0") + u(seq_number, 8) + u(len(cert), 4)
    for k, v in cert.items():
        out += u(len(k), 2) + k.encode() + u(len(v.encode()), 4) + v.encode()
    return out


def inner_event(type_code: int, data: bytes, *, timestamp: int = 1700000000, server_id: int = 1,
                next_pos: int = 0, flags: int = 0) -> bytes:
    """A complete event as stored inside a TRANSACTION_PAYLOAD (no checksum)."""
    return EVENT_HEADER.pack(timestamp, int(type_code), server_id, COMMON_HEADER_LEN + len(data), next_pos, flags) + data


def transaction_payload(events: bytes, *, compression: int = 0, declared_uncompressed: int | None = None,
                        extra_fields: bytes = b"") -> bytes:
    """TRANSACTION_PAYLOAD data around the concatenated inner ``events``."""
    if compression == 0:
        import zstandard

        payload = zstandard.ZstdCompressor().compress(events)
    else:
        payload = events

    def field(t, v):
        return packed_int(t) + packed_int(len(packed_int(v))) + packed_int(v)

    head = field(2, compression)
    if compression != 255:
        head += field(3, len(events) if declared_uncompressed is None else declared_uncompressed)
    head += extra_fields + field(1, len(payload)) + packed_int(0)
    return head + payload


# ----------------------------------------------------------------------------- MariaDB

def annotate_rows(text: str) -> bytes:
    return text.encode()


def binlog_checkpoint(name: str) -> bytes:
    return u(len(name), 4) + name.encode()


def maria_gtid(seq_no: int, domain_id: int, flags: int, *, commit_id: int | None = None,
               xa: tuple[int, bytes, bytes] | None = None, flags_extra: int | None = None,
               extra_engines: int | None = None, sa_seq_no: int | None = None) -> bytes:
    """Gtid_log_event::write: the 19-byte post-header, zero padded unless the
    commit id (which makes the event 2 bytes longer) or an xid follows."""
    out = u(seq_no, 8) + u(domain_id, 4) + bytes([flags])
    if commit_id is not None:
        out += u(commit_id, 8)
    if xa is not None:
        fid, gtrid, bqual = xa
        out += u(fid, 4) + bytes([len(gtrid), len(bqual)]) + gtrid + bqual
    if flags_extra is not None:
        out += bytes([flags_extra])
        if extra_engines is not None:
            out += bytes([extra_engines])
        if sa_seq_no is not None:
            out += u(sa_seq_no, 8)
    return out.ljust(19, b"\0")


def gtid_list(gtids, flags: int = 0) -> bytes:
    return u(len(gtids) | flags << 28, 4) + b"".join(struct.pack("<IIQ", *g) for g in gtids)


def start_encryption(scheme: int, key_version: int, nonce: bytes) -> bytes:
    return bytes([scheme]) + u(key_version, 4) + nonce


# ----------------------------------------------------------------------------- whole files

def fde_data(f: FormatDescription) -> bytes:
    """FORMAT_DESCRIPTION data with the checksum-algorithm byte (the CRC is added by :func:`binlog_file`)."""
    return (
        u(f.binlog_version, 2) + f.server_version.encode().ljust(50, b"\0") + u(f.create_timestamp, 4)
        + bytes([f.header_length]) + f.post_header_lengths + bytes([f.checksum_alg])
    )


def binlog_file(events, f: FormatDescription | None = None, *, server_id: int = 1, timestamp: int = 1700000000) -> bytes:
    """A binlog file: magic, FORMAT_DESCRIPTION of ``f``, then ``events`` (``(type, data)`` or
    ``(type, data, flags)``), each with a CRC32 when ``f`` says so."""
    f = f or fmt()
    crc = f.checksum_alg == 1
    out = bytearray(BINLOG_MAGIC)
    for item in [(EventType.FORMAT_DESCRIPTION, fde_data(f))] + list(events):
        code, data, flags = (item + (0,))[:3] if len(item) == 2 else item
        length = COMMON_HEADER_LEN + len(data) + 4 * (crc or code == EventType.FORMAT_DESCRIPTION)
        ev = EVENT_HEADER.pack(timestamp, int(code), server_id, length, len(out) + length, flags) + data
        if crc or code == EventType.FORMAT_DESCRIPTION:
            ev += u(zlib.crc32(ev), 4)
        out += ev
    return bytes(out)
