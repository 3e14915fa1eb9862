"""Persistence concepts: checkpoints of a thread, get_state and get_state_history."""

from operator import add
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    foo: str
    bar: Annotated[list[str], add]


def node_a(state: State):
    return {"foo": "a", "bar": ["a"]}


def node_b(state: State):
    return {"foo": "b", "bar": ["b"]}


workflow = StateGraph(State)
workflow.add_node(node_a)
workflow.add_node(node_b)
workflow.add_edge(START, "node_a")
workflow.add_edge("node_a", "node_b")
workflow.add_edge("node_b", END)

checkpointer = InMemorySaver()
graph = workflow.compile(checkpointer=checkpointer)

config = {"configurable": {"thread_id": "1"}}
print(graph.invoke({"foo": ""}, config))

snapshot = graph.get_state(config)
print(snapshot.values)
print(snapshot.next)
print(snapshot.metadata["source"], snapshot.metadata["step"], snapshot.metadata["parents"])
print(snapshot.tasks)
print(snapshot.config["configurable"]["thread_id"])
print(snapshot.parent_config["configurable"]["thread_id"])

history = list(graph.get_state_history(config))
print(len(history))
for state in history:
    print(state.metadata["step"], state.metadata["source"], state.values, state.next)
print([task.name for state in history for task in state.tasks])
print(history[0].config == snapshot.config)
print(history[1].config == snapshot.parent_config)
print(history[-1].parent_config)

# a particular checkpoint, addressed by its id
checkpoint_id = history[2].config["configurable"]["checkpoint_id"]
old = graph.get_state({"configurable": {"thread_id": "1", "checkpoint_id": checkpoint_id}})
print(old.values, old.next)
