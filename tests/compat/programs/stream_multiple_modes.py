"""Streaming: several stream modes at once yield (mode, chunk) tuples."""

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    topic: str
    joke: str


def refine_topic(state: State):
    writer = get_stream_writer()
    writer({"progress": "refining"})
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
    .compile()
)

for mode, chunk in graph.stream({"topic": "ice cream"}, stream_mode=["updates", "custom"]):
    print(mode, chunk)

for mode, chunk in graph.stream({"topic": "ice cream"}, stream_mode=["values", "updates"]):
    print(mode, chunk)
