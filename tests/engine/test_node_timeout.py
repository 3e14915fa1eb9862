"""``add_node(..., timeout=...)``: an attempt that runs too long fails the node, sync or async."""

from __future__ import annotations

import asyncio
import operator
import threading
import time
from datetime import timedelta
from typing import Annotated, TypedDict

import pytest

from threadline import END, START, Command, RetryPolicy, StateGraph, interrupt
from threadline.checkpoint import InMemorySaver, SqliteSaver
from threadline.errors import AsyncNodeInSyncRunError, GraphValidationError, NodeTimeoutError
from threadline.types import TimeoutPolicy

QUICK_RETRY = RetryPolicy(initial_interval=0.01, jitter=False)


class State(TypedDict, total=False):
    items: Annotated[list[str], operator.add]


def cfg(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


def chain(fetch, **options) -> StateGraph:
    g = StateGraph(State)
    g.add_node("fetch", fetch, **options)
    g.add_node("after", lambda state: {"items": ["after"]})
    g.add_edge(START, "fetch")
    g.add_edge("fetch", "after")
    g.add_edge("after", END)
    return g


def test_a_sync_node_that_hangs_fails_the_run_and_invoke_none_runs_it_again(tmp_path):
    release = threading.Event()
    calls: list[int] = []

    def fetch(state: State) -> dict:
        calls.append(len(calls) + 1)
        if len(calls) == 1:
            release.wait(5)
            return {"items": ["late"]}
        return {"items": ["fetched"]}

    db = tmp_path / "timeout.db"
    with SqliteSaver(db) as saver:
        graph = chain(fetch, timeout=0.1).compile(checkpointer=saver)
        started = time.monotonic()
        with pytest.raises(NodeTimeoutError, match=r"node 'fetch' exceeded its timeout of 0\.100s"):
            graph.invoke({"items": []}, cfg())
        assert time.monotonic() - started < 2
        snap = graph.get_state(cfg())
        assert snap.next == ("fetch",)
        assert "NodeTimeoutError" in snap.tasks[0].error
    release.set()  # the first attempt returns now, too late: what it returns is dropped

    with SqliteSaver(db) as saver:  # a fresh process would do the same
        graph = chain(fetch, timeout=0.1).compile(checkpointer=saver)
        assert graph.invoke(None, cfg()) == {"items": ["fetched", "after"]}
        assert graph.get_state(cfg()).next == ()
    assert calls == [1, 2]


def test_the_retry_policy_retries_a_sync_node_that_timed_out():
    attempts: list[float] = []

    def fetch(state: State) -> dict:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            time.sleep(1)
        return {"items": [f"attempt {len(attempts)}"]}

    graph = chain(fetch, timeout=timedelta(milliseconds=100), retry_policy=QUICK_RETRY).compile()
    assert graph.invoke({"items": []}) == {"items": ["attempt 2", "after"]}
    assert attempts[1] - attempts[0] < 0.5  # the retry did not wait for the first attempt


def test_an_async_node_is_cancelled_at_its_timeout_and_retried():
    events: list[str] = []

    async def fetch(state: State) -> dict:
        events.append("start")
        if events.count("start") == 1:
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:
                events.append("cancelled")
                raise
        return {"items": ["fetched"]}

    graph = chain(fetch, timeout=0.1, retry_policy=QUICK_RETRY).compile()
    started = time.monotonic()
    assert asyncio.run(graph.ainvoke({"items": []})) == {"items": ["fetched", "after"]}
    assert time.monotonic() - started < 2
    assert events == ["start", "cancelled", "start"]


def test_an_async_node_that_always_times_out_fails_after_its_last_attempt(tmp_path):
    attempts: list[int] = []
    slow = True

    async def fetch(state: State) -> dict:
        attempts.append(1)
        if slow:
            await asyncio.sleep(5)
        return {"items": ["fetched"]}

    policy = RetryPolicy(max_attempts=2, initial_interval=0.01, jitter=False)

    async def scenario() -> None:
        nonlocal slow
        async with SqliteSaver(tmp_path / "a.db") as saver:
            graph = chain(fetch, timeout=0.1, retry_policy=policy).compile(checkpointer=saver)
            with pytest.raises(NodeTimeoutError, match="node 'fetch'") as raised:
                await graph.ainvoke({"items": []}, cfg())
            assert raised.value.node == "fetch" and raised.value.timeout == 0.1
            assert len(attempts) == 2
            assert (await graph.aget_state(cfg())).next == ("fetch",)
            slow = False
            assert await graph.ainvoke(None, cfg()) == {"items": ["fetched", "after"]}

    asyncio.run(scenario())
    assert len(attempts) == 3


def test_a_sync_node_in_an_async_run_times_out_too():
    release = threading.Event()

    def fetch(state: State) -> dict:
        release.wait(5)
        return {"items": ["late"]}

    graph = chain(fetch, timeout=0.1).compile()
    try:
        with pytest.raises(NodeTimeoutError, match="node 'fetch'"):
            asyncio.run(graph.ainvoke({"items": []}))
    finally:
        release.set()


def test_a_timed_sync_node_can_interrupt_and_be_resumed():
    seen: list[str] = []

    def ask(state: State) -> dict:
        seen.append(threading.current_thread().name)
        return {"items": [interrupt("name?")]}

    graph = chain(ask, timeout=1).compile(checkpointer=InMemorySaver())
    first = graph.invoke({"items": []}, cfg())
    assert first["__interrupt__"][0].value == "name?"
    assert graph.invoke(Command(resume="Ada"), cfg()) == {"items": ["Ada", "after"]}
    assert seen == ["threadline-timed-fetch"] * 2


def test_a_timeout_error_the_node_raises_itself_is_not_a_node_timeout():
    def fetch(state: State) -> dict:
        raise TimeoutError("the socket timed out")

    graph = chain(fetch, timeout=5).compile()
    with pytest.raises(TimeoutError, match="socket") as raised:
        graph.invoke({"items": []})
    assert not isinstance(raised.value, NodeTimeoutError)


def test_a_node_without_a_timeout_runs_in_the_callers_thread_and_may_take_its_time():
    threads: list[str] = []

    def fetch(state: State) -> dict:
        threads.append(threading.current_thread().name)
        time.sleep(0.3)
        return {"items": ["fetched"]}

    builder = chain(fetch)
    assert builder.nodes["fetch"].timeout is None
    assert builder.compile().invoke({"items": []}) == {"items": ["fetched", "after"]}
    assert threads == [threading.current_thread().name]


def test_a_subgraph_node_with_a_timeout_needs_an_async_run():
    async def slow(state: State) -> dict:
        await asyncio.sleep(5)
        return {"items": ["late"]}

    inner = StateGraph(State)
    inner.add_node("slow", slow)
    inner.add_edge(START, "slow")
    graph = chain(inner.compile(), timeout=0.1).compile()
    with pytest.raises(AsyncNodeInSyncRunError, match="subgraph fetch with a timeout"):
        graph.invoke({"items": []})
    with pytest.raises(NodeTimeoutError, match="node 'fetch'"):
        asyncio.run(graph.ainvoke({"items": []}))


@pytest.mark.parametrize(
    ("timeout", "problem"),
    [
        (0, "positive"),
        (-1.5, "positive"),
        (timedelta(0), "positive"),
        (float("nan"), "positive"),
        ("5s", "seconds"),
        (True, "seconds"),
    ],
)
def test_a_bad_timeout_is_refused_when_the_node_is_added(timeout, problem):
    with pytest.raises(GraphValidationError, match=rf"node 'fetch': timeout .*{problem}"):
        chain(lambda state: {}, timeout=timeout)


def test_a_timeout_is_seconds_or_a_timedelta():
    assert chain(lambda state: {}, timeout=2).nodes["fetch"].timeout == TimeoutPolicy(2.0)
    minute = chain(lambda state: {}, timeout=timedelta(minutes=1)).nodes["fetch"].timeout
    assert minute == TimeoutPolicy(run_timeout=60.0)
