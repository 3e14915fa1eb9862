"""Human-in-the-loop: several interrupt() calls in one node; the node re-runs from its top."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

entered = []


class State(TypedDict):
    name: str
    age: str


def ask(state: State):
    entered.append("ask")
    name = interrupt("what is your name?")
    age = interrupt(f"how old are you, {name}?")
    return {"name": name, "age": age}


builder = StateGraph(State)
builder.add_node(ask)
builder.add_edge(START, "ask")
builder.add_edge("ask", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
print(graph.invoke({"name": "", "age": ""}, config)["__interrupt__"][0].value)
print(graph.invoke(Command(resume="Ada"), config)["__interrupt__"][0].value)
print(graph.invoke(Command(resume="36"), config))
print(entered)
