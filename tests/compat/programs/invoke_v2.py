"""LangGraph 1.x output format version="v2": GraphOutput from invoke, typed parts from stream."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    question: str
    answer: str


def ask(state: State):
    return {"answer": interrupt(state["question"])}


def polish(state: State):
    return {"answer": state["answer"].capitalize() + "."}


builder = StateGraph(State)
builder.add_node(ask)
builder.add_node(polish)
builder.add_edge(START, "ask")
builder.add_edge("ask", "polish")
builder.add_edge("polish", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
output = graph.invoke({"question": "favourite colour?"}, config, version="v2")
print(type(output).__name__, output.value, [i.value for i in output.interrupts])

for part in graph.stream(
    Command(resume="blue"), config, stream_mode=["updates", "values"], version="v2"
):
    print(part["type"], part["ns"], part["data"])

output = graph.invoke({"question": "favourite food?"}, {"configurable": {"thread_id": "2"}})
print(sorted(output))
