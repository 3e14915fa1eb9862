"""Which message classes this process uses: langchain-core's when it is installed, else ours.

Decided once, on first import, so that every message threadline makes, converts or loads is of
one family, and ``isinstance`` checks in user code hold whichever is installed.
"""

from __future__ import annotations

try:
    from langchain_core.messages import (
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
except ImportError:
    # The light classes mirror langchain-core's API; mypy checks callers against langchain-core's.
    from threadline.messages._convert import (  # type: ignore[assignment]
        convert_to_messages,
        message_chunk_to_message,
    )
    from threadline.messages.light import (  # type: ignore[assignment]
        AIMessage,
        AIMessageChunk,
        AnyMessage,
        BaseMessage,
        BaseMessageChunk,
        HumanMessage,
        RemoveMessage,
        SystemMessage,
        ToolMessage,
    )

    USES_LANGCHAIN = False
else:
    USES_LANGCHAIN = True

__all__ = [
    "USES_LANGCHAIN",
    "AIMessage",
    "AIMessageChunk",
    "AnyMessage",
    "BaseMessage",
    "BaseMessageChunk",
    "HumanMessage",
    "RemoveMessage",
    "SystemMessage",
    "ToolMessage",
    "convert_to_messages",
    "message_chunk_to_message",
]
