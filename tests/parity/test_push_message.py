"""``push_message``: a message streamed and written while the node still runs."""

from __future__ import annotations

import pytest

from threadline import START, StateGraph
from threadline.checkpoint.memory import InMemorySaver
from threadline.graph.message import push_message
from threadline.messages import AIMessage, MessagesState


def graph(node):
    g = StateGraph(MessagesState)
    g.add_node("talk", node)
    g.add_edge(START, "talk")
    return g.compile(checkpointer=InMemorySaver())


def test_a_pushed_message_is_streamed_and_kept_in_state():
    def talk(state: MessagesState) -> dict:
        pushed = push_message(AIMessage(content="working on it", id="m1"))
        assert pushed.id == "m1"
        return {"messages": [AIMessage(content="done", id="m2")]}

    config = {"configurable": {"thread_id": "t"}}
    chunks = list(graph(talk).stream({"messages": []}, config, stream_mode="messages"))
    assert [(m.id, meta["langgraph_node"]) for m, meta in chunks] == [
        ("m1", "talk"),
        ("m2", "talk"),
    ]
    final = graph(talk).invoke({"messages": []}, {"configurable": {"thread_id": "u"}})
    assert [m.content for m in final["messages"]] == ["working on it", "done"]


def test_a_message_pushed_then_returned_is_kept_and_streamed_once():
    def talk(state: MessagesState) -> dict:
        message = push_message({"role": "ai", "content": "hi", "id": "m1"})
        return {"messages": [message]}

    config = {"configurable": {"thread_id": "t"}}
    compiled = graph(talk)
    chunks = list(compiled.stream({"messages": []}, config, stream_mode="messages"))
    assert [m.id for m, _ in chunks] == ["m1"]
    assert [m.id for m in compiled.get_state(config).values["messages"]] == ["m1"]


def test_state_key_none_only_streams():
    def talk(state: MessagesState) -> dict:
        push_message(AIMessage(content="aside", id="m1"), state_key=None)
        return {}

    assert graph(talk).invoke({"messages": []}, {"configurable": {"thread_id": "t"}}) == {
        "messages": []
    }


def test_push_message_needs_an_id_and_a_running_node():
    def talk(state: MessagesState) -> dict:
        push_message(AIMessage(content="no id"))
        return {}

    with pytest.raises(ValueError, match="id"):
        graph(talk).invoke({"messages": []}, {"configurable": {"thread_id": "t"}})
    with pytest.raises(RuntimeError, match="inside a running node"):
        push_message(AIMessage(content="x", id="m"))
