"""A private server the suite starts as a child process (moto's S3 server, a MiniDFSCluster): a
free port on 127.0.0.1, stopped when its ``with`` block ends. Subclasses give ``start``."""
from __future__ import annotations

import atexit
import ctypes
import signal
import socket
import subprocess

try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except Exception:  # pragma: no cover - non-Linux
    _PRCTL = None


def die_with_parent() -> None:
    """``preexec_fn`` of the server's Popen (runs in the child between fork and exec): the server
    gets SIGTERM when the test process dies, even by SIGKILL."""
    if _PRCTL is not None:
        _PRCTL(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    stop_wait = 10.0  # seconds a terminated server may take before it is killed

    def __init__(self):
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 30.0) -> "ServerProcess":
        raise NotImplementedError

    def stop_at_exit(self) -> None:
        atexit.register(self.stop)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(self.stop_wait)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
