"""Async puts of many threads sent together: one statement, one round trip, one commit.

Under ``asyncio`` many runs save at once (a server running hundreds of threads), and each put
alone pays a connection checkout, a round trip, the event loop's waits and a commit. So puts
made on one event loop queue up here; one task sends what has queued as one call of
``threadline_put_many`` (``schema.py``), which runs each put in its own subtransaction and
reports, per put, whether it lost its compare-and-set or missed values. Two statements may be
in flight, so the server runs one while the next gathers; a lone put waits for nothing but its
own round trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from threadline.checkpoint.backend import HeadMoved, NotStored
from threadline.checkpoint.postgres.connections import Batch, Connections, Op, Stmt, put_failure
from threadline.checkpoint.postgres.rows import (
    PutParams,
    to_json,
)

# Puts per statement. Runs on one loop move in step: each waits for its put, and their next puts
# all come in while the last statement runs. Sent in parts of 64, the server stores one part
# while the client computes the steps of the runs the part before released: 200 concurrent runs
# went ~40% faster here than with parts of 200, which left client and server taking turns.
MAX_PUTS = 64
SENDERS = 2  # statements in flight at once: the server runs one while the client gathers
Failure = HeadMoved | NotStored


class PutBatcher:
    """The puts waiting on one event loop, and the task that sends them."""

    def __init__(self, db: Connections, query: str) -> None:
        self._db = db
        self._query = query
        self._waiting: list[tuple[PutParams, asyncio.Future[Failure | None]]] = []
        self._senders: set[asyncio.Task[None]] = set()

    async def put(self, params: PutParams) -> Failure | None:
        """Save one put with whatever else is waiting; its failure, if it failed alone."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[Failure | None] = loop.create_future()
        self._waiting.append((params, done))
        if len(self._senders) < SENDERS:
            sender = loop.create_task(self._send())
            self._senders.add(sender)
            sender.add_done_callback(self._senders.discard)
        return await done

    async def _send(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting[:MAX_PUTS], self._waiting[MAX_PUTS:]
            try:
                rows = await self._db.arun(_put_many(self._query, [p for p, _ in batch]), None)
            except asyncio.CancelledError:
                for _, done in batch:
                    done.cancel()
                raise
            except Exception as exc:  # the statement failed: every put in it did
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            for (_, done), (state, detail) in zip(batch, rows, strict=True):
                if done.done():
                    continue
                try:
                    done.set_result(_failure(state, detail))
                except RuntimeError as exc:  # a state this release does not know: that put only
                    done.set_exception(exc)


def _put_many(query: str, puts: Sequence[PutParams]) -> Op[list[tuple[Any, ...]]]:
    at = 0
    for put in puts:  # each put's pieces, offset by where its bytes start in the whole
        put.fields["o"] = at
        at += put.size
    data = b"".join([part for p in puts for part in p.parts])  # each put's pieces, copied once
    params = {"puts": to_json([p.fields for p in puts]), "data": data}
    (rows,) = yield Batch([Stmt(query, params, hot=True)])
    return rows


def _failure(state: str | None, detail: str | None) -> Failure | None:
    """A put's row: nothing (saved), a lost compare-and-set, or values that are not stored."""
    failure = put_failure(state, detail)
    if failure is not None or state is None:
        return failure
    raise RuntimeError(  # the function of this release reports only those two
        f"threadline_put_many reported SQLSTATE {state} ({detail}): the schema's functions may "
        "be from another threadline release; run the saver's setup() to install this one's"
    )
