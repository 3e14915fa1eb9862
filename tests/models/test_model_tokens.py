"""Model tokens in ``stream_mode="messages"``: threadline's models report their own tokens."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from chat_server import ChatServer, Reply, completion, delta, usage_event

from threadline import END, START, StateGraph
from threadline.errors import ModelResponseError
from threadline.messages import AIMessageChunk, MessagesState
from threadline.models import OpenAIChatModel, ScriptedChatModel


def chat_graph(model: Any, *, asynchronous: bool = False) -> Any:
    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def async_agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", async_agent if asynchronous else agent)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    return graph.compile()


def test_invoke_streams_its_tokens_when_the_run_streams_messages(server: ChatServer) -> None:
    server.script(
        Reply(events=[delta("Hel"), delta("lo!", finish_reason="stop"), usage_event(3, 2)]),
        completion("Hello!"),
    )
    app = chat_graph(OpenAIChatModel(model="m", base_url=server.base_url))
    parts = list(app.stream({"messages": "hi"}, stream_mode="messages"))
    assert [(type(m), m.content) for m, _ in parts] == [
        (AIMessageChunk, "Hel"),
        (AIMessageChunk, "lo!"),
        (AIMessageChunk, ""),  # the usage event
    ]
    assert {meta["langgraph_node"] for _, meta in parts} == {"agent"}
    assert server.bodies[0]["stream"] is True
    # The returned message has the chunks' id: it is not sent again.
    assert {m.id for m, _ in parts} == {"chatcmpl-2"}
    out = app.invoke({"messages": "hi"})  # nothing listens for tokens: one plain request
    assert out["messages"][-1].content == "Hello!" and "stream" not in server.bodies[1]


def test_a_streamed_invoke_that_gets_no_tokens_is_an_error(server: ChatServer) -> None:
    server.script(Reply(events=[]))  # only [DONE]
    app = chat_graph(OpenAIChatModel(model="m", base_url=server.base_url))
    with pytest.raises(ModelResponseError, match="ended without sending anything"):
        list(app.stream({"messages": "hi"}, stream_mode="messages"))


def test_ainvoke_streams_its_tokens_too(server: ChatServer) -> None:
    server.script(Reply(events=[delta("a "), delta("b", finish_reason="stop")]))
    model = OpenAIChatModel(model="m", base_url=server.base_url, stream_usage=False)
    app = chat_graph(model, asynchronous=True)

    async def run() -> list[Any]:
        return [part async for part in app.astream({"messages": "hi"}, stream_mode="messages")]

    assert [m.content for m, _ in asyncio.run(run())] == ["a ", "b"]


def test_the_scripted_model_streams_its_reply_word_by_word() -> None:
    app = chat_graph(ScriptedChatModel(["one two three"]))
    parts = list(app.stream({"messages": "hi"}, stream_mode="messages"))
    assert [m.content for m, _ in parts] == ["one ", "two ", "three"]
    assert all(meta["langgraph_node"] == "agent" for _, meta in parts)
