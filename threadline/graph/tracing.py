"""Reading a thread's execution trace: ``graph.get_trace(config, since=...)``.

The entries are pending writes of kind ``trace`` on the thread's checkpoints (see
``runtime/trace.py``), so reading them is listing the checkpoints and collecting those writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from threadline.checkpoint.base import CheckpointRecord
from threadline.clock import iso_at
from threadline.runtime.trace import TraceEntry, trace_entries

if TYPE_CHECKING:
    from threadline.checkpoint.base import BaseSaver

# A batch's id (a UUIDv7, as checkpoint ids) and the entry's index in it
_ENTRY_ID = re.compile(r"^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\.[0-9a-f]{8}$")


class TraceReading:
    """``get_trace`` / ``aget_trace`` for a compiled graph (and an ``@entrypoint``)."""

    # The saver, thread, namespace and checkpoint a config addresses (``CompiledStateGraph``)
    _address: Callable[[Mapping[str, Any]], tuple[BaseSaver, str, str, str | None]]

    def get_trace(
        self, config: Mapping[str, Any], *, since: str | datetime | None = None
    ) -> list[TraceEntry]:
        """The thread's execution trace, oldest entry first.

        ``since``: an entry id (``TraceEntry.id``, to read only what came after it) or an
        aware ``datetime`` (entries made at or after it). Like ``get_state_history``, it reads
        the whole thread, every branch (each entry names its ``checkpoint_id``), whatever
        checkpoint the config names; ``checkpoint_ns`` reads a subgraph's own trace.
        """
        after = _since(since)
        saver, thread_id, ns, _ = self._address(config)
        return _entries(saver.list(thread_id, ns), after)

    async def aget_trace(
        self, config: Mapping[str, Any], *, since: str | datetime | None = None
    ) -> list[TraceEntry]:
        after = _since(since)
        saver, thread_id, ns, _ = self._address(config)
        return _entries([r async for r in saver.alist(thread_id, ns)], after)


def _since(since: str | datetime | None) -> tuple[str, str] | None:
    """``since`` as ``("id", entry_id)`` or ``("at", iso timestamp)``."""
    if since is None:
        return None
    if isinstance(since, datetime):
        if since.tzinfo is None:
            raise ValueError(
                "get_trace(since=...) takes an aware datetime (entries are stamped in UTC): "
                "datetime.now(UTC), not datetime.now()"
            )
        return "at", iso_at(round(since.timestamp() * 1_000_000))
    if isinstance(since, str) and _ENTRY_ID.match(since):
        return "id", since
    raise TypeError(
        f"get_trace(since=...) takes a TraceEntry.id or an aware datetime, got {since!r}"
    )


def _entries(
    records: Iterable[CheckpointRecord], after: tuple[str, str] | None
) -> list[TraceEntry]:
    entries = [e for r in records for e in trace_entries(r)]
    if after is not None:
        field, value = after
        if field == "id":
            entries = [e for e in entries if e.id > value]
        else:
            entries = [e for e in entries if e.at >= value]
    entries.sort(key=lambda e: e.id)
    return entries
