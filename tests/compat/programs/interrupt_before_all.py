"""Static breakpoints: interrupt_before="*" pauses before every node; step with invoke(None)."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    trail: str


def first(state: State):
    return {"trail": state["trail"] + "1"}


def second(state: State):
    return {"trail": state["trail"] + "2"}


builder = StateGraph(State)
builder.add_node(first)
builder.add_node(second)
builder.add_edge(START, "first")
builder.add_edge("first", "second")
builder.add_edge("second", END)
graph = builder.compile(checkpointer=InMemorySaver(), interrupt_before="*")

config = {"configurable": {"thread_id": "1"}}
print(graph.invoke({"trail": ""}, config))
while graph.get_state(config).next:
    print("paused before", graph.get_state(config).next)
    print(graph.invoke(None, config))
print(graph.get_state(config).interrupts)
