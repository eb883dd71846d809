"""A private, throw-away MariaDB server for the test suite (real ``mariadbd``, no mocks).

Usage::

    from mariadb_server import MariaDBServer

    with MariaDBServer(tmp_path / "mdb", row_metadata="FULL") as srv:
        srv.sql("CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, v TEXT)")
        srv.sql("INSERT INTO t VALUES (1, 'x')", db="d")
        srv.query_rows("SELECT * FROM d.t")        # [['1', 'x']]
        srv.flush_logs()
        srv.binlog_files()                         # [.../binlog/binlog.000001, ...000002]

Each server is fully private: its own datadir, binlog directory, error log and unix socket under
``basedir`` (``--no-defaults --skip-networking``), so several servers with different settings can run
at once.  ``mariadb-install-db`` runs once per process into a template datadir which is then copied,
so a start takes well under a second.  Servers are always stopped: on ``stop()``, on context-manager
exit, at interpreter exit (``atexit``) and - on Linux - when the process that started them dies
(``PR_SET_PDEATHSIG``; note that this fires when the *thread* that started the server exits, so start
servers from the main thread or a long-lived one).

Result conventions of :meth:`MariaDBServer.query_rows`: the ``mariadb`` client in ``--batch`` mode
(without ``--raw``) escapes NUL, TAB, LF and backslash as ``\\0 \\t \\n \\\\``; these are unescaped
here.  SQL NULL is printed as the bare word ``NULL`` and becomes ``None`` - which means that a
*string* whose value is exactly ``NULL`` also comes back as ``None``.  Where that matters, or for
binary data (values are decoded as UTF-8 with ``surrogateescape``), select ``HEX(col)`` (NULL stays
NULL, everything else is hex digits) or use ``binary=True`` to get raw ``bytes``.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import Iterable, Sequence

__all__ = [
    "MariaDBServer",
    "MariaDBError",
    "find_binary",
    "mariadb_available",
    "MARIADBD",
    "MARIADB",
    "MARIADB_BINLOG",
    "MARIADB_INSTALL_DB",
]

_SEARCH_DIRS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/local/mysql/bin")


def find_binary(*names: str) -> str | None:
    """Absolute path of the first of ``names`` found on PATH or in the usual sbin/bin dirs."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
        for d in _SEARCH_DIRS:
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    return None


MARIADBD = find_binary("mariadbd", "mysqld")
MARIADB = find_binary("mariadb", "mysql")
MARIADB_BINLOG = find_binary("mariadb-binlog", "mysqlbinlog")
MARIADB_INSTALL_DB = find_binary("mariadb-install-db", "mysql_install_db")


def mariadb_available() -> tuple[bool, str]:
    """(True, "") when every binary needed to run a private server is installed, else (False, why)."""
    missing = [
        n
        for n, p in (
            ("mariadbd", MARIADBD),
            ("mariadb (client)", MARIADB),
            ("mariadb-install-db", MARIADB_INSTALL_DB),
            ("mariadb-binlog", MARIADB_BINLOG),
        )
        if p is None
    ]
    if missing:
        return False, "MariaDB not installed (missing: %s); run `make setup`" % ", ".join(missing)
    return True, ""


class MariaDBError(RuntimeError):
    """A server failed to start/stop or a statement failed; the message carries stderr / the error log."""


# ---------------------------------------------------------------------------------------------------
# Registry of live servers, stopped at interpreter exit.
_LIVE: "weakref.WeakSet[MariaDBServer]" = weakref.WeakSet()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _stop_all_servers() -> None:
    with _LIVE_LOCK:
        servers = list(_LIVE)
    for srv in servers:
        try:
            srv.stop(timeout=20)
        except Exception:  # pragma: no cover - best effort at exit
            pass


# prctl is looked up in the parent: the preexec_fn below runs in the forked child, where importing or
# dlopen()ing could deadlock if another thread (py4j, Spark) held a lock at fork time.
try:
    import ctypes

    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
    _PRCTL.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    _PRCTL.restype = ctypes.c_int
except Exception:  # pragma: no cover - non-Linux
    _PRCTL = None
_PR_SET_PDEATHSIG = 1
_SIGTERM = int(signal.SIGTERM)


def _set_pdeathsig() -> None:  # runs in the child between fork and exec
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, _SIGTERM, 0, 0, 0)


# ---------------------------------------------------------------------------------------------------
# Template datadir: mariadb-install-db once per process, copied for each server.
_TEMPLATE_LOCK = threading.Lock()
_TEMPLATE_DIR: Path | None = None


def _cleanup_template() -> None:
    if _TEMPLATE_DIR is not None:
        shutil.rmtree(_TEMPLATE_DIR.parent, ignore_errors=True)


def _template_datadir() -> Path:
    global _TEMPLATE_DIR
    with _TEMPLATE_LOCK:
        if _TEMPLATE_DIR is not None and (_TEMPLATE_DIR / "mysql").is_dir():
            return _TEMPLATE_DIR
        ok, why = mariadb_available()
        if not ok:
            raise MariaDBError(why)
        root = Path(tempfile.mkdtemp(prefix="mdb-template-"))
        datadir = root / "data"
        (root / "tmp").mkdir()
        cmd = [
            MARIADB_INSTALL_DB,
            "--no-defaults",  # must be the first option
            f"--datadir={datadir}",
            # its own temporary tables, not /tmp's: a bootstrap of another pytest worker at the same
            # moment failed with "Could not remove temporary table '/tmp/#sql-temptable-...'"
            f"--tmpdir={root / 'tmp'}",
            "--user=root",
            "--auth-root-authentication-method=normal",  # root@localhost without password
            "--skip-test-db",
            "--skip-name-resolve",
            "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=16M",
        ]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=180)
        if proc.returncode != 0 or not (datadir / "mysql").is_dir():
            out = proc.stdout.decode("utf-8", "replace")
            shutil.rmtree(root, ignore_errors=True)
            raise MariaDBError(f"mariadb-install-db failed (rc={proc.returncode}):\n{out[-4000:]}")
        _TEMPLATE_DIR = datadir
        atexit.register(_cleanup_template)
        return datadir


_BATCH_ESCAPES = {b"\\0": b"\x00", b"\\t": b"\t", b"\\n": b"\n", b"\\\\": b"\\"}
_BATCH_ESCAPE_RE = re.compile(rb"\\[0tn\\]")


def _unescape_batch(field: bytes) -> bytes:
    return _BATCH_ESCAPE_RE.sub(lambda m: _BATCH_ESCAPES[m.group(0)], field)


class MariaDBServer:
    """A private ``mariadbd`` with binary logging, datadir/socket/binlogs under ``basedir``.

    ``row_metadata`` is ``binlog_row_metadata`` (``NO_LOG`` | ``MINIMAL`` | ``FULL``), ``checksum`` is
    ``binlog_checksum`` (``CRC32`` | ``NONE``).  ``extra_args`` are appended to the ``mariadbd``
    command line (e.g. ``("--log-bin-compress=ON",)``).  The server runs with
    ``--default-time-zone=+00:00`` and root@localhost without a password over the unix socket.
    """

    def __init__(
        self,
        basedir: Path | str,
        *,
        server_id: int = 1,
        binlog_format: str = "ROW",
        row_image: str = "FULL",
        row_metadata: str = "MINIMAL",
        checksum: str = "CRC32",
        annotate_rows: bool = True,
        extra_args: Sequence[str] = (),
        start_timeout: float = 60.0,
        die_with_parent: bool = True,
    ) -> None:
        self.basedir = Path(basedir).resolve()
        self.server_id = int(server_id)
        self.binlog_format = binlog_format.upper()
        self.row_image = row_image.upper()
        self.row_metadata = row_metadata.upper()
        self.checksum = checksum.upper()
        self.annotate_rows = annotate_rows
        self.extra_args = tuple(extra_args)
        self.start_timeout = start_timeout
        self.die_with_parent = die_with_parent

        self.datadir = self.basedir / "data"
        self.binlog_dir = self.basedir / "binlog"
        self.binlog_basename = self.binlog_dir / "binlog"
        self.binlog_index = self.binlog_dir / "binlog.index"
        self.tmpdir = self.basedir / "tmp"
        self.files_dir = self.basedir / "files"  # secure_file_priv (SELECT INTO OUTFILE / LOAD DATA)
        self.error_log = self.basedir / "error.log"
        self.pid_file = self.basedir / "mariadbd.pid"
        self._socket_tmpdir: str | None = None
        self.socket = self._choose_socket()
        self._proc: subprocess.Popen | None = None
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ lifecycle
    def _choose_socket(self) -> Path:
        sock = self.basedir / "mariadbd.sock"
        if len(os.fsencode(str(sock))) > 100:  # sun_path is 108 bytes incl. the NUL
            self._socket_tmpdir = tempfile.mkdtemp(prefix="mdb")
            sock = Path(self._socket_tmpdir) / "s.sock"
        return sock

    def command_line(self) -> list[str]:
        """The full ``mariadbd`` command line used by :meth:`start`."""
        return [
            MARIADBD or "mariadbd",
            "--no-defaults",  # must be the first option
            f"--datadir={self.datadir}",
            f"--socket={self.socket}",
            f"--pid-file={self.pid_file}",
            f"--log-error={self.error_log}",
            f"--tmpdir={self.tmpdir}",
            f"--secure-file-priv={self.files_dir}",
            "--skip-networking",
            "--user=root",
            f"--server-id={self.server_id}",
            f"--log-bin={self.binlog_basename}",
            f"--log-bin-index={self.binlog_index}",
            f"--binlog-format={self.binlog_format}",
            f"--binlog-row-image={self.row_image}",
            f"--binlog-row-metadata={self.row_metadata}",
            f"--binlog-checksum={self.checksum}",
            f"--binlog-annotate-row-events={'ON' if self.annotate_rows else 'OFF'}",
            "--default-time-zone=+00:00",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
            "--max-allowed-packet=64M",
            "--sync-binlog=0",
            "--expire-logs-days=0",
            "--skip-name-resolve",
            "--skip-slave-start",
            "--max-connections=64",
            "--performance-schema=OFF",
            "--loose-feedback=OFF",
            "--innodb-buffer-pool-size=64M",
            "--innodb-log-file-size=16M",
            "--innodb-log-buffer-size=8M",
            "--innodb-flush-log-at-trx-commit=2",
            "--innodb-doublewrite=0",
            "--innodb-use-native-aio=0",  # io_uring/libaio are often unavailable in containers
            "--innodb-temp-data-file-path=ibtmp1:4M:autoextend",
            *self.extra_args,
        ]

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self) -> "MariaDBServer":
        """Initialise the datadir (first start only) and start the server; wait until it accepts
        connections on the socket.  Raises :class:`MariaDBError` with the error log tail on failure."""
        with self._lock:
            if self.running:
                return self
            ok, why = mariadb_available()
            if not ok:
                raise MariaDBError(why)
            for d in (self.basedir, self.binlog_dir, self.tmpdir, self.files_dir):
                d.mkdir(parents=True, exist_ok=True)
            if not self.socket.parent.is_dir():  # short socket dir removed by a previous stop()
                self.socket = self._choose_socket()
            if not (self.datadir / "mysql").is_dir():
                if self.datadir.exists():
                    shutil.rmtree(self.datadir)
                shutil.copytree(_template_datadir(), self.datadir, symlinks=True)
            try:
                self.socket.unlink()
            except FileNotFoundError:
                pass
            err_offset = self.error_log.stat().st_size if self.error_log.exists() else 0
            self._proc = subprocess.Popen(
                self.command_line(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,  # everything goes to --log-error
                preexec_fn=_set_pdeathsig if (self.die_with_parent and _PRCTL is not None) else None,
                start_new_session=True,  # not hit by the terminal's Ctrl-C; we stop it ourselves
            )
            with _LIVE_LOCK:
                _LIVE.add(self)
            deadline = time.monotonic() + self.start_timeout
            last_err = ""
            while True:
                if self._proc.poll() is not None:
                    rc = self._proc.returncode
                    self._proc = None
                    raise MariaDBError(
                        f"mariadbd exited with rc={rc} during start-up\n"
                        f"command: {' '.join(self.command_line())}\n"
                        f"error log ({self.error_log}):\n{self._error_log_tail(err_offset)}"
                    )
                if self.socket.exists():
                    proc = self._client(["-e", "SELECT 1"], timeout=10, check=False)
                    if proc.returncode == 0:
                        return self
                    last_err = proc.stderr.decode("utf-8", "replace")
                if time.monotonic() > deadline:
                    self._kill()
                    raise MariaDBError(
                        f"mariadbd did not accept connections within {self.start_timeout:.0f}s"
                        f" (last client error: {last_err.strip()})\n"
                        f"error log ({self.error_log}):\n{self._error_log_tail(err_offset)}"
                    )
                time.sleep(0.05)

    def stop(self, timeout: float = 60.0) -> None:
        """Clean shutdown (SIGTERM, which writes a STOP event to the binlog), SIGKILL after ``timeout``."""
        with self._lock:
            proc = self._proc
            if proc is not None:
                if proc.poll() is None:
                    try:
                        proc.send_signal(signal.SIGTERM)
                    except ProcessLookupError:
                        pass
                    try:
                        proc.wait(timeout=timeout)
                    except subprocess.TimeoutExpired:
                        self._kill()
                self._proc = None
            with _LIVE_LOCK:
                _LIVE.discard(self)
            if self._socket_tmpdir is not None:
                shutil.rmtree(self._socket_tmpdir, ignore_errors=True)
                self._socket_tmpdir = None

    def _kill(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
            except ProcessLookupError:
                pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:  # pragma: no cover
                pass

    def __enter__(self) -> "MariaDBServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self) -> None:  # pragma: no cover - last resort
        try:
            if self._proc is not None and self._proc.poll() is None:
                self._proc.terminate()
        except Exception:
            pass

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.running else "stopped"
        return (
            f"MariaDBServer({str(self.basedir)!r}, server_id={self.server_id}, "
            f"binlog_format={self.binlog_format}, row_image={self.row_image}, "
            f"row_metadata={self.row_metadata}, checksum={self.checksum}, {state})"
        )

    def _error_log_tail(self, offset: int = 0, max_chars: int = 6000) -> str:
        try:
            data = self.error_log.read_bytes()[offset:]
        except OSError as e:
            return f"<cannot read error log: {e}>"
        return data.decode("utf-8", "replace")[-max_chars:]

    def error_log_text(self) -> str:
        return self._error_log_tail(0, max_chars=10**9)

    # ------------------------------------------------------------------ SQL
    def client_args(self, db: str | None = None) -> list[str]:
        """Command line of the ``mariadb`` client connected to this server (batch mode)."""
        args = [
            MARIADB or "mariadb",
            "--no-defaults",
            f"--socket={self.socket}",
            "--user=root",
            "--default-character-set=utf8mb4",
            "--max-allowed-packet=64M",
            "--batch",
            "--skip-column-names",
        ]
        if db:
            args.append(f"--database={db}")
        return args

    def _client(self, extra: list[str], *, db=None, stdin: bytes | None = None, timeout=600, check=True):
        proc = subprocess.run(
            self.client_args(db) + extra,
            input=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            script = (stdin or b"").decode("utf-8", "replace")
            if len(script) > 2000:
                script = script[:2000] + f"... [{len(script)} chars]"
            raise MariaDBError(
                f"mariadb client failed (rc={proc.returncode}) on {self!r}:\n"
                f"{proc.stderr.decode('utf-8', 'replace').strip()}\n--- SQL ---\n{script}"
            )
        return proc

    def _run(self, sql: str | bytes, db: str | None, timeout: float) -> bytes:
        if not self.running:
            raise MariaDBError(f"server is not running: {self!r}")
        data = sql.encode("utf-8", "surrogateescape") if isinstance(sql, str) else sql
        return self._client([], db=db, stdin=data, timeout=timeout).stdout

    def sql(self, statement_or_script: str | bytes, db: str | None = None, *, timeout: float = 600) -> str:
        """Run one statement or a ``;``-separated script (fed on stdin, so DELIMITER works) in a single
        client session; return the client's batch output (tab-separated, no column names).
        Raises :class:`MariaDBError` (with the client's stderr, which names the failing line)."""
        return self._run(statement_or_script, db, timeout).decode("utf-8", "surrogateescape")

    def query_rows(
        self, sql: str | bytes, db: str | None = None, *, binary: bool = False, timeout: float = 600
    ) -> list[list]:
        """Rows of all result sets of ``sql`` as lists of ``str`` (``bytes`` if ``binary``); SQL NULL ->
        ``None``.  See the module docstring for the escaping rules and the ``'NULL'`` caveat."""
        out = self._run(sql, db, timeout)
        rows: list[list] = []
        if not out:
            return rows
        for line in out.split(b"\n")[:-1] if out.endswith(b"\n") else out.split(b"\n"):
            row: list = []
            for field in line.split(b"\t"):
                if field == b"NULL":
                    row.append(None)
                    continue
                value = _unescape_batch(field)
                row.append(value if binary else value.decode("utf-8", "surrogateescape"))
            rows.append(row)
        return rows

    def query_value(self, sql: str, db: str | None = None):
        """The single value of a one-row, one-column query (``None`` for NULL or no row)."""
        rows = self.query_rows(sql, db)
        return rows[0][0] if rows and rows[0] else None

    # ------------------------------------------------------------------ binlogs
    def flush_logs(self) -> Path:
        """``FLUSH BINARY LOGS``; returns the new (current) binlog file."""
        self.sql("FLUSH BINARY LOGS")
        return self.binlog_files()[-1]

    def binlog_files(self) -> list[Path]:
        """The binlog files in index order (read from the ``.index`` file)."""
        try:
            text = self.binlog_index.read_text("utf-8", "surrogateescape")
        except FileNotFoundError:
            return []
        files = []
        for line in text.splitlines():
            line = line.strip()
            if not line:
                continue
            p = Path(line)
            if not p.is_absolute():  # relative entries are relative to the datadir
                p = self.binlog_dir / p.name if (self.binlog_dir / p.name).exists() else self.datadir / p
            files.append(p)
        return files

    def master_status(self) -> tuple[str, int]:
        """(current binlog file name, position) from ``SHOW MASTER STATUS``."""
        row = self.query_rows("SHOW MASTER STATUS")[0]
        return row[0], int(row[1])

    def gtid_binlog_pos(self) -> str:
        return self.query_value("SELECT @@gtid_binlog_pos") or ""

    def variables(self, names: Iterable[str]) -> dict[str, str | None]:
        """Global variable values, e.g. ``variables(["binlog_format"])``."""
        names = list(names)
        sql = "SELECT " + ", ".join(f"@@GLOBAL.{n}" for n in names)
        return dict(zip(names, self.query_rows(sql)[0]))
