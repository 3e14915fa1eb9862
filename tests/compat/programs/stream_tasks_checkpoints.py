"""Streaming: stream_mode="tasks" and "checkpoints" (normalised: no ids)."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    topic: str
    joke: str


def refine_topic(state: State):
    return {"topic": state["topic"] + " and cats"}


def generate_joke(state: State):
    return {"joke": f"This is a joke about {state['topic']}"}


graph = (
    StateGraph(State)
    .add_node(refine_topic)
    .add_node(generate_joke)
    .add_edge(START, "refine_topic")
    .add_edge("refine_topic", "generate_joke")
    .add_edge("generate_joke", END)
    .compile(checkpointer=InMemorySaver())
)

config = {"configurable": {"thread_id": "1"}}
for task in graph.stream({"topic": "ice cream"}, config, stream_mode="tasks"):
    print({k: v for k, v in task.items() if k != "id"})

config = {"configurable": {"thread_id": "2"}}
for cp in graph.stream({"topic": "ice cream"}, config, stream_mode="checkpoints"):
    print(cp["values"], cp["next"], cp["metadata"]["source"], cp["metadata"]["step"])
    print([t["name"] for t in cp["tasks"]], cp["parent_config"] is None)
