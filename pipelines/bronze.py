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
   ``*.index`` and every other name is ignored and counted. Two files with the
   same number, or a hole in the numbering, stop the run (``accept_gaps: true``
   lets holes through).
2. **Plan** each file against the manifest ``<warehouse>/_pipeline/manifest``:

   * same size and modification time as when it was last processed (and
     finished, quarantined, or still the newest file): skipped without reading it;
   * otherwise the driver streams the file once: the sha256 of the bytes that
     were already processed must be unchanged (else :class:`BronzeError`
     "content changed since it was processed"), then
     :func:`pipelines.binlog.txindex.scan` indexes its transactions and the new
     part ``[previous complete_until, complete_until)`` is cut into byte ranges
     on transaction boundaries of about ``parallelism.target_bytes_per_task``.

   The driver is the only place that reads a whole file; it needs no more
   memory than a read buffer (local files are memory-mapped; other Hadoop
   paths are copied to a driver temp file first).
3. **Decode** the ranges in Spark tasks, one range per task. A task opens the
   file itself: a local (or ``file:``) path is memory-mapped; any other path is
   read with ``pyarrow.fs`` (``s3a://`` is read as ``s3://``), and only the
   format description and the task's own range are written into a sparse
   local temp file, so offsets stay file offsets and an executor never holds
   more than one range. Each ``RowChange`` becomes one bronze row; each
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
5. **Bad input** (a :class:`~pipelines.binlog.errors.BinlogError`: not a
   binlog, empty, checksum mismatch, corrupt, unsupported, or truncated in a
   file that is not the newest): the transactions before the bad event land,
   the manifest records the file as ``quarantined`` up to that good prefix
   and ``<warehouse>/_pipeline/quarantine`` gets a row with the file, the
   offset, the reason and the raw event bytes. ``strict: true`` raises
   :class:`BronzeError` instead, before anything of that batch is written.
   A truncated tail in the newest file is normal (the server is writing it):
   it is left for the next run (status ``partial``).
6. **Log** one row per run in ``<warehouse>/_pipeline/runs`` and print a summary.

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
* Statement-format DML (``in_group``) cannot be replayed as rows: its
  statement goes to the ddl table and a quarantine row says so.
* Once a file stops at a bad event, nothing after that event lands from that
  file (later files do): ``_seq`` order within a file would otherwise have a hole.

Tables (all Delta, written through :mod:`pipelines.delta_io`): see
``MANIFEST_DDL``, ``QUARANTINE_DDL``, ``DDL_TABLE_DDL``, ``XA_DDL``, ``RUNS_DDL``.
"""
from __future__ import annotations

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
from decimal import Decimal
from typing import Iterator
from urllib.parse import unquote, urlparse

from pipelines.binlog.changes import RowChange, StatementChange, iter_changes
from pipelines.binlog.constants import ColumnType, column_type_name
from pipelines.binlog.errors import BinlogError, NotABinlog, TruncatedEvent
from pipelines.binlog.framing import BinlogFile
from pipelines.binlog.txindex import XA_COMMIT, XA_PREPARE, XA_ROLLBACK, FileIndex, scan
from pipelines.binlog.values import canonical_text
from pipelines.bronze_schema import BRONZE_DDL, BRONZE_TABLE, DECODER_VERSION, seq_key
from pipelines.config import PipelineConfig

TXN_APP_ID = "bronze"
PENDING_APP_ID = "bronze-pending"
MAX_RAW_EVENT = 16 << 20  # quarantine keeps at most this many raw bytes of a bad event
_READ_CHUNK = 8 << 20

MANIFEST_DDL = (
    "name STRING, file_seq BIGINT, path STRING, size BIGINT, mtime BIGINT, start_pos BIGINT, "
    "complete_until BIGINT, sha256 STRING, status STRING, phase STRING, batch BIGINT, events BIGINT, "
    "rows BIGINT, error STRING, error_class STRING, error_offset BIGINT, run_id STRING, processed_at TIMESTAMP"
)
QUARANTINE_DDL = (
    "file STRING, file_seq BIGINT, offset BIGINT, reason STRING, error_class STRING, "
    "decoder_version STRING, raw BINARY, batch BIGINT, run_id STRING, ts TIMESTAMP"
)
DDL_TABLE_DDL = (
    "file STRING, file_seq BIGINT, pos BIGINT, _seq STRING, db STRING, query STRING, "
    "commit_ts TIMESTAMP, in_group BOOLEAN, gtid STRING, server_id BIGINT, _run_id STRING"
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
_OPS = {"insert": "c", "update": "u", "delete": "d"}
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
    bytes: int = 0
    batches: int = 0
    status: str = "running"
    error: str | None = None

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
            f"{self.quarantined} quarantined; {self.bytes / 1e6:.2f} MB in {self.seconds:.1f} s "
            f"({self.mb_per_s:.2f} MB/s)"
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
        if not st.isFile() or m is None or name.startswith("."):
            ignored.append(name)
            continue
        files.append(SourceFile(name, st.getPath().toString(), int(st.getLen()), int(st.getModificationTime()),
                                int(m.group("seq"))))
    files.sort(key=lambda f: (f.file_seq, f.name))
    return files, sorted(ignored)


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


# -- bytes -------------------------------------------------------------------------


def sha256_prefixes(path: str, cuts: list[int]) -> dict[int, str]:
    """sha256 hex digests of ``path[0:cut]`` for every cut, in one pass."""
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


# -- column types and values ---------------------------------------------------------

_INT_TYPES = frozenset({ColumnType.TINY, ColumnType.SHORT, ColumnType.INT24, ColumnType.LONG, ColumnType.LONGLONG})
_NUMERIC = _INT_TYPES | {ColumnType.FLOAT, ColumnType.DOUBLE, ColumnType.NEWDECIMAL, ColumnType.DECIMAL,
                         ColumnType.YEAR}
_FSP_TYPES = frozenset({ColumnType.TIME2, ColumnType.DATETIME2, ColumnType.TIMESTAMP2})
_STRING_TYPES = frozenset({ColumnType.VARCHAR, ColumnType.VAR_STRING, ColumnType.STRING})
_BLOB_NAMES = {1: "TINYBLOB", 2: "BLOB", 3: "MEDIUMBLOB", 4: "LONGBLOB"}
_CHARSET_TYPES = _STRING_TYPES | {ColumnType.BLOB, ColumnType.TINY_BLOB, ColumnType.MEDIUM_BLOB,
                                  ColumnType.LONG_BLOB, ColumnType.ENUM, ColumnType.SET}
# bytes per character, for the character sets where it is not 1
_MBMAXLEN = {
    "utf8mb4": 4, "utf8mb3": 3, "utf8": 3, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4, "big5": 2,
    "gbk": 2, "gb2312": 2, "gb18030": 4, "sjis": 2, "cp932": 2, "ujis": 3, "eucjpms": 3, "euckr": 2,
}


def _ints(meta) -> tuple[int, ...]:
    if isinstance(meta, int):
        return (meta,)
    if isinstance(meta, (tuple, list)):
        return tuple(int(x) for x in meta if isinstance(x, int))
    return ()


def _charset(tm, i: int) -> str | None:
    cs = tm.column_charsets
    cid = cs[i] if cs is not None and i < len(cs) else None
    if cid is None:
        return None
    try:
        from pipelines.binlog.charsets import charset_for_collation

        return charset_for_collation(cid)
    except (ImportError, BinlogError):
        return f"collation{cid}"


def column_fsp(tm, i: int) -> int | None:
    """Fractional-second digits of temporal column ``i`` (None for other types)."""
    code = tm.column_types[i]
    if code in _FSP_TYPES:
        m = _ints(tm.column_metas[i])
        return m[0] if m else 0
    if code in (ColumnType.TIME, ColumnType.DATETIME, ColumnType.TIMESTAMP):
        return 0
    return None


def column_type_text(tm, i: int) -> str:
    """The column type as logged: ``NAME[(args)][ UNSIGNED][ charset]``, e.g.
    ``LONG UNSIGNED``, ``NEWDECIMAL(10,2)``, ``VARCHAR(40) utf8mb4``, ``DATETIME2(3)``,
    ``BLOB binary``, ``BIT(5)``.

    String lengths are in characters when the charset is known (it is printed),
    in bytes otherwise. ``STRING`` columns that are really ENUM/SET show as such
    when the table map says so.
    """
    code = tm.column_types[i]
    real = tm.real_types[i] if getattr(tm, "real_types", None) else code
    meta = _ints(tm.column_metas[i])
    name = column_type_name(real)
    args = ""
    cs = _charset(tm, i) if real in _CHARSET_TYPES or code in _CHARSET_TYPES else None
    if real == ColumnType.NEWDECIMAL and meta:
        p, s = (meta[0], meta[1]) if len(meta) >= 2 else (meta[0] >> 8, meta[0] & 0xFF)
        args = f"({p},{s})"
    elif real in _STRING_TYPES and meta:
        n = meta[-1]
        if cs and cs != "binary":
            n //= _MBMAXLEN.get(cs, 1)
        args = f"({n})"
    elif real == ColumnType.BIT and meta:
        bits = meta[0] if len(meta) == 1 else meta[0] * 8 + meta[1] if meta[0] <= 8 else meta[0]
        args = f"({bits})"
    elif real in _FSP_TYPES:
        args = f"({meta[0] if meta else 0})"
    elif real == ColumnType.BLOB and meta:
        name = _BLOB_NAMES.get(meta[0], name)
    elif real == ColumnType.VECTOR and meta:
        args = f"({meta[0] // 4})"
    text = name + args
    sg = tm.signedness
    if real in _NUMERIC and sg is not None and i < len(sg) and sg[i]:
        text += " UNSIGNED"
    if cs:
        text += f" {cs}"
    return text


class _TableLayout:
    """What the rows of one table map need, computed once per table map."""

    __slots__ = ("tm", "names", "types", "fsps", "key")

    def __init__(self, tm):
        n = tm.column_count
        self.tm = tm
        names = tm.column_names
        self.names = tuple(names[i] if names and i < len(names) else None for i in range(n))
        self.types = tuple(column_type_text(tm, i) for i in range(n))
        self.fsps = tuple(column_fsp(tm, i) for i in range(n))
        self.key = tuple(c for c, _prefix in tm.primary_key) if tm.primary_key else None

    def cell(self, i: int, v) -> tuple:
        if type(v) is bytes or type(v) is bytearray or type(v) is memoryview:
            return (i, self.names[i], self.types[i], None, bytes(v))
        return (i, self.names[i], self.types[i], canonical_text(v, self.fsps[i]), None)

    def image(self, cols, values) -> list | None:
        if values is None:
            return None
        return [self.cell(i, v) for i, v in zip(cols, values)]


def _ts(epoch: int | None) -> _dt.datetime | None:
    return _dt.datetime.fromtimestamp(epoch, _UTC) if epoch is not None else None


def bronze_row(ch: RowChange, layout: _TableLayout, file_seq: int, run_id: str, ingested_at) -> tuple:
    """One bronze row (in ``BRONZE_COLUMNS`` order) of one row change."""
    before = layout.image(ch.columns_before, ch.before)
    after = layout.image(ch.columns_after, ch.after)
    pk = None
    if layout.key is not None:
        cells = {}
        for img in ((before, after) if ch.op != "delete" else (after, before)):
            for cell in img or ():
                cells[cell[0]] = cell  # later images win: after for c/u, before for d
        if all(c in cells for c in layout.key):
            pk = [cells[c] for c in layout.key]
    tx = ch.tx
    return (
        os.path.basename(ch.file), file_seq, ch.pos, ch.row_idx, seq_key(file_seq, ch.pos, ch.row_idx),
        ch.server_id, tx.gtid, Decimal(tx.xid) if tx.xid is not None else None,
        _ts(tx.commit_ts), _ts(ch.event_ts), ch.db, ch.table, _OPS[ch.op], before, after, pk,
        DECODER_VERSION, run_id, ingested_at,
    )


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


def _sub_index(idx: FileIndex, start: int, end: int) -> FileIndex:
    txs = [t for t in idx.transactions if start <= t.begin_pos < end]
    return FileIndex(idx.file, idx.size, idx.server_version, txs, complete_until=end)


def decode_range(w: WorkRange) -> Iterator[tuple]:
    """Tagged records of one range: ``("row", bronze row)``, ``("stmt", ddl row)``,
    ``("quar", quarantine row)`` and, last, ``("stat", (name, start, end, events,
    {op: rows}, error))`` where ``error`` is None or ``(offset, cut, reason, class)``: the
    range stopped at a bad event at ``offset``; nothing from ``cut`` (the start of
    its transaction) on may land."""
    layouts: dict[int, _TableLayout] = {}
    err = None
    events = 0
    ops: Counter = Counter()
    with _task_bytes(w.uri, w.start, w.end) as buf:
        try:
            for ch in iter_changes(buf, w.index, w.start, w.end, name=w.name):
                if type(ch) is RowChange:
                    lay = layouts.get(id(ch.table_map))
                    if lay is None or lay.tm is not ch.table_map:
                        lay = layouts[id(ch.table_map)] = _TableLayout(ch.table_map)
                    row = bronze_row(ch, lay, w.file_seq, w.run_id, w.ingested_at)
                    ops[row[12]] += 1
                    yield ("row", row)
                elif type(ch) is StatementChange:
                    seq = seq_key(w.file_seq, ch.pos, 0)
                    yield ("stmt", (w.name, w.file_seq, ch.pos, seq, ch.db, ch.query, _ts(ch.tx.commit_ts),
                                    ch.in_group, ch.tx.gtid, ch.server_id, w.run_id))
                    if ch.in_group:
                        yield ("quar", (w.name, w.file_seq, ch.pos,
                                        "statement-format change cannot be replayed as rows: " + ch.query[:500],
                                        "StatementFormat", DECODER_VERSION, cut_event(buf, ch.pos), None,
                                        w.run_id, w.ingested_at))
        except BinlogError as e:
            off = e.offset if e.offset is not None else w.start
            tx = w.index.tx_at(off)
            cut = tx.begin_pos if tx is not None else off
            err = (off, cut, str(e), type(e).__name__)
        stop = err[1] if err else w.end
        try:
            with BinlogFile(buf, name=w.name, verify_checksums=False) as bf:
                events = sum(1 for _ in bf.events(w.start, stop))
        except BinlogError:
            pass
    yield ("stat", (w.name, w.start, w.end, events, dict(ops), err))


def _decode_partition(items):
    for w in items:
        yield from decode_range(w)


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


def plan_file(f: SourceFile, prev, path: str, newest: bool, cfg: PipelineConfig) -> FilePlan:
    """Index ``f`` (a local copy at ``path``) and decide what to process."""
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
    truncated = isinstance(error, TruncatedEvent) or (isinstance(error, NotABinlog) and 0 < size < 4)
    if error is not None and not (newest and truncated):
        plan.status = QUARANTINED
        plan.error, plan.error_class = str(error), type(error).__name__
        plan.error_offset = error.offset if error.offset is not None else plan.end
    elif idx is not None and idx.incomplete_tail is not None and not newest:
        plan.status = QUARANTINED
        plan.error_class = "UnfinishedTransaction"
        plan.error_offset = idx.incomplete_tail
        plan.error = (f"{f.name}: offset {idx.incomplete_tail}: unfinished transaction at the end of a file that is "
                      f"not the newest (never committed)")
    elif plan.end < size:
        plan.status = PARTIAL
    if plan.status == QUARANTINED and cfg.strict:
        raise BronzeError(f"bad input (strict mode): {plan.error}")
    if idx is not None:
        plan.ranges = split_range(idx, start, plan.end, cfg.parallelism.target_bytes_per_task)
    return plan


# -- Delta access ----------------------------------------------------------------------


def _delta():
    from pipelines import delta_io

    return delta_io


def _read_rows(spark, cfg: PipelineConfig, path: str) -> list:
    d = _delta()
    if not d.table_exists(path, spark=spark, backend=cfg.delta.backend):
        return []
    return d.read(spark, path, backend=cfg.delta.backend).collect()


def _append(spark, cfg: PipelineConfig, df, path: str, app_id: str | None = None, version: int | None = None):
    _delta().append(spark, df, path, txn_app_id=app_id, txn_version=version, backend=cfg.delta.backend)


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
         now)
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
    work = [
        WorkRange(p.file.name, p.file.uri, p.file.file_seq, s, e, _sub_index(p.index, s, e), run_id, now)
        for p in plans for s, e in p.ranges
    ]
    by_name = {p.file.name: p for p in plans}
    cuts: dict[str, int] = {}
    rdd = None
    small: list = []
    if work:
        rdd = (spark.sparkContext.parallelize(work, len(work)).mapPartitions(_decode_partition)
               .persist(StorageLevel.MEMORY_AND_DISK))
        cached.append(rdd)
        with _TaskProgress(spark, f"bronze-{run_id}-{batch}", len(work), _progress_enabled(cfg),
                           f"bronze batch {batch}"):
            small = rdd.filter(lambda r: r[0] != "row").collect()
    op_counts: Counter = Counter()  # (file, op) -> rows
    for kind, rec in small:
        if kind != "stat":
            continue
        name, _s, _e, events, ops, err = rec
        by_name[name].events += events
        for op, n in ops.items():
            op_counts[(name, op)] += n
        if err is not None and (name not in cuts or err[1] < cuts[name]):
            cuts[name] = err[1]
            p = by_name[name]
            p.error, p.error_class, p.error_offset = err[2], err[3], err[0]
    for name, cut in cuts.items():
        p = by_name[name]
        if cfg.strict:
            raise BronzeError(f"bad input (strict mode): {p.error}")
        p.end, p.status = min(p.end, cut), QUARANTINED
        p.sha256 = sha256_prefixes(copies[name], [p.end])[p.end]

    def keep(rec) -> bool:  # rows, statements and quarantine rows all start (file, file_seq, pos, ...)
        return rec[1][2] < cuts.get(rec[1][0], 1 << 62)

    bronze_df = None
    if rdd is not None:
        rows = rdd.filter(lambda r: r[0] == "row")
        if cuts:
            rows = rows.filter(keep)
            for name in cuts:  # the cut dropped rows counted by the tasks: count again
                for key in [k for k in op_counts if k[0] == name]:
                    del op_counts[key]
            cut_names = set(cuts)
            op_counts.update(rows.filter(lambda r: r[1][0] in cut_names)
                             .map(lambda r: (r[1][0], r[1][12])).countByValue())
        bronze_df = spark.createDataFrame(rows.map(lambda r: r[1]), BRONZE_DDL)
    stmts = [rec for kind, rec in small if kind == "stmt" and keep((kind, rec))]
    quar_rows = [rec[:7] + (batch,) + rec[8:] for kind, rec in small if kind == "quar" and keep((kind, rec))]
    # the bad events found on the driver or in tasks
    for p in plans:
        if p.status == QUARANTINED and p.error:
            with _mapped(copies[p.file.name]) as buf:
                if p.error_class == "UnfinishedTransaction":
                    raw = bytes(buf[p.error_offset : p.error_offset + MAX_RAW_EVENT])
                else:
                    raw = cut_event(buf, p.error_offset)
            quar_rows.append((p.file.name, p.file.file_seq, p.error_offset, p.error, p.error_class,
                              DECODER_VERSION, raw, batch, run_id, now))

    # a. write-ahead manifest rows
    _append(spark, cfg, spark.createDataFrame(_manifest_rows(plans, batch, "pending", run_id, now), MANIFEST_DDL),
            cfg.pipeline_path("manifest"), PENDING_APP_ID, batch)
    # b. the data, each append idempotent by (txnAppId, txnVersion)
    if bronze_df is not None:
        _append(spark, cfg, bronze_df, cfg.warehouse_path(BRONZE_TABLE), TXN_APP_ID, batch)
    if stmts:
        _append(spark, cfg, spark.createDataFrame(stmts, DDL_TABLE_DDL), cfg.pipeline_path("ddl"), TXN_APP_ID, batch)
    xa = _xa_rows(plans, run_id)
    if xa:
        _append(spark, cfg, spark.createDataFrame(xa, XA_DDL), cfg.pipeline_path("xa"), TXN_APP_ID, batch)
    if quar_rows:
        _append(spark, cfg, spark.createDataFrame(quar_rows, QUARANTINE_DDL), cfg.pipeline_path("quarantine"),
                TXN_APP_ID, batch)
    # c. the batch is done
    rows_by_file: Counter = Counter()
    for (name, op), n in op_counts.items():
        rows_by_file[name] += n
        stats.rows[op] += n
    _append(spark, cfg,
            spark.createDataFrame(_manifest_rows(plans, batch, "committed", run_id, now, rows_by_file), MANIFEST_DDL),
            cfg.pipeline_path("manifest"), TXN_APP_ID, batch)
    stats.statements += len(stmts)
    stats.quarantined += len(quar_rows)
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
            _append(spark, cfg, spark.createDataFrame([stats.run_row()], RUNS_DDL), cfg.pipeline_path("runs"))
        except Exception as log_error:  # noqa: BLE001 - never hide the run's own error
            if stats.status == "ok":
                raise
            print(f"warning: could not write the run log: {log_error}", file=sys.stderr)
    return stats


def _run(spark, cfg: PipelineConfig, stats: BronzeStats, now) -> None:
    ship_package(spark)
    files, ignored = list_binlogs(spark, cfg.input)
    stats.files_ignored = len(ignored)
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
    check_sequence(files, {r.file_seq: r.name for r in latest.values()}, cfg.accept_gaps)
    newest_done = max((r.file_seq for r in latest.values()), default=-1)
    if not cfg.accept_gaps:
        late = [f for f in files if f.name not in latest and f.file_seq < newest_done]
        if late:
            raise BronzeError(
                f"{late[0].name} is older than files already processed (up to number {newest_done}); "
                f"set accept_gaps: true to ingest it anyway"
            )

    # 2. plan, one batch at a time
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

    batch_plans: list[FilePlan] = []
    batch_bytes = 0
    copies: dict[str, str] = {}
    stack = contextlib.ExitStack()  # driver copies of remote files live until their batch is committed
    try:
        bar = tqdm(todo, desc="bronze: index", unit="file", file=sys.stderr, disable=not _progress_enabled(cfg))
        for f, prev, newest in bar:
            path = copies[f.name] = stack.enter_context(_driver_copy(spark, f))
            plan = plan_file(f, prev, path, newest, cfg)
            plan.sha256 = sha256_prefixes(path, [plan.end])[plan.end]
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
