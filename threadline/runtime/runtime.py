"""``Runtime``: what a node may take besides its state — the run's context, store and writer.

A node gets it by taking a parameter named ``runtime`` (or annotated ``Runtime[...]``), or by
calling ``get_runtime()``. The context is given per run with ``invoke(..., context=...)`` and is
seen by every node, conditional edge and subgraph the run calls.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from threadline.runtime.context import current_task
from threadline.runtime.timeouts import heartbeat
from threadline.store.base import BaseStore

if TYPE_CHECKING:
    from threadline.runtime.context import TaskContext

Context = TypeVar("Context")


def _discard(_: Any) -> None:
    return None


@dataclass(frozen=True, slots=True)
class ExecutionInfo:
    """Where the running node is: its checkpoint, namespace, task, thread and attempt."""

    checkpoint_id: str
    checkpoint_ns: str
    task_id: str
    thread_id: str | None = None
    run_id: str | None = None
    node_attempt: int = 1
    node_first_attempt_time: float | None = None


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What a server running the graph says of the run; threadline runs graphs in-process, so
    ``Runtime.server_info`` is ``None`` unless a host fills it in."""

    assistant_id: str
    graph_id: str
    user: Any = None


class RunControl:
    """Ask a run to stop at the next step boundary (``request_drain``), say on SIGTERM.

    Pass one per run, ``invoke(..., control=RunControl())``; from another thread (or a node,
    through ``runtime.control``) call ``request_drain()``. The run finishes its current step,
    saves it, and raises ``GraphDrained``; ``invoke(None, config)`` continues the thread later.
    A single attribute write is the whole signal, so no lock is needed.
    """

    __slots__ = ("_drain_reason",)

    def __init__(self) -> None:
        self._drain_reason: str | None = None

    def request_drain(self, reason: str = "shutdown") -> None:
        self._drain_reason = reason

    @property
    def drain_requested(self) -> bool:
        return self._drain_reason is not None

    @property
    def drain_reason(self) -> str | None:
        return self._drain_reason


@dataclass(frozen=True, slots=True, kw_only=True)
class Runtime(Generic[Context]):
    """The run-scoped things a node may use: ``context`` (the run's static dependencies, such
    as a user id or a database handle), ``store``, and ``stream_writer`` (to
    ``stream_mode="custom"``). ``previous`` is always ``None`` in a graph (LangGraph fills it in
    its functional API only); ``server_info`` is ``None`` (there is no LangGraph server).
    ``control`` is the run's ``RunControl`` (a node may ask its own run to drain)."""

    context: Context = field(default=None)  # type: ignore[assignment]
    store: BaseStore | None = None
    stream_writer: Callable[[Any], None] = _discard
    previous: Any = None
    execution_info: ExecutionInfo | None = None
    server_info: ServerInfo | None = None
    heartbeat: Callable[[], None] = heartbeat  # refreshes the attempt's idle timeout
    control: RunControl | None = None

    def override(self, **changes: Any) -> Runtime[Context]:
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)

    def merge(self, other: Runtime[Context]) -> Runtime[Context]:
        """``other``'s fields where it has them, this runtime's elsewhere."""
        return Runtime(
            context=other.context or self.context,
            store=other.store or self.store,
            stream_writer=(
                other.stream_writer if other.stream_writer is not _discard else self.stream_writer
            ),
            previous=self.previous if other.previous is None else other.previous,
            execution_info=other.execution_info or self.execution_info,
            server_info=other.server_info or self.server_info,
            heartbeat=other.heartbeat if other.heartbeat is not heartbeat else self.heartbeat,
            control=other.control or self.control,
        )


DEFAULT_RUNTIME: Runtime[Any] = Runtime()
"""The runtime of code called outside a run (no context, store or writer)."""


def get_runtime(context_schema: type[Context] | None = None) -> Runtime[Context]:
    """The ``Runtime`` of the running node (``context_schema`` only helps type checkers)."""
    ctx = current_task()
    if ctx is None:
        raise RuntimeError("get_runtime() can only be called inside a running node")
    return ctx.runtime


def runtime_of(ctx: TaskContext, attempt: int, first_attempt_time: float | None) -> Runtime[Any]:
    """The runtime a task sees on its ``attempt``-th try."""
    env, task = ctx.env, ctx.task
    run_id = env.config.get("run_id")
    info = ExecutionInfo(
        checkpoint_id=env.checkpoint_id,
        checkpoint_ns=task.ns,
        task_id=task.id,
        thread_id=env.thread_id,
        run_id=str(run_id) if run_id else None,
        node_attempt=attempt,
        node_first_attempt_time=first_attempt_time or time.time(),
    )
    return Runtime(
        context=env.context,
        store=env.store,
        stream_writer=env.writer,
        execution_info=info,
        control=env.control,
    )


def coerce_context(schema: Any, context: Any) -> Any:
    """The run's context: a dict becomes the ``context_schema`` dataclass or pydantic model it
    describes (as in LangGraph); anything else is passed on as it is."""
    if context is None or schema is None or not isinstance(context, dict):
        return context
    if dataclasses.is_dataclass(schema) or hasattr(schema, "model_fields"):
        return schema(**context)
    return context
