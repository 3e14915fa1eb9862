"""Scale-out on PostgreSQL: an API server, three ``threadline worker`` processes, one killed.

The short version of ``make soak SOAK_ARGS=--server`` (bench/kill_soak.py): a few dozen runs,
a third of them stopping for a person and answered over HTTP with langgraph-sdk.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from langgraph_sdk import get_client
from scale import check, cluster, workload
from services import require_postgres


@pytest.fixture
def postgres() -> str:
    return require_postgres()


async def test_runs_finish_once_when_a_worker_is_killed_mid_step(
    postgres: str, tmp_path: Path
) -> None:
    with cluster(postgres, tmp_path) as c:
        out = await workload(c, 30, delay=0.3, kills=1)
        audit = check(c, out.expected)
        (victim,) = c.dead
        # the killed worker's runs went on elsewhere: a live worker ended a step it had cut
        cut_by_kill = c.sql(
            f"SELECT count(*) FROM {c.table} WHERE ended IS NULL AND pid = %s", victim
        )[0][0]
        exits = c.stop_workers()  # SIGTERM: the live ones stop cleanly
    assert sorted(code or 0 for code in exits) == [-9, 0, 0]
    assert out.problems == []
    assert audit.problems == []
    assert cut_by_kill >= 1 and audit.cut == cut_by_kill
    # a step that ended in the killed worker but was not checkpointed ran again: its update
    # may be in the run's stream twice (two executions); nothing else may repeat
    assert out.stream_repeats <= audit.rerun_after_end
    # every step of 30 threads once, the 10 answered ones' "ask" too, plus what the kill cut
    assert audit.steps == 30 * 3 + 10 + audit.cut + audit.rerun_after_end
    print(
        f"steps {audit.steps}, cut {audit.cut}, again {audit.rerun_after_end}",
        audit.takeover_seconds,
    )


async def test_a_cancel_on_the_api_server_stops_a_run_in_a_worker_process(
    postgres: str, tmp_path: Path
) -> None:
    with cluster(postgres, tmp_path, workers=1) as c:
        client = get_client(url=c.url)
        thread_id = (await client.threads.create())["thread_id"]
        run = await client.runs.create(thread_id, "audited", input={"delay": 1.0})
        while not c.sql(f"SELECT 1 FROM {c.table}"):  # its first step is running
            time.sleep(0.05)
        asked = time.monotonic()
        await client.runs.cancel(thread_id, run["run_id"], wait=True)
        took = time.monotonic() - asked
        stopped = await client.runs.get(thread_id, run["run_id"])
        time.sleep(1.5)  # a step would have ended by now, had the run gone on
        steps = c.sql(f"SELECT label, pid, ended IS NOT NULL FROM {c.table} ORDER BY id")
    assert stopped["status"] == "interrupted"
    assert [label for label, _, _ in steps] == ["work1"]
    assert steps[0][1] == c.workers[0].pid
    assert took < 1.0  # the worker looks for a cancel every 0.2 s
    print(f"cancel took {took:.2f} s")
