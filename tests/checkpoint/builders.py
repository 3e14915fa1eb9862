"""Checkpoints and records built the way the engine builds them, for saver tests.

Versions name the checkpoint at which a key's value last changed: a key whose value equals the
parent's keeps the parent's version. ``changes_for`` is what the engine records when applying a
step: the keys that changed, and for a list that only grew, an append to the version it extends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from threadline.checkpoint import (
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    TaskWrite,
    new_checkpoint_id,
)
from threadline.checkpoint.changes import SET, Append, Change, ChangedRecord


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def make_cp(
    values: dict[str, Any] | None = None,
    *,
    parent: Checkpoint | None = None,
    next: tuple[PlannedTask, ...] = (),
    created_at: str | None = None,
) -> Checkpoint:
    """A checkpoint following ``parent``; a key keeps its version while its value is equal."""
    cp_id = new_checkpoint_id()
    values = values if values is not None else {}
    versions: dict[str, str] = {}
    for key, value in values.items():
        unchanged = (
            parent is not None
            and key in parent.versions
            and key in parent.values
            and type(parent.values[key]) is type(value)
            and parent.values[key] == value
        )
        versions[key] = parent.versions[key] if unchanged else cp_id  # type: ignore[union-attr]
    return child(parent, cp_id, values, versions, next, created_at)


def child(
    parent: Checkpoint | None,
    cp_id: str,
    values: dict[str, Any],
    versions: dict[str, str],
    next: tuple[PlannedTask, ...] = (),
    created_at: str | None = None,
) -> Checkpoint:
    """The checkpoint ``cp_id`` one step after ``parent`` (the first of a thread without one)."""
    return Checkpoint(
        id=cp_id,
        parent_id=parent.id if parent else None,
        step=parent.step + 1 if parent else -1,
        values=values,
        versions=versions,
        next=next,
        created_at=created_at or now_iso(),
    )


def changes_for(parent: Checkpoint | None, cp: Checkpoint) -> dict[str, Change]:
    """What the engine tells the saver: changed keys, and lists that only grew."""
    if parent is None:
        return dict.fromkeys(cp.values, SET)
    changes: dict[str, Change] = {}
    for key, version in cp.versions.items():
        if parent.versions.get(key) == version:
            continue
        old, new = parent.values.get(key), cp.values[key]
        changes[key] = SET
        if (
            key in parent.versions
            and isinstance(old, list)
            and isinstance(new, list)
            and len(new) > len(old)
            and new[: len(old)] == old
        ):
            changes[key] = Append(parent.versions[key], len(old))
    return changes


def stored(
    changed: Iterable[str], extends: Mapping[str, tuple[str, int]] | None = None
) -> dict[str, Change]:
    """Changes of the ``changed`` keys; those in ``extends`` append to ``(version, length)``."""
    return {k: Append(*extends[k]) if extends and k in extends else SET for k in changed}


def rec(
    thread_id: str,
    cp: Checkpoint,
    *,
    ns: str = "",
    metadata: dict[str, Any] | None = None,
    writes: tuple[TaskWrite, ...] = (),
    changes: Mapping[str, Change] | None = None,
) -> CheckpointRecord:
    """A record as given to ``put``; without ``changes`` the saver stores every value."""
    if changes is None:
        return CheckpointRecord(thread_id, ns, cp, metadata or {}, writes)
    return ChangedRecord(thread_id, ns, cp, metadata or {}, writes, changes)


def step(
    thread_id: str,
    values: dict[str, Any],
    parent: Checkpoint | None,
    *,
    ns: str = "",
    metadata: dict[str, Any] | None = None,
    writes: tuple[TaskWrite, ...] = (),
    next: tuple[PlannedTask, ...] = (),
    created_at: str | None = None,
) -> CheckpointRecord:
    """The record the engine would save after ``parent``: versions and changes filled in."""
    cp = make_cp(values, parent=parent, next=next, created_at=created_at)
    changes = changes_for(parent, cp)
    return rec(thread_id, cp, ns=ns, metadata=metadata, writes=writes, changes=changes)


def w(task_id: str, kind: str = "result", value: Any = None, name: str = "node") -> TaskWrite:
    return TaskWrite(task_id=task_id, task_name=name, kind=kind, value=value)  # type: ignore[arg-type]


def item(i: int, size: int = 1000) -> str:
    """A list item of exactly ``size`` characters (think: one chat message)."""
    head = f"message {i:05d} "
    return head + "x" * (size - len(head))


def counter_graph(steps: int) -> Any:
    """A graph whose one node bumps a counter ``steps`` times: one compact checkpoint a step
    (what the row-size tests measure). Invoke it with ``{"n": 0}``."""
    from typing import TypedDict

    from threadline.graph import END, START, StateGraph

    class Counter(TypedDict):
        n: int

    builder = StateGraph(Counter)
    builder.add_node("inc", lambda s: {"n": s["n"] + 1})
    builder.add_edge(START, "inc")
    builder.add_conditional_edges("inc", lambda s: END if s["n"] >= steps else "inc")
    return builder
