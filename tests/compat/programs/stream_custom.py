"""Streaming: custom data from nodes with get_stream_writer and from Runtime.stream_writer."""

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict


class State(TypedDict):
    query: str
    answer: str


def node(state: State):
    writer = get_stream_writer()
    writer({"custom_key": "Generating custom data inside node"})
    return {"answer": "some data"}


def tool_like(state: State, runtime: Runtime):
    for i in range(1, 4):
        runtime.stream_writer(f"Retrieved {i}/3 records")
    return {"answer": state["answer"] + "!"}


graph = (
    StateGraph(State)
    .add_node(node)
    .add_node(tool_like)
    .add_edge(START, "node")
    .add_edge("node", "tool_like")
    .add_edge("tool_like", END)
    .compile()
)

inputs = {"query": "example"}
for chunk in graph.stream(inputs, stream_mode="custom"):
    print(chunk)
print(graph.invoke(inputs))
