"""Agent Inbox's shapes for asking a person about an action, as ``langgraph.prebuilt.interrupt``
names them: a node passes a ``HumanInterrupt`` (in a list) to ``interrupt()`` and gets back a
list of ``HumanResponse``. They are plain TypedDicts (dicts at run time, stored as such).

``threadline.hitl.request_review`` builds on the same answers and checks them; these types
are for programs written against LangGraph's.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict


class HumanInterruptConfig(TypedDict):
    """Which answers the person may give."""

    allow_ignore: bool
    allow_respond: bool
    allow_edit: bool
    allow_accept: bool


class ActionRequest(TypedDict):
    """The action asked about (a tool's name, say) and its arguments."""

    action: str
    args: dict[str, Any]


class HumanInterrupt(TypedDict):
    """What ``interrupt([...])`` sends: the action, what may be answered, and a description."""

    action_request: ActionRequest
    config: HumanInterruptConfig
    description: str | None


class HumanResponse(TypedDict):
    """An answer: ``accept`` (``args`` None), ``ignore`` (None), ``response`` (a text) or
    ``edit`` (an ``ActionRequest`` with the edited arguments)."""

    type: Literal["accept", "ignore", "response", "edit"]
    args: str | ActionRequest | None


__all__ = ["ActionRequest", "HumanInterrupt", "HumanInterruptConfig", "HumanResponse"]
