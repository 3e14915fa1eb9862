"""How to use the graph API: navigate to a node in a parent graph with Command.PARENT."""

import operator

from langgraph.graph import START, StateGraph
from langgraph.types import Command
from typing_extensions import Annotated, TypedDict


class State(TypedDict):
    foo: Annotated[str, operator.add]


def node_a(state: State):
    print("Called A")
    value = "b" if state["foo"] == "" else "a"
    if value == "a":
        goto = "node_b"
    else:
        goto = "node_c"
    return Command(update={"foo": value}, goto=goto, graph=Command.PARENT)


subgraph = StateGraph(State).add_node(node_a).add_edge(START, "node_a").compile()


def node_b(state: State):
    print("Called B")
    return {"foo": "b"}


def node_c(state: State):
    print("Called C")
    return {"foo": "c"}


builder = StateGraph(State)
builder.add_edge(START, "subgraph")
builder.add_node("subgraph", subgraph)
builder.add_node(node_b)
builder.add_node(node_c)
graph = builder.compile()

print(graph.invoke({"foo": ""}))
print(graph.invoke({"foo": "x"}))
