"""Date and time columns, as row images store them.

Every decoder is ``decode_x(buf, off[, fsp]) -> (value, new_off)``:

=====================  ======  =============================================
type (code)            bytes   value
=====================  ======  =============================================
DATE/NEWDATE (10/14)   3       ``date``
TIME (11)              3       ``timedelta`` (``[-]HHMMSS`` as a signed int)
TIMESTAMP (7)          4       ``datetime`` UTC (little-endian epoch seconds)
DATETIME (12)          8       ``datetime`` (``YYYYMMDDhhmmss`` as an int)
YEAR (13)              1       ``int`` (0 stays 0, else 1900 + byte)
TIME2 (19)             3+f     ``timedelta`` (MySQL 5.6 packed, big-endian)
DATETIME2 (18)         5+f     ``datetime``
TIMESTAMP2 (17)        4+f     ``datetime`` UTC
=====================  ======  =============================================

``f`` is ``(fsp + 1) // 2``. MariaDB's 5.3 "hires" formats (``mysql56_temporal_format
=OFF``: ``Field_time_hires``, ``Field_datetime_hires``, ``Field_timestamp_hires``) are
logged with the *old* type codes 11/12/7 and **no** table-map metadata, so their
precision has to come from the schema: :func:`decode_time_hires` and friends take it
as ``dec`` (1..6).

Zero and invalid dates (month or day 0, ``2020-02-30``, year 0) are not errors: the
value is MySQL's text for them, with the column's fractional digits, e.g.
``'0000-00-00'``, ``'0000-00-00 00:00:00.000'``, ``'2020-00-15 10:00:00.500'``.
A TIMESTAMP of 0 is ``'0000-00-00 00:00:00'``.
"""
from __future__ import annotations

import datetime as _dt
from typing import Callable

from .errors import CorruptEvent, TruncatedEvent

UTC = _dt.timezone.utc
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=UTC)
_date = _dt.date
_datetime = _dt.datetime
_timedelta = _dt.timedelta

DATETIMEF_INT_OFS = 0x8000000000
TIMEF_INT_OFS = 0x800000
TIMEF_OFS = 0x800000000000
TIME_MAX_VALUE_SECONDS = 838 * 3600 + 59 * 60 + 59

FRAC_BYTES = (0, 1, 1, 2, 2, 3, 3)  # MySQL 5.6 formats, by fsp
TIME_HIRES_BYTES = (3, 4, 4, 5, 5, 5, 6)  # MariaDB 5.3, by decimals
DATETIME_HIRES_BYTES = (5, 6, 6, 7, 7, 7, 8)
SEC_PART_BYTES = (0, 1, 1, 2, 2, 3, 3)


def _need(buf, off: int, n: int, what: str) -> None:
    have = len(buf) - off
    if have < n:
        raise TruncatedEvent(n, max(have, 0), what)


def _check_fsp(fsp: int, what: str) -> None:
    if not 0 <= fsp <= 6:
        raise CorruptEvent(f"{what} with {fsp} fractional digits (0..6 allowed)")


def time2_size(fsp: int) -> int:
    return 3 + FRAC_BYTES[fsp]


def datetime2_size(fsp: int) -> int:
    return 5 + FRAC_BYTES[fsp]


def timestamp2_size(fsp: int) -> int:
    return 4 + FRAC_BYTES[fsp]


def time_hires_size(dec: int) -> int:
    return TIME_HIRES_BYTES[dec]


def datetime_hires_size(dec: int) -> int:
    return DATETIME_HIRES_BYTES[dec]


def timestamp_hires_size(dec: int) -> int:
    return 4 + SEC_PART_BYTES[dec]


# -- text for values Python cannot hold ------------------------------------------

def _frac_text(usec: int, fsp: int) -> str:
    return "." + f"{usec:06d}"[:fsp] if fsp else ""


def date_text(year: int, month: int, day: int) -> str:
    return f"{year:04d}-{month:02d}-{day:02d}"


def datetime_text(year, month, day, hour, minute, second, usec, fsp) -> str:
    return (
        f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
        + _frac_text(usec, fsp)
    )


def zero_datetime_text(fsp: int) -> str:
    return "0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else "")


def make_date(year: int, month: int, day: int):
    """``date``, or MySQL's text when Python cannot represent it (zero/invalid)."""
    try:
        return _date(year, month, day)
    except ValueError:
        return date_text(year, month, day)


def make_datetime(year, month, day, hour, minute, second, usec, fsp, tz=None):
    """``datetime``, or MySQL's text for zero/invalid dates (``usec`` must be valid)."""
    try:
        return _datetime(year, month, day, hour, minute, second, usec, tz)
    except ValueError:
        if not 0 <= usec <= 999_999:
            raise CorruptEvent(f"date and time with {usec} microseconds") from None
        return datetime_text(year, month, day, hour, minute, second, usec, fsp)


def make_time(neg: bool, hours: int, minutes: int, seconds: int, usec: int) -> _dt.timedelta:
    td = _timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=usec)
    return -td if neg else td


# -- DATE / NEWDATE, YEAR -----------------------------------------------------------

def date_from_int(v: int):
    """DATE value of the 3-byte integer ``year << 9 | month << 5 | day``."""
    try:
        return _date(v >> 9, v >> 5 & 15, v & 31)
    except ValueError:
        return date_text(v >> 9, v >> 5 & 15, v & 31)


def decode_date(buf, off: int, meta=0):
    _need(buf, off, 3, "DATE")
    return date_from_int(int.from_bytes(buf[off:off + 3], "little")), off + 3


def year_from_int(v: int) -> int:
    return v + 1900 if v else 0


def decode_year(buf, off: int, meta=0):
    _need(buf, off, 1, "YEAR")
    return year_from_int(buf[off]), off + 1


# -- old TIME / DATETIME / TIMESTAMP ----------------------------------------------

def time_from_int(v: int) -> _dt.timedelta:
    """Old TIME: the signed integer ``[-]HHMMSS``."""
    neg = v < 0
    v = -v if neg else v
    return make_time(neg, v // 10000, v // 100 % 100, v % 100, 0)


def decode_time(buf, off: int, meta=0):
    _need(buf, off, 3, "TIME")
    return time_from_int(int.from_bytes(buf[off:off + 3], "little", signed=True)), off + 3


def datetime_from_int(v: int):
    """Old DATETIME: the integer ``YYYYMMDDhhmmss``."""
    if v == 0:
        return zero_datetime_text(0)
    d, t = divmod(v, 1_000_000)
    return make_datetime(d // 10000, d // 100 % 100, d % 100, t // 10000, t // 100 % 100, t % 100, 0, 0)


def decode_datetime(buf, off: int, meta=0):
    _need(buf, off, 8, "DATETIME")
    return datetime_from_int(int.from_bytes(buf[off:off + 8], "little")), off + 8


def timestamp_value(seconds: int, usec: int, fsp: int):
    """TIMESTAMP value: epoch seconds + microseconds, 0 seconds = the zero timestamp."""
    if seconds == 0:
        return zero_datetime_text(fsp)
    if not 0 <= usec <= 999_999:
        raise CorruptEvent(f"TIMESTAMP with {usec} microseconds")
    return _EPOCH + _timedelta(seconds=seconds, microseconds=usec)


def decode_timestamp(buf, off: int, meta=0):
    _need(buf, off, 4, "TIMESTAMP")
    return timestamp_value(int.from_bytes(buf[off:off + 4], "little"), 0, 0), off + 4


# -- MySQL 5.6 TIME2 / DATETIME2 / TIMESTAMP2 -------------------------------------

def time2_packed(b: bytes, fsp: int) -> int:
    """``my_time_packed_from_binary``: the packed ``hms << 24 | usec`` (negative for
    negative times) of a TIME2 value ``b`` (exactly :func:`time2_size` bytes)."""
    intpart = int.from_bytes(b[0:3], "big") - TIMEF_INT_OFS
    if fsp == 0:
        return intpart << 24
    if fsp <= 2:
        frac = b[3]
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x100
        return (intpart << 24) + frac * 10000
    if fsp <= 4:
        frac = int.from_bytes(b[3:5], "big")
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x10000
        return (intpart << 24) + frac * 100
    return int.from_bytes(b[0:6], "big") - TIMEF_OFS


def time_from_packed(packed: int) -> _dt.timedelta:
    """``TIME_from_longlong_time_packed`` as a timedelta."""
    neg = packed < 0
    if neg:
        packed = -packed
    hms = packed >> 24
    usec = packed & 0xFFFFFF
    if usec > 999_999:
        raise CorruptEvent(f"TIME with {usec} microseconds")
    return make_time(neg, (hms >> 12) & 0x3FF, (hms >> 6) & 0x3F, hms & 0x3F, usec)


def decode_time2(buf, off: int, fsp: int):
    _check_fsp(fsp, "TIME2")
    n = time2_size(fsp)
    _need(buf, off, n, f"TIME({fsp})")
    return time_from_packed(time2_packed(bytes(buf[off:off + n]), fsp)), off + n


def datetime2_fields(b: bytes, fsp: int) -> tuple[int, int, int, int, int, int, int]:
    """(year, month, day, hour, minute, second, usec) of a DATETIME2 value."""
    intpart = int.from_bytes(b[0:5], "big") - DATETIMEF_INT_OFS
    if fsp == 0:
        frac = 0
    elif fsp <= 2:
        frac = int.from_bytes(b[5:6], "big", signed=True) * 10000
    elif fsp <= 4:
        frac = int.from_bytes(b[5:7], "big", signed=True) * 100
    else:
        frac = int.from_bytes(b[5:8], "big", signed=True)
    packed = (intpart << 24) + frac
    if packed < 0:
        raise CorruptEvent(f"negative DATETIME({fsp}) {b.hex()}")
    usec = packed & 0xFFFFFF
    if usec > 999_999:
        raise CorruptEvent(f"DATETIME({fsp}) with {usec} microseconds")
    ymdhms = packed >> 24
    ymd = ymdhms >> 17
    ym = ymd >> 5
    hms = ymdhms & 0x1FFFF
    return ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, usec


def decode_datetime2(buf, off: int, fsp: int):
    _check_fsp(fsp, "DATETIME2")
    n = datetime2_size(fsp)
    _need(buf, off, n, f"DATETIME({fsp})")
    y, mo, d, h, mi, s, us = datetime2_fields(bytes(buf[off:off + n]), fsp)
    return make_datetime(y, mo, d, h, mi, s, us, fsp), off + n


def timestamp2_fields(b: bytes, fsp: int) -> tuple[int, int]:
    seconds = int.from_bytes(b[0:4], "big")
    if fsp == 0:
        usec = 0
    elif fsp <= 2:
        usec = b[4] * 10000
    elif fsp <= 4:
        usec = int.from_bytes(b[4:6], "big", signed=True) * 100
    else:
        usec = int.from_bytes(b[4:7], "big", signed=True)
    return seconds, usec


def decode_timestamp2(buf, off: int, fsp: int):
    _check_fsp(fsp, "TIMESTAMP2")
    n = timestamp2_size(fsp)
    _need(buf, off, n, f"TIMESTAMP({fsp})")
    seconds, usec = timestamp2_fields(bytes(buf[off:off + n]), fsp)
    return timestamp_value(seconds, usec, fsp), off + n


# -- MariaDB 5.3 hires TIME(n) / DATETIME(n) / TIMESTAMP(n) ------------------------

def _unpack_time(packed: int) -> tuple[int, int, int, int, int, int, int]:
    """MariaDB ``unpack_time``: (year, month, day, hour, minute, second, usec) of a
    ``pack_time`` value (non-negative)."""
    packed, usec = divmod(packed, 1_000_000)
    packed, second = divmod(packed, 60)
    packed, minute = divmod(packed, 60)
    packed, hour = divmod(packed, 24)
    packed, day = divmod(packed, 32)
    year, month = divmod(packed, 13)
    return year, month, day, hour, minute, second, usec


def _check_dec(dec: int, what: str) -> None:
    if not 1 <= dec <= 6:
        raise CorruptEvent(f"MariaDB 5.3 {what} needs 1..6 decimals, got {dec}")


def decode_time_hires(buf, off: int, dec: int):
    """MariaDB ``Field_time_hires``: ``sec_part_shift(pack_time(t), dec) + zero_point``
    as a big-endian integer of ``TIME_HIRES_BYTES[dec]`` bytes."""
    _check_dec(dec, "TIME")
    n = TIME_HIRES_BYTES[dec]
    _need(buf, off, n, f"TIME({dec}) (MariaDB 5.3)")
    zero_point = (TIME_MAX_VALUE_SECONDS + 1) * 1_000_000 // 10 ** (6 - dec)
    packed = (int.from_bytes(buf[off:off + n], "big") - zero_point) * 10 ** (6 - dec)
    neg = packed < 0
    year, month, day, hour, minute, second, usec = _unpack_time(-packed if neg else packed)
    if year:
        raise CorruptEvent(f"MariaDB 5.3 TIME({dec}) out of range: {bytes(buf[off:off + n]).hex()}")
    return make_time(neg, (month * 32 + day) * 24 + hour, minute, second, usec), off + n


def decode_datetime_hires(buf, off: int, dec: int):
    """MariaDB ``Field_datetime_hires``: ``sec_part_shift(pack_time(t), dec)`` as a
    big-endian integer of ``DATETIME_HIRES_BYTES[dec]`` bytes."""
    _check_dec(dec, "DATETIME")
    n = DATETIME_HIRES_BYTES[dec]
    _need(buf, off, n, f"DATETIME({dec}) (MariaDB 5.3)")
    packed = int.from_bytes(buf[off:off + n], "big") * 10 ** (6 - dec)
    y, mo, d, h, mi, s, us = _unpack_time(packed)
    if packed == 0:
        return zero_datetime_text(dec), off + n
    return make_datetime(y, mo, d, h, mi, s, us, dec), off + n


def decode_timestamp_hires(buf, off: int, dec: int):
    """MariaDB ``Field_timestamp_hires``: 4-byte big-endian epoch seconds, then
    ``sec_part_shift(usec, dec)`` big-endian in ``SEC_PART_BYTES[dec]`` bytes."""
    _check_dec(dec, "TIMESTAMP")
    n = timestamp_hires_size(dec)
    _need(buf, off, n, f"TIMESTAMP({dec}) (MariaDB 5.3)")
    seconds = int.from_bytes(buf[off:off + 4], "big")
    usec = int.from_bytes(buf[off + 4:off + n], "big") * 10 ** (6 - dec)
    return timestamp_value(seconds, usec, dec), off + n


# -- specialised readers for the compiled row decoders -------------------------------

def datetime2_reader(fsp: int) -> Callable[[bytes, int], object]:
    """``read(buf, off) -> value`` for DATETIME2(fsp) (lengths checked by the caller)."""
    n = datetime2_size(fsp)
    if fsp == 0:
        def read(buf, off):
            v = int.from_bytes(buf[off:off + 5], "big") - DATETIMEF_INT_OFS
            if v < 0:
                raise CorruptEvent(f"negative DATETIME {bytes(buf[off:off + 5]).hex()}")
            ymd = v >> 17
            ym = ymd >> 5
            try:
                return _datetime(ym // 13, ym % 13, ymd & 31, (v >> 12) & 31, (v >> 6) & 63, v & 63)
            except ValueError:
                return make_datetime(*datetime2_fields(bytes(buf[off:off + 5]), 0), 0)
        return read

    def read(buf, off):
        y, mo, d, h, mi, s, us = datetime2_fields(buf[off:off + n], fsp)
        try:
            return _datetime(y, mo, d, h, mi, s, us)
        except ValueError:
            return make_datetime(y, mo, d, h, mi, s, us, fsp)
    return read


def timestamp2_reader(fsp: int) -> Callable[[bytes, int], object]:
    n = timestamp2_size(fsp)
    if fsp == 0:
        def read(buf, off):
            seconds = int.from_bytes(buf[off:off + 4], "big")
            if seconds:
                return _EPOCH + _timedelta(seconds=seconds)
            return zero_datetime_text(0)
        return read

    def read(buf, off):
        seconds, usec = timestamp2_fields(buf[off:off + n], fsp)
        return timestamp_value(seconds, usec, fsp)
    return read


def time2_reader(fsp: int) -> Callable[[bytes, int], object]:
    n = time2_size(fsp)

    def read(buf, off):
        return time_from_packed(time2_packed(buf[off:off + n], fsp))
    return read


# -- inline code for the compiled row decoders ------------------------------------------

TEMPORAL_ENV = {
    "_datetime": _datetime,
    "_EPOCH": _EPOCH,
    "_td": _timedelta,
    "_fts": _datetime.fromtimestamp,
    "_UTC": UTC,
}
_FRAC_MULT = (1, 10000, 10000, 100, 100, 1, 1)


def _at(base: str, rel: int) -> str:
    return f"{base} + {rel}" if rel else base


def datetime2_lines(fsp: int, base: str, rel: int, target: str, exact: str) -> list[str]:
    """Statements decoding the DATETIME2(fsp) at ``buf[base + rel]`` into ``target``.

    Valid dates take the fast path; anything ``datetime`` rejects (zero or invalid
    dates, corrupt fractions) goes to ``exact(buf, pos)`` (:func:`datetime2_reader`),
    which returns MySQL's text or raises :class:`CorruptEvent` as the reference does.
    Needs :data:`TEMPORAL_ENV`; uses the locals ``x``, ``p``, ``d``, ``m``.
    """
    fb = FRAC_BYTES[fsp]
    pos, end = _at(base, rel), _at(base, rel + datetime2_size(fsp))
    lines = [f"x = int.from_bytes(buf[{pos}:{end}], 'big')"]
    if fb:
        lines.append(f"p = (x >> {8 * fb}) - {DATETIMEF_INT_OFS}")
        usec = f", (x & {(1 << 8 * fb) - 1}) * {_FRAC_MULT[fsp]}" if _FRAC_MULT[fsp] != 1 else f", x & {(1 << 8 * fb) - 1}"
    else:
        lines.append(f"p = x - {DATETIMEF_INT_OFS}")
        usec = ""
    lines += [
        "d = p >> 17",
        "m = d >> 5",
        "try:",
        f"    {target} = _datetime(m // 13, m % 13, d & 31, p >> 12 & 31, p >> 6 & 63, p & 63{usec})",
        "except ValueError:",
        f"    {target} = {exact}(buf, {pos})",
    ]
    return lines


def timestamp2_lines(fsp: int, base: str, rel: int, target: str, exact: str) -> list[str]:
    """Statements decoding the TIMESTAMP2(fsp) at ``buf[base + rel]`` into ``target``;
    zero timestamps and corrupt fractions go to ``exact(buf, pos)``."""
    fb = FRAC_BYTES[fsp]
    pos, end = _at(base, rel), _at(base, rel + timestamp2_size(fsp))
    lines = [f"x = int.from_bytes(buf[{pos}:{end}], 'big')"]
    if not fb:
        lines.append(f"{target} = _fts(x, _UTC) if x else {zero_datetime_text(0)!r}")
        return lines
    mult = _FRAC_MULT[fsp]
    lines += [
        f"p = x >> {8 * fb}",
        f"m = (x & {(1 << 8 * fb) - 1})" + (f" * {mult}" if mult != 1 else ""),
        f"{target} = _EPOCH + _td(0, p, m) if p and m < 1000000 else {exact}(buf, {pos})",
    ]
    return lines
