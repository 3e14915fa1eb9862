"""Subgraphs: persistence comes from the parent's checkpointer; the subgraph needs none."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    foo: str


def subgraph_node_1(state: State):
    return {"foo": state["foo"] + "bar"}


subgraph_builder = StateGraph(State)
subgraph_builder.add_node(subgraph_node_1)
subgraph_builder.add_edge(START, "subgraph_node_1")
subgraph = subgraph_builder.compile()


def call_subgraph(state: State):
    return {"foo": subgraph.invoke({"foo": state["foo"]})["foo"] + "!"}


builder = StateGraph(State)
builder.add_node("node_1", subgraph)
builder.add_node("node_2", call_subgraph)
builder.add_edge(START, "node_1")
builder.add_edge("node_1", "node_2")

checkpointer = InMemorySaver()
graph = builder.compile(checkpointer=checkpointer)

config = {"configurable": {"thread_id": "1"}}
print(graph.invoke({"foo": "foo"}, config))
print(graph.invoke({"foo": "again "}, config))
history = list(graph.get_state_history(config))
print(len(history))
print([(s.metadata["step"], s.next) for s in history])
