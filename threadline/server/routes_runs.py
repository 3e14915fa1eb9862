"""Runs: on a thread (``/threads/{id}/runs...``) or stateless (``/runs...``), in the
background, streamed (server-sent events) or waited for; joined, cancelled, deleted."""

from __future__ import annotations

import asyncio
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, HTTPException, Query, Request, Response
from fastapi.responses import StreamingResponse

from threadline.server import records
from threadline.server.bodies import RunCreate, RunsCancel
from threadline.server.db import Tx
from threadline.server.deps import Owner, ServerState, State, not_found
from threadline.server.events import POLL_SECONDS, read_events, run_result
from threadline.server.queue import iso_in
from threadline.server.records import ACTIVE
from threadline.server.routes_assistants import find_assistant
from threadline.server.routes_threads import find_thread
from threadline.server.runopts import STREAM_MODES, event_name

router = APIRouter(tags=["runs"])
DISCONNECT_POLL_SECONDS = 0.2  # how often a waiting /wait with on_disconnect=cancel looks


async def start_run(
    state: ServerState, owner: str, thread_id: str | None, body: RunCreate
) -> dict[str, Any]:
    """Queue a run; with another run going on the thread, do what ``multitask_strategy`` says."""
    assistant = await find_assistant(state, owner, body.assistant_id)
    try:
        kwargs = body.run_kwargs()
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    stateless = thread_id is None
    if stateless:
        kwargs["on_completion"] = body.on_completion or "delete"
    elif body.on_completion is not None:
        raise HTTPException(422, "on_completion is for stateless runs (POST /runs...)")
    tid = thread_id or str(uuid.uuid4())
    run = {
        "run_id": str(uuid.uuid4()),
        "thread_id": tid,
        "assistant_id": assistant["assistant_id"],
        "kwargs": kwargs,
        "metadata": body.metadata,
        "stateless": stateless,
        "multitask_strategy": body.multitask_strategy,
        "start_after": iso_in(body.after_seconds or 0),
    }
    marks = {"graph_id": assistant["graph_id"], "assistant_id": assistant["assistant_id"]}

    def queue(tx: Tx) -> dict[str, Any] | None:
        if records.get_thread(tx, owner, tid) is None:
            if not (stateless or body.if_not_exists == "create") or records.thread_exists(tx, tid):
                raise not_found("thread", tid)
            records.create_thread(tx, owner, tid, marks)
        else:
            records.patch_thread(tx, owner, tid, marks)
        active = [r["run_id"] for r in records.active_runs(tx, tid)]
        if active and body.multitask_strategy == "reject":
            raise HTTPException(
                409,
                f"thread {tid} has a run in progress ({active[0]}); pass multitask_strategy "
                "'enqueue', 'interrupt' or 'rollback' to start another",
            )
        if active and body.multitask_strategy in ("interrupt", "rollback"):
            records.request_cancel(tx, active, body.multitask_strategy)
        records.insert_run(tx, owner, run)
        records.set_thread_status(tx, tid, "busy")
        return records.get_run(tx, owner, run["run_id"])

    created = await state.services.db.call(queue)
    state.wake()
    assert created is not None
    return created


def _sse(event: str, data: str, seq: int | None = None) -> bytes:
    text = f"event: {event}\ndata: {data}\n"
    if seq is not None:
        text += f"id: {seq}\n"
    return (text + "\n").encode()


def stream_response(
    state: ServerState,
    run: dict[str, Any],
    *,
    after: int = -1,
    on_disconnect: str = "continue",
    modes: list[str] | None = None,
    forget: bool = False,
) -> StreamingResponse:
    """The run's events as server-sent events, from just after ``after``."""
    run_id, thread_id = run["run_id"], run["thread_id"]
    services = state.services

    async def events() -> Any:
        yield _sse("metadata", records.dumps({"run_id": run_id, "attempt": 1}))
        try:
            async for item in read_events(
                services.db, services.bus, run_id, after, state.settings.heartbeat_seconds
            ):
                if item is None:
                    yield b": heartbeat\n\n"
                elif modes is None or item[1].split("|")[0] in modes or item[1] == "error":
                    yield _sse(item[1], item[2], item[0])
            # the stream has no ``end`` event: langgraph-sdk asks for the run's status when a
            # stream closes, and reconnects while it still reads as running
            await wait_for_end(state, run_id)
            if forget:  # a stateless run, read to its end: nothing of it is kept
                await _forget(state, run)
        except asyncio.CancelledError:
            if on_disconnect == "cancel":  # the client left: stop the run too
                asyncio.get_running_loop().create_task(_cancel(state, [run_id], "interrupt"))
            raise

    path = f"/threads/{thread_id}/runs/{run_id}"
    headers = {"Location": f"{path}/stream", "Content-Location": path, "Cache-Control": "no-store"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _deletes_itself(run: dict[str, Any]) -> bool:
    """A stateless run whose thread and records go once it has been read to its end."""
    return bool(run["kwargs"].get("on_completion") == "delete")


async def _forget(state: ServerState, run: dict[str, Any]) -> None:
    await state.services.db.call(lambda tx: records.delete_run(tx, None, run["run_id"]))


async def _cancel(state: ServerState, run_ids: list[str], action: str) -> None:
    await state.services.db.call(lambda tx: records.request_cancel(tx, run_ids, action))


async def wait_for_end(state: ServerState, run_id: str) -> dict[str, Any]:
    """Block until the run has ended; what it left (values, interrupts, failure)."""
    db, bus = state.services.db, state.services.bus
    while True:
        result = await db.call(lambda tx: _result_if_ended(tx, run_id))
        if result is not None:
            return result
        await bus.wait(run_id, POLL_SECONDS)


def _result_if_ended(tx: Tx, run_id: str) -> dict[str, Any] | None:
    row = records.run_row(tx, run_id)
    if row is not None and row["status"] in records.ACTIVE:
        return None
    found: dict[str, Any] = run_result(tx, run_id) or {}
    return found


def output(result: dict[str, Any]) -> dict[str, Any]:
    """``/wait`` and ``/join``'s body: the thread's values, with ``__interrupt__`` when it
    waits for a person, or ``__error__`` when the run failed."""
    if result.get("failure"):
        return {"__error__": result["failure"]}
    values = result.get("values")
    out = dict(values) if isinstance(values, dict) else {"values": values}
    pending = [i for items in (result.get("interrupts") or {}).values() for i in items]
    if pending:
        out["__interrupt__"] = pending
    return out


# ------------------------------------------------------------- runs on a thread
@router.post("/threads/{thread_id}/runs")
async def create(thread_id: str, body: RunCreate, state: State, owner: Owner) -> dict[str, Any]:
    return await start_run(state, owner, thread_id, body)


@router.post("/threads/{thread_id}/runs/stream")
async def create_stream(
    thread_id: str, body: RunCreate, state: State, owner: Owner
) -> StreamingResponse:
    run = await start_run(state, owner, thread_id, body)
    return stream_response(state, run, on_disconnect=body.on_disconnect)


async def wait_or_cancel(
    state: ServerState, request: Request, run_id: str, on_disconnect: str
) -> dict[str, Any]:
    """``wait_for_end``; with ``on_disconnect="cancel"``, a client that leaves cancels the run."""
    if on_disconnect != "cancel":
        return await wait_for_end(state, run_id)
    waiting = asyncio.ensure_future(wait_for_end(state, run_id))
    while not waiting.done():
        await asyncio.wait({waiting}, timeout=DISCONNECT_POLL_SECONDS)
        if not waiting.done() and await request.is_disconnected():
            await _cancel(state, [run_id], "interrupt")
    return waiting.result()


@router.post("/threads/{thread_id}/runs/wait")
async def create_wait(
    thread_id: str, body: RunCreate, state: State, owner: Owner, request: Request
) -> Response:
    run = await start_run(state, owner, thread_id, body)
    return _json(
        output(await wait_or_cancel(state, request, run["run_id"], body.on_disconnect)), run
    )


@router.get("/threads/{thread_id}/runs")
async def list_runs(
    thread_id: str,
    state: State,
    owner: Owner,
    limit: int = Query(10, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
    status: str | None = None,
) -> list[dict[str, Any]]:
    await find_thread(state, owner, thread_id)
    return await state.services.db.call(
        lambda tx: records.list_runs(tx, owner, thread_id, limit, offset, status)
    )


async def find_run(state: ServerState, owner: str, thread_id: str, run_id: str) -> dict[str, Any]:
    found = await state.services.db.call(lambda tx: records.get_run(tx, owner, run_id, thread_id))
    if found is None:
        raise not_found("run", run_id)
    return found


@router.get("/threads/{thread_id}/runs/{run_id}")
async def get(thread_id: str, run_id: str, state: State, owner: Owner) -> dict[str, Any]:
    return await find_run(state, owner, thread_id, run_id)


@router.get("/threads/{thread_id}/runs/{run_id}/join")
async def join(thread_id: str, run_id: str, state: State, owner: Owner) -> dict[str, Any]:
    await find_run(state, owner, thread_id, run_id)
    return output(await wait_for_end(state, run_id))


@router.get("/threads/{thread_id}/runs/{run_id}/stream")
async def join_stream(
    thread_id: str,
    run_id: str,
    state: State,
    owner: Owner,
    last_event_id: Annotated[str | None, Header()] = None,
    cancel_on_disconnect: bool = False,
    stream_mode: Annotated[list[str] | None, Query()] = None,
) -> StreamingResponse:
    run = await find_run(state, owner, thread_id, run_id)
    after = int(last_event_id) if last_event_id and last_event_id.lstrip("-").isdigit() else -1
    # langgraph-sdk sends ``stream_mode=`` (empty) when it means every mode
    wanted = [m for m in stream_mode or [] if m]
    unknown = [m for m in wanted if m not in STREAM_MODES]
    if unknown:
        raise HTTPException(422, f"stream_mode: unknown modes {unknown}; use {list(STREAM_MODES)}")
    return stream_response(
        state,
        run,
        after=after,
        modes=[event_name(m) for m in wanted] or None,
        on_disconnect="cancel" if cancel_on_disconnect else "continue",
    )


@router.post("/threads/{thread_id}/runs/{run_id}/cancel", status_code=202)
async def cancel(
    thread_id: str,
    run_id: str,
    state: State,
    owner: Owner,
    wait: bool = False,
    action: str = Query("interrupt", pattern="^(interrupt|rollback)$"),
) -> Response:
    run = await find_run(state, owner, thread_id, run_id)
    if run["status"] not in records.ACTIVE:
        raise HTTPException(409, f"run {run_id} has already ended ({run['status']})")
    await _cancel(state, [run_id], action)
    if wait:
        await wait_for_end(state, run_id)
    return Response(status_code=202)


@router.delete("/threads/{thread_id}/runs/{run_id}", status_code=204)
async def delete(thread_id: str, run_id: str, state: State, owner: Owner) -> Response:
    run = await find_run(state, owner, thread_id, run_id)
    if run["status"] in records.ACTIVE:
        raise HTTPException(409, f"run {run_id} is {run['status']}; cancel it first")
    await state.services.db.call(lambda tx: records.delete_run(tx, owner, run_id))
    return Response(status_code=204)


# ------------------------------------------------------------- stateless runs
@router.post("/runs")
async def create_stateless(body: RunCreate, state: State, owner: Owner) -> dict[str, Any]:
    return await start_run(state, owner, None, body)


@router.post("/runs/stream")
async def stream_stateless(body: RunCreate, state: State, owner: Owner) -> StreamingResponse:
    run = await start_run(state, owner, None, body)
    return stream_response(
        state, run, on_disconnect=body.on_disconnect, forget=_deletes_itself(run)
    )


@router.post("/runs/wait")
async def wait_stateless(body: RunCreate, state: State, owner: Owner, request: Request) -> Response:
    run = await start_run(state, owner, None, body)
    result = output(await wait_or_cancel(state, request, run["run_id"], body.on_disconnect))
    if _deletes_itself(run):
        await _forget(state, run)
    return _json(result, run)


@router.post("/runs/batch")
async def batch(body: list[RunCreate], state: State, owner: Owner) -> list[dict[str, Any]]:
    return [await start_run(state, owner, None, item) for item in body]


@router.post("/runs/cancel", status_code=202)
async def cancel_many(
    state: State,
    owner: Owner,
    body: Annotated[RunsCancel | None, Body()] = None,
    action: str = Query("interrupt", pattern="^(interrupt|rollback)$"),
) -> Response:
    q = body or RunsCancel()
    if q.thread_id:
        await find_thread(state, owner, q.thread_id)
    statuses = {"pending": ["pending"], "running": ["running"]}.get(q.status or "", list(ACTIVE))

    def chosen(tx: Tx) -> list[str]:
        ids = list(q.run_ids or [])
        if q.thread_id:
            ids += [r["run_id"] for r in records.active_runs(tx, q.thread_id)]
        if q.status:
            ids += records.run_ids_in(tx, owner, statuses)
        return [r for r in dict.fromkeys(ids) if records.get_run(tx, owner, r) is not None]

    await _cancel(state, await state.services.db.call(chosen), action)
    return Response(status_code=202)


def _json(body: dict[str, Any], run: dict[str, Any]) -> Response:
    path = f"/threads/{run['thread_id']}/runs/{run['run_id']}"
    return Response(
        records.dumps(body), media_type="application/json", headers={"Content-Location": path}
    )
