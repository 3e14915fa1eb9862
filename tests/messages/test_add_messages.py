"""``add_messages`` merges as LangGraph's does (langgraph/graph/message.py, 1.x).

These run with whichever message classes ``threadline.messages`` uses (see conftest.py).
"""

from __future__ import annotations

import uuid
from typing import get_type_hints

import pytest

from threadline.errors import InvalidMessageError
from threadline.messages import (
    REMOVE_ALL_MESSAGES,
    USES_LANGCHAIN,
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    MessagesState,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    add_messages,
)


def is_uuid4(text: str) -> bool:
    return uuid.UUID(text).version == 4


def test_appends_and_keeps_ids() -> None:
    left = [HumanMessage(content="Hello", id="1")]
    right = [AIMessage(content="Hi there!", id="2")]
    assert add_messages(left, right) == [
        HumanMessage(content="Hello", id="1"),
        AIMessage(content="Hi there!", id="2"),
    ]
    assert left == [HumanMessage(content="Hello", id="1")]  # a new list


def test_a_message_with_a_known_id_replaces_it_in_place() -> None:
    left = [HumanMessage("a", id="1"), AIMessage("b", id="2"), HumanMessage("c", id="3")]
    merged = add_messages(left, [AIMessage("b, edited", id="2"), HumanMessage("d", id="4")])
    assert [(m.id, m.content) for m in merged] == [
        ("1", "a"),
        ("2", "b, edited"),
        ("3", "c"),
        ("4", "d"),
    ]
    assert type(merged[1]) is AIMessage


def test_missing_ids_get_uuid4_ids_set_on_the_messages_themselves() -> None:
    old = HumanMessage("old")
    new = AIMessage("new")
    merged = add_messages([old], new)
    assert merged == [old, new]
    assert is_uuid4(old.id) and is_uuid4(new.id) and old.id != new.id  # as LangGraph: in place


def test_message_likes_are_coerced() -> None:
    merged = add_messages(
        [("user", "hi"), {"role": "assistant", "content": "hello", "id": "a1"}],
        ["a str", ("system", "be brief"), {"role": "tool", "content": "42", "tool_call_id": "c"}],
    )
    kinds = [type(m) for m in merged]
    assert kinds == [HumanMessage, AIMessage, HumanMessage, SystemMessage, ToolMessage]
    assert [m.content for m in merged] == ["hi", "hello", "a str", "be brief", "42"]
    assert merged[1].id == "a1"
    assert merged[4].tool_call_id == "c"
    assert all(m.id for m in merged)


def test_a_single_message_or_message_like_is_one_item() -> None:
    assert [m.content for m in add_messages("first", "second")] == ["first", "second"]
    merged = add_messages([], AIMessage("one", id="x"))
    assert merged == [AIMessage("one", id="x")]


def test_dict_with_tool_calls_in_openai_shape() -> None:
    (message,) = add_messages(
        [],
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "function": {"name": "search", "arguments": '{"q": "x"}'}}],
        },
    )
    assert isinstance(message, AIMessage)
    assert message.tool_calls == [
        {"name": "search", "args": {"q": "x"}, "id": "c1", "type": "tool_call"}
    ]


def test_unknown_roles_and_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="Unexpected message type: 'robot'"):
        add_messages([], [("robot", "beep")])
    with pytest.raises(ValueError, match="must contain 'role' and 'content'"):
        add_messages([], [{"text": "no role"}])
    with pytest.raises(NotImplementedError, match="Unsupported message type"):
        add_messages([], [42])


def test_chunks_become_complete_messages() -> None:
    chunk = AIMessageChunk("Hel", id="run-1") + AIMessageChunk("lo")
    (message,) = add_messages([], [chunk])
    assert type(message) is AIMessage
    assert (message.content, message.id) == ("Hello", "run-1")


def test_remove_message_deletes_by_id() -> None:
    left = [HumanMessage("a", id="1"), AIMessage("b", id="2"), HumanMessage("c", id="3")]
    merged = add_messages(left, [RemoveMessage(id="2")])
    assert [m.id for m in merged] == ["1", "3"]


def test_removing_an_unknown_id_is_a_value_error_as_in_langgraph() -> None:
    with pytest.raises(InvalidMessageError) as caught:
        add_messages([HumanMessage("a", id="1")], [RemoveMessage(id="nope")])
    assert str(caught.value) == (
        "Attempting to delete a message with an ID that doesn't exist ('nope')"
    )
    assert isinstance(caught.value, ValueError)


def test_a_message_after_its_removal_in_the_same_update_brings_it_back() -> None:
    left = [HumanMessage("a", id="1")]
    merged = add_messages(left, [RemoveMessage(id="1"), HumanMessage("a again", id="1")])
    assert [(m.id, m.content) for m in merged] == [("1", "a again")]


def test_remove_all_keeps_only_what_follows_it() -> None:
    left = [HumanMessage("a", id="1"), AIMessage("b", id="2")]
    right = [HumanMessage("lost", id="9"), RemoveMessage(id=REMOVE_ALL_MESSAGES), "fresh start"]
    merged = add_messages(left, right)
    assert [m.content for m in merged] == ["fresh start"]
    assert REMOVE_ALL_MESSAGES == "__remove_all__"


def test_remove_all_alone_empties_the_list() -> None:
    assert add_messages([HumanMessage("a")], [RemoveMessage(id=REMOVE_ALL_MESSAGES)]) == []


def test_only_one_side_given_is_an_error() -> None:
    with pytest.raises(ValueError, match="Only received: 'left'"):
        add_messages([HumanMessage("a")], None)
    with pytest.raises(ValueError, match="Only received: 'right'"):
        add_messages(None, [HumanMessage("a")])


def test_called_without_lists_it_returns_the_reducer() -> None:
    reducer = add_messages()
    assert [m.content for m in reducer(["a"], ["b"])] == ["a", "b"]


def test_an_unknown_format_is_refused_when_the_reducer_is_made() -> None:
    with pytest.raises(ValueError, match="Unrecognized format='anthropic'"):
        add_messages(format="anthropic")


@pytest.mark.skipif(not USES_LANGCHAIN, reason="the OpenAI format is langchain-core's")
def test_langchain_openai_format_converts_contents() -> None:
    reducer = add_messages(format="langchain-openai")
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "1"}}
    (message,) = reducer([], [{"role": "user", "content": [{"type": "text", "text": "Hi"}, image]}])
    assert isinstance(message, HumanMessage)
    assert message.content == [
        {"type": "text", "text": "Hi"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,1"}},
    ]


@pytest.mark.skipif(USES_LANGCHAIN, reason="refused only without langchain-core")
def test_langchain_openai_format_without_langchain_is_refused_clearly() -> None:
    with pytest.raises(InvalidMessageError, match=r"pip install 'threadline\[langchain\]'"):
        add_messages(format="langchain-openai")


def test_messages_state_is_a_typeddict_whose_key_uses_add_messages() -> None:
    hints = get_type_hints(MessagesState, include_extras=True)
    assert list(hints) == ["messages"]
    assert hints["messages"].__metadata__ == (add_messages,)

    class State(MessagesState):
        summary: str

    assert list(get_type_hints(State)) == ["messages", "summary"]
