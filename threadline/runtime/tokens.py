"""``stream_mode="messages"``: chat-model tokens, and the messages nodes return, as they come.

Each chunk is ``(message, metadata)`` as in LangGraph: ``metadata`` holds the config's
metadata, ``thread_id``, ``langgraph_step``, ``langgraph_node``, ``langgraph_triggers``,
``langgraph_path``, ``langgraph_checkpoint_ns`` (and for a chat model, ``checkpoint_ns``, the
model's ``ls_*`` keys and the run's tags).

Three sources feed it:
- langchain-core chat models called inside a node (when langchain-core is installed): a
  callback handler reaches every model call made while a task runs, through langchain-core's
  configure hook, so no config has to be passed to the model. Its tokens are sent as they
  arrive; a model that cannot stream sends its whole message once.
- the messages a node returns in its update, unless already sent (by id) or already in the
  node's input, as LangGraph does.
- ``get_message_writer()``, for a model that reports its own tokens.

One ``MessageStream`` serves a streamed run and the subgraph runs it streams, so a message is
sent once however many levels return it. Nothing here runs unless the mode is asked for.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from threadline.runtime.chunks import Emit, message_chunk
from threadline.runtime.context import current_task
from threadline.runtime.task import Outcome, StepEnv, Task

if TYPE_CHECKING:
    from threadline.runtime.loop import RunLoop

NOSTREAM_TAG = "nostream"  # a model run with this tag is not streamed (LangGraph's tag)
# Config keys LangGraph copies from ``configurable`` into a task's metadata.
_PROPAGATED = ("thread_id", "checkpoint_id", "checkpoint_ns", "task_id", "run_id")

# The stream of the running task's run (tasks of runs that stream messages only).
_ACTIVE: ContextVar[MessageStream | None] = ContextVar("threadline_messages", default=None)
# The langchain-core handler its configure hook adds to every callback manager made meanwhile.
_HOOK: ContextVar[Any] = ContextVar("threadline_messages_handler", default=None)

Runner = Callable[[Task, StepEnv], Outcome]
AsyncRunner = Callable[[Task, StepEnv], Awaitable[Outcome]]


@dataclass(slots=True)
class _Running:
    """A task whose messages are streamed: its graph's namespace and its metadata."""

    ns: str
    metadata: dict[str, Any]
    tags: tuple[str, ...]


class MessageStream:
    """Sends ``messages`` chunks of one streamed run (and of the subgraph runs it streams)."""

    def __init__(self, put: Callable[[Emit], None]) -> None:
        self.put = put
        self.seen: set[str] = set()
        self.tasks: dict[str, _Running] = {}
        self.models: dict[Any, _Running] = {}  # chat-model run id -> the task it runs in
        handler_class = _handler_class()
        self.handler = handler_class(self) if handler_class is not None else None

    @classmethod
    def for_run(cls, loop: RunLoop, put: Callable[[Emit], None]) -> MessageStream:
        """A subgraph run streamed with ``subgraphs=True`` shares its caller's stream."""
        inherited = _ACTIVE.get() if loop.s.nested else None
        return inherited if inherited is not None else cls(put)

    # ----------------------------------------------------------------- tasks
    def runner(self, loop: RunLoop, run: Runner) -> Runner:
        """``run`` (a task runner) with this stream reaching what the task does."""
        base = _run_metadata(loop.s.config)
        tags = tuple(_user_tags(loop.s.config))

        def run_streamed(task: Task, env: StepEnv) -> Outcome:
            self._begin(loop, task, env, base, tags)
            tokens = (_ACTIVE.set(self), _HOOK.set(self.handler))
            try:
                outcome = run(task, env)
            finally:
                _HOOK.reset(tokens[1])
                _ACTIVE.reset(tokens[0])
            self._end(task, outcome)
            return outcome

        return run_streamed

    def async_runner(self, loop: RunLoop, run: AsyncRunner) -> AsyncRunner:
        base = _run_metadata(loop.s.config)
        tags = tuple(_user_tags(loop.s.config))

        async def run_streamed(task: Task, env: StepEnv) -> Outcome:
            self._begin(loop, task, env, base, tags)
            tokens = (_ACTIVE.set(self), _HOOK.set(self.handler))
            try:
                outcome = await run(task, env)
            finally:
                _HOOK.reset(tokens[1])
                _ACTIVE.reset(tokens[0])
            self._end(task, outcome)
            return outcome

        return run_streamed

    def _begin(
        self, loop: RunLoop, task: Task, env: StepEnv, base: dict[str, Any], tags: tuple[str, ...]
    ) -> None:
        assert loop.out is not None  # a run that streams messages has chunks
        info = loop.out.info[task.id]
        metadata = {
            **base,
            "ls_integration": "langgraph",
            "langgraph_step": info.step,
            "langgraph_node": task.name,
            "langgraph_triggers": info.triggers,
            "langgraph_path": info.path,
            "langgraph_checkpoint_ns": task.ns,
        }
        if loop.s.ns:  # inside a subgraph, LangGraph's metadata names the subgraph's namespace
            metadata["checkpoint_ns"] = loop.s.ns
        self.tasks[task.id] = _Running(loop.s.ns, metadata, tags)
        # Messages the node received are not news when it returns them.
        state = task.input if task.send else env.values
        for message in _messages_in(state.values() if isinstance(state, Mapping) else [state]):
            if message.id is not None:
                self.seen.add(message.id)

    def _end(self, task: Task, outcome: Outcome) -> None:
        running = self.tasks.pop(task.id)
        if outcome.result is None:
            return
        for message in _messages_in(value for _, value in outcome.result.updates):
            self.send(running, message, running.metadata, dedupe=True)

    # ----------------------------------------------------------------- sending
    def send(
        self, running: _Running, message: Any, metadata: dict[str, Any], *, dedupe: bool
    ) -> None:
        message_id = getattr(message, "id", None)
        if dedupe and message_id is not None and message_id in self.seen:
            return
        if message_id is None and dedupe:
            message_id = str(uuid.uuid4())
            try:
                message.id = message_id
            except (AttributeError, TypeError, ValueError):
                message_id = None
        if message_id is not None:
            self.seen.add(message_id)
        self.put(message_chunk(message, metadata, running.ns))

    def running_task(self) -> _Running | None:
        ctx = current_task()
        return self.tasks.get(ctx.task_id) if ctx is not None else None

    # ----------------------------------------------------------------- chat models
    def model_started(self, run_id: Any, tags: list[str] | None, metadata: Any) -> None:
        running = self.running_task()
        if running is None or (tags and NOSTREAM_TAG in tags):
            return  # not a task of a streamed run (a subgraph not streamed), or opted out
        meta = dict(running.metadata)
        ctx = current_task()
        assert ctx is not None
        meta.setdefault("checkpoint_ns", ctx.ns)
        meta.update(metadata or {})
        all_tags = [*running.tags, *(t for t in tags or () if t not in running.tags)]
        user_tags = [t for t in all_tags if not t.startswith("seq:step")]
        if user_tags:
            meta["tags"] = user_tags
        self.models[run_id] = _Running(running.ns, meta, running.tags)

    def model_token(self, run_id: Any, message: Any) -> None:
        model = self.models.get(run_id)
        if model is not None:
            self.send(model, message, model.metadata, dedupe=False)

    def model_ended(self, run_id: Any, message: Any) -> None:
        model = self.models.pop(run_id, None)
        if model is not None and message is not None:
            self.send(model, message, model.metadata, dedupe=True)

    def model_failed(self, run_id: Any) -> None:
        self.models.pop(run_id, None)


def get_message_writer() -> Callable[..., None]:
    """A function that sends a message chunk to ``stream_mode="messages"`` from inside a node.

    For models that report their own tokens (not through langchain-core callbacks)::

        def call_model(state):
            write = get_message_writer()
            for chunk in my_client.stream(prompt):
                write(chunk)  # chunks reach stream(..., stream_mode="messages")
            return {"messages": [final]}

    ``write(chunk, metadata=None)`` sends ``(chunk, task metadata + metadata)``. A chunk with an
    ``id`` marks that id as sent, so a returned message with the same id is not sent again. When
    the run does not stream messages, the function does nothing.
    """
    stream = _ACTIVE.get()
    running = stream.running_task() if stream is not None else None
    if stream is None or running is None:
        return _discard

    def write(chunk: Any, metadata: Mapping[str, Any] | None = None) -> None:
        meta = {**running.metadata, **metadata} if metadata else running.metadata
        stream.send(running, chunk, meta, dedupe=False)

    return write


def _discard(chunk: Any, metadata: Mapping[str, Any] | None = None) -> None:
    return None


def _run_metadata(config: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a task's metadata that comes from the run's config."""
    metadata = dict(config.get("metadata") or {})
    configurable = config.get("configurable") or {}
    for key in _PROPAGATED:
        value = configurable.get(key)
        if value and key not in metadata:
            metadata[key] = value
    return metadata


def _user_tags(config: Mapping[str, Any]) -> list[str]:
    return [t for t in config.get("tags") or () if isinstance(t, str)]


def _messages_in(values: Any) -> Iterator[Any]:
    """Messages among ``values``, or in the lists among them (one level, as LangGraph looks)."""
    kinds = message_classes()
    if not kinds:
        return
    for value in values:
        if isinstance(value, kinds):
            yield value
        elif isinstance(value, list | tuple):
            yield from (item for item in value if isinstance(item, kinds))


@functools.cache
def message_classes() -> tuple[type, ...]:
    """The message classes a node's output is searched for: langchain-core's and ours."""
    kinds: list[type] = []
    try:
        from langchain_core.messages import BaseMessage
    except ImportError:
        pass
    else:
        kinds.append(BaseMessage)
    try:
        from threadline.messages import BaseMessage as OwnMessage
    except ImportError:
        pass
    else:
        if OwnMessage not in kinds:
            kinds.append(OwnMessage)
    return tuple(kinds)


@functools.cache
def _handler_class() -> type | None:
    """langchain-core's callback handler for chat models, made once; None without it."""
    try:
        from langchain_core.callbacks import BaseCallbackHandler
        from langchain_core.outputs import ChatGeneration, ChatGenerationChunk
        from langchain_core.tracers.context import register_configure_hook
    except ImportError:
        return None
    try:  # a streaming handler makes invoke() stream, so tokens arrive one by one
        from langchain_core.tracers._streaming import _StreamingCallbackHandler as Streaming
    except ImportError:
        Streaming = object  # type: ignore[assignment,misc]
    register_configure_hook(_HOOK, True)

    # a base chosen at run time (private in langchain-core): mypy sees langchain-core's
    class MessagesHandler(BaseCallbackHandler, Streaming):  # type: ignore[type-arg]
        run_inline = True  # keep the order of tokens: call it where the model runs

        def __init__(self, stream: MessageStream) -> None:
            self.stream = stream

        def tap_output_iter(self, run_id: Any, output: Any) -> Any:
            return output

        def tap_output_aiter(self, run_id: Any, output: Any) -> Any:
            return output

        def on_chat_model_start(
            self, serialized: Any, messages: Any, *, run_id: Any, **kwargs: Any
        ) -> None:
            self.stream.model_started(run_id, kwargs.get("tags"), kwargs.get("metadata"))

        def on_llm_new_token(
            self, token: Any, *, chunk: Any = None, run_id: Any, **kwargs: Any
        ) -> None:
            if isinstance(chunk, ChatGenerationChunk):
                self.stream.model_token(run_id, chunk.message)

        def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
            gens = response.generations
            gen = gens[0][0] if gens and gens[0] else None
            message = gen.message if isinstance(gen, ChatGeneration) else None
            self.stream.model_ended(run_id, message)

        def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
            self.stream.model_failed(run_id)

    return MessagesHandler
