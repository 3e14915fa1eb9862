"""Streaming subgraphs: their tokens, chunks and checkpoints come tagged with their namespace
when subgraphs=True.
"""

from __future__ import annotations

from small_graphs import State, append, cfg
from stream_graphs import (
    Chat,
    model,
)

from threadline import (
    END,
    START,
    Command,
    StateGraph,
    get_stream_writer,
    interrupt,
)
from threadline.checkpoint.memory import MemorySaver


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
