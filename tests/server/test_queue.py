"""The run queue's claim and lease (``queue.claim_run``, ``execute._keep_lease``), on SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from threadline.server import queue, records
from threadline.server.db import UniqueViolation
from threadline.server.execute import Services, execute_run
from threadline.server.services import close_services, graph_assistant_id, open_services
from threadline.server.settings import ServerSettings


@pytest.fixture
def services(settings: ServerSettings) -> Iterator[Services]:
    opened = open_services(settings, worker_id="A")
    opened.lease_seconds = 1.0
    yield opened
    close_services(opened)


def queued(s: Services, run_id: str, thread_id: str = "t", **kwargs: object) -> None:
    def add(tx: queue.Tx) -> None:
        if records.get_thread(tx, "", thread_id) is None:
            records.create_thread(tx, "", thread_id, {})
        run = {
            "run_id": run_id,
            "thread_id": thread_id,
            "assistant_id": graph_assistant_id("counter"),
            "kwargs": {"input": {"delay": 0.3}, **kwargs},
            "multitask_strategy": "enqueue",
            "stateless": False,
        }
        records.insert_run(tx, "", run)

    s.db.do(add)


def claim(s: Services, run_id: str, worker: str = "A") -> str:
    return s.db.do(lambda tx: queue.claim_run(tx, run_id, worker, s.lease_seconds))


def status(s: Services, run_id: str) -> str:
    row = s.db.do(lambda tx: records.run_row(tx, run_id))
    return "missing" if row is None else str(row["status"])


def test_a_run_is_claimed_once_and_taken_over_only_when_its_lease_ran_out(
    services: Services,
) -> None:
    queued(services, "r1")
    assert claim(services, "r1") == "claimed"
    assert claim(services, "r1", "B") == "held"  # A's lease still runs
    services.db.do(lambda tx: tx.run("UPDATE tl_runs SET lease_until = ?", queue.iso_in(-1)))
    assert claim(services, "r1", "B") == "claimed"
    row = services.db.do(lambda tx: records.run_row(tx, "r1"))
    assert row is not None and (row["worker"], row["attempt"]) == ("B", 2)
    services.db.do(lambda tx: records.set_run_status(tx, "r1", "success"))
    assert claim(services, "r1", "C") == "ended"
    assert claim(services, "nope") == "ended"


def test_a_second_run_of_a_thread_cannot_run_beside_the_first(services: Services) -> None:
    queued(services, "r1")
    queued(services, "r2")
    assert claim(services, "r1") == "claimed"
    with pytest.raises(UniqueViolation):
        claim(services, "r2", "B")
    assert status(services, "r2") == "pending"


def test_a_run_that_starts_later_is_held(services: Services) -> None:
    queued(services, "r1")
    later = queue.iso_in(60)
    services.db.do(lambda tx: tx.run("UPDATE tl_runs SET start_after = ?", later))
    assert claim(services, "r1") == "held"


async def test_an_attempt_whose_run_was_taken_over_stops_and_settles_nothing(
    services: Services,
) -> None:
    queued(services, "r1")
    assert claim(services, "r1") == "claimed"
    attempt = asyncio.create_task(execute_run(services, "r1"))
    await asyncio.sleep(0.1)
    services.db.do(  # worker B took it over (as after A's lease ran out)
        lambda tx: tx.run("UPDATE tl_runs SET worker = 'B', attempt = attempt + 1")
    )
    assert await asyncio.wait_for(attempt, 2) == "lost"
    assert status(services, "r1") == "running"  # B's to settle, not A's
    events = services.db.do(lambda tx: records.events_after(tx, "r1", -1))
    assert "__end__" not in [e["event"] for e in events]


async def test_a_worker_that_stops_hands_its_run_back(services: Services) -> None:
    queued(services, "r1")
    assert claim(services, "r1") == "claimed"
    services.db.do(lambda tx: queue.release(tx, "r1", "B"))  # not B's: nothing happens
    assert status(services, "r1") == "running"
    services.db.do(lambda tx: queue.release(tx, "r1", "A"))
    assert status(services, "r1") == "pending"
    assert claim(services, "r1", "B") == "claimed"


def test_threadline_worker_on_the_local_queue_runs_runs_and_stops_on_sigterm(
    services: Services, settings: ServerSettings
) -> None:
    """``run_worker`` with the local queue (a SQLite file here) in a process of its own."""
    import json
    import signal
    import subprocess
    import sys
    import time
    from dataclasses import asdict
    from pathlib import Path

    from scale import ROOT, WORKER_SCRIPT

    queued(services, "r1")
    options = {**asdict(settings), "base_dir": str(settings.base_dir)}
    proc = subprocess.Popen(
        [sys.executable, "-c", WORKER_SCRIPT, json.dumps(options)],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent)},
    )
    try:
        deadline = time.monotonic() + 30
        while status(services, "r1") != "success" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status(services, "r1") == "success"
        row = services.db.do(lambda tx: records.run_row(tx, "r1"))
        assert row is not None and row["worker"].endswith(f":{proc.pid}")
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=20)
    assert code == 0
