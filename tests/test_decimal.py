"""NEWDECIMAL and old DECIMAL against byte layouts built from ``strings/decimal.cc``."""
from __future__ import annotations

from decimal import Context, Decimal

import pytest
from hypothesis import given, strategies as st

from pipelines.binlog.decimal import (
    DIG2BYTES,
    decimal_bin_size,
    decode_newdecimal,
    decode_old_decimal,
    newdecimal_reader,
)
from pipelines.binlog.errors import CorruptEvent, TruncatedEvent


def encode_newdecimal(value: Decimal, precision: int, scale: int, *, negative: bool | None = None) -> bytes:
    """``decimal2bin``: digit groups of 9 (leftovers: leading integer, trailing
    fraction digits), big-endian; negative -> every byte inverted; top bit flipped."""
    neg = value.is_signed() if negative is None else negative
    _, digits, exp = value.as_tuple()
    text = "".join(map(str, digits)) + "0" * (exp + scale)  # the unscaled integer, exactly
    text = text.zfill(scale + 1)
    ip, fp = (text[:-scale], text[-scale:]) if scale else (text, "")
    intg = precision - scale
    ip = ip.lstrip("0").zfill(intg)
    assert len(ip) == intg, (value, precision, scale)
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(ip[:lead]).to_bytes(DIG2BYTES[lead], "big")
    for k in range(lead, intg, 9):
        out += int(ip[k:k + 9]).to_bytes(4, "big")
    full = scale // 9 * 9
    for k in range(0, full, 9):
        out += int(fp[k:k + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fp[full:]).to_bytes(DIG2BYTES[scale % 9], "big")
    if neg:
        out = bytearray(b ^ 0xFF for b in out)
    out[0] ^= 0x80
    return bytes(out)


def test_known_vector_from_mysql_docs():
    # 1234567890.1234 as DECIMAL(14,4): 81 0D FB 38 D2 04 D2
    raw = bytes.fromhex("810DFB38D204D2")
    assert decode_newdecimal(raw, 0, 14, 4) == (Decimal("1234567890.1234"), 7)
    assert encode_newdecimal(Decimal("1234567890.1234"), 14, 4) == raw
    neg = bytes(b ^ 0xFF for b in raw)
    assert decode_newdecimal(neg, 0, 14, 4) == (Decimal("-1234567890.1234"), 7)


@pytest.mark.parametrize(
    "text,p,s",
    [
        ("0", 1, 0),
        ("0.00", 10, 2),
        ("1.50", 10, 2),
        ("-1.50", 10, 2),
        ("-0.01", 3, 2),
        ("99999999999999999999999999999999999.999999999999999999999999999999", 65, 30),
        ("-99999999999999999999999999999999999.999999999999999999999999999999", 65, 30),
        ("0.000000000000000000000000000001", 65, 30),
        ("123456789", 9, 0),
        ("1234567890", 10, 0),
        ("-0.123456789", 9, 9),
        ("0.1234567891", 10, 10),
        ("42", 65, 0),
        ("-0.12345678901234567890123456789012345678", 38, 38),  # MariaDB allows scale 38
    ],
)
def test_exact_values_keep_scale_and_sign(text, p, s):
    value = Decimal(text)
    raw = encode_newdecimal(value, p, s)
    assert len(raw) == decimal_bin_size(p, s)
    got, off = decode_newdecimal(b"xx" + raw + b"yy", 2, p, s)
    assert off == 2 + len(raw)
    assert format(got, "f") == text


def test_negative_zero_is_kept_as_mysql_prints_it():
    raw = encode_newdecimal(Decimal("0.00"), 5, 2, negative=True)
    got, _ = decode_newdecimal(raw, 0, 5, 2)
    assert format(got, "f") == "-0.00" and got == 0


def test_sizes():
    assert decimal_bin_size(14, 4) == 7
    assert decimal_bin_size(10, 2) == 5
    assert decimal_bin_size(65, 30) == 30
    assert decimal_bin_size(9, 0) == 4
    assert decimal_bin_size(18, 9) == 8


def test_truncated_and_corrupt():
    with pytest.raises(TruncatedEvent) as e:
        decode_newdecimal(b"\x81\x0d", 0, 14, 4)
    assert (e.value.need, e.value.got) == (7, 2)
    with pytest.raises(CorruptEvent):  # the 9-digit group is 0x7fffffff > 999999999
        decode_newdecimal(b"\xff\xff\xff\xff", 0, 9, 0)
    with pytest.raises(CorruptEvent):
        decimal_bin_size(66, 2)
    with pytest.raises(CorruptEvent):
        decimal_bin_size(40, 39)


@given(
    st.integers(1, 65).flatmap(
        lambda p: st.tuples(st.just(p), st.integers(0, min(p, 38)))
    ).flatmap(
        lambda ps: st.tuples(
            st.just(ps),
            st.integers(-(10 ** ps[0]) + 1, 10 ** ps[0] - 1),
        )
    )
)
def test_roundtrip_property(args):
    (p, s), unscaled = args
    value = Decimal(unscaled).scaleb(-s, Context(prec=100))
    raw = encode_newdecimal(value, p, s)
    got, off = decode_newdecimal(raw, 0, p, s)
    assert off == len(raw)
    assert format(got, "f") == format(value, "f")
    assert newdecimal_reader(p, s)(raw, 0) == got


def test_old_decimal_string_form():
    assert decode_old_decimal(b"  -12.30", 0, 8) == (Decimal("-12.30"), 8)
    assert decode_old_decimal(b"0000012.30", 0, 10) == (Decimal("12.30"), 10)
    assert decode_old_decimal(b"xx  7", 2, 3) == (Decimal("7"), 5)
    with pytest.raises(CorruptEvent):
        decode_old_decimal(b"  -1x.30", 0, 8)
    with pytest.raises(TruncatedEvent):
        decode_old_decimal(b"  1", 0, 8)
