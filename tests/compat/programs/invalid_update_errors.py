"""Errors: InvalidUpdateError for concurrent writes to a plain key and for a non-dict update."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    value: str


def left(state: State):
    return {"value": "left"}


def right(state: State):
    return {"value": "right"}


builder = StateGraph(State)
builder.add_node(left)
builder.add_node(right)
builder.add_edge(START, "left")
builder.add_edge(START, "right")
builder.add_edge("left", END)
builder.add_edge("right", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
try:
    graph.invoke({"value": ""}, config)
except InvalidUpdateError:
    print("two nodes wrote 'value' in one step: InvalidUpdateError")


def not_a_dict(state: State):
    return "oops"


builder = StateGraph(State)
builder.add_node(not_a_dict)
builder.add_edge(START, "not_a_dict")
builder.add_edge("not_a_dict", END)
try:
    builder.compile().invoke({"value": ""})
except InvalidUpdateError:
    print("a node returned a str: InvalidUpdateError")
