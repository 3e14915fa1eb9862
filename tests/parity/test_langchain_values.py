"""langchain-core values kept in state: a message's ``.text`` (a str subclass) is stored as the
plain str it is, as LangGraph stores it; other str subclasses stay refused."""

from __future__ import annotations

from typing import TypedDict

import pytest
from langchain_core.messages import AIMessage

from threadline import START, StateGraph
from threadline.errors import SerializationError
from threadline.serde.codec import Serializer


class State(TypedDict):
    answer: str


def test_a_message_text_in_state_is_saved_and_loads_as_str(saver):
    g = StateGraph(State)
    g.add_node("reply", lambda s: {"answer": AIMessage(content="hello").text})
    g.add_edge(START, "reply")
    graph = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    assert graph.invoke({"answer": ""}, config) == {"answer": "hello"}
    value = graph.get_state(config).values["answer"]
    assert value == "hello" and type(value) is str


def test_only_langchain_core_text_is_taken_as_str():
    class Tagged(str):
        pass

    with pytest.raises(SerializationError, match="Tagged"):
        Serializer().dumps({"v": Tagged("x")})
    assert Serializer().loads(Serializer().dumps([AIMessage(content="a").text])) == ["a"]
