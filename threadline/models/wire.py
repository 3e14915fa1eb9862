"""The chat-completions wire format: our messages to its JSON, its replies to our messages.

Tool calls are ``{"name", "args", "id"}`` on our side and ``{"id", "type": "function",
"function": {"name", "arguments": "<JSON text>"}}`` on the wire. Arguments that are not a JSON
object become ``invalid_tool_calls``, as in langchain-core.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol, cast

from threadline.errors import ModelResponseError
from threadline.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from threadline.models.protocol import text_of

_ROLES = {"system": "system", "human": "user", "ai": "assistant", "AIMessageChunk": "assistant"}


class _ChatMessage(Protocol):
    """langchain-core's ``ChatMessage`` (type ``chat``): a message that carries its own role."""

    role: str
    content: Any


def wire_messages(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    return [_wire_message(message) for message in messages]


def _wire_message(message: BaseMessage) -> dict[str, Any]:
    kind = message.type
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": text_of(message)}
    if kind == "chat":
        chat = cast(_ChatMessage, message)
        return {"role": chat.role, "content": chat.content}
    role = _ROLES.get(kind)
    if role is None:
        raise ValueError(f"cannot send a {type(message).__name__} to a chat-completions server")
    wired: dict[str, Any] = {"role": role, "content": message.content}
    if message.name:
        wired["name"] = message.name
    if role == "assistant" and isinstance(message, AIMessage):
        wired["content"] = text_of(message)
        calls = [_wire_call(c["id"], c["name"], json.dumps(c["args"])) for c in message.tool_calls]
        calls += [_wire_call(c["id"], c["name"], c["args"]) for c in message.invalid_tool_calls]
        if calls:
            wired["tool_calls"] = calls
            wired["content"] = wired["content"] or None
    return wired


def _wire_call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def message_from_reply(body: Any) -> AIMessage:
    """The ``AIMessage`` of a (non-streamed) chat-completions reply body."""
    choice = _first_choice(body)
    wired = choice.get("message")
    if not isinstance(wired, dict):
        raise ModelResponseError(f"the reply's first choice has no message: {_short(body)}")
    calls, invalid = _tool_calls(wired.get("tool_calls") or [])
    fields: dict[str, Any] = {
        "content": wired.get("content") or "",
        "tool_calls": calls,
        "invalid_tool_calls": invalid,
        "id": body.get("id"),
        "response_metadata": _metadata(body, choice),
    }
    if wired.get("refusal"):
        fields["additional_kwargs"] = {"refusal": wired["refusal"]}
    usage = usage_of(body)
    if usage is not None:
        fields["usage_metadata"] = usage
    return AIMessage(**fields)


def chunk_from_event(event: Any) -> AIMessageChunk:
    """The ``AIMessageChunk`` of one streamed chat-completions event."""
    if not isinstance(event, dict):
        raise ModelResponseError(f"a streamed event is not a JSON object: {_short(event)}")
    if "error" in event:
        raise ModelResponseError(f"the server reported an error mid-stream: {_short(event)}")
    choices = event.get("choices") or []
    choice = choices[0] if choices and isinstance(choices[0], dict) else {}
    delta = choice.get("delta") or {}
    fields: dict[str, Any] = {"content": delta.get("content") or "", "id": event.get("id")}
    chunks = [_call_chunk(piece) for piece in delta.get("tool_calls") or []]
    if chunks:
        fields["tool_call_chunks"] = chunks
    if choice.get("finish_reason"):
        fields["response_metadata"] = _metadata(event, choice)
    usage = usage_of(event)
    if usage is not None:
        fields["usage_metadata"] = usage
    return AIMessageChunk(**fields)


def _call_chunk(piece: Any) -> dict[str, Any]:
    function = piece.get("function") or {}
    return {
        "name": function.get("name"),
        "args": function.get("arguments"),
        "id": piece.get("id"),
        "index": piece.get("index"),
    }


def _first_choice(body: Any) -> dict[str, Any]:
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise ModelResponseError(f"the reply has no choices: {_short(body)}")
    return choices[0]


def _tool_calls(wired: list[Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    invalid: list[dict[str, Any]] = []
    for call in wired:
        function = call.get("function") or {}
        name, raw, call_id = function.get("name"), function.get("arguments") or "{}", call.get("id")
        error: str | None
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError as exc:
            args, error = None, f"arguments are not valid JSON: {exc}"
        else:
            error = None if isinstance(args, dict) else "arguments are not a JSON object"
        if error is None:
            calls.append({"name": name, "args": args, "id": call_id})
        else:
            text = raw if isinstance(raw, str) else json.dumps(raw)
            invalid.append({"name": name, "args": text, "id": call_id, "error": error})
    return calls, invalid


def _metadata(body: dict[str, Any], choice: dict[str, Any]) -> dict[str, Any]:
    metadata = {"model_name": body.get("model"), "finish_reason": choice.get("finish_reason")}
    if body.get("system_fingerprint"):
        metadata["system_fingerprint"] = body["system_fingerprint"]
    return metadata


def usage_of(body: dict[str, Any]) -> dict[str, int] | None:
    """Token counts in langchain-core's ``usage_metadata`` shape."""
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    total = int(usage.get("total_tokens") or prompt + completion)
    return {"input_tokens": prompt, "output_tokens": completion, "total_tokens": total}


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 300 else text[:300] + "..."
