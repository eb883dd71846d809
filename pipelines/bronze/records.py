"""The records a decode task hands the driver beside bronze's rows, by name: a range's figures
(:class:`RangeStat`, with the bad event that stops it: :class:`RangeError`) and a quarantine row
(:class:`Quarantined`, in ``_pipeline/quarantine``'s column order). Named tuples: they travel
through Spark's pickles and land as rows as tuples do, and are read by field, not by position.

>>> stat = RangeStat("binlog.000001", 4, 900, 12, {"c": 3}, RangeError(400, 380, "bad", "BadEvent"), [], 0, 0)
>>> stat.error.cut, stat._replace(invalid=2).invalid
(380, 2)
"""
from __future__ import annotations

import datetime as _dt
from typing import NamedTuple


class RangeError(NamedTuple):
    """The first bad event of a range: where it is, where the range's rows end (the start of its
    transaction), what it says and its error class."""
    offset: int
    cut: int
    message: str
    error_class: str


class RangeStat(NamedTuple):
    """What one decoded byte range of a file holds: its bounds, events framed, rows per op, its
    bad event (None: none), the transactions skipped whole (``(begin, end)`` each), events
    flagged ignorable and skipped, and values not valid in their charset."""
    name: str
    start: int
    end: int
    events: int
    ops: dict
    error: RangeError | None
    skipped: list
    ignorable: int
    invalid: int


class Quarantined(NamedTuple):
    """A ``_pipeline/quarantine`` row (``pipelines.state.QUARANTINE_LAYOUT``'s columns, in order;
    ``tests/test_bronze.py`` holds them to it). ``batch`` is the driver's: None from a task."""
    file: str
    file_seq: int
    offset: int
    reason: str
    error_class: str
    decoder_version: str
    raw: bytes | None
    batch: int | None
    run_id: str
    ts: _dt.datetime
