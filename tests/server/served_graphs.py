"""Graphs the server tests serve (named in the settings as ``served_graphs.py:<name>``)."""

from __future__ import annotations

import asyncio
import operator
import time
from typing import Annotated, Any, TypedDict

from threadline import END, START, StateGraph, get_stream_writer, interrupt


class Ticket(TypedDict, total=False):
    request: str
    decision: str
    log: Annotated[list[str], operator.add]


def review(state: Ticket) -> dict[str, Any]:
    answer = interrupt({"question": f"approve {state['request']}?"})
    return {"decision": answer, "log": [f"reviewed: {answer}"]}


def act(state: Ticket) -> dict[str, Any]:
    get_stream_writer()({"acting_on": state["decision"]})
    return {"log": [f"acted: {state['decision']}"]}


approval = StateGraph(Ticket)
approval.add_node("review", review)
approval.add_node("act", act)
approval.add_edge(START, "review")
approval.add_edge("review", "act")
approval.add_edge("act", END)


class Counter(TypedDict, total=False):
    n: int
    delay: float
    steps: Annotated[list[int], operator.add]


async def tick(state: Counter) -> dict[str, Any]:
    await asyncio.sleep(state.get("delay", 0.0))
    return {"n": state.get("n", 0) + 1, "steps": [state.get("n", 0) + 1]}


def route(state: Counter) -> str:
    return "tick" if state.get("n", 0) < 3 else END


counter = StateGraph(Counter)
counter.add_node("tick", tick)
counter.add_edge(START, "tick")
counter.add_conditional_edges("tick", route, ["tick", END])


def explode(state: Counter) -> dict[str, Any]:
    raise ValueError("the node failed on purpose")


failing = StateGraph(Counter)
failing.add_node("explode", explode)
failing.add_edge(START, "explode")
failing.add_edge("explode", END)


def slow_sync(state: Counter) -> dict[str, Any]:
    time.sleep(state.get("delay", 0.0))
    return {"n": state.get("n", 0) + 1}


blocking = StateGraph(Counter)
blocking.add_node("slow", slow_sync)
blocking.add_edge(START, "slow")
blocking.add_edge("slow", END)


class Order(TypedDict, total=False):
    item: str
    quantity: int


def ask_quantity(state: Order) -> dict[str, Any]:
    schema = {
        "type": "object",
        "required": ["quantity"],
        "properties": {"quantity": {"type": "integer", "minimum": 1}},
        "additionalProperties": False,
    }
    answer = interrupt({"question": f"how many {state['item']}?"}, schema=schema)
    return {"quantity": answer["quantity"]}


typed = StateGraph(Order)
typed.add_node("ask", ask_quantity)
typed.add_edge(START, "ask")
typed.add_edge("ask", END)
