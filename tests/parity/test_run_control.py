"""``RunControl`` drains a run between steps; ``ServerInfo``, ``DEFAULT_RUNTIME``,
``Runtime.heartbeat`` and ``Runtime.control`` exist where LangGraph has them."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

from threadline import START, StateGraph
from threadline.checkpoint.memory import InMemorySaver
from threadline.errors import GraphDrained
from threadline.runtime import DEFAULT_RUNTIME, RunControl, Runtime, ServerInfo


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def chain(saver, control_at: str | None = None):
    def step(name):
        def node(state: State, runtime: Runtime) -> dict:
            runtime.heartbeat()  # a no-op: there is no idle timeout to refresh
            if name == control_at:
                assert runtime.control is not None
                runtime.control.request_drain("deploy")
            return {"log": [name]}

        return node

    g = StateGraph(State)
    for name in "abc":
        g.add_node(name, step(name))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_a_drain_stops_after_the_step_and_the_thread_continues(durability):
    graph = chain(InMemorySaver(), control_at="a")
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(GraphDrained, match="deploy") as caught:
        graph.invoke({"log": []}, config, control=RunControl(), durability=durability)
    assert caught.value.reason == "deploy"
    state = graph.get_state(config)
    assert state.values == {"log": ["a"]} and state.next == ("b",)
    assert graph.invoke(None, config) == {"log": ["a", "b", "c"]}


async def test_a_drain_requested_before_the_run_runs_nothing_but_the_input():
    graph = chain(InMemorySaver())
    control = RunControl()
    control.request_drain()
    assert control.drain_requested and control.drain_reason == "shutdown"
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(GraphDrained, match="shutdown"):
        await graph.ainvoke({"log": []}, config, control=control)
    assert (await graph.aget_state(config)).next == ("a",)
    assert await graph.ainvoke(None, config) == {"log": ["a", "b", "c"]}


def test_without_control_runtime_control_is_none_and_defaults_exist():
    seen = []

    def node(state: State, runtime: Runtime) -> dict:
        seen.append((runtime.control, runtime.server_info))
        return {}

    g = StateGraph(State)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.compile().invoke({"log": []})
    assert seen == [(None, None)]
    assert DEFAULT_RUNTIME.context is None and DEFAULT_RUNTIME.store is None
    assert DEFAULT_RUNTIME.control is None
    info = ServerInfo(assistant_id="a", graph_id="g")
    assert info.user is None
