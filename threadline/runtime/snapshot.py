"""Turning saved checkpoints into what ``get_state`` shows, and ``update_state`` into one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from threadline.checkpoint.base import (
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    TaskWrite,
    WriteKind,
)
from threadline.checkpoint.changes import SET, ChangedRecord
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.langgraph_api import checkpoint_config
from threadline.clock import now_iso
from threadline.constants import END, START
from threadline.errors import InvalidUpdateError
from threadline.graph.spec import GraphSpec
from threadline.runtime import command_input
from threadline.runtime.answers import pending_interrupts
from threadline.runtime.chunks import task_paths
from threadline.runtime.loop import STEP_TASK
from threadline.runtime.planning import plan_next, tasks_of
from threadline.runtime.routing import routes_after
from threadline.runtime.task_ids import task_id
from threadline.runtime.writes import applied, apply_writes, finished_updates, normalize_output
from threadline.types import Command, SnapshotTask, StateSnapshot

COPY = "__copy__"  # update_state's as_node for a fork that copies the checkpoint


def snapshot_of(spec: GraphSpec, record: CheckpointRecord, live: bool = False) -> StateSnapshot:
    """What ``get_state`` shows of ``record``.

    ``live`` (the thread's newest state, not an addressed checkpoint): as in LangGraph, the
    values include what the step's finished tasks wrote while a sibling failed or was
    interrupted, so they show the thread as it stands; otherwise they are the values the step
    started from.
    """
    writes: dict[tuple[str, WriteKind], TaskWrite] = {
        (w.task_id, w.kind): w for w in record.pending_writes
    }
    cp, _ = command_input.applied(spec, record.checkpoint, writes)
    # The step ran but its writes could not be applied (two nodes set one key): every task
    # of it is still to do, and shows why
    step_error = writes.get((STEP_TASK, "error"))
    tasks = []
    planned = tasks_of(spec, cp, record.checkpoint_ns)
    for task, path in zip(planned, task_paths(planned), strict=True):
        result = writes.get((task.id, "result"))
        error = step_error or (writes.get((task.id, "error")) if not result else None)
        interrupts = writes.get((task.id, "interrupt"))
        tasks.append(
            SnapshotTask(
                id=task.id,
                name=task.name,
                path=path,
                error=_error_text(error) if error else None,
                interrupts=tuple(interrupts.value) if interrupts and not result else (),
                result=dict(result.value.updates) if result else None,
            )
        )
    parent = (
        checkpoint_config(record.thread_id, record.checkpoint_ns, cp.parent_id)
        if cp.parent_id
        else None
    )
    values: Mapping[str, Any] = cp.values
    if live and not step_error and (done := finished_updates(tasks, writes)):
        values = applied(spec.schema, values, done)
    return StateSnapshot(
        values=spec.state_values(values),
        next=tuple(t.name for t in tasks if t.result is None or t.name == START or step_error),
        config=checkpoint_config(record.thread_id, record.checkpoint_ns, cp.id),
        metadata=dict(record.metadata),
        created_at=cp.created_at,
        parent_config=parent,
        tasks=tuple(tasks),
        interrupts=tuple(i for _, i in pending_interrupts(record.pending_writes)),
    )


def _error_text(write: TaskWrite) -> str:
    value = write.value
    return f"{value.get('type')}: {value.get('message')}" if isinstance(value, dict) else str(value)


def empty_snapshot(config: dict[str, Any]) -> StateSnapshot:
    return StateSnapshot({}, (), config, None, None, None, (), ())


def updated_record(
    spec: GraphSpec,
    record: CheckpointRecord | None,
    thread_id: str,
    updates: Sequence[tuple[str | None, Any]],
    metadata: dict[str, Any],
) -> ChangedRecord:
    """The ``update`` checkpoint that applies each ``(as_node, values)`` of ``updates`` as if
    that node had written them in one step (``bulk_update_state`` gives several, in order)."""
    if not updates:
        raise InvalidUpdateError("an update step needs at least one (as_node, values) update")
    if any(as_node in (END, COPY) for as_node, _ in updates):
        return _ended_or_copied(record, thread_id, updates, metadata)
    if len(updates) > 1 and any(as_node is None for as_node, _ in updates):
        raise InvalidUpdateError(
            "several updates in one step each need as_node=, to say which node wrote them"
        )
    writes = []
    for as_node, values in updates:
        if isinstance(values, Command) and values.graph is not None:
            raise InvalidUpdateError("update_state does not take Command(graph=...)")
        node = _writer(spec, record, as_node)
        writes.append((node, *normalize_output(spec.schema, node, values)))
    if record is None:
        base_values, versions, barriers = spec.schema.initial_values(), {}, {}
        step, parent = -1, None
    else:
        cp = record.checkpoint
        base_values, versions, barriers = cp.values, cp.versions, cp.barriers
        step, parent = cp.step + 1, cp.id
    cp_id = new_checkpoint_id()
    if record is None:
        versions = dict.fromkeys(base_values, cp_id)
    new_values, new_versions, changes = apply_writes(
        spec.schema, base_values, versions, [(node, update) for node, update, _ in writes], cp_id
    )
    # routed as if each node had written, outside any run (START's routes ignore gotos)
    finished = [
        (node, routes_after(spec, node, base_values, update, gotos if node != START else (), None))
        for node, update, gotos in writes
    ]
    next_, barriers = plan_next(spec, barriers, finished)
    nodes = tuple(dict.fromkeys(node for node, _, _ in writes if node != START))
    cp = _new_checkpoint(cp_id, parent, step, new_values, new_versions, next_, barriers, nodes)
    meta = {**metadata, "source": "update", "step": step, "parents": {}}
    if record is None:
        changes = dict.fromkeys(new_values, SET)
    return ChangedRecord(thread_id, "", cp, meta, (), changes)


def _ended_or_copied(
    record: CheckpointRecord | None,
    thread_id: str,
    updates: Sequence[tuple[str | None, Any]],
    metadata: dict[str, Any],
) -> ChangedRecord:
    """``as_node=END`` (values ``None``): a checkpoint with nothing left to run, so the thread
    is finished and its interrupts are dropped (Agent Inbox's "mark resolved"). ``as_node=
    "__copy__"``: a ``fork`` checkpoint copying the one addressed. Both keep the values."""
    as_node, values = updates[0]
    what = "ends the thread" if as_node == END else "copies the checkpoint"
    if len(updates) > 1:
        raise InvalidUpdateError(f"as_node={as_node!r} {what}: it must be its step's only update")
    if values is not None:
        raise InvalidUpdateError(f"as_node={as_node!r} {what} and takes no values: pass None")
    if record is None:
        raise InvalidUpdateError(f"as_node={as_node!r} {what}, but the thread has no checkpoint")
    cp = record.checkpoint
    copy = as_node == COPY
    new = Checkpoint(
        id=new_checkpoint_id(),
        parent_id=cp.id,
        step=cp.step + 1,
        values=cp.values,
        versions=cp.versions,
        next=cp.next if copy else (),
        created_at=now_iso(),
        barriers=cp.barriers if copy else {},
        updated_by=cp.updated_by if copy else (),
    )
    meta = {**metadata, "source": "fork" if copy else "update", "step": new.step, "parents": {}}
    return ChangedRecord(thread_id, "", new, meta, (), {})


def _writer(spec: GraphSpec, record: CheckpointRecord | None, as_node: str | None) -> str:
    if as_node is not None:
        if as_node not in spec.nodes and as_node != START:
            raise InvalidUpdateError(
                f"as_node={as_node!r} is not a node of this graph (nodes: {', '.join(spec.nodes)})"
            )
        return as_node
    if record is None or not record.checkpoint.updated_by:
        return START
    writers = record.checkpoint.updated_by
    if len(writers) > 1:
        raise InvalidUpdateError(
            f"the last step was written by {', '.join(writers)}; pass as_node= to say which "
            "node this update comes from"
        )
    return writers[0]


def _new_checkpoint(
    cp_id: str,
    parent: str | None,
    step: int,
    values: dict[str, Any],
    versions: dict[str, str],
    next_: tuple[PlannedTask, ...],
    barriers: dict[str, tuple[str, ...]],
    nodes: tuple[str, ...],
) -> Checkpoint:
    return Checkpoint(
        id=cp_id,
        parent_id=parent,
        step=step,
        values=values,
        versions=versions,
        next=next_,
        created_at=now_iso(),
        barriers=barriers,
        updated_by=nodes,
    )


__all__ = ["checkpoint_config", "empty_snapshot", "snapshot_of", "task_id", "updated_record"]
