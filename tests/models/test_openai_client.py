"""OpenAIChatModel against a real chat-completions server on 127.0.0.1 (see chat_server.py)."""

from __future__ import annotations

import asyncio
import functools
import json
import operator
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from chat_server import ChatServer, Reply, completion, delta, usage_event

from threadline import END, START, StateGraph
from threadline.checkpoint import SqliteSaver
from threadline.errors import (
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    ModelTimeoutError,
)
from threadline.messages import (
    AIMessage,
    AIMessageChunk,
    HumanMessage,
    MessagesState,
    SystemMessage,
    ToolMessage,
    message_chunk_to_message,
)
from threadline.models import ChatModel, OpenAIChatModel

CALL = {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}


def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather in a city."""
    return f"sunny in {city}"


def model_for(server: ChatServer, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel(model="test-model", base_url=server.base_url, **options)


def test_invoke_returns_the_reply_as_an_ai_message(server: ChatServer) -> None:
    server.script(completion("Hello there!", id="chatcmpl-9", usage=(7, 2)))
    model = model_for(server, api_key="sk-test", temperature=0.2)
    reply = model.invoke("hi", max_tokens=50)
    assert isinstance(model, ChatModel)
    assert isinstance(reply, AIMessage) and reply.content == "Hello there!"
    assert reply.id == "chatcmpl-9"
    assert reply.usage_metadata == {"input_tokens": 7, "output_tokens": 2, "total_tokens": 9}
    assert reply.response_metadata["finish_reason"] == "stop"
    assert reply.response_metadata["model_name"] == "test-model"
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["Authorization"] == "Bearer sk-test"
    assert request.body == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2,
        "max_tokens": 50,
    }


def test_the_api_key_comes_from_the_environment_or_is_not_sent(
    server: ChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script(completion("a"), completion("b"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    model_for(server).invoke("hi")
    monkeypatch.delenv("OPENAI_API_KEY")
    model_for(server).invoke("hi")
    assert server.requests[0].headers["Authorization"] == "Bearer sk-env"
    assert "Authorization" not in server.requests[1].headers
    assert "sk-env" not in repr(model_for(server, api_key="sk-env"))


def test_a_conversation_with_tool_calls_goes_over_the_wire_in_openai_form(
    server: ChatServer,
) -> None:
    server.script(completion("It is sunny in Paris."))
    history = [
        SystemMessage("You are helpful."),
        HumanMessage("Weather in Paris?", name="ada"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]),
        ToolMessage("sunny", tool_call_id="c1"),
    ]
    model_for(server).invoke(history)
    assert server.bodies[0]["messages"] == [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "Weather in Paris?", "name": "ada"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]


def test_bound_tools_are_sent_and_tool_calls_come_back(server: ChatServer) -> None:
    broken = {"id": "call_2", "name": "get_weather", "arguments": '{"city": '}
    server.script(completion(None, tool_calls=[CALL, broken], finish_reason="tool_calls"))
    model = model_for(server).bind_tools([get_weather], tool_choice="get_weather")
    reply = model.invoke("Weather in Paris?")
    assert reply.content == ""
    assert reply.tool_calls == [
        {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}
    ]
    (invalid,) = reply.invalid_tool_calls
    assert invalid["id"] == "call_2" and invalid["args"] == '{"city": '
    assert "not valid JSON" in invalid["error"]
    body = server.bodies[0]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    (tool,) = body["tools"]
    assert tool["type"] == "function"
    assert tool["function"]["name"] == "get_weather"
    assert tool["function"]["description"] == "Current weather in a city."
    params = tool["function"]["parameters"]
    assert params["required"] == ["city"] and set(params["properties"]) == {"city", "unit"}


def test_stream_yields_chunks_as_the_server_sends_them(server: ChatServer) -> None:
    gate = threading.Event()
    events = [delta("Hel"), delta("lo"), delta(" world", finish_reason="stop"), usage_event(4, 3)]
    server.script(Reply(events=events, gate=gate, gate_after=1))
    stream = model_for(server).stream("hi")
    first = next(stream)  # the server holds the rest until the gate opens
    assert isinstance(first, AIMessageChunk) and first.content == "Hel"
    gate.set()
    rest = list(stream)
    whole = message_chunk_to_message(functools.reduce(operator.add, [first, *rest]))
    assert whole.content == "Hello world" and whole.id == "chatcmpl-2"
    assert whole.usage_metadata == {"input_tokens": 4, "output_tokens": 3, "total_tokens": 7}
    assert whole.response_metadata["finish_reason"] == "stop"
    body = server.bodies[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}


def test_streamed_tool_calls_are_assembled_from_their_pieces(server: ChatServer) -> None:
    server.script(
        Reply(
            events=[
                delta(tool_calls=[_piece(0, id="call_a", name="get_weather", args="")]),
                delta(tool_calls=[_piece(0, args='{"city": ')]),
                delta(tool_calls=[_piece(0, args='"Oslo"}')]),
                delta(tool_calls=[_piece(1, id="call_b", name="get_weather", args='{"city"')]),
                delta(tool_calls=[_piece(1, args=': "Rome"}')], finish_reason="tool_calls"),
            ]
        )
    )
    chunks = list(model_for(server, stream_usage=False).stream("Oslo and Rome?"))
    assert [c["index"] for c in chunks[1].tool_call_chunks] == [0]
    whole = message_chunk_to_message(functools.reduce(operator.add, chunks))
    assert [(c["id"], c["args"]) for c in whole.tool_calls] == [
        ("call_a", {"city": "Oslo"}),
        ("call_b", {"city": "Rome"}),
    ]
    assert "stream_options" not in server.bodies[0]


def _piece(index: int, *, id: str | None = None, name: str | None = None, args: str) -> dict:
    function: dict[str, Any] = {"arguments": args}
    if name:
        function["name"] = name
    piece: dict[str, Any] = {"index": index, "function": function}
    if id:
        piece.update(id=id, type="function")
    return piece


def test_a_stream_cut_before_done_is_an_error(server: ChatServer) -> None:
    server.script(Reply(events=[delta("partial")], done=False))
    with pytest.raises(ModelResponseError, match=r"ended before its \[DONE\] event"):
        list(model_for(server).stream("hi"))


def test_an_error_event_in_a_stream_is_raised(server: ChatServer) -> None:
    server.script(Reply(events=[delta("a"), {"error": {"message": "out of memory"}}]))
    with pytest.raises(ModelResponseError, match=r"error mid-stream.*out of memory"):
        list(model_for(server).stream("hi"))


async def test_async_invoke_and_stream(server: ChatServer) -> None:
    server.script(
        completion("async hello"),
        Reply(events=[delta("a"), delta("b", finish_reason="stop")]),
    )
    model = model_for(server)
    assert (await model.ainvoke("hi")).content == "async hello"
    chunks = [chunk async for chunk in model.astream("hi")]
    assert [c.content for c in chunks] == ["a", "b"]


# ---------------------------------------------------------------------- retries and errors
def test_429_is_retried_after_the_servers_retry_after(server: ChatServer) -> None:
    limited = {"error": {"message": "Rate limit reached"}}
    server.script(
        Reply(status=429, body=limited, headers={"Retry-After": "1"}), completion("finally")
    )
    started = time.monotonic()
    assert model_for(server).invoke("hi").content == "finally"
    assert time.monotonic() - started >= 1.0
    assert len(server.requests) == 2


def test_5xx_is_retried_with_backoff_then_reported(server: ChatServer) -> None:
    down = {"error": {"message": "upstream overloaded", "type": "server_error"}}
    server.script(*[Reply(status=503, body=down) for _ in range(2)])
    started = time.monotonic()
    with pytest.raises(ModelHTTPError) as caught:
        model_for(server, max_retries=1).invoke("hi")
    assert time.monotonic() - started >= 0.375  # the first backoff: 0.5 s less up to 25 % jitter
    error = caught.value
    assert error.status == 503 and error.url == server.base_url + "/chat/completions"
    assert error.server_message == "upstream overloaded" and json.loads(error.body) == down
    assert "returned 503 Service Unavailable after 2 attempts: upstream overloaded" in str(error)
    assert len(server.requests) == 2


def test_a_500_then_a_good_stream_streams(server: ChatServer) -> None:
    server.script(
        Reply(status=500, body="boom", headers={"Retry-After": "0"}),
        Reply(events=[delta("ok", finish_reason="stop")]),
    )
    assert [c.content for c in model_for(server).stream("hi")] == ["ok"]
    assert len(server.requests) == 2


def test_client_errors_are_not_retried_and_carry_the_servers_message(server: ChatServer) -> None:
    server.script(
        Reply(status=400, body={"error": {"message": "'messages' must not be empty"}}),
        Reply(status=401, body={"error": "invalid api key"}),  # Ollama's shape
    )
    with pytest.raises(ModelHTTPError, match="returned 400 Bad Request: 'messages' must not"):
        model_for(server).invoke("hi")
    with pytest.raises(ModelHTTPError, match=r"401 Unauthorized: invalid api key \(check api_key"):
        model_for(server).invoke("hi")
    assert len(server.requests) == 2


def test_a_wrong_base_url_says_so(server: ChatServer) -> None:
    model = OpenAIChatModel(model="m", base_url=server.base_url.removesuffix("/v1"))
    with pytest.raises(ModelHTTPError, match=r"404 Not Found: no such path \(check base_url"):
        model.invoke("hi")


def test_a_slow_server_times_out(server: ChatServer) -> None:
    server.script(Reply(body=completion("late"), delay=2))
    started = time.monotonic()
    with pytest.raises(ModelTimeoutError, match="timed out"):
        model_for(server, timeout=0.3, max_retries=0).invoke("hi")
    assert time.monotonic() - started < 1.5


def test_a_timeout_is_retried(server: ChatServer) -> None:
    server.script(Reply(body=completion("late"), delay=2), completion("on time"))
    assert model_for(server, timeout=0.5, max_retries=1).invoke("hi").content == "on time"


def test_an_unreachable_server_is_a_connection_error() -> None:
    with ChatServer() as stopped:
        url = stopped.base_url
    with pytest.raises(ModelConnectionError, match=r"failed \(2 attempts\): ConnectError"):
        OpenAIChatModel(model="m", base_url=url, max_retries=1).invoke("hi")


def test_a_malformed_body_is_a_response_error(server: ChatServer) -> None:
    server.script(Reply(body="<html>proxy error</html>"), {"object": "chat.completion"})
    with pytest.raises(ModelResponseError, match=r"not JSON.*proxy error"):
        model_for(server).invoke("hi")
    with pytest.raises(ModelResponseError, match="the reply has no choices"):
        model_for(server).invoke("hi")


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="needs a model name"):
        OpenAIChatModel(model="")
    with pytest.raises(ValueError, match="max_retries must be an int >= 0"):
        OpenAIChatModel(model="m", max_retries=-1)


# ---------------------------------------------------------------------- structured output
def test_structured_output_with_a_pydantic_model(server: ChatServer) -> None:
    pydantic = pytest.importorskip("pydantic")

    class Weather(pydantic.BaseModel):
        city: str
        degrees: float

    server.script(completion(json.dumps({"city": "Oslo", "degrees": -3.5})), completion("{}"))
    structured = model_for(server).with_structured_output(Weather, strict=True)
    assert structured.invoke("Weather in Oslo?") == Weather(city="Oslo", degrees=-3.5)
    sent = server.bodies[0]["response_format"]
    assert sent["type"] == "json_schema"
    assert sent["json_schema"]["name"] == "Weather" and sent["json_schema"]["strict"] is True
    assert sent["json_schema"]["schema"]["required"] == ["city", "degrees"]
    with pytest.raises(ModelResponseError, match="does not match Weather"):
        structured.invoke("again")


async def test_structured_output_with_a_typed_dict(server: ChatServer) -> None:
    pytest.importorskip("pydantic")
    from typing_extensions import TypedDict

    class Person(TypedDict):
        name: str
        age: int

    server.script(completion('{"name": "Ada", "age": 36}'))
    structured = model_for(server).with_structured_output(Person)
    assert await structured.ainvoke("Who?") == {"name": "Ada", "age": 36}
    assert server.bodies[0]["response_format"]["json_schema"]["schema"]["required"] == [
        "name",
        "age",
    ]


# ---------------------------------------------------------------------- in a graph
def test_a_checkpointed_chat_graph_sends_the_whole_history(
    server: ChatServer, tmp_path: Path
) -> None:
    server.script(
        completion(None, tool_calls=[CALL], finish_reason="tool_calls", id="chatcmpl-a"),
        completion("Sunny in Paris.", id="chatcmpl-b"),
        completion("You asked about Paris.", id="chatcmpl-c"),
    )
    model = model_for(server).bind_tools([get_weather])

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    def tools(state: MessagesState) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls
        return {
            "messages": [ToolMessage(get_weather(**c["args"]), tool_call_id=c["id"]) for c in calls]
        }

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges(
        "agent", lambda s: "tools" if s["messages"][-1].tool_calls else END, ["tools", END]
    )
    graph.add_edge("tools", "agent")
    config = {"configurable": {"thread_id": "t1"}}
    with SqliteSaver(tmp_path / "chat.db") as saver:
        app = graph.compile(checkpointer=saver)
        asyncio.run(app.ainvoke({"messages": [("user", "Weather in Paris?")]}, config))
        out = asyncio.run(app.ainvoke({"messages": [("user", "What did I ask?")]}, config))
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai", "human", "ai"]
    assert [m.id for m in out["messages"] if m.type == "ai"] == [
        "chatcmpl-a",
        "chatcmpl-b",
        "chatcmpl-c",
    ]
    assert [m["role"] for m in server.bodies[2]["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert server.bodies[2]["messages"][2] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "sunny in Paris",
    }


def test_options_the_call_itself_sets_are_refused(server: ChatServer) -> None:
    with pytest.raises(TypeError, match="'stream' is set by the call itself"):
        model_for(server).invoke("hi", stream=True)
    with pytest.raises(TypeError, match="'messages' is set by the call itself"):
        model_for(server).bind(messages=[]).invoke("hi")
    assert server.requests == []
