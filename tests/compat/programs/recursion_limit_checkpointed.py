"""Recursion limit with a checkpointer: the steps that ran stay saved; continue with a new limit."""

import operator
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    count: Annotated[int, operator.add]


def tick(state: State):
    return {"count": 1}


def route(state: State):
    return "tick" if state["count"] < 6 else "__end__"


builder = StateGraph(State)
builder.add_node(tick)
builder.add_edge(START, "tick")
builder.add_conditional_edges("tick", route)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}, "recursion_limit": 3}
try:
    graph.invoke({"count": 0}, config)
except GraphRecursionError as e:
    print(type(e).__name__, "Recursion limit of 3 reached" in str(e))

thread = {"configurable": {"thread_id": "1"}}
state = graph.get_state(thread)
print(state.values, state.next, state.metadata["step"])
print(graph.invoke(None, {**thread, "recursion_limit": 10}))
