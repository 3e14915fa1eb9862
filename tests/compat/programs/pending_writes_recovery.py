"""Persistence concepts: pending writes; a failed superstep resumes without redoing its siblings."""

import operator
import time
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

calls = []
fail = {"flaky": True}


class State(TypedDict):
    results: Annotated[list[str], operator.add]


def steady(state: State):
    calls.append("steady")
    return {"results": ["steady"]}


def flaky(state: State):
    calls.append("flaky")
    time.sleep(0.2)  # let the sibling finish first: its write is then kept
    if fail["flaky"]:
        raise ConnectionError("service unavailable")
    return {"results": ["flaky"]}


def combine(state: State):
    return {"results": [f"combined {sorted(state['results'])}"]}


builder = StateGraph(State)
builder.add_node(steady)
builder.add_node(flaky)
builder.add_node(combine)
builder.add_edge(START, "steady")
builder.add_edge(START, "flaky")
builder.add_edge(["steady", "flaky"], "combine")
builder.add_edge("combine", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
try:
    graph.invoke({"results": []}, config)
except ConnectionError as e:
    print("ConnectionError:", e)

state = graph.get_state(config)
print(state.values, state.next)
print(sorted((t.name, type(t.error).__name__ if t.error else None) for t in state.tasks))

fail["flaky"] = False
print(graph.invoke(None, config))
print(sorted(calls))
