"""The run queue in the server's tables: claim a run, hold its thread, give a dead one back.

A worker claims the oldest pending run whose thread has no run going and no older run
waiting, by a conditional update: on PostgreSQL two workers can never both take it, and a
unique index allows one running run per thread, so a thread's runs never overlap. The worker
extends the run's lease while it runs (``execute._keep_lease``); a run whose lease ran out
(its worker died) goes back to pending and continues on another worker from its last
checkpoint.

With Procrastinate (``jobs.py``) the job queue decides which worker runs which run, and
``claim_run`` takes that one run's row the same way, so the unique index still guards it.
"""

from __future__ import annotations

import time
from typing import Any

from threadline.clock import iso_at
from threadline.server.db import Tx

__all__ = ["Tx", "claim_next", "claim_run", "iso_in", "release", "requeue_expired"]


def iso_in(seconds: float) -> str:
    """The time ``seconds`` from now, spelled as every stored timestamp is."""
    return iso_at(time.time_ns() // 1000 + int(seconds * 1_000_000))


def requeue_expired(tx: Tx) -> int:
    """Runs whose worker stopped renewing their lease wait again; how many."""
    return tx.run(
        "UPDATE tl_runs SET status = 'pending', worker = NULL, lease_until = NULL "
        "WHERE status = 'running' AND lease_until < ?",
        iso_in(0),
    )


def claim_next(tx: Tx, worker: str, lease_seconds: float) -> dict[str, Any] | None:
    """Take the next run that may start now; None when there is none."""
    now = iso_in(0)
    candidates = tx.rows(
        "SELECT r.run_id, r.thread_id FROM tl_runs r WHERE r.status = 'pending' "
        "AND r.start_after <= ? AND NOT EXISTS (SELECT 1 FROM tl_runs o "
        "WHERE o.thread_id = r.thread_id AND (o.status = 'running' "
        "OR (o.status = 'pending' AND o.created_at < r.created_at))) "
        "ORDER BY r.created_at LIMIT 10",
        now,
    )
    for run in candidates:
        taken = tx.run(
            "UPDATE tl_runs SET status = 'running', worker = ?, lease_until = ?, "
            "attempt = attempt + 1, updated_at = ? WHERE run_id = ? AND status = 'pending'",
            worker,
            iso_in(lease_seconds),
            now,
            run["run_id"],
        )
        if taken:
            tx.run(
                "UPDATE tl_threads SET status = 'busy', updated_at = ? WHERE thread_id = ?",
                now,
                run["thread_id"],
            )
            return run
    return None


def claim_run(tx: Tx, run_id: str, worker: str, lease_seconds: float) -> str:
    """Take one given run: ``"claimed"``; ``"ended"`` when there is nothing left to run (it
    finished, was cancelled or deleted); ``"held"`` when it may not start yet (its start time
    is ahead, or a live worker holds it). Raises ``UniqueViolation`` when another run of its
    thread is running.

    A running run whose lease ran out is taken over: its worker died, and this attempt goes on
    from the run's last checkpoint.
    """
    now = iso_in(0)
    row = tx.row("SELECT status, thread_id, start_after FROM tl_runs WHERE run_id = ?", run_id)
    if row is None or row["status"] not in ("pending", "running"):
        return "ended"
    if row["status"] == "pending" and row["start_after"] > now:
        return "held"
    taken = tx.run(
        "UPDATE tl_runs SET status = 'running', worker = ?, lease_until = ?, "
        "attempt = attempt + 1, updated_at = ? WHERE run_id = ? "
        "AND (status = 'pending' OR (status = 'running' AND lease_until < ?))",
        worker,
        iso_in(lease_seconds),
        now,
        run_id,
        now,
    )
    if not taken:
        return "held"
    tx.run(
        "UPDATE tl_threads SET status = 'busy', updated_at = ? WHERE thread_id = ?",
        now,
        row["thread_id"],
    )
    return "claimed"


def release(tx: Tx, run_id: str, worker: str) -> None:
    """Give back a run this worker holds (it is shutting down): it waits again at once."""
    tx.run(
        "UPDATE tl_runs SET status = 'pending', worker = NULL, lease_until = NULL "
        "WHERE run_id = ? AND status = 'running' AND worker = ?",
        run_id,
        worker,
    )
