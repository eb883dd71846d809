"""Two JVMs appending to one Delta table on S3 at once, round after round, and what landed.

Each writer is its own Python process with its own local Spark session (``build_session(delta=True,
s3a=True)``: the LogStore the session builder picks, or the one named). Writer 0 creates the table;
then in every round both wait at a file barrier and append one row ``(writer, round)`` with the
Delta transaction id ``(writer-<w>, <round>)``. Afterwards the table's log is read back with boto3
(no Spark): each commit's transaction ids and added files, and the rows of every added file.

A commit is *lost* when its writer's append returned normally but no version of the log holds its
transaction id: with Delta's ``S3SingleDriverLogStore`` two JVMs can both write ``N.json``, and the
later PUT replaces the earlier commit.

Run by tests/test_s3_log_store.py; by hand, to compare the LogStores (reports the loss rate)::

    PYTHONPATH=. .venv/bin/python tests/log_store_race.py --races 2 --rounds 15

On 2 shared cores (moto's server), two races of 15 rounds each: Delta's ``S3SingleDriverLogStore``
lost 2 of 60 appends that had returned normally (one a race: two of 30 colliding rounds), and the
table had 30 versions for 31 commits; ``ConditionalPutS3LogStore`` lost none, with 15 commit PUTs
refused (412) a race, one per round.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_S3_LOG_STORE = "io.delta.storage.S3SingleDriverLogStore"

_WRITER = textwrap.dedent("""
    import json, os, sys, time
    started = time.monotonic()
    args = json.loads(sys.argv[1])
    from pipelines.spark_session import build_session
    spark = build_session(f"race-{args['writer']}", "local[1]", extra_conf=args["conf"], delta=True, s3a=True)
    spark.sparkContext.setLogLevel("ERROR")
    jvm, path, me, other = spark._jvm, args["path"], args["writer"], 1 - args["writer"]
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, path)
    store = log.store().getDelegate(jvm.org.apache.hadoop.fs.Path(path)).logStoreImpl()
    print("STORE", store.getClass().getName(), flush=True)
    print("SESSION", round(time.monotonic() - started, 1), flush=True)

    def barrier(name, timeout=300):
        open(os.path.join(args["barrier"], f"{name}.{me}"), "w").close()
        deadline = time.monotonic() + timeout
        while not os.path.exists(os.path.join(args["barrier"], f"{name}.{other}")):
            if time.monotonic() > deadline:
                sys.exit(f"writer {me}: the other writer did not reach {name} within {timeout} s")
            time.sleep(0.002)

    schema = "writer INT, round INT"
    if me == 0:
        spark.createDataFrame([], schema).write.format("delta").save(path)
    barrier("created")
    outcomes = {}
    appending = time.monotonic()
    for r in range(args["rounds"]):
        barrier(f"round-{r}")
        try:
            (spark.createDataFrame([(me, r)], schema).write.format("delta").mode("append")
             .option("txnAppId", f"writer-{me}").option("txnVersion", r).save(path))
            outcomes[r] = "ok"
        except Exception as e:  # (reported, not raised: the other writer goes on)
            outcomes[r] = type(e).__name__ + ": " + str(e).splitlines()[0][:200]
    print("OUTCOMES", json.dumps(outcomes), flush=True)
    print("APPENDS", round(time.monotonic() - appending, 1), flush=True)
    spark.stop()
""")


@dataclass
class RaceResult:
    """What two writers reported and what the table's log holds."""

    rounds: int
    stores: list[str]
    reported_ok: set[tuple[int, int]]              # (writer, round) whose append returned normally
    failures: dict[tuple[int, int], str]           # (writer, round) -> the error its append raised
    versions: list[int]                            # every N of _delta_log/N.json
    txns: Counter = field(default_factory=Counter)  # (writer, round) -> how many versions hold its txn
    adds_per_version: dict[int, int] = field(default_factory=dict)
    rows: list[tuple[int, int]] = field(default_factory=list)  # the rows of every added file
    seconds: list[tuple[float, float]] = field(default_factory=list)  # per writer: session start, appends
    refused: int = 0  # commit PUTs the S3 server answered 412 (a taken version, a conditional PUT)

    @property
    def lost(self) -> set[tuple[int, int]]:
        """Appends that returned normally and that no version holds."""
        return {k for k in self.reported_ok if self.txns[k] == 0}

    @property
    def contiguous(self) -> bool:
        return self.versions == list(range(len(self.versions)))

    def summary(self) -> str:
        return (f"{len(self.reported_ok)} appends ok, {len(self.failures)} failed, {len(self.versions)} versions "
                f"({'contiguous' if self.contiguous else 'with gaps'}), {len(self.rows)} rows, "
                f"{self.refused} commit PUTs refused (412), lost: {sorted(self.lost) or 'none'}; "
                f"seconds (session start, appends) per writer: {self.seconds}")


def race(s3, tmp: Path, rounds: int, log_store_class: str | None = None, timeout: float = 900) -> RaceResult:
    """Two writer processes, ``rounds`` appends each, on a new table in a new bucket of ``s3``
    (an :class:`s3_server.S3Server`); ``log_store_class`` overrides the session builder's LogStore."""
    bucket = s3.bucket("race")
    path = f"s3a://{bucket}/table"
    barrier = tmp / f"barrier-{bucket}"
    barrier.mkdir(parents=True)
    from spark_fixtures import TEST_CONF  # (small-job settings: these appends are one row each)

    conf = {**TEST_CONF, **s3.spark_conf()}
    if log_store_class:
        from pipelines.log_store import spark_conf

        conf.update(spark_conf(log_store_class))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, json.dumps(
        {"path": path, "writer": w, "rounds": rounds, "barrier": str(barrier), "conf": conf})],
        cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in (0, 1)]
    deadline = time.monotonic() + timeout
    outputs = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"the writers did not finish {rounds} rounds within {timeout:g} s")
        if p.returncode != 0:
            for q in procs:
                q.kill()
            raise AssertionError(f"a writer exited with {p.returncode}:\n{err[-4000:]}")
        outputs.append(out)
    stores, reported_ok, failures, seconds = [], set(), {}, []
    for w, out in enumerate(outputs):
        lines = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
        stores.append(lines["STORE"])
        seconds.append((float(lines["SESSION"]), float(lines["APPENDS"])))
        for r, outcome in json.loads(lines["OUTCOMES"]).items():
            if outcome == "ok":
                reported_ok.add((w, int(r)))
            else:
                failures[(w, int(r))] = outcome
    result = RaceResult(rounds, stores, reported_ok, failures, [], seconds=seconds)
    _read_log(s3.client(), bucket, "table", result)
    commit_put = re.compile(rf'"\S*PUT /{bucket}/table/_delta_log/\d{{20}}\.json HTTP/1\.1\S*" 412 ')
    result.refused = sum(1 for line in Path(s3.log_path).read_text(errors="replace").splitlines() if commit_put.search(line))
    return result


def _read_log(client, bucket: str, table: str, result: RaceResult) -> None:
    """Fill ``result`` from the table's ``_delta_log/N.json`` files and the files they add."""
    import pyarrow.parquet as pq

    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=f"{table}/_delta_log/")
            for o in page.get("Contents", [])]
    commits = sorted(k for k in keys if k.endswith(".json") and k.rsplit("/", 1)[1][:-5].isdigit())
    result.versions = [int(k.rsplit("/", 1)[1][:-5]) for k in commits]
    for version, key in zip(result.versions, commits):
        actions = [json.loads(line) for line in client.get_object(Bucket=bucket, Key=key)["Body"].read().splitlines() if line]
        adds = [a["add"]["path"] for a in actions if "add" in a]
        result.adds_per_version[version] = len(adds)
        for a in actions:
            if "txn" in a and a["txn"]["appId"].startswith("writer-"):
                result.txns[(int(a["txn"]["appId"].split("-")[1]), int(a["txn"]["version"]))] += 1
        for add in adds:
            data = client.get_object(Bucket=bucket, Key=f"{table}/{add}")["Body"].read()
            t = pq.read_table(io.BytesIO(data))
            result.rows += list(zip(t.column("writer").to_pylist(), t.column("round").to_pylist()))


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import tempfile

    from s3_server import S3Server

    from pipelines.log_store import LOG_STORE_CLASS

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--races", type=int, default=3, help="races per LogStore (default 3)")
    p.add_argument("--rounds", type=int, default=20, help="appends per writer per race (default 20)")
    p.add_argument("--store", action="append", help=f"a LogStore class (default: {DEFAULT_S3_LOG_STORE} and {LOG_STORE_CLASS})")
    args = p.parse_args(argv)
    with S3Server() as s3, tempfile.TemporaryDirectory(prefix="log-store-race-") as tmp:
        for cls in args.store or [DEFAULT_S3_LOG_STORE, LOG_STORE_CLASS]:
            lost = commits = 0
            for i in range(args.races):
                t = time.monotonic()
                r = race(s3, Path(tmp), args.rounds, cls)
                lost += len(r.lost)
                commits += len(r.reported_ok)
                print(f"{cls} race {i + 1}: {r.summary()} ({time.monotonic() - t:.0f} s)", flush=True)
            print(f"{cls}: {lost} of {commits} appends reported ok were lost ({lost / max(commits, 1):.1%})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
