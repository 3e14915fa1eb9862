"""Checkpointer libraries: SqliteSaver over a sqlite3 connection to a file, reopened later."""

import sqlite3
import tempfile
from pathlib import Path

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    draft: str
    approved: bool


def write(state: State):
    return {"draft": state["draft"].upper()}


def review(state: State):
    return {"approved": interrupt({"draft": state["draft"]}) == "yes"}


builder = StateGraph(State)
builder.add_node(write)
builder.add_node(review)
builder.add_edge(START, "write")
builder.add_edge("write", "review")
builder.add_edge("review", END)

with tempfile.TemporaryDirectory() as tmp:
    path = Path(tmp) / "checkpoints.sqlite"
    config = {"configurable": {"thread_id": "1"}}

    conn = sqlite3.connect(path, check_same_thread=False)
    graph = builder.compile(checkpointer=SqliteSaver(conn))
    result = graph.invoke({"draft": "hello", "approved": False}, config)
    print([i.value for i in result["__interrupt__"]])
    conn.close()

    # a new process would do the same: open the file again and resume the thread
    conn = sqlite3.connect(path, check_same_thread=False)
    graph = builder.compile(checkpointer=SqliteSaver(conn))
    print(graph.get_state(config).next)
    print(graph.invoke(Command(resume="yes"), config))
    print(len(list(graph.get_state_history(config))))
    conn.close()
