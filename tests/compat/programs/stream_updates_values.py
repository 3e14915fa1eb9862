"""Streaming: stream_mode="updates" and "values" for a two-node graph."""

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
    .compile()
)

for chunk in graph.stream({"topic": "ice cream"}, stream_mode="updates"):
    print(chunk)

for chunk in graph.stream({"topic": "ice cream"}, stream_mode="values"):
    print(chunk)

for chunk in graph.stream({"topic": "ice cream"}):
    print(chunk)
