"""Run one run: stream its graph into the event log, keep its lease, obey a cancel, settle it.

A run over HTTP is the graph's ``astream`` with the run's options and the thread's config, so
everything the library guarantees (checkpoints per step, resume after a crash) holds here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from threadline.checkpoint.base import BaseSaver
from threadline.clock import now_iso
from threadline.errors import InvalidAnswerError
from threadline.graph.compiled import CompiledStateGraph
from threadline.server import queue, records
from threadline.server.db import Database, Tx
from threadline.server.events import RESULT_EVENT, EventBus, EventLog, last_seq
from threadline.server.runopts import graph_call
from threadline.server.wire import interrupts_by_task, jsonable, thread_status
from threadline.store.base import BaseStore

log = logging.getLogger("threadline.server")


@dataclass
class Services:
    """What a worker needs to run runs; one per process."""

    db: Database
    saver: BaseSaver
    store: BaseStore | None
    graphs: Mapping[str, CompiledStateGraph]
    bus: EventBus = field(default_factory=EventBus)
    worker_id: str = "local"
    lease_seconds: float = 30.0
    cancel_poll_seconds: float = 0.2


class LeaseLost(Exception):
    """Another worker took the run over (this one went silent past its lease): stop, and
    leave the run's row, events and thread to the new holder."""


class Cancelled(Exception):
    """The run was cancelled by a client (``action`` is ``interrupt`` or ``rollback``)."""

    def __init__(self, action: str) -> None:
        super().__init__(action)
        self.action = action


async def execute_run(s: Services, run_id: str) -> str:
    """Run a claimed run to its end; returns its final status."""
    found = await s.db.call(lambda tx: _begin(tx, run_id))
    if found is None:
        return "missing"
    row, assistant, seen = found
    kwargs = json.loads(row["kwargs"])
    events = EventLog(s.db, s.bus, run_id, seen + 1)
    graph = s.graphs.get(assistant["graph_id"]) if assistant else None
    if assistant is None or graph is None:
        message = f"assistant {row['assistant_id']} no longer exists"
        missing = {"error": "AssistantNotFound", "message": message}
        await events.add("error", missing)
        return await _settle(s, row, events, "error", None, missing)
    head = await graph.aget_state({"configurable": {"thread_id": row["thread_id"]}})
    call = graph_call(graph, assistant, kwargs, row)
    if row["attempt"] > 1 and head.metadata and head.metadata.get("run_id") == run_id:
        call = call.continued()  # an earlier attempt died: go on from where it got to
    failure: dict[str, Any] | None = None
    status = "success"
    try:
        await _stream(s, graph, call, events, row)
    except LeaseLost:
        log.warning("run %s: another worker took it over; this attempt stops", run_id)
        return "lost"
    except Cancelled as stop:
        status = "interrupted" if stop.action == "interrupt" else "rollback"
    except Exception as exc:  # a node raised, or the input was refused: the run failed
        log.info("run %s failed: %s: %s", run_id, type(exc).__name__, exc)
        failure = failure_of(exc)
        await events.add("error", failure)
        status = "error"
    return await _settle(s, row, events, status, graph, failure)


def failure_of(exc: Exception) -> dict[str, Any]:
    """The ``error`` event of a failed run; a refused answer also says which interrupt and
    which fields, so a form can show each problem under its field."""
    failure: dict[str, Any] = {"error": type(exc).__name__, "message": str(exc)}
    if isinstance(exc, InvalidAnswerError):
        failure["interrupt_id"] = exc.interrupt_id
        failure["problems"] = [list(problem) for problem in exc.problems]
    return failure


def _begin(tx: Tx, run_id: str) -> tuple[dict[str, Any], dict[str, Any] | None, int] | None:
    """The run, its assistant and its last stored event, read in one transaction."""
    row = records.run_row(tx, run_id)
    if row is None:
        return None
    return row, records.get_assistant(tx, row["owner"], row["assistant_id"]), last_seq(tx, run_id)


async def _stream(
    s: Services, graph: CompiledStateGraph, call: Any, events: EventLog, row: dict[str, Any]
) -> None:
    async def consume() -> None:
        async for item in graph.astream(call.input, call.config, **call.options):
            ns, mode, chunk = item if len(item) == 3 else ((), *item)
            name = call.event_name(mode)
            await events.add(name if not ns else f"{name}|{'|'.join(ns)}", jsonable(chunk))

    task = asyncio.create_task(consume())
    try:
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=s.cancel_poll_seconds)
            if done:
                break
            action = await s.db.call(lambda tx: _keep_lease(tx, row, s))
            if action:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                raise LeaseLost() if action == LOST else Cancelled(action)
        task.result()
    finally:
        if not task.done():  # this coroutine itself was cancelled (shutdown)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


LOST = "lost"


def _keep_lease(tx: Tx, row: dict[str, Any], s: Services) -> str | None:
    """Extend the run's lease while this attempt still holds it; the cancel a client asked
    for, if any, or ``LOST`` when the run is no longer this attempt's (taken over or deleted)."""
    held = tx.run(
        "UPDATE tl_runs SET lease_until = ? WHERE run_id = ? AND status = 'running' "
        "AND worker = ? AND attempt = ?",
        queue.iso_in(s.lease_seconds),
        row["run_id"],
        row["worker"],
        row["attempt"],
    )
    if not held:
        return LOST
    return records.cancel_action(tx, row["run_id"])


async def _settle(
    s: Services,
    row: dict[str, Any],
    events: EventLog,
    status: str,
    graph: CompiledStateGraph | None,
    failure: dict[str, Any] | None = None,
) -> str:
    """Record where the run and its thread ended, close the stream, call the webhook."""
    run_id, thread_id = row["run_id"], row["thread_id"]
    if status == "rollback":
        await _roll_back(s, graph, thread_id, run_id)
    summary = None if graph is None else await _thread_summary(graph, thread_id, status)
    values, interrupts = (summary[1], summary[2]) if summary else (None, {})
    result = {"values": values, "interrupts": interrupts, "failure": failure}
    await events.add(RESULT_EVENT, result)

    def settle(tx: Tx) -> None:
        if status == "rollback":
            records.delete_run(tx, row["owner"], run_id)
        else:
            records.set_run_status(tx, run_id, status)
        if summary is not None:
            records.set_thread_state(tx, thread_id, *summary)
        else:
            records.set_thread_status(tx, thread_id, "error")
        if records.active_runs(tx, thread_id):
            records.set_thread_status(tx, thread_id, "busy")

    await events.close(settle)  # the last events and the final status, in one transaction
    kwargs = json.loads(row["kwargs"])
    if kwargs.get("webhook") and status != "rollback":
        await _post_webhook(s, kwargs["webhook"], run_id)
    if row["stateless"] and kwargs.get("on_completion", "delete") == "delete":
        await s.saver.adelete_thread(thread_id)
        await s.db.call(lambda tx: records.drop_stateless_thread(tx, thread_id))
    return status


async def _thread_summary(
    graph: CompiledStateGraph, thread_id: str, status: str
) -> tuple[str, Any, Any, Any]:
    """Where the thread stands: from its newest checkpoint, so a run refused before it saved
    anything (a wrong answer) leaves a waiting thread waiting; a failed run on a thread that
    waits for nothing leaves it ``error``."""
    snap = await graph.aget_state({"configurable": {"thread_id": thread_id}})
    error = next((t.error for t in snap.tasks if t.error), None)
    thread = thread_status(snap)
    if status == "error" and thread == "idle":
        thread = "error"
    return thread, jsonable(snap.values), interrupts_by_task(snap), error


async def _roll_back(
    s: Services, graph: CompiledStateGraph | None, thread_id: str, run_id: str
) -> None:
    """Undo a cancelled run: its thread goes back to the checkpoint the run started from (a
    new head copying it), or is emptied when the run started the thread. The run's first
    checkpoint is the oldest with its ``run_id`` in the metadata; its parent is the start."""
    if graph is None:
        await s.saver.adelete_thread(thread_id)
        return
    config = {"configurable": {"thread_id": thread_id}}
    made = [snap async for snap in graph.aget_state_history(config, filter={"run_id": run_id})]
    if not made:
        return  # cancelled before it saved anything: nothing to undo
    start = made[-1].parent_config
    if start is None:
        await s.saver.adelete_thread(thread_id)
        return
    await graph.aupdate_state(start, None)


async def _post_webhook(s: Services, url: str, run_id: str) -> None:
    """POST the finished run, with the thread's values, to its webhook; a failure is logged."""
    import httpx

    run = await s.db.call(lambda tx: records.get_run(tx, None, run_id))
    thread = await s.db.call(
        lambda tx: tx.row(
            "SELECT * FROM tl_threads WHERE thread_id = ?", run["thread_id"] if run else ""
        )
    )
    body = {
        **(run or {}),
        "values": records.thread_out(thread)["values"] if thread else None,
        "webhook_sent_at": now_iso(),
    }
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            response = await client.post(url, json=body)
            response.raise_for_status()
    except httpx.HTTPError as exc:
        log.warning("webhook %s for run %s failed: %s", url, run_id, exc)
