"""How to use the graph API: visualize your graph as Mermaid text."""

import operator
from typing import Annotated, Literal

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    aggregate: Annotated[list, operator.add]


def a(state: State):
    return {"aggregate": ["A"]}


def b(state: State):
    return {"aggregate": ["B"]}


def route(state: State) -> Literal["b", END]:
    if len(state["aggregate"]) < 7:
        return "b"
    else:
        return END


builder = StateGraph(State)
builder.add_node(a)
builder.add_node(b)
builder.add_edge(START, "a")
builder.add_conditional_edges("a", route)
builder.add_edge("b", "a")
graph = builder.compile()

drawable = graph.get_graph()
print(sorted(drawable.nodes))
print(sorted((e.source, e.target, e.conditional) for e in drawable.edges))
print(graph.get_graph().draw_mermaid())
