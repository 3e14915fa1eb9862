"""Sync calls to a saver whose only connection belongs to one event loop.

``AsyncPostgresSaver(async_conn)`` and ``AsyncRedisSaver(redis_client=async_client)`` can talk
to their server only from the loop that owns the connection. Their sync methods (a sync
``graph.invoke`` in another thread, say) are run as the async ones on that loop, as LangGraph's
async savers do; called on the loop's own thread they would block it forever, so they raise.
A saver whose ``_home`` is ``None`` has sync connections of its own and runs sync calls itself.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from threadline.checkpoint.base import (
    BaseSaver,
    CheckpointRecord,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
)
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


class LoopBound(BaseSaver):
    """Mixin, placed before the saver class: sync methods go to ``_home`` when it is set."""

    _home: asyncio.AbstractEventLoop | None = None

    def _on_home(self, coro: Coroutine[Any, Any, _T]) -> _T:
        home = self._home
        assert home is not None
        return run_on(home, coro, type(self).__name__)

    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        if self._home is None:
            return super().get_tuple(thread_id, checkpoint_ns, checkpoint_id)  # type: ignore[safe-super]
        return self._on_home(self.aget_tuple(thread_id, checkpoint_ns, checkpoint_id))

    def list(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointRecord]:
        args = (thread_id, checkpoint_ns)
        if self._home is None:
            return super().list(*args, filter=filter, before=before, limit=limit)  # type: ignore[safe-super]

        async def collect() -> list[CheckpointRecord]:
            return [r async for r in self.alist(*args, filter=filter, before=before, limit=limit)]

        return iter(self._on_home(collect()))

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        if self._home is None:
            return super().put(record, fork=fork)  # type: ignore[safe-super]
        return self._on_home(self.aput(record, fork=fork))

    def put_writes(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, writes: Sequence[TaskWrite]
    ) -> None:
        args = (thread_id, checkpoint_ns, checkpoint_id, writes)
        if self._home is None:
            return super().put_writes(*args)  # type: ignore[safe-super]
        return self._on_home(self.aput_writes(*args))

    def delete_thread(self, thread_id: str) -> None:
        if self._home is None:
            return super().delete_thread(thread_id)  # type: ignore[safe-super]
        return self._on_home(self.adelete_thread(thread_id))

    def list_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> builtins.list[ThreadInfo]:
        if self._home is None:
            return super().list_threads(status=status, limit=limit)  # type: ignore[safe-super]
        return self._on_home(self.alist_threads(status=status, limit=limit))

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        if self._home is None:
            return super().prune(thread_id, keep_last=keep_last)  # type: ignore[safe-super]
        return self._on_home(self.aprune(thread_id, keep_last=keep_last))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        if self._home is None:
            return super().copy_thread(source_thread_id, target_thread_id)  # type: ignore[safe-super]
        return self._on_home(self.acopy_thread(source_thread_id, target_thread_id))
