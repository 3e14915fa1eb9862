"""A cancelled async run stops at a whole checkpoint, keeps what finished, and goes on later.

Cancelling comes in three shapes: ``task.cancel()``, ``asyncio.timeout`` and a streaming client
that goes away. Each is tried on SQLite and PostgreSQL (real servers: the tests skip when one is
unreachable, as the rest of the suite does).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import operator
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from threadline import END, START, StateGraph
from threadline.checkpoint import BaseSaver, SqliteSaver


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


@contextlib.contextmanager
def sqlite(tmp_path: Path) -> Iterator[BaseSaver]:
    with SqliteSaver(tmp_path / "cancel.db") as saver:
        yield saver


@contextlib.contextmanager
def postgres(tmp_path: Path) -> Iterator[BaseSaver]:
    with __import__("postgres_fixtures").postgres_saver(tmp_path) as saver:
        yield saver


@pytest.fixture(params=["sqlite", "postgres"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSaver]:
    with {"sqlite": sqlite, "postgres": postgres}[request.param](tmp_path) as instance:
        yield instance


class Workflow:
    """``first``, then ``quick_a``, ``quick_b`` and ``slow`` in parallel, then ``last``.

    ``slow`` waits until ``release`` is set: the test cancels the run while it waits.
    """

    def __init__(self, saver: BaseSaver, **compile_options: Any) -> None:
        self.runs: list[str] = []
        self.release = asyncio.Event()
        self.slow_started = asyncio.Event()
        g = StateGraph(State)
        g.add_node("first", self.node("first"))
        g.add_node("quick_a", self.node("quick_a"))
        g.add_node("quick_b", self.node("quick_b"))
        g.add_node("slow", self.slow)
        g.add_node("last", self.node("last"))
        g.add_edge(START, "first")
        for name in ("quick_a", "quick_b", "slow"):
            g.add_edge("first", name)
        g.add_edge(["quick_a", "quick_b", "slow"], "last")
        g.add_edge("last", END)
        self.graph = g.compile(checkpointer=saver, **compile_options)

    def node(self, name: str) -> Any:
        async def run(state: State) -> State:
            self.runs.append(name)
            return {"log": [name]}

        return run

    async def slow(self, state: State) -> State:
        self.runs.append("slow")
        self.slow_started.set()
        await self.release.wait()
        return {"log": ["slow"]}

    async def quick_ones_done(self) -> None:
        await self.slow_started.wait()
        while not {"quick_a", "quick_b"} <= set(self.runs):
            await asyncio.sleep(0.001)
        await asyncio.sleep(0.01)  # let the finished tasks hand their outcomes over


CONFIG = {"configurable": {"thread_id": "t"}}
DONE = ["first", "quick_a", "quick_b", "slow", "last"]


async def check_left_mid_step(flow: Workflow) -> None:
    """The thread stands at the checkpoint the cut step started from, with the finished
    tasks' writes kept; continuing runs only ``slow`` and what follows."""
    saved = await flow.graph.checkpointer.aget_tuple("t")
    assert saved.checkpoint.values == {"log": ["first"]}  # the step was not applied
    state = await flow.graph.aget_state(CONFIG)
    assert state.next == ("slow",)
    done = {t.name: t.result for t in state.tasks if t.result is not None}
    assert done == {"quick_a": {"log": ["quick_a"]}, "quick_b": {"log": ["quick_b"]}}
    history = [s async for s in flow.graph.aget_state_history(CONFIG)]
    assert [s.metadata["step"] for s in history] == [1, 0, -1]  # no half step saved

    flow.runs.clear()
    flow.release.set()
    result = await flow.graph.ainvoke(None, CONFIG)
    assert sorted(result["log"]) == sorted(DONE)
    assert flow.runs == ["slow", "last"]  # the quick ones did not run again


async def test_task_cancel_keeps_finished_siblings(saver: BaseSaver) -> None:
    flow = Workflow(saver)
    run = asyncio.create_task(flow.graph.ainvoke({"log": []}, CONFIG))
    await flow.quick_ones_done()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    await check_left_mid_step(flow)


async def test_asyncio_timeout_keeps_finished_siblings(saver: BaseSaver) -> None:
    flow = Workflow(saver)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.3):
            await flow.graph.ainvoke({"log": []}, CONFIG)
    await check_left_mid_step(flow)


async def test_streaming_client_gone(saver: BaseSaver) -> None:
    """A client that stops listening (its task cancelled) leaves the thread as a cancel does."""
    flow = Workflow(saver)
    seen: list[Any] = []

    async def client() -> None:
        async for chunk in flow.graph.astream({"log": []}, CONFIG, stream_mode="updates"):
            seen.append(chunk)

    listening = asyncio.create_task(client())
    await flow.quick_ones_done()
    listening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await listening
    assert {"quick_a": {"log": ["quick_a"]}} in seen
    await check_left_mid_step(flow)


async def test_stream_closed_by_the_client(saver: BaseSaver) -> None:
    """``aclose()`` on the stream (``async with aclosing(...)`` leaving early) stops the run."""
    flow = Workflow(saver)
    stream = flow.graph.astream({"log": []}, CONFIG, stream_mode="updates")
    async with contextlib.aclosing(stream):
        async for chunk in stream:
            if "quick_b" in chunk:
                await flow.quick_ones_done()
                break
    assert flow.slow_started.is_set()
    await check_left_mid_step(flow)


async def test_cancel_with_exit_durability_saves_where_it_stopped(saver: BaseSaver) -> None:
    """``durability="exit"`` saves where a run stops: a cancellation is such a stop."""
    flow = Workflow(saver)
    run = asyncio.create_task(flow.graph.ainvoke({"log": []}, CONFIG, durability="exit"))
    await flow.quick_ones_done()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    saved = await saver.aget_tuple("t")
    assert saved.checkpoint.values == {"log": ["first"]}
    assert (await flow.graph.aget_state(CONFIG)).next == ("slow",)
    flow.runs.clear()
    flow.release.set()
    result = await flow.graph.ainvoke(None, CONFIG, durability="exit")
    assert sorted(result["log"]) == sorted(DONE)
    assert flow.runs == ["slow", "last"]


async def test_cancel_in_a_single_task_step(saver: BaseSaver) -> None:
    """A step of one task has nothing finished to keep: the thread stays at its last step."""
    runs: list[str] = []
    release = asyncio.Event()

    async def a(state: State) -> State:
        runs.append("a")
        return {"log": ["a"]}

    async def b(state: State) -> State:
        runs.append("b")
        await release.wait()
        return {"log": ["b"]}

    g = StateGraph(State).add_node("a", a).add_node("b", b)
    graph = g.add_edge(START, "a").add_edge("a", "b").add_edge("b", END).compile(checkpointer=saver)
    run = asyncio.create_task(graph.ainvoke({"log": []}, CONFIG))
    while "b" not in runs:
        await asyncio.sleep(0.001)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    state = await graph.aget_state(CONFIG)
    assert (state.values, state.next, state.tasks[0].result) == ({"log": ["a"]}, ("b",), None)
    release.set()
    assert await graph.ainvoke(None, CONFIG) == {"log": ["a", "b"]}
    assert runs == ["a", "b", "b"]


async def test_closing_the_stream_of_a_graph_that_releases_threads(saver: BaseSaver) -> None:
    """A thread cut short is not finished: ``release_thread`` leaves it, resumable."""
    flow = Workflow(saver, release_thread="delete")
    stream = flow.graph.astream({"log": []}, CONFIG, stream_mode="updates")
    async with contextlib.aclosing(stream):
        async for chunk in stream:
            if "quick_b" in chunk:
                await flow.quick_ones_done()
                break
    await check_left_mid_step(flow)
    assert saver.list_threads() == []  # released once the later call finished it


def test_closing_a_sync_stream_mid_step(saver: BaseSaver) -> None:
    """The sync driver does the same when a client stops reading ``stream()``."""
    runs: list[str] = []
    release = threading.Event()

    def node(name: str) -> Any:
        def run(state: State) -> State:
            runs.append(name)
            if name == "slow":
                release.wait(10)
            return {"log": [name]}

        return run

    g = StateGraph(State)
    for name in ("first", "quick", "slow", "last"):
        g.add_node(name, node(name))
    g.add_edge(START, "first").add_edge("first", "quick").add_edge("first", "slow")
    graph = g.add_edge(["quick", "slow"], "last").compile(checkpointer=saver)
    with contextlib.closing(graph.stream({"log": []}, CONFIG)) as stream:
        for chunk in stream:
            if "quick" in chunk:
                break
    release.set()  # the slow node ends in the background; its result is dropped
    assert saver.get_tuple("t").checkpoint.values == {"log": ["first"]}
    assert graph.get_state(CONFIG).next == ("slow",)
    runs.clear()
    assert sorted(graph.invoke(None, CONFIG)["log"]) == ["first", "last", "quick", "slow"]
    assert runs == ["slow", "last"]


@pytest.mark.parametrize("durability", ["sync", "async"])
async def test_cancelled_at_random_points_the_history_stays_whole(
    saver: BaseSaver, durability: str
) -> None:
    """Cancel a run again and again at random moments (inside nodes, during saves), then go
    on each time: the run ends with the right state over an unbroken chain of checkpoints."""
    rng = random.Random(13)
    names = [f"n{i}" for i in range(6)]

    def node(name: str) -> Any:
        async def run(state: State) -> State:
            await asyncio.sleep(rng.random() / 500)
            return {"log": [name]}

        return run

    g = StateGraph(State)
    for name in names:
        g.add_node(name, node(name))
    g.add_edge(START, "n0")
    for a, b in itertools.pairwise(names):
        g.add_edge(a, b)
    graph = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "fuzz"}}
    result, cancelled, first = None, 0, True
    while result is None:
        start = {"log": []} if first else None
        run = asyncio.create_task(graph.ainvoke(start, config, durability=durability))
        first = False
        await asyncio.sleep(rng.random() / 200)
        if run.done():
            result = run.result()
            break
        run.cancel()
        try:
            result = await run
        except asyncio.CancelledError:
            cancelled += 1
        if (await graph.aget_state(config)).values == {}:
            first = True  # cancelled before the input was saved: start again
    assert cancelled >= 3
    assert result == {"log": names}
    history = [s async for s in graph.aget_state_history(config)]
    assert [h.metadata["step"] for h in history] == list(range(len(names), -2, -1))
    for newer, older in itertools.pairwise(history):
        assert newer.parent_config == older.config
