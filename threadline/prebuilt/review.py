"""The review step of ``create_agent(..., review={tool: decisions})``: one interrupt for all the
calls of a model turn that need a person's decision, before any of them runs.

A decision changes the conversation, never a tool: ``accept`` leaves the call as it is,
``edit`` replaces its arguments in the assistant message (same call id), ``respond`` answers the
call with the person's text, ``reject`` answers it with a rejection. The calls left without an
answer then run in the tools node; the others never run.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from threadline.errors import GraphValidationError
from threadline.hitl.review_answers import DECISION_TYPES, DecisionType
from threadline.messages import AIMessage, BaseMessage, ToolMessage

Rules = Mapping[str, tuple[DecisionType, ...]]  # reviewed tool -> the decisions it allows


def review_rules(
    review: Mapping[str, Any] | None, tool_names: Sequence[str]
) -> dict[str, tuple[DecisionType, ...]]:
    """``review`` checked: each reviewed tool exists and allows a non-empty set of decisions
    (``True`` allows them all, ``False`` none)."""
    rules: dict[str, tuple[DecisionType, ...]] = {}
    for name, allowed in (review or {}).items():
        if name not in tool_names:
            raise GraphValidationError(
                f"review names the tool {name!r}, which is not among the agent's tools "
                f"({', '.join(tool_names) or 'none'})"
            )
        if allowed is False:
            continue
        chosen = DECISION_TYPES if allowed is True else tuple(allowed)
        unknown = [d for d in chosen if d not in DECISION_TYPES]
        if unknown or not chosen or isinstance(allowed, str):
            raise GraphValidationError(
                f"review[{name!r}] must be True or a list of decisions among "
                f"{', '.join(DECISION_TYPES)}; got {allowed!r}"
            )
        rules[name] = chosen
    return rules


def edit_schema(tool: Any) -> dict[str, Any] | None:
    """The JSON Schema an edit of ``tool``'s call is checked against: its arguments, and no
    others unless the tool takes any (a function with ``**kwargs``), as ``human_review``
    checks them; None without pydantic (the tool then checks the call when it runs)."""
    schema = tool.args_schema()
    if schema is None or "additionalProperties" in schema or _takes_any(tool):
        return schema  # type: ignore[no-any-return]
    return {**schema, "additionalProperties": False}


def _takes_any(tool: Any) -> bool:
    fn = getattr(tool, "fn", None)
    if fn is None:
        return False
    return any(p.kind is p.VAR_KEYWORD for p in inspect.signature(fn).parameters.values())


def needs_review(message: BaseMessage, rules: Rules) -> bool:
    return any(call["name"] in rules for call in getattr(message, "tool_calls", ()))


def make_review_node(
    rules: Rules, schemas: Mapping[str, Any], messages_key: str = "messages"
) -> Any:
    """The node asking for decisions on the last assistant message's reviewed calls;
    ``schemas`` (tool name to JSON Schema of its arguments) checks edited arguments."""
    from threadline.hitl import ActionRequest, request_review

    def review(state: Any) -> dict[str, Any]:
        message = _last_ai(state[messages_key])
        reviewed = [c for c in message.tool_calls if c["name"] in rules]
        actions = [
            ActionRequest(
                name=c["name"],
                args=dict(c["args"]),
                description=_description(c),
                allowed=rules[c["name"]],
                args_schema=schemas.get(c["name"]),
            )
            for c in reviewed
        ]
        decisions = request_review(actions)
        return {messages_key: apply_decisions(message, reviewed, decisions)}

    return review


def apply_decisions(
    message: AIMessage, reviewed: Sequence[Mapping[str, Any]], decisions: Sequence[Any]
) -> list[BaseMessage]:
    """The messages update the decisions make: the assistant message with edited arguments (if
    any were edited), then an answer for each responded or rejected call."""
    edited = {c["id"]: d.args for c, d in zip(reviewed, decisions, strict=True) if d.type == "edit"}
    update: list[BaseMessage] = []
    if edited:
        calls = [
            {**c, "args": dict(edited[c["id"]])} if c["id"] in edited else c
            for c in message.tool_calls
        ]
        update.append(message.model_copy(update={"tool_calls": calls}))
    for call, decision in zip(reviewed, decisions, strict=True):
        if decision.type in ("respond", "reject"):
            update.append(_answer(call, decision, message.id))
    return update


def _answer(call: Mapping[str, Any], decision: Any, asked_in: str | None) -> ToolMessage:
    """A responded or rejected call's result, in LangChain v1's words."""
    if decision.type == "respond":
        content, status = decision.message or "", "success"
    elif decision.message:
        content = (
            f"User rejected the tool call for `{call['name']}` with reason: {decision.message}"
        )
        status = "error"
    else:
        content = (
            f"User rejected the tool call for `{call['name']}` with id {call['id']}. The tool was "
            "not executed. Do not retry this tool call unless the user explicitly requests it."
        )
        status = "error"
    return ToolMessage(
        content,
        name=call["name"],
        tool_call_id=call["id"],
        status=status,
        id=f"review-{asked_in}-{call['id']}",
    )


def _description(call: Mapping[str, Any]) -> str:
    return f"Tool execution requires approval\n\nTool: {call['name']}\nArgs: {call['args']}"


def _last_ai(messages: Sequence[BaseMessage]) -> AIMessage:
    for message in reversed(messages):
        if isinstance(message, AIMessage):
            return message
    raise ValueError("the review step found no assistant message to review")
