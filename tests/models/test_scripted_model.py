"""ScriptedChatModel: a script of replies, played back in order, in graphs and on its own."""

from __future__ import annotations

import functools
import operator
from typing import Any

import pytest

from threadline import END, START, StateGraph
from threadline.errors import ModelResponseError, ScriptExhaustedError
from threadline.messages import (
    USES_LANGCHAIN,
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    MessagesState,
    SystemMessage,
    ToolMessage,
    message_chunk_to_message,
)
from threadline.models import ChatModel, ScriptedChatModel, as_chat_model

needs_langchain = pytest.mark.skipif(not USES_LANGCHAIN, reason="needs langchain-core")


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def joined(chunks: list[AIMessageChunk]) -> AIMessage:
    return message_chunk_to_message(functools.reduce(operator.add, chunks))


def test_replies_come_in_order_as_ai_messages() -> None:
    model = ScriptedChatModel(
        [
            "Hello!",
            {"content": "", "tool_calls": [{"name": "add", "args": {"a": 1, "b": 2}, "id": "c1"}]},
            AIMessage("Done.", id="given"),
        ]
    )
    first = model.invoke("hi")
    second = model.invoke([("user", "add 1 and 2")])
    third = model.invoke([SystemMessage("be brief"), HumanMessage("and?")])
    assert isinstance(first, AIMessage) and first.content == "Hello!" and first.id
    assert second.tool_calls == [
        {"name": "add", "args": {"a": 1, "b": 2}, "id": "c1", "type": "tool_call"}
    ]
    assert third == AIMessage("Done.", id="given")
    assert model.remaining == 0
    assert [call.messages[-1].content for call in model.calls] == ["hi", "add 1 and 2", "and?"]
    assert [type(m).__name__ for m in model.calls[2].messages] == ["SystemMessage", "HumanMessage"]


def test_each_reply_gets_fresh_ids_so_a_replayed_script_repeats_none() -> None:
    script = ["a", {"tool_calls": [{"name": "add", "args": {}}]}]
    one, two = ScriptedChatModel(script), ScriptedChatModel(script)
    first = [one.invoke("x"), one.invoke("x")]
    again = [two.invoke("x"), two.invoke("x")]
    assert first[0].id != again[0].id
    assert first[1].tool_calls[0]["id"] != again[1].tool_calls[0]["id"]
    assert first[1].tool_calls[0]["id"].startswith("call_")


def test_running_out_of_replies_is_a_clear_error() -> None:
    model = ScriptedChatModel(["only one"])
    model.invoke("first")
    with pytest.raises(ScriptExhaustedError, match=r"1 replies .* call 2 .* 'second'"):
        model.invoke("second")


def test_an_exception_in_the_script_is_raised_by_its_call() -> None:
    model = ScriptedChatModel([TimeoutError("server slow"), "recovered"])
    with pytest.raises(TimeoutError, match="server slow"):
        model.invoke("hi")
    assert model.invoke("hi").content == "recovered"


def test_bad_script_entries_are_refused_up_front() -> None:
    with pytest.raises(TypeError, match="script reply 2 is a int"):
        ScriptedChatModel(["ok", 42])
    with pytest.raises(ValueError, match="script reply 1: each tool call needs a 'name'"):
        ScriptedChatModel([{"tool_calls": [{"args": {}}]}])
    with pytest.raises(ValueError, match="'add' args must be a dict"):
        ScriptedChatModel([{"tool_calls": [{"name": "add", "args": "1, 2"}]}])


def test_stream_sends_the_text_word_by_word_and_tool_calls_last() -> None:
    model = ScriptedChatModel(
        [
            "The answer  is 42.",
            {
                "content": "Adding them.",
                "tool_calls": [{"name": "add", "args": {"a": 1}, "id": "c9"}],
            },
        ]
    )
    chunks = list(model.stream("q"))
    assert [c.content for c in chunks] == ["The ", "answer  ", "is ", "42."]
    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert joined(chunks).content == "The answer  is 42."

    chunks = list(model.stream("q"))
    assert [c.tool_call_chunks for c in chunks[:-1]] == [[]]
    whole = joined(chunks)
    assert whole.content == "Adding them."
    assert whole.tool_calls == [{"name": "add", "args": {"a": 1}, "id": "c9", "type": "tool_call"}]


async def test_async_calls_play_the_same_script() -> None:
    model = ScriptedChatModel(["one two", "three"])
    chunks = [chunk async for chunk in model.astream("go")]
    assert [c.content for c in chunks] == ["one ", "two"]
    assert (await model.ainvoke("go")).content == "three"


def test_bind_tools_records_the_tools_and_returns_the_same_model() -> None:
    model = ScriptedChatModel(["ok"])
    bound = model.bind_tools([add], tool_choice="add", parallel_tool_calls=False)
    assert bound is model and model.tools == [add]
    assert model.tool_choice == {"type": "function", "function": {"name": "add"}}
    bound.invoke("hi", temperature=0)
    sent = model.calls[0].kwargs
    assert sent["tools"][0]["function"]["name"] == "add"
    assert sent["tools"][0]["function"]["parameters"]["required"] == ["a", "b"]
    assert sent["parallel_tool_calls"] is False and sent["temperature"] == 0
    with pytest.raises(ValueError, match="tool_choice 'mul' is neither"):
        model.bind_tools([add], tool_choice="mul")
    with pytest.raises(TypeError, match="cannot offer 42 to a model as a tool"):
        model.bind_tools([42])


def test_structured_output_parses_the_scripted_json() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Answer(pydantic.BaseModel):
        value: int
        unit: str

    model = ScriptedChatModel(['{"value": 4, "unit": "cm"}', '```json\n{"value": 5}\n```'])
    structured = model.with_structured_output(Answer)
    assert structured.invoke("how long?") == Answer(value=4, unit="cm")
    sent = model.calls[0].kwargs["response_format"]
    assert sent["type"] == "json_schema" and sent["json_schema"]["name"] == "Answer"
    with pytest.raises(
        ModelResponseError, match=r"(?s)does not match Answer.*unit.*Field required"
    ):
        structured.invoke("and now?")


def test_structured_output_with_a_json_schema_dict_and_include_raw() -> None:
    schema = {"title": "city", "type": "object", "properties": {"name": {"type": "string"}}}
    schema["required"] = ["name"]
    model = ScriptedChatModel(['{"name": "Oslo"}', '{"nom": "Paris"}'])
    structured = model.with_structured_output(schema, include_raw=True)
    first = structured.invoke("capital of Norway?")
    assert first["parsed"] == {"name": "Oslo"} and first["parsing_error"] is None
    assert first["raw"].content == '{"name": "Oslo"}'
    second = structured.invoke("capital of France?")
    assert second["parsed"] is None
    assert "missing required field(s) 'name'" in str(second["parsing_error"])


def test_a_tool_calling_loop_in_a_graph() -> None:
    model = ScriptedChatModel(
        [
            {"content": "", "tool_calls": [{"name": "add", "args": {"a": 2, "b": 3}, "id": "c1"}]},
            "2 + 3 = 5",
        ]
    ).bind_tools([add])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: MessagesState) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls
        return {
            "messages": [
                ToolMessage(str(add(**c["args"])), tool_call_id=c["id"], name=c["name"])
                for c in calls
            ]
        }

    def route(state: MessagesState) -> str:
        return "tools" if state["messages"][-1].tool_calls else END

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["tools", END])
    graph.add_edge("tools", "agent")
    out = graph.compile().invoke({"messages": [("user", "what is 2 + 3?")]})
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]
    assert out["messages"][2].content == "5" and out["messages"][2].tool_call_id == "c1"
    assert out["messages"][-1].content == "2 + 3 = 5"


def test_chat_models_are_recognised_and_other_things_refused() -> None:
    model = ScriptedChatModel([])
    assert as_chat_model(model) is model and isinstance(model, ChatModel)
    with pytest.raises(TypeError, match=r"expected a chat model .* got str without invoke"):
        as_chat_model("gpt-4o")


@needs_langchain
def test_langchain_chat_models_are_accepted_as_they_are() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    model = GenericFakeChatModel(messages=iter([AIMessage("from langchain")]))
    assert as_chat_model(model) is model and isinstance(model, ChatModel)
    assert model.invoke("hi").content == "from langchain"


@needs_langchain
def test_langchain_tools_are_offered_with_their_schema() -> None:
    from langchain_core.tools import tool

    @tool
    def multiply(a: int, b: int) -> int:
        """Multiply two numbers."""
        return a * b

    model = ScriptedChatModel(["ok"]).bind_tools([multiply, add], tool_choice="any")
    model.invoke("hi")
    sent = model.calls[0].kwargs
    spec = sent["tools"][0]["function"]
    assert spec["name"] == "multiply" and spec["description"] == "Multiply two numbers."
    assert set(spec["parameters"]["properties"]) == {"a", "b"}
    assert sent["tool_choice"] == "required"
