"""Issue 36: a run that did not do something says so, in a ``warning:`` line on stderr and in the
``warnings`` count of its row in ``_pipeline/runs`` (docs/errors.md), and still ends ``ok``:

* a folder without binlog files (empty, or other names only);
* a newest file cut in the middle of an event: which file, from which byte it waits;
* a server change inside one series (a failover or an upgrade): both files, both servers;
* changes logged as statements (``binlog_format=STATEMENT``/``MIXED``): the server setting that fixes it.

The jobs run as subprocesses on both Delta backends.
"""
from __future__ import annotations

import datetime as _dt
import os
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from pipelines import delta_io, state
from pipelines.binlog.constants import COMMON_HEADER_LEN
from pipelines.binlog.framing import BinlogFile
from pipelines.config import load_config
from spark_fixtures import delta_backend, spark  # noqa: F401

pytestmark = [pytest.mark.spark]

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples" / "binlogs"


def run_job(inp: Path, wh: Path, backend: str, script: str = "ingest_bronze.py") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    proc = subprocess.run([sys.executable, str(REPO / "jobs" / script), "--binlog-dir", str(inp), "--warehouse",
                           str(wh), "--no-progress", "--delta-backend", backend],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    return proc


def warnings_of(proc: subprocess.CompletedProcess) -> list[str]:
    return [ln[len("warning: "):] for ln in proc.stderr.splitlines() if ln.startswith("warning: ")]


def runs(wh: Path) -> list[dict]:
    return sorted(state.rows_in(str(wh), state.RUNS), key=lambda r: r["started_at"])


def with_server(data: bytes, server_id: int, version: str) -> bytes:
    """``data`` (a binlog file with CRC32 checksums) as if another server had written it: its
    FORMAT_DESCRIPTION's header server_id and server version changed, its CRC32 made right."""
    pos = 4
    length = struct.unpack_from("<I", data, pos + 9)[0]
    ev = bytearray(data[pos:pos + length])
    struct.pack_into("<I", ev, 5, server_id)
    ev[COMMON_HEADER_LEN + 2:COMMON_HEADER_LEN + 52] = version.encode().ljust(50, b"\0")
    struct.pack_into("<I", ev, length - 4, zlib.crc32(bytes(ev[:-4])))
    return data[:pos] + bytes(ev) + data[pos + length:]


def test_a_folder_without_binlogs_says_so(tmp_path, delta_backend):
    inp = tmp_path / "in"
    inp.mkdir()
    (inp / "notes.txt").write_text("not a binlog")
    proc = run_job(inp, tmp_path / "wh", delta_backend)
    assert "bronze run" in proc.stdout and " ok: 0 file(s) read" in proc.stdout and "1 warning(s)" in proc.stdout
    assert warnings_of(proc) == [f"{inp} holds no binlog files (names like binlog.000001): nothing read; "
                                 f"1 other name(s) ignored: notes.txt"]
    assert [(r["step"], r["status"], r["warnings"]) for r in runs(tmp_path / "wh")] == [("bronze", "ok", 1)]

    (inp / "binlog.000001").write_bytes(b"not a binlog either")  # a binlog's name, other bytes
    again = run_job(inp, tmp_path / "wh", delta_backend)
    assert " ok: 1 file(s) read" in again.stdout and "1 quarantined" in again.stdout
    assert warnings_of(again) == ["binlog.000001: offset 0: not a binlog: starts with 6e 6f 74 20, expected fe 62 69 6e: "
                                  "quarantined, the file stops there (see _pipeline/quarantine)"]
    assert [r["warnings"] for r in runs(tmp_path / "wh")] == [1, 1]


def test_a_cut_newest_file_and_a_server_change_are_said(tmp_path):
    # (bronze's reading and its words: one backend; the runs table's count on both is the tests above
    # and below)
    delta_backend = "rs"
    inp = tmp_path / "in"
    inp.mkdir()
    for name in ("binlog.000001", "binlog.000002"):
        shutil.copyfile(SAMPLES / name, inp / name)
    assert warnings_of(run_job(inp, tmp_path / "wh", delta_backend)) == []
    # then (a run later: the server of binlog.000002 comes from the manifest) another server's
    # file, and the first server's again, cut mid-event
    third = (SAMPLES / "binlog.000003").read_bytes()
    (inp / "binlog.000003").write_bytes(with_server(third, 2, "10.6.99-MariaDB-log"))
    (inp / "binlog.000004").write_bytes((SAMPLES / "binlog.000004").read_bytes()[:2000])
    first = run_job(inp, tmp_path / "wh", delta_backend)
    with BinlogFile(str(SAMPLES / "binlog.000003")) as bf:
        v = bf.format.server_version  # the samples' own server
    said = warnings_of(first)
    assert said[:2] == [
        f"binlog.000003 was written by another server than binlog.000002 before it: server_id 2, version "
        f"10.6.99-MariaDB-log after server_id 1, version {v} (a failover, a restore or an upgrade?): going on",
        f"binlog.000004 was written by another server than binlog.000003 before it: server_id 1, version {v} "
        f"after server_id 2, version 10.6.99-MariaDB-log (a failover, a restore or an upgrade?): going on",
    ]
    tail = said[2:]
    assert len(tail) == 1 and tail[0].startswith("binlog.000004 ends in an unfinished event or transaction: bytes ")
    assert tail[0].endswith(" to 2000 wait for the rest (the next run reads on from byte "
                            f"{tail[0].split('bytes ')[1].split(' ')[0]})")
    assert " ok: 2 file(s) read" in first.stdout and "3 warning(s)" in first.stdout

    again = run_job(inp, tmp_path / "wh", delta_backend)  # nothing new: the tail still waits, and says so
    assert warnings_of(again) == tail
    assert [(r["status"], r["warnings"]) for r in runs(tmp_path / "wh")] == [("ok", 0), ("ok", 3), ("ok", 1)]


def test_statement_format_changes_name_the_server_setting(tmp_path, corpus_dir):
    delta_backend = "rs"  # (bronze's reading and its words: one backend)
    inp = tmp_path / "in"
    inp.mkdir()
    shutil.copyfile(corpus_dir / "mariadb-10.11" / "binlogs" / "binlog.000014", inp / "binlog.000014")
    proc = run_job(inp, tmp_path / "wh", delta_backend)
    said = [w for w in warnings_of(proc) if "logged as statements" in w]
    quarantined = [r for r in state.rows_in(str(tmp_path / "wh"), state.QUARANTINE)
                   if r["error_class"] == "StatementFormat"]
    assert quarantined
    assert said == [f"{len(quarantined)} change(s) in binlog.000014 were logged as statements, not rows: quarantined "
                    f"(StatementFormat), not in silver; set binlog_format=ROW (and binlog_row_image=FULL, "
                    f"binlog_row_metadata=FULL for column names) on the source server"]
    assert runs(tmp_path / "wh")[-1]["warnings"] == len(warnings_of(proc))


def test_an_old_runs_table_gains_the_warnings_column(tmp_path, spark, delta_backend):
    cfg = load_config(None, {"input": str(tmp_path / "in"), "warehouse": str(tmp_path / "wh"),
                             "delta.backend": delta_backend})
    old_layout = state.RUNS_LAYOUT.remove(state.RUNS_LAYOUT.get_field_index("warnings"))
    now = _dt.datetime.now(_dt.timezone.utc)
    old = ("r0", "bronze", now, now, 1, 0, 0, 5, 1, 0, 0, 0, 0, 100, 0.5, 0.0, None, "ok", None)
    delta_io.open_table(state.path(cfg, state.RUNS), delta_backend, spark).append_rows([old], old_layout)
    state.log_run(spark, cfg, ("r1",) + old[1:] + (2,), True)
    got = {r["run_id"]: r["warnings"] for r in runs(tmp_path / "wh")}
    assert got == {"r0": None, "r1": 2}
