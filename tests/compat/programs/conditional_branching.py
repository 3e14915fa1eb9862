"""How to use the graph API: conditional branching, to one node or to several."""

import operator
from typing import Annotated, Literal, Sequence

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    aggregate: Annotated[list, operator.add]
    which: str


def a(state: State):
    print(f'Adding "A" to {state["aggregate"]}')
    return {"aggregate": ["A"]}


def b(state: State):
    return {"aggregate": ["B"]}


def c(state: State):
    return {"aggregate": ["C"]}


def d(state: State):
    return {"aggregate": ["D"]}


def conditional_edge(state: State) -> Literal["b", "c"]:
    return state["which"]


builder = StateGraph(State)
builder.add_node(a)
builder.add_node(b)
builder.add_node(c)
builder.add_edge(START, "a")
builder.add_edge("b", END)
builder.add_edge("c", END)
builder.add_conditional_edges("a", conditional_edge)
graph = builder.compile()
print(graph.invoke({"aggregate": [], "which": "c"}))
print(graph.invoke({"aggregate": [], "which": "b"}))


def route_bc_or_cd(state: State) -> Sequence[str]:
    if state["which"] == "cd":
        return ["c", "d"]
    return ["b", "c"]


builder = StateGraph(State)
builder.add_node(a)
builder.add_node(b)
builder.add_node(c)
builder.add_node(d)
builder.add_edge(START, "a")
builder.add_conditional_edges("a", route_bc_or_cd)
for name in "bcd":
    builder.add_edge(name, END)
graph = builder.compile()
print(graph.invoke({"aggregate": [], "which": "cd"}))
print(graph.invoke({"aggregate": [], "which": "bc"}))
