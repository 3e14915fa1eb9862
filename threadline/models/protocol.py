"""What threadline expects of a chat model, and turning a node's input into messages.

``ChatModel`` is structural: langchain-core chat models (``ChatOpenAI``, ``ChatAnthropic``,
``ChatOllama``, ...) already have these methods and are accepted as they are, and so are
threadline's own ``ScriptedChatModel`` and ``OpenAIChatModel``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Protocol, cast, runtime_checkable

from threadline.messages import AIMessage, AIMessageChunk, BaseMessage, convert_to_messages

ModelInput = str | BaseMessage | Sequence[Any]
"""What a model is called with: a str (one human message), a message, or a list of messages
and message-likes (``("user", "hi")``, ``{"role": "user", "content": "hi"}``)."""

_METHODS = ("invoke", "ainvoke", "stream", "astream", "bind_tools")


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: messages in, an ``AIMessage`` (maybe asking for tools) out.

    Keyword arguments of the calls are the model's own request options (``temperature``,
    ``max_tokens``, ``stop``, ...).
    """

    def invoke(self, input: ModelInput, **kwargs: Any) -> AIMessage: ...

    async def ainvoke(self, input: ModelInput, **kwargs: Any) -> AIMessage: ...

    def stream(self, input: ModelInput, **kwargs: Any) -> Iterator[AIMessageChunk]: ...

    def astream(self, input: ModelInput, **kwargs: Any) -> AsyncIterator[AIMessageChunk]: ...

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Any:
        """The same model, offering ``tools`` on every call."""
        ...


def as_chat_model(model: Any) -> ChatModel:
    """``model`` itself when it is a chat model (ours or langchain-core's); a clear error if not.

    For code that takes a model argument and wants to fail at set-up, not at the first call.
    """
    missing = [name for name in _METHODS if not callable(getattr(model, name, None))]
    if missing:
        raise TypeError(
            f"expected a chat model (with {', '.join(_METHODS)}), got {type(model).__name__} "
            f"without {', '.join(missing)}; use ScriptedChatModel, OpenAIChatModel or a "
            "langchain-core chat model"
        )
    return cast(ChatModel, model)  # it has every method the protocol names


def to_messages(input: ModelInput) -> list[BaseMessage]:
    """The messages a model call is about, from whatever form the caller gave them in."""
    if isinstance(input, str | BaseMessage):
        return convert_to_messages([input])
    to_list = getattr(input, "to_messages", None)  # a langchain-core prompt value
    if callable(to_list):
        return list(to_list())
    if isinstance(input, Sequence):
        return convert_to_messages(list(input))
    raise TypeError(
        f"a chat model takes a str, a message or a list of messages, not {type(input).__name__}"
    )


def text_of(message: BaseMessage) -> str:
    """The text of a message's content (its text blocks joined when it is a list)."""
    text = message.text
    return str(text if isinstance(text, str) else text())  # a method in langchain-core 0.3
