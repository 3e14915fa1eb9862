"""Graphs the browser tests serve: a typed question, a tool-call review, steps, a failure, a
node retried by its RetryPolicy before a question (for the trace)."""

from __future__ import annotations

import enum
import operator
from typing import Annotated, Any, TypedDict

from pydantic import BaseModel, Field

from threadline import END, START, RetryPolicy, StateGraph, get_runtime, interrupt, record_event
from threadline.hitl import ActionRequest, request_review

REFUND_ANSWER = {
    "title": "Refund",
    "type": "object",
    "required": ["amount", "reason", "order"],
    "properties": {
        "order": {"type": "string", "title": "Order", "pattern": "^[A-Z][0-9]+$"},
        "amount": {"type": "integer", "title": "Amount", "minimum": 0, "maximum": 500},
        "reason": {"type": "string", "title": "Reason", "minLength": 3},
        "currency": {"enum": ["EUR", "USD"], "default": "EUR", "title": "Currency"},
        "notify": {"type": "boolean", "default": True, "title": "Notify the customer"},
    },
}

REFUND_ARGS = {
    "type": "object",
    "required": ["order", "amount"],
    "properties": {
        "order": {"type": "string"},
        "amount": {"type": "integer", "minimum": 0},
    },
}


class Ticket(TypedDict, total=False):
    order: str
    answer: Any
    log: Annotated[list[str], operator.add]


def ask(state: Ticket) -> dict[str, Any]:
    answer = interrupt(
        {"question": f"How much should we refund for order {state['order']}?"},
        schema=REFUND_ANSWER,
    )
    return {"answer": answer, "log": [f"refund {answer['amount']}"]}


typed = StateGraph(Ticket)
typed.add_node("ask", ask)
typed.add_edge(START, "ask")
typed.add_edge("ask", END)


def review(state: Ticket) -> dict[str, Any]:
    action = ActionRequest(
        "refund",
        {"order": state["order"], "amount": 30},
        f"Refund order {state['order']}",
        args_schema=REFUND_ARGS,
    )
    decision = request_review([action])[0]
    return {"answer": {"type": decision.type, "args": decision.args, "message": decision.message}}


def act(state: Ticket) -> dict[str, Any]:
    return {"log": [f"decided: {state['answer']['type']}"]}


reviewed = StateGraph(Ticket)
reviewed.add_node("review", review)
reviewed.add_node("act", act)
reviewed.add_edge(START, "review")
reviewed.add_edge("review", "act")
reviewed.add_edge("act", END)


class Steps(TypedDict, total=False):
    n: int
    label: str


def start(state: Steps) -> dict[str, Any]:
    return {"n": state.get("n", 0) + 1, "label": "started"}


def double(state: Steps) -> dict[str, Any]:
    return {"n": state["n"] * 2}


def finish(state: Steps) -> dict[str, Any]:
    return {"label": f"finished with {state['n']}"}


steps = StateGraph(Steps)
steps.add_node("start", start)
steps.add_node("double", double)
steps.add_node("finish", finish)
steps.add_edge(START, "start")
steps.add_edge("start", "double")
steps.add_edge("double", "finish")
steps.add_edge("finish", END)


def explode(state: Steps) -> dict[str, Any]:
    raise ValueError("the refund service is down")


failing = StateGraph(Steps)
failing.add_node("start", start)
failing.add_node("explode", explode)
failing.add_edge(START, "start")
failing.add_edge("start", "explode")
failing.add_edge("explode", END)


class Pair(TypedDict, total=False):
    answers: Annotated[list[str], operator.add]


def ask_legal(state: Pair) -> dict[str, Any]:
    return {"answers": [f"legal: {interrupt('May we ship to this country?')}"]}


def ask_stock(state: Pair) -> dict[str, Any]:
    return {"answers": [f"stock: {interrupt({'question': 'How many are left?', 'sku': 'X-9'})}"]}


pair = StateGraph(Pair)
pair.add_node("ask_legal", ask_legal)
pair.add_node("ask_stock", ask_stock)
pair.add_edge(START, "ask_legal")
pair.add_edge(START, "ask_stock")
pair.add_edge("ask_legal", END)
pair.add_edge("ask_stock", END)


def review_inbox_shape(state: Ticket) -> dict[str, Any]:
    action = ActionRequest("close_ticket", {"ticket": 7}, allowed=("accept", "reject"))
    decision = request_review([action], shape="agent-inbox")[0]
    return {"answer": {"type": decision.type, "args": decision.args, "message": decision.message}}


inbox_shaped = StateGraph(Ticket)
inbox_shaped.add_node("review", review_inbox_shape)
inbox_shaped.add_edge(START, "review")
inbox_shaped.add_edge("review", END)


class Currency(enum.Enum):
    EUR = "EUR"
    USD = "USD"


class Address(BaseModel):
    city: str
    zip: str | None = None


class RefundModel(BaseModel):
    amount: int = Field(ge=0, description="In whole euros")
    currency: Currency = Currency.EUR
    note: str | None = None
    ship_to: Address


def ask_model(state: Ticket) -> dict[str, Any]:
    refund = interrupt({"question": "Refund how much, and where?"}, schema=RefundModel)
    return {"answer": refund.model_dump(mode="json")}


typed_model = StateGraph(Ticket)
typed_model.add_node("ask", ask_model)
typed_model.add_edge(START, "ask")
typed_model.add_edge("ask", END)


def lookup(state: Ticket) -> dict[str, Any]:
    """Fails its first attempt (a ``RetryPolicy`` runs it again), noting each try."""
    attempt = get_runtime().execution_info.node_attempt  # type: ignore[union-attr]
    record_event("carrier_call", {"order": state["order"], "attempt": attempt})
    if attempt == 1:
        raise ConnectionError("the carrier's API timed out")
    return {"log": [f"found {state['order']}"]}


def confirm(state: Ticket) -> dict[str, Any]:
    answer = interrupt({"question": f"Ship order {state['order']} today?"})
    return {"answer": answer, "log": [f"ship: {answer}"]}


traced = StateGraph(Ticket)
traced.add_node("lookup", lookup, retry_policy=RetryPolicy(initial_interval=0.01, jitter=False))
traced.add_node("confirm", confirm)
traced.add_edge(START, "lookup")
traced.add_edge("lookup", "confirm")
traced.add_edge("confirm", END)
