"""A chat graph on ``MessagesState``, run on every saver: what a user checks after each turn."""

from __future__ import annotations

import itertools
import uuid
from typing import Annotated, Any

import pytest

from threadline import END, START, StateGraph
from threadline.checkpoint import BaseSaver
from threadline.errors import InvalidMessageError, InvalidUpdateError
from threadline.messages import (
    REMOVE_ALL_MESSAGES,
    AIMessage,
    AnyMessage,
    HumanMessage,
    MessagesState,
    RemoveMessage,
    ToolMessage,
    add_messages,
)

CONFIG = {"configurable": {"thread_id": "chat-1"}}


def fake_chat_model(messages: list[Any]) -> AIMessage:
    """A deterministic stand-in for an LLM: echoes the last message and asks for a tool."""
    turn = sum(isinstance(m, HumanMessage) for m in messages)
    return AIMessage(
        f"echo: {messages[-1].content}",
        tool_calls=[{"name": "lookup", "args": {"turn": turn}, "id": f"call-{turn}"}],
        usage_metadata={"input_tokens": len(messages), "output_tokens": 2, "total_tokens": 9},
        response_metadata={"model_name": "fake-chat", "finish_reason": "tool_calls"},
        additional_kwargs={"trace": [turn]},
    )


def chatbot(state: MessagesState) -> dict[str, Any]:
    return {"messages": [fake_chat_model(state["messages"])]}


def tool(state: MessagesState) -> dict[str, Any]:
    call = state["messages"][-1].tool_calls[0]
    return {"messages": [ToolMessage(f"found {call['args']}", tool_call_id=call["id"])]}


def chat_app(saver: BaseSaver, *nodes: tuple[str, Any]) -> Any:
    graph = StateGraph(MessagesState)
    order = [("chatbot", chatbot), ("tool", tool), *nodes]
    for name, fn in order:
        graph.add_node(name, fn)
    graph.add_edge(START, order[0][0])
    for (a, _), (b, _) in itertools.pairwise(order):
        graph.add_edge(a, b)
    graph.add_edge(order[-1][0], END)
    return graph.compile(checkpointer=saver)


def test_a_conversation_keeps_types_ids_and_fields_across_turns(saver: BaseSaver) -> None:
    app = chat_app(saver)
    first = app.invoke({"messages": [("user", "hi")]}, CONFIG)
    after_first = app.get_state(CONFIG).values["messages"]
    assert first["messages"] == after_first
    assert [type(m) for m in after_first] == [HumanMessage, AIMessage, ToolMessage]

    app.invoke({"messages": "how are you?"}, CONFIG)
    messages = app.get_state(CONFIG).values["messages"]
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, ToolMessage] * 2
    assert [m.id for m in messages[:3]] == [m.id for m in after_first]  # ids stay
    assert all(uuid.UUID(m.id).version == 4 for m in messages)
    assert len({m.id for m in messages}) == 6

    answer = messages[4]
    assert answer == AIMessage(
        "echo: how are you?",
        id=answer.id,
        tool_calls=[{"name": "lookup", "args": {"turn": 2}, "id": "call-2", "type": "tool_call"}],
        usage_metadata={"input_tokens": 4, "output_tokens": 2, "total_tokens": 9},
        response_metadata={"model_name": "fake-chat", "finish_reason": "tool_calls"},
        additional_kwargs={"trace": [2]},
    )
    assert messages[5].tool_call_id == "call-2" and messages[5].content == "found {'turn': 2}"


def test_history_shows_the_conversation_growing_with_the_same_ids(saver: BaseSaver) -> None:
    app = chat_app(saver)
    app.invoke({"messages": [HumanMessage("one", id="h1")]}, CONFIG)
    app.invoke({"messages": [HumanMessage("two", id="h2")]}, CONFIG)
    sizes = [len(s.values.get("messages", [])) for s in app.get_state_history(CONFIG)]
    assert sizes == [6, 5, 4, 3, 3, 2, 1, 0]
    final = app.get_state(CONFIG).values["messages"]
    for snapshot in app.get_state_history(CONFIG):
        stored = snapshot.values.get("messages", [])
        assert stored == final[: len(stored)]


def test_a_node_can_remove_messages(saver: BaseSaver) -> None:
    def trim(state: MessagesState) -> dict[str, Any]:
        return {"messages": [RemoveMessage(id=m.id) for m in state["messages"][:-2]]}

    app = chat_app(saver, ("trim", trim))
    app.invoke({"messages": [("user", "hi")]}, CONFIG)
    messages = app.get_state(CONFIG).values["messages"]
    assert [type(m) for m in messages] == [AIMessage, ToolMessage]
    app.invoke({"messages": [("user", "again")]}, CONFIG)
    assert [m.content for m in app.get_state(CONFIG).values["messages"]] == [
        "echo: again",
        "found {'turn': 1}",
    ]


def test_update_state_edits_removes_and_clears_messages(saver: BaseSaver) -> None:
    app = chat_app(saver)
    app.invoke({"messages": [HumanMessage("hi", id="h1")]}, CONFIG)
    ai_id = app.get_state(CONFIG).values["messages"][1].id

    app.update_state(CONFIG, {"messages": [AIMessage("edited", id=ai_id)]})
    messages = app.get_state(CONFIG).values["messages"]
    assert [m.content for m in messages][:2] == ["hi", "edited"]
    assert messages[1].id == ai_id and messages[1].tool_calls == []

    app.update_state(CONFIG, {"messages": RemoveMessage(id="h1")})
    assert [m.content for m in app.get_state(CONFIG).values["messages"]] == [
        "edited",
        "found {'turn': 1}",
    ]

    app.update_state(CONFIG, {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), ("user", "new")]})
    (only,) = app.get_state(CONFIG).values["messages"]
    assert isinstance(only, HumanMessage) and only.content == "new"


def test_removing_an_unknown_id_in_a_node_fails_the_run_and_names_the_key(
    saver: BaseSaver,
) -> None:
    app = chat_app(saver, ("bad", lambda state: {"messages": [RemoveMessage(id="ghost")]}))
    with pytest.raises(InvalidUpdateError, match=r"key 'messages'.*'bad'.*'ghost'") as caught:
        app.invoke({"messages": [("user", "hi")]}, CONFIG)
    assert isinstance(caught.value.__cause__, InvalidMessageError)


def test_changing_a_loaded_message_in_place_does_not_change_what_is_stored(
    saver: BaseSaver,
) -> None:
    app = chat_app(saver)
    app.invoke({"messages": [("user", "hi")]}, CONFIG)
    loaded = app.get_state(CONFIG).values["messages"]
    loaded[0].content = "tampered"
    loaded[1].tool_calls.append({"name": "x", "args": {}, "id": "x", "type": "tool_call"})
    fresh = app.get_state(CONFIG).values["messages"]
    assert fresh[0].content == "hi"
    assert len(fresh[1].tool_calls) == 1


def test_a_pydantic_state_with_messages(saver: BaseSaver) -> None:
    pydantic = pytest.importorskip("pydantic")

    class State(pydantic.BaseModel):
        messages: Annotated[list[AnyMessage], add_messages] = []
        turns: int = 0

    def reply(state: State) -> dict[str, Any]:
        return {
            "messages": [AIMessage(f"yo {state.messages[-1].content}")],
            "turns": state.turns + 1,
        }

    graph = StateGraph(State)
    graph.add_node("reply", reply)
    graph.add_edge(START, "reply")
    graph.add_edge("reply", END)
    app = graph.compile(checkpointer=saver)
    app.invoke({"messages": [("user", "hi")]}, CONFIG)
    out = app.invoke({"messages": "again"}, CONFIG)
    assert [m.content for m in out["messages"]] == ["hi", "yo hi", "again", "yo again"]
    assert [type(m) for m in out["messages"]] == [HumanMessage, AIMessage] * 2
    assert out["turns"] == 2
