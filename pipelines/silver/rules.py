"""Which change wins and what it does, written once as plain values: the driver's fold runs these
rules in Arrow (:mod:`pipelines.silver.arrow_fold`, :mod:`pipelines.silver.columnar`), Spark's path
in its SQL (:mod:`pipelines.silver.changes`, :mod:`pipelines.silver.plan`); each engine only says
how to compute the flags the rules read. No engine here.

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


C = TypeVar("C")


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


def ascending_order(order: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``order`` reversed in each field: the winner is then the last of its key.

    >>> ascending_order(WINNER_ORDER)
    [('seq', 'ascending'), ('action', 'ascending')]
    """
    return [(f, "ascending" if d == "descending" else "descending") for f, d in order]
