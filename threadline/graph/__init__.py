"""The graph builder and LangGraph's ``langgraph.graph`` names.

``add_messages`` and ``MessagesState`` load on first use: they may import langchain-core, which
a graph without messages need not pay for.
"""

from __future__ import annotations

from threadline._lazy import lazy_attributes
from threadline.constants import END, START
from threadline.graph.state_graph import StateGraph
from threadline.types import Command

_LAZY = {
    "add_messages": "threadline.messages.reducer",
    "MessagesState": "threadline.messages.reducer",
}

__all__ = ["END", "START", "Command", "MessagesState", "StateGraph", "add_messages"]


__getattr__ = lazy_attributes(globals(), _LAZY)
