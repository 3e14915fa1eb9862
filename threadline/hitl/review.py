"""Asking a person to review actions: ``request_review`` and its request and decision types.

The request an interrupt carries is LangChain's HumanInTheLoopMiddleware shape,
``{"action_requests": [{"name", "args", "description"}], "review_configs": [{"action_name",
"allowed_decisions", "args_schema"}]}``, with threadline's decision names (``accept``,
``edit``, ``respond``, ``reject``); answers in LangChain's or Agent Inbox's names are accepted
too (see ``review_answers``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from threadline.hitl.inbox import inbox_request
from threadline.hitl.review_answers import DECISION_TYPES, REVIEW_MARK
from threadline.hitl.review_answers import DecisionType as DecisionType
from threadline.hitl.validation import check_supported
from threadline.runtime.context import interrupt

RequestShape = Literal["threadline", "agent-inbox"]


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """An action waiting for review: what would run (``name`` with ``args``), why
    (``description``), and which decisions the reviewer may make.

    ``args_schema`` (a JSON Schema of the arguments) is shown to the reviewer and checks edited
    arguments at resume; ``human_review`` fills it from the tool.
    """

    name: str
    args: dict[str, Any]
    description: str | None = None
    allowed: tuple[DecisionType, ...] = DECISION_TYPES
    args_schema: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError(f"ActionRequest.name must be a non-empty str, got {self.name!r}")
        if not isinstance(self.args, dict):
            raise TypeError(f"ActionRequest.args must be a dict, got {self.args!r}")
        allowed = (self.allowed,) if isinstance(self.allowed, str) else tuple(self.allowed)
        unknown = [kind for kind in allowed if kind not in DECISION_TYPES]
        if unknown or not allowed:
            raise ValueError(
                f"ActionRequest({self.name!r}).allowed must name some of {DECISION_TYPES}, "
                f"got {self.allowed!r}"
            )
        object.__setattr__(self, "allowed", allowed)
        if self.args_schema is not None:
            check_supported(self.args_schema, f"args_schema of action {self.name!r}")


@dataclass(frozen=True, slots=True)
class Decision:
    """A reviewer's decision on one action.

    ``accept``: run it as asked. ``edit``: run it with ``args`` instead. ``respond``: do not
    run it; ``message`` is the answer in its place. ``reject``: do not run it; ``message`` (if
    any) says why.
    """

    type: DecisionType
    args: dict[str, Any] | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        if self.type not in DECISION_TYPES:
            raise ValueError(f"Decision.type must be one of {DECISION_TYPES}, got {self.type!r}")
        if (self.type == "edit") != isinstance(self.args, dict):
            raise ValueError(
                "Decision(type='edit') needs args (a dict of the edited arguments); "
                f"other decisions take none, got type={self.type!r}, args={self.args!r}"
            )
        if self.type == "respond" and not isinstance(self.message, str):
            raise ValueError("Decision(type='respond') needs message: the text to answer with")
        if self.type in ("accept", "edit") and self.message is not None:
            raise ValueError(f"Decision(type={self.type!r}) takes no message")


def request_review(
    actions: Sequence[ActionRequest], *, shape: RequestShape = "threadline"
) -> list[Decision]:
    """Ask for a decision on each of ``actions`` in one interrupt; return them in order.

    ``shape="agent-inbox"`` asks in Agent Inbox's ``HumanInterrupt`` list instead of the
    canonical request, so that UI lists and answers it; the answer is read the same way.

    Call it inside a node. The run stops until ``Command(resume=...)`` answers with one
    decision per action (``{"decisions": [...]}``); an answer that does not fit (a decision an
    action does not allow, edited arguments its ``args_schema`` refuses, the wrong count) is
    refused at resume with nothing run, and the interrupt stays pending.
    """
    actions = list(actions)
    if not actions or not all(isinstance(action, ActionRequest) for action in actions):
        raise TypeError(
            f"request_review() takes a non-empty list of ActionRequest, got {actions!r}"
        )
    if shape not in ("threadline", "agent-inbox"):
        raise ValueError(f"shape must be 'threadline' or 'agent-inbox', got {shape!r}")
    request = review_request(actions)
    value = inbox_request(request) if shape == "agent-inbox" else request
    answer = interrupt(value, schema=review_answer_schema(actions))
    return [Decision(**decision) for decision in answer["decisions"]]


def review_request(actions: Sequence[ActionRequest]) -> dict[str, Any]:
    """The JSON-serialisable request an interrupt carries (a form for a UI to show)."""
    return {
        "action_requests": [_action_request(action) for action in actions],
        "review_configs": [_review_config(action) for action in actions],
    }


def _action_request(action: ActionRequest) -> dict[str, Any]:
    shown: dict[str, Any] = {"name": action.name, "args": action.args}
    if action.description is not None:
        shown["description"] = action.description
    return shown


def _review_config(action: ActionRequest) -> dict[str, Any]:
    config: dict[str, Any] = {"action_name": action.name, "allowed_decisions": list(action.allowed)}
    if action.args_schema is not None:
        config["args_schema"] = action.args_schema
    return config


def review_answer_schema(actions: Sequence[ActionRequest]) -> dict[str, Any]:
    """The JSON Schema of the canonical answer: one decision per action, in order."""
    return {
        "title": "Review decisions",
        "type": "object",
        "required": ["decisions"],
        "additionalProperties": False,
        "properties": {
            "decisions": {
                "type": "array",
                "minItems": len(actions),
                "maxItems": len(actions),
                "prefixItems": [_decision_schema(action) for action in actions],
            }
        },
        REVIEW_MARK: True,
    }


def _decision_schema(action: ActionRequest) -> dict[str, Any]:
    properties: dict[str, Any] = {"type": {"enum": list(action.allowed)}}
    if "edit" in action.allowed:
        properties["args"] = action.args_schema or {"type": "object"}
    if "respond" in action.allowed or "reject" in action.allowed:
        properties["message"] = {"type": "string"}
    return {
        "title": action.name,
        "type": "object",
        "required": ["type"],
        "additionalProperties": False,
        "properties": properties,
    }
