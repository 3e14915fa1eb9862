"""Sync calls to a saver whose only connection belongs to one event loop.

``AsyncPostgresSaver(async_conn)`` and ``AsyncRedisSaver(redis_client=async_client)`` can talk
to their server only from the loop that owns the connection. Their sync methods (a sync
``graph.invoke`` in another thread, say) are run as the async ones on that loop, as LangGraph's
async savers do; called on the loop's own thread they would block it forever, so they raise.
A saver whose ``_home`` is ``None`` has sync connections of its own and runs sync calls itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from typing import Any, TypeVar

from threadline.checkpoint.base import BaseSaver
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
                f"{saver}: the event loop its connection belongs to is closed"
            )
        raise ConfigError(
            f"{saver} runs on an async connection: from its event loop, use the async "
            "interface (await graph.ainvoke(...), await graph.aget_state(...)); sync calls are "
            "only possible from another thread"
        )
    return asyncio.run_coroutine_threadsafe(coro, home).result()


async def _collected(records: AsyncIterator[_T]) -> list[_T]:
    return [r async for r in records]


def _sync(name: str) -> Any:
    """The sync method ``name``: the saver's own without ``_home``, else ``a<name>`` on it."""

    def method(self: LoopBound, *args: Any, **kwargs: Any) -> Any:
        home = self._home
        if home is None:
            return getattr(super(LoopBound, self), name)(*args, **kwargs)
        result = getattr(self, f"a{name}")(*args, **kwargs)
        if name == "list":  # an async iterator, collected there
            return iter(run_on(home, _collected(result), type(self).__name__))
        return run_on(home, result, type(self).__name__)

    method.__name__ = method.__qualname__ = name
    return method


class LoopBound(BaseSaver):
    """Mixin, placed before the saver class: sync methods go to ``_home`` when it is set."""

    _home: asyncio.AbstractEventLoop | None = None

    get_tuple = _sync("get_tuple")
    list = _sync("list")
    put = _sync("put")
    put_writes = _sync("put_writes")
    delete_thread = _sync("delete_thread")
    list_threads = _sync("list_threads")
    prune = _sync("prune")
    copy_thread = _sync("copy_thread")
