"""A private S3 API server for the test suite: moto's server (``moto[server]`` from PyPI) in a
subprocess on 127.0.0.1 and a free port. Real HTTP, real S3 requests (conditional writes
included: ``If-None-Match: *`` and ``If-Match`` answer 412), no mocks in the code under test.

Usage::

    from s3_server import S3Server

    with S3Server() as s3:
        bucket = s3.bucket()                                 # a new, empty bucket
        spark_conf = s3.spark_conf()                         # spark.hadoop.fs.s3a.* for it
        s3.client().put_object(Bucket=bucket, Key="k", Body=b"v")

Every bucket the tests make is new (``bucket()``), so tests share one server. The server is
stopped on ``stop()``, at context exit, at interpreter exit, and (Linux) when the process that
started it dies.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from server_process import ServerProcess, die_with_parent

ACCESS_KEY, SECRET_KEY, REGION = "moto-test-key", "moto-test-secret", "us-east-1"


def moto_server_command() -> list[str] | None:
    """The ``moto_server`` command of this interpreter's environment, or None when moto is missing."""
    beside = Path(sys.executable).with_name("moto_server")
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("moto_server")
    return [found] if found else None



class S3Server(ServerProcess):
    """moto's S3 server on ``127.0.0.1:<port>`` (see the module docstring)."""

    def __init__(self, log_dir: Path | None = None):
        super().__init__()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(log_dir or "/tmp") / f"moto-{self.port}.log"

    def start(self, timeout: float = 30.0) -> "S3Server":
        command = moto_server_command()
        if command is None:
            raise RuntimeError("moto_server not found: pip install -r requirements.txt (moto[server])")
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen([*command, "-H", "127.0.0.1", "-p", str(self.port)], stdout=log,
                                         stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent)
        self.stop_at_exit()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.proc.returncode}: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                    return self
            except (urllib.error.URLError, ConnectionError, OSError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto_server did not answer on {self.endpoint} within {timeout:g} s")
                time.sleep(0.1)

    # -- for the tests

    def client(self):
        """A boto3 S3 client of this server (for setting up and checking, not for the code under test)."""
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name=REGION)

    def bucket(self, prefix: str = "t") -> str:
        """A new, empty bucket."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def hadoop_options(self) -> dict[str, str]:
        """The Hadoop S3A options that reach this server: endpoint, keys, path style, no TLS."""
        return {
            "fs.s3a.endpoint": f"127.0.0.1:{self.port}",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.path.style.access": "true",
            "fs.s3a.access.key": ACCESS_KEY,
            "fs.s3a.secret.key": SECRET_KEY,
            "fs.s3a.endpoint.region": REGION,
            "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        }

    def spark_conf(self) -> dict[str, str]:
        """The same as Spark settings (``spark.hadoop.fs.s3a.*``), as a job's ``spark.conf`` takes them."""
        return {f"spark.hadoop.{k}": v for k, v in self.hadoop_options().items()}


def environment_without_aws(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without any ``AWS_*`` variable: what a
    job sees on a machine whose only S3 settings are the Spark ones."""
    return {k: v for k, v in (os.environ if base is None else base).items() if not k.startswith("AWS_")}
