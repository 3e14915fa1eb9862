"""Sync calls to a saver whose only connection belongs to one event loop.

``AsyncPostgresSaver(async_conn)`` and ``AsyncRedisSaver(redis_client=async_client)`` can talk
to their server only from the loop that owns the connection. Their sync methods (a sync
``graph.invoke`` in another thread, say) send their work to that loop, as LangGraph's async
savers do; called on the loop's own thread they would block it forever, so they raise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from threadline.errors import ConfigError, SaverUnavailableError

_T = TypeVar("_T")


def run_on(home: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, _T], saver: str) -> _T:
    """Run ``coro`` on ``home`` from another thread and wait for it; on ``home``'s own thread
    (where waiting would block it forever) or once it is closed, a clear error."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is home or home.is_closed():
        coro.close()
        if home.is_closed():
            raise SaverUnavailableError(
                f"{saver}: the event loop its connection belongs to is closed; make the "
                "saver again on a connection of a running event loop"
            )
        raise ConfigError(
            f"{saver} runs on an async connection: from its event loop, use the async "
            "interface (await graph.ainvoke(...), await graph.aget_state(...)); sync calls are "
            "only possible from another thread"
        )
    return asyncio.run_coroutine_threadsafe(coro, home).result()
