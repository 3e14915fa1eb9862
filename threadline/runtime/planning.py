"""Pure planning: which tasks a checkpoint runs next, and what the next checkpoint plans."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from threadline.checkpoint.base import Checkpoint, PlannedTask
from threadline.constants import START
from threadline.errors import InvalidUpdateError
from threadline.graph.spec import GraphSpec
from threadline.runtime.task import Task
from threadline.runtime.task_ids import task_id
from threadline.types import Send

# Barrier key of a deferred node that was triggered and waits; ``:`` is not allowed in node names
# and join keys never hold it.
DEFERRED = "defer:"


def task_ns(parent_ns: str, name: str, tid: str) -> str:
    entry = f"{name}:{tid}"
    return f"{parent_ns}|{entry}" if parent_ns else entry


def tasks_of(
    spec: GraphSpec, checkpoint: Checkpoint, ns: str, ids: Callable[[str, int, str], str] = task_id
) -> list[Task]:
    """The tasks ``checkpoint`` plans, each with the input it will receive."""
    tasks = []
    cp_id, nodes = checkpoint.id, spec.nodes
    hashed = ids is task_id
    for index, planned in enumerate(checkpoint.next):
        name = planned.name
        tid = ids(cp_id, index, name)
        task = Task(tid, name, task_ns(ns, name, tid), planned.arg, nodes.get(name), planned.send)
        if hashed:
            task.index, task.planned_at = index, cp_id
        tasks.append(task)
    return tasks


def plan_next(
    spec: GraphSpec,
    barriers: Mapping[str, tuple[str, ...]],
    finished: Sequence[tuple[str, tuple[str | Send, ...]]],
) -> tuple[tuple[PlannedTask, ...], dict[str, tuple[str, ...]]]:
    """From ``(node, routes)`` of a step's finished tasks, plan the next step.

    Nodes triggered by edges run once each (sorted by name, so the order never depends on
    timing); ``Send`` tasks follow in the order they were sent. Join barriers collect arrivals
    across steps and fire when every source has finished.
    """
    pulls: set[str] = set()
    sends: list[PlannedTask] = []
    for node, routes in finished:
        for route in routes:
            if isinstance(route, Send):
                _check_target(spec, node, route.node)
                sends.append(PlannedTask(route.node, route.arg, send=True))
            else:
                if route not in spec.nodes:  # (the usual case checked without a call)
                    _check_target(spec, node, route)
                pulls.add(route)
    waiting = _arrivals(spec, barriers, finished, pulls) if spec.joins or barriers else {}
    pulls.discard("__end__")
    if spec.deferred:
        _hold_deferred(spec.deferred, pulls, waiting)
    return (*map(PlannedTask, sorted(pulls)), *sends), waiting


def _arrivals(
    spec: GraphSpec,
    barriers: Mapping[str, tuple[str, ...]],
    finished: Sequence[tuple[str, tuple[str | Send, ...]]],
    pulls: set[str],
) -> dict[str, tuple[str, ...]]:
    """Record which join sources have finished; a complete join adds its target to ``pulls``."""
    waiting = {key: set(arrived) for key, arrived in barriers.items()}
    for node, _ in finished:
        for join in spec.joins_by_source.get(node, ()):
            waiting.setdefault(join.id, set()).add(node)
    for join in spec.joins:
        arrived = waiting.get(join.id)
        if arrived is not None and arrived >= join.sources:
            del waiting[join.id]
            pulls.add(join.target)
    return {key: tuple(sorted(v)) for key, v in waiting.items()}


def _hold_deferred(
    deferred: frozenset[str], pulls: set[str], waiting: dict[str, tuple[str, ...]]
) -> None:
    """Deferred nodes wait (in ``waiting``, kept in the checkpoint) while other nodes are
    triggered; once none is, every waiting one runs in the next step.

    As in LangGraph, ``Send`` tasks do not hold them back: only nodes triggered by edges do.
    """
    for name in pulls & deferred:
        pulls.discard(name)
        waiting[DEFERRED + name] = ()
    if not pulls:
        for key in [k for k in waiting if k.startswith(DEFERRED)]:
            del waiting[key]
            pulls.add(key[len(DEFERRED) :])


def _check_target(spec: GraphSpec, source: str, target: str) -> None:
    if target not in spec.nodes and target != "__end__":
        raise InvalidUpdateError(
            f"{source!r} routed to {target!r}, which is not a node of this graph "
            f"(nodes: {', '.join(spec.nodes)})"
        )


def hits(names: frozenset[str], tasks: Iterable[Task]) -> bool:
    """Whether ``interrupt_before``/``interrupt_after`` (``*``: every node) names a task."""
    if "*" in names:
        return any(t.name != START for t in tasks)
    return any(t.name in names for t in tasks)
