"""Runs through Procrastinate, a job queue on PostgreSQL (``queue = "procrastinate"``).

Procrastinate decides which worker runs what: ``FOR UPDATE SKIP LOCKED`` hands a job to one
worker, LISTEN/NOTIFY wakes workers at once, its ``lock`` (the thread id) keeps one job of a
thread going at a time and in the order they were queued, and worker heartbeats tell when a
worker died. The run rows in ``tl_runs`` stay the source of truth for clients: a job only
says "run ``run_id`` now"; its task claims the row (``queue.claim_run``, guarded by the
unique index of running runs per thread) and calls ``execute_run``.

Jobs are made from rows, not beside them: ``reconcile`` queues a job for every run that
waits without one. The API server calls it when a run is queued (``JobDispatcher.wake``) and
every worker calls it now and then, so a run whose server died between its row and its job
is still run. Each worker also hands the jobs of dead workers (no heartbeat for a lease) back
to the queue (``sweep``); the next worker continues those runs from their last checkpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from typing import Any

import procrastinate
from procrastinate import jobs as pjobs
from procrastinate.exceptions import AlreadyEnqueued
from procrastinate.exceptions import UniqueViolation as JobUniqueViolation
from procrastinate.schema import SchemaManager

from threadline.server import queue
from threadline.server.db import Database, UniqueViolation
from threadline.server.execute import Services, execute_run
from threadline.server.settings import ServerSettings

log = logging.getLogger("threadline.server")
TASK = "threadline.run"
SAFETY_SWEEP_SECONDS = 5.0  # the API server's look for runs without a job, when nothing woke it
# Jobs of a thread wait for each other, so a job that cannot start yet comes back soon
_RETRY = procrastinate.RetryStrategy(max_attempts=200, wait=1)
_INDEX = (
    "CREATE INDEX IF NOT EXISTS tl_jobs_by_run ON procrastinate_jobs (queueing_lock) "
    "WHERE status IN ('todo', 'doing')"
)


class NotYet(Exception):
    """The run may not start yet (a live worker still holds it, or its thread is busy):
    Procrastinate retries the job shortly."""


def apply_schema(settings: ServerSettings) -> None:
    """Create Procrastinate's tables in ``settings.schema`` once; safe to call from every
    process at once (an advisory lock orders them, and the tables are looked for first)."""
    import psycopg

    with psycopg.connect(settings.db, autocommit=False) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{settings.schema}"')
        conn.execute(f'SET LOCAL search_path TO "{settings.schema}"')
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('threadline:' || current_schema()))")
        found = conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL").fetchone()
        if not (found and found[0]):
            conn.execute(SchemaManager.get_schema())
        conn.execute(_INDEX)


def make_app(settings: ServerSettings, pool_size: int = 4) -> procrastinate.App:
    """A Procrastinate app on ``settings.db``, its tables in ``settings.schema``."""
    path = settings.schema.replace("\\", "\\\\").replace(" ", "\\ ")
    connector = procrastinate.PsycopgConnector(
        conninfo=settings.db,
        kwargs={"options": f"-c search_path={path}"},
        min_size=1,
        max_size=pool_size,
    )
    app = procrastinate.App(connector=connector)
    app.task(name=TASK, pass_context=True, retry=_RETRY)(_run_job)
    return app


async def _run_job(context: procrastinate.JobContext, run_id: str) -> str:
    """The task: claim the run's row, run it, and give it back if this worker stops first."""
    s: Services = context.additional_context["services"]
    try:
        claim = await s.db.call(
            lambda tx: queue.claim_run(tx, run_id, s.worker_id, s.lease_seconds)
        )
    except UniqueViolation:
        raise NotYet(f"another run of run {run_id}'s thread is running") from None
    if claim == "ended":
        return "ended"
    if claim == "held":
        raise NotYet(f"run {run_id} is held by a live worker or starts later")
    try:
        return await execute_run(s, run_id)
    except asyncio.CancelledError:  # the worker is shutting down: another one goes on
        await s.db.call(lambda tx: queue.release(tx, run_id, s.worker_id))
        raise


async def reconcile(app: procrastinate.App, db: Database, quiet_for: float = 0) -> int:
    """Queue a job for every run that should run and has none, and was not touched in the
    last ``quiet_for`` seconds; how many were queued.

    A run has a job when one with its id as ``queueing_lock`` is waiting or going. Runs are
    queued in the order they were made, so a thread's jobs keep its runs' order.
    """
    rows = await db.call(
        lambda tx: tx.rows(
            "SELECT r.run_id, r.thread_id, r.start_after FROM tl_runs r "
            "WHERE (r.status = 'pending' OR (r.status = 'running' AND r.lease_until < ?)) "
            "AND r.updated_at <= ? "
            "AND NOT EXISTS (SELECT 1 FROM procrastinate_jobs j WHERE j.queueing_lock = "
            "r.run_id AND j.status IN ('todo', 'doing')) ORDER BY r.created_at LIMIT 1000",
            queue.iso_in(0),
            queue.iso_in(-quiet_for),
        )
    )
    queued = 0
    for row in rows:
        job = app.configure_task(
            TASK,
            lock=row["thread_id"],
            queueing_lock=row["run_id"],
            schedule_at=_later(row["start_after"]),
        )
        with contextlib.suppress(AlreadyEnqueued):  # another process queued it just now
            await job.defer_async(run_id=row["run_id"])
            queued += 1
    return queued


def _later(iso: str) -> dt.datetime | None:
    at = dt.datetime.fromisoformat(iso)
    return at if at > dt.datetime.now(dt.UTC) else None


async def sweep(app: procrastinate.App, db: Database, lease_seconds: float) -> None:
    """Hand back the jobs of workers silent for a lease, then queue runs left without a job
    (those quiet for a lease: the API servers queue fresh ones, and two processes queueing
    one run at once is what makes the duplicates ``_retry`` copes with)."""
    stalled = await app.job_manager.get_stalled_jobs(
        task_name=TASK, seconds_since_heartbeat=lease_seconds
    )
    for job in stalled:
        log.warning("job %s (run %s): its worker stopped; retrying it", job.id, job.task_kwargs)
        try:
            await _retry(app, job)
        except Exception:  # one job must not keep the others from being handed back
            assert job.id is not None
            if await app.job_manager.get_job_status_async(job.id) != pjobs.Status.DOING:
                log.info("job %s: another worker's sweep handed it back first", job.id)
            else:
                log.exception("job %s: could not hand it back; trying again next sweep", job.id)
    await reconcile(app, db, quiet_for=lease_seconds)


async def _retry(app: procrastinate.App, job: pjobs.Job) -> None:
    """Make a dead worker's job runnable again; if its run already has another job waiting
    (two processes queued it at once), end this one instead: the waiting job runs the run."""
    try:
        await app.job_manager.retry_job(job)
    except JobUniqueViolation:
        assert job.id is not None
        await app.job_manager.finish_job_by_id_async(job.id, pjobs.Status.FAILED, delete_job=False)


async def work(settings: ServerSettings, services: Services) -> None:
    """``threadline worker`` with Procrastinate: run jobs until SIGTERM or SIGINT."""
    lease = settings.lease_seconds
    app = make_app(settings, pool_size=settings.workers + 3)
    async with app.open_async():
        sweeper = asyncio.create_task(_every(lease / 2, sweep, app, services.db, lease))
        try:
            await app.run_worker_async(
                name=services.worker_id,
                concurrency=settings.workers,
                additional_context={"services": services},
                update_heartbeat_interval=lease / 4,
                # a retried job is not announced by NOTIFY: look for one this often
                fetch_job_polling_interval=min(5.0, lease / 4),
                stalled_worker_timeout=lease,
                shutdown_graceful_timeout=lease,
                install_signal_handlers=True,
            )
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper


async def _every(seconds: float, fn: Any, *args: Any) -> None:
    while True:
        try:
            await fn(*args)
        except Exception:  # the database may be briefly away: try again next time
            log.exception("threadline's job sweep failed")
        await asyncio.sleep(seconds)


class JobDispatcher:
    """The API server's side: turns the runs it queued into Procrastinate jobs, at once."""

    def __init__(self, settings: ServerSettings, db: Database) -> None:
        self.app = make_app(settings, pool_size=2)
        self.db = db
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.app.open_async()
        self._task = asyncio.create_task(self._loop())

    def wake(self) -> None:
        """A run was queued: give it its job now."""
        self._wake.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.app.close_async()

    async def _loop(self) -> None:
        while True:
            quiet_for = 0.0  # woken: queue the new run now
            try:
                await asyncio.wait_for(self._wake.wait(), SAFETY_SWEEP_SECONDS)
            except TimeoutError:  # only runs left behind, not those another server queues now
                quiet_for = SAFETY_SWEEP_SECONDS
            self._wake.clear()
            try:
                await reconcile(self.app, self.db, quiet_for)
            except Exception:
                log.exception("queueing runs as jobs failed; trying again shortly")
