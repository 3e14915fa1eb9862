"""``GET /threads/{id}/trace``: the thread's persisted execution trace (threadline's own; LangGraph
Server has no such endpoint). Node and task attempts, retries, interrupts asked and answered,
and recorded events, oldest first, every branch of the thread."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from threadline.server.deps import Owner, State
from threadline.server.routes_threads import find_thread, thread_graph
from threadline.server.wire import jsonable

router = APIRouter(tags=["threads"])


@router.get("/threads/{thread_id}/trace")
async def trace(
    thread_id: str, state: State, owner: Owner, since: str | None = None
) -> list[dict[str, Any]]:
    """Entries after the entry id ``since``, or all of them."""
    graph = thread_graph(state, await find_thread(state, owner, thread_id))
    if graph is None:
        return []
    entries = await graph.aget_trace({"configurable": {"thread_id": thread_id}}, since=since)
    return [jsonable(entry) for entry in entries]
