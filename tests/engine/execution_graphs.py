"""The state and small graphs the tests of running graphs share."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from threadline import (
    END,
    START,
    StateGraph,
)


class State(TypedDict, total=False):
    value: str
    seen: str
    log: Annotated[list[str], operator.add]


def cfg(thread: str = "t", **extra) -> dict:
    return {"configurable": {"thread_id": thread}, **extra}


def append(name: str, calls: list[str] | None = None):
    def node(state: State) -> dict:
        if calls is not None:
            calls.append(name)
        return {"log": [name]}

    return node


def chain(*names: str) -> StateGraph:
    g = StateGraph(State)
    previous = START
    for name in names:
        g.add_node(name, append(name))
        g.add_edge(previous, name)
        previous = name
    g.add_edge(previous, END)
    return g
