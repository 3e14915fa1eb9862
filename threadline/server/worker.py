"""Workers: take runs from the queue and run them, a few at a time.

``LocalWorker`` runs inside ``threadline serve`` (the default, on SQLite or PostgreSQL);
``run_worker`` is ``threadline worker``: the same loop in a process of its own, for scaling
out on PostgreSQL next to any number of stateless API servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket

from threadline.server import queue
from threadline.server.db import UniqueViolation
from threadline.server.execute import Services, execute_run

log = logging.getLogger("threadline.server")
IDLE_POLL_SECONDS = 0.25


class LocalWorker:
    """Claims and runs up to ``concurrency`` runs at once until stopped."""

    def __init__(self, services: Services, concurrency: int) -> None:
        self.services = services
        self.concurrency = concurrency
        self._wake = asyncio.Event()
        self._running: set[asyncio.Task[str]] = set()
        self._loop_task: asyncio.Task[None] | None = None

    def wake(self) -> None:
        """A run was queued in this process: look now rather than at the next poll."""
        self._wake.set()

    def start(self) -> None:
        self._loop_task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        """Stop taking runs and cancel those going; their leases lapse and another worker
        (or this one, restarted) continues them from their last checkpoint."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    async def _loop(self) -> None:
        db = self.services.db
        while True:
            claimed = None
            if len(self._running) < self.concurrency:
                try:
                    await db.call(queue.requeue_expired)
                    claimed = await db.call(self._claim)
                except UniqueViolation:
                    claimed = None  # another worker took the thread first: look again
            if claimed is not None:
                task = asyncio.create_task(self._run(claimed["run_id"]))
                self._running.add(task)
                task.add_done_callback(self._done)
                continue
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), IDLE_POLL_SECONDS)

    def _claim(self, tx: queue.Tx) -> dict[str, str] | None:
        s = self.services
        return queue.claim_next(tx, s.worker_id, s.lease_seconds)

    async def _run(self, run_id: str) -> str:
        try:
            return await execute_run(self.services, run_id)
        except Exception:  # never lose the worker over one run
            log.exception("run %s: the worker failed", run_id)
            return "error"

    def _done(self, task: asyncio.Task[str]) -> None:
        self._running.discard(task)
        self._wake.set()


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"
