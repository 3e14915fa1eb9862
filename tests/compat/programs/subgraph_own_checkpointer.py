"""Subgraphs: checkpointer=True gives a subgraph its own memory across calls on a thread."""

import operator
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict


class SubState(TypedDict):
    notes: Annotated[list[str], operator.add]


def take_note(state: SubState):
    return {"notes": [f"note {len(state['notes']) + 1}"]}


sub_builder = StateGraph(SubState)
sub_builder.add_node(take_note)
sub_builder.add_edge(START, "take_note")
subgraph = sub_builder.compile(checkpointer=True)


class State(TypedDict):
    question: str
    answer: str


def agent(state: State):
    result = subgraph.invoke({"notes": []})
    return {"answer": f"{state['question']} -> {result['notes']}"}


builder = StateGraph(State)
builder.add_node(agent)
builder.add_edge(START, "agent")
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
print(graph.invoke({"question": "first"}, config))
print(graph.invoke({"question": "second"}, config))
other = {"configurable": {"thread_id": "2"}}
print(graph.invoke({"question": "elsewhere"}, other))
