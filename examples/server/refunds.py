"""A refund that waits for a person: the graph ``threadline serve`` serves in the demo.

The reviewer's answer is typed: ``interrupt(..., schema=...)`` says what it must look like, so
a UI can draw the form and a wrong answer is refused before anything runs.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from threadline import END, START, StateGraph, interrupt

ANSWER = {
    "title": "Refund decision",
    "type": "object",
    "required": ["decision"],
    "properties": {
        "decision": {"type": "string", "enum": ["approve", "reject"]},
        "note": {"type": "string", "default": ""},
    },
    "additionalProperties": False,
}


class Refund(TypedDict, total=False):
    customer: str
    amount: float
    decision: str
    note: str
    log: Annotated[list[str], operator.add]


def review(state: Refund) -> dict[str, Any]:
    answer = interrupt(
        {"question": f"Refund {state['amount']:.2f} to {state['customer']}?"}, schema=ANSWER
    )
    return {
        "decision": answer["decision"],
        "note": answer.get("note", ""),
        "log": [f"reviewed: {answer['decision']}"],
    }


def settle(state: Refund) -> dict[str, Any]:
    done = "paid" if state["decision"] == "approve" else "declined"
    return {"log": [f"{done} {state['amount']:.2f} to {state['customer']}"]}


builder = StateGraph(Refund)
builder.add_node("review", review)
builder.add_node("settle", settle)
builder.add_edge(START, "review")
builder.add_edge("review", "settle")
builder.add_edge("settle", END)
