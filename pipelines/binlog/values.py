"""Canonical text for decoded values: one exact, type-independent spelling,
used by the jsonl dump and by the bronze change log.

=============  ==================================================
value          text
=============  ==================================================
int            decimal digits (``-5``, ``18446744073709551615``)
Decimal        ``str(Decimal)`` without exponent (``-0.50``)
float          ``repr`` (round-trips exactly)
date           ``YYYY-MM-DD``
datetime       ``YYYY-MM-DD HH:MM:SS[.ffffff]`` (TIMESTAMP in UTC)
timedelta      MySQL TIME text ``[-]H:MM:SS[.f…]`` with ``fsp`` digits
str            itself (zero/invalid dates arrive as MySQL's text)
list (VECTOR)  JSON array text
=============  ==================================================

``bytes`` have no text form: they go in the binary slot. Text whose bytes are not valid in
its declared character set is an :class:`InvalidText`: a ``str`` (the text with U+FFFD where
the bytes did not decode) that keeps the exact bytes in ``raw``.
"""
from __future__ import annotations

import datetime as _dt
import json
from decimal import Decimal

_UTC = _dt.timezone.utc


class InvalidText(str):
    """Text whose bytes are not valid in its declared character set (old PHP applications sent
    cp1251 bytes on a utf8 connection; the server stores whatever it is sent). The string is the
    text with U+FFFD replacing what did not decode; ``raw`` holds the exact bytes.

    >>> t = decode_text(b"\\xd0\\xe5 ok", "utf-8")
    >>> str(t), t.raw, t.codec
    ('\ufffd\ufffd ok', b'\\xd0\\xe5 ok', 'utf-8')
    """

    __slots__ = ("raw", "codec")

    def __new__(cls, raw: bytes, codec: str):
        self = super().__new__(cls, raw.decode(codec, "replace"))
        self.raw, self.codec = bytes(raw), codec
        return self

    def __reduce__(self):  # pickled to and from Spark tasks
        return InvalidText, (self.raw, self.codec)


def decode_text(raw: bytes, codec: str) -> str:
    """``raw`` decoded with ``codec``; an :class:`InvalidText` where it is not valid there.

    >>> decode_text("é".encode(), "utf-8"), type(decode_text(b"\\xff", "utf-8")).__name__
    ('é', 'InvalidText')
    """
    try:
        return raw.decode(codec)
    except UnicodeDecodeError:
        return InvalidText(raw, codec)


def time_text(td: _dt.timedelta, fsp: int | None = None) -> str:
    """MySQL TIME text of a timedelta: ``-838:59:59``, ``-00:00:00.5`` (fsp=1)."""
    total_us = td.days * 86_400_000_000 + td.seconds * 1_000_000 + td.microseconds
    sign = "-" if total_us < 0 else ""
    total_us = abs(total_us)
    secs, us = divmod(total_us, 1_000_000)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    text = f"{sign}{h:02d}:{m:02d}:{s:02d}"
    if fsp is None:
        fsp = 6 if us else 0
    if fsp:
        text += "." + f"{us:06d}"[:fsp]
    return text


def datetime_text(v: _dt.datetime, fsp: int | None = None) -> str:
    if v.tzinfo is not None:
        v = (v if v.tzinfo is _UTC else v.astimezone(_UTC)).replace(tzinfo=None)
    if fsp is None:
        fsp = 6 if v.microsecond else 0
    if not fsp:
        return v.isoformat(" ", "seconds")  # C-level formatting; years are zero-padded to 4 digits
    return v.isoformat(" ", "microseconds")[: 20 + fsp]


def decimal_text(v: Decimal) -> str:
    text = str(v)  # exponent-free for all but very small or scaled-up values
    return format(v, "f") if "E" in text else text


def canonical_text(value, fsp: int | None = None) -> str | None:
    """Canonical text of a decoded value; ``None`` for NULL and for bytes."""
    t = type(value)
    if value is None or t is bytes or t is bytearray:
        return None
    if t is str or t is InvalidText:
        return str(value)
    if t is int or t is bool:
        return str(int(value))
    if t is Decimal:
        return decimal_text(value)
    if t is float:
        return repr(value)
    if t is _dt.datetime:
        return datetime_text(value, fsp)
    if t is _dt.date:
        return f"{value.year:04d}-{value.month:02d}-{value.day:02d}"
    if t is _dt.timedelta:
        return time_text(value, fsp)
    if t is list or t is tuple:
        return json.dumps(list(value))
    raise TypeError(f"no canonical text for {t.__name__}")


def json_value(value, fsp: int | None = None):
    """A JSON-ready form: numbers stay numbers (Decimal becomes its exact text),
    bytes become ``{"hex": "..."}``."""
    t = type(value)
    if value is None or t is int or t is float or t is str or t is bool:
        return value
    if t is InvalidText:  # valid JSON text, and the bytes the server stored
        return {"text": str(value), "hex": value.raw.hex(), "charset": value.codec}
    if t is bytes or t is bytearray:
        return {"hex": bytes(value).hex()}
    if t is list or t is tuple:
        return list(value)
    as_json = _JSON_FORMS.get(t.__name__)
    if as_json is not None:
        return as_json(value)
    return canonical_text(value, fsp)


# values whose JSON form is an object of its own (by type name: values.py imports no decoder)
_JSON_FORMS = {
    "PartialJson": lambda v: {"partial_json": v.as_json()},  # a JSON column logged as diffs only
}
