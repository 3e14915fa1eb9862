"""The state, config and small graphs (a diamond; one that asks with ``interrupt()``) the
streaming tests share (``test_streaming`` and the stream-mode modules)."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from threadline import END, START, StateGraph, interrupt


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    answer: str


def cfg(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


def append(name: str):
    def node(state: State) -> dict:
        return {"items": [name]}

    return node


def diamond(**compile_kw):
    """START -> a -> (b, c in parallel) -> END; c returns nothing."""
    g = StateGraph(State)
    g.add_node("a", append("a"))
    g.add_node("b", append("b"))
    g.add_node("c", lambda s: None)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("a", "c")
    g.add_edge("b", END)
    g.add_edge("c", END)
    return g.compile(**compile_kw)


def asking(saver):
    def ask(state: State) -> dict:
        return {"answer": interrupt("approve?")}

    g = StateGraph(State)
    g.add_node("prepare", append("prepare"))
    g.add_node("ask", ask)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver)
