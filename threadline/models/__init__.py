"""Chat models for threadline graphs and agents.

- ``ChatModel``: what a model must offer (``invoke``, ``ainvoke``, ``stream``, ``astream``,
  ``bind_tools``). langchain-core chat models qualify as they are; ``as_chat_model`` checks.
- ``ScriptedChatModel``: plays back a list of replies and tool calls, for tests and demos.
- ``OpenAIChatModel``: a client for any OpenAI-compatible chat-completions server (OpenAI,
  vLLM, Ollama, llama.cpp), sync and async, with streaming, tools, structured output and
  retries. Needs httpx (``pip install 'threadline[openai]'``); imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from threadline._lazy import lazy_attributes
from threadline.models.protocol import ChatModel, ModelInput, as_chat_model
from threadline.models.scripted import ModelCall, ScriptedChatModel
from threadline.models.structured import StructuredChatModel

if TYPE_CHECKING:
    from threadline.models.openai_client import OpenAIChatModel

__all__ = [
    "ChatModel",
    "ModelCall",
    "ModelInput",
    "OpenAIChatModel",
    "ScriptedChatModel",
    "StructuredChatModel",
    "as_chat_model",
]


# httpx is an optional dependency: importing threadline.models must not need it.
__getattr__ = lazy_attributes(globals(), {"OpenAIChatModel": "threadline.models.openai_client"})
