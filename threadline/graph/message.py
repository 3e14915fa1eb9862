"""LangGraph's ``langgraph.graph.message`` names: ``add_messages``, ``MessagesState``,
``REMOVE_ALL_MESSAGES`` (defined in ``threadline.messages``) and ``push_message``."""

from __future__ import annotations

from typing import Any

from threadline.messages import convert_to_messages
from threadline.messages.reducer import REMOVE_ALL_MESSAGES, MessagesState, add_messages
from threadline.runtime.context import current_task
from threadline.runtime.tokens import get_message_writer


def push_message(message: Any, *, state_key: str | None = "messages") -> Any:
    """Send ``message`` to ``stream_mode="messages"`` now, before the node returns, and (unless
    ``state_key`` is ``None``) write it to that state key, as if the node had returned it.

    The message needs an ``id``: the node returning it too then updates it in place rather
    than adding it twice, and the messages stream does not send it again.
    """
    ctx = current_task()
    if ctx is None:
        raise RuntimeError("push_message() can only be called inside a running node")
    converted = convert_to_messages([message])[0]
    if converted.id is None:
        raise ValueError("push_message needs a message with an id (Message ID is required)")
    get_message_writer()(converted)
    if state_key:
        ctx.push(state_key, converted)
    return converted


__all__ = ["REMOVE_ALL_MESSAGES", "MessagesState", "add_messages", "push_message"]
