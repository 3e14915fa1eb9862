"""Threads: the state of a thread that never ran, and a checkpointer used without a thread id."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    x: int


def inc(state: State):
    return {"x": state["x"] + 1}


builder = StateGraph(State)
builder.add_node(inc)
builder.add_edge(START, "inc")
builder.add_edge("inc", END)
graph = builder.compile(checkpointer=InMemorySaver())

snapshot = graph.get_state({"configurable": {"thread_id": "never-ran"}})
print(snapshot.values, snapshot.next, snapshot.tasks, snapshot.interrupts)
print(list(graph.get_state_history({"configurable": {"thread_id": "never-ran"}})))

try:
    graph.invoke({"x": 1})
except ValueError:
    print("a checkpointer needs a thread_id: ValueError")

print(builder.compile().invoke({"x": 1}))
