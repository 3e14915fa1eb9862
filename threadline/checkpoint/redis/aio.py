"""``AsyncRedisSaver``: the Redis saver under langgraph-redis's async name and import path.

It takes what langgraph-redis's takes — ``redis_url``, or ``redis_client=`` a
``redis.asyncio.Redis`` of the program's (kept open when the saver closes) — and its setup is
awaited; ``async with`` runs it, as there::

    async with AsyncRedisSaver.from_conn_string("redis://localhost:6379") as saver:
        await saver.asetup()  # already run on entering; idempotent
        graph = builder.compile(checkpointer=saver)

On a URL it is ``RedisSaver`` (async clients per event loop, and sync calls on its own pool).
On an async client, nothing is sent before the first async call (or ``asetup``); sync methods
are run on that client's event loop from other threads (``loopbound.py``). The saver's methods
written over transactions (``alist``, ``aprune``, ...) run in a worker thread, whose requests
go back to that loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Self, TypeVar

from threadline.checkpoint.base import CheckpointRecord, ThreadInfo, ThreadStatus
from threadline.checkpoint.core import CoreSaver
from threadline.checkpoint.loopbound import LoopBound
from threadline.checkpoint.redis.saver import RedisSaver
from threadline.errors import ConfigError

_T = TypeVar("_T")


class AsyncRedisSaver(LoopBound, RedisSaver):
    """``RedisSaver`` on an async client too, with awaitable ``setup()`` / ``asetup()``."""

    def __init__(self, redis_url: str | None = None, **options: Any) -> None:
        super().__init__(redis_url, **options)
        if self._client is None:  # an async client of the program's
            try:
                self._home = self.backend.conn.home = asyncio.get_running_loop()
            except RuntimeError:
                raise ConfigError(
                    "AsyncRedisSaver over a redis.asyncio client must be made inside the event "
                    "loop that client belongs to (in an async function)"
                ) from None

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

    async def _in_thread(self, call: Callable[[], _T]) -> _T:
        """``call`` (a ``CoreSaver`` method, not the ``LoopBound`` one that would come back
        here) in a worker thread."""
        return await asyncio.to_thread(call)

    async def alist(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointRecord]:
        records = await self._in_thread(
            lambda: list(
                CoreSaver.list(
                    self, thread_id, checkpoint_ns, filter=filter, before=before, limit=limit
                )
            )
        )
        for record in records:
            yield record

    async def adelete_thread(self, thread_id: str) -> None:
        await self._in_thread(lambda: CoreSaver.delete_thread(self, thread_id))

    async def alist_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        return await self._in_thread(
            lambda: CoreSaver.list_threads(self, status=status, limit=limit)
        )

    async def aprune(self, thread_id: str, *, keep_last: int) -> int:
        return await self._in_thread(lambda: CoreSaver.prune(self, thread_id, keep_last=keep_last))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._in_thread(
            lambda: CoreSaver.copy_thread(self, source_thread_id, target_thread_id)
        )


__all__ = ["AsyncRedisSaver"]
