"""A real Spark standalone cluster for the tests, from the PySpark distribution, all on 127.0.0.1:
one master (``org.apache.spark.deploy.master.Master``) and workers of one core each, each its own
JVM. Jobs go in with ``spark-submit --master spark://127.0.0.1:PORT``, as docs/deploy.md says.

    with StandaloneCluster(tmp_path, workers=2) as cluster:
        subprocess.run([*cluster.submit_command(), "--py-files", zip_path, "jobs/run_pipeline.py", ...])
        cluster.applications()          # what the master registered (its JSON API)
        cluster.executor_dirs(app_id)   # the executors each worker launched for an application

Only the processes started here are stopped, by their ids.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyspark

from server_process import free_port

SPARK_HOME = Path(pyspark.__file__).resolve().parent
# The master, the workers and the executors they launch are short-lived JVMs too: C1 only, as the
# tests' drivers (tests/conftest.py); C2's compiler threads took CPU the other tests wait for.
QUICK_JVM = "-XX:TieredStopAtLevel=1"


def cluster_env() -> dict[str, str]:
    """The environment of the cluster's JVMs and of spark-submit: this venv's Python for the
    Python workers (it has pyarrow and the decoder's accelerator), everything on 127.0.0.1."""
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_NO_DAEMONIZE": "1", "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM}


class StandaloneCluster:
    def __init__(self, workdir: Path, *, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.workdir = Path(workdir)
        self.n_workers, self.cores, self.memory = workers, cores, memory
        self.port, self.ui_port = free_port(), free_port()
        self.worker_ui_ports: list[int] = []
        self.procs: list[subprocess.Popen] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _start(self, name: str, args: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")
        proc = subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=cluster_env(),
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append(proc)
        return proc

    def _wait_for(self, name: str, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        path = self.workdir / f"{name}.log"
        while time.monotonic() < deadline:
            if text in path.read_text(errors="replace"):
                return
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.3)
        raise RuntimeError(f"{name} did not say {text!r} in {timeout} s:\n{path.read_text(errors='replace')[-3000:]}")

    def start(self) -> "StandaloneCluster":
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                               "--port", str(self.port), "--webui-port", str(self.ui_port)])
        self._wait_for("master", "I have been elected leader")
        for i in range(self.n_workers):
            ui = free_port()
            self.worker_ui_ports.append(ui)
            work = self.workdir / f"worker{i}"
            work.mkdir(exist_ok=True)
            self._start(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--cores", str(self.cores), "--memory", self.memory,
                                       "--webui-port", str(ui), "--work-dir", str(work), self.master_url])
            self._wait_for(f"worker{i}", "Successfully registered with master")
        return self

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def master_state(self) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=10) as r:
            return json.loads(r.read())

    def applications(self) -> list[dict]:
        """Every application the master registered (running and completed)."""
        state = self.master_state()
        return list(state.get("activeapps", [])) + list(state.get("completedapps", []))

    def executor_dirs(self, app_id: str) -> dict[int, list[Path]]:
        """Per worker, the executor folders it made for ``app_id`` (one per executor launched)."""
        return {i: sorted(p for p in (self.workdir / f"worker{i}" / app_id).glob("*") if p.is_dir())
                for i in range(self.n_workers)}

    def submit_command(self) -> list[str]:
        return [str(SPARK_HOME / "bin" / "spark-submit"), "--master", self.master_url,
                "--conf", "spark.executor.memory=768m",
                "--conf", f"spark.executor.extraJavaOptions={QUICK_JVM}", "--conf", "spark.driver.host=127.0.0.1",
                "--conf", "spark.driver.bindAddress=127.0.0.1"]
