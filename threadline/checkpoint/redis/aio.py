"""``AsyncRedisSaver``: the Redis saver under langgraph-redis's async name and import path.

It takes what langgraph-redis's takes — ``redis_url``, or ``redis_client=`` a
``redis.asyncio.Redis`` of the program's (kept open when the saver closes) — and its setup is
awaited; ``async with`` runs it, as there::

    async with AsyncRedisSaver.from_conn_string("redis://localhost:6379") as saver:
        await saver.asetup()  # already run on entering; idempotent
        graph = builder.compile(checkpointer=saver)

On a URL it is ``RedisSaver``. On an async client, which must be made in the event loop that
client belongs to, nothing is sent before the first async call (or ``asetup``), and every
request goes to that loop: sync methods work from other threads (``connection.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Self

from threadline.checkpoint.redis.saver import RedisSaver


class AsyncRedisSaver(RedisSaver):
    """``RedisSaver`` on an async client too, with awaitable ``setup()`` / ``asetup()``."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls, redis_url: str | None = None, *, redis_client: Any = None, **options: Any
    ) -> AsyncIterator[Self]:
        """A set-up saver, closed when the block ends: ``async with ... as saver:``."""
        async with cls(redis_url, redis_client=redis_client, **options) as saver:
            yield saver

    async def setup(self) -> None:  # type: ignore[override]
        """Check (or record) the layout version and load the scripts; idempotent."""
        await self.asetup()

    async def __aenter__(self) -> Self:
        await self.asetup()
        return self


__all__ = ["AsyncRedisSaver"]
