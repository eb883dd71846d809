"""Name -> path mapping of silver tables: plain names unchanged, hostile names contained and reversible."""
from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.paths import escape_name, silver_table_name, silver_table_path, unescape_name

HOSTILE = [
    "..",
    ".",
    "../../etc",
    "a/b",
    "a\\b",
    "..\\..",
    ".hidden",
    "a..b",
    "100%",
    "~2F",
    "tab\there",
    "nl\nhere",
    "nul\x00x",
    "del\x7f",
    "c:olon",
    "br[a]c^e|t",
    "x" * 64,
    "表" * 64,
    "tëst_表 name",
    "q'u\"o`te",
    "emoji 😀",
]


@pytest.mark.parametrize("name", ["orders", "t_1", "Customers", "tëst_表 name", "with space", "a$b", "order-lines", "v1.2"])
def test_plain_names_map_to_themselves(name):
    assert escape_name(name) == name
    assert silver_table_path("/wh", "shop", name) == f"/wh/silver/shop/{name}"


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_stay_one_component_and_round_trip(tmp_path, name):
    path = silver_table_path(tmp_path, name, name)
    root = tmp_path / "silver"
    assert os.path.dirname(os.path.dirname(path)) == str(root)
    comp = os.path.basename(path)
    assert comp not in ("", ".", "..")
    assert not comp.startswith(".")
    assert "/" not in comp and "\\" not in comp and "%" not in comp and ".." not in comp
    assert not any(ord(c) < 0x20 or c == "\x7f" for c in comp)
    assert unescape_name(comp) == name
    assert silver_table_name(path) == (name, name)
    # the component is usable on the real file system, right where it belongs
    os.makedirs(path, exist_ok=True)
    assert os.path.realpath(path).startswith(str(root.resolve()) + os.sep)


def test_escape_examples():
    assert escape_name("../etc") == "~2E~2E~2Fetc"
    assert escape_name("a..b") == "a.~2Eb"
    assert escape_name("100%") == "100~25"
    assert escape_name("~") == "~7E"
    assert escape_name("a\x01") == "a~01"


def test_sixty_four_character_unicode_name_fits(tmp_path):
    name = "ü" * 32 + "表" * 32
    path = silver_table_path(tmp_path, "d", name)
    os.makedirs(path)
    assert os.path.isdir(path)


@pytest.mark.parametrize("bad", ["", None, 5])
def test_invalid_names_fail_clearly(bad):
    with pytest.raises((ValueError, TypeError), match="name"):
        escape_name(bad)


def test_overlong_component_fails_clearly():
    with pytest.raises(ValueError, match="255"):
        escape_name("😀" * 64)


def test_empty_warehouse_fails_clearly():
    with pytest.raises(ValueError, match="warehouse"):
        silver_table_path("", "d", "t")


@given(st.text(min_size=1, max_size=64, alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=["Cs"])))
def test_round_trip_any_bmp_name(name):
    comp = escape_name(name)
    assert unescape_name(comp) == name
    assert "/" not in comp and comp not in (".", "..") and not comp.startswith(".")


@given(st.lists(st.text(min_size=1, max_size=8, alphabet="a.~/%2E"), min_size=2, max_size=2, unique=True))
def test_distinct_names_get_distinct_paths(names):
    a, b = names
    assert escape_name(a) != escape_name(b)
