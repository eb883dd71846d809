"""Where a snapshot sits in the binlogs when all it says is a GTID set (MySQL's ``GTID_PURGED``
without ``--source-data``, MariaDB's ``gtid_slave_pos``, or ``--gtid SET``): the first change
bronze holds that the set does not, found among bronze's rows and ``_pipeline/ddl``'s statements.
The binlogs from the dump's time on must have been through the bronze step first.

The position found is that change's event (a rows event or a DDL's query event): the snapshot's
``_seq`` start is just before it (:func:`pipelines.bronze.schema.snapshot_start`), after every
change of the transactions in the set, which come before it in the binlog.
"""
from __future__ import annotations

from dataclasses import replace

import pyarrow as pa
import pyarrow.compute as pc

from pipelines import delta_io
from pipelines import state
from pipelines.bronze.schema import BRONZE_TABLE
from pipelines.binlog.gtid import parse_gtid_set
from pipelines.config import PipelineConfig
from pipelines.snapshot.errors import DumpError
from pipelines.snapshot.position import SnapshotPosition


def locate(cfg: PipelineConfig, pos: SnapshotPosition, name: str) -> SnapshotPosition:
    """``pos`` with ``file``/``pos`` filled in from bronze when it only has a GTID set (else as it is)."""
    if pos.file is not None:
        return pos
    contains = parse_gtid_set(pos.gtid_flavor, pos.gtid).contains
    first: tuple[int, int, str] | None = None
    for path, columns in ((cfg.warehouse_path(BRONZE_TABLE), ["gtid", "file_seq", "event_pos", "source_file"]),
                          (state.path(cfg, state.DDL), ["gtid", "file_seq", "pos", "file"])):
        table = delta_io.open_table(path, "rs")
        if not table.exists():
            continue
        t = table.read_arrow(columns).filter(pc.is_valid(pc.field("gtid")))
        if t.num_rows == 0:
            continue
        key = pc.add(pc.multiply(t.column(1).cast(pa.int64()), 1 << 40), t.column(2).cast(pa.int64()))
        by_gtid = pa.table({"gtid": t.column(0), "k": key}).group_by("gtid").aggregate([("k", "min")])
        for gtid, k in zip(by_gtid.column("gtid").to_pylist(), by_gtid.column("k_min").to_pylist()):
            if not contains(gtid) and (first is None or k < first[0] * (1 << 40) + first[1]):
                at = t.filter(pc.equal(key, k))
                first = (k >> 40, k & ((1 << 40) - 1), at.column(3)[0].as_py())
    if first is None:
        raise DumpError(f"the snapshot's position is only a GTID set ({pos.gtid}) and no change bronze holds is after "
                        "it: run the bronze step on the binlogs from the dump's time on first (jobs/ingest_bronze.py), "
                        "or give the position with --position FILE:POS", file=name)
    return replace(pos, file=first[2], pos=first[1])
