"""``AsyncPostgresSaver``: the PostgreSQL saver under LangGraph's async name and import path.

It takes what LangGraph's takes — an ``AsyncConnection`` or ``AsyncConnectionPool`` made with
``autocommit=True`` (kept open when the saver closes; ``pools.py``) — or a URL, and its
``setup()`` is awaited::

    async with AsyncPostgresSaver.from_conn_string(DB_URI) as saver:
        await saver.setup()  # from_conn_string has already run it; idempotent
        graph = builder.compile(checkpointer=saver)

On a URL it is ``PostgresSaver`` with that ``setup``: native async pools per event loop, and
sync methods on their own pool. On an async connection or pool, sync methods send their
statements to the connection's event loop from other threads (``Connections.home``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Self

from threadline.checkpoint.postgres.saver import PostgresSaver


class AsyncPostgresSaver(PostgresSaver):
    """``PostgresSaver`` on async connections, with an awaitable ``setup()``."""

    @classmethod
    @asynccontextmanager
    async def from_conn_string(  # type: ignore[override]
        cls, conn_string: str, *, pipeline: bool = False, **options: Any
    ) -> AsyncIterator[Self]:
        """A set-up saver, closed when the block ends: ``async with ... as saver:``. Its
        operations are pipelined whatever ``pipeline`` says (each is one round trip)."""
        saver = cls(conn_string, **options)
        try:
            await saver.asetup()
            yield saver
        finally:
            await saver.aclose()

    async def setup(self) -> None:  # type: ignore[override]
        """Create the schema, tables and functions if missing; idempotent."""
        await self.asetup()


__all__ = ["AsyncPostgresSaver"]
