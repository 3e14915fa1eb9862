"""The graph the server benchmark serves: one short step, so the figures are the server's."""

from __future__ import annotations

from typing import TypedDict

from threadline import END, START, StateGraph


class Echo(TypedDict, total=False):
    text: str
    reply: str


short = StateGraph(Echo)
short.add_node("reply", lambda s: {"reply": s["text"].upper()})
short.add_edge(START, "reply")
short.add_edge("reply", END)
