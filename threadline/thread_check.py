"""``threadline.check``: which paused or unfinished threads this version of a graph cannot go on.

Run it before a deploy: a thread waiting at an interrupt, or cut short by a crash, was saved by
the graph as it was. If the new graph lost a node the thread plans to run, changed the type of
a state key it holds, or reads a state version no upcaster leads to, continuing the thread
would fail (or worse, run with values of the wrong shape). See docs/threads.md.
"""

from __future__ import annotations

import asyncio
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from threadline.checkpoint.base import BaseSaver, CheckpointRecord, ThreadInfo, ThreadStatus
from threadline.errors import (
    CheckpointerRequiredError,
    ConfigError,
    CorruptedDataError,
    IncompatibleThreadError,
)
from threadline.graph.spec import GraphSpec
from threadline.graph.subgraph import saved_ns
from threadline.runtime.migrate import Migrations, planned_but_gone
from threadline.runtime.planning import tasks_of

UNFINISHED: tuple[ThreadStatus, ...] = ("interrupted", "error", "running")


@dataclass(frozen=True, slots=True)
class ThreadProblem:
    """One reason this graph cannot continue a thread, at its newest checkpoint."""

    thread_id: str
    checkpoint_id: str
    status: ThreadStatus
    problem: str


def check(
    graph: Any,
    saver: BaseSaver | None = None,
    *,
    statuses: Iterable[ThreadStatus] = UNFINISHED,
) -> list[ThreadProblem]:
    """Every problem with the threads in ``statuses`` (not finished, by default) of ``saver``
    (the graph's own by default); empty when this graph can continue them all. A thread with
    a damaged record is reported whatever its status (``status="damaged"``)."""
    saver, wanted = _arguments(graph, saver, statuses)
    found = []
    for info in saver.list_threads():
        if info.status in wanted or info.status == "damaged":
            try:
                record = saver.get_tuple(info.thread_id)
                if record is not None:
                    found += _problems(graph, record, info.status, saver)
            except CorruptedDataError as exc:
                found.append(_damaged(info, exc))
    return found


async def acheck(
    graph: Any,
    saver: BaseSaver | None = None,
    *,
    statuses: Iterable[ThreadStatus] = UNFINISHED,
) -> list[ThreadProblem]:
    """``check`` from async code (subgraphs' checkpoints, few and small, are read through the
    sync API in a worker thread, as ``aget_state(subgraphs=True)`` does)."""
    saver, wanted = _arguments(graph, saver, statuses)
    found = []
    for info in await saver.alist_threads():
        if info.status in wanted or info.status == "damaged":
            try:
                record = await saver.aget_tuple(info.thread_id)
                if record is not None:
                    found += await asyncio.to_thread(_problems, graph, record, info.status, saver)
            except CorruptedDataError as exc:
                found.append(_damaged(info, exc))
    return found


def _damaged(info: ThreadInfo, exc: CorruptedDataError) -> ThreadProblem:
    """A thread a record of which fails its check: reported, and the others still checked."""
    return ThreadProblem(
        info.thread_id, exc.checkpoint_id or info.checkpoint_id, "damaged", str(exc)
    )


def _arguments(
    graph: Any, saver: BaseSaver | None, statuses: Iterable[ThreadStatus]
) -> tuple[BaseSaver, frozenset[str]]:
    if not isinstance(getattr(graph, "spec", None), GraphSpec):
        raise TypeError(f"check() takes a compiled StateGraph, got {type(graph).__name__}")
    saver = saver if saver is not None else getattr(graph, "checkpointer", None)
    if not isinstance(saver, BaseSaver):
        raise CheckpointerRequiredError(
            "check() needs a saver: compile(checkpointer=...) or pass saver="
        )
    wanted = frozenset([statuses] if isinstance(statuses, str) else statuses)
    unknown = sorted(wanted - {"idle", *UNFINISHED})
    if unknown:
        raise ConfigError(f"status {unknown[0]!r} is not one of {('idle', *UNFINISHED)}")
    return saver, wanted


def _problems(
    graph: Any, record: CheckpointRecord, status: ThreadStatus, saver: BaseSaver, where: str = ""
) -> list[ThreadProblem]:
    """What stops ``graph`` from continuing ``record``, and the subgraphs paused inside it."""
    spec: GraphSpec = graph.spec

    def problem(text: str) -> ThreadProblem:
        return ThreadProblem(record.thread_id, record.checkpoint.id, status, where + text)

    found = [
        problem(f"plans node {name!r}, which this graph does not have")
        for name in planned_but_gone(spec, record)
    ]
    joins = {join.id for join in spec.joins}
    found += [
        problem(f"waits at join {join!r}, which this graph does not have")
        for join in record.checkpoint.barriers
        if join not in joins
    ]
    migrations: Migrations | None = getattr(graph, "migrations", None)
    if migrations is not None:
        try:
            record = migrations.upgrade(record)
        except IncompatibleThreadError as exc:
            return [*found, problem(str(exc))]
    elif record.metadata.get("state_version", 1) != 1:
        version = record.metadata["state_version"]
        found.append(problem(f"was saved with state_version={version}; this graph has none"))
    hints = _type_hints(spec)
    found += [problem(text) for text in _value_problems(spec, hints, record.checkpoint.values)]
    for write in record.pending_writes:
        updates = getattr(write.value, "updates", None) if write.kind == "result" else None
        if isinstance(updates, tuple):
            for text in _value_problems(spec, hints, dict(updates)):
                found.append(problem(f"task {write.task_name!r} saved a result whose {text}"))
    return found + _subgraph_problems(graph, record, status, saver, where)


def _subgraph_problems(
    graph: Any, record: CheckpointRecord, status: ThreadStatus, saver: BaseSaver, where: str
) -> list[ThreadProblem]:
    """Problems of the subgraphs that stopped inside a planned task (their own checkpoints)."""
    found = []
    ns = record.checkpoint_ns
    for task in tasks_of(graph.spec, record.checkpoint, ns):
        sub = task.node.subgraph if task.node is not None else None
        if sub is None:
            continue
        inner = saver.get_tuple(record.thread_id, saved_ns(sub.checkpointer, task.ns))
        if inner is not None and inner.checkpoint.next:
            found += _problems(sub, inner, status, saver, f"{where}in subgraph {task.name!r}: ")
    return found


def _value_problems(
    spec: GraphSpec, hints: Mapping[str, Any], values: Mapping[str, Any]
) -> list[str]:
    found = []
    for key, value in values.items():
        if key not in spec.schema.channels:
            found.append(f"key {key!r} is in no state schema of this graph")
        elif key in hints and not _fits(value, hints[key]):
            found.append(
                f"key {key!r} holds a {type(value).__name__}, but the schema says "
                f"{_name(hints[key])}"
            )
    return found


def _type_hints(spec: GraphSpec) -> dict[str, Any]:
    """The declared type of each key of the state schema (without reducers or qualifiers)."""
    try:
        return typing.get_type_hints(spec.schema.cls)
    except Exception:
        return {}  # a schema whose hints cannot be read: its values are not type-checked


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` can be a value of ``hint``, as far as a plain check can tell: the
    outer type only (``list[str]`` checks for a list); forms it cannot judge pass."""
    if hint is Any or isinstance(hint, typing.TypeVar):
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if origin is typing.Annotated:
        return _fits(value, typing.get_args(hint)[0])
    cls = origin if origin is not None else hint
    if not isinstance(cls, type):
        return True
    if cls is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if typing.is_typeddict(cls):
        return isinstance(value, dict)
    try:
        return isinstance(value, cls)
    except TypeError:  # a class isinstance cannot check (a subscripted protocol, ...)
        return True


def _name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", "")
