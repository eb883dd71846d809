"""The Delta table properties of silver's tables (plain values): what a table silver creates takes,
and what a table that exists must gain.

* ``silver.deletion_vectors`` (default on): a table delta-spark creates takes deletion vectors, so a
  MERGE that changes a few rows marks them instead of rewriting the files that hold them (delta-rs
  reads and MERGEs such tables but cannot create them);
* ``silver.change_data_feed`` (default off): every silver table records its row changes for
  ``table_changes`` / ``readChangeFeed`` (delta-spark) and ``DeltaTable.load_cdf`` (delta-rs);
  tables that exist when it is turned on gain it at their next run.

>>> from pipelines.config import SilverConfig
>>> for_new_table(SilverConfig(change_data_feed=True), "spark")
{'delta.enableDeletionVectors': 'true', 'delta.enableChangeDataFeed': 'true'}
>>> for_new_table(SilverConfig(), "rs") is None
True
>>> to_gain(SilverConfig(change_data_feed=True))
{'delta.enableChangeDataFeed': 'true'}
"""
from __future__ import annotations

from pipelines.config import SilverConfig
from pipelines import delta_io
from pipelines.delta_io import DELETION_VECTORS

CHANGE_DATA_FEED = "delta.enableChangeDataFeed"


def for_new_table(silver: SilverConfig, backend: str) -> dict[str, str] | None:
    """The properties of a silver table created on ``backend`` (``rs`` | ``spark``); None: none."""
    props = {}
    if silver.deletion_vectors and delta_io.named(backend).deletion_vectors:
        props[DELETION_VECTORS] = "true"
    if silver.change_data_feed:
        props[CHANGE_DATA_FEED] = "true"
    return props or None


def to_gain(silver: SilverConfig) -> dict[str, str]:
    """What a silver table that exists must have set (deletion vectors are for new tables only)."""
    return {CHANGE_DATA_FEED: "true"} if silver.change_data_feed else {}
