"""Subgraphs: an interrupt inside a subgraph surfaces on the parent; view subgraph state."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

runs = []


class State(TypedDict):
    foo: str


def subgraph_node_1(state: State):
    runs.append("subgraph_node_1")
    value = interrupt("Provide value:")
    return {"foo": state["foo"] + value}


def subgraph_node_2(state: State):
    runs.append("subgraph_node_2")
    return {"foo": state["foo"] + "!"}


subgraph_builder = StateGraph(State)
subgraph_builder.add_node(subgraph_node_1)
subgraph_builder.add_node(subgraph_node_2)
subgraph_builder.add_edge(START, "subgraph_node_1")
subgraph_builder.add_edge("subgraph_node_1", "subgraph_node_2")
subgraph = subgraph_builder.compile()


def parent_node(state: State):
    runs.append("parent_node")
    return {"foo": state["foo"] + "|"}


builder = StateGraph(State)
builder.add_node("parent_node", parent_node)
builder.add_node("node_1", subgraph)
builder.add_edge(START, "parent_node")
builder.add_edge("parent_node", "node_1")

checkpointer = InMemorySaver()
graph = builder.compile(checkpointer=checkpointer)

config = {"configurable": {"thread_id": "1"}}
result = graph.invoke({"foo": ""}, config)
print(result["foo"], [i.value for i in result["__interrupt__"]])

parent_state = graph.get_state(config)
print(parent_state.next, [i.value for i in parent_state.interrupts])

subgraph_state = graph.get_state(config, subgraphs=True).tasks[0].state
print(subgraph_state.values, subgraph_state.next)

print(graph.invoke(Command(resume="bar"), config))
print(runs)
print(graph.get_state(config).next)
