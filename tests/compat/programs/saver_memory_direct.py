"""Persistence concepts: use a checkpointer directly (put, get_tuple, list)."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    n: int


def double(state: State):
    return {"n": state["n"] * 2}


builder = StateGraph(State)
builder.add_node(double)
builder.add_edge(START, "double")
builder.add_edge("double", END)

checkpointer = InMemorySaver()
graph = builder.compile(checkpointer=checkpointer)
config = {"configurable": {"thread_id": "1"}}
graph.invoke({"n": 21}, config)

latest = checkpointer.get_tuple(config)
print(latest.checkpoint["channel_values"]["n"])
print(latest.metadata["source"], latest.metadata["step"])
print(latest.parent_config is not None)
checkpoints = list(checkpointer.list(config))
print(len(checkpoints))
print([c.metadata["step"] for c in checkpoints])
print(len(list(checkpointer.list(config, limit=1))))
checkpointer.delete_thread("1")
print(checkpointer.get_tuple(config))
print(graph.get_state(config).values)
