"""The bronze layer: every row change of a folder of binlog files, landed once, in order, in
``<warehouse>/bronze/binlog_changes``. How a run goes is told in :mod:`pipelines.bronze.step`.

Modules, from the bottom up (each imports only those above it, the decoder, config and
:mod:`pipelines.delta_io`):

* ``schema``   the bronze table's columns, ``_seq`` and shapes (imported by silver too)
* ``rows``     bronze rows from decoded row changes, row by row (the reference), and table layouts
* ``arrow_rows`` the same rows built column-wise into Arrow record batches (the staging tasks')
* ``bookkeeping`` file statuses, transaction ids, manifest and XA rows, run stats; the step's appends
* ``files``    a file's bytes: prefix checksums, raw event cuts, memory maps, range copies for tasks
* ``listing``  the input folder: binlog names and numbers, copies under other names
* ``sequence`` numbering, ROTATE and GTID continuity between consecutive files
* ``plan``     what a batch reads of one file, from its bytes and its manifest row
* ``decode``   the Spark tasks: decode a range into rows, statements and quarantine rows
* ``tasks``    Spark plumbing: progress over a job's tasks, shipping the package to workers
* ``commit``   one batch: its tasks, then the write-ahead manifest and the idempotent appends
* ``step``     the run: list, redo an interrupted batch, plan in file order, batch, log

>>> from pipelines import bronze
>>> bronze.run(spark, cfg).rows  # doctest: +SKIP
{'c': 1200, 'u': 310, 'd': 45}
"""
from pipelines.bronze.decode import WorkRange, decode_range, stage_range
from pipelines.bronze.files import cut_event, local_path, sha256_prefixes
from pipelines.bronze.listing import SourceFile, copy_notes, list_binlogs, list_folder
from pipelines.bronze.plan import FilePlan, gtid_head, plan_file, split_range
from pipelines.bronze.schema import BRONZE_TABLE
from pipelines.bronze.sequence import (
    Link, advance_gtid_state, check_sequence, gtids_missing, link_problem,
)
from pipelines.bronze.bookkeeping import (
    DONE, PARTIAL, QUARANTINED, TXN_APP_ID, BronzeError, BronzeStats,
)
from pipelines.bronze.step import run

__all__ = [
    "BRONZE_TABLE", "DONE", "PARTIAL", "QUARANTINED",
    "TXN_APP_ID", "BronzeError", "BronzeStats", "FilePlan", "Link", "SourceFile", "WorkRange",
    "advance_gtid_state", "check_sequence", "copy_notes", "cut_event", "decode_range", "gtid_head", "gtids_missing",
    "link_problem", "list_binlogs", "list_folder", "local_path", "plan_file", "run", "sha256_prefixes",
    "split_range", "stage_range",
]
