"""Chat messages and the ``add_messages`` reducer, as LangGraph users know them.

With langchain-core installed, the message classes here *are* langchain-core's
(``threadline.messages.HumanMessage is langchain_core.messages.HumanMessage``), exactly as in
LangGraph, so chat models, tools and prompts work with them. Without it, they are threadline's
own light classes with the same names, attributes and constructors. Either way messages are
stored by every saver with no ``serde.register`` call, and load as this process's classes.
"""

from threadline.messages._backend import (
    USES_LANGCHAIN,
    AIMessage,
    AIMessageChunk,
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from threadline.messages.reducer import REMOVE_ALL_MESSAGES, MessagesState, add_messages

__all__ = [
    "REMOVE_ALL_MESSAGES",
    "USES_LANGCHAIN",
    "AIMessage",
    "AIMessageChunk",
    "AnyMessage",
    "BaseMessage",
    "BaseMessageChunk",
    "HumanMessage",
    "MessagesState",
    "RemoveMessage",
    "SystemMessage",
    "ToolMessage",
    "add_messages",
    "convert_to_messages",
    "message_chunk_to_message",
]
