"""A saved checkpoint as the CLI shows it, read from the saver alone (no graph needed)."""

from __future__ import annotations

from typing import Any

from threadline.checkpoint.base import BaseSaver, CheckpointRecord, thread_status
from threadline.runtime.answers import pending_interrupts
from threadline.runtime.trace import TraceEntry, trace_entries
from threadline.server.wire import interrupt_out


def state_out(record: CheckpointRecord) -> dict[str, Any]:
    """A checkpoint with what waits on it: status, planned nodes, interrupts, errors.

    ``values`` are the state as that checkpoint saved it (a step interrupted half-way shows
    the values it started from; the graph's ``get_state`` also applies its finished tasks).
    """
    cp = record.checkpoint
    return {
        "thread_id": record.thread_id,
        "checkpoint_id": cp.id,
        "parent_checkpoint_id": cp.parent_id,
        "step": cp.step,
        "created_at": cp.created_at,
        "status": thread_status(cp, record.pending_writes),
        "next": [task.name for task in cp.next],
        "values": {k: v for k, v in cp.values.items() if not k.startswith("__")},
        "metadata": record.metadata,
        "interrupts": interrupts_out(record),
        "errors": [
            {"task": w.task_name, **_error(w.value)}
            for w in record.pending_writes
            if w.kind == "error"
        ],
    }


def interrupts_out(record: CheckpointRecord) -> list[dict[str, Any]]:
    """The interrupts still waiting for an answer, with the node that asked."""
    return [
        {"node": write.task_name, **interrupt_out(item)}
        for write, item in pending_interrupts(record.pending_writes)
    ]


def history_row(record: CheckpointRecord) -> dict[str, Any]:
    """One line of ``history``: where the checkpoint sits and what made it."""
    cp = record.checkpoint
    return {
        "checkpoint_id": cp.id,
        "parent_checkpoint_id": cp.parent_id,
        "step": cp.step,
        "source": record.metadata.get("source"),
        "next": [task.name for task in cp.next],
        "created_at": cp.created_at,
        "metadata": record.metadata,
    }


def trace_of(saver: BaseSaver, thread_id: str, since: str | None = None) -> list[TraceEntry]:
    """The thread's execution trace, oldest first, every branch (as ``graph.get_trace``)."""
    entries = [e for record in saver.list(thread_id) for e in trace_entries(record)]
    entries.sort(key=lambda e: e.id)
    return [e for e in entries if since is None or e.id > since]


def _error(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return {"type": value.get("type"), "message": value.get("message")}
    return {"type": None, "message": str(value)}
