"""threadline values and snapshots in the JSON shapes LangGraph Server sends and takes."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import uuid
from collections.abc import Mapping
from typing import Any

from threadline.errors import ConfigError
from threadline.types import Command, Interrupt, Send, SnapshotTask, StateSnapshot


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: messages and models as their dumps, tuples as lists."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, Interrupt):
        return interrupt_out(value)
    if isinstance(value, Send):
        return {"node": value.node, "arg": jsonable(value.arg)}
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return jsonable(dump())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
    return repr(value)


def interrupt_out(item: Interrupt) -> dict[str, Any]:
    out: dict[str, Any] = {"value": jsonable(item.value), "id": item.id}
    if item.schema is not None:
        out["response_schema"] = item.schema
    return out


def checkpoint_out(config: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not config:
        return None
    c = config.get("configurable", {})
    return {
        "thread_id": c.get("thread_id"),
        "checkpoint_ns": c.get("checkpoint_ns", ""),
        "checkpoint_id": c.get("checkpoint_id"),
        "checkpoint_map": c.get("checkpoint_map"),
    }


def task_out(task: SnapshotTask) -> dict[str, Any]:
    state = task.state
    return {
        "id": task.id,
        "name": task.name,
        "error": task.error,
        "interrupts": [interrupt_out(i) for i in task.interrupts],
        "checkpoint": checkpoint_out(state) if isinstance(state, Mapping) else None,
        "state": state_out(state) if isinstance(state, StateSnapshot) else None,
        "result": jsonable(task.result),
    }


def state_out(snap: StateSnapshot) -> dict[str, Any]:
    """A ``StateSnapshot`` as LangGraph's ``ThreadState``."""
    return {
        "values": jsonable(snap.values),
        "next": list(snap.next),
        "checkpoint": checkpoint_out(snap.config),
        "metadata": jsonable(snap.metadata or {}),
        "created_at": snap.created_at,
        "parent_checkpoint": checkpoint_out(snap.parent_config),
        "tasks": [task_out(t) for t in snap.tasks],
        "interrupts": [interrupt_out(i) for i in snap.interrupts],
    }


def interrupts_by_task(snap: StateSnapshot) -> dict[str, list[dict[str, Any]]]:
    """A thread's pending interrupts, by the id of the task that asked (``Thread.interrupts``)."""
    return {t.id: [interrupt_out(i) for i in t.interrupts] for t in snap.tasks if t.interrupts}


def thread_status(snap: StateSnapshot) -> str:
    """The status a thread has once a run on it stopped: ``error`` when a task failed,
    ``interrupted`` when tasks wait (an ``interrupt()`` or a breakpoint), else ``idle``."""
    if any(t.error for t in snap.tasks):
        return "error"
    return "interrupted" if snap.next or snap.interrupts else "idle"


def command_in(body: Mapping[str, Any]) -> Command[Any]:
    """A ``Command`` from its JSON: ``resume``, ``update``, ``goto`` (names or Send objects)."""
    unknown = set(body) - {"resume", "update", "goto"}
    if unknown:
        raise ConfigError(f"command: unknown fields {sorted(unknown)}; use resume, update, goto")
    goto = body.get("goto")
    if goto is not None:
        goto = [_send_in(g) for g in goto] if isinstance(goto, list) else _send_in(goto)
    update = body.get("update")
    if isinstance(update, list):
        update = [tuple(pair) for pair in update]
    kwargs: dict[str, Any] = {"update": update}
    if "resume" in body:
        kwargs["resume"] = body["resume"]
    if goto is not None:
        kwargs["goto"] = goto
    return Command(**kwargs)


def _send_in(value: Any) -> Any:
    if isinstance(value, Mapping):
        if set(value) != {"node", "input"} and set(value) != {"node", "arg"}:
            raise ConfigError("command.goto: a Send is {'node': name, 'input': value}")
        return Send(value["node"], value.get("input", value.get("arg")))
    return value
