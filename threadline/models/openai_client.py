"""``OpenAIChatModel``: a chat model on any server speaking OpenAI's chat-completions API.

OpenAI itself, vLLM, Ollama, llama.cpp's server, LM Studio, ... differ only in ``base_url``,
``model`` and whether they want an API key.
"""

from __future__ import annotations

import copy
import functools
import operator
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any, cast

from threadline.errors import ModelResponseError
from threadline.messages import AIMessage, AIMessageChunk, message_chunk_to_message
from threadline.models import transport, wire
from threadline.models.protocol import ModelInput, to_messages
from threadline.models.report import token_writer
from threadline.models.structured import StructuredChatModel
from threadline.models.tools import tool_choice as choice_of
from threadline.models.tools import tool_spec

if TYPE_CHECKING:
    import httpx

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RESERVED = frozenset({"messages", "stream", "stream_options"})


class OpenAIChatModel:
    """A chat-completions client (sync and async) that is a threadline ``ChatModel``.

    ``base_url`` defaults to ``OPENAI_BASE_URL`` or OpenAI's; ``api_key`` to ``OPENAI_API_KEY``
    (none is sent when neither is set, as local servers want). ``timeout`` is in seconds (or an
    ``httpx.Timeout``); failed requests are retried ``max_retries`` times (see
    ``threadline.models.transport``). Other keyword arguments (``temperature``, ``max_tokens``, ...)
    are sent with every request, and those of a call with that request.

    Inside a graph run streamed with ``stream_mode="messages"``, ``invoke`` streams the reply so
    its tokens reach the stream as they come.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = 120.0,
        max_retries: int = 2,
        stream_usage: bool = True,
        headers: dict[str, str] | None = None,
        **params: Any,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError("OpenAIChatModel needs a model name, e.g. model='gpt-4o-mini'")
        if not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
        self.model = model
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = self.base_url.rstrip("/")
        self.stream_usage = stream_usage
        self.params = params
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        sent = {"User-Agent": "threadline", **(headers or {})}
        if key:
            sent["Authorization"] = f"Bearer {key}"
        self._endpoint = transport.Endpoint(
            url=self.base_url + "/chat/completions",
            headers=sent,
            timeout=transport.timeout_of(timeout),
            max_retries=max_retries,
        )

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ binding
    def bind(self, **params: Any) -> OpenAIChatModel:
        """A copy sending ``params`` with every request too."""
        bound = copy.copy(self)
        bound.params = {**self.params, **params}
        return bound

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **params: Any
    ) -> OpenAIChatModel:
        """A copy offering ``tools`` (functions, langchain-core tools, pydantic models, dicts)."""
        specs = [tool_spec(tool) for tool in tools]
        if tool_choice is not None:
            params["tool_choice"] = choice_of(tool_choice, specs)
        return self.bind(tools=specs, **params)

    def with_structured_output(
        self, schema: Any, *, include_raw: bool = False, strict: bool | None = None
    ) -> StructuredChatModel:
        """A model whose answers are parsed into ``schema`` (sent as ``response_format``)."""
        return StructuredChatModel(self, schema, include_raw=include_raw, strict=strict)

    # ------------------------------------------------------------------ calls
    def invoke(self, input: ModelInput, **params: Any) -> AIMessage:
        write = token_writer()
        if write is not None:
            return _joined(self.stream(input, **params), write)
        return wire.message_from_reply(
            transport.post_json(self._endpoint, self._body(input, params))
        )

    async def ainvoke(self, input: ModelInput, **params: Any) -> AIMessage:
        write = token_writer()
        if write is not None:
            chunks = []
            async for chunk in self.astream(input, **params):
                write(chunk)
                chunks.append(chunk)
            return _message(chunks)
        body = self._body(input, params)
        return wire.message_from_reply(await transport.apost_json(self._endpoint, body))

    def stream(self, input: ModelInput, **params: Any) -> Iterator[AIMessageChunk]:
        body = self._body(input, params, stream=True)
        for event in transport.post_events(self._endpoint, body):
            yield wire.chunk_from_event(event)

    async def astream(self, input: ModelInput, **params: Any) -> AsyncIterator[AIMessageChunk]:
        body = self._body(input, params, stream=True)
        async for event in transport.apost_events(self._endpoint, body):
            yield wire.chunk_from_event(event)

    def _body(
        self, input: ModelInput, params: dict[str, Any], stream: bool = False
    ) -> dict[str, Any]:
        reserved = sorted(_RESERVED.intersection(self.params.keys() | params.keys()))
        if reserved:
            raise TypeError(
                f"{reserved[0]!r} is set by the call itself: use stream()/astream() for a "
                "stream, and pass the messages as the first argument"
            )
        body = {
            "model": self.model,
            "messages": wire.wire_messages(to_messages(input)),
            **self.params,
            **params,
        }
        if stream:
            body["stream"] = True
            if self.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body


def _joined(chunks: Iterator[AIMessageChunk], write: Any) -> AIMessage:
    received = []
    for chunk in chunks:
        write(chunk)
        received.append(chunk)
    return _message(received)


def _message(chunks: list[AIMessageChunk]) -> AIMessage:
    """The whole message a stream's chunks make."""
    if not chunks:
        raise ModelResponseError("the model's stream ended without sending anything")
    joined = message_chunk_to_message(functools.reduce(operator.add, chunks))
    return cast(AIMessage, joined)  # the message of AIMessageChunks is an AIMessage
