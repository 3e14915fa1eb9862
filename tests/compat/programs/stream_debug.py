"""Streaming: stream_mode="debug" events (normalised: no ids or timestamps)."""

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


builder = (
    StateGraph(State)
    .add_node(refine_topic)
    .add_node(generate_joke)
    .add_edge(START, "refine_topic")
    .add_edge("refine_topic", "generate_joke")
    .add_edge("generate_joke", END)
)


def show(event):
    payload = event["payload"]
    if event["type"] == "checkpoint":
        detail = (payload["values"], payload["next"], payload["metadata"]["source"])
    elif event["type"] == "task":
        detail = (payload["name"], payload["input"], payload["triggers"])
    else:
        detail = (payload["name"], payload["result"], payload["error"], payload["interrupts"])
    print(event["step"], event["type"], detail)


for event in builder.compile().stream({"topic": "ice cream"}, stream_mode="debug"):
    show(event)

graph = builder.compile(checkpointer=InMemorySaver())
for event in graph.stream(
    {"topic": "ice cream"}, {"configurable": {"thread_id": "1"}}, stream_mode="debug"
):
    show(event)
