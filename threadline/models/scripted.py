"""A chat model that plays back a script: for tests and demos that must not need a server.

Each call takes the next reply. A reply is a str (the answer's text), an ``AIMessage``, a dict
of ``AIMessage`` fields (``{"content": "", "tool_calls": [{"name": ..., "args": {...}}]}``), or
an exception, which the call raises. Replies get fresh ids (and tool calls fresh ids when the
script gives none), so a script replayed in another process never repeats a message id.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadline.errors import ScriptExhaustedError
from threadline.messages import AIMessage, AIMessageChunk, BaseMessage
from threadline.models.protocol import ModelInput, to_messages
from threadline.models.report import token_writer
from threadline.models.structured import StructuredChatModel
from threadline.models.tools import tool_choice as choice_of
from threadline.models.tools import tool_spec

if TYPE_CHECKING:
    from langchain_core.messages import ToolCallChunk

Reply = str | AIMessage | dict[str, Any] | BaseException
_WORDS = re.compile(r"\s*\S+\s*|\s+")


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One call a scripted model answered: what it was sent and what it said."""

    messages: list[BaseMessage]
    kwargs: dict[str, Any]
    reply: AIMessage | BaseException


@dataclass(slots=True)
class _Script:
    replies: list[Reply]
    calls: list[ModelCall] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ScriptedChatModel:
    """Answers each call with the next reply of its script; records every call in ``calls``.

    ``bind_tools`` records the tools (``tools``, ``tool_choice``) and returns the model itself,
    so a script shared by an agent and a test stays one script. ``stream`` sends the reply's
    text word by word, its tool calls in the last chunk.
    """

    def __init__(self, replies: Iterable[Reply]) -> None:
        self._script = _Script([_checked(reply, n) for n, reply in enumerate(replies, 1)])
        self.tools: list[Any] = []
        self.tool_choice: Any = None
        self._bound: dict[str, Any] = {}

    @property
    def calls(self) -> list[ModelCall]:
        return self._script.calls

    @property
    def remaining(self) -> int:
        """How many replies are left."""
        return len(self._script.replies) - len(self._script.calls)

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> ScriptedChatModel:
        specs = [tool_spec(tool) for tool in tools]  # bad tools fail here, as with a real model
        self.tools = list(tools)
        self.tool_choice = choice_of(tool_choice, specs) if tool_choice is not None else None
        self._bound = {"tools": specs, **kwargs}
        if self.tool_choice is not None:
            self._bound["tool_choice"] = self.tool_choice
        return self

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, strict: bool | None = None
    ) -> StructuredChatModel:
        """Replies parsed into ``schema``: script them as JSON text."""
        return StructuredChatModel(self, schema, include_raw=include_raw, strict=strict)

    # ------------------------------------------------------------------ calls
    def invoke(self, input: ModelInput, **kwargs: Any) -> AIMessage:
        message = self._next(input, kwargs)
        write = token_writer()
        if write is not None:
            for chunk in chunks_of(message):
                write(chunk)
        return message

    async def ainvoke(self, input: ModelInput, **kwargs: Any) -> AIMessage:
        return self.invoke(input, **kwargs)

    def stream(self, input: ModelInput, **kwargs: Any) -> Iterator[AIMessageChunk]:
        yield from chunks_of(self._next(input, kwargs))

    async def astream(self, input: ModelInput, **kwargs: Any) -> AsyncIterator[AIMessageChunk]:
        for chunk in chunks_of(self._next(input, kwargs)):
            yield chunk

    def _next(self, input: ModelInput, kwargs: dict[str, Any]) -> AIMessage:
        messages = to_messages(input)
        script = self._script
        with script.lock:
            n = len(script.calls)
            if n >= len(script.replies):
                last = messages[-1].content if messages else None
                raise ScriptExhaustedError(
                    f"ScriptedChatModel has {len(script.replies)} replies and all were used; "
                    f"call {n + 1} was sent {len(messages)} message(s), the last {last!r}. "
                    "Add replies to the script."
                )
            reply = _made(script.replies[n])
            script.calls.append(ModelCall(messages, {**self._bound, **kwargs}, reply))
        if isinstance(reply, BaseException):
            raise reply
        return reply


def chunks_of(message: AIMessage) -> Iterator[AIMessageChunk]:
    """``message`` as a stream: its text word by word, tool calls and metadata in the last."""
    content = message.content
    pieces: list[Any] = _WORDS.findall(content) if isinstance(content, str) else [content]
    pieces = pieces or [""]
    calls: list[ToolCallChunk] = [
        {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
        for i, c in enumerate(message.tool_calls)
    ]
    for n, piece in enumerate(pieces, 1):
        if n < len(pieces):
            yield AIMessageChunk(content=piece, id=message.id)
            continue
        yield AIMessageChunk(
            content=piece,
            id=message.id,
            tool_call_chunks=calls,
            response_metadata=message.response_metadata,
            usage_metadata=message.usage_metadata,
        )


def _checked(reply: Any, n: int) -> Reply:
    """``reply`` if it is a valid script entry; a clear error naming entry ``n`` if not."""
    if isinstance(reply, str | AIMessage | BaseException):
        return reply
    if not isinstance(reply, dict):
        raise TypeError(
            f"script reply {n} is a {type(reply).__name__}; give a str, an AIMessage, a dict "
            "of AIMessage fields or an exception"
        )
    for call in reply.get("tool_calls") or ():
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            raise ValueError(f"script reply {n}: each tool call needs a 'name', got {call!r}")
        if not isinstance(call.get("args", {}), dict):
            raise ValueError(f"script reply {n}: tool call {call['name']!r} args must be a dict")
    return reply


def _made(reply: Reply) -> AIMessage | BaseException:
    """The message a script entry stands for, with fresh ids where the script gives none."""
    if isinstance(reply, BaseException):
        return reply
    if isinstance(reply, str):
        return AIMessage(content=reply, id=_new_id())
    if isinstance(reply, AIMessage):
        return reply if reply.id else reply.model_copy(update={"id": _new_id()})
    calls = [
        {"name": c["name"], "args": dict(c.get("args", {})), "id": c.get("id") or _call_id()}
        for c in reply.get("tool_calls") or ()
    ]
    fields = {"content": "", **reply, "tool_calls": calls}
    fields["id"] = fields.get("id") or _new_id()
    return AIMessage(**fields)


def _new_id() -> str:
    return f"scripted-{uuid.uuid4()}"


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
