"""A run's stream events: stored with a sequence number, read back live or after a reconnect.

The worker appends every chunk to ``tl_events`` (in small batches); any API server reads them
from there, so a client may reconnect to another server with ``Last-Event-ID`` and miss
nothing. In one process an ``EventBus`` wakes readers at once; across processes they poll.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

from threadline.server import records
from threadline.server.db import Database, Tx

log = logging.getLogger("threadline.server")

END_EVENT = "__end__"  # stored last; closes readers, never sent to a client
RESULT_EVENT = "__result__"  # where the run left its thread, for wait and join; not sent
POLL_SECONDS = 0.1


class EventBus:
    """Wakes readers of a run in this process when its worker stored new events."""

    def __init__(self) -> None:
        self._waiters: dict[str, set[asyncio.Event]] = defaultdict(set)

    def notify(self, run_id: str) -> None:
        for waiter in self._waiters.get(run_id, ()):
            waiter.set()

    async def wait(self, run_id: str, timeout: float) -> None:
        waiter = asyncio.Event()
        self._waiters[run_id].add(waiter)
        try:
            await asyncio.wait_for(waiter.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._waiters[run_id].discard(waiter)
            if not self._waiters[run_id]:
                del self._waiters[run_id]


class EventLog:
    """Appends one run's events, batching the writes of a fast stream (about every 20 ms)."""

    def __init__(self, db: Database, bus: EventBus, run_id: str, next_seq: int) -> None:
        self._db, self._bus, self.run_id = db, bus, run_id
        self._seq = next_seq
        self._pending: list[tuple[str, str]] = []
        self._flushed = time.monotonic()

    async def add(self, event: str, data: Any) -> None:
        self._pending.append((event, records.dumps(data)))
        if time.monotonic() - self._flushed > 0.02:
            await self.flush()

    async def flush(self) -> None:
        if not self._pending:
            return
        batch, first = self._pending, self._seq
        self._pending, self._seq = [], self._seq + len(batch)
        await self._db.call(lambda tx: records.append_events(tx, self.run_id, first, batch))
        self._flushed = time.monotonic()
        self._bus.notify(self.run_id)

    async def close(self, also: Callable[[Tx], None] | None = None) -> None:
        """Store the last events and the end mark, with ``also`` in the same transaction (the
        run's final status: a reader that sees the end sees the status too)."""
        self._pending.append((END_EVENT, records.dumps(None)))
        batch, first = self._pending, self._seq
        self._pending, self._seq = [], self._seq + len(batch)

        def write(tx: Tx) -> None:
            records.append_events(tx, self.run_id, first, batch)
            if also is not None:
                also(tx)

        await self._db.call(write)
        self._bus.notify(self.run_id)


def last_seq(tx: Tx, run_id: str) -> int:
    row = tx.row("SELECT MAX(seq) AS seq FROM tl_events WHERE run_id = ?", run_id)
    return -1 if row is None or row["seq"] is None else int(row["seq"])


async def read_events(
    db: Database, bus: EventBus, run_id: str, after: int, heartbeat: float
) -> AsyncIterator[tuple[int, str, str] | None]:
    """``(seq, event, data_json)`` of a run after ``after``, live; ``None`` is a heartbeat.

    Ends after the run's last event, or at once when the run no longer exists.
    """
    quiet_since = time.monotonic()
    while True:
        rows = await db.call(functools.partial(records.events_after, run_id=run_id, seq=after))
        for row in rows:
            after = row["seq"]
            if row["event"] == END_EVENT:
                return
            if row["event"] == RESULT_EVENT:
                continue
            yield after, row["event"], row["data"]
        if rows:
            quiet_since = time.monotonic()
            continue
        if await db.call(lambda tx: records.run_row(tx, run_id)) is None:
            return
        if time.monotonic() - quiet_since >= heartbeat:
            quiet_since = time.monotonic()
            yield None
        await bus.wait(run_id, POLL_SECONDS)


def run_result(tx: Tx, run_id: str) -> Any:
    """What the run left (``values``, ``interrupts``, ``error``), once it has ended."""
    row = tx.row("SELECT data FROM tl_events WHERE run_id = ? AND event = ?", run_id, RESULT_EVENT)
    return None if row is None else json.loads(row["data"])


async def relay_notifications(url: str, bus: EventBus) -> None:
    """Wake this process's readers when a worker elsewhere stored events or settled a run
    (PostgreSQL LISTEN); they would otherwise notice only at their next poll."""
    import psycopg

    while True:
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f"LISTEN {records.RUN_CHANNEL}")
                async for note in conn.notifies():
                    bus.notify(note.payload)
        except psycopg.Error as exc:  # the database went away: readers poll until it is back
            log.warning("listening for run events failed (%s); retrying in 1 s", exc)
            await asyncio.sleep(1)
