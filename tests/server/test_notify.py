"""On PostgreSQL, a worker's stored events reach other processes' readers by NOTIFY."""

from __future__ import annotations

import asyncio

import psycopg
from services import require_postgres

from threadline.server import records
from threadline.server.events import EventBus, relay_notifications


class Heard(EventBus):
    def __init__(self) -> None:
        super().__init__()
        self.runs: asyncio.Queue[str] = asyncio.Queue()

    def notify(self, run_id: str) -> None:
        self.runs.put_nowait(run_id)


async def test_a_notify_from_another_connection_wakes_this_process() -> None:
    url = require_postgres()
    bus = Heard()
    relay = asyncio.create_task(relay_notifications(url, bus))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(50):  # until the relay listens; a NOTIFY before that is not heard
                conn.execute("SELECT pg_notify(%s, %s)", (records.RUN_CHANNEL, "run-42"))
                try:
                    heard = await asyncio.wait_for(bus.runs.get(), 0.2)
                    break
                except TimeoutError:
                    continue
        assert heard == "run-42"
    finally:
        relay.cancel()
        await asyncio.gather(relay, return_exceptions=True)
