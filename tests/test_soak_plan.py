"""The soak's plan (tests/soak.py), without a server: which batches run, and how ``--jobs``
deals the modes out to processes that run the same batches one process would."""
from __future__ import annotations

from pathlib import Path

from soak import MODES, Outcome, child_argvs, plan_batches


def test_the_jobs_split_the_modes_and_run_the_batches_one_process_runs():
    argv = ["--seeds", "200", "--jobs", "3", "--workdir", "/w", "--mode=full/full", "--kill"]
    modes = list(MODES)
    children = child_argvs(argv, modes, 3, Path("/w"))
    assert children == [
        ["--seeds", "200", "--kill", "--mode", "full/full", "--mode", "minimal/full", "--workdir", "/w/job0"],
        ["--seeds", "200", "--kill", "--mode", "full/minimal", "--mode", "minimal/minimal", "--workdir", "/w/job1"],
        ["--seeds", "200", "--kill", "--mode", "full/noblob", "--mode", "minimal/noblob", "--workdir", "/w/job2"],
    ]
    seeds = list(range(200))
    one = plan_batches(seeds, modes, None, 20, None)
    split = [run for share in (modes[i::3] for i in range(3)) for run in plan_batches(seeds, share, None, 20, None)]
    assert sorted(split, key=str) == sorted(one, key=str) and len(one) == 60
    assert child_argvs(["--seeds", "5"], ["full/full"], 4, Path("/w")) == \
        [["--seeds", "5", "--mode", "full/full", "--workdir", "/w/job0"]]


def test_batches_take_the_backends_in_turn_and_a_batch_of_one_by_its_seed():
    runs = plan_batches(list(range(60)), ["full/full"], None, 20, False, False)
    assert [(backend, group[0], len(group)) for _, backend, group, _, _ in runs] == \
        [("rs", 0, 20), ("spark", 20, 20), ("rs", 40, 20)]
    alone = plan_batches([0, 1, 2, 3], ["full/full"], None, 1, False, False)
    assert [backend for _, backend, _, _, _ in alone] == ["rs", "spark", "rs", "spark"]


def test_arrow_batches_apply_their_tables_as_big_ones_on_either_backend():
    """``--arrow``: a delta-rs batch folds every table in Arrow, a delta-spark batch MERGEs every
    table by Spark's path; a batch that SIGKILLs runs as the job does, so neither."""
    runs = plan_batches(list(range(4)), ["full/full"], ["rs", "spark"], 2, False, True)
    assert [(backend, arrows) for _, backend, _, _, arrows in runs] == \
        [("rs", True), ("spark", True), ("rs", True), ("spark", True)]
    killed = plan_batches(list(range(2)), ["full/full"], ["spark"], 2, True, True)
    assert [arrows for *_, arrows in killed] == [False]
    assert "(Spark's path)" in Outcome(1, "full/full", "spark", [], arrow=True).line()
    assert "(keyed in Arrow, by parts)" in Outcome(1, "full/full", "rs", [], arrow=True, by_parts=True).line()
