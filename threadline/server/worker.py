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
import signal
import socket
import time

from threadline.server import queue
from threadline.server.db import UniqueViolation
from threadline.server.execute import Services, execute_run
from threadline.server.services import close_services, open_services
from threadline.server.settings import ServerSettings

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
        self._swept = 0.0  # when expired leases were last looked for

    def wake(self) -> None:
        """A run was queued in this process: look now rather than at the next poll."""
        self._wake.set()

    def start(self) -> None:
        self._loop_task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        """Stop taking runs and cancel those going; they wait again, and another worker (or
        this one, restarted) continues them from their last checkpoint."""
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
        """The next run; every quarter lease, runs whose worker died are put back first."""
        s = self.services
        if time.monotonic() - self._swept > s.lease_seconds / 4:
            self._swept = time.monotonic()
            queue.requeue_expired(tx)
        return queue.claim_next(tx, s.worker_id, s.lease_seconds)

    async def _run(self, run_id: str) -> str:
        try:
            return await execute_run(self.services, run_id)
        except asyncio.CancelledError:  # stopping: the run waits again, for any worker
            s = self.services
            await s.db.call(lambda tx: queue.release(tx, run_id, s.worker_id))
            raise
        except Exception:  # never lose the worker over one run
            log.exception("run %s: the worker failed", run_id)
            return "error"

    def _done(self, task: asyncio.Task[str]) -> None:
        self._running.discard(task)
        self._wake.set()


def worker_id() -> str:
    """This process's name in the run rows it holds: unique across machines and restarts."""
    return f"{socket.gethostname()}:{os.getpid()}"


def run_worker(settings: ServerSettings) -> None:
    """``threadline worker``: run runs in this process until SIGTERM or SIGINT.

    With ``queue = "procrastinate"`` it is a Procrastinate worker (``jobs.work``); with the
    local queue, the same loop ``threadline serve`` runs in-process. On a signal it stops
    taking runs; runs still going after a lease are handed back and continue elsewhere.
    """
    asyncio.run(_work(settings))


async def _work(settings: ServerSettings) -> None:
    services = await asyncio.to_thread(open_services, settings, worker_id())
    log.info("worker %s: %s queue", services.worker_id, settings.queue)
    try:
        if settings.queue == "procrastinate":
            from threadline.server.jobs import work

            await work(settings, services)
        else:
            await _work_locally(services, settings.workers)
    finally:
        close_services(services)
        log.info("worker %s stopped", services.worker_id)


async def _work_locally(services: Services, concurrency: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    worker = LocalWorker(services, concurrency)
    worker.start()
    try:
        await stop.wait()
    finally:
        await worker.stop()
