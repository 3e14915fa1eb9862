"""Conditional edges with a path map, and a conditional entry point."""

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    text: str
    route: str
    result: str


def classify(state: State):
    return {"route": "long" if len(state["text"]) > 10 else "short"}


def summarize(state: State):
    return {"result": state["text"][:10] + "..."}


def echo(state: State):
    return {"result": state["text"]}


def pick(state: State) -> str:
    return state["route"]


builder = StateGraph(State)
builder.add_node(classify)
builder.add_node(summarize)
builder.add_node(echo)
builder.add_edge(START, "classify")
builder.add_conditional_edges("classify", pick, {"long": "summarize", "short": "echo"})
builder.add_edge("summarize", END)
builder.add_edge("echo", END)
graph = builder.compile()
print(graph.invoke({"text": "hello"}))
print(graph.invoke({"text": "a much longer piece of text"}))


def entry(state: State):
    return "echo" if state["text"].startswith("!") else "classify"


builder = StateGraph(State)
builder.add_node(classify)
builder.add_node(summarize)
builder.add_node(echo)
builder.set_conditional_entry_point(entry, {"echo": "echo", "classify": "classify"})
builder.add_conditional_edges("classify", pick, {"long": "summarize", "short": "echo"})
builder.set_finish_point("summarize")
builder.set_finish_point("echo")
graph = builder.compile()
print(graph.invoke({"text": "!a much longer piece of text"}))
print(graph.invoke({"text": "a much longer piece of text"}))
