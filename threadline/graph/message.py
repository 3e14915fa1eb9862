"""LangGraph's ``langgraph.graph.message`` names: ``add_messages``, ``MessagesState``,
``REMOVE_ALL_MESSAGES`` (defined in ``threadline.messages``)."""

from threadline.messages.reducer import REMOVE_ALL_MESSAGES, MessagesState, add_messages

__all__ = ["REMOVE_ALL_MESSAGES", "MessagesState", "add_messages"]
