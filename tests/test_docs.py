"""Every command and code block of README.md and docs/ works as written (issue 36).

Each fenced block carries a marker (tests/docs_blocks.py) saying how CI runs it. The ``run``
blocks run in order, README first, in a scratch copy of the repository (the shared ``.venv``,
``.venv-airflow`` and ``jars`` linked in), exactly as written: ``make run``, the jobs on the
samples, ``spark-submit`` from the venv, the SQL and quarantine tools, ``make package``, the
Airflow block with ``airflow dags test``. Then the warehouses they made must hold the samples'
final state (samples/README.md). The other kinds are checked for what they are: a stand-in test
that exists, a config piece that validates, the server settings a private MariaDB starts with.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from docs_blocks import KINDS, REPO, all_blocks, ini_settings, stand_in_exists

from pipelines.config import load_config

BLOCK_SECONDS = 900
OLD = 946684800  # 2000-01-01: older than the venv's install stamp, so make sees nothing to rebuild


def test_every_block_says_how_ci_runs_it():
    blocks = all_blocks()
    assert len(blocks) > 20
    unmarked = [b.where for b in blocks if b.kind is None]
    assert not unmarked, f"blocks without a <!-- ci: ... --> marker: {unmarked}"
    unknown = [f"{b.where}: {b.kind}" for b in blocks if b.kind not in KINDS]
    assert not unknown, f"unknown markers (known: {KINDS}): {unknown}"
    missing = [f"{b.where}: {b.arg}" for b in blocks if b.kind == "stand-in" and not stand_in_exists(b.arg)]
    assert not missing, f"stand-ins that do not exist: {missing}"
    odd = [b.where for b in blocks if b.kind == "run" and b.lang not in ("sh", "bash", "python")]
    assert not odd, f"run blocks must be sh, bash or python: {odd}"


def test_the_config_blocks_validate(tmp_path):
    blocks = [b for b in all_blocks() if b.kind == "config"]
    assert blocks
    for b in blocks:
        piece = yaml.safe_load(b.text)
        assert isinstance(piece, dict), b.where
        conf = tmp_path / f"{b.line}.yaml"
        conf.write_text(yaml.safe_dump({"input": str(tmp_path), "warehouse": str(tmp_path / "wh"), **piece}))
        load_config(conf)  # raises, naming every bad key, when the piece is not a valid configuration


@pytest.mark.mariadb
def test_the_server_settings_block_is_what_a_server_runs_with(tmp_path):
    """The README's my.cnf lines: a private MariaDB started with them (``log_bin`` and ``server_id``
    are the fixture's own) reports them, and its binlog's table maps name the columns and the key."""
    from mariadb_server import MariaDBServer, mariadb_available

    from pipelines.binlog.changes import RowChange, iter_changes

    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)
    blocks = [b for b in all_blocks() if b.kind == "server-settings"]
    assert blocks
    for i, block in enumerate(blocks):
        settings = ini_settings(block.text)
        assert "binlog_format" in settings, block.where
        own = {k: v for k, v in settings.items() if k not in ("log_bin", "server_id")}
        extra = [f"--{k.replace('_', '-')}={v}" for k, v in own.items()]
        with MariaDBServer(tmp_path / f"mdb{i}", extra_args=extra) as srv:
            got = {k: str(v).upper() for k, v in srv.variables(own).items()}
            assert got == {k: v.upper() for k, v in own.items()}, block.where
            srv.sql("CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(9)); "
                    "INSERT INTO d.t VALUES (1, 'a'), (2, 'b')")
            srv.flush_logs()
            files = srv.binlog_files()[:-1]
            changes = [c for f in files for c in iter_changes(str(f)) if isinstance(c, RowChange)]
        assert [(c.op, c.after) for c in changes] == [("insert", (1, "a")), ("insert", (2, "b"))], block.where
        assert changes[0].table_map.column_names == ("id", "v"), block.where
        assert changes[0].table_map.primary_key == ((0, 0),), block.where


def _scratch_copy(dest: Path) -> Path:
    """The repository's files (tracked and untracked, not ignored) with old times, the shared venvs
    and jars linked, and the decoder's built extension."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = REPO / name
        if not src.is_file() or src.is_symlink():
            continue
        out = dest / name
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, out)
        os.utime(out, (OLD, OLD))
    for link in (".venv", ".venv-airflow", "jars"):
        if (REPO / link).exists():
            (dest / link).symlink_to((REPO / link).resolve())
    for built in (REPO / "pipelines" / "binlog").glob("*.so"):
        shutil.copy(built, dest / "pipelines" / "binlog" / built.name)
    return dest


def _environment() -> dict[str, str]:
    drop = ("PYTEST", "BINLOG_DELTA_", "PYSPARK", "SPARK_HOME", "VIRTUAL_ENV", "AIRFLOW", "DELTA_JARS", "PYTHONPATH")
    return {k: v for k, v in os.environ.items() if not k.startswith(drop)}


def _live(path: Path) -> list[dict]:
    from deltalake import DeltaTable

    return [r for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist() if not r["_deleted"]]


def _assert_samples_final_state(warehouse: Path) -> None:
    silver = warehouse / "silver" / "shop"
    customers = {r["id"]: r for r in _live(silver / "customers")}
    assert sorted(customers) == [1, 2, 5, 100], warehouse
    assert {i for i, r in customers.items() if r["phone"] is not None} == {1, 5}, warehouse
    assert sorted((r["order_id"], r["line"]) for r in _live(silver / "orders")) == [(1001, 1), (1001, 3), (1001, 5)]
    assert len(_live(silver / "event_log")) == 4, warehouse


@pytest.mark.spark
@pytest.mark.slow
def test_the_run_blocks_run_as_written(tmp_path, package):
    """README's and docs/'s ``run`` blocks, in order, in one scratch copy; every failure is reported."""
    repo = _scratch_copy(tmp_path / "repo")
    env = _environment()
    failures, ran = [], []
    for block in [b for b in all_blocks() if b.kind == "run"]:
        cmd = ([str(repo / ".venv" / "bin" / "python"), "-c", block.text] if block.lang == "python"
               else ["bash", "-euo", "pipefail", "-c", block.text])
        try:
            done = subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=BLOCK_SECONDS)
        except subprocess.TimeoutExpired:
            failures.append(f"{block.where}: still running after {BLOCK_SECONDS} s")
            continue
        ran.append(block.where)
        if done.returncode != 0:
            failures.append(f"{block.where} exited {done.returncode}:\n{block.text}\n"
                            f"--- stdout ---\n{done.stdout[-3000:]}\n--- stderr ---\n{done.stderr[-3000:]}")
        elif "Traceback (most recent call last)" in done.stdout + done.stderr:
            failures.append(f"{block.where} printed a traceback:\n{done.stderr[-3000:]}")
        elif "airflow dags test" in block.text:  # each task line once (Airflow 3.0 printed it twice)
            said = [ln for ln in (done.stdout + done.stderr).splitlines() if re.search(r"- (bronze|silver) run ", ln)]
            if len(said) != 2:
                failures.append(f"{block.where}: expected the bronze and the silver summary once each, got:\n"
                                + "\n".join(said))
    assert not failures, "\n\n".join(failures)
    assert any(w.startswith("README.md") for w in ran) and any(w.startswith("docs/") for w in ran)
    # what `make package` made is what docs/deploy.md's table names (the wheel's name included)
    named = set(re.findall(r"^\| `(dist/[^`]+)` \|", (REPO / "docs" / "deploy.md").read_text(), re.MULTILINE))
    assert len(named) == 4 and all((repo / n).is_file() for n in named), (named, sorted(os.listdir(repo / "dist")))
    # what the blocks made: `make run`'s warehouse, the README's own, and the Airflow block's
    for warehouse in (repo / "warehouse", repo / "my-warehouse", repo / "airflow-warehouse"):
        _assert_samples_final_state(warehouse)
