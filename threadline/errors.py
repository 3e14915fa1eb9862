"""Every error threadline raises, importable from one place.

Messages name the culprit (node, key, thread, checkpoint) and say what to do about it.
"""

from __future__ import annotations

from typing import Any


class ThreadlineError(Exception):
    """Base class of every error raised by threadline."""


class GraphValidationError(ThreadlineError):
    """The graph definition is wrong; raised by the builder or by ``compile()``."""


class InvalidUpdateError(ThreadlineError):
    """A node or ``update_state`` produced an update the state cannot take."""


class GraphRecursionError(ThreadlineError):
    """A run reached its recursion limit (the number of supersteps it may take)."""


class ConfigError(ThreadlineError):
    """The run config is missing something the operation needs (e.g. a thread id)."""


class CheckpointerRequiredError(ConfigError):
    """An operation needs a checkpointer but the graph was compiled without one."""


class ThreadNotFoundError(ThreadlineError):
    """The thread has no checkpoint."""


class CheckpointNotFoundError(ThreadlineError):
    """No checkpoint with the given id exists on the thread."""


class NothingToResumeError(ThreadlineError):
    """``Command(resume=...)`` was given but nothing is waiting for an answer."""


class InvalidResumeError(ThreadlineError):
    """A resume value does not match the pending interrupts."""


class ConcurrentUpdateError(ThreadlineError):
    """Another run saved a checkpoint on this thread first; nothing was written."""


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


class SaverUnavailableError(ThreadlineError):
    """The checkpoint store cannot be reached or opened."""


class StoreUnavailableError(ThreadlineError):
    """The memory store cannot be reached, is closed, or was written by a newer version."""


class InvalidStoreInputError(ThreadlineError, ValueError):
    """A store call got a bad namespace, key, value, filter or paging argument."""


class GraphInterrupt(BaseException):
    """Raised inside a node by ``interrupt()`` to stop the run until someone answers.

    It derives from ``BaseException`` so that a node's ``except Exception`` cannot swallow it.
    """

    def __init__(self, interrupts: tuple[Any, ...] = ()):
        super().__init__(interrupts)
        self.interrupts = interrupts


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
    "CheckpointNotFoundError",
    "CheckpointerRequiredError",
    "ConcurrentUpdateError",
    "ConfigError",
    "GraphInterrupt",
    "GraphRecursionError",
    "GraphValidationError",
    "IncompatibleThreadError",
    "InvalidMessageError",
    "InvalidResumeError",
    "InvalidStoreInputError",
    "InvalidUpdateError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelTimeoutError",
    "NothingToResumeError",
    "ParentCommand",
    "SaverUnavailableError",
    "ScriptExhaustedError",
    "SerializationError",
    "StoreUnavailableError",
    "ThreadNotFoundError",
    "ThreadlineError",
]
