"""DECIMAL columns: MySQL's binary NEWDECIMAL (type 246) and the pre-5.0 string
DECIMAL (type 0), decoded exactly to :class:`decimal.Decimal`.

NEWDECIMAL layout (``strings/decimal.cc`` ``decimal2bin``/``bin2decimal``): the
integer part has ``precision - scale`` digits, the fraction ``scale`` digits; each
part is cut into groups of 9 digits stored as 4-byte big-endian integers, and the
leftover digits (the *leading* integer digits, the *trailing* fraction digits) take
``DIG2BYTES[n]`` bytes. Negative numbers have every byte inverted; finally the top
bit of the first byte is flipped, so it is 1 for positive numbers.

>>> decode_newdecimal(bytes.fromhex("810DFB38D204D2"), 0, 14, 4)
(Decimal('1234567890.1234'), 7)

The scale is kept (``1.50`` stays ``Decimal('1.50')``), and so is the sign of a
negative zero (``Decimal('-0.00')``), as MySQL prints them.
"""
from __future__ import annotations

import re
from decimal import Decimal
from typing import Callable

from .errors import CorruptEvent, TruncatedEvent

DIG_PER_DEC = 9
DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
MAX_PRECISION = 65
MAX_SCALE = 38  # MySQL allows 30, MariaDB 38


def _check(precision: int, scale: int) -> None:
    if not (0 < precision <= MAX_PRECISION and 0 <= scale <= MAX_SCALE and scale <= precision):
        raise CorruptEvent(f"impossible DECIMAL({precision},{scale})")


def decimal_bin_size(precision: int, scale: int) -> int:
    """Bytes a NEWDECIMAL(precision, scale) value takes (``my_decimal_get_binary_size``)."""
    _check(precision, scale)
    intg = precision - scale
    return (
        (intg // DIG_PER_DEC) * 4
        + DIG2BYTES[intg % DIG_PER_DEC]
        + (scale // DIG_PER_DEC) * 4
        + DIG2BYTES[scale % DIG_PER_DEC]
    )


def _groups(precision: int, scale: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(integer groups, fraction groups) as (bytes, digits), most significant first."""
    intg = precision - scale
    ig: list[tuple[int, int]] = []
    if intg % DIG_PER_DEC:
        ig.append((DIG2BYTES[intg % DIG_PER_DEC], intg % DIG_PER_DEC))
    ig += [(4, DIG_PER_DEC)] * (intg // DIG_PER_DEC)
    fg: list[tuple[int, int]] = [(4, DIG_PER_DEC)] * (scale // DIG_PER_DEC)
    if scale % DIG_PER_DEC:
        fg.append((DIG2BYTES[scale % DIG_PER_DEC], scale % DIG_PER_DEC))
    return ig, fg


_SIGN = ("-", "")  # by the (flipped) top bit: 0 negative, 1 positive


def _at(base: str, rel: int) -> str:
    return f"{base} + {rel}" if rel else base


def newdecimal_lines(precision: int, scale: int, base: str, rel: int, target: str) -> list[str]:
    """Python statements decoding the NEWDECIMAL at ``buf[base + rel]`` into ``target``
    (used inline by the compiled row decoders). They need ``_D`` (Decimal),
    ``_SIGN`` and ``_CorruptEvent`` in their namespace, and use the locals ``x``,
    ``s`` and ``g0``, ``g1``...

    The digit groups make one unscaled integer ``u`` and the value is
    ``Decimal(f"{sign}{u}E-{scale}")``: the same (sign, digits, exponent) as MySQL's
    text, so the scale and a negative zero survive.
    """
    size = decimal_bin_size(precision, scale)
    ig, fg = _groups(precision, scale)
    bits = size * 8
    top = 1 << (bits - 1)
    pos, end = _at(base, rel), _at(base, rel + size)
    lines = [
        f"x = int.from_bytes(buf[{pos}:{end}], 'big')",
        f"s = x >> {bits - 1}",
        f"x ^= {top} if s else {top - 1}",
    ]
    shift = bits
    names, checks = [], []
    for nbytes, ndigits in ig + fg:
        shift -= nbytes * 8
        name = f"g{len(names)}"
        mask = (1 << (nbytes * 8)) - 1
        if shift == bits - nbytes * 8:
            expr = f"x >> {shift}" if shift else "x"
        else:
            expr = f"x >> {shift} & {mask}" if shift else f"x & {mask}"
        lines.append(f"{name} = {expr}")
        checks.append(f"{name} > {10 ** ndigits - 1}")
        names.append((name, ndigits))
    if checks:
        lines.append(f"if {' or '.join(checks)}:")
        lines.append(
            f"    raise _CorruptEvent('NEWDECIMAL({precision},{scale}) has a digit group out of range: ' "
            f"+ bytes(buf[{pos}:{end}]).hex())"
        )
    unscaled = names[0][0] if names else "0"
    for name, ndigits in names[1:]:
        unscaled = f"({unscaled}) * {10 ** ndigits} + {name}" if "+" in unscaled else f"{unscaled} * {10 ** ndigits} + {name}"
    exp = f"E-{scale}" if scale else ""
    lines.append(f"{target} = _D(f'{{_SIGN[s]}}{{{unscaled}}}{exp}')")
    return lines


NEWDECIMAL_ENV = {"_D": Decimal, "_SIGN": _SIGN, "_CorruptEvent": CorruptEvent}

_READERS: dict[tuple[int, int], Callable] = {}


def newdecimal_reader(precision: int, scale: int) -> Callable[[bytes, int], Decimal]:
    """A function ``read(buf, off) -> Decimal`` specialised for one (precision, scale).

    It does not check that ``buf`` holds :func:`decimal_bin_size` bytes at ``off``
    (a short buffer gives a wrong value, never an exception); callers check lengths.
    """
    key = (precision, scale)
    fn = _READERS.get(key)
    if fn is not None:
        return fn
    body = newdecimal_lines(precision, scale, "off", 0, "value")
    src = "def read(buf, off):\n" + "".join(f"    {line}\n" for line in body) + "    return value\n"
    ns = dict(NEWDECIMAL_ENV)
    ns["_ifb"] = int.from_bytes
    src = src.replace("int.from_bytes(", "_ifb(")
    exec(compile(src, f"<newdecimal({precision},{scale})>", "exec"), ns)
    fn = ns["read"]
    _READERS[key] = fn
    return fn


def decode_newdecimal(buf, off: int, precision: int, scale: int) -> tuple[Decimal, int]:
    """Decode a NEWDECIMAL(precision, scale) at ``buf[off:]``; returns (value, new_off)."""
    size = decimal_bin_size(precision, scale)
    have = len(buf) - off
    if have < size:
        raise TruncatedEvent(size, max(have, 0), f"DECIMAL({precision},{scale})")
    return newdecimal_reader(precision, scale)(bytes(buf[off:off + size]), 0), off + size


_OLD_DECIMAL = re.compile(rb" *([+-]?)(\d*)(?:\.(\d*))? *\Z")


def decode_old_decimal(buf, off: int, length: int) -> tuple[Decimal, int]:
    """Decode a pre-MySQL-5.0 DECIMAL (type 0): ``length`` ASCII bytes such as
    ``b"  -12.30"`` or ``b"0000012.30"`` (ZEROFILL). The table map carries no
    metadata for this type, so ``length`` (the column's display width in bytes)
    has to come from the schema."""
    have = len(buf) - off
    if have < length:
        raise TruncatedEvent(length, max(have, 0), "old DECIMAL")
    raw = bytes(buf[off:off + length])
    m = _OLD_DECIMAL.match(raw)
    if m is None or not (m.group(2) or m.group(3)):
        raise CorruptEvent(f"old DECIMAL is not a number: {raw!r}")
    return Decimal(raw.strip().decode("ascii")), off + length
