"""LangGraph's ``langgraph.prebuilt.chat_agent_executor`` import path (``AgentState`` is
often imported from here); the agents themselves live in ``threadline.prebuilt.agent``."""

from threadline.prebuilt.agent import (
    AgentState,
    AgentStateWithStructuredResponse,
    create_react_agent,
)

__all__ = ["AgentState", "AgentStateWithStructuredResponse", "create_react_agent"]
