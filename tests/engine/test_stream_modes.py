"""Stream modes as LangGraph 1.x shapes them: debug, tasks, checkpoints, values, messages.

The expected chunks below are what LangGraph 1.2.22 yields for the same graphs (ids and
timestamps aside).
"""

from __future__ import annotations

import operator
import subprocess
import sys
import textwrap
from typing import Annotated, TypedDict

import pytest

from threadline import (
    END,
    START,
    Command,
    Send,
    StateGraph,
    get_message_writer,
    get_stream_writer,
    interrupt,
)
from threadline.checkpoint.memory import MemorySaver
from threadline.errors import ConfigError

fake_chat = pytest.importorskip("langchain_core.language_models.fake_chat_models")
messages = pytest.importorskip("langchain_core.messages")
AIMessage, AIMessageChunk, HumanMessage = (
    messages.AIMessage,
    messages.AIMessageChunk,
    messages.HumanMessage,
)


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    answer: str


class Chat(TypedDict):
    messages: Annotated[list, operator.add]


def cfg(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


def append(name: str):
    def node(state: State) -> dict:
        return {"items": [name]}

    return node


def diamond(**compile_kw):
    """START -> a -> (b, c in parallel) -> END; c writes nothing."""
    g = StateGraph(State)
    g.add_node("a", append("a"))
    g.add_node("b", append("b"))
    g.add_node("c", lambda s: None)
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("a", "c")
    g.add_edge("b", END)
    g.add_edge("c", END)
    return g.compile(**compile_kw)


def asking(saver):
    def ask(state: State) -> dict:
        return {"answer": interrupt("approve?")}

    g = StateGraph(State)
    g.add_node("prepare", append("prepare"))
    g.add_node("ask", ask)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver)


def model(text: str):
    return fake_chat.GenericFakeChatModel(messages=iter([AIMessage(content=text)]))


def by_step(events: list[dict]) -> list[tuple]:
    """Debug events without their ids and timestamps."""
    return [(e["type"], e["step"], e["payload"].get("name")) for e in events]


# ------------------------------------------------------------------ debug


def test_debug_without_a_checkpointer_has_task_events_only():
    events = list(diamond().stream({"items": ["in"]}, stream_mode="debug"))
    assert [(e["type"], e["step"], e["payload"]["name"]) for e in events[:2]] == [
        ("task", 1, "a"),
        ("task_result", 1, "a"),
    ]
    assert all(e["type"] != "checkpoint" for e in events)
    first = events[0]
    assert list(first) == ["step", "timestamp", "type", "payload"]
    assert list(first["payload"]) == ["id", "name", "input", "triggers"]
    assert first["payload"]["input"] == {"items": ["in"]}
    assert first["payload"]["triggers"] == ("branch:to:a",)
    result = events[1]["payload"]
    assert result == {
        "id": first["payload"]["id"],
        "name": "a",
        "error": None,
        "result": {"items": ["a"]},
        "interrupts": [],
    }
    c_result = next(e for e in events if e["type"] == "task_result" and e["payload"]["name"] == "c")
    assert c_result["payload"]["result"] == {}  # a node that returned None


def test_debug_with_a_checkpointer_wraps_every_checkpoint_and_task():
    events = list(
        diamond(checkpointer=MemorySaver()).stream({"items": ["in"]}, cfg(), stream_mode="debug")
    )
    shape = by_step(events)
    assert shape[:4] == [
        ("checkpoint", -1, None),
        ("checkpoint", 0, None),
        ("task", 1, "a"),
        ("task_result", 1, "a"),
    ]
    assert shape[4] == ("checkpoint", 1, None)
    assert shape[-1] == ("checkpoint", 2, None)
    checkpoint = events[1]["payload"]
    assert list(checkpoint) == ["config", "parent_config", "values", "metadata", "next", "tasks"]
    assert checkpoint["next"] == ["a"]
    # the task the checkpoint plans is the task that runs next
    assert checkpoint["tasks"][0]["id"] == events[2]["payload"]["id"]


# ------------------------------------------------------------------ tasks


def test_tasks_mode_yields_start_and_result_of_each_task():
    chunks = list(diamond().stream({"items": ["in"]}, stream_mode="tasks"))
    starts = [c for c in chunks if "triggers" in c]
    results = [c for c in chunks if "result" in c]
    assert [c["name"] for c in starts] == ["a", "b", "c"]
    assert sorted(c["name"] for c in results) == ["a", "b", "c"]
    assert starts[1]["input"] == {"items": ["in", "a"]}
    assert {c["id"] for c in starts} == {c["id"] for c in results}
    assert chunks[0]["name"] == "a" and chunks[1] == {
        "id": chunks[0]["id"],
        "name": "a",
        "error": None,
        "result": {"items": ["a"]},
        "interrupts": [],
    }


def test_task_triggers_name_joins_sends_and_edges_as_langgraph_does():
    def jump(state: State) -> Command:
        return Command(goto="k", update={"items": ["cmd"]})

    g = StateGraph(State)
    for name in ("x", "y", "z", "j", "k"):
        g.add_node(name, append(name))
    g.add_node("w", lambda arg: {"items": [arg]})
    g.add_node("cmd", jump, destinations=["k"])
    g.add_edge(START, "x")
    g.add_edge(START, "y")
    g.add_edge(["x", "y"], "z")
    g.add_conditional_edges("z", lambda s: [Send("w", "s1"), Send("w", "s2")])
    g.add_conditional_edges("w", lambda s: "j", ["j"])
    g.add_edge("j", "cmd")
    g.add_edge("k", END)
    starts = [c for c in g.compile().stream({"items": []}, stream_mode="tasks") if "triggers" in c]
    assert [(c["name"], c["triggers"]) for c in starts] == [
        ("x", ("branch:to:x",)),
        ("y", ("branch:to:y",)),
        ("z", ("branch:to:z", "join:x+y:z")),
        ("w", ("__pregel_push",)),
        ("w", ("__pregel_push",)),
        ("j", ("branch:to:j",)),
        ("cmd", ("branch:to:cmd",)),
        ("k", ("branch:to:k",)),
    ]
    assert [c["input"] for c in starts if c["name"] == "w"] == ["s1", "s2"]


def test_a_failed_task_reports_its_exception_and_an_interrupted_one_its_interrupts():
    def boom(state: State) -> dict:
        raise ValueError("boom")

    g = StateGraph(State)
    g.add_node("boom", boom)
    g.add_edge(START, "boom")
    g.add_edge("boom", END)
    chunks = []
    with pytest.raises(ValueError, match="boom"):
        for chunk in g.compile().stream({"items": []}, stream_mode="tasks"):
            chunks.append(chunk)
    error = chunks[-1]["error"]
    assert isinstance(error, ValueError) and chunks[-1]["result"] == {}

    graph = asking(MemorySaver())
    last = list(graph.stream({"items": []}, cfg(), stream_mode="tasks"))[-1]
    [pending] = graph.get_state(cfg()).interrupts
    assert last["name"] == "ask" and last["result"] == {}
    assert last["interrupts"] == [{"value": "approve?", "id": pending.id}]


def test_tasks_events_carry_the_configs_metadata_and_tags():
    config = {"metadata": {"user": "u1"}, "tags": ["web"]}
    starts = [c for c in diamond().stream({"items": []}, config, stream_mode="tasks")]
    assert starts[0]["metadata"] == {"user": "u1", "tags": ["web"]}
    assert "metadata" not in next(iter(diamond().stream({"items": []}, stream_mode="tasks")))


# ------------------------------------------------------------------ checkpoints


def test_checkpoints_mode_needs_a_checkpointer():
    assert list(diamond().stream({"items": []}, stream_mode="checkpoints")) == []


def test_checkpoints_mode_yields_each_saved_checkpoint(saver):
    graph = diamond(checkpointer=saver)
    chunks = list(graph.stream({"items": ["in"]}, cfg(), stream_mode="checkpoints"))
    history = list(graph.get_state_history(cfg()))[::-1]
    assert [c["config"] for c in chunks] == [
        {
            "configurable": {
                "checkpoint_ns": "",
                "thread_id": "t",
                "checkpoint_id": s.config["configurable"]["checkpoint_id"],
            }
        }
        for s in history
    ]
    assert chunks[0]["parent_config"] is None
    assert [c["parent_config"] for c in chunks[1:]] == [c["config"] for c in chunks[:-1]]
    assert [c["metadata"]["step"] for c in chunks] == [-1, 0, 1, 2]
    assert [c["next"] for c in chunks] == [["__start__"], ["a"], ["b", "c"], []]
    assert chunks[0]["values"] == {"items": []}
    assert chunks[-1]["values"] == {"items": ["in", "a", "b"]}
    assert chunks[2]["tasks"] == [
        {"id": chunks[2]["tasks"][0]["id"], "name": "b", "interrupts": (), "state": None},
        {"id": chunks[2]["tasks"][1]["id"], "name": "c", "interrupts": (), "state": None},
    ]


def test_a_resumed_run_streams_its_state_then_the_checkpoint_it_resumes_with_its_interrupt():
    graph = asking(MemorySaver())
    list(graph.stream({"items": []}, cfg()))
    [pending] = graph.get_state(cfg()).interrupts
    chunks = list(graph.stream(Command(resume="yes"), cfg(), stream_mode=["values", "checkpoints"]))
    assert chunks[0] == ("values", {"items": ["prepare"]})
    mode, resumed = chunks[1]
    assert mode == "checkpoints" and resumed["next"] == ["ask"]
    assert resumed["tasks"][0]["interrupts"] == ({"value": "approve?", "id": pending.id},)
    assert chunks[-2] == ("values", {"items": ["prepare"], "answer": "yes"})


def test_breakpoints_stream_the_checkpoint_they_stop_at():
    g = StateGraph(State)
    g.add_node("a", append("a"))
    g.add_node("b", append("b"))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", END)
    for kw in ({"interrupt_before": ["b"]}, {"interrupt_after": ["a"]}):
        graph = g.compile(checkpointer=MemorySaver(), **kw)
        chunks = list(graph.stream({"items": []}, cfg(), stream_mode=["checkpoints", "updates"]))
        assert chunks[-2][0] == "checkpoints" and chunks[-2][1]["next"] == ["b"]
        assert chunks[-1] == ("updates", {"__interrupt__": ()})


# ------------------------------------------------------------------ values


def test_values_skips_steps_that_wrote_nothing():
    g = StateGraph(State)
    g.add_node("none", lambda s: None)
    g.add_node("empty", lambda s: {})
    g.add_node("adds", append("c"))
    g.add_node("same", lambda s: {"items": []})  # a write, even if nothing changes
    g.add_edge(START, "none")
    g.add_edge("none", "empty")
    g.add_edge("empty", "adds")
    g.add_edge("adds", "same")
    g.add_edge("same", END)
    graph = g.compile()
    assert list(graph.stream({"items": ["in"]}, stream_mode="values")) == [
        {"items": ["in"]},
        {"items": ["in", "c"]},
        {"items": ["in", "c"]},
    ]
    # an input that writes no key yields no first chunk
    assert list(graph.stream({}, stream_mode="values")) == [{"items": ["c"]}, {"items": ["c"]}]


def test_an_interrupt_shows_in_values_with_the_state_and_then_the_siblings_writes():
    def ask(state: State) -> dict:
        return {"answer": interrupt("q")}

    g = StateGraph(State)
    g.add_node("ask", ask)
    g.add_node("ok", append("ok"))
    g.add_edge(START, "ask")
    g.add_edge(START, "ok")
    g.add_edge("ask", END)
    g.add_edge("ok", END)
    graph = g.compile(checkpointer=MemorySaver())
    chunks = list(graph.stream({"items": ["in"]}, cfg(), stream_mode="values"))
    [pending] = graph.get_state(cfg()).interrupts
    assert chunks == [
        {"items": ["in"]},
        {"items": ["in"], "__interrupt__": (pending,)},
        {"items": ["in", "ok"]},
    ]
    # resuming starts both tasks again and repeats the finished one's update, marked cached
    chunks = list(graph.stream(Command(resume="A"), cfg(), stream_mode=["tasks", "updates"]))
    shape = [(mode, c.get("name", c) if mode == "tasks" else c) for mode, c in chunks]
    assert shape == [
        ("tasks", "ask"),
        ("tasks", "ok"),
        ("updates", {"ok": {"items": ["ok"]}, "__metadata__": {"cached": True}}),
        ("updates", {"ask": {"answer": "A"}}),
        ("tasks", "ask"),
    ]


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


def subgraph_chat():
    def inner(state: Chat) -> dict:
        get_stream_writer()("custom from inner")
        return {"messages": [model("in sub").invoke(state["messages"])]}

    child = StateGraph(Chat)
    child.add_node("inner", inner)
    child.add_edge(START, "inner")
    child.add_edge("inner", END)

    def outer(state: Chat) -> dict:
        return {"messages": [model("outer says").invoke(state["messages"])]}

    g = StateGraph(Chat)
    g.add_node("outer", outer)
    g.add_node("child", child.compile())
    g.add_edge(START, "outer")
    g.add_edge("outer", "child")
    g.add_edge("child", END)
    return g.compile()


def test_a_subgraphs_tokens_stream_only_with_subgraphs_true():
    graph = subgraph_chat()
    plain = list(graph.stream({"messages": []}, stream_mode="messages"))
    assert [(m.content, meta["langgraph_node"]) for m, meta in plain] == [
        ("outer", "outer"),
        (" ", "outer"),
        ("says", "outer"),
        ("in sub", "child"),  # the subgraph's new message, as its node in this graph returned it
    ]
    nested = list(graph.stream({"messages": []}, stream_mode="messages", subgraphs=True))
    shape = [(ns[0].split(":")[0] if ns else "", m.content) for ns, (m, _) in nested]
    assert shape == [
        ("", "outer"),
        ("", " "),
        ("", "says"),
        ("child", "in"),
        ("child", " "),
        ("child", "sub"),
    ]
    inner_meta = nested[3][1][1]
    child_ns = nested[3][0][0]
    assert inner_meta["checkpoint_ns"] == child_ns
    assert inner_meta["langgraph_checkpoint_ns"].startswith(child_ns + "|inner:")


def test_subgraphs_true_tags_every_mode_with_the_namespace():
    modes = ["values", "updates", "custom", "debug", "tasks", "checkpoints", "messages"]
    graph = subgraph_chat()
    chunks = list(graph.stream({"messages": []}, stream_mode=modes, subgraphs=True))
    seen = {(ns[0].split(":")[0] if ns else "", mode) for ns, mode, _ in chunks}
    for mode in ("values", "updates", "debug", "tasks", "messages"):
        assert ("", mode) in seen and ("child", mode) in seen
    assert ("child", "custom") in seen and ("", "custom") not in seen
    assert not any(mode == "checkpoints" for _, mode in seen)  # no checkpointer, none


def test_subgraphs_true_streams_subgraph_checkpoints_in_their_namespace():
    g = StateGraph(State)
    child = StateGraph(State)
    child.add_node("inner", append("inner"))
    child.add_edge(START, "inner")
    child.add_edge("inner", END)
    g.add_node("child", child.compile())
    g.add_edge(START, "child")
    g.add_edge("child", END)
    graph = g.compile(checkpointer=MemorySaver())
    chunks = list(graph.stream({"items": []}, cfg(), stream_mode="checkpoints", subgraphs=True))
    inside = [c for ns, c in chunks if ns]
    assert [c["metadata"]["step"] for c in inside] == [-1, 0, 1]
    child_ns = inside[0]["config"]["configurable"]["checkpoint_ns"]
    assert child_ns.startswith("child:")
    parent_plan = next(c for ns, c in chunks if not ns and c["next"] == ["child"])
    assert parent_plan["tasks"][0]["state"] == {
        "configurable": {"thread_id": "t", "checkpoint_ns": child_ns}
    }


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


def test_a_run_that_streams_nothing_makes_no_chunks():
    """invoke() pays for no stream mode: its run has no chunk maker at all."""
    graph = diamond()
    assert graph._loop(None, frozenset(), {}).out is None
    assert graph._loop(None, frozenset({"updates"}), {}).out is not None


def test_version_v2_yields_typed_parts_with_interrupts_apart():
    graph = asking(MemorySaver())
    parts = list(
        graph.stream({"items": []}, cfg(), stream_mode=["values", "updates"], version="v2")
    )
    [pending] = graph.get_state(cfg()).interrupts
    assert parts[0] == {"type": "values", "ns": (), "data": {"items": []}, "interrupts": ()}
    assert parts[1] == {"type": "updates", "ns": (), "data": {"prepare": {"items": ["prepare"]}}}
    assert parts[-1] == {
        "type": "values",
        "ns": (),
        "data": {"items": ["prepare"]},
        "interrupts": (pending,),
    }
    with pytest.raises(ConfigError, match="v3"):
        list(graph.stream({"items": []}, cfg("other"), version="v3"))


def test_a_resumed_subgraph_streams_the_state_it_resumes_from():
    def ask(state: State) -> dict:
        return {"answer": interrupt("q")}

    child = StateGraph(State)
    child.add_node("pre", append("pre"))
    child.add_node("ask", ask)
    child.add_edge(START, "pre")
    child.add_edge("pre", "ask")
    child.add_edge("ask", END)
    g = StateGraph(State)
    g.add_node("child", child.compile())
    g.add_edge(START, "child")
    g.add_edge("child", END)
    graph = g.compile(checkpointer=MemorySaver())
    list(graph.stream({"items": []}, cfg()))
    chunks = list(graph.stream(Command(resume="A"), cfg(), stream_mode="values", subgraphs=True))
    inside = [values for ns, values in chunks if ns]
    assert inside == [{"items": ["pre"]}, {"items": ["pre"], "answer": "A"}]
    assert [values for ns, values in chunks if not ns] == [
        {"items": []},
        {"items": ["pre"], "answer": "A"},
    ]


async def test_astream_yields_the_same_chunks_as_stream():
    modes = ["values", "updates", "debug", "tasks", "checkpoints"]

    def shape(chunks: list) -> list:
        return [(mode, by_step([c])[0] if mode == "debug" else _no_ids(c)) for mode, c in chunks]

    sync = list(diamond(checkpointer=MemorySaver()).stream({"items": []}, cfg(), stream_mode=modes))
    graph = diamond(checkpointer=MemorySaver())
    chunks = [c async for c in graph.astream({"items": []}, cfg(), stream_mode=modes)]
    assert sorted(map(repr, shape(chunks))) == sorted(map(repr, shape(sync)))
    assert [m for m, _ in chunks][:5] == ["checkpoints", "debug", "values", "checkpoints", "debug"]


def _no_ids(chunk: object) -> object:
    if isinstance(chunk, dict):
        return {k: _no_ids(v) for k, v in chunk.items() if k not in ("id", "checkpoint_id")}
    if isinstance(chunk, list | tuple):
        return [_no_ids(v) for v in chunk]
    return chunk
