"""Persistence concepts: update_state, with and without as_node, and reducers applied."""

from operator import add
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    foo: int
    bar: Annotated[list[str], add]


def node_a(state: State):
    return {"foo": 1, "bar": ["a"]}


def node_b(state: State):
    return {"foo": state["foo"] + 1, "bar": ["b"]}


builder = StateGraph(State)
builder.add_node(node_a)
builder.add_node(node_b)
builder.add_edge(START, "node_a")
builder.add_edge("node_a", "node_b")
builder.add_edge("node_b", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
graph.invoke({"foo": 0, "bar": []}, config)

new_config = graph.update_state(config, {"foo": 2, "bar": ["b"]})
print(sorted(new_config["configurable"]))
snapshot = graph.get_state(config)
print(snapshot.values, snapshot.next)
print(snapshot.metadata["source"], snapshot.metadata["step"])

# as_node decides which node the update counts as, hence what runs next
graph.update_state(config, {"foo": 10}, as_node="node_a")
snapshot = graph.get_state(config)
print(snapshot.values, snapshot.next)
print(graph.invoke(None, config))

history = list(graph.get_state_history(config))
print(len(history))
print([(s.metadata["source"], s.metadata["step"]) for s in history])
