"""``invoke(Command(update=..., goto=...), config)``: input to the step a thread resumes with.

As in LangGraph, the update and the goto targets are not a checkpoint of their own: they are kept
as a pending write of the checkpoint the run resumes (the result of a pseudo-task), and whoever
reads that checkpoint — this run, a later resume, ``get_state`` — sees its values with the update
applied and its planned tasks with the goto targets added. The step's tasks then run on those
values and their writes are applied on top, so a node writing a key the update set simply wins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from threadline.checkpoint.base import (
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    TaskWrite,
    WriteKind,
)
from threadline.checkpoint.changes import Change
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.constants import END
from threadline.errors import InvalidResumeError, InvalidUpdateError
from threadline.graph.spec import GraphSpec
from threadline.runtime.task import TaskResult
from threadline.runtime.writes import apply_writes, updates_of
from threadline.types import Command, Send

INPUT_TASK = "__input__"
_KEY: tuple[str, WriteKind] = (INPUT_TASK, "result")
_WRITER = "Command(update=...)"


def check(command: Command[Any]) -> None:
    """Refuse what a Command given to ``invoke`` cannot mean, before anything is loaded."""
    if command.graph is not None:
        raise InvalidUpdateError(
            "invoke() got Command(graph=...); there is no parent graph to send it to"
        )
    if command.resume is None and command.update is None and not command.goto:
        raise InvalidResumeError(
            "Command() given to invoke() has no resume value, update or goto: give the value "
            "to resume with (Command(resume=...)), or what to change (update=..., goto=...)"
        )


def write(
    spec: GraphSpec, command: Command[Any], writes: Mapping[tuple[str, WriteKind], TaskWrite]
) -> TaskWrite | None:
    """The pending write that keeps ``command``'s update and goto, after any kept before."""
    updates = updates_of(spec.schema, _WRITER, command.update)
    gotos = command.goto_targets() if command.goto else ()
    for target in gotos:
        name = target.node if isinstance(target, Send) else target
        if name not in spec.nodes and name != END:
            raise InvalidUpdateError(
                f"Command(goto={name!r}) names no node of this graph "
                f"(nodes: {', '.join(spec.nodes)})"
            )
    if not updates and not gotos:
        return None
    kept = writes.get(_KEY)
    if kept is not None:
        updates, gotos = kept.value.updates + updates, kept.value.routes + gotos
    return TaskWrite(INPUT_TASK, INPUT_TASK, "result", TaskResult(updates, gotos))


def as_resumed(spec: GraphSpec, record: CheckpointRecord) -> tuple[Checkpoint, dict[str, Change]]:
    """The saved checkpoint of ``record`` with any Command input kept with it applied."""
    writes = {(w.task_id, w.kind): w for w in record.pending_writes}
    return applied(spec, record.checkpoint, writes)


def applied(
    spec: GraphSpec, cp: Checkpoint, writes: Mapping[tuple[str, WriteKind], TaskWrite]
) -> tuple[Checkpoint, dict[str, Change]]:
    """``cp`` as the step that starts from it sees it: a kept Command's update and goto applied,
    and what the update changed.

    The updated values get a version of their own (a checkpoint id never used for a
    checkpoint), so a saver stores them again with the next checkpoint.
    """
    kept = writes.get(_KEY)
    if kept is None:
        return cp, {}
    result: TaskResult = kept.value
    values, versions, changes = apply_writes(
        spec.schema, cp.values, cp.versions, [(_WRITER, result.updates)], new_checkpoint_id()
    )
    planned = {p.name for p in cp.next if not p.send}
    extra: list[PlannedTask] = []
    for target in result.routes:
        if isinstance(target, Send):
            extra.append(PlannedTask(target.node, target.arg, send=True))
        elif target != END and target not in planned:
            planned.add(target)
            extra.append(PlannedTask(target))
    new = dataclasses.replace(cp, values=values, versions=versions, next=cp.next + tuple(extra))
    return new, changes
