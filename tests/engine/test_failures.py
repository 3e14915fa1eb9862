"""A failed superstep keeps its finished siblings' writes; resuming re-runs only the failure."""

from __future__ import annotations

import asyncio
import operator
import threading
from typing import Annotated, TypedDict

import pytest

from threadline import END, START, StateGraph


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]


def cfg(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


class Flaky:
    """Fails until told not to; counts its calls."""

    def __init__(self) -> None:
        self.fail = True
        self.calls = 0

    def __call__(self, state: State) -> dict:
        self.calls += 1
        if self.fail:
            raise RuntimeError("boom")
        return {"items": ["flaky"]}


def parallel_graph(saver, flaky: Flaky, sibling_calls: list[str]):
    def sibling(state: State) -> dict:
        sibling_calls.append("sibling")
        return {"items": ["sibling"]}

    g = StateGraph(State)
    g.add_node("flaky", flaky)
    g.add_node("sibling", sibling)
    g.add_node("after", lambda s: {"items": ["after"]})
    g.add_edge(START, "flaky")
    g.add_edge(START, "sibling")
    g.add_edge(["flaky", "sibling"], "after")
    g.add_edge("after", END)
    return g.compile(checkpointer=saver)


def test_failed_step_resumes_without_rerunning_siblings(saver):
    flaky, sibling_calls = Flaky(), []
    graph = parallel_graph(saver, flaky, sibling_calls)
    with pytest.raises(RuntimeError, match="boom"):
        graph.invoke({"items": []}, cfg())
    snap = graph.get_state(cfg())
    assert snap.next == ("flaky",)
    errors = {t.name: t.error for t in snap.tasks}
    assert "boom" in errors["flaky"] and errors["sibling"] is None
    flaky.fail = False
    out = graph.invoke(None, cfg())
    assert sorted(out["items"]) == ["after", "flaky", "sibling"]
    assert sibling_calls == ["sibling"]
    assert flaky.calls == 2


async def test_failed_step_resumes_without_rerunning_siblings_async(saver):
    flaky, sibling_calls = Flaky(), []
    graph = parallel_graph(saver, flaky, sibling_calls)
    with pytest.raises(RuntimeError, match="boom"):
        await graph.ainvoke({"items": []}, cfg())
    flaky.fail = False
    out = await graph.ainvoke(None, cfg())
    assert sorted(out["items"]) == ["after", "flaky", "sibling"]
    assert sibling_calls == ["sibling"]


def race_graph(saver, barrier_factory):
    """Two siblings released at the same instant: one returns, the other raises."""
    state: dict = {}

    def finisher(s: State) -> dict:
        state["barrier"].wait()
        return {"items": ["done"]}

    def failer(s: State) -> dict:
        state["barrier"].wait()
        raise ValueError("lost race")

    g = StateGraph(State)
    g.add_node("finisher", finisher)
    g.add_node("failer", failer)
    g.add_edge(START, "finisher")
    g.add_edge(START, "failer")
    g.add_edge("finisher", END)
    g.add_edge("failer", END)

    def reset() -> None:
        state["barrier"] = barrier_factory()

    return g.compile(checkpointer=saver), reset


def test_sibling_finishing_as_another_raises_never_loses_its_write():
    from threadline.checkpoint import InMemorySaver

    graph, reset = race_graph(InMemorySaver(), lambda: threading.Barrier(2))
    for i in range(1000):
        reset()
        with pytest.raises(ValueError):
            graph.invoke({"items": []}, cfg(f"race-{i}"))
        snap = graph.get_state(cfg(f"race-{i}"))
        assert snap.next == ("failer",), f"run {i}: the finisher's write was lost"


async def test_sibling_race_async_never_loses_a_write():
    from threadline.checkpoint import InMemorySaver

    graph, reset = race_graph(InMemorySaver(), lambda: threading.Barrier(2))
    for i in range(1000):
        reset()
        with pytest.raises(ValueError):
            await graph.ainvoke({"items": []}, cfg(f"race-{i}"))
        snap = await graph.aget_state(cfg(f"race-{i}"))
        assert snap.next == ("failer",), f"run {i}: the finisher's write was lost"


def test_new_input_after_failure_discards_pending_tasks(saver):
    flaky, sibling_calls = Flaky(), []
    graph = parallel_graph(saver, flaky, sibling_calls)
    with pytest.raises(RuntimeError):
        graph.invoke({"items": []}, cfg())
    flaky.fail = False
    out = graph.invoke({"items": ["fresh"]}, cfg())
    assert sorted(out["items"]) == ["after", "flaky", "fresh", "sibling"]
    assert sibling_calls == ["sibling", "sibling"]


def test_async_nodes_run_concurrently_in_one_step():
    """Each node waits for the other to have started: only a concurrent step can finish."""
    events: dict[str, asyncio.Event] = {}

    def meeting(me: str, other: str):
        async def node(s: State) -> dict:
            events[me].set()
            await asyncio.wait_for(events[other].wait(), timeout=5)
            return {"items": [me]}

        return node

    g = StateGraph(State)
    g.add_node("left", meeting("left", "right"))
    g.add_node("right", meeting("right", "left"))
    g.add_edge(START, "left")
    g.add_edge(START, "right")
    g.add_edge("left", END)
    g.add_edge("right", END)

    async def run() -> dict:
        events.update(left=asyncio.Event(), right=asyncio.Event())
        return await g.compile().ainvoke({"items": []})

    assert asyncio.run(run())["items"] == ["left", "right"]
