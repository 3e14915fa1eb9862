"""A compiled graph used as a node, or invoked inside one: it runs on the parent's thread.

It returns only what it changed: for a key with a reducer whose list grew, just the new items,
so the parent's append reducer does not add the parent's own items a second time (LangGraph
returns the subgraph's whole state there, and shared append keys get duplicated). Any other
changed reducer key is written with ``Overwrite``: the subgraph already applied the reducer to
the parent's value, so applying it again (a counter, say) would count twice.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from threadline.graph.schema import StateSchema
from threadline.types import Overwrite

if TYPE_CHECKING:
    from threadline.checkpoint.base import BaseSaver
    from threadline.graph.compiled import CompiledStateGraph
    from threadline.runtime.context import TaskContext


@dataclasses.dataclass(frozen=True, slots=True)
class NestedRun:
    """Where a graph invoked inside a running task keeps its checkpoints."""

    saver: BaseSaver | None  # None: it saves none
    ns: str
    parents: dict[str, str]  # the checkpoints of the runs above it, by namespace
    persistent: bool = False  # checkpointer=True: one history per thread, across parent runs
    # checkpointer=False: the saver that keeps the answers to its interrupts
    lent_saver: BaseSaver | None = None


def nested_run(checkpointer: BaseSaver | bool | None, parent: TaskContext) -> NestedRun:
    """As in LangGraph, a subgraph runs on its parent's thread with the parent's saver.

    A saver of its own is not used there (it is for running the graph alone). The default
    namespace holds the parent task's id, so each parent task runs the subgraph afresh and a
    resume continues it; ``checkpointer=True`` drops the task ids, so the subgraph's state
    carries over from one parent run to the next; ``checkpointer=False`` saves nothing, and
    an interrupt in it is answered by running it again from its start.
    """
    ns = parent.next_subgraph_ns()
    env = parent.env
    parents = {**env.parents, parent.ns.rpartition("|")[0]: env.checkpoint_id}
    if checkpointer is False:
        return NestedRun(None, ns, parents, lent_saver=parent.saver)
    if checkpointer is True:
        return NestedRun(parent.saver, saved_ns(True, ns), parents, persistent=True)
    return NestedRun(parent.saver, ns, parents)


def saved_ns(checkpointer: BaseSaver | bool | None, task_ns: str) -> str:
    """Where the subgraph run by the task of namespace ``task_ns`` keeps its checkpoints."""
    return _without_task_ids(task_ns) if checkpointer is True else task_ns


def _without_task_ids(ns: str) -> str:
    """``"a:<id>|b:<id>#1"`` becomes ``"a|b#1"``: the same for every run of the parent."""
    parts = []
    for part in ns.split("|"):
        name, _, rest = part.partition(":")
        _, hash_, index = rest.partition("#")
        parts.append(f"{name}{hash_}{index}")
    return "|".join(parts)


def subgraph_callables(
    graph: CompiledStateGraph, parent: StateSchema
) -> tuple[Callable[..., Any], Callable[..., Any]]:
    child_keys = graph.spec.schema.channels

    def child_input(state: Any) -> dict[str, Any]:
        values = _as_dict(state)
        return {k: v for k, v in values.items() if k in child_keys}

    def run_sync(state: Any) -> dict[str, Any]:
        before = _as_dict(state)
        return changes(parent, before, graph.invoke(child_input(state)))

    async def run_async(state: Any) -> dict[str, Any]:
        before = _as_dict(state)
        return changes(parent, before, await graph.ainvoke(child_input(state)))

    return run_sync, run_async


def changes(
    parent: StateSchema, before: Mapping[str, Any], after: Mapping[str, Any]
) -> dict[str, Any]:
    """The update that takes the parent from ``before`` to the subgraph's final ``after``.

    Judged against the parent's values, not from what the subgraph's own run did: the child may
    have started from other values (a sibling's writes in the same step, its own saved state
    when it resumes or keeps a checkpointer), so only the comparison says what the parent lacks.
    """
    update: dict[str, Any] = {}
    for key, new in after.items():
        channel = parent.channels.get(key)
        if channel is None or (key in before and before[key] == new):
            continue
        if channel.reducer is None:
            update[key] = new
            continue
        old = before.get(key)
        if isinstance(old, list) and isinstance(new, list) and new[: len(old)] == old:
            update[key] = new[len(old) :]
        else:
            update[key] = Overwrite(new)
    return update


def _as_dict(state: Any) -> dict[str, Any]:
    if isinstance(state, Mapping):
        return dict(state)
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    fields = getattr(type(state), "model_fields", None)
    if fields is not None:
        return {name: getattr(state, name) for name in fields}
    raise TypeError(f"cannot pass a {type(state).__name__} to a subgraph")
