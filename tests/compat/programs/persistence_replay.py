"""Persistence concepts: replay from a prior checkpoint (nodes after it run again)."""

from operator import add
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

calls = []


class State(TypedDict):
    foo: str
    bar: Annotated[list[str], add]


def node_a(state: State):
    calls.append("node_a")
    return {"foo": "a", "bar": ["a"]}


def node_b(state: State):
    calls.append("node_b")
    return {"foo": "b", "bar": ["b"]}


workflow = StateGraph(State)
workflow.add_node(node_a)
workflow.add_node(node_b)
workflow.add_edge(START, "node_a")
workflow.add_edge("node_a", "node_b")
workflow.add_edge("node_b", END)
graph = workflow.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
graph.invoke({"foo": ""}, config)
print(calls)

history = list(graph.get_state_history(config))
before_b = next(s for s in history if s.next == ("node_b",))
print(before_b.values)

replay_config = {
    "configurable": {
        "thread_id": "1",
        "checkpoint_id": before_b.config["configurable"]["checkpoint_id"],
    }
}
for chunk in graph.stream(None, replay_config, stream_mode="values"):
    print(chunk)
print(calls)

history = list(graph.get_state_history(config))
print(len(history))
print([(s.metadata["source"], s.metadata["step"], s.next) for s in history])
print(graph.get_state(config).values)
