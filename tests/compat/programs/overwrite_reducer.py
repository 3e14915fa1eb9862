"""Bypass a reducer: Overwrite replaces a reduced key's value instead of appending to it."""

import operator
from typing import Annotated

from langgraph.graph import END, START, StateGraph
from langgraph.types import Overwrite
from typing_extensions import TypedDict


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def add_more(state: State):
    return {"items": ["b", "c"]}


def reset(state: State):
    return {"items": Overwrite(["only"])}


builder = StateGraph(State)
builder.add_node(add_more)
builder.add_node(reset)
builder.add_edge(START, "add_more")
builder.add_edge("add_more", "reset")
builder.add_edge("reset", END)
graph = builder.compile()

for chunk in graph.stream({"items": ["a"]}, stream_mode="values"):
    print(chunk)
