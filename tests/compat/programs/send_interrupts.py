"""Send fan-out where each branch asks a human; answer all pending interrupts at once."""

import operator
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    docs: list[str]
    approved: Annotated[list[str], operator.add]


def fan_out(state: State):
    return [Send("review", {"doc": doc}) for doc in state["docs"]]


def review(state: dict):
    verdict = interrupt(f"approve {state['doc']}?")
    return {"approved": [state["doc"]] if verdict == "yes" else []}


def summary(state: State):
    return {"approved": [f"{len(state['approved'])} approved"]}


builder = StateGraph(State)
builder.add_node(review)
builder.add_node(summary)
builder.add_conditional_edges(START, fan_out, ["review"])
builder.add_edge("review", "summary")
builder.add_edge("summary", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
result = graph.invoke({"docs": ["a.txt", "b.txt", "c.txt"], "approved": []}, config)
print(sorted(i.value for i in result["__interrupt__"]))

try:
    graph.invoke(Command(resume="yes"), config)
except RuntimeError:
    print("a bare resume value is refused while several interrupts wait")

pending = graph.get_state(config).interrupts
first = next(i for i in pending if i.value == "approve a.txt?")
result = graph.invoke(Command(resume={first.id: "yes"}), config)
print(sorted(i.value for i in result["__interrupt__"]))
print(sorted(i.id == first.id for i in graph.get_state(config).interrupts))

answers = {
    i.id: ("no" if "b.txt" in i.value else "yes") for i in graph.get_state(config).interrupts
}
result = graph.invoke(Command(resume=answers), config)
print(sorted(result["approved"]))
