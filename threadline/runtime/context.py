"""What a running task may reach: its interrupt answers, stream writer, store and config.

It lives in a context variable holding a small object, never in the user's config dict.
"""

from __future__ import annotations

import copy
import hashlib
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from threadline.errors import CheckpointerRequiredError, GraphInterrupt
from threadline.types import Interrupt

if TYPE_CHECKING:  # task.py and runtime.py import this module
    from threadline.checkpoint.base import BaseSaver
    from threadline.runtime.runtime import Runtime
    from threadline.runtime.task import StepEnv, Task
    from threadline.store.base import BaseStore


class TaskContext:
    """The running task's view of its run: its task and what the step's tasks share.

    Built for every task run, so it copies nothing: the fields a node may reach are read
    through from the task and the step (``StepEnv``) when asked for.
    """

    # ``attempt``, ``first_attempt_time``, ``_runtime``, ``pushed`` and ``traced`` stay unset (so
    # cost nothing) until a retry, a ``Runtime``, ``push_message`` or the execution trace needs
    # them.
    __slots__ = (
        "_runtime",
        "attempt",
        "calls",
        "env",
        "first_attempt_time",
        "pushed",
        "subgraph_calls",
        "task",
        "task_calls",
        "traced",
    )
    _runtime: Runtime[Any] | None
    attempt: int
    first_attempt_time: float | None
    pushed: list[tuple[str, Any]]
    traced: float  # when the execution trace saw the task start (``trace.py``)

    def __init__(self, task: Task, env: StepEnv) -> None:
        self.task = task
        self.env = env
        self.calls = 0
        self.subgraph_calls = 0
        self.task_calls = 0  # ``@task`` calls made so far: the next call's index

    @property
    def task_id(self) -> str:
        return self.task.id

    @property
    def name(self) -> str:
        return self.task.name

    @property
    def ns(self) -> str:
        return self.task.ns

    @property
    def answers(self) -> dict[str, Any]:
        return self.task.answers

    @property
    def config(self) -> dict[str, Any]:
        return self.env.config

    @property
    def saver(self) -> BaseSaver | None:
        return self.env.saver

    @property
    def store(self) -> BaseStore | None:
        return self.env.store

    @property
    def writer(self) -> Callable[[Any], None]:
        return self.env.writer

    @property
    def durability(self) -> str:
        return self.env.durability

    @property
    def spare(self) -> SpareAnswer | None:
        return self.env.spare

    # stream(subgraphs=True): where a graph this task runs sends its chunks, and which modes
    @property
    def sink(self) -> Callable[[Any], None] | None:
        return self.env.sink

    @property
    def modes(self) -> frozenset[str]:
        return self.env.modes

    @property
    def runtime(self) -> Runtime[Any]:
        """The task's ``Runtime``, made when first asked for and kept for this attempt."""
        runtime = getattr(self, "_runtime", None)
        if runtime is None:
            from threadline.runtime.runtime import runtime_of

            attempt = getattr(self, "attempt", 1)
            runtime = runtime_of(self, attempt, getattr(self, "first_attempt_time", None))
            self._runtime = runtime
            if attempt == 1 and runtime.execution_info is not None:
                self.first_attempt_time = runtime.execution_info.node_first_attempt_time
        return runtime

    def push(self, key: str, value: Any) -> None:
        """Write ``value`` to ``key`` now, ahead of what the node returns (``push_message``)."""
        if not hasattr(self, "pushed"):
            self.pushed = []
        self.pushed.append((key, value))

    def restart(self) -> None:
        """A retry runs the node from its top: count interrupts, subgraph and task calls anew."""
        self.calls = 0
        self.subgraph_calls = 0
        self.attempt = getattr(self, "attempt", 1) + 1
        self._runtime = None
        self.task_calls = 0
        self.pushed = []
        if self.env.trace is not None:
            self.env.trace.retry(self)

    def next_subgraph_ns(self) -> str:
        """Each graph a task invokes gets its own namespace, the same on every re-run."""
        index = self.subgraph_calls
        self.subgraph_calls += 1
        return self.ns if index == 0 else f"{self.ns}#{index}"

    def next_task_call(self) -> int:
        """The index of a new ``@task`` call: the n-th call of a run finds the n-th saved result."""
        index = self.task_calls
        self.task_calls += 1
        return index


class SpareAnswer:
    """A ``Command(resume=...)`` given while no interrupt was waiting (after ``update_state``,
    or at a static breakpoint): the step's first ``interrupt()`` call without an answer of its
    own takes it, as in LangGraph. Taken once, whichever task asks first."""

    def __init__(self, value: Any) -> None:
        self._value = value
        self._taken = False
        self._lock = threading.Lock()

    def take(self) -> tuple[bool, Any]:
        with self._lock:
            if self._taken:
                return False, None
            self._taken = True
            return True, self._value


_current: ContextVar[TaskContext | None] = ContextVar("threadline_task", default=None)


# The running task's context; entering a task gives the token that leaving it takes (the
# ContextVar's own methods: they run for every task, and a wrapper's frame would double them).
current_task = _current.get
enter_task = _current.set
leave_task = _current.reset


def interrupt_id(ns: str, index: int) -> str:
    """Stable across re-runs of the same task: derived from its namespace and the call index."""
    return hashlib.blake2b(f"{ns}#{index}".encode(), digest_size=16).hexdigest()


def interrupt(value: Any, *, schema: Any = None) -> Any:
    """Ask for a value from outside the graph.

    The first time, this stops the run and saves it; ``invoke(Command(resume=answer), config)``
    runs the node again from its top, and this call then returns ``answer``. The n-th call in a
    node receives the n-th answer.

    ``schema`` (a pydantic model, dataclass, TypedDict or JSON Schema dict) is what the answer
    must look like: it is shown with the interrupt as JSON Schema, an answer that does not
    match is refused at resume with nothing run, and this call returns a model or dataclass
    instance (a dict for the others). See ``docs/human-in-the-loop.md``.
    """
    ctx = _require_task("interrupt()")
    expected = None if schema is None else _answer_schema(schema)
    if ctx.saver is None:
        raise CheckpointerRequiredError(
            f"interrupt() in node {ctx.name!r} needs a checkpointer to be resumed; "
            "compile(checkpointer=InMemorySaver()) or SqliteSaver(path)"
        )
    index = ctx.calls
    ctx.calls += 1
    iid = interrupt_id(ctx.ns, index)
    if iid in ctx.answers:
        answer = ctx.answers[iid]
        return answer if expected is None else expected.answer(value, answer, iid)
    if ctx.spare is not None:
        taken, answer = ctx.spare.take()
        if taken:
            ctx.answers[iid] = answer  # a retry of the node asks again: same answer
            return answer if expected is None else expected.answer(value, answer, iid)
    shown = None if expected is None else copy.deepcopy(expected.json_schema)
    raise GraphInterrupt((Interrupt(value=value, id=iid, schema=shown),))


def _answer_schema(schema: Any) -> Any:
    from threadline.hitl.schemas import answer_schema  # only interrupts with a schema need it

    return answer_schema(schema)


def get_store() -> BaseStore | None:
    """The store given to ``compile(store=...)``, from inside a node."""
    return _require_task("get_store()").store


def get_stream_writer() -> Callable[[Any], None]:
    """A function that sends a value to ``stream_mode="custom"``; a no-op when not streaming it."""
    ctx = _current.get()
    return ctx.writer if ctx is not None else _discard


def get_config() -> dict[str, Any]:
    """The config of the running task."""
    return _require_task("get_config()").config


def _discard(_: Any) -> None:
    return None


def _require_task(what: str) -> TaskContext:
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError(f"{what} can only be called inside a running node")
    return ctx
