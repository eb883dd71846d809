"""silver/text_checks.py answers what ``re.match`` answers, for each form it knows: every
value of an array matches, or one does not (NULLs, sliced arrays, large strings and the bytes a
NULL slot may hold included)."""
from __future__ import annotations

import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipelines.silver.text_checks import all_match
from pipelines.silver.typed_values import DATE_TEXT, DATETIME_TEXT, DEC, FLOAT_TEXT, INT_TEXT

FORMS = {"int": INT_TEXT, "dec": DEC, "date": DATE_TEXT, "datetime": DATETIME_TEXT}
# texts near each form: its own alphabet, so that most of them match or almost do
ALPHABET = {"int": "-0123456789", "dec": "-0123456789.", "date": "-0123456789",
            "datetime": "-0123456789 :."}


def _digits(low: int, high: int) -> st.SearchStrategy[str]:
    """Digit strings whose lengths reach both ends of the form's bounds and one past."""
    sizes = st.one_of(st.sampled_from([low, high, high + 1, max(low - 1, 0)]), st.integers(low, high))
    return sizes.flatmap(lambda n: st.text("0123456789", min_size=n, max_size=n))


def _near(form: str) -> st.SearchStrategy[str]:
    sign = st.sampled_from(["", "-"])
    two = _digits(2, 2)
    good = {
        "int": st.tuples(sign, _digits(1, 20)).map("".join),
        "dec": st.tuples(sign, _digits(1, 65), st.sampled_from(["", "."]), _digits(1, 38)).map(
            lambda t: t[0] + t[1] + (t[2] + t[3] if t[2] else "")),
        "date": st.tuples(_digits(4, 4), two, two).map("-".join),
        "datetime": st.tuples(st.tuples(_digits(4, 4), two, two).map("-".join),
                              st.tuples(two, two, two).map(":".join),
                              st.sampled_from(["", "."]), _digits(1, 6)).map(
            lambda t: f"{t[0]} {t[1]}" + (t[2] + t[3] if t[2] else "")),
    }[form]
    return st.one_of(good, good, good, st.text(ALPHABET[form] + "x\u00e9", max_size=30))


def _expected(values: list, pattern: re.Pattern) -> bool:
    return all(pattern.match(v) is not None for v in values if v is not None)


@pytest.mark.parametrize("form", sorted(FORMS))
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_every_form_answers_what_re_match_answers(form, data):
    pattern = FORMS[form]
    values = data.draw(st.lists(st.one_of(st.none(), _near(form)), max_size=12))
    kind = data.draw(st.sampled_from([pa.string(), pa.large_string()]))
    array = pa.array(values, kind)
    assert all_match(array, pattern) is _expected(values, pattern), values
    for value in values:  # (one value at a time: an array of several is mostly decided by one bad one)
        assert all_match(pa.array([value], kind), pattern) is _expected([value], pattern), value
    start = data.draw(st.integers(0, len(values)))
    stop = data.draw(st.integers(start, len(values)))
    assert all_match(array.slice(start, stop - start), pattern) is _expected(values[start:stop], pattern)
    chunked = pa.chunked_array([array.slice(0, start), array.slice(start)], kind)
    assert all_match(chunked, pattern) is _expected(values, pattern)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_bytes_under_a_null_slot_are_not_a_value(form):
    good = {"int": "12", "dec": "1.5", "date": "2024-01-02", "datetime": "2024-01-02 03:04:05"}[form]
    # a NULL whose slot spans bytes that match no form: built from buffers, as a reader may
    data = (good + "x.x-" + good).encode()
    offsets = pa.array([0, len(good), len(good) + 4, len(data)], pa.int32()).buffers()[1]
    validity = pa.array([True, False, True]).buffers()[1]
    array = pa.Array.from_buffers(pa.string(), 3, [validity, offsets, pa.py_buffer(data)], null_count=1)
    assert array.to_pylist() == [good, None, good]
    assert all_match(array, FORMS[form]) is True
    assert all_match(pa.array([good, "x"]), FORMS[form]) is False


def test_edges_of_each_form():
    assert all_match(pa.array(["-" + "9" * 20, "0", "-0"]), INT_TEXT) is True
    assert all_match(pa.array(["9" * 21]), INT_TEXT) is False
    assert all_match(pa.array(["-"]), INT_TEXT) is False
    assert all_match(pa.array([""]), INT_TEXT) is False
    assert all_match(pa.array(["1-2"]), INT_TEXT) is False
    assert all_match(pa.array(["-" + "9" * 65 + "." + "9" * 38, "0.5", "12"]), DEC) is True
    assert all_match(pa.array(["1."]), DEC) is False
    assert all_match(pa.array([".5"]), DEC) is False
    assert all_match(pa.array(["1.2.3"]), DEC) is False
    assert all_match(pa.array(["1." + "0" * 39]), DEC) is False
    assert all_match(pa.array(["9" * 66]), DEC) is False
    assert all_match(pa.array(["0000-00-00", "2024-02-30"]), DATE_TEXT) is True  # (the form only)
    assert all_match(pa.array(["2024-1-02"]), DATE_TEXT) is False
    assert all_match(pa.array(["2024-01-02 03:04:05.123456", "2024-01-02 03:04:05"]), DATETIME_TEXT) is True
    assert all_match(pa.array(["2024-01-02 03:04:05."]), DATETIME_TEXT) is False
    assert all_match(pa.array(["2024-01-02T03:04:05"]), DATETIME_TEXT) is False
    assert all_match(pa.array([None, None], pa.string()), INT_TEXT) is True
    assert all_match(pa.array([], pa.string()), DEC) is True


def test_other_patterns_and_types_are_left_to_the_expression():
    assert all_match(pa.array(["1.5e3"]), FLOAT_TEXT) is None
    assert all_match(pa.array([b"12"], pa.binary()), INT_TEXT) is None
