"""Temporal columns against encoders written from MySQL's ``mysys/my_time.cc``
(``my_*_packed_to_binary``) and MariaDB's ``sql/field.cc`` (5.3 hires formats)."""
from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, strategies as st

from pipelines.binlog import temporal as T
from pipelines.binlog.errors import CorruptEvent, TruncatedEvent

UTC = dt.timezone.utc


# -- encoders (MySQL / MariaDB layouts) -------------------------------------------------

def c_frac(packed: int) -> int:
    """MY_PACKED_TIME_GET_FRAC_PART with C's truncating ``%``."""
    r = abs(packed) % (1 << 24)
    return -r if packed < 0 else r


def c_div(a: int, b: int) -> int:
    q = abs(a) // b
    return -q if a < 0 else q


def time_packed(neg: bool, h: int, m: int, s: int, us: int) -> int:
    v = ((h << 12 | m << 6 | s) << 24) + us
    return -v if neg else v


def encode_time2(packed: int, fsp: int) -> bytes:
    intpart = packed >> 24
    frac = c_frac(packed)
    if fsp >= 5:
        return (packed + T.TIMEF_OFS).to_bytes(6, "big")
    out = (T.TIMEF_INT_OFS + intpart).to_bytes(3, "big")
    if fsp in (1, 2):
        out += bytes([c_div(frac, 10000) & 0xFF])
    elif fsp in (3, 4):
        out += (c_div(frac, 100) & 0xFFFF).to_bytes(2, "big")
    return out


def datetime_packed(y, mo, d, h, mi, s, us) -> int:
    ymd = (y * 13 + mo) << 5 | d
    hms = h << 12 | mi << 6 | s
    return ((ymd << 17 | hms) << 24) + us


def encode_datetime2(packed: int, fsp: int) -> bytes:
    out = ((packed >> 24) + T.DATETIMEF_INT_OFS).to_bytes(5, "big")
    frac = c_frac(packed)
    if fsp in (1, 2):
        out += bytes([c_div(frac, 10000) & 0xFF])
    elif fsp in (3, 4):
        out += (c_div(frac, 100) & 0xFFFF).to_bytes(2, "big")
    elif fsp in (5, 6):
        out += (frac & 0xFFFFFF).to_bytes(3, "big")
    return out


def encode_timestamp2(sec: int, us: int, fsp: int) -> bytes:
    out = sec.to_bytes(4, "big")
    if fsp in (1, 2):
        out += bytes([us // 10000])
    elif fsp in (3, 4):
        out += (us // 100).to_bytes(2, "big")
    elif fsp in (5, 6):
        out += us.to_bytes(3, "big")
    return out


def maria_pack_time(neg, y, mo, d, h, mi, s, us) -> int:
    v = ((((((y * 13 + mo) * 32 + d) * 24 + h) * 60 + mi) * 60 + s) * 1_000_000 + us)
    return -v if neg else v


def encode_time_hires(neg, h, mi, s, us, dec) -> bytes:
    zero_point = (T.TIME_MAX_VALUE_SECONDS + 1) * 1_000_000 // 10 ** (6 - dec)
    packed = maria_pack_time(neg, 0, 0, h // 24, h % 24, mi, s, us)
    shifted = c_div(packed, 10 ** (6 - dec)) + zero_point
    return shifted.to_bytes(T.TIME_HIRES_BYTES[dec], "big")


def encode_datetime_hires(y, mo, d, h, mi, s, us, dec) -> bytes:
    packed = maria_pack_time(False, y, mo, d, h, mi, s, us) // 10 ** (6 - dec)
    return packed.to_bytes(T.DATETIME_HIRES_BYTES[dec], "big")


def encode_timestamp_hires(sec, us, dec) -> bytes:
    return sec.to_bytes(4, "big") + (us // 10 ** (6 - dec)).to_bytes(T.SEC_PART_BYTES[dec], "big")


def td(neg=False, h=0, m=0, s=0, us=0) -> dt.timedelta:
    v = dt.timedelta(hours=h, minutes=m, seconds=s, microseconds=us)
    return -v if neg else v


# -- old fixed formats --------------------------------------------------------------------

def test_date_and_zero_dates():
    enc = lambda y, m, d: (y << 9 | m << 5 | d).to_bytes(3, "little")  # noqa: E731
    assert T.decode_date(enc(2024, 2, 29), 0) == (dt.date(2024, 2, 29), 3)
    assert T.decode_date(b"\0\0\0", 0) == ("0000-00-00", 3)
    assert T.decode_date(enc(2020, 2, 30), 0)[0] == "2020-02-30"
    assert T.decode_date(enc(2020, 0, 15), 0)[0] == "2020-00-15"
    assert T.decode_date(enc(0, 1, 1), 0)[0] == "0000-01-01"
    with pytest.raises(TruncatedEvent):
        T.decode_date(b"\1\2", 0)


def test_year():
    assert T.decode_year(b"\x00", 0) == (0, 1)
    assert T.decode_year(b"\x7c", 0) == (2024, 1)
    assert T.decode_year(b"\xff", 0) == (2155, 1)


def test_old_time_is_signed_hhmmss():
    enc = lambda v: v.to_bytes(3, "little", signed=True)  # noqa: E731
    assert T.decode_time(enc(-8385959), 0) == (td(True, 838, 59, 59), 3)
    assert T.decode_time(bytes.fromhex("590a80"), 0)[0] == td(True, 838, 59, 59)  # corpus bytes
    assert T.decode_time(enc(8385959), 0)[0] == td(False, 838, 59, 59)
    assert T.decode_time(b"\xff\xff\xff", 0)[0] == td(True, 0, 0, 1)  # '-00:00:01'
    assert T.decode_time(enc(123456), 0)[0] == td(False, 12, 34, 56)


def test_old_datetime_and_timestamp():
    assert T.decode_datetime((20240229123456).to_bytes(8, "little"), 0) == (dt.datetime(2024, 2, 29, 12, 34, 56), 8)
    assert T.decode_datetime(bytes(8), 0)[0] == "0000-00-00 00:00:00"
    assert T.decode_datetime((20200015100000).to_bytes(8, "little"), 0)[0] == "2020-00-15 10:00:00"
    assert T.decode_timestamp((1).to_bytes(4, "little"), 0) == (dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), 4)
    assert T.decode_timestamp(bytes(4), 0)[0] == "0000-00-00 00:00:00"


# -- MySQL 5.6 formats -------------------------------------------------------------------

@pytest.mark.parametrize(
    "neg,h,m,s,us,fsp,text",
    [
        (True, 0, 0, 0, 500000, 1, "-00:00:00.5"),
        (True, 838, 59, 59, 0, 6, "-838:59:59.000000"),
        (True, 0, 0, 0, 1, 6, "-00:00:00.000001"),
        (False, 838, 59, 59, 0, 0, "838:59:59"),
        (True, 12, 34, 56, 789000, 3, "-12:34:56.789"),
        (False, 1, 2, 3, 450000, 2, "01:02:03.45"),
        (True, 1, 2, 3, 450000, 2, "-01:02:03.45"),
        (True, 1, 0, 0, 120000, 4, "-01:00:00.1200"),
        (True, 0, 0, 1, 0, 0, "-00:00:01"),
        (False, 0, 0, 0, 0, 5, "00:00:00.00000"),
    ],
)
def test_time2_including_negative_fractions(neg, h, m, s, us, fsp, text):
    raw = encode_time2(time_packed(neg, h, m, s, us), fsp)
    assert len(raw) == T.time2_size(fsp)
    value, off = T.decode_time2(b"\xaa" + raw, 1, fsp)
    assert off == 1 + len(raw)
    assert value == td(neg, h, m, s, us)
    assert T.time2_reader(fsp)(raw, 0) == value


def test_time2_known_bytes():
    # '-00:00:00.5' TIME(1): int part -1 -> 7f ff ff, fraction byte -50 -> ce
    assert encode_time2(time_packed(True, 0, 0, 0, 500000), 1) == bytes.fromhex("7fffffce")
    assert T.decode_time2(bytes.fromhex("7fffffce"), 0, 1)[0] == dt.timedelta(microseconds=-500000)
    assert T.decode_time2(bytes.fromhex("800000"), 0, 0)[0] == dt.timedelta(0)


@pytest.mark.parametrize(
    "fields,fsp,expected",
    [
        ((2024, 2, 29, 23, 59, 59, 990000), 2, dt.datetime(2024, 2, 29, 23, 59, 59, 990000)),
        ((9999, 12, 31, 23, 59, 59, 999999), 6, dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
        ((1000, 1, 1, 0, 0, 0, 0), 0, dt.datetime(1000, 1, 1)),
        ((0, 0, 0, 0, 0, 0, 0), 0, "0000-00-00 00:00:00"),
        ((0, 0, 0, 0, 0, 0, 0), 3, "0000-00-00 00:00:00.000"),
        ((2020, 0, 15, 10, 0, 0, 500000), 3, "2020-00-15 10:00:00.500"),
        ((2020, 2, 30, 1, 2, 3, 0), 0, "2020-02-30 01:02:03"),
        ((2020, 2, 0, 1, 2, 3, 120000), 4, "2020-02-00 01:02:03.1200"),
    ],
)
def test_datetime2(fields, fsp, expected):
    raw = encode_datetime2(datetime_packed(*fields), fsp)
    assert len(raw) == T.datetime2_size(fsp)
    assert T.decode_datetime2(raw, 0, fsp) == (expected, len(raw))
    assert T.datetime2_reader(fsp)(raw, 0) == expected


def test_timestamp2_and_zero_timestamp():
    raw = encode_timestamp2(2147483647, 999900, 4)
    assert T.decode_timestamp2(raw, 0, 4) == (dt.datetime(2038, 1, 19, 3, 14, 7, 999900, tzinfo=UTC), 6)
    assert T.decode_timestamp2(encode_timestamp2(0, 0, 3), 0, 3)[0] == "0000-00-00 00:00:00.000"
    assert T.decode_timestamp2(encode_timestamp2(0, 0, 0), 0, 0)[0] == "0000-00-00 00:00:00"
    assert T.timestamp2_reader(0)(encode_timestamp2(86400, 0, 0), 0) == dt.datetime(1970, 1, 2, tzinfo=UTC)
    assert T.timestamp2_reader(6)(encode_timestamp2(1, 5, 6), 0) == dt.datetime(1970, 1, 1, 0, 0, 1, 5, tzinfo=UTC)


def test_bad_fsp_and_truncation():
    with pytest.raises(CorruptEvent):
        T.decode_time2(bytes(8), 0, 7)
    with pytest.raises(TruncatedEvent) as e:
        T.decode_datetime2(bytes(6), 0, 6)
    assert (e.value.need, e.value.got) == (8, 6)


@given(
    st.booleans(), st.integers(0, 838), st.integers(0, 59), st.integers(0, 59),
    st.integers(0, 999999), st.integers(0, 6),
)
def test_time2_property(neg, h, m, s, us, fsp):
    us = us // 10 ** (6 - fsp) * 10 ** (6 - fsp)
    raw = encode_time2(time_packed(neg, h, m, s, us), fsp)
    assert T.decode_time2(raw, 0, fsp)[0] == td(neg, h, m, s, us)


@given(st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
       st.integers(0, 6))
def test_datetime2_property(value, fsp):
    value = value.replace(microsecond=value.microsecond // 10 ** (6 - fsp) * 10 ** (6 - fsp))
    raw = encode_datetime2(datetime_packed(value.year, value.month, value.day, value.hour,
                                           value.minute, value.second, value.microsecond), fsp)
    assert T.decode_datetime2(raw, 0, fsp)[0] == value
    assert T.datetime2_reader(fsp)(raw, 0) == value


# -- MariaDB 5.3 hires formats --------------------------------------------------------------

# First row of t_oldtime in the corpus (mariadb-10.11 binlog.000017, Write_rows at 2887),
# after the null bitmap and the INT id: t0 TIME, t3 TIME(3), t6 TIME(6), dt0 DATETIME,
# dt2 DATETIME(2), dt6 DATETIME(6), ts0 TIMESTAMP, ts4 TIMESTAMP(4).
CORPUS_ROW1 = bytes.fromhex(
    "590a80" "00b15478eb" "057e7bbcf7ff" "40c3775418090000" "069df8ce93ff" "04fcee3943bfffff"
    "01000000" "7fffffff270f"
)


def test_mariadb_hires_corpus_row():
    buf, o = CORPUS_ROW1, 0
    v, o = T.decode_time(buf, o)
    assert v == td(True, 838, 59, 59)
    v, o = T.decode_time_hires(buf, o, 3)
    assert v == td(True, 12, 34, 56, 789000)
    v, o = T.decode_time_hires(buf, o, 6)
    assert v == td(False, 838, 59, 59, 999999)
    v, o = T.decode_datetime(buf, o)
    assert v == dt.datetime(1000, 1, 1)
    v, o = T.decode_datetime_hires(buf, o, 2)
    assert v == dt.datetime(2024, 2, 29, 23, 59, 59, 990000)
    v, o = T.decode_datetime_hires(buf, o, 6)
    assert v == dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
    v, o = T.decode_timestamp(buf, o)
    assert v == dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    v, o = T.decode_timestamp_hires(buf, o, 4)
    assert v == dt.datetime(2038, 1, 19, 3, 14, 7, 999900, tzinfo=UTC)
    assert o == len(buf)


@pytest.mark.parametrize(
    "neg,h,m,s,us,dec",
    [(True, 0, 0, 0, 1, 6), (True, 0, 0, 0, 1000, 3), (False, 1, 2, 3, 456000, 3),
     (True, 838, 59, 59, 0, 1), (False, 0, 0, 0, 0, 2), (True, 100, 0, 0, 500000, 5)],
)
def test_mariadb_time_hires(neg, h, m, s, us, dec):
    raw = encode_time_hires(neg, h, m, s, us, dec)
    assert T.decode_time_hires(raw, 0, dec) == (td(neg, h, m, s, us), len(raw))


def test_mariadb_datetime_timestamp_hires():
    raw = encode_datetime_hires(2001, 2, 3, 4, 5, 6, 70809, 6)
    assert T.decode_datetime_hires(raw, 0, 6)[0] == dt.datetime(2001, 2, 3, 4, 5, 6, 70809)
    assert T.decode_datetime_hires(encode_datetime_hires(0, 0, 0, 0, 0, 0, 0, 2), 0, 2)[0] == "0000-00-00 00:00:00.00"
    assert T.decode_datetime_hires(encode_datetime_hires(2020, 2, 30, 0, 0, 0, 0, 1), 0, 1)[0] == "2020-02-30 00:00:00.0"
    raw = encode_timestamp_hires(981173106, 70800, 4)
    assert T.decode_timestamp_hires(raw, 0, 4)[0] == dt.datetime(2001, 2, 3, 4, 5, 6, 70800, tzinfo=UTC)
    assert T.decode_timestamp_hires(encode_timestamp_hires(0, 0, 4), 0, 4)[0] == "0000-00-00 00:00:00.0000"
    with pytest.raises(CorruptEvent):
        T.decode_time_hires(bytes(8), 0, 0)
