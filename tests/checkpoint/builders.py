"""Checkpoints and records built the way the engine builds them, for saver tests.

Versions name the checkpoint at which a key's value last changed: a key whose value equals the
parent's keeps the parent's version. ``hints_for`` is what the engine's ``storage_hints`` computes:
the keys that changed, and for a list that only grew, the version and length it extends.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from threadline.checkpoint import (
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    StorageHints,
    TaskWrite,
    new_checkpoint_id,
)


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
    return Checkpoint(
        id=cp_id,
        parent_id=parent.id if parent else None,
        step=parent.step + 1 if parent else -1,
        values=values,
        versions=versions,
        next=next,
        created_at=created_at or now_iso(),
    )


def hints_for(parent: Checkpoint | None, cp: Checkpoint) -> StorageHints:
    """What the engine tells the saver: changed keys, and lists that only grew."""
    if parent is None:
        return StorageHints(frozenset(cp.values))
    changed = frozenset(k for k, v in cp.versions.items() if parent.versions.get(k) != v)
    extends: dict[str, tuple[str, int]] = {}
    for key in changed:
        old, new = parent.values.get(key), cp.values[key]
        if (
            key in parent.versions
            and isinstance(old, list)
            and isinstance(new, list)
            and len(new) > len(old)
            and new[: len(old)] == old
        ):
            extends[key] = (parent.versions[key], len(old))
    return StorageHints(changed, extends)


def rec(
    thread_id: str,
    cp: Checkpoint,
    *,
    ns: str = "",
    metadata: dict[str, Any] | None = None,
    writes: tuple[TaskWrite, ...] = (),
    hints: StorageHints | None = None,
) -> CheckpointRecord:
    """A record as given to ``put``; without ``hints`` the saver stores every value."""
    return CheckpointRecord(thread_id, ns, cp, metadata or {}, writes, hints)


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
    """The record the engine would save after ``parent``: versions and hints filled in."""
    cp = make_cp(values, parent=parent, next=next, created_at=created_at)
    return rec(thread_id, cp, ns=ns, metadata=metadata, writes=writes, hints=hints_for(parent, cp))


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
