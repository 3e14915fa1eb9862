"""``bulk_update_state``, ``StateUpdate`` and the ``path`` of ``get_state().tasks``."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

from threadline import END, START, Send, StateGraph, interrupt
from threadline.checkpoint.memory import InMemorySaver
from threadline.errors import InvalidUpdateError
from threadline.types import PregelTask, StateUpdate


class State(TypedDict):
    items: Annotated[list[str], operator.add]


def fan(saver):
    g = StateGraph(State)
    g.add_node("a", lambda s: {"items": ["a"]})
    g.add_node("b", lambda s: {"items": ["b"]})
    g.add_node("c", lambda s: {"items": ["c"]})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge(["a", "b"], "c")
    return g.compile(checkpointer=saver, interrupt_before=["a", "b"])


def test_bulk_update_one_checkpoint_per_superstep(saver):
    graph = fan(saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"items": []}, config)
    before = len(list(graph.get_state_history(config)))
    new = graph.bulk_update_state(
        config,
        [
            [StateUpdate({"items": ["x"]}, "a"), StateUpdate({"items": ["y"]}, "b")],
        ],
    )
    state = graph.get_state(config)
    assert new["configurable"]["checkpoint_id"] == state.config["configurable"]["checkpoint_id"]
    assert state.values == {"items": ["x", "y"]}
    assert state.next == ("c",)  # the join saw both sources in one step
    assert len(list(graph.get_state_history(config))) == before + 1
    assert state.metadata is not None and state.metadata["source"] == "update"
    assert graph.invoke(None, config) == {"items": ["x", "y", "c"]}


async def test_abulk_update_several_supersteps():
    graph = fan(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"items": []}, config)
    await graph.abulk_update_state(
        config, [[StateUpdate({"items": ["x"]}, "a")], [({"items": ["y"]}, "b")]]
    )
    history = [s async for s in graph.aget_state_history(config)]
    assert [s.metadata["source"] for s in history[:2]] == ["update", "update"]
    assert history[0].values == {"items": ["x", "y"]}
    assert history[0].parent_config == history[1].config


def test_bulk_update_refuses_empty_and_ambiguous_steps():
    graph = fan(InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"items": []}, config)
    with pytest.raises(InvalidUpdateError, match="at least one superstep"):
        graph.bulk_update_state(config, [])
    with pytest.raises(InvalidUpdateError, match="at least one update"):
        graph.bulk_update_state(config, [[]])
    with pytest.raises(InvalidUpdateError, match="as_node"):
        graph.bulk_update_state(config, [[StateUpdate({"items": ["x"]}), StateUpdate({})]])


def test_snapshot_tasks_carry_langgraph_paths():
    class S(TypedDict):
        n: Annotated[list[int], operator.add]

    g = StateGraph(S)
    g.add_node("fan", lambda s: None)
    g.add_node("work", lambda x: {"n": [x]})
    g.add_edge(START, "fan")
    g.add_conditional_edges("fan", lambda s: [Send("work", 1), Send("work", 2)])
    graph = g.compile(checkpointer=InMemorySaver(), interrupt_before=["work"])
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"n": []}, config)
    tasks = graph.get_state(config).tasks
    assert [t.path for t in tasks] == [("__pregel_push", 0, False), ("__pregel_push", 1, False)]
    assert tasks[0] == PregelTask(tasks[0].id, "work", ("__pregel_push", 0, False))
    first = graph.get_state_history(config, limit=3)
    paths = {t.path for s in first for t in s.tasks}
    assert ("__pregel_pull", "fan") in paths


def test_as_node_end_finishes_a_thread_and_copy_forks_it(saver):
    def ask(state: State) -> dict:
        return {"items": [interrupt("approve?")]}

    g = StateGraph(State)
    g.add_node("ask", ask)
    g.add_node("after", lambda s: {"items": ["after"]})
    g.add_edge(START, "ask")
    g.add_edge("ask", "after")
    graph = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"items": []}, config)
    assert graph.get_state(config).interrupts
    graph.update_state(config, None, as_node=END)  # Agent Inbox's "mark resolved"
    done = graph.get_state(config)
    assert (done.values, done.next, done.interrupts) == ({"items": []}, (), ())
    assert done.metadata is not None and done.metadata["source"] == "update"
    assert graph.invoke(None, config) == {"items": []}  # nothing left to run
    graph.update_state(config, None, as_node="__copy__")
    copy = graph.get_state(config)
    assert copy.metadata is not None and copy.metadata["source"] == "fork"
    assert copy.parent_config == done.config and copy.values == done.values
    with pytest.raises(InvalidUpdateError, match="pass None"):
        graph.update_state(config, {"items": ["x"]}, as_node=END)
