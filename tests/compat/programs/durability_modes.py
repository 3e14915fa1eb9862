"""Durability modes: "sync", "async" and "exit" decide which checkpoints are saved."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    value: str


def node_a(state: State):
    return {"value": state["value"] + "a"}


def node_b(state: State):
    return {"value": state["value"] + "b"}


builder = StateGraph(State)
builder.add_node(node_a)
builder.add_node(node_b)
builder.add_edge(START, "node_a")
builder.add_edge("node_a", "node_b")
builder.add_edge("node_b", END)
graph = builder.compile(checkpointer=InMemorySaver())

for mode in ["sync", "async", "exit"]:
    config = {"configurable": {"thread_id": mode}}
    print(mode, graph.invoke({"value": ""}, config, durability=mode))
    history = list(graph.get_state_history(config))
    print(len(history), [(s.metadata["source"], s.metadata["step"]) for s in history])
