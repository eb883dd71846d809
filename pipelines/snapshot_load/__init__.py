"""The snapshot load: a logical dump (mysqldump, mariadb-dump: plain, gzip or zstd, or a ``--tab``
folder; a mydumper folder) into bronze as rows with op ``r`` at the dump's binlog position, and its
``CREATE TABLE`` statements into the schema history there, so silver starts from the dump and the
binlogs after it apply on top. The Spark side of :mod:`pipelines.snapshot` (the pure reader).

* ``position`` a snapshot's binlog position from a GTID set alone: the first change in bronze after it
* ``tasks``  the Spark tasks: a byte range (or a compressed file) -> bronze rows, staged or returned
* ``step``   one load: positions, the tasks' jobs, all-or-nothing writes, the run's summary

What silver does with a snapshot is :mod:`pipelines.silver.snapshots`.

>>> from pipelines import snapshot_load
>>> snapshot_load.run(spark, cfg, ["/backups/shop.sql"]).rows  # doctest: +SKIP
Counter({('shop', 'orders'): 1200})
"""
from pipelines.snapshot_load.step import LoadStats, run

__all__ = ["LoadStats", "run"]
