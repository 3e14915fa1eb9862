"""Procrastinate's side of the queue (``threadline.server.jobs``) on PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import replace

import psycopg
import pytest
from services import require_postgres

from threadline.server import jobs, records
from threadline.server.db import Database
from threadline.server.settings import ServerSettings


@pytest.fixture
async def pg(settings: ServerSettings) -> AsyncIterator[tuple[ServerSettings, Database]]:
    url = require_postgres()
    found = replace(
        settings, db=url, schema=f"tl_jobs_{uuid.uuid4().hex[:12]}", queue="procrastinate"
    )
    db = Database(url, schema=found.schema)
    try:
        yield found, db
    finally:
        db.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{found.schema}" CASCADE')


def jobs_of(db: Database) -> list[tuple[int, str]]:
    rows = db.do(lambda tx: tx.rows("SELECT id, status FROM procrastinate_jobs ORDER BY id"))
    return [(r["id"], r["status"]) for r in rows]


async def test_the_schema_is_applied_once_however_often_it_is_asked(
    pg: tuple[ServerSettings, Database],
) -> None:
    settings, db = pg
    jobs.apply_schema(settings)
    jobs.apply_schema(settings)  # a second process starting: no error, nothing doubled
    assert jobs_of(db) == []


async def test_a_dead_workers_job_is_ended_when_its_run_already_has_another_waiting(
    pg: tuple[ServerSettings, Database],
) -> None:
    """Two processes queued one run at once (its first job was already running), then the
    first job's worker died: the sweep ends that job rather than failing on the second."""
    settings, db = pg
    jobs.apply_schema(settings)
    run = {"run_id": "r1", "thread_id": "t1", "assistant_id": "a", "kwargs": {}}
    db.do(lambda tx: records.insert_run(tx, "", {**run, "multitask_strategy": "x", "stateless": 0}))
    app = jobs.make_app(settings)
    async with app.open_async():
        assert await jobs.reconcile(app, db) == 1
        dead = await app.job_manager.register_worker()
        first = await app.job_manager.fetch_job(None, dead)
        assert first is not None
        assert await jobs.reconcile(app, db) == 0  # it has a job going
        await app.configure_task(jobs.TASK, queueing_lock="r1", lock="t1").defer_async(run_id="r1")
        db.do(lambda tx: tx.run("UPDATE procrastinate_workers SET last_heartbeat = '2000-01-01'"))
        await jobs.sweep(app, db, lease_seconds=2)
    assert jobs_of(db) == [(first.id, "failed"), (first.id + 1, "todo")]
