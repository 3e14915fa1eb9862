"""``resume --accept`` / ``--reject``: the answer a pending review interrupt expects.

- asked by threadline's ``request_review`` (or ``create_agent(review=...)``), in either of its
  shapes (its answer schema carries ``REVIEW_MARK``): the canonical
  ``{"decisions": [{"type": "accept"|"reject", "message"?}, ...]}``, one per action;
- a value in the canonical shape (``{"action_requests": [...], "review_configs": [...]}``)
  without the mark: the same canonical answer;
- Agent Inbox's list of ``HumanInterrupt`` (``action_request``, ``config``) asked by hand:
  its list of ``HumanResponse``, ``accept`` or ``ignore`` (which carries no message).
"""

from __future__ import annotations

from typing import Any, Literal

from threadline.cli.errors import USAGE, CliError
from threadline.hitl.review_answers import REVIEW_MARK
from threadline.types import Interrupt

Verdict = Literal["accept", "reject"]


def review_answer(item: Interrupt, verdict: Verdict, message: str | None) -> Any:
    """The answer that accepts (or rejects) every action ``item`` asks about."""
    value = item.value
    if isinstance(value, list) and value and all(_is_inbox(v) for v in value):
        if (item.schema or {}).get(REVIEW_MARK):
            return {"decisions": [_decision(verdict, message) for _ in value]}
        if message is not None:
            raise CliError(
                f"--message: interrupt {item.id} asks in Agent Inbox's shape, whose 'ignore' "
                "carries no message; answer with --value JSON to respond instead",
                USAGE,
            )
        return [{"type": "accept" if verdict == "accept" else "ignore", "args": None}] * len(value)
    if isinstance(value, dict) and "action_requests" in value:
        return {"decisions": [_decision(verdict, message) for _ in value["action_requests"]]}
    raise CliError(
        f"--{verdict}: interrupt {item.id} is not a review request (request_review, "
        "create_agent(review=...) or Agent Inbox's HumanInterrupt); answer it with --value JSON",
        USAGE,
    )


def _decision(verdict: Verdict, message: str | None) -> dict[str, Any]:
    if verdict == "reject" and message is not None:
        return {"type": "reject", "message": message}
    return {"type": verdict}


def _is_inbox(value: Any) -> bool:
    return isinstance(value, dict) and "action_request" in value and "config" in value
