"""``TimeoutPolicy``: a run timeout and an idle timeout that progress keeps pushing back."""

from __future__ import annotations

import asyncio
import time
from typing import TypedDict

import pytest

from threadline import START, StateGraph, get_stream_writer, task
from threadline.errors import NodeTimeoutError
from threadline.runtime import Runtime
from threadline.types import TimeoutPolicy


class State(TypedDict):
    n: int


def graph(node, timeout):
    g = StateGraph(State)
    g.add_node("work", node, timeout=timeout)
    g.add_edge(START, "work")
    return g.compile()


def beating(sleep, beats, how="heartbeat"):
    def node(state: State, runtime: Runtime) -> dict:
        for _ in range(beats):
            sleep(0.05)
            if how == "heartbeat":
                runtime.heartbeat()
            else:
                get_stream_writer()("tick")
        return {"n": state["n"] + 1}

    return node


def test_heartbeats_keep_a_sync_node_past_its_idle_timeout():
    node = beating(time.sleep, beats=10)  # 0.5 s in all, never 0.3 s without a beat
    assert graph(node, TimeoutPolicy(idle_timeout=0.3)).invoke({"n": 0}) == {"n": 1}


def test_a_silent_sync_node_times_out_idle():
    def silent(state: State) -> dict:
        time.sleep(0.5)
        return {}

    with pytest.raises(NodeTimeoutError, match="idle timeout") as caught:
        graph(silent, TimeoutPolicy(idle_timeout=0.1)).invoke({"n": 0})
    assert caught.value.kind == "idle" and caught.value.idle_timeout == 0.1


def test_the_run_timeout_is_not_pushed_back_by_heartbeats():
    node = beating(time.sleep, beats=20)
    policy = TimeoutPolicy(run_timeout=0.4, idle_timeout=0.3)
    with pytest.raises(NodeTimeoutError) as caught:
        graph(node, policy).invoke({"n": 0})
    assert caught.value.kind == "run"


def test_stream_writes_are_progress_only_under_auto():
    node = beating(time.sleep, beats=10, how="write")
    assert graph(node, TimeoutPolicy(idle_timeout=0.3)).invoke({"n": 0}) == {"n": 1}
    strict = TimeoutPolicy(idle_timeout=0.3, refresh_on="heartbeat")
    with pytest.raises(NodeTimeoutError, match="idle"):
        graph(node, strict).invoke({"n": 0})


async def test_an_async_node_and_a_task_get_the_same_limits():
    async def anode(state: State, runtime: Runtime) -> dict:
        for _ in range(10):
            await asyncio.sleep(0.05)
            runtime.heartbeat()
        return {"n": 1}

    assert await graph(anode, TimeoutPolicy(idle_timeout=0.3)).ainvoke({"n": 0}) == {"n": 1}

    @task(timeout=TimeoutPolicy(idle_timeout=0.1))
    async def slow() -> int:
        await asyncio.sleep(0.5)
        return 1

    async def calls_slow(state: State) -> dict:
        return {"n": await slow()}

    with pytest.raises(NodeTimeoutError, match="task 'slow' exceeded its idle timeout"):
        await graph(calls_slow, None).ainvoke({"n": 0})


def test_a_policy_needs_a_limit():
    with pytest.raises(ValueError, match="run_timeout, an idle_timeout"):
        TimeoutPolicy()
    with pytest.raises(ValueError, match="refresh_on"):
        TimeoutPolicy(1, refresh_on="never")  # type: ignore[arg-type]
