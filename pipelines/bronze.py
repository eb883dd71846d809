"""The bronze step: decode the new bytes of a folder of binlog files into the
bronze change log ``<warehouse>/bronze/binlog_changes`` (schema:
:mod:`pipelines.bronze_schema`), exactly once.

>>> stats = run(spark, load_config("conf/pipeline.yaml"))
>>> stats.rows
{'c': 1200, 'u': 310, 'd': 45}

How a run goes
--------------
1. **List** the input folder through the Hadoop FileSystem of the driver's JVM
   (so ``hdfs://``, ``s3a://``, ``file:/`` and plain paths all work). Binlog
   files are ``<prefix>.<digits>``, ordered by the number (``file_seq``);
   ``*.index`` and every other name is ignored and counted (a name such as
   ``binlog.000002.bak`` is compared with ``binlog.000002`` and reported as a
   copy when the bytes are the same). Two files with the same number stop the run.
2. **Plan** each file against the manifest ``<warehouse>/_pipeline/manifest``:

   * same size and modification time as when it was last processed (and
     finished, quarantined, or still the newest file): skipped without reading it;
   * a file the manifest does not know yet must continue the sequence (see
     *Sequence integrity*); the first one that does not, and every file after
     it, is held back;
   * otherwise the driver streams the file once: the sha256 of the bytes that
     were already processed must be unchanged (else :class:`BronzeError`
     "content changed since it was processed"), then
     :func:`pipelines.binlog.txindex.scan` indexes its transactions and the new
     part ``[previous complete_until, complete_until)`` is cut into byte ranges
     on transaction boundaries of about ``parallelism.target_bytes_per_task``.

   The driver is the only place that reads a whole file; it needs no more
   memory than a read buffer (local files are memory-mapped; other Hadoop
   paths are copied to a driver temp file first).
3. **Decode** the ranges in Spark tasks, one range per task (:func:`decode_range`).
   A task opens the file itself: a local (or ``file:``) path is memory-mapped;
   any other path is read with ``pyarrow.fs`` (``s3a://`` is read as ``s3://``),
   and only the format description and the task's own range are written into a
   sparse local temp file, so offsets stay file offsets and an executor never
   holds more than one range. Each ``RowChange`` becomes one bronze row; each
   ``StatementChange`` one row of ``<warehouse>/_pipeline/ddl``.
4. **Commit** one batch (at most ``parallelism.max_batch_bytes`` of binlog) at
   a time, in this order:

   a. manifest rows with ``phase='pending'`` (write-ahead: the exact ranges),
   b. bronze, ddl, xa and quarantine appends, each with the Delta transaction
      id ``(txnAppId="bronze", txnVersion=<batch>)``,
   c. manifest rows with ``phase='committed'`` (txn id ``bronze`` as well).

   A run that finds pending rows without committed ones (a crash between a
   and c) first redoes exactly those ranges with the same batch number: the
   appends that had already committed are skipped by Delta's transaction id,
   the others happen now. Nothing is lost or applied twice, even when the file
   grew in the meantime (the redo stops at the recorded ``complete_until``).
5. **Bad input** goes to ``<warehouse>/_pipeline/quarantine`` (one row per bad
   piece: file, offset, reason naming file and offset, error class, decoder
   version and the raw bytes) while everything good lands; ``strict: true``
   raises :class:`BronzeError` instead, before anything of that batch is
   written. What each kind of damage does:

   * **framing damage** (not a binlog, empty, checksum mismatch, an impossible
     event length or next position, truncated in a file that is not the
     newest, an unfinished transaction at the end of a file that is not the
     newest, anything after a ROTATE or STOP event): the file *stops* there.
     The transactions before the bad event land, the manifest records the file
     as ``quarantined`` with ``complete_until`` at the start of the
     transaction holding the bad event, and the quarantine row keeps the
     event's bytes (its length field capped by what remains and by
     ``MAX_RAW_EVENT``; the first ``MAX_RAW_HEAD`` bytes of a file that is not
     a binlog). Nothing after the bad event lands from that file (later files
     do): the boundaries after it cannot be trusted. The tail is not lost: the
     manifest has not moved past it, and a corrected copy of the file (same
     good prefix) is read on from ``complete_until`` by the next run.
   * **a transaction that cannot be decoded although its framing is sound**
     (its checksums verified and the quick pass walked through it: a rows
     event without its TABLE_MAP, a column count that differs from the table
     map, a column type the decoder does not support, ...): only that
     transaction is skipped. Its quarantine row keeps the *whole transaction*
     (``offset`` = its first byte, ``raw`` = all its events, at most
     ``MAX_RAW_EVENT`` bytes), the reason names the offset of the event that
     failed, and the rest of the file lands. A larger transaction stops the
     file as above instead, so no row is ever lost.
   * **an unknown event type**: flagged ignorable (``LOG_EVENT_IGNORABLE_F``,
     0x80) it is skipped and counted (``ignorable_skipped`` in the manifest and
     the run summary); not ignorable it gets a quarantine row with its bytes
     (class ``UnknownEvent``) and everything around it lands: the decoder does
     not know what it means, so it cannot turn it into rows, and it must not
     vanish silently.
   * **statement-format DML** cannot be replayed as rows: its statement goes
     to the ddl table and a quarantine row (``StatementFormat``) says so.
   * **the newest file** may end in the middle of an event or a transaction
     (the server is writing it): that tail is left for the next run (status
     ``partial``) and lands once the file has grown. Only a believable cut
     waits: a tail after a ROTATE or STOP event, or an event header whose
     length runs past the end of the file while its next-position field does
     not agree, is damage and is quarantined even in the newest file.

   Without checksums (``binlog_checksum=NONE``) only damage to the framing and
   to the structure of events is detected; a flipped bit inside a value lands
   as a wrong value.
6. **Log** one row per run in ``<warehouse>/_pipeline/runs`` and print a summary.

Sequence integrity
------------------
A file the manifest does not know yet is checked against the file before it
(the highest-numbered file of the folder or the manifest below it):

* **ROTATE**: when the previous file ends with a ROTATE event, the next file
  must be the one it names;
* **numbering**: otherwise the number must be the previous one plus 1;
* **GTIDs** (when both sides are known): the GTIDs the new file says were
  logged before it (MariaDB ``GTID_LIST``, MySQL ``PREVIOUS_GTIDS``) must all
  be known at the end of the previous file (its own list plus the GTIDs of its
  transactions). Only a definite gap counts: a MariaDB ``domain-server`` whose
  last ``seq_no`` is higher than where the previous file ended, or a MySQL GTID
  the previous file never had. Jumps of ``seq_no`` inside a file (``SET
  gtid_seq_no``) and domains that disappear are not gaps.
* **copies**: a new file with the same size and sha256 as a file processed
  before (a re-numbered copy) is never landed twice.

The first file that breaks the sequence and every file after it are *held
back*: the files before it land, then the run fails with a message naming the
missing piece ("binlog.000003 is missing between binlog.000002 and
binlog.000004 ..."). A file that arrives late (``000005`` before ``000004``)
therefore just waits: the next run after ``000004`` arrived lands both, in
order. ``accept_gaps: true`` turns each break into a warning and goes on (a
copy is still skipped, never landed). The first file the pipeline ever sees
starts the history: files before it are not a gap. A file older than files
already processed fails the run unless ``accept_gaps`` is set.

Decisions
---------
* Every complete event group lands, whatever ended it: ``commit``; ``ddl``
  (e.g. ``CREATE TABLE ... SELECT`` rows); ``rollback`` (a ROLLBACK-ended group
  only holds changes to non-transactional tables, which did happen);
  ``xa_prepare`` (the rows land where the server logged them, as a replica
  applies them). Every XA PREPARE / COMMIT / ROLLBACK is also recorded in
  ``<warehouse>/_pipeline/xa`` (``xa_xid``, ``gtid``, ``kind``) so the silver
  step can drop the rows of a prepared branch that was rolled back
  (bronze rows of the branch share its ``gtid``).
* Bronze lands every table; ``tables.include/exclude`` are the silver step's.
* Quarantined bytes can be decoded again after a decoder fix with
  ``python -m pipelines.quarantine redecode`` (:mod:`pipelines.quarantine`);
  landing them is not automatic.

Tables (all Delta, written through :mod:`pipelines.delta_io`): see
``MANIFEST_DDL``, ``QUARANTINE_DDL``, ``DDL_TABLE_DDL``, ``XA_DDL``, ``RUNS_DDL``.
"""
from __future__ import annotations

import bisect
import contextlib
import datetime as _dt
import hashlib
import mmap
import os
import re
import shutil
import sys
import tempfile
import threading
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterator
from urllib.parse import unquote, urlparse

from pipelines.binlog.changes import RowChange, RowsBatch, StatementChange, iter_change_batches, iter_changes
from pipelines.binlog.columns import override_metas
from pipelines.binlog.constants import COMMON_HEADER_LEN, ColumnType, EventFlag, EventType
from pipelines.binlog.errors import BinlogError, ChecksumMismatch, TruncatedEvent
from pipelines.binlog.events import EVENT_DECODERS, DecodeContext, GtidListEvent, PreviousGtidsEvent, decode_event
from pipelines.binlog.framing import BinlogFile
from pipelines.binlog.stream import EventStream
from pipelines.binlog.txindex import XA_COMMIT, XA_PREPARE, XA_ROLLBACK, FileIndex, scan
from pipelines.binlog.values import InvalidText
from pipelines.bronze_rows import _OPS, ArrowRowsBuilder, _TableLayout, _ts, bronze_row
from pipelines.bronze_schema import BRONZE_DDL, BRONZE_TABLE, DECODER_VERSION, WRITTEN_LATER, seq_key
from pipelines.config import PipelineConfig

TXN_APP_ID = "bronze"
PENDING_APP_ID = "bronze-pending"
MAX_RAW_EVENT = 16 << 20  # quarantine keeps at most this many raw bytes of a bad event (or transaction)
MAX_RAW_HEAD = 4096  # ... and this many of a file that is not a binlog at all
_READ_CHUNK = 8 << 20

MANIFEST_DDL = (
    "name STRING, file_seq BIGINT, path STRING, size BIGINT, mtime BIGINT, start_pos BIGINT, "
    "complete_until BIGINT, sha256 STRING, status STRING, phase STRING, batch BIGINT, events BIGINT, "
    "rows BIGINT, error STRING, error_class STRING, error_offset BIGINT, run_id STRING, processed_at TIMESTAMP, "
    # what the next file is checked against (see "Sequence integrity"); unknown events skipped on purpose
    "flavor STRING, gtid_start STRING, gtid_end STRING, rotate_to STRING, ignorable_skipped BIGINT"
)
QUARANTINE_DDL = (
    "file STRING, file_seq BIGINT, offset BIGINT, reason STRING, error_class STRING, "
    "decoder_version STRING, raw BINARY, batch BIGINT, run_id STRING, ts TIMESTAMP"
)
DDL_TABLE_DDL = (  # query_raw: the exact bytes, when they are not valid in the statement's charset
    "file STRING, file_seq BIGINT, pos BIGINT, _seq STRING, db STRING, query STRING, "
    "commit_ts TIMESTAMP, in_group BOOLEAN, gtid STRING, server_id BIGINT, _run_id STRING, query_raw BINARY"
)
XA_DDL = (
    "file STRING, file_seq BIGINT, pos BIGINT, _seq STRING, kind STRING, xa_xid STRING, gtid STRING, "
    "commit_ts TIMESTAMP, _run_id STRING"
)
RUNS_DDL = (
    "run_id STRING, step STRING, started_at TIMESTAMP, ended_at TIMESTAMP, files BIGINT, "
    "files_skipped BIGINT, files_ignored BIGINT, events BIGINT, rows_c BIGINT, rows_u BIGINT, "
    "rows_d BIGINT, statements BIGINT, quarantined BIGINT, bytes BIGINT, seconds DOUBLE, "
    "mb_per_s DOUBLE, zero_dates BIGINT, status STRING, error STRING"
)

# status of a file's manifest row
DONE = "done"  # every byte of the file is processed
PARTIAL = "partial"  # the newest file: an unfinished tail waits for the next run
QUARANTINED = "quarantined"  # a bad event stopped the file; the good prefix landed

_BINLOG_NAME = re.compile(r"^(?P<prefix>.+)\.(?P<seq>\d+)$")
_COPY_NAME = re.compile(r"\.\d+(?=\D)")  # where a binlog name may end in binlog.000002.bak, binlog.000002~
_UTC = _dt.timezone.utc


class BronzeError(RuntimeError):
    """The bronze step cannot go on: changed input, bad input in strict mode, gaps."""


@dataclass
class BronzeStats:
    """What one bronze run did (also its row in ``_pipeline/runs``)."""

    run_id: str
    started_at: _dt.datetime
    ended_at: _dt.datetime | None = None
    files: int = 0  # files read (new or grown)
    files_skipped: int = 0  # binlog files already processed
    files_ignored: int = 0  # other names in the folder
    events: int = 0
    rows: dict[str, int] = field(default_factory=lambda: {"c": 0, "u": 0, "d": 0})
    statements: int = 0
    quarantined: int = 0
    ignorable_skipped: int = 0  # unknown events flagged ignorable, skipped on purpose
    invalid_text: int = 0  # statements and values not valid in their charset (landed with their bytes)
    bytes: int = 0
    batches: int = 0
    held_back: list[str] = field(default_factory=list)  # files after a break in the sequence
    warnings: list[str] = field(default_factory=list)
    status: str = "running"
    error: str | None = None

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        print(f"warning: {message}", file=sys.stderr, flush=True)

    @property
    def seconds(self) -> float:
        end = self.ended_at or _dt.datetime.now(_UTC)
        return max((end - self.started_at).total_seconds(), 1e-9)

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds

    def summary(self) -> str:
        r = self.rows
        return (
            f"bronze run {self.run_id} {self.status}: {self.files} file(s) read, {self.files_skipped} skipped, "
            f"{self.files_ignored} other name(s) ignored; {self.events} events; "
            f"rows c={r['c']} u={r['u']} d={r['d']}; {self.statements} statement(s); "
            f"{self.quarantined} quarantined; {self.ignorable_skipped} ignorable event(s) skipped; "
            + (f"{self.invalid_text} statement(s) or value(s) not valid in their charset, kept as bytes too; "
               if self.invalid_text else "")
            + (f"{len(self.held_back)} file(s) held back; " if self.held_back else "")
            + (f"{len(self.warnings)} warning(s); " if self.warnings else "")
            + f"{self.bytes / 1e6:.2f} MB in {self.seconds:.1f} s ({self.mb_per_s:.2f} MB/s)"
        )

    def run_row(self) -> tuple:
        r = self.rows
        return (
            self.run_id, "bronze", self.started_at, self.ended_at, self.files, self.files_skipped,
            self.files_ignored, self.events, r["c"], r["u"], r["d"], self.statements, self.quarantined,
            self.bytes, self.seconds, self.mb_per_s, None, self.status, self.error,
        )


# -- listing ---------------------------------------------------------------------


@dataclass(frozen=True)
class SourceFile:
    """One binlog file of the input folder."""

    name: str  # base name, e.g. binlog.000042
    uri: str  # full Hadoop path
    size: int
    mtime: int  # modification time, ms since the epoch
    file_seq: int


def local_path(uri: str) -> str | None:
    """The local filesystem path of ``uri`` (plain path or ``file:``), else None."""
    u = urlparse(uri)
    if u.scheme in ("", "file") or (len(u.scheme) == 1 and os.name == "nt"):
        return unquote(u.path) if u.scheme == "file" else uri
    return None


def list_binlogs(spark, folder: str) -> tuple[list[SourceFile], list[str]]:
    """Binlog files of ``folder`` ordered by ``file_seq``, and the other names found.

    Lists through the driver JVM's Hadoop FileSystem, so any Hadoop path works.
    """
    files, others = list_folder(spark, folder)
    return files, [o.name for o in others]


def list_folder(spark, folder: str) -> tuple[list[SourceFile], list[SourceFile]]:
    """Like :func:`list_binlogs`, with the other entries as :class:`SourceFile`
    too (``file_seq`` -1), sorted by name.

    A local folder is listed with ``os.scandir`` (one system call per entry: 10,000 processed
    files cost milliseconds); any other through the driver JVM's Hadoop FileSystem (several
    Py4J calls per entry). Both give the same URIs (``file:/...``), sizes and mtimes (ms).
    """
    local = local_path(folder)
    return _list_local(local, folder) if local is not None else _list_hadoop(spark, folder)


def _list_hadoop(spark, folder: str) -> tuple[list[SourceFile], list[SourceFile]]:
    jvm = spark.sparkContext._jvm
    hconf = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(folder)
    fs = path.getFileSystem(hconf)
    if not fs.exists(path):
        raise BronzeError(f"input folder {folder} does not exist")
    if not fs.getFileStatus(path).isDirectory():
        raise BronzeError(f"input {folder} is not a folder")
    files, ignored = [], []
    for st in fs.listStatus(path):
        name = st.getPath().getName()
        m = _BINLOG_NAME.match(name)
        entry = SourceFile(name, st.getPath().toString(), int(st.getLen()), int(st.getModificationTime()),
                           int(m.group("seq")) if m is not None else -1)
        if not st.isFile() or m is None or name.startswith("."):
            ignored.append(entry)
            continue
        files.append(entry)
    files.sort(key=lambda f: (f.file_seq, f.name))
    return files, sorted(ignored, key=lambda f: f.name)


def _list_local(path: str, folder: str) -> tuple[list[SourceFile], list[SourceFile]]:
    if not os.path.exists(path):
        raise BronzeError(f"input folder {folder} does not exist")
    if not os.path.isdir(path):
        raise BronzeError(f"input {folder} is not a folder")
    base = os.path.abspath(path).rstrip("/") or "/"
    files, ignored = [], []
    with os.scandir(base) as entries:
        for e in entries:
            try:
                st, is_file = e.stat(), e.is_file()
            except FileNotFoundError:  # removed while listed (a dangling link, a purge)
                continue
            m = _BINLOG_NAME.match(e.name)
            entry = SourceFile(e.name, "file:" + os.path.join(base, e.name), int(st.st_size) if is_file else 0,
                               st.st_mtime_ns // 1_000_000, int(m.group("seq")) if m is not None else -1)
            if not is_file or m is None or e.name.startswith("."):
                ignored.append(entry)
                continue
            files.append(entry)
    files.sort(key=lambda f: (f.file_seq, f.name))
    return files, sorted(ignored, key=lambda f: f.name)


def check_sequence(files: list[SourceFile], known: dict[int, str], accept_gaps: bool) -> None:
    """Two files with one number, or a hole in the numbering, is an error
    (``known``: file_seq -> name of files the manifest already has)."""
    by_seq: dict[int, str] = dict(known)
    for f in files:
        other = by_seq.get(f.file_seq)
        if other is not None and other != f.name:
            raise BronzeError(
                f"{f.name} and {other} have the same number {f.file_seq}: one folder must hold one binlog series"
            )
        by_seq[f.file_seq] = f.name
    if accept_gaps or not by_seq:
        return
    seqs = sorted(by_seq)
    missing = [s for s in range(seqs[0], seqs[-1] + 1) if s not in by_seq]
    if missing:
        first = missing[0]
        before = by_seq[max(s for s in seqs if s < first)]
        after = by_seq[min(s for s in seqs if s > first)]
        raise BronzeError(
            f"{len(missing)} binlog file(s) missing from the sequence, the first between {before} and {after} "
            f"(number {first}); set accept_gaps: true to go on without them"
        )


# -- sequence integrity ---------------------------------------------------------------
#
# A GTID state is kept as text in the manifest:
#   MariaDB: the last seq_no of every domain-server, "0-1-42,2-1-7" (what GTID_LIST holds);
#   MySQL:   a GTID set, "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5:7,<uuid>:<tag>:1-3".

MARIADB, MYSQL = "mariadb", "mysql"
_HEAD_TYPES = frozenset({EventType.FORMAT_DESCRIPTION, EventType.MARIA_GTID_LIST, EventType.PREVIOUS_GTIDS,
                         EventType.MARIA_BINLOG_CHECKPOINT, EventType.MARIA_START_ENCRYPTION})


def _mariadb_state(text: str) -> dict[tuple[int, int], int]:
    state = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        d, srv, n = part.split("-")
        state[(int(d), int(srv))] = int(n)
    return state


def _mariadb_text(state: dict[tuple[int, int], int]) -> str:
    return ",".join(f"{d}-{srv}-{n}" for (d, srv), n in sorted(state.items()))


def _merge_intervals(ivs) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(ivs):
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _mysql_state(text: str) -> dict[str, list[tuple[int, int]]]:
    """``uuid[:tag]`` -> inclusive intervals, from MySQL's GTID set text
    (``uuid:1-5:7:tag:1-3`` applies ``tag`` to the intervals after it)."""
    state: dict[str, list[tuple[int, int]]] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        bits = part.split(":")
        key = uuid_ = bits[0].lower()
        for b in bits[1:]:
            if b[:1].isdigit():
                lo, _, hi = b.partition("-")
                state.setdefault(key, []).append((int(lo), int(hi or lo)))
            else:
                key = f"{uuid_}:{b}"
    return {k: _merge_intervals(v) for k, v in state.items()}


def _mysql_text(state: dict[str, list[tuple[int, int]]]) -> str:
    return ",".join(
        k + "".join(f":{a}" if a == b else f":{a}-{b}" for a, b in ivs) for k, ivs in sorted(state.items()) if ivs
    )


def advance_gtid_state(flavor: str, start: str, gtids) -> str:
    """The GTID state after a file: ``start`` (its GTID_LIST / PREVIOUS_GTIDS)
    plus the GTIDs of its transactions, in file order.

    >>> advance_gtid_state("mariadb", "0-1-3", ["0-1-4", "2-1-1"])
    '0-1-4,2-1-1'
    >>> advance_gtid_state("mysql", "a:1-3", ["a:4", "a:5", "b:t:9"])
    'a:1-5,b:t:9'
    """
    if flavor == MARIADB:
        state = _mariadb_state(start)
        for g in gtids:
            d, srv, n = g.split("-")
            state[(int(d), int(srv))] = int(n)  # the last one logged, as the server keeps it
        return _mariadb_text(state)
    state = _mysql_state(start)
    for g in gtids:
        key, _, gno = g.rpartition(":")
        state.setdefault(key.lower(), []).append((int(gno), int(gno)))
    return _mysql_text({k: _merge_intervals(v) for k, v in state.items()})


def gtids_missing(flavor: str, end: str, next_start: str) -> str | None:
    """The GTIDs the next file says were logged before it that the previous
    file's end state ``end`` does not have (a definite gap), or None.

    >>> gtids_missing("mariadb", "0-1-4,2-1-1", "0-1-4,2-1-1")
    >>> gtids_missing("mariadb", "0-1-4", "0-1-9,1-1-2")
    '0-1-5..9, 1-1-..2'
    >>> gtids_missing("mysql", "a:1-5", "a:1-9")
    'a:6-9'
    """
    if flavor == MARIADB:
        have = _mariadb_state(end)
        out = []
        for (d, srv), n in sorted(_mariadb_state(next_start).items()):
            last = have.get((d, srv))
            if last is None:
                out.append(f"{d}-{srv}-..{n}")
            elif n > last:
                out.append(f"{d}-{srv}-{last + 1}" + (f"..{n}" if n > last + 1 else ""))
        return ", ".join(out) or None
    have_sets = _mysql_state(end)
    missing: dict[str, list[tuple[int, int]]] = {}
    for key, ivs in _mysql_state(next_start).items():
        for a, b in ivs:
            cur = a  # subtract what the previous file had (both lists are sorted and merged)
            for ha, hb in have_sets.get(key, ()):
                if hb < cur:
                    continue
                if ha > b:
                    break
                if ha > cur:
                    missing.setdefault(key, []).append((cur, ha - 1))
                cur = hb + 1
                if cur > b:
                    break
            if cur <= b:
                missing.setdefault(key, []).append((cur, b))
    return _mysql_text(missing) or None


def gtid_head(path: str) -> tuple[str | None, str | None]:
    """``(flavor, GTID state at the start)`` of a binlog file: MariaDB's
    GTID_LIST or MySQL's PREVIOUS_GTIDS as text; the state is None when the
    file has neither (old servers) or cannot be read."""
    flavor = None
    try:
        with EventStream(path, decode_rows=False) as st:
            flavor = MARIADB if st.format.is_mariadb else MYSQL
            for ev in st.events():
                if type(ev) is GtidListEvent:
                    return MARIADB, _mariadb_text({(d, srv): n for d, srv, n in ev.gtids})
                if type(ev) is PreviousGtidsEvent:
                    state = {(u if t is None else f"{u}:{t}").lower(): list(ivs) for u, t, ivs in ev.sids}
                    return MYSQL, _mysql_text(state)
                if ev.header.type_code not in _HEAD_TYPES:
                    break
    except BinlogError:
        pass
    return flavor, None


@dataclass(frozen=True)
class Link:
    """What the next file of the sequence is checked against."""

    name: str
    file_seq: int
    flavor: str | None = None
    gtid_start: str | None = None
    gtid_end: str | None = None  # None: unknown (the file stopped at a bad event, or is unfinished)
    rotate_to: str | None = None

    @classmethod
    def of_row(cls, r) -> "Link":
        g = getattr
        return cls(r.name, r.file_seq, g(r, "flavor", None), g(r, "gtid_start", None), g(r, "gtid_end", None),
                   g(r, "rotate_to", None))


def link_problem(prev: Link | None, f: SourceFile, head: tuple[str | None, str | None]) -> str | None:
    """Why ``f`` cannot follow ``prev`` (see "Sequence integrity"), or None.

    ``head`` is :func:`gtid_head` of ``f``; ``prev`` None means ``f`` starts the history.
    """
    if prev is None:
        return None
    if prev.rotate_to:
        if prev.rotate_to != f.name:
            m = _BINLOG_NAME.match(prev.rotate_to)
            hint = (f": {prev.rotate_to} is missing" if m and prev.file_seq < int(m.group("seq")) < f.file_seq
                    else "")
            return f"{prev.name} ends with a ROTATE to {prev.rotate_to}, but the next file here is {f.name}{hint}"
    elif f.file_seq != prev.file_seq + 1:
        n = f.file_seq - prev.file_seq - 1
        m = _BINLOG_NAME.match(prev.name)
        width = len(m.group("seq")) if m else 6
        first = f"{m.group('prefix')}.{prev.file_seq + 1:0{width}d}" if m else f"number {prev.file_seq + 1}"
        if n == 1:
            return f"{first} is missing between {prev.name} and {f.name}"
        return f"{n} files are missing between {prev.name} and {f.name}, the first {first}"
    flavor, start = head
    if prev.gtid_end is not None and start is not None and flavor == prev.flavor:
        missing = gtids_missing(flavor, prev.gtid_end, start)
        if missing:
            event = "GTID_LIST" if flavor == MARIADB else "PREVIOUS_GTIDS"
            end = prev.gtid_end or "nothing"
            return (f"GTIDs {missing} were logged between {prev.name} and {f.name} but are in neither file "
                    f"({f.name} starts after {start} by its {event}, {prev.name} ends at {end}): "
                    f"a binlog file is missing")
    return None


def copy_notes(others: list[SourceFile], files: list[SourceFile], paths) -> list[str]:
    """One note per ignored name that extends a binlog file name
    (``binlog.000002.bak``, ``binlog.000002~``) and holds the same bytes (size
    and sha256) as that file: a copy, read once under the binlog name. Other
    such names (``binlog.000002.txt``) are just ignored and counted.
    ``paths(SourceFile)`` opens a local path for a file (a context manager)."""
    by_name = {f.name: f for f in files}
    notes = []
    for o in others:
        bases = [o.name[: m.end()] for m in _COPY_NAME.finditer(o.name)]
        b = next((by_name[n] for n in reversed(bases) if n in by_name), None)
        if b is None:
            continue
        base = b.name
        same = False
        if o.size == b.size and o.size > 0:
            with paths(o) as po, paths(b) as pb:
                same = sha256_prefixes(po, [o.size]) == sha256_prefixes(pb, [b.size])
        if same:
            notes.append(f"{o.name} is a copy of {base} (same size and sha256): ignored, {base} is read once")
    return notes


# -- bytes -------------------------------------------------------------------------


_IN_USE_FLAG_AT = 4 + 17  # low byte of the format description event's header flags


def sha256_prefixes(path: str, cuts: list[int]) -> dict[int, str]:
    """sha256 hex digests of ``path[0:cut]`` for every cut, in one pass (the
    format description's "file in use" flag does not count)."""
    want = sorted(set(cuts))
    out: dict[int, str] = {}
    h = hashlib.sha256()
    pos = 0
    with open(path, "rb") as fh:
        for cut in want:
            while pos < cut:
                chunk = fh.read(min(_READ_CHUNK, cut - pos))
                if not chunk:
                    raise BronzeError(f"{path}: ends at byte {pos}, expected at least {cut} bytes")
                if pos <= _IN_USE_FLAG_AT < pos + len(chunk):
                    # the server clears LOG_EVENT_BINLOG_IN_USE_F when it closes the file:
                    # that is not a change of content
                    chunk = bytearray(chunk)
                    chunk[_IN_USE_FLAG_AT - pos] &= 0xFE
                h.update(chunk)
                pos += len(chunk)
            out[cut] = h.copy().hexdigest()
    return out


def cut_event(buf, offset: int) -> bytes:
    """The raw bytes of the event at ``offset``: its header's length field,
    capped by what remains (and by ``MAX_RAW_EVENT``)."""
    remaining = len(buf) - offset
    if remaining <= 0:
        return b""
    n = remaining
    if remaining >= 13:
        length = int.from_bytes(bytes(buf[offset + 9 : offset + 13]), "little")
        n = min(max(length, 19), remaining)
    return bytes(buf[offset : offset + min(n, MAX_RAW_EVENT)])


@contextlib.contextmanager
def _mapped(path: str) -> Iterator[memoryview]:
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            yield memoryview(b"")
            return
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    view = memoryview(mm)
    try:
        yield view
    finally:
        view.release()
        try:
            mm.close()
        except BufferError:  # a decoded value still points into the map; it goes with it
            pass


def _pyarrow_fs(uri: str):
    from pyarrow import fs as pafs

    u = urlparse(uri)
    if u.scheme in ("s3a", "s3n"):
        uri = "s3" + uri[len(u.scheme):]
    return pafs.FileSystem.from_uri(uri)


@contextlib.contextmanager
def _task_bytes(uri: str, start: int, end: int) -> Iterator[memoryview]:
    """The bytes a task needs, at their file offsets: the whole file (mapped)
    for a local path; for other paths a sparse temp file holding the format
    description and ``[start, end)`` only."""
    path = local_path(uri)
    if path is not None:
        with _mapped(path) as buf:
            yield buf
        return
    fs, fpath = _pyarrow_fs(uri)
    with tempfile.NamedTemporaryFile(prefix="binlog-range-", suffix=".bin") as tmp:
        with fs.open_input_file(fpath) as src:
            head = src.read_at(23, 0)
            fde_end = 4 + int.from_bytes(head[4 + 9 : 4 + 13], "little") if len(head) >= 23 else len(head)
            tmp.write(src.read_at(min(fde_end, start), 0))
            tmp.seek(start)
            pos = start
            while pos < end:
                chunk = src.read_at(min(_READ_CHUNK, end - pos), pos)
                if not chunk:
                    break
                tmp.write(chunk)
                pos += len(chunk)
        tmp.flush()
        with _mapped(tmp.name) as buf:
            yield buf


@contextlib.contextmanager
def _driver_copy(spark, f: SourceFile) -> Iterator[str]:
    """A local path with the file's bytes, for the driver: the file itself when
    it is local, else a temp copy made by the JVM's Hadoop FileSystem."""
    path = local_path(f.uri)
    if path is not None:
        yield path
        return
    tmpdir = tempfile.mkdtemp(prefix="bronze-")
    try:
        jvm = spark.sparkContext._jvm
        src = jvm.org.apache.hadoop.fs.Path(f.uri)
        fs = src.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        dst = os.path.join(tmpdir, f.name)
        fs.copyToLocalFile(False, src, jvm.org.apache.hadoop.fs.Path("file://" + dst), True)
        yield dst
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


# -- tasks -------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkRange:
    """One Spark task: decode ``[start, end)`` of one file."""

    name: str
    uri: str
    file_seq: int
    start: int
    end: int
    index: FileIndex  # only the transactions of this range
    run_id: str
    ingested_at: _dt.datetime
    precision: "TemporalPrecision | None" = None  # MariaDB 5.3 temporal precision, when needed


_LEGACY_TEMPORAL = (ColumnType.TIME, ColumnType.DATETIME, ColumnType.TIMESTAMP)


@dataclass(frozen=True)
class TemporalPrecision:
    """A ``table_map_hook``: the fractional-second digits of MariaDB 5.3 TIME/DATETIME/TIMESTAMP(n)
    columns (``mysql56_temporal_format=OFF``), which their table maps do not carry, from the
    schema history (``{(db, table): {column index: digits}}``). Only columns logged with the old
    type codes and no metadata are completed."""

    by_table: dict

    def __call__(self, tm):
        digits = self.by_table.get((tm.schema, tm.table))
        if not digits:
            return tm
        use = {i: d for i, d in digits.items()
               if i < tm.column_count and tm.column_types[i] in _LEGACY_TEMPORAL and not tm.column_metas[i]}
        return override_metas(tm, use) if use else tm

    @classmethod
    def of_history(cls, history) -> "TemporalPrecision":
        """The latest precision of every table of ``history`` with fractional temporal columns."""
        by_table = {}
        for db, table in history.tables():
            schema = history.current(db, table)
            if schema is None:
                continue
            digits = {i: c.decimals for i, c in enumerate(schema.columns)
                      if c.type in ("TIME", "DATETIME", "TIMESTAMP") and c.decimals}
            if digits:
                by_table[(db, table)] = digits
        return cls(by_table)


def _sub_index(idx: FileIndex, start: int, end: int) -> FileIndex:
    txs = [t for t in idx.transactions if start <= t.begin_pos < end]
    return FileIndex(idx.file, idx.size, idx.server_version, txs, complete_until=end)


def decode_range(w: WorkRange, batches: bool = False) -> Iterator[tuple]:
    """Tagged records of one range: ``("row", bronze row)``, ``("stmt", ddl row)``,
    ``("quar", quarantine row)`` and, last, ``("stat", (name, start, end, events,
    {op: rows}, error, skipped, ignorable, invalid_text))``.

    * ``error`` is None or ``(offset, cut, reason, class)``: the range stopped at
      a bad event at ``offset``; nothing from ``cut`` (the start of its
      transaction) on may land.
    * ``skipped`` lists the ``(begin, end)`` of transactions that could not be
      decoded although their framing is sound: each has a quarantine row
      holding all its bytes, and none of its rows or statements may land
      (``{op: rows}`` already leaves them out).
    * ``ignorable`` counts the unknown events flagged ignorable that were skipped;
      an unknown event without the flag gets a quarantine row of its own.
    * ``invalid_text`` counts the statements and (``("row", ...)`` records only) row values
      whose bytes are not valid in their declared charset: they land with visible
      replacements in the text and the exact bytes beside it (``query_raw``, a cell's ``bin``).

    With ``batches``, each rows event comes as one ``("rows", (RowsBatch, layout))`` record
    instead of its ``("row", ...)`` records (see :class:`ArrowRowsBuilder`).

    Raises nothing for bad bytes: every :class:`BinlogError` becomes ``error``
    or a skipped transaction. Pure apart from reading the file.
    """
    layouts: dict[int, _TableLayout] = {}
    err = None
    events = ignorable = invalid_stmts = 0
    ops: Counter = Counter()
    skipped: list[tuple[int, int]] = []
    with _task_bytes(w.uri, w.start, w.end) as buf:
        pos = w.start
        tx_begin, tx_ops = None, Counter()  # rows of the current transaction, counted once it is over
        while err is None:
            try:
                changes = iter_change_batches if batches else iter_changes
                for ch in changes(buf, w.index, pos, w.end, name=w.name, table_map_hook=w.precision):
                    if ch.tx.begin_pos != tx_begin:
                        ops.update(tx_ops)
                        tx_begin, tx_ops = ch.tx.begin_pos, Counter()
                    if type(ch) is not StatementChange:  # rows: the layout of their table map
                        lay = layouts.get(id(ch.table_map))
                        if lay is None or lay.tm is not ch.table_map:
                            lay = layouts[id(ch.table_map)] = _TableLayout(ch.table_map)
                    if type(ch) is RowsBatch:
                        tx_ops[_OPS[ch.op]] += len(ch.rows)
                        yield ("rows", (ch, lay))
                    elif type(ch) is RowChange:
                        row = bronze_row(ch, lay, w.file_seq, w.run_id, w.ingested_at)
                        tx_ops[row[12]] += 1
                        yield ("row", row)
                    elif type(ch) is StatementChange:
                        seq = seq_key(w.file_seq, ch.pos, 0)
                        raw = ch.query.raw if type(ch.query) is InvalidText else None
                        invalid_stmts += raw is not None
                        yield ("stmt", (w.name, w.file_seq, ch.pos, seq, ch.db, str(ch.query), _ts(ch.tx.commit_ts),
                                        ch.in_group, ch.tx.gtid, ch.server_id, w.run_id, raw))
                        if ch.in_group and not _DDL_START.match(ch.query):
                            # (a DDL statement in a group is CREATE TABLE ... SELECT: its rows follow as row events)
                            yield ("quar", (w.name, w.file_seq, ch.pos,
                                            "statement-format change cannot be replayed as rows: " + ch.query[:500],
                                            "StatementFormat", DECODER_VERSION, cut_event(buf, ch.pos), None,
                                            w.run_id, w.ingested_at))
                break
            except BinlogError as e:
                off = e.offset if e.offset is not None else pos
                tx = w.index.tx_at(off)
                if tx is not None and tx.begin_pos >= pos and _skippable(e, tx):
                    # the quick pass verified this transaction's framing: skip it alone, keep all its bytes
                    skipped.append((tx.begin_pos, tx.end_pos))
                    if tx.begin_pos == tx_begin:
                        tx_ops = Counter()
                    reason = (f"{e} (transaction [{tx.begin_pos}, {tx.end_pos}) skipped and kept whole in this "
                              f"row; the rest of the file lands)")
                    yield ("quar", (w.name, w.file_seq, tx.begin_pos, reason, type(e).__name__, DECODER_VERSION,
                                    bytes(buf[tx.begin_pos : tx.end_pos]), None, w.run_id, w.ingested_at))
                    pos = tx.end_pos
                    if pos >= w.end:
                        break
                    continue
                cut = tx.begin_pos if tx is not None else off
                err = (off, cut, str(e), type(e).__name__)
        ops.update(tx_ops)  # (emptied when its transaction was skipped)
        stop = err[1] if err else w.end
        # one framing pass: count the events, find the unknown ones
        try:
            with BinlogFile(buf, name=w.name, verify_checksums=False) as bf:
                for raw in bf.events(w.start, stop):
                    h = raw.header
                    events += 1
                    if h.type_code in EVENT_DECODERS:
                        continue
                    if h.flags & EventFlag.IGNORABLE:
                        ignorable += 1
                    elif not any(b <= h.pos < e for b, e in skipped):
                        reason = (f"{w.name}: offset {h.pos}: unknown event type {h.type_code}, not flagged "
                                  f"ignorable: kept here undecoded, the events around it land")
                        yield ("quar", (w.name, w.file_seq, h.pos, reason, "UnknownEvent", DECODER_VERSION,
                                        bytes(buf[h.pos : min(h.end_pos, h.pos + MAX_RAW_EVENT)]), None,
                                        w.run_id, w.ingested_at))
        except BinlogError:
            pass
    invalid = invalid_stmts + sum(lay.invalid_text for lay in layouts.values())
    yield ("stat", (w.name, w.start, w.end, events, dict(ops), err, skipped, ignorable, invalid))


def _skippable(e: BinlogError, tx) -> bool:
    """Can the bad event's transaction be skipped alone? Only when its framing is
    sound (it is a complete transaction of the index, which verified every
    checksum on the way) and it is small enough to be kept whole."""
    return not isinstance(e, ChecksumMismatch) and tx.end_pos - tx.begin_pos <= MAX_RAW_EVENT


def _decode_partition(items):
    for w in items:
        yield from decode_range(w)


@dataclass(frozen=True)
class StageTarget:
    """Where tasks write bronze Parquet files themselves (the delta-rs backend)."""

    table_uri: str
    schema: object  # pyarrow.Schema of the bronze table


STATS_COLUMNS = ("source_file", "file_seq", "event_pos", "_seq", "db", "table", "op", "_ingested_at")


def _parquet_options(schema) -> dict:
    """Bronze Parquet: dictionaries for every column but the values (``text``/``bin``, mostly
    distinct), Parquet statistics for the columns Delta keeps statistics of, ``_shape`` and
    ``_zero_dates``. Smaller files (21 MB against 23 MB for the 1x bench file) written in a third
    less time."""
    import pyarrow as pa

    flat = [f.name for f in schema if not pa.types.is_list(f.type)]
    cells = [f"{f.name}.list.element.{c}" for f in schema if pa.types.is_list(f.type) for c in ("idx", "name", "type")]
    # their null counts let silver's "any row of an older bronze?" skip whole row groups
    return {"use_dictionary": flat + cells, "write_statistics": [*STATS_COLUMNS, *WRITTEN_LATER]}


def stage_range(w: WorkRange, target: StageTarget) -> Iterator[tuple]:
    """:func:`decode_range` with the bronze rows written to Parquet files in the bronze table's
    folder instead of returned: yields the small records, then ``("files", (name, start,
    [StagedFile, ...]))``; the ``stat`` record's op counts are those of the rows in the files.

    Rows that must not land (from the transaction of the range's bad event on, and those of
    skipped transactions) were written before the range knew; the files are rewritten without
    them at the end (rare: bad input only)."""
    from pipelines.delta_io import ParquetStager

    stager = ParquetStager(target.table_uri, target.schema, stats_columns=STATS_COLUMNS,
                           parquet_options=_parquet_options(target.schema))
    builder = ArrowRowsBuilder(target.schema, w.file_seq, w.run_id, w.ingested_at)
    ops: Counter = Counter()
    try:
        for rec in decode_range(w, batches=True):
            kind = rec[0]
            if kind == "rows":
                batch, layout = rec[1]
                ops[_OPS[batch.op]] += builder.add(batch, layout)
                if builder.rows >= stager.batch_rows:
                    stager.add_batch(builder.take())
                continue
            if kind == "stat":
                name, start, end, events, _ops, err, skipped, ignorable, invalid = rec[1]
                drop = list(skipped) + ([(err[1], 1 << 62)] if err else [])
                if builder.rows:
                    stager.add_batch(builder.take())
                files = stager.close()
                if drop and stager.drop_rows("event_pos", drop):
                    ops = Counter()
                    for f in stager.files:
                        ops.update(stager.read(f, ["op"]).column("op").to_pylist())
                    files = stager.files
                yield ("files", (name, start, files))
                rec = ("stat", (name, start, end, events, dict(ops), err, skipped, ignorable,
                                invalid + builder.invalid_text))
            yield rec
    except BaseException:
        stager.abort()
        raise


def _stage_partition(target: StageTarget):
    def run(items):
        for w in items:
            yield from stage_range(w, target)

    return run


# -- planning ------------------------------------------------------------------------


@dataclass
class FilePlan:
    """What one batch does with one file."""

    file: SourceFile
    start: int  # first byte not processed before (0 for a new file)
    end: int  # complete_until after this batch
    status: str
    sha256: str = ""
    index: FileIndex | None = None
    error: str | None = None
    error_class: str | None = None
    error_offset: int | None = None
    ranges: list[tuple[int, int]] = field(default_factory=list)
    events: int = 0
    ignorable_skipped: int = 0
    invalid_text: int = 0
    flavor: str | None = None
    gtid_start: str | None = None
    gtid_end: str | None = None
    rotate_to: str | None = None

    @property
    def link(self) -> Link:
        return Link(self.file.name, self.file.file_seq, self.flavor, self.gtid_start, self.gtid_end, self.rotate_to)


def split_range(idx: FileIndex, start: int, end: int, target: int) -> list[tuple[int, int]]:
    """``[start, end)`` cut on transaction boundaries into ranges of about ``target`` bytes."""
    start = max(start, 4)
    if end <= start:
        return []
    ranges, s = [], start
    for tx in idx.transactions:
        b = tx.begin_pos
        if b >= end:
            break
        if b > s and b - s >= target:
            ranges.append((s, b))
            s = b
    ranges.append((s, end))
    return ranges


def _latest(rows: list) -> dict[str, object]:
    """Per file name, its latest committed manifest row."""
    out: dict[str, object] = {}
    for r in rows:
        if r.phase != "committed":
            continue
        cur = out.get(r.name)
        if cur is None or (r.batch, r.complete_until) > (cur.batch, cur.complete_until):
            out[r.name] = r
    return out


def _content_changed(f: SourceFile, prev, actual: str) -> BronzeError:
    when = prev.processed_at.isoformat() if prev.processed_at else "an earlier run"
    return BronzeError(
        f"{f.name}: content changed since it was processed at {when} "
        f"(sha256 of bytes [0, {prev.complete_until}) {actual} != {prev.sha256})"
    )


def plan_file(f: SourceFile, prev, path: str, newest: bool, cfg: PipelineConfig,
              head: tuple[str | None, str | None] | None = None) -> FilePlan:
    """Index ``f`` (a local copy at ``path``) and decide what to process.

    ``head`` is :func:`gtid_head` of the file when the caller has it already.
    Raises :class:`BronzeError` when bytes that were processed before changed,
    or (strict mode) when the file is bad.
    """
    start = prev.complete_until if prev is not None else 0
    size = os.path.getsize(path)
    if prev is not None:
        if size < prev.complete_until:
            raise BronzeError(
                f"{f.name}: content changed since it was processed at {prev.processed_at}: it is now {size} bytes, "
                f"{prev.complete_until} were processed"
            )
        got = sha256_prefixes(path, [prev.complete_until])[prev.complete_until]
        if got != prev.sha256:
            raise _content_changed(f, prev, got)
    plan = FilePlan(f, start, start, DONE)
    plan.flavor, plan.gtid_start = head if head is not None else gtid_head(path)
    try:
        idx = scan(path, name=f.name)
    except BinlogError as e:
        idx = None
        error = e
    else:
        error = idx.error
    if idx is not None:
        plan.index = idx
        plan.end = max(idx.complete_until, start)
        plan.rotate_to = idx.rotate_to
        if idx.error is None and idx.incomplete_tail is None and plan.gtid_start is not None:
            plan.gtid_end = advance_gtid_state(plan.flavor, plan.gtid_start,
                                               (t.gtid for t in idx.transactions if t.gtid))
    cls = type(error).__name__ if error is not None else None
    msg = str(error) if error is not None else None
    if isinstance(error, TruncatedEvent) and error.offset is not None:
        with _mapped(path) as buf:
            why = _not_a_cut(buf, error.offset, idx)
        if why is not None:
            cls, msg = "CorruptEvent", f"{f.name}: offset {error.offset}: {why}"
    if error is not None and newest and (cls == "TruncatedEvent" or (cls == "NotABinlog" and _magic_prefix(path))):
        plan.status = PARTIAL  # cut where the server is still writing: the rest comes with the next run
    elif error is not None:
        plan.status = QUARANTINED
        plan.error, plan.error_class = msg, cls
        plan.error_offset = error.offset if error.offset is not None else plan.end
    elif idx is not None and idx.incomplete_tail is not None and not newest:
        plan.status = QUARANTINED
        plan.error_class = "UnfinishedTransaction"
        plan.error_offset = idx.incomplete_tail
        plan.error = (f"{f.name}: offset {idx.incomplete_tail}: unfinished transaction at the end of a file that is "
                      f"not the newest (never committed)")
    elif error is None and idx is not None and not newest:
        plan.end = size  # finished; what follows the last transaction are events outside any (e.g. unknown ones)
    elif plan.end < size:
        plan.status = PARTIAL
    if plan.status == QUARANTINED and cfg.strict:
        raise BronzeError(f"bad input (strict mode): {plan.error}")
    if idx is not None:
        plan.ranges = split_range(idx, start, plan.end, cfg.parallelism.target_bytes_per_task)
    return plan


def _magic_prefix(path: str) -> bool:
    """A file shorter than the magic that could still become a binlog (the newest one, being written)."""
    with open(path, "rb") as fh:
        head = fh.read(4)
    return len(head) < 4 and b"\xfebin".startswith(head)


def _not_a_cut(buf, offset: int, idx: FileIndex | None) -> str | None:
    """Why a file that ends in an incomplete event at ``offset`` is damaged
    rather than still being written, or None when it may just be cut there."""
    if idx is not None and (idx.rotate_to is not None or idx.stopped):
        last = f"a ROTATE to {idx.rotate_to}" if idx.rotate_to is not None else "a STOP event"
        return (f"{len(buf) - offset} byte(s) after {last}, which ends a binlog file: garbage appended to a "
                f"finished file")
    remaining = len(buf) - offset
    if remaining < COMMON_HEADER_LEN:
        return None
    length = int.from_bytes(bytes(buf[offset + 9 : offset + 13]), "little")
    next_pos = int.from_bytes(bytes(buf[offset + 13 : offset + 17]), "little")
    if next_pos not in (0, offset + length):
        return (f"event length {length} runs past the end of the file ({remaining} bytes left) and disagrees "
                f"with the event's next position {next_pos}: a damaged header, not a file still being written")
    return None


# -- Delta access ----------------------------------------------------------------------


def _delta():
    from pipelines import delta_io

    return delta_io


def _bronze_struct():
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(BRONZE_DDL)


def _read_rows(spark, cfg: PipelineConfig, path: str) -> list:
    return _delta().read_rows(spark, path, backend=cfg.delta.backend)


def _append(spark, cfg: PipelineConfig, df, path: str, app_id: str | None = None, version: int | None = None):
    _delta().append(spark, df, path, txn_app_id=app_id, txn_version=version, backend=cfg.delta.backend)


def _append_rows(spark, cfg: PipelineConfig, rows: list[tuple], ddl: str, path: str, app_id: str | None = None,
                 version: int | None = None):
    _delta().append_rows(spark, rows, ddl, path, txn_app_id=app_id, txn_version=version, backend=cfg.delta.backend)


def _last_txn(spark, cfg: PipelineConfig, path: str) -> int:
    v = _delta().last_txn_version(path, TXN_APP_ID, spark=spark, backend=cfg.delta.backend)
    return -1 if v is None else int(v)


# -- progress ----------------------------------------------------------------------------


class _TaskProgress:
    """A tqdm bar over the tasks of the Spark jobs of one job group, fed by a
    thread polling the status tracker."""

    def __init__(self, spark, group: str, total: int, enabled: bool, desc: str):
        self.sc, self.group, self.total = spark.sparkContext, group, total
        self.enabled = enabled and total > 0
        self.desc = desc
        self._stop = threading.Event()

    def __enter__(self):
        self.sc.setJobGroup(self.group, self.desc)
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, desc=self.desc, unit="range", file=sys.stderr)
            self.thread = threading.Thread(target=self._poll, daemon=True)
            self.thread.start()
        return self

    def _done(self) -> int:
        st = self.sc.statusTracker()
        best = 0
        for jid in st.getJobIdsForGroup(self.group):
            info = st.getJobInfo(jid)
            for sid in info.stageIds if info else ():
                s = st.getStageInfo(sid)
                if s is not None and s.numTasks == self.total:
                    best = max(best, s.numCompletedTasks)
        return best

    def _poll(self):
        while not self._stop.wait(0.5):
            try:
                n = self._done()
            except Exception:  # noqa: BLE001 - progress must never break the run
                continue
            self.bar.update(max(0, n - self.bar.n))

    def __exit__(self, *exc):
        self._stop.set()
        if self.enabled:
            self.thread.join()
            self.bar.update(max(0, self.total - self.bar.n) if exc[0] is None else 0)
            self.bar.close()
        self.sc.setLocalProperty("spark.jobGroup.id", None)


def _progress_enabled(cfg: PipelineConfig) -> bool:
    return cfg.progress and sys.stderr.isatty()


# -- shipping the code -----------------------------------------------------------------------


def ship_package(spark) -> None:
    """Make ``pipelines`` importable in the Python workers: unless it is installed
    in site-packages, zip the package and ``addPyFile`` it (once per SparkContext).
    Needed under ``spark-submit`` on a cluster and whenever the driver found the
    package through ``sys.path`` rather than an installation."""
    import zipfile
    from pathlib import Path

    import pipelines

    sc = spark.sparkContext
    if getattr(sc, "_bronze_pipelines_shipped", False):
        return
    pkg = Path(next(iter(pipelines.__path__))).resolve()
    if "site-packages" not in pkg.parts and "dist-packages" not in pkg.parts:
        zpath = Path(tempfile.mkdtemp(prefix="pipelines-pyfiles-")) / "pipelines.zip"
        with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(pkg.rglob("*.py")):
                z.write(f, f.relative_to(pkg.parent).as_posix())
        sc.addPyFile(str(zpath))
    sc._bronze_pipelines_shipped = True


# -- one batch ---------------------------------------------------------------------------


def _manifest_rows(plans: list[FilePlan], batch: int, phase: str, run_id: str, now, rows_by_file=None) -> list:
    rows_by_file = rows_by_file or {}
    return [
        (p.file.name, p.file.file_seq, p.file.uri, p.file.size, p.file.mtime, p.start, p.end, p.sha256, p.status,
         phase, batch, p.events, rows_by_file.get(p.file.name, 0), p.error, p.error_class, p.error_offset, run_id,
         now, p.flavor, p.gtid_start, p.gtid_end, p.rotate_to, p.ignorable_skipped)
        for p in plans
    ]


def _xa_rows(plans: list[FilePlan], run_id: str) -> list:
    kinds = {XA_PREPARE, XA_COMMIT, XA_ROLLBACK}
    out = []
    for p in plans:
        if p.index is None:
            continue
        for tx in p.index.transactions:
            if tx.kind in kinds and p.start <= tx.begin_pos < p.end:
                out.append((p.file.name, p.file.file_seq, tx.begin_pos, seq_key(p.file.file_seq, tx.begin_pos, 0),
                            tx.kind, tx.xa_xid, tx.gtid, _ts(tx.commit_ts), run_id))
    return out


def batch_statements(path: str, file_seq: int, start: int, end: int) -> list[tuple[str, str | None, str]]:
    """``(query, default db, _seq)`` of the DDL-like QUERY events in ``[start, end)`` of a local
    file: a framing walk that decodes nothing but those events (bronze needs them before its
    tasks run, for :class:`TemporalPrecision`)."""
    out = []
    with _mapped(path) as buf:
        if len(buf) < 4:
            return out
        try:
            with BinlogFile(buf, name=os.path.basename(path), verify_checksums=False) as bf:
                ctx = DecodeContext(bf.format, {}, False, None)
                for raw in bf.events(max(start, 4), end):
                    if raw.header.type_code not in _QUERY_TYPES:
                        continue
                    ctx.format = bf.format
                    ev = decode_event(raw, ctx)
                    query = getattr(ev, "query", None)
                    if isinstance(query, str) and _DDL_START.match(query):
                        out.append((query, getattr(ev, "schema", None) or None, seq_key(file_seq, raw.header.pos, 0)))
        except BinlogError:
            pass  # the tasks meet the same bad bytes and report them
    return out


_QUERY_TYPES = frozenset({EventType.QUERY, EventType.MARIA_QUERY_COMPRESSED})
_DDL_START = re.compile(r"\s*(?:/\*.*?\*/\s*)*(CREATE|ALTER|RENAME|DROP)\b", re.I | re.S)


def _precision_for(spark, cfg: PipelineConfig, plans: list, copies: dict[str, str]) -> "TemporalPrecision | None":
    """MariaDB 5.3 temporal precision for this batch's tasks, from the schema history (persisted,
    ``_pipeline/ddl``, seeds) and the DDL in the batch itself; None when no table needs it."""
    from pipelines import schema_history

    stmts = []
    for p in plans:
        for s, e in p.ranges:
            stmts += batch_statements(copies[p.file.name], p.file.file_seq, s, e)
    stmts.sort(key=lambda t: t[2])
    history, _added, _next = schema_history.build_history(spark, cfg, stmts)
    precision = TemporalPrecision.of_history(history)
    return precision if precision.by_table else None


def _run_batch(spark, cfg: PipelineConfig, plans: list[FilePlan], batch: int, copies: dict[str, str],
               stats: BronzeStats, now) -> None:
    cached: list = []
    try:
        _decode_and_commit(spark, cfg, plans, batch, copies, stats, now, cached)
    finally:
        for rdd in cached:
            rdd.unpersist()


def _decode_and_commit(spark, cfg: PipelineConfig, plans: list[FilePlan], batch: int, copies: dict[str, str],
                       stats: BronzeStats, now, cached: list) -> None:
    """Decode and commit one batch (see the module docs for the order of writes).

    Spark jobs: one that decodes every range and brings back the small
    records (per-range stats, statements, statement quarantine rows) while the
    bronze rows stay cached on the executors, then the bronze write.
    """
    from pyspark import StorageLevel

    run_id = stats.run_id
    precision = _precision_for(spark, cfg, plans, copies) if any(p.ranges for p in plans) else None
    work = [
        WorkRange(p.file.name, p.file.uri, p.file.file_seq, s, e, _sub_index(p.index, s, e), run_id, now, precision)
        for p in plans for s, e in p.ranges
    ]
    by_name = {p.file.name: p for p in plans}
    cuts: dict[str, int] = {}
    rdd = None
    small: list = []
    d = _delta()
    bronze_path = cfg.warehouse_path(BRONZE_TABLE)
    staged = d.resolve_backend(spark, cfg.delta.backend) == "rs"  # tasks write the Parquet files
    bronze_struct = _bronze_struct()
    if work:
        if staged:
            target = StageTarget(bronze_path, d.prepare_staging(bronze_path, bronze_struct))
            job = spark.sparkContext.parallelize(work, len(work)).mapPartitions(_stage_partition(target))
        else:
            rdd = (spark.sparkContext.parallelize(work, len(work)).mapPartitions(_decode_partition)
                   .persist(StorageLevel.MEMORY_AND_DISK))
            cached.append(rdd)
            job = rdd.filter(lambda r: r[0] != "row")
        with _TaskProgress(spark, f"bronze-{run_id}-{batch}", len(work), _progress_enabled(cfg),
                           f"bronze batch {batch}"):
            small = job.collect()
    op_counts: Counter = Counter()  # (file, op) -> rows
    skips: dict[str, list[tuple[int, int]]] = {}  # transactions skipped whole (kept in quarantine)
    stats_of_ranges = [rec for kind, rec in small if kind == "stat"]
    for rec in stats_of_ranges:
        name, _s, _e, events, ops, err, skipped, ignorable, invalid = rec
        p = by_name[name]
        p.events += events
        p.ignorable_skipped += ignorable
        p.invalid_text += invalid
        if skipped:
            skips.setdefault(name, []).extend(skipped)
        for op, n in ops.items():
            op_counts[(name, op)] += n
        if err is not None and (name not in cuts or err[1] < cuts[name]):
            cuts[name] = err[1]
            p.error, p.error_class, p.error_offset = err[2], err[3], err[0]
    if cfg.strict:
        bad = [by_name[n].error for n in sorted(cuts, key=lambda n: by_name[n].file.file_seq)]
        bad += [rec[3] for kind, rec in small if kind == "quar"]
        if bad:
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise BronzeError(f"bad input (strict mode): {bad[0]}{more}")
    for name, cut in cuts.items():
        p = by_name[name]
        p.end, p.status = min(p.end, cut), QUARANTINED
        p.sha256 = sha256_prefixes(copies[name], [p.end])[p.end]

    def keep(rec) -> bool:  # rows, statements and quarantine rows all start (file, file_seq, pos, ...)
        return rec[1][2] < cuts.get(rec[1][0], 1 << 62)

    def outside_skips(rec) -> bool:
        return not any(b <= rec[1][2] < e for b, e in skips.get(rec[1][0], ()))

    bronze_df = None
    staged_files: list = []
    if staged and work:
        # ranges from a file's cut on land nothing (the range holding the bad event dropped its
        # own rows past the cut); count again from the ranges that land
        for name in cuts:
            for key in [k for k in op_counts if k[0] == name]:
                del op_counts[key]
        for name, start, _e, _ev, ops, *_rest in stats_of_ranges:
            if name in cuts and start < cuts[name]:
                for op, n in ops.items():
                    op_counts[(name, op)] += n
        dropped = []
        for kind, rec in small:
            if kind == "files":
                name, start, files = rec
                (dropped if start >= cuts.get(name, 1 << 62) else staged_files).extend(files)
        d.discard_staged(bronze_path, dropped)
    if rdd is not None:
        rows = rdd.filter(lambda r: r[0] == "row")
        if cuts or skips:
            rows = rows.filter(lambda r: keep(r) and outside_skips(r))
        if cuts:
            for name in cuts:  # the cut dropped rows counted by the tasks: count again
                for key in [k for k in op_counts if k[0] == name]:
                    del op_counts[key]
            cut_names = set(cuts)
            op_counts.update(rows.filter(lambda r: r[1][0] in cut_names)
                             .map(lambda r: (r[1][0], r[1][12])).countByValue())
        bronze_df = spark.createDataFrame(rows.map(lambda r: r[1]), BRONZE_DDL)
    stmts = [rec for kind, rec in small if kind == "stmt" and keep((kind, rec)) and outside_skips((kind, rec))]
    quar_rows = [rec[:7] + (batch,) + rec[8:] for kind, rec in small if kind == "quar" and keep((kind, rec))]
    # the bad events found on the driver or in tasks
    for p in plans:
        if p.status == QUARANTINED and p.error:
            with _mapped(copies[p.file.name]) as buf:
                if p.error_class == "UnfinishedTransaction":
                    raw = bytes(buf[p.error_offset : p.error_offset + MAX_RAW_EVENT])
                elif p.error_class == "NotABinlog":
                    raw = bytes(buf[:MAX_RAW_HEAD])
                else:
                    raw = cut_event(buf, p.error_offset)
            quar_rows.append((p.file.name, p.file.file_seq, p.error_offset, p.error, p.error_class,
                              DECODER_VERSION, raw, batch, run_id, now))

    # a. write-ahead manifest rows
    _append_rows(spark, cfg, _manifest_rows(plans, batch, "pending", run_id, now), MANIFEST_DDL,
                 cfg.pipeline_path("manifest"), PENDING_APP_ID, batch)
    # b. the data, each append idempotent by (txnAppId, txnVersion)
    if bronze_df is not None:
        _append(spark, cfg, bronze_df, bronze_path, TXN_APP_ID, batch)
    elif staged and work:
        d.commit_staged(bronze_path, staged_files, bronze_struct, txn_app_id=TXN_APP_ID, txn_version=batch)
    if stmts:
        _append_rows(spark, cfg, stmts, DDL_TABLE_DDL, cfg.pipeline_path("ddl"), TXN_APP_ID, batch)
    xa = _xa_rows(plans, run_id)
    if xa:
        _append_rows(spark, cfg, xa, XA_DDL, cfg.pipeline_path("xa"), TXN_APP_ID, batch)
    if quar_rows:
        _append_rows(spark, cfg, quar_rows, QUARANTINE_DDL, cfg.pipeline_path("quarantine"), TXN_APP_ID, batch)
    # c. the batch is done
    rows_by_file: Counter = Counter()
    for (name, op), n in op_counts.items():
        rows_by_file[name] += n
        stats.rows[op] += n
    _append_rows(spark, cfg, _manifest_rows(plans, batch, "committed", run_id, now, rows_by_file), MANIFEST_DDL,
                 cfg.pipeline_path("manifest"), TXN_APP_ID, batch)
    stats.statements += len(stmts)
    stats.quarantined += len(quar_rows)
    stats.ignorable_skipped += sum(p.ignorable_skipped for p in plans)
    stats.invalid_text += sum(p.invalid_text for p in plans)
    stats.events += sum(p.events for p in plans)
    stats.bytes += sum(p.end - p.start for p in plans)
    stats.batches += 1


# -- the step --------------------------------------------------------------------------


def _redo_plans(spark, cfg, pending: list, files: dict[str, SourceFile], stack) -> tuple:
    """Plans that redo an interrupted batch exactly (same ranges, same outcome)."""
    plans, copies = [], {}
    for r in pending:
        f = files.get(r.name)
        if f is None:
            raise BronzeError(f"{r.name}: batch {r.batch} was interrupted and the file is gone; cannot redo it")
        path = copies[f.name] = stack.enter_context(_driver_copy(spark, f))
        got = sha256_prefixes(path, [r.complete_until])[r.complete_until]
        if got != r.sha256:
            raise _content_changed(f, r, got)
        try:
            idx = scan(path, name=f.name)
        except BinlogError:
            idx = FileIndex(f.name, f.size, "", [], complete_until=r.complete_until)
        f = replace(f, size=r.size, mtime=r.mtime)
        p = FilePlan(f, r.start_pos, r.complete_until, r.status, r.sha256, idx, r.error, r.error_class,
                     r.error_offset)
        link = Link.of_row(r)
        p.flavor, p.gtid_start, p.gtid_end, p.rotate_to = link.flavor, link.gtid_start, link.gtid_end, link.rotate_to
        p.ranges = split_range(idx, r.start_pos, r.complete_until, cfg.parallelism.target_bytes_per_task)
        plans.append(p)
    return plans, copies


def run(spark, cfg: PipelineConfig) -> BronzeStats:
    """Ingest every new byte of ``cfg.input`` into bronze; returns what was done.

    Raises :class:`BronzeError` for changed input, a broken sequence, or bad
    input in strict mode (the run is logged as failed in ``_pipeline/runs``).

    >>> run(spark, cfg).summary()  # doctest: +SKIP
    'bronze run ... ok: 3 file(s) read, 0 skipped, 1 other name(s) ignored; ...'
    """
    now = _dt.datetime.now(_UTC)
    stats = BronzeStats(run_id=f"{now:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}", started_at=now)
    try:
        _run(spark, cfg, stats, now)
        stats.status = "ok"
    except BaseException as e:
        stats.status, stats.error = "failed", f"{type(e).__name__}: {e}"
        raise
    finally:
        stats.ended_at = _dt.datetime.now(_UTC)
        print(stats.summary(), file=sys.stdout, flush=True)
        try:
            _append_rows(spark, cfg, [stats.run_row()], RUNS_DDL, cfg.pipeline_path("runs"))
        except Exception as log_error:  # noqa: BLE001 - never hide the run's own error
            if stats.status == "ok":
                raise
            print(f"warning: could not write the run log: {log_error}", file=sys.stderr)
    return stats


def _run(spark, cfg: PipelineConfig, stats: BronzeStats, now) -> None:
    ship_package(spark)
    bronze_path, d = cfg.warehouse_path(BRONZE_TABLE), _delta()
    if d.table_exists(bronze_path, spark=spark, backend=cfg.delta.backend):
        # a bronze table from an older version gains the columns added since (e.g. _shape); its
        # old rows have NULL there, and silver computes what they lack
        have = {n.lower() for n in d.schema(bronze_path, spark=spark, backend=cfg.delta.backend).fieldNames()}
        new = [f for f in _bronze_struct().fields if f.name.lower() not in have]
        if new:
            d.add_columns(bronze_path, new, spark=spark, backend=cfg.delta.backend)
    files, others = list_folder(spark, cfg.input)
    stats.files_ignored = len(others)
    by_name = {f.name: f for f in files}
    newest_seq = files[-1].file_seq if files else -1
    manifest_path = cfg.pipeline_path("manifest")
    manifest = _read_rows(spark, cfg, manifest_path)
    next_batch = max([r.batch for r in manifest] + [_last_txn(spark, cfg, cfg.warehouse_path(BRONZE_TABLE))]) + 1

    # 1. an interrupted batch is redone first, exactly
    committed = {r.batch for r in manifest if r.phase == "committed"}
    interrupted: dict[int, list] = {}
    for r in manifest:
        if r.phase == "pending" and r.batch not in committed:
            interrupted.setdefault(r.batch, []).append(r)
    for batch in sorted(interrupted):
        with contextlib.ExitStack() as stack:
            plans, copies = _redo_plans(spark, cfg, interrupted[batch], by_name, stack)
            _run_batch(spark, cfg, plans, batch, copies, stats, now)
    if interrupted:
        manifest = _read_rows(spark, cfg, manifest_path)

    latest = _latest(manifest)
    check_sequence(files, {r.file_seq: r.name for r in latest.values()}, accept_gaps=True)  # one number, one file
    newest_done = max((r.file_seq for r in latest.values()), default=-1)
    if not cfg.accept_gaps:
        late = [f for f in files if f.name not in latest and f.file_seq < newest_done]
        if late:
            raise BronzeError(
                f"{late[0].name} is older than files already processed (up to number {newest_done}); "
                f"set accept_gaps: true to ingest it anyway"
            )
    for note in copy_notes(others, files, lambda f: _driver_copy(spark, f)):
        stats.warn(note)

    # 2. plan in file order, one batch at a time; a break in the sequence holds back the rest
    from tqdm import tqdm

    todo = []
    for f in files:
        prev = latest.get(f.name)
        newest = f.file_seq == newest_seq
        if prev is not None and f.size == prev.size and f.mtime == prev.mtime and (
            prev.status in (DONE, QUARANTINED) or (prev.status == PARTIAL and newest)
        ):
            stats.files_skipped += 1
            continue
        todo.append((f, prev, newest))

    links = {r.file_seq: Link.of_row(r) for r in latest.values()}
    known = sorted(links)
    finished = {(r.size, r.sha256): r.name for r in latest.values()
                if r.status != QUARANTINED and r.complete_until == r.size > 0}
    finished_sizes = {size for size, _sha in finished}
    broken: str | None = None
    batch_plans: list[FilePlan] = []
    batch_bytes = 0
    copies: dict[str, str] = {}
    stack = contextlib.ExitStack()  # driver copies of remote files live until their batch is committed
    try:
        bar = tqdm(todo, desc="bronze: index", unit="file", file=sys.stderr, disable=not _progress_enabled(cfg))
        for i, (f, prev, newest) in enumerate(bar):
            path = copies[f.name] = stack.enter_context(_driver_copy(spark, f))
            head = gtid_head(path)
            if prev is None:
                twin = None
                if f.size in finished_sizes:
                    twin = finished.get((f.size, sha256_prefixes(path, [f.size])[f.size]))
                if twin is not None:
                    problem = (f"{f.name} has the same content (size and sha256) as {twin}, which was read "
                               f"already: a copy under another name is never landed twice")
                else:
                    i_before = bisect.bisect_left(known, f.file_seq)
                    problem = link_problem(links[known[i_before - 1]] if i_before else None, f, head)
                if problem is not None and not cfg.accept_gaps:
                    broken = problem
                    stats.held_back = [g.name for g, _p, _n in todo[i:]]
                    copies.pop(f.name)
                    break
                if problem is not None:
                    stats.warn(f"{problem} (accept_gaps: true: going on" + (", the copy is skipped)" if twin else ")"))
                    if twin is not None:
                        copies.pop(f.name)
                        continue
            plan = plan_file(f, prev, path, newest, cfg, head)
            plan.sha256 = sha256_prefixes(path, [plan.end])[plan.end]
            if f.file_seq not in links:
                bisect.insort(known, f.file_seq)
            links[f.file_seq] = plan.link
            if plan.status != QUARANTINED and plan.end == f.size > 0:
                finished[(f.size, plan.sha256)] = f.name
                finished_sizes.add(f.size)
            stats.files += 1
            batch_plans.append(plan)
            batch_bytes += plan.end - plan.start
            if batch_bytes >= cfg.parallelism.max_batch_bytes:
                _run_batch(spark, cfg, batch_plans, next_batch, copies, stats, now)
                next_batch += 1
                batch_plans, batch_bytes, copies = [], 0, {}
                stack.close()
                stack = contextlib.ExitStack()
        if batch_plans:
            _run_batch(spark, cfg, batch_plans, next_batch, copies, stats, now)
    finally:
        stack.close()
    if broken is not None:
        raise BronzeError(
            f"{broken}. Held back until the sequence is whole: {', '.join(stats.held_back)} "
            f"(the files before it landed); set accept_gaps: true to go on without it"
        )
