"""How to use the graph API: create a sequence of steps (and the add_sequence shorthand)."""

from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    value_1: str
    value_2: int


def step_1(state: State):
    return {"value_1": "a"}


def step_2(state: State):
    current_value_1 = state["value_1"]
    return {"value_1": f"{current_value_1} b"}


def step_3(state: State):
    return {"value_2": 10}


builder = StateGraph(State)
builder.add_node(step_1)
builder.add_node(step_2)
builder.add_node(step_3)
builder.add_edge(START, "step_1")
builder.add_edge("step_1", "step_2")
builder.add_edge("step_2", "step_3")
graph = builder.compile()
print(graph.invoke({"value_1": "c"}))

builder = StateGraph(State).add_sequence([step_1, step_2, step_3])
builder.add_edge(START, "step_1")
graph = builder.compile()
print(graph.invoke({"value_1": "c"}))
