"""Streaming a run: updates, values, custom events, debug events, several modes, interrupts."""

from __future__ import annotations

import operator
import threading
from typing import Annotated, TypedDict

import pytest
from small_graphs import State, append, asking, cfg, diamond

from threadline import END, START, Interrupt, Send, StateGraph, get_stream_writer
from threadline.errors import ConfigError, ThreadlineError


def reporter_graph():
    """One node that reports progress through the stream writer."""

    def work(state: State) -> dict:
        write = get_stream_writer()
        write({"progress": 50})
        write({"progress": 100})
        return {"items": ["worked"]}

    g = StateGraph(State)
    g.add_node("work", work)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    return g.compile()


def without_first(chunks: list, first: object) -> list:
    assert chunks[0] == first
    return sorted(chunks[1:], key=repr)


# ------------------------------------------------------------------ updates


def test_stream_defaults_to_updates_one_chunk_per_task():
    chunks = list(diamond().stream({"items": []}))
    assert without_first(chunks, {"a": {"items": ["a"]}}) == [
        {"b": {"items": ["b"]}},
        {"c": None},
    ]


def test_updates_has_one_chunk_per_send_task():
    g = StateGraph(State)
    g.add_node("work", lambda arg: {"items": [arg]})
    g.add_conditional_edges(START, lambda s: [Send("work", x) for x in ("x", "y", "z")])
    g.add_edge("work", END)
    chunks = list(g.compile().stream({"items": []}, stream_mode="updates"))
    # In the order the tasks finish, as LangGraph's (on Python 3.13 mostly not x, y, z).
    assert sorted(chunks, key=str) == [{"work": {"items": [x]}} for x in ("x", "y", "z")]


def test_updates_of_a_task_arrive_while_a_sibling_is_still_running():
    release = threading.Event()

    def slow(state: State) -> dict:
        if not release.wait(timeout=2):
            raise AssertionError("fast's update was not streamed before its sibling finished")
        return {"items": ["slow"]}

    g = StateGraph(State)
    g.add_node("fast", append("fast"))
    g.add_node("slow", slow)
    g.add_edge(START, "fast")
    g.add_edge(START, "slow")
    g.add_edge("fast", END)
    g.add_edge("slow", END)
    stream = g.compile().stream({"items": []})
    try:
        first = next(stream)
    finally:
        release.set()
    assert first == {"fast": {"items": ["fast"]}}
    assert list(stream) == [{"slow": {"items": ["slow"]}}]


def test_a_dynamic_interrupt_appears_in_updates(saver):
    graph = asking(saver)
    chunks = list(graph.stream({"items": []}, cfg()))
    assert chunks[0] == {"prepare": {"items": ["prepare"]}}
    assert len(chunks) == 2 and list(chunks[1]) == ["__interrupt__"]
    pending = chunks[1]["__interrupt__"]
    assert isinstance(pending, tuple) and len(pending) == 1
    assert isinstance(pending[0], Interrupt) and pending[0].value == "approve?"
    assert pending == graph.get_state(cfg()).interrupts


# ------------------------------------------------------------------ values


def test_values_yields_the_input_then_the_state_after_each_step():
    chunks = list(diamond().stream({"items": ["in"]}, stream_mode="values"))
    assert chunks == [
        {"items": ["in"]},
        {"items": ["in", "a"]},
        {"items": ["in", "a", "b"]},
    ]


# ------------------------------------------------------------------ custom


def test_custom_yields_what_the_stream_writer_sent():
    chunks = list(reporter_graph().stream({"items": []}, stream_mode="custom"))
    assert chunks == [{"progress": 50}, {"progress": 100}]


def test_a_node_with_a_writer_parameter_streams_custom_events():
    def work(state: State, writer) -> dict:
        writer("step one")
        return {"items": ["worked"]}

    g = StateGraph(State)
    g.add_node("work", work)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    assert list(g.compile().stream({"items": []}, stream_mode="custom")) == ["step one"]


def test_stream_writer_outside_custom_mode_is_harmless():
    assert reporter_graph().invoke({"items": []}) == {"items": ["worked"]}
    assert list(reporter_graph().stream({"items": []})) == [{"work": {"items": ["worked"]}}]


def subgraph_reporter():
    def inner(state: State) -> dict:
        get_stream_writer()("from inside the subgraph")
        return {"items": ["inner"]}

    child = StateGraph(State)
    child.add_node("inner", inner)
    child.add_edge(START, "inner")
    child.add_edge("inner", END)
    parent = StateGraph(State)
    parent.add_node("child", child.compile())
    parent.add_node("after", append("after"))
    parent.add_edge(START, "child")
    parent.add_edge("child", "after")
    parent.add_edge("after", END)
    return parent.compile()


def test_custom_events_from_inside_a_subgraph_reach_the_parents_stream_with_subgraphs():
    # As in LangGraph: a subgraph's custom events are the subgraph's, shown with subgraphs=True.
    assert list(subgraph_reporter().stream({"items": []}, stream_mode="custom")) == []
    chunks = list(subgraph_reporter().stream({"items": []}, stream_mode="custom", subgraphs=True))
    [(ns, payload)] = chunks
    assert payload == "from inside the subgraph" and ns[0].startswith("child:")


# ------------------------------------------------------------------ several modes, debug


def test_a_list_of_modes_yields_mode_payload_pairs():
    modes = ["values", "updates", "custom"]
    chunks = list(reporter_graph().stream({"items": []}, stream_mode=modes))
    assert chunks == [
        ("values", {"items": []}),
        ("custom", {"progress": 50}),
        ("custom", {"progress": 100}),
        ("updates", {"work": {"items": ["worked"]}}),
        ("values", {"items": ["worked"]}),
    ]


def test_a_list_with_one_mode_still_yields_pairs():
    chunks = list(diamond().stream({"items": []}, stream_mode=["updates"]))
    assert chunks[0] == ("updates", {"a": {"items": ["a"]}})
    assert all(mode == "updates" for mode, _ in chunks) and len(chunks) == 3


def test_debug_yields_checkpoint_task_and_task_result_events(saver):
    events = list(diamond(checkpointer=saver).stream({"items": []}, cfg(), stream_mode="debug"))
    assert all(isinstance(e, dict) and "type" in e for e in events)
    assert {e["type"] for e in events} >= {"checkpoint", "task", "task_result"}
    tasks = [e["payload"]["name"] for e in events if e["type"] == "task"]
    results = [e["payload"]["name"] for e in events if e["type"] == "task_result"]
    assert sorted(tasks) == sorted(results) == ["a", "b", "c"]
    first_task = next(i for i, e in enumerate(events) if e["type"] == "task")
    first_result = next(i for i, e in enumerate(events) if e["type"] == "task_result")
    assert first_task < first_result


def test_an_unknown_stream_mode_is_an_error_naming_it():
    with pytest.raises((ThreadlineError, ValueError), match="bogus"):
        list(diamond().stream({"items": []}, stream_mode="bogus"))
    with pytest.raises((ThreadlineError, ValueError), match="bogus"):
        list(diamond().stream({"items": []}, stream_mode=["updates", "bogus"]))


# ------------------------------------------------------------------ async


async def test_astream_yields_updates_values_and_custom_like_stream():
    graph = diamond()
    updates = [c async for c in graph.astream({"items": []})]
    assert without_first(updates, {"a": {"items": ["a"]}}) == [
        {"b": {"items": ["b"]}},
        {"c": None},
    ]
    values = [c async for c in graph.astream({"items": []}, stream_mode="values")]
    assert values == [{"items": []}, {"items": ["a"]}, {"items": ["a", "b"]}]
    custom = [c async for c in reporter_graph().astream({"items": []}, stream_mode="custom")]
    assert custom == [{"progress": 50}, {"progress": 100}]


async def test_astream_custom_from_async_nodes_and_subgraphs():
    async def work(state: State) -> dict:
        get_stream_writer()("async progress")
        return {"items": ["worked"]}

    g = StateGraph(State)
    g.add_node("work", work)
    g.add_edge(START, "work")
    g.add_edge("work", END)
    graph = g.compile()
    chunks = [c async for c in graph.astream({"items": []}, stream_mode=["custom", "updates"])]
    assert chunks == [("custom", "async progress"), ("updates", {"work": {"items": ["worked"]}})]
    nested = [
        payload
        async for _, payload in subgraph_reporter().astream(
            {"items": []}, stream_mode="custom", subgraphs=True
        )
    ]
    assert nested == ["from inside the subgraph"]


async def test_astream_shows_a_dynamic_interrupt(saver):
    graph = asking(saver)
    chunks = [c async for c in graph.astream({"items": []}, cfg())]
    assert chunks[0] == {"prepare": {"items": ["prepare"]}}
    [pending] = chunks[1]["__interrupt__"]
    assert isinstance(pending, Interrupt) and pending.value == "approve?"


async def test_astream_rejects_an_unknown_stream_mode():
    with pytest.raises((ThreadlineError, ValueError), match="bogus"):
        [c async for c in diamond().astream({"items": []}, stream_mode="bogus")]


def test_debug_true_prints_without_changing_what_is_streamed(capsys):
    graph = _one_node_graph()
    quiet = list(graph.stream({"n": 0}))
    assert capsys.readouterr().out == ""
    assert list(graph.stream({"n": 0}, debug=True)) == quiet
    printed = capsys.readouterr().out.splitlines()
    assert [line.split("\x1b[0m")[0] for line in printed] == [
        "\x1b[1m[values]",
        "\x1b[1m[updates]",
        "\x1b[1m[values]",
    ]


async def test_print_mode_prints_the_modes_it_names(capsys):
    graph = _one_node_graph()
    final = await graph.ainvoke({"n": 0}, print_mode="updates")
    assert final == await graph.ainvoke({"n": 0})
    assert capsys.readouterr().out.count("[updates]") == 1
    with pytest.raises(ConfigError, match="bogus"):
        graph.invoke({"n": 0}, print_mode=["bogus"])


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def _nested_graph():
    """outer -> child (a subgraph whose node runs a grandchild subgraph)."""

    def leaf(state: Log) -> dict:
        get_stream_writer()("from the leaf")
        return {"log": ["leaf"]}

    grand = StateGraph(Log)
    grand.add_node("leaf", leaf)
    grand.add_edge(START, "leaf")
    grand.add_edge("leaf", END)
    child = StateGraph(Log)
    child.add_node("grand", grand.compile())
    child.add_edge(START, "grand")
    child.add_edge("grand", END)
    g = StateGraph(Log)
    g.add_node("outer", lambda s: {"log": ["outer"]})
    g.add_node("child", child.compile())
    g.add_edge(START, "outer")
    g.add_edge("outer", "child")
    g.add_edge("child", END)
    return g.compile()


def _shape(chunks):
    """Namespaces as node names only (task ids vary), with the payloads."""
    return [(tuple(part.split(":")[0] for part in ns), *rest) for ns, *rest in chunks]


def test_subgraphs_true_streams_every_level_tagged_with_its_namespace():
    chunks = list(_nested_graph().stream({"log": []}, subgraphs=True))
    assert _shape(chunks) == [
        ((), {"outer": {"log": ["outer"]}}),
        (("child", "grand"), {"leaf": {"log": ["leaf"]}}),
        (("child",), {"grand": {"log": ["leaf"]}}),
        ((), {"child": {"log": ["leaf"]}}),
    ]
    child_ns, grand_ns = chunks[2][0], chunks[1][0]
    assert grand_ns[0] == child_ns[0]  # the grandchild runs inside the child's task


def test_subgraphs_true_with_several_modes_yields_namespace_mode_payload():
    chunks = list(
        _nested_graph().stream({"log": []}, stream_mode=["updates", "custom"], subgraphs=True)
    )
    assert (("child", "grand"), "custom", "from the leaf") in _shape(chunks)
    assert ((), "updates", {"child": {"log": ["leaf"]}}) in _shape(chunks)


async def test_astream_subgraphs_true_matches_stream():
    graph = _nested_graph()
    chunks = [c async for c in graph.astream({"log": []}, subgraphs=True)]
    assert _shape(chunks) == _shape(list(graph.stream({"log": []}, subgraphs=True)))


def test_without_subgraphs_the_stream_is_unchanged():
    assert list(_nested_graph().stream({"log": []})) == [
        {"outer": {"log": ["outer"]}},
        {"child": {"log": ["leaf"]}},
    ]


def _one_node_graph(saver=None):
    class N(TypedDict):
        n: int

    g = StateGraph(N)
    g.add_node("inc", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "inc")
    g.add_edge("inc", END)
    return g.compile(checkpointer=saver)
