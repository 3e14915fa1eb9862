"""Checkpoints per superstep, threads, history, update_state, replay and fork."""

from __future__ import annotations

import operator
from itertools import pairwise
from typing import Annotated, TypedDict

import pytest

from threadline import END, START, StateGraph
from threadline.errors import CheckpointNotFoundError, ConfigError, InvalidUpdateError


class State(TypedDict):
    foo: str
    bar: Annotated[list[str], operator.add]


def chain(saver, **compile_kw):
    calls: list[str] = []

    def node_a(state: State) -> dict:
        calls.append("node_a")
        return {"foo": "a", "bar": ["a"]}

    def node_b(state: State) -> dict:
        calls.append("node_b")
        return {"foo": "b", "bar": ["b"]}

    g = StateGraph(State)
    g.add_node("node_a", node_a)
    g.add_node("node_b", node_b)
    g.add_edge(START, "node_a")
    g.add_edge("node_a", "node_b")
    g.add_edge("node_b", END)
    return g.compile(checkpointer=saver, **compile_kw), calls


def cfg(thread: str = "1", **extra) -> dict:
    return {"configurable": {"thread_id": thread, **extra}}


def test_a_run_leaves_one_checkpoint_per_superstep(saver):
    graph, _ = chain(saver)
    assert graph.invoke({"foo": ""}, cfg()) == {"foo": "b", "bar": ["a", "b"]}
    history = list(graph.get_state_history(cfg()))
    assert [h.values for h in history] == [
        {"foo": "b", "bar": ["a", "b"]},
        {"foo": "a", "bar": ["a"]},
        {"foo": "", "bar": []},
        {"bar": []},
    ]
    assert [h.next for h in history] == [(), ("node_b",), ("node_a",), ("__start__",)]
    assert [h.metadata["step"] for h in history] == [2, 1, 0, -1]
    assert [h.metadata["source"] for h in history] == ["loop", "loop", "loop", "input"]
    assert all(h.metadata["parents"] == {} for h in history)
    for newer, older in pairwise(history):
        assert newer.parent_config == older.config
    assert history[-1].parent_config is None


def test_get_state_is_latest_or_addressed(saver):
    graph, _ = chain(saver)
    graph.invoke({"foo": ""}, cfg())
    latest = graph.get_state(cfg())
    assert latest.values == {"foo": "b", "bar": ["a", "b"]} and latest.next == ()
    older = list(graph.get_state_history(cfg()))[2]
    addressed = graph.get_state(older.config)
    assert addressed.values == {"foo": "", "bar": []}
    assert addressed.next == ("node_a",)


def test_unknown_checkpoint_id_is_an_error_not_another_checkpoint(saver):
    graph, _ = chain(saver)
    graph.invoke({"foo": ""}, cfg())
    with pytest.raises(CheckpointNotFoundError, match="no-such-id"):
        graph.get_state(cfg(checkpoint_id="no-such-id"))
    with pytest.raises(CheckpointNotFoundError):
        graph.invoke(None, cfg(checkpoint_id="no-such-id"))


def test_thread_id_is_required_with_a_checkpointer(saver):
    graph, calls = chain(saver)
    with pytest.raises(ConfigError, match="thread_id"):
        graph.invoke({"foo": ""})
    assert calls == []


def test_a_second_invoke_continues_the_thread(saver):
    graph, _ = chain(saver)
    graph.invoke({"foo": ""}, cfg())
    assert graph.invoke({"foo": "x"}, cfg())["bar"] == ["a", "b", "a", "b"]
    assert len(list(graph.get_state_history(cfg()))) == 8
    assert graph.invoke({"foo": ""}, cfg("other"))["bar"] == ["a", "b"]


def test_history_filter_before_and_limit(saver):
    graph, _ = chain(saver)
    graph.invoke({"foo": ""}, {"configurable": {"thread_id": "1", "user_id": "u1"}})
    history = list(graph.get_state_history(cfg()))
    assert len(list(graph.get_state_history(cfg(), filter={"user_id": "u1"}))) == 4
    assert list(graph.get_state_history(cfg(), filter={"user_id": "u2"})) == []
    loops = list(graph.get_state_history(cfg(), filter={"source": "loop"}))
    assert [h.metadata["source"] for h in loops] == ["loop"] * 3
    limited = list(graph.get_state_history(cfg(), limit=2))
    assert [h.config for h in limited] == [h.config for h in history[:2]]
    before = list(graph.get_state_history(cfg(), before=history[1].config))
    assert [h.config for h in before] == [h.config for h in history[2:]]


def test_update_state_applies_reducers_and_records_update(saver):
    graph, _ = chain(saver)
    graph.invoke({"foo": ""}, cfg())
    new_config = graph.update_state(cfg(), {"foo": "edited", "bar": ["x"]})
    snap = graph.get_state(cfg())
    assert snap.config == new_config
    assert snap.values == {"foo": "edited", "bar": ["a", "b", "x"]}
    assert snap.metadata["source"] == "update"
    assert snap.metadata["step"] == 3
    assert snap.next == ()


def test_update_state_rejects_unknown_keys_and_nodes(saver):
    graph, _ = chain(saver)
    graph.invoke({"foo": ""}, cfg())
    with pytest.raises(InvalidUpdateError, match="nope"):
        graph.update_state(cfg(), {"nope": 1})
    with pytest.raises(InvalidUpdateError, match="ghost"):
        graph.update_state(cfg(), {"foo": "x"}, as_node="ghost")
    assert len(list(graph.get_state_history(cfg()))) == 4


def test_update_state_as_node_decides_what_runs_next(saver):
    graph, calls = chain(saver)
    graph.invoke({"foo": ""}, cfg())
    first = list(graph.get_state_history(cfg()))[2]  # next = node_a
    forked = graph.update_state(first.config, {"foo": "forked"}, as_node="node_a")
    assert graph.get_state(forked).next == ("node_b",)
    calls.clear()
    result = graph.invoke(None, cfg())
    assert calls == ["node_b"]
    assert result == {"foo": "b", "bar": ["b"]}


def test_replay_from_a_checkpoint_reruns_only_later_steps(saver):
    graph, calls = chain(saver)
    graph.invoke({"foo": ""}, cfg())
    history = list(graph.get_state_history(cfg()))
    at_b = history[1]  # next = node_b
    calls.clear()
    result = graph.invoke(None, at_b.config)
    assert calls == ["node_b"]
    assert result == {"foo": "b", "bar": ["a", "b"]}
    after = list(graph.get_state_history(cfg()))
    assert len(after) == len(history) + 2  # a fork checkpoint and the re-run step
    assert after[1].metadata["source"] == "fork"
    assert after[1].parent_config == at_b.config
    assert {h.config["configurable"]["checkpoint_id"] for h in history} <= {
        h.config["configurable"]["checkpoint_id"] for h in after
    }


def test_exit_durability_saves_only_the_final_checkpoint(saver):
    graph, _ = chain(saver)
    graph.invoke({"foo": ""}, cfg(), durability="exit")
    history = list(graph.get_state_history(cfg()))
    assert len(history) == 1
    assert history[0].values == {"foo": "b", "bar": ["a", "b"]}


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_sync_and_async_durability_save_every_step_in_order(saver, durability):
    graph, _ = chain(saver)
    graph.invoke({"foo": ""}, cfg(), durability=durability)
    history = list(graph.get_state_history(cfg()))
    assert [h.metadata["step"] for h in history] == [2, 1, 0, -1]
    for newer, older in pairwise(history):
        assert newer.parent_config == older.config


async def test_async_durability_in_async_runs(saver):
    graph, _ = chain(saver)
    await graph.ainvoke({"foo": ""}, cfg(), durability="async")
    history = [h async for h in graph.aget_state_history(cfg())]
    assert [h.metadata["step"] for h in history] == [2, 1, 0, -1]


def test_exit_durability_failed_run_is_resumable(saver):
    calls: list[str] = []
    fail = [True]

    def flaky(state: State) -> dict:
        calls.append("flaky")
        if fail[0]:
            raise RuntimeError("down")
        return {"foo": "ok"}

    g = StateGraph(State)
    g.add_node("first", lambda s: {"bar": ["first"]})
    g.add_node("flaky", flaky)
    g.add_edge(START, "first")
    g.add_edge("first", "flaky")
    g.add_edge("flaky", END)
    graph = g.compile(checkpointer=saver)
    with pytest.raises(RuntimeError):
        graph.invoke({"foo": ""}, cfg(), durability="exit")
    history = list(graph.get_state_history(cfg()))
    assert len(history) == 1 and history[0].next == ("flaky",)
    fail[0] = False
    assert graph.invoke(None, cfg(), durability="exit") == {"foo": "ok", "bar": ["first"]}


ODD_THREAD_IDS = ["'; DROP TABLE checkpoints; --", "../../x", "a/b c", "Ωμέγα-🧵", "x" * 500]


@pytest.mark.parametrize("thread", ODD_THREAD_IDS, ids=range(len(ODD_THREAD_IDS)))
def test_odd_thread_ids_run_and_stay_apart(saver, thread):
    graph, _ = chain(saver)
    graph.invoke({"foo": "plain"}, cfg("plain"))
    assert graph.invoke({"foo": ""}, cfg(thread)) == {"foo": "b", "bar": ["a", "b"]}
    assert graph.get_state(cfg(thread)).config["configurable"]["thread_id"] == thread
    assert len(list(graph.get_state_history(cfg(thread)))) == 4
    assert graph.get_state(cfg("plain")).values == {"foo": "b", "bar": ["a", "b"]}
    assert len(list(graph.get_state_history(cfg("plain")))) == 4


def test_replay_from_the_input_checkpoint_applies_the_input_again(saver):
    graph, calls = chain(saver)
    graph.invoke({"foo": "x", "bar": ["in"]}, cfg())
    history = list(graph.get_state_history(cfg()))
    first = history[-1]
    assert first.next == ("__start__",)

    replayed = graph.invoke(None, first.config)

    assert replayed == {"foo": "b", "bar": ["in", "a", "b"]}
    assert calls == ["node_a", "node_b"] * 2
    after = list(graph.get_state_history(cfg()))
    ids = [snap.config["configurable"]["checkpoint_id"] for snap in after]
    assert all(old.config["configurable"]["checkpoint_id"] in ids for old in history)
    assert len(after) == len(history) + 4  # fork of the input, START step, node_a, node_b
