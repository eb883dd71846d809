"""A private HDFS for the test suite: Hadoop's MiniDFSCluster (one namenode, one datanode) in a
JVM of its own, on 127.0.0.1 and a free port. Real HDFS RPC; the code under test talks to it
with hdfs-native (pure Rust, no libhdfs), as delta-rs and pyarrow do in the pipeline.

The jars are ``org.apache.hadoop:hadoop-client-minicluster`` at the Hadoop version of pyspark's
own jars (with junit and hamcrest, which it loads), fetched once with the Maven client into
``~/.cache/binlog-delta/`` (as ``pipelines.delta_jars`` fetches delta-spark); the rest of the
classpath is pyspark's ``jars/``. A start takes about 10 s on two busy cores.

Usage::

    from hdfs_server import HdfsServer

    with HdfsServer(tmp_path / "hdfs") as hdfs:
        hdfs.uri("/wh")          # hdfs://127.0.0.1:<port>/wh
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pyspark

from server_process import ServerProcess, die_with_parent

JARS = Path(pyspark.__file__).resolve().parent / "jars"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "binlog-delta"


def hadoop_version(jars: Path = JARS) -> str:
    """The Hadoop version of pyspark's jars (``hadoop-client-api-<version>.jar``)."""
    for jar in jars.glob("hadoop-client-api-*.jar"):
        return re.match(r"hadoop-client-api-(.+)\.jar$", jar.name).group(1)
    raise RuntimeError(f"no hadoop-client-api jar in {jars}")


def missing_tools() -> str | None:
    """Why no MiniDFSCluster can start here (no java, no mvn), or None."""
    for tool in ("java", "mvn"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (make setup installs Java 17 and maven)"
    return None


def minicluster_jars(version: str | None = None, cache: Path = CACHE) -> list[str]:
    """The MiniDFSCluster's own jars (fetched with ``mvn dependency:copy`` unless cached)."""
    version = version or hadoop_version()
    folder = cache / f"hadoop-minicluster-{version}"
    wanted = [f"org.apache.hadoop:hadoop-client-minicluster:{version}", "junit:junit:4.13.2",
              "org.hamcrest:hamcrest-core:1.3"]
    names = [f"{a.split(':')[1]}-{a.split(':')[2]}.jar" for a in wanted]
    if not all((folder / n).is_file() for n in names):
        folder.mkdir(parents=True, exist_ok=True)
        for artifact in wanted:
            done = subprocess.run(["mvn", "-B", "-q", "dependency:copy", f"-Dartifact={artifact}",
                                   f"-DoutputDirectory={folder}"], capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"Maven did not deliver {artifact}: {(done.stdout + done.stderr)[-2000:]}")
    return [str(folder / n) for n in names]



class HdfsServer(ServerProcess):
    """A MiniDFSCluster (``org.apache.hadoop.test.MiniDFSClusterManager``) under ``basedir``."""

    stop_wait = 5.0  # (its data is thrown away: no need to wait for a clean shutdown)

    def __init__(self, basedir: Path):
        super().__init__()
        self.basedir = Path(basedir)
        self.started_in: float | None = None  # seconds the last start took

    def uri(self, path: str = "/") -> str:
        return f"hdfs://127.0.0.1:{self.port}/{path.lstrip('/')}"

    def start(self, timeout: float = 120.0) -> "HdfsServer":
        self.basedir.mkdir(parents=True, exist_ok=True)
        details = self.basedir / "details.json"
        details.unlink(missing_ok=True)
        classpath = os.pathsep.join([*minicluster_jars(), str(JARS / "*")])
        command = ["java", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   f"-Dtest.build.data={self.basedir / 'data'}",
                   "-Dhadoop.log.dir=" + str(self.basedir / "logs"), "-cp", classpath,
                   "org.apache.hadoop.test.MiniDFSClusterManager", "-format", "-datanodes", "1",
                   "-nnport", str(self.port), "-httpport", "0", "-writeDetails", str(details),
                   "-D", "dfs.namenode.rpc-bind-host=127.0.0.1", "-D", "dfs.datanode.address=127.0.0.1:0",
                   "-D", "dfs.datanode.ipc.address=127.0.0.1:0", "-D", "dfs.datanode.http.address=127.0.0.1:0",
                   "-D", "dfs.permissions.enabled=false"]
        started = time.monotonic()
        with open(self.basedir / "minidfs.log", "wb") as log:
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         preexec_fn=die_with_parent)
        self.stop_at_exit()
        while not (details.is_file() and details.stat().st_size > 0):
            if self.proc.poll() is not None:
                raise RuntimeError(f"MiniDFSCluster exited with {self.proc.returncode}: "
                                   f"{(self.basedir / 'minidfs.log').read_text()[-3000:]}")
            if time.monotonic() - started > timeout:
                self.stop()
                raise RuntimeError(f"MiniDFSCluster did not start within {timeout:g} s")
            time.sleep(0.2)
        assert json.loads(details.read_text())["namenode_port"] == self.port
        self.started_in = time.monotonic() - started
        return self
