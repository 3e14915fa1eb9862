"""Send to a subgraph node: each branch runs the subgraph with its own input."""

import operator
from typing import Annotated

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict


class WorkerState(TypedDict):
    item: str
    results: Annotated[list[str], operator.add]


def clean(state: WorkerState):
    return {"item": state["item"].strip().lower()}


def label(state: WorkerState):
    return {"results": [f"<{state['item']}>"]}


worker = StateGraph(WorkerState)
worker.add_node(clean)
worker.add_node(label)
worker.add_edge(START, "clean")
worker.add_edge("clean", "label")
worker.add_edge("label", END)
worker_graph = worker.compile()


class State(TypedDict):
    items: list[str]
    results: Annotated[list[str], operator.add]


def fan_out(state: State):
    return [Send("worker", {"item": item, "results": []}) for item in state["items"]]


builder = StateGraph(State)
builder.add_node("worker", worker_graph)
builder.add_conditional_edges(START, fan_out, ["worker"])
builder.add_edge("worker", END)
graph = builder.compile()

result = graph.invoke({"items": [" Apple", "BANANA ", "cherry"], "results": []})
print(sorted(result["results"]))
