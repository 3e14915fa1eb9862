"""Turning message-like values into light messages, as langchain-core's ``convert_to_messages``.

A message stays as it is; a str is a human message; a ``(role, content)`` pair or a dict with
``role`` (or ``type``) and ``content`` becomes the message of that role, its other keys passed
as fields. Used only when langchain-core is not installed (it then does this itself).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from threadline.messages.light import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    BaseMessageChunk,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

_ROLES: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "user": HumanMessage,
    "ai": AIMessage,
    "assistant": AIMessage,
    "system": SystemMessage,
    "developer": SystemMessage,
    "tool": ToolMessage,
    "remove": RemoveMessage,
}
# Class names of langchain-core's serialized form ({"lc": 1, "type": "constructor", ...}).
_CONSTRUCTOR_ROLES = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "AIMessageChunk": "ai",
    "SystemMessage": "system",
    "ToolMessage": "tool",
    "RemoveMessage": "remove",
}


def convert_to_messages(values: Iterable[Any]) -> list[BaseMessage]:
    return [_to_message(value) for value in values]


def message_chunk_to_message(message: BaseMessage) -> BaseMessage:
    """A chunk as the complete message it is part of; other messages unchanged."""
    if not isinstance(message, BaseMessageChunk):
        return message
    skip = {"type", "tool_call_chunks", "chunk_position"}
    fields = {k: v for k, v in vars(message).items() if k not in skip}
    cls: type[BaseMessage] = (
        AIMessage if isinstance(message, AIMessageChunk) else type(message).__mro__[1]
    )
    return cls(**fields)


def _to_message(value: Any) -> BaseMessage:
    if isinstance(value, BaseMessage):
        return value
    if isinstance(value, str):
        return HumanMessage(value)
    if isinstance(value, Sequence):
        try:
            role, content = value
        except ValueError:
            raise NotImplementedError(
                "Message as a sequence must be (role string, template)"
            ) from None
        return _from_role(role, content, {})
    if isinstance(value, dict):
        return _from_dict(value)
    raise NotImplementedError(f"Unsupported message type: {type(value)}")


def _from_dict(value: dict[str, Any]) -> BaseMessage:
    if (
        value.get("lc") == 1
        and value.get("type") == "constructor"
        and isinstance(value.get("id"), list)
        and value["id"]
        and isinstance(value.get("kwargs"), dict)
        and value["id"][-1] in _CONSTRUCTOR_ROLES
    ):
        return _from_dict({"type": _CONSTRUCTOR_ROLES[value["id"][-1]], **value["kwargs"]})
    fields = dict(value)
    try:
        role = fields.pop("role") if "role" in fields else fields.pop("type")
        content = fields.pop("content") or ""
    except KeyError:
        raise ValueError(
            f"Message dict must contain 'role' and 'content' keys, got {value}"
        ) from None
    return _from_role(role, content, fields)


def _from_role(role: Any, content: Any, fields: dict[str, Any]) -> BaseMessage:
    cls = _ROLES.get(role) if isinstance(role, str) else None
    if cls is None:
        raise ValueError(
            f"Unexpected message type: '{role}'. Use one of 'human', 'user', 'ai', 'assistant', "
            "'tool', 'system', or 'developer' ('function' messages need langchain-core)."
        )
    kwargs: dict[str, Any] = {}
    for key in ("name", "tool_call_id", "id"):
        if fields.get(key) is not None:
            kwargs[key] = fields.pop(key)
    if fields.get("tool_calls") is not None:
        kwargs["tool_calls"] = [_tool_call(call) for call in fields.pop("tool_calls")]
    fields.pop("tool_calls", None)
    if fields:  # the rest is metadata, as langchain-core files it
        metadata = fields.pop("response_metadata", None)
        if metadata:
            kwargs["response_metadata"] = metadata
        fields.update(fields.pop("additional_kwargs", {}))
        kwargs["additional_kwargs"] = fields
    if role == "developer":
        kwargs["additional_kwargs"] = {
            **kwargs.get("additional_kwargs", {}),
            "__openai_role__": "developer",
        }
    if cls is ToolMessage:
        extra = kwargs.get("additional_kwargs", {})
        kwargs["artifact"] = extra.pop("artifact", None)
        if extra.get("status") is not None:
            kwargs["status"] = extra.pop("status")
    if cls is RemoveMessage:
        return RemoveMessage(**kwargs)
    return cls(content, **kwargs)


def _tool_call(call: dict[str, Any]) -> dict[str, Any]:
    """A LangChain tool call from one in OpenAI's format (``{"function": {...}}``) or as is."""
    if "function" not in call:
        return call
    args = call["function"]["arguments"]
    if isinstance(args, str):
        args = json.loads(args, strict=False)
    return {"name": call["function"]["name"], "args": args, "id": call["id"], "type": "tool_call"}
