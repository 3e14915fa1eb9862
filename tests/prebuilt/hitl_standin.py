"""A stand-in for ``threadline.hitl`` (helper A's package) while it is not on main: the
contract's names and shapes, on ``interrupt()``. Used only when the real package is absent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from threadline import interrupt


@dataclass(frozen=True)
class ActionRequest:
    name: str
    args: dict
    description: str | None = None
    allowed: tuple[str, ...] = ("accept", "edit", "respond", "reject")
    args_schema: dict | None = None


@dataclass(frozen=True)
class Decision:
    type: str
    args: dict | None = None
    message: str | None = None


def request_review(actions: Sequence[ActionRequest]) -> list[Decision]:
    answer = interrupt(
        {
            "action_requests": [
                {"name": a.name, "args": a.args, "description": a.description} for a in actions
            ],
            "review_configs": [
                {"action_name": a.name, "allowed_decisions": list(a.allowed)} for a in actions
            ],
        }
    )
    raw: Any = answer.get("decisions") if isinstance(answer, dict) else answer
    decisions = [d if isinstance(d, Decision) else Decision(**d) for d in raw]
    if len(decisions) != len(actions):
        raise ValueError(f"expected {len(actions)} decisions, got {len(decisions)}")
    for action, decision in zip(actions, decisions, strict=True):
        if decision.type not in action.allowed:
            raise ValueError(f"{decision.type!r} is not allowed for {action.name!r}")
    return decisions
