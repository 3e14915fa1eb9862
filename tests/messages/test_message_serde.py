"""Messages are stored by serde with no ``register`` call, through an allow-list only."""

from __future__ import annotations

import dataclasses
from typing import Any

import ormsgpack
import pytest

from threadline import serde
from threadline.errors import SerializationError
from threadline.messages import (
    USES_LANGCHAIN,
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from threadline.serde import wire as fmt
from threadline.serde.known import MESSAGE_CLASSES

FIELDS = [
    "content",
    "id",
    "type",
    "name",
    "additional_kwargs",
    "response_metadata",
    "tool_calls",
    "invalid_tool_calls",
    "usage_metadata",
    "tool_call_id",
    "artifact",
    "status",
    "tool_call_chunks",
]


def every_kind() -> list[Any]:
    """One message of each class, with every field it has set to something not default."""
    return [
        HumanMessage(
            [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "u"}}],
            id="h1",
            name="ada",
            additional_kwargs={"k": [1, 2]},
        ),
        SystemMessage("be brief", id="s1"),
        AIMessage(
            "calling",
            id="a1",
            tool_calls=[{"name": "search", "args": {"q": "x", "n": 2}, "id": "c1"}],
            invalid_tool_calls=[
                {
                    "name": "bad",
                    "args": "{oops",
                    "id": "c2",
                    "error": "bad json",
                    "type": "invalid_tool_call",
                }
            ],
            usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
            response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
        ),
        ToolMessage(
            "42",
            tool_call_id="c1",
            id="t1",
            name="search",
            artifact={"raw": [4, 2]},
            status="error",
        ),
        RemoveMessage(id="h1"),
        AIMessageChunk(
            "par",
            id="run-1",
            tool_call_chunks=[{"name": "search", "args": '{"q": "y"}', "id": "c3", "index": 0}],
        ),
    ]


def same(loaded: Any, original: Any) -> None:
    assert type(loaded) is type(original)
    assert loaded == original
    for field in FIELDS:
        assert getattr(loaded, field, None) == getattr(original, field, None), field


def test_every_message_class_round_trips_with_all_its_fields() -> None:
    messages = every_kind()
    loaded = serde.loads(serde.dumps({"messages": messages}))["messages"]
    assert len(loaded) == len(messages)
    for got, want in zip(loaded, messages, strict=True):
        same(got, want)


def test_extra_attributes_are_kept() -> None:
    (message,) = serde.loads(serde.dumps([HumanMessage("hi", id="1", example=True)]))
    assert message.example is True


def test_through_a_compressing_and_encrypting_serializer() -> None:
    sealed = serde.Serializer(compress_threshold=0, encryption_key=b"k" * 32, key_id="k1")
    messages = every_kind() * 20
    assert sealed.loads(sealed.dumps(messages)) == messages


def test_a_value_inside_a_message_that_cannot_be_stored_is_named() -> None:
    message = ToolMessage("x", tool_call_id="c", artifact=object())
    with pytest.raises(SerializationError) as caught:
        serde.dumps({"messages": [message]}, path_prefix="state")
    assert caught.value.path == "state.messages[0].artifact"


def test_a_lookalike_class_from_another_module_is_not_stored() -> None:
    class HumanMessage:  # same name, not the real class
        content = "x"

    with pytest.raises(SerializationError, match="is not supported"):
        serde.dumps([HumanMessage()])


def forged(name: str, fields: dict[str, Any]) -> bytes:
    record = ormsgpack.packb([name, fields])
    return fmt.PLAIN_HEADER + ormsgpack.packb(ormsgpack.Ext(fmt.EXT_RECORD, record))


def test_a_stored_name_outside_the_allow_list_is_refused_without_importing_it() -> None:
    for name in ("threadline.messages.os", "langchain_core.messages.HumanMessage", "os.system"):
        with pytest.raises(SerializationError, match="no class is registered"):
            serde.loads(forged(name, {"content": "x"}))


def test_stored_fields_are_validated_when_rebuilt() -> None:
    with pytest.raises(SerializationError, match=r"cannot rebuild .*\.HumanMessage"):
        serde.loads(forged("threadline.messages.HumanMessage", {"content": 12345}))


def test_the_allow_list_names_message_classes_only() -> None:
    assert all(name.endswith(("Message", "MessageChunk")) for name in MESSAGE_CLASSES)
    assert "BaseMessage" not in MESSAGE_CLASSES


@pytest.mark.skipif(not USES_LANGCHAIN, reason="langchain-core's own extra classes")
def test_langchain_only_classes_round_trip_too() -> None:
    from langchain_core.messages import (
        ChatMessage,
        FunctionMessage,
        HumanMessageChunk,
        ToolMessageChunk,
    )

    messages = [
        ChatMessage("c", role="critic", id="1"),
        FunctionMessage("f", name="fn", id="2"),
        HumanMessageChunk("h", id="3"),
        ToolMessageChunk("t", tool_call_id="c", id="4"),
    ]
    loaded = serde.loads(serde.dumps(messages))
    for got, want in zip(loaded, messages, strict=True):
        same(got, want)
    assert loaded[0].role == "critic"


def test_the_message_names_cannot_be_taken_by_a_registered_class() -> None:
    @dataclasses.dataclass
    class Impostor:
        text: str

    with pytest.raises(ValueError, match="threadline's own"):
        serde.register(Impostor, name="threadline.messages.HumanMessage")
