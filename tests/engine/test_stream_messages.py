"""The messages stream mode: tokens then the messages nodes return, with their metadata,
with or without langchain_core.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from stream_graphs import (
    AIMessage,
    AIMessageChunk,
    Chat,
    HumanMessage,
    fake_chat,
    model,
)

from threadline import (
    END,
    START,
    StateGraph,
    get_message_writer,
)

# ------------------------------------------------------------------ messages


def chat_graph():
    def call(state: Chat) -> dict:
        return {"messages": [model("hello world").invoke(state["messages"])]}

    def plain(state: Chat) -> dict:
        return {"messages": [AIMessage(content="from node", id="n1"), AIMessage("no id")]}

    def echo(state: Chat) -> dict:
        return {"messages": state["messages"]}  # nothing new: not streamed again

    def quiet(state: Chat) -> dict:
        muted = fake_chat.FakeListChatModel(responses=["ab"]).with_config(tags=["nostream"])
        return {"messages": [muted.invoke(state["messages"])]}

    g = StateGraph(Chat)
    g.add_sequence([call, plain, echo, quiet])
    g.add_edge(START, "call")
    g.add_edge("quiet", END)
    return g.compile()


def test_messages_streams_tokens_then_the_messages_nodes_return():
    chunks = list(
        chat_graph().stream({"messages": [HumanMessage("hi", id="h")]}, stream_mode="messages")
    )
    texts = [(type(m).__name__, m.content, meta["langgraph_node"]) for m, meta in chunks]
    assert texts == [
        ("AIMessageChunk", "hello", "call"),
        ("AIMessageChunk", " ", "call"),
        ("AIMessageChunk", "world", "call"),
        ("AIMessage", "from node", "plain"),
        ("AIMessage", "no id", "plain"),
        ("AIMessage", "ab", "quiet"),  # a muted model's message still shows, once, when returned
    ]
    assert chunks[4][0].id  # a returned message without an id is given one
    token_meta = chunks[0][1]
    assert token_meta["langgraph_step"] == 1
    assert token_meta["langgraph_triggers"] == ("branch:to:call",)
    assert token_meta["langgraph_path"] == ("__pregel_pull", "call")
    assert token_meta["langgraph_checkpoint_ns"].startswith("call:")
    assert token_meta["checkpoint_ns"] == token_meta["langgraph_checkpoint_ns"]
    assert token_meta["ls_provider"] == "genericfakechatmodel"
    assert token_meta["ls_integration"] == "langchain_chat_model"
    assert chunks[3][1] == {
        "ls_integration": "langgraph",
        "langgraph_step": 2,
        "langgraph_node": "plain",
        "langgraph_triggers": ("branch:to:plain",),
        "langgraph_path": ("__pregel_pull", "plain"),
        "langgraph_checkpoint_ns": chunks[3][1]["langgraph_checkpoint_ns"],
    }


def test_messages_metadata_carries_the_configs_metadata_thread_and_tags():
    graph = chat_graph()
    config = {"metadata": {"user": "u1"}, "tags": ["web"], "configurable": {"thread_id": "t9"}}
    chunks = list(graph.stream({"messages": []}, config, stream_mode="messages"))
    token_meta, node_meta = chunks[0][1], chunks[3][1]
    assert list(token_meta)[:3] == ["user", "thread_id", "ls_integration"]
    assert token_meta["tags"] == ["web"] and token_meta["thread_id"] == "t9"
    assert node_meta["user"] == "u1" and "tags" not in node_meta


def test_messages_and_updates_arrive_in_the_order_they_happen():
    chunks = list(chat_graph().stream({"messages": []}, stream_mode=["messages", "updates"]))
    order = [
        (mode, data[1]["langgraph_node"] if mode == "messages" else next(iter(data)))
        for mode, data in chunks
    ]
    assert order[:5] == [("messages", "call")] * 3 + [("updates", "call"), ("messages", "plain")]


async def test_astream_messages_from_async_and_sync_nodes():
    async def acall(state: Chat) -> dict:
        return {"messages": [await model("async hi").ainvoke(state["messages"])]}

    g = StateGraph(Chat)
    g.add_node("acall", acall)
    g.add_edge(START, "acall")
    g.add_edge("acall", END)
    chunks = [c async for c in g.compile().astream({"messages": []}, stream_mode="messages")]
    assert [m.content for m, _ in chunks] == ["async", " ", "hi"]
    sync_chunks = [c async for c in chat_graph().astream({"messages": []}, stream_mode="messages")]
    assert [m.content for m, _ in sync_chunks][:3] == ["hello", " ", "world"]


def test_get_message_writer_streams_tokens_of_any_model():
    def call(state: Chat) -> dict:
        write = get_message_writer()
        for token in ("to", "ken"):
            write(AIMessageChunk(content=token, id="m1"), {"ls_provider": "mine"})
        return {"messages": [AIMessage(content="token", id="m1")]}  # already sent by id

    g = StateGraph(Chat)
    g.add_node("call", call)
    g.add_edge(START, "call")
    g.add_edge("call", END)
    graph = g.compile()
    chunks = list(graph.stream({"messages": []}, stream_mode="messages"))
    assert [(m.content, meta["ls_provider"], meta["langgraph_node"]) for m, meta in chunks] == [
        ("to", "mine", "call"),
        ("ken", "mine", "call"),
    ]
    assert graph.invoke({"messages": []})["messages"][0].content == "token"  # a no-op writer


def test_messages_mode_works_without_langchain_core():
    """Without langchain-core, get_message_writer still feeds the mode, and nothing breaks."""
    program = textwrap.dedent(
        """
        import sys
        sys.modules["langchain_core"] = None  # importing it now fails
        from typing import TypedDict
        from threadline import END, START, StateGraph, get_message_writer

        class S(TypedDict):
            text: str

        def node(state):
            get_message_writer()("tok")
            return {"text": "done"}

        g = StateGraph(S)
        g.add_node("node", node)
        g.add_edge(START, "node")
        g.add_edge("node", END)
        chunks = list(g.compile().stream({"text": ""}, stream_mode="messages"))
        assert [(c, m["langgraph_node"]) for c, m in chunks] == [("tok", "node")], chunks
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
