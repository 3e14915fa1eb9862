"""Checkpointer libraries: SqliteSaver.from_conn_string as a context manager."""

import operator
from typing import Annotated

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    turns: Annotated[list[str], operator.add]


def reply(state: State):
    return {"turns": [f"reply to {state['turns'][-1]}"]}


builder = StateGraph(State)
builder.add_node(reply)
builder.add_edge(START, "reply")
builder.add_edge("reply", END)

with SqliteSaver.from_conn_string(":memory:") as checkpointer:
    graph = builder.compile(checkpointer=checkpointer)
    config = {"configurable": {"thread_id": "1"}}
    print(graph.invoke({"turns": ["hi"]}, config))
    print(graph.invoke({"turns": ["and again"]}, config))
    print(len(list(graph.get_state_history(config))))
    print(len(list(checkpointer.list(config))))
    print(checkpointer.get_tuple(config).checkpoint["channel_values"]["turns"])
