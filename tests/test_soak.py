"""Seeds of the random server-oracle soak (tests/soak.py) in every mode, on both backends:
random schemas, identifiers and DML on a private MariaDB, the pipeline in two runs, and every
silver table against the server's SELECT. One seed also SIGKILLs the job and runs it again.
``make soak SEEDS=N`` runs many more."""
from __future__ import annotations

import pytest
from spark_fixtures import require_delta_spark, spark  # noqa: F401  (the shared session fixture)

from mariadb_server import mariadb_available
from soak import MODES, run_batch, run_seed

pytestmark = [pytest.mark.spark, pytest.mark.mariadb, pytest.mark.slow]

CI_SEEDS = {"rs": 1000, "spark": 1001}  # fixed: a failure here reproduces with tests/soak.py --seed


@pytest.fixture(autouse=True)
def _server():
    ok, why = mariadb_available()
    if not ok:
        pytest.skip(why)


# every mode once, the backends taking turns (make soak runs many seeds of each)
CASES = [(mode, ("rs", "spark")[i % 2]) for i, mode in enumerate(MODES)]


@pytest.mark.parametrize("mode,backend", CASES, ids=[f"{m}-{b}" for m, b in CASES])
def test_random_workload_silver_equals_the_server(spark, tmp_path, mode, backend):  # noqa: F811
    if backend == "spark":
        require_delta_spark(spark)
    out = run_seed(CI_SEEDS[backend], mode, tmp_path, backend=backend, spark=spark, kill=False, steps=30)
    assert out.ok, out.line() + "\n" + "\n".join(out.problems)
    assert out.statements > 30 and out.rows > 0


@pytest.mark.parametrize("mode,seed", [("full/full", CI_SEEDS["rs"]), ("minimal/full", 1001)])
def test_random_workload_with_keyed_tables_folded_in_arrow(spark, tmp_path, mode, seed):  # noqa: F811
    # the path of big segments (silver.columnar) on the soak's small ones: whole row images, so
    # every keyed table takes it (MINIMAL metadata: with the value fixes of the DDL's types). Seed
    # 1000 reads the big segments together; 1001 reads each by parts, a part per record batch.
    out = run_seed(seed, mode, tmp_path, backend="rs", spark=spark, kill=False, steps=30, arrow=True)
    assert out.arrow and out.ok, out.line() + "\n" + "\n".join(out.problems)
    assert out.by_parts == (seed == 1001)
    assert out.statements > 30 and out.rows > 0


@pytest.mark.parametrize("mode", ["minimal/minimal", "full/full"])
def test_random_workload_on_sparks_merge_path(spark, tmp_path, mode):  # noqa: F811
    # delta-spark with no segment fetched to the driver: every table MERGEd by Spark's path
    # (silver.changes, silver.plan: keyed, keyless and partial images), as a cluster's big tables go
    require_delta_spark(spark)
    out = run_seed(1002, mode, tmp_path, backend="spark", spark=spark, kill=False, steps=30, arrow=True)
    assert out.arrow and out.ok, out.line() + "\n" + "\n".join(out.problems)
    assert "(Spark's path)" in out.line() and out.statements > 30 and out.rows > 0


def test_random_workload_survives_a_sigkill(spark, tmp_path):  # noqa: F811
    # the job as a subprocess on delta-spark, SIGKILLed once mid-run (delta-rs: tests/test_faults.py)
    require_delta_spark(spark)
    out = run_seed(7, "minimal/full", tmp_path, backend="spark", kill=True, steps=30)
    assert out.killed and out.ok, out.line() + "\n" + "\n".join(out.problems)


def test_seeds_side_by_side_share_a_server_and_the_runs(spark, tmp_path):  # noqa: F811
    # make soak's batches: three seeds' databases on one server, one pipeline's two runs over all
    outs = run_batch([2000, 2001, 2002], "full/minimal", tmp_path, backend="rs", spark=spark, steps=20)
    assert [o.seed for o in outs] == [2000, 2001, 2002]
    assert all(o.ok for o in outs), "\n".join(o.line() + "\n" + "\n".join(o.problems) for o in outs)
    assert all(o.statements > 20 and o.rows > 0 for o in outs)


@pytest.mark.parametrize("backend", ["rs", "spark"])
def test_random_workload_two_silver_runs_at_once(spark, tmp_path, backend):  # noqa: F811
    # place overlap: after each bronze run, two silver runs on the same warehouse at once, no lock
    if backend == "spark":
        require_delta_spark(spark)
    out = run_seed(CI_SEEDS[backend], "full/full", tmp_path, backend=backend, spark=spark, kill=False, steps=30,
                   place="overlap")
    assert out.ok and out.place == "overlap", out.line() + "\n" + "\n".join(out.problems)
    assert out.statements > 30 and out.rows > 0


def test_random_workload_on_s3_with_a_sigkill(spark, tmp_path):  # noqa: F811
    # place s3: binlogs and warehouse on the private S3 server, the job SIGKILLed once, then again
    out = run_seed(7, "minimal/full", tmp_path, backend="rs", kill=True, steps=20, place="s3")
    assert out.killed and out.ok and out.place == "s3", out.line() + "\n" + "\n".join(out.problems)


def test_random_workload_from_a_dump_with_a_sigkill(spark, tmp_path):  # noqa: F811
    # place dump: a mariadb-dump taken half-way, the binlogs before its file purged, the dump loaded
    # and the binlogs after it applied by the job SIGKILLed once, then again; silver equals the server
    out = run_seed(11, "minimal/full", tmp_path, backend="rs", kill=True, steps=20, place="dump")
    assert out.killed and out.ok and out.place == "dump", out.line() + "\n" + "\n".join(out.problems)
