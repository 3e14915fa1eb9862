"""Graphs and helpers the stream-mode tests share.

The expected chunks in those tests are what LangGraph 1.2.22 yields for the same graphs (ids and
timestamps aside). langchain_core is needed: the tests that import this module are skipped
without it.
"""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

fake_chat = pytest.importorskip("langchain_core.language_models.fake_chat_models")
messages = pytest.importorskip("langchain_core.messages")
AIMessage, AIMessageChunk, HumanMessage = (
    messages.AIMessage,
    messages.AIMessageChunk,
    messages.HumanMessage,
)


class Chat(TypedDict):
    messages: Annotated[list, operator.add]


def model(text: str):
    return fake_chat.GenericFakeChatModel(messages=iter([AIMessage(content=text)]))


def by_step(events: list[dict]) -> list[tuple]:
    """Debug events without their ids and timestamps."""
    return [(e["type"], e["step"], e["payload"].get("name")) for e in events]
