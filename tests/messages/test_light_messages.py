"""threadline's light message classes behave as langchain-core's, which they stand in for.

Where langchain-core is installed, each case is also made with its classes and compared: same
fields, same repr, same ``pretty_repr``, same joined chunks.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from threadline.messages import light
from threadline.messages._chunks import parse_partial_json
from threadline.messages._convert import convert_to_messages, message_chunk_to_message

HAS_LANGCHAIN = importlib.util.find_spec("langchain_core") is not None
needs_langchain = pytest.mark.skipif(not HAS_LANGCHAIN, reason="compares with langchain-core")

CALL = {"name": "search", "args": {"q": "x"}, "id": "c1"}
USAGE = {"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
CASES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("HumanMessage", ("hi",), {}),
    ("HumanMessage", (), {"content": "hi", "id": "1", "name": "ada", "extra_field": 3}),
    ("HumanMessage", ([{"type": "text", "text": "a"}, "b"],), {"additional_kwargs": {"k": 1}}),
    ("SystemMessage", ("be brief",), {"response_metadata": {"m": 1}}),
    ("AIMessage", ("x",), {"id": "1"}),
    ("AIMessage", ("",), {"tool_calls": [CALL], "usage_metadata": USAGE}),
    ("AIMessage", ("x",), {"invalid_tool_calls": [{"name": "s", "args": "{", "id": "2"}]}),
    ("ToolMessage", ("42",), {"tool_call_id": "c1"}),
    ("ToolMessage", ("42",), {"tool_call_id": "c1", "status": "error", "artifact": [1]}),
    ("RemoveMessage", (), {"id": "9"}),
    ("AIMessageChunk", ("par",), {"tool_call_chunks": [{"name": "s", "args": '{"q"', "index": 0}]}),
]


def both(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
    import langchain_core.messages as lc

    return getattr(light, name)(*args, **kwargs), getattr(lc, name)(*args, **kwargs)


@needs_langchain
@pytest.mark.parametrize(("name", "args", "kwargs"), CASES)
def test_same_fields_repr_and_pretty_repr_as_langchain(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    ours, lc = both(name, args, kwargs)
    assert ours.model_dump() == lc.model_dump()
    assert repr(ours) == repr(lc)
    assert ours.pretty_repr() == lc.pretty_repr()
    assert ours.text == lc.text


def chunk_pairs() -> list[tuple[Any, ...]]:
    tool = {"name": "search", "args": '{"q": ', "id": "c1", "index": 0}
    return [
        (("Hel",), {"id": "lc_run--1"}, ("lo",), {"id": "provider-7"}),
        (
            ("",),
            {
                "tool_call_chunks": [tool],
                "usage_metadata": {"input_tokens": 2, "output_tokens": 1, "total_tokens": 3},
            },
            ("",),
            {
                "tool_call_chunks": [{"name": None, "args": '"x"}', "id": None, "index": 0}],
                "usage_metadata": {"input_tokens": 0, "output_tokens": 4, "total_tokens": 4},
                "chunk_position": "last",
            },
        ),
        (
            ([{"type": "text", "text": "a", "index": 0}],),
            {"additional_kwargs": {"fn": {"arguments": '{"a"'}}},
            ([{"type": "text", "text": "b", "index": 0}],),
            {"additional_kwargs": {"fn": {"arguments": ": 1}"}}},
        ),
    ]


@needs_langchain
@pytest.mark.parametrize(("a_args", "a_kwargs", "b_args", "b_kwargs"), chunk_pairs())
def test_chunks_join_as_langchains_do(
    a_args: tuple[Any, ...], a_kwargs: dict[str, Any], b_args: tuple[Any, ...], b_kwargs: dict
) -> None:
    light_a, lc_a = both("AIMessageChunk", a_args, a_kwargs)
    light_b, lc_b = both("AIMessageChunk", b_args, b_kwargs)
    joined, lc_joined = light_a + light_b, lc_a + lc_b
    assert joined.model_dump() == lc_joined.model_dump()
    from langchain_core.messages import message_chunk_to_message as lc_chunk_to_message

    complete = lc_chunk_to_message(lc_joined)
    assert message_chunk_to_message(joined).model_dump() == complete.model_dump()


def test_streamed_tool_call_pieces_become_one_tool_call() -> None:
    pieces = ['{"ci', 'ty": "Pa', 'ris"}']
    total = light.AIMessageChunk("", id="run-1")
    for i, piece in enumerate(pieces):
        first = {"name": "weather", "id": "c1"} if i == 0 else {"name": None, "id": None}
        total = total + light.AIMessageChunk(
            "", tool_call_chunks=[{**first, "args": piece, "index": 0}]
        )
    message = message_chunk_to_message(total)
    assert type(message) is light.AIMessage
    assert message.tool_calls == [
        {"name": "weather", "args": {"city": "Paris"}, "id": "c1", "type": "tool_call"}
    ]


def test_a_chunk_adds_only_chunks() -> None:
    with pytest.raises(TypeError):
        light.AIMessageChunk("a") + light.AIMessage("b")
    rest = [light.AIMessageChunk("b"), light.AIMessageChunk("c")]
    joined = light.AIMessageChunk("a") + rest
    assert joined.content == "abc"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ('{"a": [1, 2', {"a": [1, 2]}),
        ('{"a": "unfinished', {"a": "unfinished"}),
        ('{"a": ', {}),
        ('{"a": "esc\\', {"a": "esc"}),
        ("not json", None),
    ],
)
def test_partial_json(text: str, value: Any) -> None:
    assert parse_partial_json(text) == value


def test_constructor_errors_are_clear() -> None:
    with pytest.raises(TypeError, match="needs a content"):
        light.HumanMessage()
    with pytest.raises(TypeError, match="str or a list"):
        light.HumanMessage(42)
    with pytest.raises(ValueError, match="has type 'human', not 'ai'"):
        light.HumanMessage("x", type="ai")
    with pytest.raises(TypeError, match="needs a tool_call_id"):
        light.ToolMessage("x")
    with pytest.raises(ValueError, match="'success' or 'error'"):
        light.ToolMessage("x", tool_call_id="1", status="maybe")
    with pytest.raises(ValueError, match="does not support 'content'"):
        light.RemoveMessage(id="1", content="x")
    with pytest.raises(ValueError, match="the keys 'name', 'args', 'id'"):
        light.AIMessage("x", tool_calls=[{"name": "s"}])
    with pytest.raises(TypeError, match="id must be a str"):
        light.HumanMessage("x", id=5)


def test_messages_compare_by_class_and_fields_and_copy() -> None:
    message = light.AIMessage("x", id="1", tool_calls=[CALL])
    assert message == light.AIMessage("x", id="1", tool_calls=[CALL])
    assert message != light.AIMessageChunk("x", id="1", tool_calls=[CALL])
    assert message != light.AIMessage("y", id="1", tool_calls=[CALL])
    copy = message.model_copy(update={"content": "z"})
    assert (copy.content, copy.id, message.content) == ("z", "1", "x")
    deep = message.model_copy(deep=True)
    deep.tool_calls[0]["args"]["q"] = "changed"
    assert message.tool_calls[0]["args"] == {"q": "x"}


def test_conversions_follow_langchain() -> None:
    developer, tool, built = convert_to_messages(
        [
            {"role": "developer", "content": "rules"},
            {
                "role": "tool",
                "content": "r",
                "tool_call_id": "c",
                "artifact": [1],
                "status": "error",
            },
            {"lc": 1, "type": "constructor", "id": ["x", "AIMessage"], "kwargs": {"content": "k"}},
        ]
    )
    assert type(developer) is light.SystemMessage
    assert developer.additional_kwargs == {"__openai_role__": "developer"}
    assert (tool.artifact, tool.status, tool.additional_kwargs) == ([1], "error", {})
    assert type(built) is light.AIMessage and built.content == "k"
    with pytest.raises(NotImplementedError, match="role string, template"):
        convert_to_messages([("human", "a", "b")])


@needs_langchain
def test_conversions_give_what_langchain_gives() -> None:
    from langchain_core.messages import convert_to_messages as lc_convert

    values = [
        "hi",
        ("assistant", "yo"),
        {"role": "user", "content": None, "name": "ada", "id": "1", "custom": 2},
        {"type": "ai", "content": "c", "response_metadata": {"m": 1}, "tool_calls": [CALL]},
        {"role": "tool", "content": "r", "tool_call_id": "c", "artifact": [1]},
    ]
    for ours, lc in zip(convert_to_messages(values), lc_convert(values), strict=True):
        assert ours.model_dump() == lc.model_dump()


def test_a_pydantic_state_can_hold_light_messages() -> None:
    pydantic = pytest.importorskip("pydantic")

    class State(pydantic.BaseModel):
        messages: list[light.HumanMessage]

    assert State(messages=[light.HumanMessage("hi")]).messages[0].content == "hi"
    with pytest.raises(pydantic.ValidationError):
        State(messages=["not a message"])
