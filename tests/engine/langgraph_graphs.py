"""The state, config and one-node graphs the LangGraph parity tests share."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, TypedDict

from threadline import END, START, StateGraph, interrupt
from threadline.checkpoint import InMemorySaver


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def cfg(thread: str = "t", **extra) -> dict:
    return {"configurable": {"thread_id": thread}, **extra}


def single(name: str, fn, schema=Log, **compile_kw):
    builder = StateGraph(schema)
    builder.add_node(name, fn)
    builder.add_edge(START, name)
    builder.add_edge(name, END)
    return builder.compile(**compile_kw)


# ------------------------------------------------------------------ Command(update=..., goto=...)
class Review(TypedDict, total=False):
    draft: str
    reviewer: str
    log: Annotated[list[str], operator.add]


# ------------------------------------------------------------------ version="v2"
def asking_graph(schema=Review):
    def ask(state) -> dict:
        return {"reviewer": interrupt("who?")}

    builder = StateGraph(schema)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=InMemorySaver())


@dataclass
class DraftState:
    draft: str = ""
    reviewer: str = ""


# ------------------------------------------------------------------ chunks of an invoked run
class Question(TypedDict):
    question: str
