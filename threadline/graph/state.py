"""The builder and the compiled graph, at LangGraph's ``langgraph.graph.state`` path."""

from threadline.graph.compiled import CompiledStateGraph
from threadline.graph.state_graph import StateGraph

__all__ = ["CompiledStateGraph", "StateGraph"]
