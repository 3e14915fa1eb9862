"""Durability modes: what ``exit`` and ``async`` save, and what ``async`` gains and risks.

``sync`` saves each checkpoint before the next step runs; ``async`` saves it while the next
step runs (one save in flight, in order); ``exit`` saves only where the run stops. Every mode
must leave a thread that loads and resumes, and streaming must save what invoke saves.
"""

from __future__ import annotations

import asyncio
import operator
import time
from itertools import pairwise
from typing import Annotated, Any, TypedDict

import pytest

from threadline import END, START, Command, StateGraph, interrupt
from threadline.checkpoint import BaseSaver, CheckpointRecord

DELAY = 0.05  # seconds a slow node, and a slow put, take
NODES = 6


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


class SaverDown(RuntimeError):
    """What a failing put raises."""


class FaultyPuts:
    """Makes ``saver``'s put (and aput) sleep ``delay`` first, or raise on call ``fail_on``.

    Patched on the instance, so the saver is otherwise itself. It is made to say it does I/O
    (``in_process`` False), so ``durability="async"`` hands its puts to the background even for
    the in-memory saver. ``aput`` runs the slowed ``put`` in a worker thread, as the default
    ``BaseSaver.aput`` does: the async driver still overlaps it with the next step.
    """

    def __init__(
        self,
        saver: BaseSaver,
        monkeypatch: pytest.MonkeyPatch,
        *,
        delay: float = 0.0,
        fail_on: int | None = None,
    ) -> None:
        self.delay = delay
        self.fail_on = fail_on
        self.puts = 0
        self.busy = 0.0  # seconds spent in put, the real saver's work included
        self.real_put = saver.put
        monkeypatch.setattr(saver, "put", self.put)
        monkeypatch.setattr(saver, "aput", self.aput)
        monkeypatch.setattr(saver, "in_process", False)

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        self.puts += 1
        if self.puts == self.fail_on:
            raise SaverDown(f"put {self.puts} failed")
        started = time.perf_counter()
        time.sleep(self.delay)
        self.real_put(record, fork=fork)
        self.busy += time.perf_counter() - started

    async def aput(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        await asyncio.to_thread(self.put, record, fork=fork)


def cfg(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


def logging_node(name: str, sleep: float = 0.0):
    def node(state: State) -> dict:
        time.sleep(sleep)
        return {"log": [name]}

    return node


def chain(saver: BaseSaver, *, sleep: float = 0.0):
    """START -> n1 -> ... -> n6 -> END; each node appends its name to ``log``."""
    names = [f"n{i}" for i in range(1, NODES + 1)]
    g = StateGraph(State)
    for name in names:
        g.add_node(name, logging_node(name, sleep))
    g.add_edge(START, names[0])
    for a, b in pairwise(names):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile(checkpointer=saver)


FINISHED = {"log": [f"n{i}" for i in range(1, NODES + 1)]}


def approval(saver: BaseSaver):
    """START -> before -> ask (interrupt) -> after -> END; ``runs`` lists each node call."""
    runs: list[str] = []

    def before(state: State) -> dict:
        runs.append("before")
        return {"log": ["before"]}

    def ask(state: State) -> dict:
        runs.append("ask")
        return {"log": [interrupt("ok?")]}

    def after(state: State) -> dict:
        runs.append("after")
        return {"log": ["after"]}

    g = StateGraph(State)
    for node in (before, ask, after):
        g.add_node(node.__name__, node)
    g.add_edge(START, "before")
    g.add_edge("before", "ask")
    g.add_edge("ask", "after")
    g.add_edge("after", END)
    return g.compile(checkpointer=saver), runs


async def run(api: str, graph: Any, input: Any, config: dict, **options: Any) -> dict:
    if api == "invoke":
        return graph.invoke(input, config, **options)
    return await graph.ainvoke(input, config, **options)


async def streamed(api: str, graph: Any, input: Any, config: dict, **options: Any) -> list:
    if api == "stream":
        return list(graph.stream(input, config, **options))
    return [chunk async for chunk in graph.astream(input, config, **options)]


def steps(graph: Any, config: dict) -> list[int]:
    """The step of each saved checkpoint, newest first; parents checked to chain in order."""
    history = list(graph.get_state_history(config))
    for newer, older in pairwise(history):
        assert newer.parent_config == older.config
    return [snap.metadata["step"] for snap in history]


@pytest.fixture(params=["invoke", "ainvoke"])
def api(request: pytest.FixtureRequest) -> str:
    return request.param


# -- exit --------------------------------------------------------------------------------------


async def test_an_exit_run_stopped_by_interrupt_resumes(saver: BaseSaver, api: str) -> None:
    """The stop is the run's exit: what it saves there must be enough to resume from, without
    running the finished node again."""
    graph, runs = approval(saver)
    out = await run(api, graph, {"log": []}, cfg(), durability="exit")
    assert [i.value for i in out["__interrupt__"]] == ["ok?"]
    assert len(steps(graph, cfg())) == 1  # only where it stopped
    assert graph.get_state(cfg()).next == ("ask",)

    out = await run(api, graph, Command(resume="yes"), cfg(), durability="exit")
    assert out == {"log": ["before", "yes", "after"]}
    assert runs == ["before", "ask", "ask", "after"]
    assert graph.get_state(cfg()).values == out
    assert graph.get_state(cfg()).next == ()


# -- streaming ---------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["stream", "astream"])
@pytest.mark.parametrize("durability", ["exit", "async"])
async def test_streaming_saves_what_invoke_saves(
    saver: BaseSaver, how: str, durability: str
) -> None:
    graph = chain(saver)
    graph.invoke({"log": []}, cfg("invoked"), durability="sync")
    chunks = await streamed(how, graph, {"log": []}, cfg("streamed"), durability=durability)
    assert chunks == [{name: {"log": [name]}} for name in FINISHED["log"]]

    assert graph.get_state(cfg("streamed")).values == FINISHED
    assert graph.get_state(cfg("streamed")).next == ()
    if durability == "async":
        assert steps(graph, cfg("streamed")) == steps(graph, cfg("invoked"))
    else:
        assert steps(graph, cfg("streamed")) == [NODES]  # the final checkpoint alone


# -- async -------------------------------------------------------------------------------------


async def test_async_durability_saves_while_the_next_step_runs(
    saver: BaseSaver, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nodes and puts each take DELAY (puts a little more: the real saver's work): one after
    the other they would add up; with the puts overlapping the nodes the run takes little more
    than the puts alone. The margin (0.85 of the serial sum, against about 0.6 expected) keeps
    a slow machine from failing."""
    slow = FaultyPuts(saver, monkeypatch, delay=DELAY)
    graph = chain(saver, sleep=DELAY)
    started = time.perf_counter()
    assert await run(api, graph, {"log": []}, cfg(), durability="async") == FINISHED
    elapsed = time.perf_counter() - started

    assert slow.puts == NODES + 2  # the input and the START step are saved too
    serial = NODES * DELAY + slow.busy
    assert elapsed < 0.85 * serial, f"{elapsed:.3f}s, serial sum {serial:.3f}s"
    assert steps(graph, cfg()) == list(range(NODES, -2, -1))
    assert graph.get_state(cfg()).values == FINISHED


async def test_a_failed_background_save_reaches_the_caller(
    saver: BaseSaver, api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The third put (the checkpoint after n1) fails while n2 runs: the run must not report
    success, and the thread must still load, at the last checkpoint that was saved, and finish
    from there."""
    flaky = FaultyPuts(saver, monkeypatch, fail_on=3)
    graph = chain(saver)
    with pytest.raises(SaverDown, match="put 3"):
        await run(api, graph, {"log": []}, cfg(), durability="async")

    stuck = graph.get_state(cfg())
    assert stuck.values == {"log": []} and stuck.next == ("n1",)
    assert steps(graph, cfg()) == [0, -1]
    flaky.fail_on = None
    assert await run(api, graph, None, cfg(), durability="async") == FINISHED
    assert steps(graph, cfg()) == list(range(NODES, -2, -1))
