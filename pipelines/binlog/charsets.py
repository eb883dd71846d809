"""Collation ids (as TABLE_MAP optional metadata logs them) -> character set -> Python codec.

The id table is MySQL 8's ``information_schema.COLLATIONS`` plus MariaDB's own ids
(10.x/11.x):

* ``1..323``: shared MySQL/MariaDB ids (MySQL 8 adds the ``utf8mb4_*_0900_*`` ids
  255..323, which MariaDB 11.4.5+ reuses as aliases);
* ``576..738``: MariaDB ``*_croatian_ci``, ``*_myanmar_ci``, ``*_thai_520_w2``;
* ``1024..2047``: MariaDB ``NO PAD`` collations, always ``base id + 1024`` of a
  collation of the same character set (``utf8mb4_general_nopad_ci`` = 45 + 1024);
* ``2048..4095``: MariaDB UCA-14.0.0 collations, ``1ccc tttt tPST`` in binary where
  ``ccc`` is the character set (utf8mb3, utf8mb4, ucs2, utf16, utf32).

>>> codec_for_collation(45)
'utf-8'
>>> codec_for_collation(63) is None
True
>>> charset_for_collation(8), codec_for_collation(8)
('latin1', 'mysql_latin1')

MySQL's ``latin1`` is Windows-1252 where the five bytes cp1252 leaves undefined
(0x81 0x8D 0x8F 0x90 0x9D) map to the C1 controls of the same value; Python's
``cp1252`` rejects them, so this module registers an exact ``mysql_latin1`` codec.
"""
from __future__ import annotations

import codecs
import encodings.cp1252

from .errors import UnsupportedType

BINARY_COLLATION = 63

# charset name -> collation ids below 1024 (MySQL 8 list + MariaDB 576..738)
_IDS_BY_CHARSET: dict[str, tuple[int, ...]] = {
    "big5": (1, 84),
    "latin2": (2, 9, 21, 27, 77),
    "dec8": (3, 69),
    "cp850": (4, 80),
    "latin1": (5, 8, 15, 31, 47, 48, 49, 94),
    "hp8": (6, 72),
    "koi8r": (7, 74),
    "swe7": (10, 82),
    "ascii": (11, 65),
    "ujis": (12, 91),
    "sjis": (13, 88),
    "cp1251": (14, 23, 50, 51, 52),
    "hebrew": (16, 71),
    "tis620": (18, 89),
    "euckr": (19, 85),
    "latin7": (20, 41, 42, 79),
    "koi8u": (22, 75),
    "gb2312": (24, 86),
    "greek": (25, 70),
    "cp1250": (26, 34, 44, 66, 99),
    "gbk": (28, 87),
    "cp1257": (29, 58, 59),
    "latin5": (30, 78),
    "armscii8": (32, 64),
    "utf8mb3": (33, 76, 83, *range(192, 216), 223, 576, 577, 578),
    "ucs2": (35, 90, *range(128, 152), 159, 640, 641, 642),
    "cp866": (36, 68),
    "keybcs2": (37, 73),
    "macce": (38, 43),
    "macroman": (39, 53),
    "cp852": (40, 81),
    "utf8mb4": (
        45, 46, *range(224, 248),
        *range(255, 272), 273, 274, 275, *range(277, 295), 296, 297, 298, 300,
        *range(303, 324),
        608, 609, 610,
    ),
    "utf16": (54, 55, *range(101, 125), 672, 673, 674),
    "utf16le": (56, 62),
    "cp1256": (57, 67),
    "utf32": (60, 61, *range(160, 184), 736, 737, 738),
    "binary": (BINARY_COLLATION,),
    "geostd8": (92, 93),
    "cp932": (95, 96),
    "eucjpms": (97, 98),
    "gb18030": (248, 249, 250),
}

COLLATION_CHARSETS: dict[int, str] = {
    cid: name for name, ids in _IDS_BY_CHARSET.items() for cid in ids
}

_NOPAD_BASE = 1024
_UCA1400_MIN, _UCA1400_MAX = 2048, 4095
_UCA1400_CHARSETS = ("utf8mb3", "utf8mb4", "ucs2", "utf16", "utf32")

# MySQL charset name -> Python codec. None: no text decoding (binary, or a
# charset Python has no codec for: the caller gets bytes).
CHARSET_CODECS: dict[str, str | None] = {
    "utf8mb4": "utf-8",
    "utf8mb3": "utf-8",
    "utf8": "utf-8",
    "latin1": "mysql_latin1",
    "latin2": "iso8859_2",
    "latin5": "iso8859_9",
    "latin7": "iso8859_13",
    "ascii": "ascii",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "binary": None,
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "cp932": "cp932",
    "gbk": "gbk",
    "gb2312": "gb2312",
    "gb18030": "gb18030",
    "big5": "cp950",  # MySQL's big5 includes the cp950 (ETEN) extensions
    "sjis": "shift_jis",
    "ujis": "euc_jp",
    "eucjpms": "euc_jp",  # closest Python codec; lacks the NEC/IBM rows
    "euckr": "euc_kr",
    "koi8r": "koi8_r",
    "koi8u": "koi8_u",
    "greek": "iso8859_7",
    "hebrew": "iso8859_8",
    "tis620": "tis_620",
    "macroman": "mac_roman",
    "macce": "mac_latin2",
    "hp8": "hp_roman8",
    # no Python codec: values stay bytes
    "armscii8": None,
    "keybcs2": None,
    "swe7": None,
    "dec8": None,
    "geostd8": None,
}


def charset_for_collation(cid: int) -> str:
    """MySQL character set name of collation id ``cid`` (``63`` -> ``'binary'``).

    Raises :class:`UnsupportedType` for ids neither MySQL nor MariaDB define.
    """
    name = COLLATION_CHARSETS.get(cid)
    if name is not None:
        return name
    if _NOPAD_BASE < cid < _UCA1400_MIN:
        base = COLLATION_CHARSETS.get(cid - _NOPAD_BASE)
        if base is not None and cid - _NOPAD_BASE < 255 and base != "binary":
            return base
    elif _UCA1400_MIN <= cid <= _UCA1400_MAX:
        enc = (cid >> 8) & 7
        if enc < len(_UCA1400_CHARSETS):
            return _UCA1400_CHARSETS[enc]
    raise UnsupportedType(f"unknown collation id {cid}")


def codec_for_collation(cid: int) -> str | None:
    """Python codec for collation id ``cid``; ``None`` means "keep bytes": the
    binary charset (63) or a charset Python cannot decode (armscii8, keybcs2,
    swe7, dec8, geostd8 — see :func:`charset_for_collation` to tell them apart).

    Raises :class:`UnsupportedType` for unknown ids.
    """
    return CHARSET_CODECS[charset_for_collation(cid)]


# -- the exact MySQL latin1 codec -------------------------------------------------

LATIN1_DECODE = "".join(
    chr(b) if ch == "\ufffe" else ch for b, ch in enumerate(encodings.cp1252.decoding_table)
)
_LATIN1_ENCODE = codecs.charmap_build(LATIN1_DECODE)


def _latin1_encode(text, errors="strict"):
    return codecs.charmap_encode(text, errors, _LATIN1_ENCODE)


def _latin1_decode(data, errors="strict"):
    return codecs.charmap_decode(data, errors, LATIN1_DECODE)


_LATIN1_INFO = codecs.CodecInfo(name="mysql_latin1", encode=_latin1_encode, decode=_latin1_decode)


def _search(name: str):
    return _LATIN1_INFO if name.replace("-", "_") == "mysql_latin1" else None


try:
    codecs.lookup("mysql_latin1")
except LookupError:
    codecs.register(_search)
