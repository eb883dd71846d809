"""Look at quarantined input and try it again with the current decoder.

The bronze step (and the silver step, for rows that do not fit their schema)
write ``<warehouse>/_pipeline/quarantine``: one row per bad piece with the
file, the byte offset, the reason, the error class, the decoder version and
the raw bytes (see :mod:`pipelines.bronze`)::

    python -m pipelines.quarantine list --warehouse DIR [--file NAME] [--limit N] [--format table|jsonl]
    python -m pipelines.quarantine redecode --warehouse DIR [--input DIR] [--file NAME] [--offset N]
    python -m pipelines.quarantine list --warehouse s3a://bucket/wh [--config conf/pipeline.yaml]

``list`` groups the rows by error class and by where they belong (``db.table`` for the rows the silver
step set aside, ``binlog`` for the decoder's, which come before any table is known), with each
group's count, and shows the first ``--limit`` rows of each group (default 10; 0: the counts only;
``--format jsonl`` prints every row unless ``--limit`` is given).

A row is **resolved** when its file was read again later and landed past the row's offset: a
later committed batch of the manifest covers it (a corrected copy replaced a cut or damaged file,
see :mod:`pipelines.bronze`). The row stays, for the record, marked ``resolved``; ``redecode``
does not try it again.

The warehouse and the binlogs may be local folders or S3/HDFS URIs: they are reached with the
Hadoop options of the configuration's ``spark.conf`` (``spark.hadoop.fs.s3a.*``, see
:mod:`pipelines.storage`), else the AWS chain.

``redecode`` runs the current decoder over each row's stored bytes, with the
format description of the file they came from (read from the file the
manifest recorded, or from ``--input``/NAME), and reports whether they decode
now: ``ok`` (with the events and rows found) or ``fails`` (with today's error).
It lands nothing: a file that stopped at a bad event is read on by the next
bronze run once a corrected copy replaces it (same good prefix, see
:mod:`pipelines.bronze`); rows of a skipped transaction or an unknown event
need a fixed decoder and a re-ingest. Exit status: 0 when every selected row that is not
resolved decodes (or cannot be tried: a silver row has no bytes), 1 when some still fail, 2 for bad
arguments.

From Python:

>>> rows = read_quarantine("/data/wh")                                  # doctest: +SKIP
>>> redecode(rows[0], source="/data/binlogs/binlog.000002")             # doctest: +SKIP
Redecoded(ok=False, events=3, rows=0, message='binlog.000002: offset 1790: rows event ...')
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from pipelines.binlog.constants import BINLOG_MAGIC, COMMON_HEADER_LEN
from pipelines.binlog.errors import BinlogError
from pipelines.binlog.events import RowsEvent, UnknownEvent
from pipelines.binlog.framing import BinlogFile
from pipelines.binlog.stream import EventStream
from pipelines import delta_io, state, storage
from pipelines.bronze.schema import DECODER_VERSION
from pipelines.logs import get_logger

_log = get_logger(__name__)

DEFAULT_CONFIG = Path(__file__).resolve().parents[1] / "conf" / "pipeline.yaml"



@dataclass(frozen=True)
class Redecoded:
    """The outcome of decoding one quarantine row again.

    ``ok`` is None when it could not be tried (no bytes, source file gone)."""

    ok: bool | None
    events: int = 0
    rows: int = 0
    message: str = ""


def read_quarantine(warehouse: str) -> list[dict]:
    """Every quarantine row of ``warehouse``, in file order (``file_seq``, ``offset``).

    >>> [(r["file"], r["offset"], r["error_class"]) for r in read_quarantine("/data/wh")]  # doctest: +SKIP
    [('binlog.000002', 1790, 'CorruptEvent')]
    """
    rows = state.rows_in(warehouse, state.QUARANTINE)
    return sorted(rows, key=lambda r: (r["file_seq"] if r["file_seq"] is not None else -1, r["file"] or "",
                                       r["offset"] if r["offset"] is not None else -1))


BINLOG_GROUP = "binlog"  # where the decoder's rows belong: before any table is known
_SILVER_REASON = re.compile(r"^silver: (?P<table>.*?) _seq \d+: ", re.DOTALL)


def where_of(row: dict) -> str:
    """Where a quarantine row belongs: ``db.table`` for a row the silver step set aside (its reason
    starts ``silver: db.table _seq N: ``), else :data:`BINLOG_GROUP`.

    >>> where_of({"reason": "silver: shop.t _seq 0000000002: no such column"}), where_of({"reason": "x"})
    ('shop.t', 'binlog')
    """
    m = _SILVER_REASON.match(row.get("reason") or "")
    return m.group("table") if m else BINLOG_GROUP


def resolved(rows: Sequence[dict], manifest_rows: Sequence[dict]) -> list[bool]:
    """For each quarantine row of ``rows``: did a later committed batch of its file land past its
    offset (``start_pos <= offset < complete_until``, ``batch`` after the row's)? A pure function
    over the rows of ``_pipeline/quarantine`` and ``_pipeline/manifest``.

    >>> q = {"file": "b.7", "offset": 900, "batch": 3}
    >>> m = [{"name": "b.7", "phase": "committed", "batch": 5, "start_pos": 700, "complete_until": 4000}]
    >>> resolved([q, dict(q, batch=5)], m)
    [True, False]
    """
    landed: dict[str, list[tuple[int, int, int]]] = {}
    for m in manifest_rows:
        if m["phase"] == "committed" and m["batch"] is not None:
            landed.setdefault(m["name"], []).append((m["batch"], m["start_pos"] or 0, m["complete_until"] or 0))
    out = []
    for r in rows:
        batch, offset = r.get("batch"), r.get("offset")
        out.append(batch is not None and offset is not None and any(
            b > batch and start <= offset < until for b, start, until in landed.get(r.get("file"), ())))
    return out


def source_paths(warehouse: str) -> dict[str, str]:
    """File name -> the path the manifest last recorded for it (a local path, or the URI of a
    remote file)."""
    from pipelines.bronze import local_path

    latest = state.latest_files(state.rows_in(warehouse, state.MANIFEST))
    out = {}
    for name, r in latest.items():
        p = local_path(r["path"] or "") or r["path"]
        if p:
            out[name] = p
    return out


def _exists(path: str) -> bool:
    """Is there a file at ``path`` (local, or remote with this process's storage settings)?"""
    from pyarrow import fs as pafs

    if not storage.is_remote(path):
        return os.path.exists(path)
    fs, where = storage.arrow_filesystem(path)
    return fs.get_file_info(where).type == pafs.FileType.File


def _format_description(source: str) -> bytes:
    """The magic and FORMAT_DESCRIPTION event of ``source`` (checked by decoding them); a remote
    file is read through pyarrow (:func:`pipelines.storage.arrow_filesystem`)."""
    fs, where = storage.arrow_filesystem(source)
    with fs.open_input_file(where) as fh:
        head = fh.read_at(4 + COMMON_HEADER_LEN, 0)
        if len(head) < 4 + COMMON_HEADER_LEN:
            raise BinlogError("too short for a format description", file=source, offset=4)
        length = int.from_bytes(head[4 + 9 : 4 + 13], "little")
        data = fh.read_at(4 + min(length, 1 << 16), 0)
    with BinlogFile(data, name=source):
        pass
    return data


def _decode(path: str, name: str, start: int, end: int) -> Redecoded:
    events = rows = 0
    try:
        with EventStream(path, name=name, skip_ignorable=True) as st:
            for ev in st.events(start, end, flatten=True):
                if type(ev) is UnknownEvent:
                    return Redecoded(False, events, rows, f"{name}: offset {ev.header.pos}: event type "
                                                          f"{ev.header.type_code} is still unknown to decoder "
                                                          f"{DECODER_VERSION}")
                events += 1
                if type(ev) is RowsEvent:
                    rows += len(ev.rows)
    except BinlogError as e:
        return Redecoded(False, events, rows, str(e))
    return Redecoded(True, events, rows, f"decodes with decoder {DECODER_VERSION}: {events} event(s), {rows} row(s)")


def redecode(row: dict, source: str | None) -> Redecoded:
    """Decode the stored bytes of one quarantine row with the current decoder.

    ``source`` is the binlog file the row came from (for its format
    description); the bytes decoded are the row's ``raw``, at their original
    offsets, never the file's current content."""
    raw, name, offset = row.get("raw"), row.get("file") or "?", row.get("offset")
    if raw is None or offset is None:
        return Redecoded(None, message=f"no raw bytes to decode ({row.get('error_class')}): "
                                       "a schema problem of the silver step, not of the decoder")
    raw = bytes(raw)
    if offset < 4 + COMMON_HEADER_LEN:  # the file's own start: the bytes are all there is
        with tempfile.NamedTemporaryFile(prefix="redecode-", suffix=".bin") as tmp:
            tmp.write(BINLOG_MAGIC[:offset] + raw)
            tmp.flush()
            try:
                with BinlogFile(tmp.name, name=name):
                    pass
            except BinlogError as e:
                return Redecoded(False, message=str(e))
            return _decode(tmp.name, name, 4, offset + len(raw))
    if source is None or not _exists(source):
        return Redecoded(None, message=f"{name}: the source file is not at {source or '(unknown)'}; its format "
                                       "description is needed (pass --input)")
    try:
        head = _format_description(source)
    except (OSError, BinlogError) as e:
        return Redecoded(None, message=f"{name}: cannot read the format description of {source}: {e}")
    if offset < len(head):
        return Redecoded(False, message=f"{name}: offset {offset} lies inside the format description")
    with tempfile.NamedTemporaryFile(prefix="redecode-", suffix=".bin") as tmp:
        tmp.write(head)  # sparse: the format description, a hole, the stored bytes at their offset
        tmp.seek(offset)
        tmp.write(raw)
        tmp.flush()
        return _decode(tmp.name, name, offset, offset + len(raw))


# -- command line ------------------------------------------------------------------------


def _select(rows: list[dict], args) -> list[dict]:
    if args.file:
        rows = [r for r in rows if r["file"] == args.file]
    if getattr(args, "offset", None) is not None:
        rows = [r for r in rows if r["offset"] == args.offset]
    return rows


def _short(text: str | None, n: int = 160) -> str:
    text = (text or "").replace("\n", " ")
    return text if len(text) <= n else text[: n - 3] + "..."


def _marked(warehouse: str, args) -> list[dict]:
    """The selected rows, each with ``where`` (:func:`where_of`) and ``resolved`` (:func:`resolved`)."""
    rows = _select(read_quarantine(warehouse), args)
    done = resolved(rows, state.rows_in(warehouse, state.MANIFEST))
    return [dict(r, where=where_of(r), resolved=d) for r, d in zip(rows, done)]


def group_rows(rows: Sequence[dict]) -> list[tuple[tuple[str, str], list[dict]]]:
    """``rows`` (:func:`_marked`) grouped by ``(error_class, where)``, the biggest group first; in a
    group the open rows first, in file order."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r["error_class"] or "?", r["where"]), []).append(r)
    for items in groups.values():
        items.sort(key=lambda r: r["resolved"])  # (stable: file order within open and resolved)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def _list(args) -> int:
    rows = _marked(args.warehouse, args)
    groups = group_rows(rows)
    limit = args.limit if args.limit is not None else (None if args.format == "jsonl" else 10)
    for (cls, where), items in groups:
        done = sum(r["resolved"] for r in items)
        if args.format != "jsonl":
            print(f"{cls}\t{where}\t{len(items)} row(s)" + (f", {done} resolved" if done else ""))
        shown = items if limit is None else items[:limit]
        for r in shown:
            item = {k: r[k] for k in ("file", "file_seq", "offset", "error_class", "decoder_version", "reason",
                                      "run_id", "where", "resolved")}
            item["raw_bytes"] = len(r["raw"]) if r["raw"] is not None else None
            item["ts"] = r["ts"].isoformat() if r.get("ts") is not None else None
            if args.format == "jsonl":
                print(json.dumps(item, ensure_ascii=False))
                continue
            size = "-" if item["raw_bytes"] is None else f"{item['raw_bytes']} B"
            print(f"  {r['file']}\t{r['offset']}\t{r['error_class']}\t{r['decoder_version']}\t{size}\t"
                  + ("resolved\t" if r["resolved"] else "") + _short(r["reason"]))
        if args.format != "jsonl" and len(shown) < len(items):
            print(f"  ... {len(items) - len(shown)} more (--limit N shows more; --file NAME one file's)")
    if args.format != "jsonl":
        done = sum(r["resolved"] for r in rows)
        print(f"{len(rows)} quarantine row(s) in {len(groups)} group(s): {len(rows) - done} open, {done} resolved "
              "(their file landed later)", file=sys.stderr)
    return 0


def _redecode(args) -> int:
    rows = _marked(args.warehouse, args)
    sources = source_paths(args.warehouse)
    failed = done = 0
    for r in rows:
        if r["resolved"]:
            done += 1
            res, word = Redecoded(None, message="resolved: its file landed past this offset later"), "resolved"
        else:
            src = f"{args.input.rstrip('/')}/{r['file']}" if args.input else sources.get(r["file"])
            res = redecode(r, src)
            word = {True: "ok", False: "fails", None: "skipped"}[res.ok]
            failed += res.ok is False
        if args.format == "jsonl":
            print(json.dumps({"file": r["file"], "offset": r["offset"], "error_class": r["error_class"],
                              "stored_by": r["decoder_version"], "decoder_version": DECODER_VERSION,
                              "result": word, "events": res.events, "rows": res.rows, "message": res.message},
                             ensure_ascii=False))
        else:
            print(f"{r['file']}\t{r['offset']}\t{r['error_class']}\t{word}\t{_short(res.message)}")
    if args.format != "jsonl":
        print(f"{len(rows)} row(s): {len(rows) - failed - done} not failing, {failed} still failing, {done} resolved "
              f"(decoder {DECODER_VERSION})", file=sys.stderr)
    return 1 if failed else 0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m pipelines.quarantine", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for name, text in (("list", "show the quarantine rows"),
                       ("redecode", "decode each row's bytes again with the current decoder")):
        s = sub.add_parser(name, help=text)
        s.add_argument("--warehouse", required=True, help="the warehouse folder (a local path, s3a://, hdfs://)")
        s.add_argument("--config", default=str(DEFAULT_CONFIG),
                       help="YAML configuration whose spark.conf has the S3/HDFS settings (default: conf/pipeline.yaml)")
        s.add_argument("--file", help="only rows of this binlog file (base name)")
        s.add_argument("--format", choices=("table", "jsonl"), default="table")
        if name == "list":
            s.add_argument("--limit", type=int, help="rows shown per group (default 10 for the table, all for "
                                                     "jsonl; 0: the counts only)")
        if name == "redecode":
            s.add_argument("--input", help="folder holding the binlog files (default: the paths in the manifest)")
            s.add_argument("--offset", type=int, help="only the row at this offset")
    return p.parse_args(argv)


def _use_storage_of(config: str, warehouse: str) -> None:
    """This process's storage settings: the configuration's ``spark.conf`` (``spark.hadoop.*``).
    A configuration that cannot be read only matters for a remote warehouse: a warning says so."""
    from pipelines.config import ConfigError, load_config

    try:
        cfg = load_config(config, {"warehouse": warehouse})
    except ConfigError as e:
        if storage.is_remote(warehouse):
            _log.warning(f"no storage settings from {config}: {str(e).splitlines()[0]}")
        return
    storage.use(storage.from_spark_conf(cfg.spark.conf))


def _is_folder(warehouse: str) -> bool:
    from pyarrow import fs as pafs

    if not storage.is_remote(warehouse):
        return os.path.isdir(warehouse)
    fs, where = storage.arrow_filesystem(warehouse)
    return fs.get_file_info(where).type == pafs.FileType.Directory


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        _use_storage_of(args.config, args.warehouse)
        found = _is_folder(args.warehouse)
    except storage.StorageError as e:
        _log.error(str(e))
        return 2
    except OSError as e:
        _log.error(f"warehouse {args.warehouse} cannot be reached: {e}")
        return 2
    if not found:
        _log.error(f"warehouse {args.warehouse} is not a folder")
        return 2
    return _list(args) if args.command == "list" else _redecode(args)


if __name__ == "__main__":
    delta_io.exit_process(main())  # (not sys.exit: delta_io.exit_process says why)
