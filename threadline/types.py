"""The small public value types: Send, Command, Interrupt, RetryPolicy, snapshots, outputs."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, Generic, Literal, NamedTuple, TypeVar

from threadline import serde
from threadline.cache.keys import default_cache_key
from threadline.constants import INTERRUPT_KEY


@serde.register(name="threadline.Send")
@dataclass(frozen=True, slots=True)
class Send:
    """Run ``node`` in the next superstep with ``arg`` as its input (map-reduce fan-out)."""

    node: str
    arg: Any


@serde.register(name="threadline.Overwrite")
@dataclass(frozen=True, slots=True)
class Overwrite:
    """Write ``value`` to a key as it is, bypassing the key's reducer."""

    value: Any


@serde.register(name="threadline.Interrupt")
@dataclass(frozen=True, slots=True)
class Interrupt:
    """A question a node asked with ``interrupt(value)``; answer it with ``Command(resume=...)``.

    ``schema`` is the JSON Schema the answer must match, when the node gave one
    (``interrupt(value, schema=...)``): a UI can render a form from it. It takes no part in
    equality, and the repr leaves it out when there is none, as LangGraph prints interrupts.
    """

    value: Any
    id: str
    schema: dict[str, Any] | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        shown = f"Interrupt(value={self.value!r}, id={self.id!r}"
        return shown + (")" if self.schema is None else f", schema={self.schema!r})")

    def as_dict(self) -> dict[str, Any]:
        """As LangGraph's stream events show an interrupt; ``schema`` only when there is one."""
        shown = {"value": self.value, "id": self.id}
        return shown if self.schema is None else {**shown, "schema": self.schema}


N = TypeVar("N")


@dataclass(frozen=True, slots=True)
class Command(Generic[N]):
    """Returned by a node to update state and route, or passed to ``invoke`` to resume.

    ``goto`` names nodes (or ``Send`` objects) to run next; ``graph=Command.PARENT`` sends the
    command to the graph that contains this subgraph; ``resume`` answers pending interrupts.
    """

    PARENT: ClassVar[str] = "__parent__"

    graph: str | None = None
    update: Any = None
    resume: Any = None
    goto: str | Send | Sequence[str | Send] = ()

    def goto_targets(self) -> tuple[str | Send, ...]:
        if isinstance(self.goto, str | Send):
            return (self.goto,)
        return tuple(self.goto)


def default_retry_on(exc: BaseException) -> bool:
    """Retry what looks transient (connection trouble, 5xx answers), never programming errors."""
    if isinstance(exc, ConnectionError):
        return True
    if isinstance(exc, _PROGRAMMING_ERRORS):
        return False
    status = getattr(getattr(exc, "response", None), "status_code", None)
    if isinstance(status, int):
        return status >= 500
    return True


_PROGRAMMING_ERRORS = (
    ValueError,
    TypeError,
    ArithmeticError,
    ImportError,
    LookupError,
    NameError,
    SyntaxError,
    RuntimeError,
    ReferenceError,
    StopIteration,
    StopAsyncIteration,
    OSError,
    AssertionError,
    AttributeError,
)


K = TypeVar("K", bound=Callable[..., Any])
V = TypeVar("V")


@dataclass(frozen=True, slots=True, kw_only=True)
class CachePolicy(Generic[K]):
    """How a node's result is cached: ``compile(cache=...)`` then reuses it for the same input.

    ``key_func`` turns the node's input into a key (``str`` or ``bytes``); the default encodes
    the input canonically (dict key order does not matter) with threadline's serde, never pickle.
    ``ttl`` is how many seconds an entry lives; ``None`` keeps it until the cache is cleared.
    """

    key_func: K = default_cache_key  # type: ignore[assignment]
    ttl: float | None = None

    def __post_init__(self) -> None:
        if not callable(self.key_func):
            raise TypeError(f"CachePolicy.key_func must be callable, got {self.key_func!r}")
        ttl = self.ttl
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float)):
            raise TypeError(f"CachePolicy.ttl must be a number of seconds or None, got {ttl!r}")
        if ttl is not None and ttl < 0:
            raise ValueError(f"CachePolicy.ttl must not be negative, got {ttl}")


@dataclass(frozen=True, slots=True)
class TimeoutPolicy:
    """Time limits on one attempt of a node or task: ``run_timeout`` caps its whole run,
    ``idle_timeout`` the time it may go without progress. Progress is ``runtime.heartbeat()``
    and, with ``refresh_on="auto"``, also what the attempt streams (``get_stream_writer()``).
    Seconds or ``timedelta``s; ``add_node(timeout=...)`` also takes plain seconds."""

    run_timeout: float | timedelta | None = None
    idle_timeout: float | timedelta | None = None
    refresh_on: Literal["auto", "heartbeat"] = "auto"

    def __post_init__(self) -> None:
        if self.refresh_on not in ("auto", "heartbeat"):
            raise ValueError(f"refresh_on must be 'auto' or 'heartbeat', got {self.refresh_on!r}")
        if self.run_timeout is None and self.idle_timeout is None:
            raise ValueError("TimeoutPolicy needs a run_timeout, an idle_timeout or both")
        object.__setattr__(self, "run_timeout", _seconds(self.run_timeout))
        object.__setattr__(self, "idle_timeout", _seconds(self.idle_timeout))

    @property
    def limits(self) -> tuple[float | None, float | None]:
        """``(run_timeout, idle_timeout)`` in seconds (``__post_init__`` made them floats)."""
        run, idle = _seconds(self.run_timeout), _seconds(self.idle_timeout)
        return run, idle

    @classmethod
    def coerce(cls, value: float | timedelta | TimeoutPolicy | None) -> TimeoutPolicy | None:
        """A timeout as given to ``add_node``/``@task``: seconds, a ``timedelta`` or a policy."""
        if value is None or isinstance(value, TimeoutPolicy):
            return value
        return cls(run_timeout=value)


def _seconds(timeout: float | timedelta | None) -> float | None:
    """A timeout as positive seconds (a number or a ``timedelta``), checked where it is given."""
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be seconds (a number) or a timedelta, got {timeout!r}")
    if not timeout > 0:  # NaN too
        raise ValueError(f"timeout must be positive, got {timeout}")
    return float(timeout)


@dataclass(frozen=True, slots=True)
class TracePolicy:
    """How a node's LangSmith trace records its input and output. threadline sends no
    LangSmith traces, so it is accepted with nothing to shape (its own execution trace,
    ``get_trace``, records no node inputs or outputs)."""

    process_inputs: Callable[[Any], Any] | None = None
    process_outputs: Callable[[Any], Any] | None = None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a node retries after an exception: exponential backoff with optional jitter."""

    initial_interval: float = 0.5
    backoff_factor: float = 2.0
    max_interval: float = 128.0
    max_attempts: int = 3
    jitter: bool = True
    retry_on: (
        type[BaseException] | Sequence[type[BaseException]] | Callable[[BaseException], bool]
    ) = field(default=default_retry_on)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(
                f"RetryPolicy.max_attempts must be at least 1, got {self.max_attempts}"
            )
        if self.initial_interval < 0 or self.max_interval < 0:
            raise ValueError("RetryPolicy intervals must not be negative")

    def should_retry(self, exc: BaseException) -> bool:
        rule = self.retry_on
        if isinstance(rule, type):  # an exception class
            return isinstance(exc, rule)
        if isinstance(rule, Sequence):
            return isinstance(exc, tuple(rule))
        return bool(rule(exc))


class SnapshotTask(NamedTuple):
    """A task of a checkpoint's next step, as ``get_state`` shows it.

    Fields in LangGraph's ``PregelTask`` order, so tuples compare equal to LangGraph's;
    ``path`` is ``("__pregel_pull", node)`` for a task an edge started, ``("__pregel_push",
    i, False)`` for the i-th ``Send`` of the step.
    """

    id: str
    name: str
    path: tuple[Any, ...] = ()
    error: str | None = None
    interrupts: tuple[Interrupt, ...] = ()
    state: Any = None
    result: Any = None


PregelTask = SnapshotTask  # LangGraph's name for it


class StateUpdate(NamedTuple):
    """One update of ``bulk_update_state``: ``values`` as if ``as_node`` wrote them."""

    values: dict[str, Any] | Any | None
    as_node: str | None = None
    task_id: str | None = None


class StateSnapshot(NamedTuple):
    """The state of a thread at one checkpoint."""

    values: dict[str, Any]
    next: tuple[str, ...]
    config: dict[str, Any]
    metadata: dict[str, Any] | None
    created_at: str | None
    parent_config: dict[str, Any] | None
    tasks: tuple[SnapshotTask, ...]
    interrupts: tuple[Interrupt, ...] = ()


@dataclass(frozen=True, slots=True)
class GraphOutput(Generic[V]):
    """What ``invoke(..., version="v2")`` returns: the output, and the interrupts apart.

    ``value`` is an instance of the output schema when that is a dataclass or pydantic model.
    ``output["key"]`` and ``"key" in output`` still work, as in LangGraph, with a warning.
    """

    value: V
    interrupts: tuple[Interrupt, ...] = ()

    def __getitem__(self, key: str) -> Any:
        _warn_item_access()
        if key == INTERRUPT_KEY:
            return self.interrupts
        if isinstance(self.value, dict):
            return self.value[key]
        try:
            return getattr(self.value, key)
        except AttributeError:
            raise KeyError(key) from None

    def __contains__(self, key: object) -> bool:
        _warn_item_access()
        if key == INTERRUPT_KEY:
            return bool(self.interrupts)
        if isinstance(self.value, dict):
            return key in self.value
        return isinstance(key, str) and hasattr(self.value, key)


def _warn_item_access() -> None:
    warnings.warn(
        "GraphOutput[key] and `key in GraphOutput` are deprecated: use output.value and "
        "output.interrupts",
        DeprecationWarning,
        stacklevel=3,
    )


StreamWriter = Callable[[Any], None]
"""The type of ``get_stream_writer()`` and of a node's ``writer`` parameter."""


def __getattr__(name: str) -> Any:
    """``interrupt`` at LangGraph's ``langgraph.types`` path; loaded on first use because the
    runtime that implements it imports this module."""
    if name == "interrupt":
        from threadline.runtime.context import interrupt

        return interrupt
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
