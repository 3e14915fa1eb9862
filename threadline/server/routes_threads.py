"""``/threads``: create, read, search, copy and delete threads; read and edit their state."""

from __future__ import annotations

import functools
import uuid
from typing import Any

from fastapi import APIRouter, HTTPException, Response

from threadline.graph.compiled import CompiledStateGraph
from threadline.server import records
from threadline.server.bodies import (
    HistoryQuery,
    StateAt,
    StateUpdate,
    ThreadCount,
    ThreadCreate,
    ThreadPatch,
    ThreadPrune,
    ThreadSearch,
)
from threadline.server.db import Tx
from threadline.server.deps import Owner, ServerState, State, not_found
from threadline.server.wire import interrupts_by_task, jsonable, state_out, thread_status

router = APIRouter(prefix="/threads", tags=["threads"])


async def find_thread(state: ServerState, owner: str, thread_id: str) -> dict[str, Any]:
    found = await state.services.db.call(lambda tx: records.get_thread(tx, owner, thread_id))
    if found is None:
        raise not_found("thread", thread_id)
    return found


def thread_graph(state: ServerState, thread: dict[str, Any]) -> CompiledStateGraph | None:
    """The graph whose runs made this thread (``graph_id`` in its metadata), or the only one."""
    graphs = state.services.graphs
    graph_id = thread["metadata"].get("graph_id")
    if graph_id in graphs:
        return graphs[graph_id]
    return next(iter(graphs.values())) if len(graphs) == 1 else None


def _empty_state(thread_id: str) -> dict[str, Any]:
    checkpoint = {
        "thread_id": thread_id,
        "checkpoint_ns": "",
        "checkpoint_id": None,
        "checkpoint_map": None,
    }
    return {
        "values": {},
        "next": [],
        "checkpoint": checkpoint,
        "metadata": {},
        "created_at": None,
        "parent_checkpoint": None,
        "tasks": [],
        "interrupts": [],
    }


def _config(thread_id: str, checkpoint_id: str | None = None, ns: str = "") -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


@router.post("")
async def create(body: ThreadCreate, state: State, owner: Owner) -> dict[str, Any]:
    thread_id = body.thread_id or str(uuid.uuid4())
    metadata = dict(body.metadata or {})
    if body.graph_id:
        metadata["graph_id"] = body.graph_id

    def make(tx: Tx) -> dict[str, Any] | None:
        if records.thread_exists(tx, thread_id):
            return None
        return records.create_thread(tx, owner, thread_id, metadata)

    made = await state.services.db.call(make)
    if made is not None:
        return made
    existing = await state.services.db.call(lambda tx: records.get_thread(tx, owner, thread_id))
    if body.if_exists == "do_nothing" and existing is not None:
        return existing
    raise HTTPException(409, f"thread {thread_id} already exists")


@router.post("/search")
async def search(body: ThreadSearch, state: State, owner: Owner) -> list[dict[str, Any]]:
    q = body.model_dump()
    found = await state.services.db.call(lambda tx: records.search_threads(tx, owner, q))
    if body.select:
        found = [{k: t[k] for k in body.select if k in t} for t in found]
    return found


@router.post("/count")
async def count(body: ThreadCount, state: State, owner: Owner) -> int:
    q = body.model_dump()
    return await state.services.db.call(lambda tx: records.count_threads(tx, owner, q))


@router.get("/{thread_id}")
async def get(thread_id: str, state: State, owner: Owner) -> dict[str, Any]:
    return await find_thread(state, owner, thread_id)


@router.patch("/{thread_id}")
async def patch(thread_id: str, body: ThreadPatch, state: State, owner: Owner) -> dict[str, Any]:
    await find_thread(state, owner, thread_id)
    metadata = body.metadata or {}
    await state.services.db.call(lambda tx: records.patch_thread(tx, owner, thread_id, metadata))
    return await find_thread(state, owner, thread_id)


@router.delete("/{thread_id}", status_code=204)
async def delete(thread_id: str, state: State, owner: Owner) -> Response:
    await find_thread(state, owner, thread_id)
    active = await state.services.db.call(lambda tx: records.active_runs(tx, thread_id))
    if active:
        raise HTTPException(409, f"thread {thread_id} has runs in progress; cancel them first")
    await state.services.db.call(lambda tx: records.delete_thread(tx, owner, thread_id))
    await state.services.saver.adelete_thread(thread_id)
    return Response(status_code=204)


@router.post("/prune")
async def prune(body: ThreadPrune, state: State, owner: Owner) -> dict[str, int]:
    """Delete threads, or (``keep_latest``) all but their newest checkpoints; how many."""

    def owned(tx: Tx) -> list[str]:
        found = [t for t in dict.fromkeys(body.thread_ids) if records.get_thread(tx, owner, t)]
        busy = [t for t in found if records.active_runs(tx, t)]
        if busy:
            raise HTTPException(409, f"thread {busy[0]} has runs in progress; cancel them first")
        return found

    found = await state.services.db.call(owned)
    for thread_id in found:
        if body.strategy == "keep_latest":
            await state.services.saver.aprune(thread_id, keep_last=1)
        else:
            await state.services.db.call(
                functools.partial(records.delete_thread, owner=owner, thread_id=thread_id)
            )
            await state.services.saver.adelete_thread(thread_id)
    return {"pruned_count": len(found)}


@router.post("/{thread_id}/copy")
async def copy(thread_id: str, state: State, owner: Owner) -> dict[str, Any]:
    source = await find_thread(state, owner, thread_id)
    new_id = str(uuid.uuid4())
    await state.services.saver.acopy_thread(thread_id, new_id)

    def make(tx: Tx) -> dict[str, Any]:
        records.create_thread(tx, owner, new_id, source["metadata"])
        records.set_thread_state(
            tx,
            new_id,
            source["status"] if source["status"] != "busy" else "idle",
            source["values"],
            source["interrupts"],
            source["error"],
        )
        return records.get_thread(tx, owner, new_id) or {}

    return await state.services.db.call(make)


async def _state(
    state: ServerState,
    owner: str,
    thread_id: str,
    checkpoint_id: str | None,
    ns: str = "",
    subgraphs: bool = False,
) -> dict[str, Any]:
    thread = await find_thread(state, owner, thread_id)
    graph = thread_graph(state, thread)
    if graph is None:
        return _empty_state(thread_id)
    snap = await graph.aget_state(_config(thread_id, checkpoint_id, ns), subgraphs=subgraphs)
    if snap.config is None and checkpoint_id is None:
        return _empty_state(thread_id)
    return state_out(snap)


@router.get("/{thread_id}/state")
async def get_state(
    thread_id: str, state: State, owner: Owner, subgraphs: bool = False
) -> dict[str, Any]:
    return await _state(state, owner, thread_id, None, subgraphs=subgraphs)


@router.get("/{thread_id}/state/{checkpoint_id}")
async def get_state_at(
    thread_id: str, checkpoint_id: str, state: State, owner: Owner, subgraphs: bool = False
) -> dict[str, Any]:
    return await _state(state, owner, thread_id, checkpoint_id, subgraphs=subgraphs)


@router.post("/{thread_id}/state/checkpoint")
async def post_state_at(
    thread_id: str, body: StateAt, state: State, owner: Owner
) -> dict[str, Any]:
    ref = body.checkpoint
    return await _state(
        state,
        owner,
        thread_id,
        ref.checkpoint_id if ref else None,
        ref.checkpoint_ns if ref else "",
        body.subgraphs,
    )


@router.post("/{thread_id}/state")
async def update_state(
    thread_id: str, body: StateUpdate, state: State, owner: Owner
) -> dict[str, Any]:
    thread = await find_thread(state, owner, thread_id)
    if thread["status"] == "busy":
        raise HTTPException(409, f"thread {thread_id} has a run in progress; wait or cancel it")
    graph = thread_graph(state, thread)
    if graph is None:
        raise HTTPException(
            409, f"thread {thread_id} has no graph yet: create it with graph_id, or run it first"
        )
    ref = body.checkpoint
    checkpoint_id = body.checkpoint_id or (ref.checkpoint_id if ref else None)
    config = _config(thread_id, checkpoint_id, ref.checkpoint_ns if ref else "")
    new = await graph.aupdate_state(config, body.values, as_node=body.as_node)
    snap = await graph.aget_state(_config(thread_id))
    status = thread_status(snap)
    await state.services.db.call(
        lambda tx: records.set_thread_state(
            tx, thread_id, status, jsonable(snap.values), interrupts_by_task(snap)
        )
    )
    return {"checkpoint": new["configurable"]}


async def _history(
    state: ServerState, owner: str, thread_id: str, q: HistoryQuery
) -> list[dict[str, Any]]:
    thread = await find_thread(state, owner, thread_id)
    graph = thread_graph(state, thread)
    if graph is None:
        return []
    ref = q.checkpoint
    before = q.before if isinstance(q.before, str) or q.before is None else q.before.checkpoint_id
    config = _config(
        thread_id, ref.checkpoint_id if ref else None, ref.checkpoint_ns if ref else ""
    )
    before_config = None if before is None else _config(thread_id, before)
    return [
        state_out(snap)
        async for snap in graph.aget_state_history(
            config, filter=q.metadata, before=before_config, limit=q.limit
        )
    ]


@router.get("/{thread_id}/history")
async def history(
    thread_id: str, state: State, owner: Owner, limit: int = 10, before: str | None = None
) -> list[dict[str, Any]]:
    return await _history(state, owner, thread_id, HistoryQuery(limit=limit, before=before))


@router.post("/{thread_id}/history")
async def post_history(
    thread_id: str, body: HistoryQuery, state: State, owner: Owner
) -> list[dict[str, Any]]:
    return await _history(state, owner, thread_id, body)
