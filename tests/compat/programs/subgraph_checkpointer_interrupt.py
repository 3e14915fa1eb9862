"""Subgraphs: an interrupt in a subgraph compiled with checkpointer=True; inspect and resume."""

import operator
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class SubState(TypedDict):
    answer: str
    asked: Annotated[int, operator.add]


def ask(state: SubState):
    return {"asked": 1, "answer": interrupt(f"question {state['asked'] + 1}?")}


sub = StateGraph(SubState)
sub.add_node(ask)
sub.add_edge(START, "ask")
sub.add_edge("ask", END)
subgraph = sub.compile(checkpointer=True)


class State(TypedDict):
    answer: str


builder = StateGraph(State)
builder.add_node("interview", subgraph)
builder.add_edge(START, "interview")
builder.add_edge("interview", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
result = graph.invoke({"answer": ""}, config)
print([i.value for i in result["__interrupt__"]])
state = graph.get_state(config, subgraphs=True)
print(state.next, state.tasks[0].state.values, state.tasks[0].state.next)
print(graph.invoke(Command(resume="yes"), config))

result = graph.invoke({"answer": ""}, config)
print([i.value for i in result["__interrupt__"]])
print(graph.invoke(Command(resume="again"), config))
