"""Silver's column names: its own columns per table (``_seq``, ``_op``, ... under a prefix), the
working names a batch is planned with, and silver's errors; no Spark job, no I/O.

>>> OwnColumns("_cdc_").seq
'_cdc_seq'
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pipelines.errors import PipelineError


class SilverStepError(PipelineError, RuntimeError):
    """The silver step cannot go on (the message says which table and why)."""


class SilverSchemaError(PipelineError, ValueError):
    """The batch, the specs and the silver table disagree about columns."""


WORK = "__silver_"  # prefix of internal working columns (reserved: no source column may start so)
# the changes_df contract's own columns (see the module doc)
CHANGE_SEQ, CHANGE_COMMIT_TS = "_seq", "_commit_ts"
# Working names of silver's own columns while a batch is planned. They never meet a source
# column (the prefix is reserved); the MERGE source gives them the table's own names
# (:class:`OwnColumns`), which a source column may well have (`_seq`, `_op` are legal in MySQL).
SEQ, OP, COMMIT_TS, DELETED = f"{WORK}seq", f"{WORK}op", f"{WORK}commit_ts", f"{WORK}deleted"
VALID_FROM, VALID_TO, IS_CURRENT = f"{WORK}valid_from", f"{WORK}valid_to", f"{WORK}is_current"
_ROLES = {"seq": (SEQ, T.StringType()), "op": (OP, T.StringType()), "commit_ts": (COMMIT_TS, T.TimestampType()),
          "deleted": (DELETED, T.BooleanType())}
_SCD2_ROLES = {"valid_from": (VALID_FROM, T.TimestampType()), "valid_to": (VALID_TO, T.TimestampType()),
               "is_current": (IS_CURRENT, T.BooleanType())}
DEFAULT_PREFIX = "_"
DELETE_MODES = ("hard", "soft")
PREFIX_SETTINGS = "silver.table_column_prefix (per table) or silver.column_prefix"


@dataclass(frozen=True)
class OwnColumns:
    """The names of silver's own columns in one table: ``<prefix>seq``, ``<prefix>op``,
    ``<prefix>commit_ts``, ``<prefix>deleted`` and, with SCD2, ``<prefix>valid_from``,
    ``<prefix>valid_to``, ``<prefix>is_current``. The prefix is ``_`` unless the configuration
    picks another for a table whose source columns have those names.

    >>> OwnColumns("_cdc_").seq, OwnColumns().names()
    ('_cdc_seq', ['_seq', '_op', '_commit_ts', '_deleted'])
    """

    prefix: str = DEFAULT_PREFIX

    def __post_init__(self) -> None:
        if not isinstance(self.prefix, str) or not self.prefix or self.prefix.lower().startswith(WORK):
            raise ValueError(f"a silver column prefix must be a non-empty string not starting with {WORK!r}, "
                             f"got {self.prefix!r}")

    seq = property(lambda self: self.prefix + "seq")
    op = property(lambda self: self.prefix + "op")
    commit_ts = property(lambda self: self.prefix + "commit_ts")
    deleted = property(lambda self: self.prefix + "deleted")
    valid_from = property(lambda self: self.prefix + "valid_from")
    valid_to = property(lambda self: self.prefix + "valid_to")
    is_current = property(lambda self: self.prefix + "is_current")

    def fields(self, scd2: bool = False) -> list[T.StructField]:
        roles = {**_ROLES, **(_SCD2_ROLES if scd2 else {})}
        return [T.StructField(self.prefix + role, dt) for role, (_w, dt) in roles.items()]

    def names(self, scd2: bool = False) -> list[str]:
        return [f.name for f in self.fields(scd2)]

    def working(self) -> dict[str, str]:
        """Own name -> working name, for every role."""
        return {self.prefix + role: w for role, (w, _dt) in {**_ROLES, **_SCD2_ROLES}.items()}


DEFAULT_OWN = OwnColumns()
PIPELINE_FIELDS = DEFAULT_OWN.fields()
SCD2_FIELDS = DEFAULT_OWN.fields(scd2=True)[len(PIPELINE_FIELDS):]
RESERVED = {f.name for f in PIPELINE_FIELDS + SCD2_FIELDS}


def own_columns_of(names: Sequence[str], preferred: str | None = None) -> OwnColumns:
    """The own columns of an existing silver table, from its column names: the prefix ``p`` for
    which ``p + seq``, ``op``, ``commit_ts`` and ``deleted`` all exist (``preferred`` wins when
    several do). A table without them gets ``preferred`` (or ``_``); the schema check then says
    what it lacks.

    >>> own_columns_of(["id", "_seq", "_cdc_seq", "_cdc_op", "_cdc_commit_ts", "_cdc_deleted"]).prefix
    '_cdc_'
    """
    have = set(names)
    found = sorted({n[: -len("seq")] for n in names if n.endswith("seq") and len(n) > 3
                    and all(n[: -len("seq")] + role in have for role in _ROLES)})
    if preferred is not None and preferred in found:
        return OwnColumns(preferred)
    if len(found) == 1:
        return OwnColumns(found[0])
    if not found:
        return OwnColumns(preferred or DEFAULT_PREFIX)
    raise SilverSchemaError(f"the silver table has own columns under several prefixes {found}: say which "
                            f"is this table's with {PREFIX_SETTINGS}")


def prefix_renames(names: Sequence[str], wanted: str) -> dict[str, str]:
    """The renames that give an existing silver table's own columns the prefix ``wanted`` (the
    configuration's, set after the table was made: a source column took an own name): ``{}`` when
    they have it already, or the table has none. Raises when a new name is taken.

    >>> prefix_renames(["id", "_seq", "_op", "_commit_ts", "_deleted"], "_cdc_")["_op"]
    '_cdc_op'
    >>> prefix_renames(["id", "_cdc_seq", "_cdc_op", "_cdc_commit_ts", "_cdc_deleted", "_op"], "_cdc_")
    {}
    """
    own = own_columns_of(names, wanted)
    if own.prefix == wanted:
        return {}
    renames = {own.prefix + role: wanted + role for role in {**_ROLES, **_SCD2_ROLES}
               if own.prefix + role in names}
    have = {n.lower() for n in names}
    taken = [new for new in renames.values() if new.lower() in have]
    if taken:
        raise SilverSchemaError(f"cannot give the silver table's own columns the prefix {wanted!r}: it has "
                                f"columns {taken} already; choose another with {PREFIX_SETTINGS}")
    return renames


def working_changes(changes_df: DataFrame) -> DataFrame:
    """``changes_df`` (the contract's ``_seq``/``_commit_ts``) with the working names that
    :func:`key_events` and the plans use."""
    renames = {CHANGE_SEQ: SEQ, CHANGE_COMMIT_TS: COMMIT_TS}
    return changes_df.withColumnsRenamed({k: v for k, v in renames.items() if k in changes_df.columns})
BRONZE_ZEROS = f"{WORK}bronze_zeros"
GUARD = f"{WORK}guard"
ACTION, KIND, RN = f"{WORK}action", f"{WORK}kind", f"{WORK}rn"
UPSERT, DELETE, INSERT = "upsert", "delete", "insert"  # a MERGE source's ACTION values
MOVED = f"{WORK}moved"
PRESENT = "_present"
# working column: per JSON column, the diffs an update logged in place of the document (or NULL)
DIFFS = f"{WORK}json_diffs"


