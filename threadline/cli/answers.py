"""``resume --accept`` / ``--reject``: the answer a pending review interrupt expects.

Two request shapes are known. threadline's ``request_review`` (and ``create_agent(review=)``)
asks with ``{"action_requests": [...], "review_configs": [...]}`` and reads
``{"decisions": [{"type": "accept"|"reject", ...}, ...]}``, one decision per action.
Agent Inbox's convention is a list of ``HumanInterrupt`` (``action_request``, ``config``),
answered by a list of ``HumanResponse`` (``accept``, or ``ignore`` for a rejection).
"""

from __future__ import annotations

from typing import Any, Literal

from threadline.cli.errors import USAGE, CliError
from threadline.types import Interrupt

Verdict = Literal["accept", "reject"]


def review_answer(item: Interrupt, verdict: Verdict, message: str | None) -> Any:
    """The answer that accepts (or rejects) every action ``item`` asks about."""
    value = item.value
    if isinstance(value, dict) and "action_requests" in value:
        return {"decisions": [_decision(verdict, message) for _ in value["action_requests"]]}
    if isinstance(value, list) and value and all(_is_inbox(v) for v in value):
        kind = "accept" if verdict == "accept" else "ignore"
        return [{"type": kind, "args": None} for _ in value]
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
