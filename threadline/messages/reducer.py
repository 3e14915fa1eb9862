"""``add_messages``: the reducer of a conversation, with LangGraph's semantics, and
``MessagesState``, the state with one such key.

An update appends messages, except that a message whose id is already in the list replaces it
in place and a ``RemoveMessage(id=...)`` deletes it. ``RemoveMessage(id=REMOVE_ALL_MESSAGES)``
drops everything before it. Message-like values (a str, a ``(role, content)`` pair, a dict with
``role`` and ``content``, a chunk) become messages, and messages without an id get a uuid4 one.
"""

from __future__ import annotations

import functools
import uuid
from typing import Annotated, Any, Literal, TypedDict

from threadline.errors import InvalidMessageError
from threadline.messages import _backend
from threadline.messages._backend import AnyMessage

REMOVE_ALL_MESSAGES = "__remove_all__"
_FORMATS = (None, "langchain-openai")

Messages = list[Any] | Any


def add_messages(
    left: Messages | None = None,
    right: Messages | None = None,
    *,
    format: Literal["langchain-openai"] | None = None,
) -> Any:
    """Merge ``right`` (a list of messages, or one) into ``left``; return a new list.

    Called with neither list, returns the reducer with ``format`` fixed:
    ``Annotated[list, add_messages(format="langchain-openai")]`` stores contents in OpenAI's
    shape (needs langchain-core, which does the conversion).
    """
    _check_format(format)
    if left is None and right is None:
        return functools.partial(add_messages, format=format)
    if left is None or right is None:
        given = "left" if left is not None else "right"
        raise InvalidMessageError(
            "Must specify non-null arguments for both 'left' and 'right'. "
            f"Only received: '{given}'."
        )
    merged = _merge(_messages(left), _messages(right))
    return _openai_format(merged) if format else merged


def _messages(value: Messages) -> list[Any]:
    """``value`` as a list of complete messages, each with an id (set in place if missing)."""
    items = value if isinstance(value, list) else [value]
    messages = [_backend.message_chunk_to_message(m) for m in _backend.convert_to_messages(items)]
    for message in messages:
        if message.id is None:
            message.id = str(uuid.uuid4())
    return messages


def _merge(left: list[Any], right: list[Any]) -> list[Any]:
    remove = _backend.RemoveMessage
    for last in range(len(right) - 1, -1, -1):
        if isinstance(right[last], remove) and right[last].id == REMOVE_ALL_MESSAGES:
            return right[last + 1 :]  # as LangGraph: what follows the last one, taken as is
    merged = list(left)
    position = {m.id: i for i, m in enumerate(merged)}
    removed: set[str | None] = set()
    for message in right:
        at = position.get(message.id)
        if at is not None and isinstance(message, remove):
            removed.add(message.id)
        elif at is not None:
            removed.discard(message.id)
            merged[at] = message
        elif isinstance(message, remove):
            raise InvalidMessageError(
                f"Attempting to delete a message with an ID that doesn't exist ('{message.id}')"
            )
        else:
            position[message.id] = len(merged)
            merged.append(message)
    return [m for m in merged if m.id not in removed] if removed else merged


def _check_format(format: Any) -> None:
    if format not in _FORMATS:
        raise InvalidMessageError(
            f"Unrecognized format={format!r}. Expected one of 'langchain-openai', None."
        )
    if format and not _backend.USES_LANGCHAIN:
        raise InvalidMessageError(
            "add_messages(format='langchain-openai') converts messages with langchain-core, "
            "which is not installed: pip install 'threadline[langchain]'"
        )


def _openai_format(messages: list[Any]) -> list[Any]:
    from langchain_core.messages import convert_to_openai_messages

    return _backend.convert_to_messages(convert_to_openai_messages(messages))


class MessagesState(TypedDict):
    """A state holding one conversation; subclass it to add keys."""

    messages: Annotated[list[AnyMessage], add_messages]
