"""Every stream chunk a run produces, shaped as LangGraph 1.x shapes its stream modes.

The loop and the drivers call a ``Chunks`` object at fixed points of a run (a checkpoint made,
a step's tasks starting, a task finishing, a step applied, a run stopping); it returns the
``Emit`` chunks the requested modes want there, and nothing otherwise. A run that streams
nothing has no ``Chunks`` at all, so the per-step path pays for no mode it was not asked for.

Shapes (from LangGraph 1.2):
- ``tasks``: ``{"id", "name", "input", "triggers"}`` when a task starts (plus ``"metadata"``
  when the config carries user metadata or tags), ``{"id", "name", "error", "result",
  "interrupts"}`` when it ends.
- ``checkpoints``: ``{"config", "parent_config", "values", "metadata", "next", "tasks"}`` for
  each checkpoint of a run that has a checkpointer, emitted as the step that reads it begins.
- ``debug``: each of those wrapped as ``{"step", "timestamp", "type", "payload"}``.
- ``values``: the state after a step in which some task wrote a key (and on input), never after
  a step that wrote nothing.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from threadline.checkpoint.base import Checkpoint, TaskWrite, WriteKind
from threadline.clock import now_iso
from threadline.constants import INTERRUPT_KEY, START
from threadline.graph.schema import ROOT
from threadline.graph.spec import GraphSpec
from threadline.runtime.task import Outcome, Task
from threadline.runtime.timeouts import progress
from threadline.runtime.writes import Update, applied
from threadline.types import Interrupt

if TYPE_CHECKING:  # loop.py imports this module
    from threadline.runtime.settings import RunSettings

PUSH = "__pregel_push"  # LangGraph's trigger and path marker of a Send task
PULL = "__pregel_pull"  # ... and the path marker of a task an edge triggered
_CONFIG_METADATA_EXCLUDED = frozenset(
    {"thread_id", "checkpoint_id", "checkpoint_ns", "checkpoint_map"}
)


@dataclasses.dataclass(slots=True)
class Emit:
    """A stream chunk: its mode, its payload and the subgraph run it comes from."""

    mode: str
    payload: Any
    ns: str = ""  # "" for the graph being streamed; "child:<task id>|..." inside subgraphs


Put = Callable[[Emit], None]
"""Where a driver takes chunks made while tasks run (a queue it reads as they come)."""
Writer = Callable[[Any], None]
"""What ``get_stream_writer()`` returns to a task."""


def live_outlets(
    settings: RunSettings, put: Put | None
) -> tuple[Callable[[Any], None], Put | None]:
    """Where a run's tasks send what streams while they run: what they give
    ``get_stream_writer()``, as ``custom`` chunks, and the chunks of their subgraphs (those a
    nested run forwards, or with ``stream(subgraphs=True)`` all of them) to ``put``."""
    writer: Writer = _progress_only
    if put is not None and "custom" in settings.stream_modes:
        writer = functools.partial(_custom, put)
    sink = put if put is not None and settings.subgraphs else settings.sink
    return writer, sink


def _custom(put: Put, item: Any) -> None:
    progress()
    put(Emit("custom", item))


def _progress_only(_: Any) -> None:
    """A write nobody streams still shows the task is alive (``TimeoutPolicy.idle_timeout``)."""
    progress()


def _discard(_: Any) -> None:
    return None


def message_chunk(message: Any, metadata: dict[str, Any], ns: str) -> Emit:
    """A ``messages`` chunk: a message (or a token of one) and where it comes from."""
    return Emit("messages", (message, metadata), ns)


@dataclasses.dataclass(frozen=True, slots=True)
class TaskInfo:
    """How LangGraph names what started a task, for ``tasks`` events and message metadata."""

    step: int
    triggers: tuple[str, ...]
    path: tuple[Any, ...]


class Chunks:
    """The chunks of one streamed run of one graph (a subgraph run has its own)."""

    def __init__(
        self,
        spec: GraphSpec,
        modes: frozenset[str],
        *,
        thread_id: str | None,
        ns: str,
        nested: bool,
        checkpointed: bool,
        config: Mapping[str, Any],
        invoked: bool = False,
    ) -> None:
        self.spec = spec
        self.modes = modes
        self.thread_id = thread_id
        self.ns = ns
        self.nested = nested
        self.values = "values" in modes
        self.updates = "updates" in modes
        self.debug = "debug" in modes
        self.checkpoints = checkpointed and ("checkpoints" in modes or self.debug)
        self.task_events = "tasks" in modes or self.debug
        self.needs_info = self.task_events or "messages" in modes
        self.user_metadata = _task_metadata(config)
        self.info: dict[str, TaskInfo] = {}  # tasks of the step running now
        self.step = 0
        self.state: Mapping[str, Any] = {}  # the values the step running now started from
        # A run started by invoke() shows only the output schema's keys in updates and values
        # (LangGraph streams such a run with output_keys=its output channels)
        self.shown = frozenset(spec.output_keys) if invoked and spec.output_keys else None

    @classmethod
    def of_run(cls, spec: GraphSpec, settings: RunSettings, checkpointed: bool) -> Chunks | None:
        """The chunks of a run with these settings; ``None`` when it streams nothing."""
        if not settings.stream_modes:
            return None
        return cls(
            spec,
            settings.stream_modes,
            thread_id=settings.thread_id,
            ns=settings.ns,
            nested=settings.nested,
            checkpointed=checkpointed,
            config=settings.config,
            invoked=settings.invoked,
        )

    # ----------------------------------------------------------------- checkpoints
    def checkpoint(
        self,
        cp: Checkpoint,
        metadata: Mapping[str, Any],
        tasks: list[Task],
        writes: Mapping[tuple[str, WriteKind], TaskWrite],
    ) -> list[Emit]:
        """The ``checkpoints`` chunk of ``cp``, whose planned tasks are ``tasks``."""
        if not self.checkpoints:
            return []
        payload = {
            "config": self._config(cp.id),
            "parent_config": self._config(cp.parent_id) if cp.parent_id else None,
            "values": dict(cp.values),
            "metadata": dict(metadata),
            "next": [t.name for t in tasks],
            "tasks": [self._checkpoint_task(t, writes) for t in tasks],
        }
        return self._wrapped("checkpoints", "checkpoint", cp.step, payload)

    def _config(self, checkpoint_id: str) -> dict[str, Any]:
        return {
            "configurable": {
                "checkpoint_ns": self.ns,
                "thread_id": self.thread_id,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _checkpoint_task(
        self, task: Task, writes: Mapping[tuple[str, WriteKind], TaskWrite]
    ) -> dict[str, Any]:
        """A planned task as a checkpoint chunk lists it, with what its saved writes say."""
        entry: dict[str, Any] = {"id": task.id, "name": task.name}
        # A subgraph's task names where the subgraph keeps its checkpoints, as LangGraph does.
        state = None
        if task.node is not None and task.node.subgraph is not None:
            state = {"configurable": {"thread_id": self.thread_id, "checkpoint_ns": task.ns}}
        result = writes.get((task.id, "result")) if task.name != START else None
        error = writes.get((task.id, "error"))
        if error is not None and result is None:
            return {**entry, "error": _error_text(error.value), "state": state}
        if result is not None and result.value.updates:
            entry["result"] = dict(result.value.updates)
        intr = writes.get((task.id, "interrupt"))
        entry["interrupts"] = tuple(i.as_dict() for i in intr.value) if intr else ()
        entry["state"] = state
        return entry

    # ----------------------------------------------------------------- tasks
    def step_starts(
        self,
        step: int,
        values: Mapping[str, Any],
        tasks: list[Task],
        writes: Mapping[tuple[str, WriteKind], TaskWrite],
    ) -> list[Emit]:
        """Chunks as a step begins: each task, then the results an earlier try saved."""
        self.step, self.state = step, values
        if self.needs_info:
            self.info = _task_infos(self.spec, step, tasks)
        out: list[Emit] = []
        for task in tasks if self.task_events else ():
            payload = {
                "id": task.id,
                "name": task.name,
                "input": task.input if task.send else self.spec.schema.node_input(values),
                "triggers": self.info[task.id].triggers,
            }
            if self.user_metadata:
                payload["metadata"] = dict(self.user_metadata)
            out.extend(self._wrapped("tasks", "task", step, payload))
        if self.updates and writes:
            out.extend(self._cached_updates(tasks, writes))
        return out

    def _cached_updates(
        self, tasks: list[Task], writes: Mapping[tuple[str, WriteKind], TaskWrite]
    ) -> Iterator[Emit]:
        """LangGraph repeats the updates of tasks whose results were saved, marked cached."""
        for task in tasks:
            saved = writes.get((task.id, "result"))
            if saved is not None and task.name != START:
                update = {task.name: self._update(saved.value.updates)}
                yield Emit("updates", {**update, "__metadata__": {"cached": True}})

    def task_done(self, outcome: Outcome) -> list[Emit]:
        """Chunks as a task finishes: its update (or interrupts), then its ``tasks`` result."""
        out: list[Emit] = []
        result = outcome.result
        if self.updates and result is not None:
            chunk = {outcome.task.name: self._update(result.updates)}
            if outcome.cached:  # as LangGraph marks a result taken from the node cache
                chunk["__metadata__"] = {"cached": True}
            out.append(Emit("updates", chunk))
        if outcome.interrupts:
            out.extend(self._interrupts(outcome.interrupts))
        if self.task_events and not outcome.cached:  # LangGraph sends none for a cache hit
            payload = {
                "id": outcome.task.id,
                "name": outcome.task.name,
                "error": outcome.error,
                "result": dict(result.updates) if result is not None else {},
                "interrupts": [i.as_dict() for i in outcome.interrupts],
            }
            out.extend(self._wrapped("tasks", "task_result", self.step, payload))
        return out

    # ----------------------------------------------------------------- values, stops
    def input_values(self, values: Mapping[str, Any]) -> list[Emit]:
        """The state a resumed run starts from (LangGraph always sends it first)."""
        if not self.values:
            return []
        state = self._state(values)
        return [Emit("values", state)] if state or self.shown is None else []

    def step_applied(self, values: Mapping[str, Any], updates: list[Update]) -> list[Emit]:
        """The state after a step, when any task of it wrote a key (LangGraph's rule)."""
        if self.values and any(updates) and self._shows_any(updates):
            return [Emit("values", self._state(values))]
        return []

    def _shows_any(self, updates: list[Update]) -> bool:
        shown = self.shown
        return shown is None or any(k in shown for update in updates for k, _ in update)

    def _update(self, updates: Update) -> dict[str, Any] | None:
        """A task's ``updates`` chunk: what it wrote (of the keys shown), ``None`` if nothing."""
        shown = self.shown
        if self.spec.schema.kind == "root":  # the state is one value: the update is that value
            return dict(updates).get(ROOT)
        if shown is None:
            return dict(updates) or None
        return {k: v for k, v in updates if k in shown} or None

    def _state(self, values: Mapping[str, Any]) -> Any:
        """The state a ``values`` chunk shows: a dict of keys, or a one-value state's value."""
        if self.shown is None:
            return self.spec.state_values(values)
        return self.spec.output_values(values)

    def _interrupts(self, interrupts: tuple[Interrupt, ...]) -> list[Emit]:
        """A task stopped at ``interrupt()``: LangGraph says so in updates and values at once."""
        out = []
        if self.updates:
            out.append(Emit("updates", {INTERRUPT_KEY: interrupts}))
        if self.values:
            out.append(Emit("values", {**self._state(self.state), INTERRUPT_KEY: interrupts}))
        return out

    def interrupted(self, values: Mapping[str, Any], done: list[tuple[str, Update]]) -> list[Emit]:
        """A step stopped at ``interrupt()``: the state its finished tasks (``done``) make.

        Their writes are saved as pending writes, not applied; LangGraph still shows the state
        they would make, as one last chunk of the run.
        """
        updates = [u for _, u in done]
        if not self.values or not any(updates) or not self._shows_any(updates):
            return []
        return [Emit("values", self._state(applied(self.spec.schema, values, done)))]

    def breakpoint(self) -> list[Emit]:
        """A static breakpoint stopped the run (LangGraph says so only at the top level)."""
        if self.updates and not self.nested:
            return [Emit("updates", {INTERRUPT_KEY: ()})]
        return []

    # ----------------------------------------------------------------- helpers
    def _wrapped(self, mode: str, kind: str, step: int, payload: dict[str, Any]) -> list[Emit]:
        """``payload`` for its own mode, and wrapped for ``debug`` when that is asked too."""
        out = [Emit(mode, payload)] if mode in self.modes else []
        if self.debug:
            event = {"step": step, "timestamp": now_iso(), "type": kind, "payload": payload}
            out.append(Emit("debug", event))
        return out


def task_triggers(spec: GraphSpec, task: Task) -> tuple[str, ...]:
    """The names LangGraph gives to what can start a node: its channels, sorted."""
    if task.send:
        return (PUSH,)
    joins = [
        f"join:{'+'.join(sorted(j.sources))}:{task.name}"
        for j in spec.joins
        if j.target == task.name
    ]
    return tuple(sorted([f"branch:to:{task.name}", *joins]))


def task_paths(tasks: Sequence[Task]) -> list[tuple[Any, ...]]:
    """LangGraph's path of each task: ``(PULL, name)`` for an edge's, ``(PUSH, i, False)`` for
    the i-th ``Send`` of the step; shown in ``tasks`` events and on ``get_state().tasks``."""
    paths: list[tuple[Any, ...]] = []
    pushed = 0
    for task in tasks:
        if task.send:
            paths.append((PUSH, pushed, False))
            pushed += 1
        else:
            paths.append((PULL, task.name))
    return paths


def _task_infos(spec: GraphSpec, step: int, tasks: list[Task]) -> dict[str, TaskInfo]:
    return {
        task.id: TaskInfo(step, task_triggers(spec, task), path)
        for task, path in zip(tasks, task_paths(tasks), strict=True)
    }


def _error_text(value: Any) -> Any:
    """A saved task error (its type and message) as ``get_state()`` shows it."""
    return f"{value.get('type')}: {value.get('message')}" if isinstance(value, dict) else value


def _task_metadata(config: Mapping[str, Any]) -> dict[str, Any]:
    """The user's metadata and tags, as LangGraph adds them to ``tasks`` events."""
    metadata = {
        k: v
        for k, v in (config.get("metadata") or {}).items()
        if k not in _CONFIG_METADATA_EXCLUDED
    }
    tags = [t for t in config.get("tags") or () if not str(t).startswith("seq:step")]
    if tags:
        metadata["tags"] = tags
    return metadata
