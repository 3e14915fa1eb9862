"""Persistence: metadata from config is copied into checkpoints; filter history by it."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    count: int


def increment(state: State):
    return {"count": state["count"] + 1}


builder = StateGraph(State)
builder.add_node(increment)
builder.add_edge(START, "increment")
builder.add_edge("increment", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "t1", "user_id": "u1"}, "metadata": {"run_name": "first"}}
graph.invoke({"count": 0}, config)
graph.invoke({"count": 5}, {"configurable": {"thread_id": "t1", "user_id": "u2"}})

thread = {"configurable": {"thread_id": "t1"}}
for state in graph.get_state_history(thread, filter={"user_id": "u1"}):
    print(
        state.metadata["user_id"],
        state.metadata.get("run_name"),
        state.metadata["step"],
        state.values,
    )
print(len(list(graph.get_state_history(thread, filter={"user_id": "u2"}))))
print(len(list(graph.get_state_history(thread, limit=2))))
print(graph.get_state(thread).values)
