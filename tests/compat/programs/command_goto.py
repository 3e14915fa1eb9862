"""How to use the graph API: combine control flow and state updates with Command."""

from langgraph.graph import START, StateGraph
from langgraph.types import Command
from typing_extensions import Literal, TypedDict


class State(TypedDict):
    foo: str


def node_a(state: State) -> Command[Literal["node_b", "node_c"]]:
    print("Called A")
    value = "a" if state["foo"] == "pick b" else "b"
    if value == "a":
        goto = "node_b"
    else:
        goto = "node_c"
    return Command(update={"foo": value}, goto=goto)


def node_b(state: State):
    print("Called B")
    return {"foo": state["foo"] + "b"}


def node_c(state: State):
    print("Called C")
    return {"foo": state["foo"] + "c"}


builder = StateGraph(State)
builder.add_edge(START, "node_a")
builder.add_node(node_a)
builder.add_node(node_b)
builder.add_node(node_c)
graph = builder.compile()

print(graph.invoke({"foo": "pick b"}))
print(graph.invoke({"foo": ""}))
for chunk in graph.stream({"foo": "pick b"}):
    print(chunk)
