"""Prebuilt agents and tool running, under the names LangGraph users import from
``langgraph.prebuilt`` (and LangChain v1's ``create_agent``).

- ``create_react_agent`` / ``create_agent``: a model and its tools in a loop; ``create_agent``
  takes ``review={tool: decisions}`` to have a person decide on calls before they run.
- ``ToolNode``, ``tools_condition``: run a turn's tool calls; route to them.
- ``InjectedState``, ``InjectedStore``, ``ToolRuntime``: tool parameters the graph fills in,
  hidden from the model.
- ``validate_history``, ``repair_history``: a conversation every provider accepts (each tool call
  answered by exactly one result). The agents repair before every model call.
"""

from threadline.prebuilt.agent import (
    AgentState,
    AgentStateWithStructuredResponse,
    create_agent,
    create_react_agent,
)
from threadline.prebuilt.history import HistoryProblem, repair_history, validate_history
from threadline.prebuilt.injection import InjectedState, InjectedStore, ToolRuntime
from threadline.prebuilt.tool_node import ToolNode, tools_condition

__all__ = [
    "AgentState",
    "AgentStateWithStructuredResponse",
    "HistoryProblem",
    "InjectedState",
    "InjectedStore",
    "ToolNode",
    "ToolRuntime",
    "create_agent",
    "create_react_agent",
    "repair_history",
    "tools_condition",
    "validate_history",
]
