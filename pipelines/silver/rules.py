"""Which change wins and what it does, written once as plain values: the driver's fold runs these
rules in Arrow and NumPy (:mod:`pipelines.silver.arrow_fold`, :mod:`pipelines.silver.columnar`,
:mod:`pipelines.silver.keyless`), Spark's path in its SQL (:mod:`pipelines.silver.changes`,
:mod:`pipelines.silver.plan`); each engine only says how to compute the flags and counts the rules
read. No engine here.

>>> keyed_outcome(stored=True, newer=True, upsert=True, soft=False)
'updated'
>>> keyed_outcome(stored=False, newer=True, upsert=False, soft=False)
'unchanged'
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

# Of a key's events, the one that wins: the largest ``_seq``; on a tie the upsert (an action's
# text: "upsert" sorts after "delete"). Fields: the event's ``seq`` and ``action``.
WINNER_ORDER = (("seq", "descending"), ("action", "descending"))

# What a key's winning event does to the row silver stores for the key: the first line whose flags
# all hold. Flags: ``stored`` (silver holds a row with the key), ``newer`` (the event's ``_seq`` is
# above that row's), ``upsert`` (else a delete), ``soft`` (soft deletes: a delete of a key silver
# never held is still recorded).
KEYED_OUTCOMES: tuple[tuple[str, tuple[tuple[str, bool], ...]], ...] = (
    ("inserted", (("stored", False), ("upsert", True))),
    ("deleted", (("stored", False), ("soft", True))),
    ("unchanged", (("stored", False),)),
    ("unchanged", (("newer", False),)),
    ("updated", (("upsert", True),)),
    ("deleted", ()),
)
OUTCOMES = ("inserted", "updated", "deleted", "unchanged")
KEYED_FLAGS = ("stored", "newer", "upsert", "soft")


def keyed_outcome(**flags: bool) -> str:
    """:data:`KEYED_OUTCOMES` for one event's flags, in plain Python (what each engine's compiled
    form is tested against)."""
    return next(kind for kind, needs in KEYED_OUTCOMES if all(flags[f] == v for f, v in needs))


# A keyless table's rows are identified by all their values (NULLs match NULLs, -0.0 is 0.0). Per
# identity, the candidates are the batch's copies (its upserts' after images, origin "batch") and
# silver's live copies ("stored"), ranked in KEYLESS_ORDER (newest first). Each of the batch's
# deletes (its deletes' and updates' before images) takes one: the first keyless_kept(...)
# candidates survive, and the batch's j-th delete of an identity finds no candidate when
# keyless_missing(candidates, j) > 0. What a candidate does: KEYLESS_ACTIONS[(origin, survives)]
# (a pair not there does nothing). A batch that deletes nothing inserts every copy.
KEYLESS_ORDER = (("seq", "descending"),)
KEYLESS_ACTIONS = {("batch", True): "insert", ("stored", False): "delete"}

N = TypeVar("N")
C = TypeVar("C")


def keyless_kept(candidates: N, deletes: N, greatest: Callable[[N, int], N]) -> N:
    """How many of an identity's candidates survive its deletes; ``greatest`` the engine's
    elementwise maximum of its counts and a number.

    >>> keyless_kept(3, 1, max), keyless_kept(1, 2, max)
    (2, 0)
    """
    return greatest(candidates - deletes, 0)


def keyless_missing(candidates: N, deletes: N, greatest: Callable[[N, int], N]) -> N:
    """How many of an identity's deletes find no candidate left (the run's ``missing_deletes``).

    >>> keyless_missing(1, 3, max)
    2
    """
    return greatest(deletes - candidates, 0)


def keyless_fate(action: str) -> tuple[str, bool]:
    """The ``(origin, survives)`` of the candidates that do ``action`` (:data:`KEYLESS_ACTIONS`).

    >>> keyless_fate("delete")
    ('stored', False)
    """
    return next(pair for pair, a in KEYLESS_ACTIONS.items() if a == action)


# Partial row images (binlog_row_image MINIMAL/NOBLOB), tables with a key: per key, silver's stored
# row (order 0), then the batch's events (order 1), in FILL_ORDER ("action": an upsert before a
# delete). Per value column, an event's first FILL_* line whose condition holds ("delete": the
# event is a delete; "carried": its image carries the column; None: always) says where the value
# comes from: "own" (the event's), "before" (the key's row just before the event), "null". A
# key-changing update's upsert takes "before" from its old key's row just before the change.
FILL_ORDER = (("order", "ascending"), ("seq", "ascending"), ("action", "descending"))
FILL_LEAVES = (("delete", "null"), ("carried", "own"), (None, "before"))  # the key's row after it
FILL_HOLDS = (("delete", "own"), ("carried", "own"), (None, "before"))  # the event's row, filled
FILL_SOURCES = ("own", "before", "null")


def fill_source(lines: Sequence[tuple[str | None, str]], *, delete: bool, carried: bool) -> str:
    """The source a ``FILL_*`` table gives one value column of one event.

    >>> fill_source(FILL_HOLDS, delete=False, carried=False), fill_source(FILL_LEAVES, delete=True, carried=True)
    ('before', 'null')
    """
    flags = {"delete": delete, "carried": carried}
    return next(source for cond, source in lines if cond is None or flags[cond])


V = TypeVar("V")


def compiled_fill(lines: Sequence[tuple[str | None, str]], conds: dict[str, C],
                  sources: dict[str, V]) -> list[tuple[C | None, V]]:
    """A ``FILL_*`` table as ``(condition, value)`` pairs in an engine's own terms (``conds`` its
    conditions, ``sources`` its value of each of :data:`FILL_SOURCES`), the first whose condition
    holds (None: always) giving the value."""
    return [(None if cond is None else conds[cond], sources[src]) for cond, src in lines]


def compiled_outcomes(flags: dict[str, C], both: Callable[[C, C], C], negate: Callable[[C], C],
                      always: C) -> list[tuple[str, C]]:
    """:data:`KEYED_OUTCOMES` as ``(kind, condition)`` pairs in an engine's own terms: ``flags`` its
    flag columns (or scalars), ``both`` its AND, ``negate`` its NOT, ``always`` its TRUE."""
    out = []
    for kind, needs in KEYED_OUTCOMES:
        cond = always
        for flag, value in needs:
            cond = both(cond, flags[flag] if value else negate(flags[flag]))
        out.append((kind, cond))
    return out


def sort_in(items: list, order: Sequence[tuple[str, str]], fields: dict[str, Callable]) -> None:
    """Sort ``items`` in place in ``order`` (an ORDER table here), ``fields`` each field's value of
    an item: Python's own compiled form (stable sorts, the last field first).

    >>> events = [(1, "2", "delete"), (1, "2", "upsert"), (0, "", "stored")]
    >>> sort_in(events, FILL_ORDER, {"order": lambda e: e[0], "seq": lambda e: e[1], "action": lambda e: e[2]})
    >>> events
    [(0, '', 'stored'), (1, '2', 'upsert'), (1, '2', 'delete')]
    """
    for field, direction in reversed(order):
        items.sort(key=fields[field], reverse=direction == "descending")


def ascending_order(order: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``order`` reversed in each field: the winner is then the last of its key.

    >>> ascending_order(WINNER_ORDER)
    [('seq', 'ascending'), ('action', 'ascending')]
    """
    return [(f, "ascending" if d == "descending" else "descending") for f, d in order]
