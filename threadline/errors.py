"""Every error threadline raises, importable from one place.

Messages name the culprit (node, key, thread, checkpoint) and say what to do about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ThreadlineError(Exception):
    """Base class of every error raised by threadline."""


class GraphValidationError(ThreadlineError, ValueError):
    """The graph definition is wrong; raised by the builder or by ``compile()``.

    A ``ValueError`` too, as LangGraph raises one for a graph it cannot build.
    """


class AsyncNodeInSyncRunError(GraphValidationError, TypeError):
    """A sync run (``invoke``/``stream``) of a graph with a node that has only an async function.

    A ``TypeError`` too, as LangGraph raises one there.
    """


class InvalidUpdateError(ThreadlineError):
    """A node or ``update_state`` produced an update the state cannot take."""


class GraphRecursionError(ThreadlineError, RecursionError):
    """A run reached its recursion limit (the number of supersteps it may take).

    A ``RecursionError`` too, as LangGraph's is.
    """


class ConfigError(ThreadlineError, ValueError):
    """The run config is missing something the operation needs (e.g. a thread id), or an
    argument has a value it cannot take.

    A ``ValueError`` too, as LangGraph raises one for a missing thread id or checkpointer, or a
    bad ``recursion_limit``.
    """


class ThreadIdRequiredError(ConfigError):
    """A graph with a checkpointer was run without ``configurable.thread_id``."""


class CheckpointerRequiredError(ConfigError):
    """An operation needs a checkpointer but the graph was compiled without one."""


class ResumeWithoutCheckpointerError(CheckpointerRequiredError, RuntimeError):
    """``Command(resume=...)`` given to a graph without a checkpointer.

    A ``RuntimeError`` too, as LangGraph raises one there.
    """


class ThreadNotFoundError(ThreadlineError):
    """The thread has no checkpoint."""


class CheckpointNotFoundError(ThreadlineError):
    """No checkpoint with the given id exists on the thread."""


class NothingToResumeError(ThreadlineError):
    """``Command(resume=...)`` was given but nothing is waiting for an answer."""


class InvalidResumeError(ThreadlineError):
    """A resume value does not match the pending interrupts."""


class AmbiguousResumeError(InvalidResumeError, RuntimeError):
    """A bare resume value was given while several interrupts wait: which one does it answer?

    A ``RuntimeError`` too, as LangGraph raises one there.
    """


class ConcurrentUpdateError(ThreadlineError):
    """Another run saved a checkpoint on this thread first; nothing was written."""


class UnsupportedCheckpointWriteError(ThreadlineError, NotImplementedError):
    """LangGraph's low-level ``put``/``put_writes`` was called on a threadline saver.

    A ``NotImplementedError`` too, as LangGraph's base saver raises for a method it lacks.
    """


class IncompatibleThreadError(ThreadlineError):
    """A thread saved by another version of the graph cannot be continued by this one: its
    state version is newer, no upcaster leads from it, or it plans a node that is gone.
    ``threadline.check(graph)`` lists such threads before a deploy."""


class InvalidMessageError(ThreadlineError, ValueError):
    """``add_messages`` got a message it cannot merge (e.g. removing an id that is not there).

    A ``ValueError`` too, as LangGraph raises one there.
    """


class SerializationError(ThreadlineError):
    """A value cannot be encoded or decoded safely.

    ``path`` is where in the state the value sits (``messages[3].payload``) and ``type_name`` the
    offending type, when known.
    """

    def __init__(self, message: str, *, path: str | None = None, type_name: str | None = None):
        super().__init__(message)
        self.path = path
        self.type_name = type_name


class CorruptedDataError(SerializationError):
    """A stored record failed its check: a damaged byte, a truncated or replaced record, or one
    copied from another checkpoint or thread. The message names the backend, thread, namespace
    and checkpoint or key; nothing was changed, so the record stays for a person to inspect.

    ``thread_id``, ``checkpoint_ns`` and ``checkpoint_id`` say where, when known (a scan of a
    store reports them: ``threadline.maintenance.scan_damage``).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        type_name: str | None = None,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
    ):
        super().__init__(message, path=path, type_name=type_name)
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.checkpoint_id = checkpoint_id


class SaverUnavailableError(ThreadlineError):
    """The checkpoint store cannot be reached or opened."""


class StoreUnavailableError(ThreadlineError):
    """The memory store cannot be reached, is closed, or was written by a newer version."""


class InvalidStoreInputError(ThreadlineError, ValueError):
    """A store call got a bad namespace, key, value, filter or paging argument."""


class InvalidChatHistoryError(ThreadlineError, ValueError):
    """A conversation a chat provider would refuse: a tool call without exactly one result
    after it, or a tool result without its call. ``problems`` lists each
    ``HistoryProblem`` found; ``repair_history`` makes the history valid.

    A ``ValueError`` too, as LangGraph raises one for an invalid chat history.
    """

    def __init__(self, message: str, problems: tuple[Any, ...] = ()):
        super().__init__(message)
        self.problems = problems


class ToolInvocationError(ThreadlineError, ValueError):
    """A tool was called with arguments that do not fit its parameters (the model's mistake).

    ``ToolNode`` returns ``message`` to the model by default, as LangGraph does, so that it can
    fix the call.
    """

    def __init__(self, message: str, *, tool_name: str, tool_kwargs: dict[str, Any]):
        super().__init__(message)
        self.message = message
        self.tool_name = tool_name
        self.tool_kwargs = tool_kwargs


class NotSupportedError(ThreadlineError, NotImplementedError):
    """An argument LangGraph takes that threadline does not implement (yet); refused rather
    than ignored."""


class GraphInterrupt(BaseException):
    """Raised inside a node by ``interrupt()`` to stop the run until someone answers.

    It derives from ``BaseException`` so that a node's ``except Exception`` cannot swallow it.
    """

    def __init__(self, interrupts: tuple[Any, ...] = ()):
        super().__init__(interrupts)
        self.interrupts = interrupts


class GraphDrained(ThreadlineError):
    """A run stopped between two steps because its ``RunControl`` asked it to drain (say, on
    SIGTERM). The step before is saved: ``invoke(None, config)`` continues the thread."""

    def __init__(self, reason: str = "shutdown"):
        super().__init__(f"Graph drained: {reason}")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class NodeError:
    """What a node's error handler (``add_node(..., error_handler=...)``) is told: the node
    that failed and its exception. The handler takes it by a parameter annotated
    ``NodeError`` (or named ``error``)."""

    node: str
    error: BaseException


class ParentCommand(BaseException):
    """Carries a ``Command(graph=Command.PARENT)`` out of a subgraph to its parent's node."""

    def __init__(self, command: Any):
        super().__init__(command)
        self.command = command


class ModelError(ThreadlineError):
    """A chat model call failed; the subclasses say how."""


class ModelHTTPError(ModelError):
    """The model server answered with an error status.

    ``status`` is the HTTP status, ``server_message`` the server's own explanation (from its
    JSON error body when it sent one), ``url`` the endpoint called and ``body`` the raw reply.
    """

    def __init__(
        self, message: str, *, status: int, url: str, server_message: str = "", body: str = ""
    ):
        super().__init__(message)
        self.status = status
        self.url = url
        self.server_message = server_message
        self.body = body


class ModelConnectionError(ModelError):
    """The model server could not be reached (refused, reset, DNS), after every retry."""


class ModelTimeoutError(ModelConnectionError):
    """The model server did not answer within the timeout, after every retry."""


class ModelResponseError(ModelError):
    """The model server's reply could not be understood: malformed JSON, a broken stream, or a
    structured answer that does not match the requested schema."""


class ScriptExhaustedError(ModelError):
    """A ``ScriptedChatModel`` was called more times than it has replies."""


__all__ = [
    "AmbiguousResumeError",
    "AsyncNodeInSyncRunError",
    "CheckpointNotFoundError",
    "CheckpointerRequiredError",
    "ConcurrentUpdateError",
    "ConfigError",
    "CorruptedDataError",
    "GraphInterrupt",
    "GraphRecursionError",
    "GraphValidationError",
    "IncompatibleThreadError",
    "InvalidChatHistoryError",
    "InvalidMessageError",
    "InvalidResumeError",
    "InvalidStoreInputError",
    "InvalidUpdateError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelTimeoutError",
    "NotSupportedError",
    "NothingToResumeError",
    "ParentCommand",
    "ResumeWithoutCheckpointerError",
    "SaverUnavailableError",
    "ScriptExhaustedError",
    "SerializationError",
    "StoreUnavailableError",
    "ThreadIdRequiredError",
    "ThreadNotFoundError",
    "ThreadlineError",
    "ToolInvocationError",
]


class NonDeterminismError(ThreadlineError):
    """A re-run of a node or entrypoint called its ``@task``s differently than the run whose
    results were saved (another task at the same position): its code or inputs changed.

    Returning the saved result would hand one task's result to another; nothing is returned.
    """


class NodeTimeoutError(ThreadlineError):
    """A node, task or entrypoint attempt ran longer than its ``timeout``.

    As in LangGraph it is not a ``TimeoutError`` (an ``OSError``), so the default
    ``RetryPolicy`` retries it. ``node`` names the node or task, ``timeout`` the limit in
    seconds and ``elapsed`` how long the attempt had run.
    """

    def __init__(
        self,
        node: str,
        elapsed: float,
        *,
        kind: str = "run",
        run_timeout: float | None = None,
        idle_timeout: float | None = None,
        what: str = "task",
    ):
        self.node = node
        self.elapsed = elapsed
        self.kind = kind
        self.run_timeout = run_timeout
        self.idle_timeout = idle_timeout
        self.timeout = run_timeout if kind == "run" else idle_timeout
        super().__init__(
            f"{what} {node!r} exceeded its {'idle ' if kind == 'idle' else ''}timeout of "
            f"{self.timeout:.3f}s (elapsed: {elapsed:.3f}s)"
        )


__all__ += ["GraphDrained", "NodeError", "NodeTimeoutError", "NonDeterminismError"]


class InvalidAnswerError(InvalidResumeError):
    """A resume answer does not match what its interrupt asked for (its ``schema``, or the
    decisions a review allows). Raised by ``Command(resume=...)`` before anything runs, so the
    interrupt stays pending; or by the node that asked, when a check only Python can make (a
    pydantic validator) refuses it.

    ``interrupt_id`` names the interrupt, ``problems`` lists ``(field path, what is wrong)``
    pairs (the path is ``""`` for the answer as a whole) and ``field`` is the first path.
    """

    def __init__(
        self, message: str, *, interrupt_id: str, problems: tuple[tuple[str, str], ...] = ()
    ):
        super().__init__(message)
        self.interrupt_id = interrupt_id
        self.problems = problems
        self.field = problems[0][0] if problems else ""


class InvalidSchemaError(ThreadlineError, ValueError):
    """A schema given to ``interrupt(schema=...)`` or a review is not one threadline can check:
    not a pydantic model, dataclass, TypedDict or JSON Schema dict, or a JSON Schema that uses
    a keyword outside the supported subset."""


__all__ += ["InvalidAnswerError", "InvalidSchemaError"]
