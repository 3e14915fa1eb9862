"""Streaming values and updates while an interrupt pauses the graph."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    name: str
    greeting: str


def ask_name(state: State):
    return {"name": interrupt("what is your name?")}


def greet(state: State):
    return {"greeting": f"hello {state['name']}"}


builder = StateGraph(State)
builder.add_node(ask_name)
builder.add_node(greet)
builder.add_edge(START, "ask_name")
builder.add_edge("ask_name", "greet")
builder.add_edge("greet", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
for chunk in graph.stream({"name": "", "greeting": ""}, config, stream_mode="values"):
    print(chunk if "__interrupt__" not in chunk else ("interrupt", chunk["__interrupt__"][0].value))
for chunk in graph.stream(Command(resume="Ada"), config, stream_mode="values"):
    print(chunk)

config = {"configurable": {"thread_id": "2"}}
for mode, chunk in graph.stream(
    {"name": "", "greeting": ""}, config, stream_mode=["updates", "values"]
):
    if "__interrupt__" in chunk:
        print(mode, "interrupt", [i.value for i in chunk["__interrupt__"]])
    else:
        print(mode, chunk)
