"""Runs killed with SIGKILL at random points continue in a fresh process, exactly.

Each trial (see ``harness.py``) runs a graph or an entrypoint with tasks in child processes,
kills them inside a node, inside a task, between a task's return and the save of its result,
just before, during and after a checkpoint save, or at a random time, and continues the thread
with ``invoke(None)`` until it is finished. The seeds are fixed: a failure names the saver,
workload, durability and seed, and ``python -m bench.kill_soak --only ...`` replays it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash.harness import KILL_POINTS, Trial, place, trials
from tests.services import require_postgres, require_redis

# Trials per saver: about 1.7 kills each, ~500 kills in all, in about 30 s on two idle cores.
TRIALS = {"sqlite": 100, "files": 100, "postgres": 45, "redis": 60}
SEED = 13


def server(backend: str) -> str | None:
    return {"postgres": require_postgres, "redis": require_redis}.get(backend, lambda: None)()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", sorted(TRIALS))
def test_killed_runs_finish_as_if_never_killed(backend, tmp_path: Path):
    with place(backend, server(backend), tmp_path) as harness:
        report = harness.run(trials(TRIALS[backend], SEED), workers=4)
    assert report.failures == [], report.summary()
    assert report.kills >= TRIALS[backend]
    aimed = set(KILL_POINTS) - {"writes"}  # "writes" exists in one workload only
    assert aimed <= set(report.kills_by("point")), report.summary()
    # Calls cut off before their result was saved ran again (at least once, as documented),
    # and the harness told them apart from calls that ran again after it was saved (failures).
    assert sum(o.repeats for o in report.outcomes) > 0


def test_a_task_that_runs_again_after_its_result_was_saved_is_reported(tmp_path: Path):
    with place("sqlite", None, tmp_path) as harness:
        harness.fault = "forget-task-results"  # loading no longer sees saved task results
        outcome = harness.trial(Trial("approval", "sync", seed=1), kills=0)
    # round 0 charges and stops at the interrupt; the answer re-runs the entrypoint
    assert any("task charge" in f and "ran again after its success" in f for f in outcome.failures)


def test_a_broken_chain_is_reported(tmp_path: Path):
    with place("files", None, tmp_path) as harness:
        harness.fault = "orphan-step-2"  # step 2 is saved with a parent that does not exist
        outcome = harness.trial(Trial("graph", "sync", seed=1), kills=0)
    assert any("parent" in f and "missing" in f for f in outcome.failures), outcome.failures
