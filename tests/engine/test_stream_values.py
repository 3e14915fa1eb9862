"""The values stream mode, version v2's typed parts, and astream yielding what stream yields."""

from __future__ import annotations

import pytest
from small_graphs import State, append, asking, cfg, diamond
from stream_graphs import (
    by_step,
)

from threadline import (
    END,
    START,
    Command,
    StateGraph,
    interrupt,
)
from threadline.checkpoint.memory import MemorySaver
from threadline.errors import ConfigError

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
