"""Framing: magic, format description, checksums, event boundaries, truncation."""
from __future__ import annotations

import zlib
from pathlib import Path

import event_builders as eb
import pytest

from pipelines.binlog.constants import ChecksumAlg, EventType
from pipelines.binlog.errors import ChecksumMismatch, CorruptEvent, NotABinlog, TruncatedEvent
from pipelines.binlog.framing import EVENT_HEADER, BinlogFile
from pipelines.binlog.layout import Layout


def _fde(version: str = "10.11.19-MariaDB-log", checksum: bool = True, in_use: bool = False) -> bytes:
    post = bytes([0, 0x38, 0x0D, 0, 8, 0, 0x12, 0, 4, 4, 4, 4, 0x12, 0, 0, 0xD8, 0])
    body = (4).to_bytes(2, "little") + version.encode().ljust(50, b"\0") + (0).to_bytes(4, "little") + bytes([19]) + post
    trailer = bytes([ChecksumAlg.CRC32 if checksum else ChecksumAlg.OFF])
    length = 19 + len(body) + 1 + 4
    flags = 1 if in_use else 0
    head = EVENT_HEADER.pack(1700000000, EventType.FORMAT_DESCRIPTION, 1, length, 4 + length, 0)
    ev = head + body + trailer
    crc = zlib.crc32(ev) if checksum else 0  # computed with the in-use flag clear
    ev = EVENT_HEADER.pack(1700000000, EventType.FORMAT_DESCRIPTION, 1, length, 4 + length, flags) + body + trailer
    return ev + crc.to_bytes(4, "little")


def _event(pos: int, code: int, body: bytes, checksum: bool = True) -> bytes:
    length = 19 + len(body) + (4 if checksum else 0)
    ev = EVENT_HEADER.pack(1700000001, code, 1, length, pos + length, 0) + body
    return ev + (zlib.crc32(ev).to_bytes(4, "little") if checksum else b"")


def _file(checksum: bool = True, n: int = 3) -> bytes:
    out = b"\xfebin" + _fde(checksum=checksum)
    for i in range(n):
        out += _event(len(out), EventType.XID, (1000 + i).to_bytes(8, "little"), checksum)
    return out


def test_layout_declares_offsets_once():
    q = Layout("thread_id:I exec_time:I db_len:B error_code:H status_vars_len:H")
    assert q.size == 13
    rec = q.unpack(q.pack(7, 1, 3, 0, 9))
    assert (rec.thread_id, rec.db_len, rec.status_vars_len) == (7, 3, 9)
    wide = Layout("table_id:u6 flags:H")
    assert wide.unpack(wide.pack(2**40 + 5, 1)).table_id == 2**40 + 5
    with pytest.raises(TruncatedEvent) as e:
        q.unpack(b"\0" * 5)
    assert (e.value.need, e.value.got) == (13, 5)


def test_reads_events_and_checksum_setting():
    data = _file()
    with BinlogFile(data, name="mem.000001") as f:
        assert f.format.checksum_alg == ChecksumAlg.CRC32
        assert f.format.flavor == "mariadb"
        evs = list(f.events())
    assert [e.header.type_code for e in evs] == [15, 16, 16, 16]
    assert bytes(evs[1].data) == (1000).to_bytes(8, "little")  # checksum stripped
    assert evs[-1].header.end_pos == len(data)


def test_format_description_crc_ignores_in_use_flag():
    data = b"\xfebin" + _fde(in_use=True)
    with BinlogFile(data) as f:
        assert f.format.has_checksum


def test_empty_and_foreign_files_are_rejected(tmp_path: Path):
    empty = tmp_path / "empty.000001"
    empty.write_bytes(b"")
    with pytest.raises(NotABinlog, match="empty.000001: offset 0: empty file"):
        BinlogFile(empty)
    text = tmp_path / "notes.txt"
    text.write_bytes(b"---- hello\n")
    with pytest.raises(NotABinlog, match=r"notes.txt: offset 0: not a binlog: starts with 2d 2d 2d 2d"):
        BinlogFile(text)


def test_checksum_mismatch_names_file_and_offset():
    data = bytearray(_file())
    second = 4 + len(_fde()) + 19 + 8 + 4  # start of the 2nd XID
    data[second + 20] ^= 0x01  # flip a body byte
    with BinlogFile(bytes(data), name="bad.000003") as f:
        it = f.events()
        next(it), next(it)
        with pytest.raises(ChecksumMismatch) as e:
            next(it)
    assert e.value.offset == second and e.value.file == "bad.000003"
    assert f"bad.000003: offset {second}: CRC32 mismatch" in str(e.value)


def test_without_checksums_a_damaged_length_is_caught_not_looped():
    data = bytearray(_file(checksum=False))
    second = 4 + len(_fde(checksum=False)) + 19 + 8
    data[second + 9] = 0x7F  # event_length byte: now far past the end
    with BinlogFile(bytes(data)) as f:
        with pytest.raises(TruncatedEvent) as e:
            list(f.events())
    assert e.value.offset == second and e.value.need > e.value.got
    data[second + 9] = 20  # shorter than header + body, still inside the file
    with BinlogFile(bytes(data)) as f:
        with pytest.raises(CorruptEvent) as e:
            list(f.events())
    assert e.value.offset == second


def test_every_prefix_yields_complete_events_then_one_truncation():
    data = _file()
    ends = []
    with BinlogFile(data) as f:
        ends = [e.header.end_pos for e in f.events()]
    for cut in range(ends[0] + 1, len(data)):
        got = []
        with BinlogFile(data[:cut]) as f:
            try:
                for e in f.events():
                    got.append(e.header.end_pos)
            except TruncatedEvent as err:
                assert err.offset == (got[-1] if got else 4)
            else:
                assert cut in ends
        assert got == [e for e in ends if e <= cut]


def test_corpus_files_frame_cleanly(corpus_dir):
    files = sorted((corpus_dir / "mariadb-10.11" / "binlogs").glob("binlog.0000??"))
    assert files
    for path in files:
        with BinlogFile(path) as f:
            n = sum(1 for _ in f.events())
            assert n > 0 and f.format.server_version.startswith("10.11.19")


def test_encrypted_binlog_stops_with_a_clear_error(corpus_dir):
    from pipelines.binlog.errors import UnsupportedType

    path = corpus_dir / "mariadb-10.11-encrypted" / "binlog.000002"
    seen = []
    with BinlogFile(path) as f:
        with pytest.raises(UnsupportedType, match="encrypted from offset") as e:
            for raw in f.events():
                seen.append(raw.header.type_code)
    assert EventType.MARIA_START_ENCRYPTION in seen
    assert e.value.offset is not None and str(path) in str(e.value)


def _with_positions_of_another_file(data: bytes, shift: int) -> bytes:
    """Every event after the FORMAT_DESCRIPTION with a next position ``shift`` bytes away, as a
    relay log keeps its source's positions (CRCs are left alone: read without verifying)."""
    from binlog_surgery import NEXT_POS_FIELD, events, set_u32

    for e in events(data)[1:]:
        data = set_u32(data, e.pos + NEXT_POS_FIELD, e.end + shift)
    return data


@pytest.mark.parametrize("shift", [-139, 5000])
def test_positions_of_another_file_are_information_not_damage(shift):
    # a MySQL 8.0.17 relay log read with --no-verify stopped at "event of type 34 ... next event is
    # at 232"; MySQL 5.0/5.1 relay logs likewise. Events are framed by their length.
    data = eb.binlog_file([(EventType.QUERY, eb.query("BEGIN")), (EventType.XID, eb.xid(7)),
                           (EventType.QUERY, eb.query("COMMIT"))], eb.fmt(checksum_alg=0))
    relay = _with_positions_of_another_file(data, shift)
    with BinlogFile(relay, verify_checksums=False) as bf:
        got = [(r.header.pos, r.header.end_pos, r.header.next_pos) for r in bf.events()]
        assert bf.foreign_positions_from == got[1][0]
    with BinlogFile(data) as bf:
        want = [(r.header.pos, r.header.end_pos) for r in bf.events()]
        assert bf.foreign_positions_from is None
    assert [(p, e) for p, e, _n in got] == want  # offsets are the file's own
    assert [n for _p, _e, n in got][1:] == [e + shift for _p, e in want][1:]


def test_a_damaged_length_is_still_caught_where_no_event_starts():
    data = eb.binlog_file([(EventType.QUERY, eb.query("BEGIN")), (EventType.XID, eb.xid(7)),
                           (EventType.QUERY, eb.query("COMMIT"))], eb.fmt(checksum_alg=0))
    with BinlogFile(data) as bf:
        second = [r.header for r in bf.events()][1]
    from binlog_surgery import LENGTH_FIELD, set_u32

    bad = set_u32(data, second.pos + LENGTH_FIELD, second.end_pos - second.pos + 3)
    with BinlogFile(bad) as bf, pytest.raises(CorruptEvent, match="where no event starts"):
        list(bf.events())
