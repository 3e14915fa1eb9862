"""A node whose output cannot be stored fails like a node that raised: the thread is ``error``,
the error is on the task, and a retry runs that task alone."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, TypedDict

import pytest

from threadline import END, START, StateGraph
from threadline.checkpoint import InMemorySaver, SqliteSaver
from threadline.errors import SerializationError
from threadline.maintenance import resume_unfinished


class State(TypedDict, total=False):
    n: int
    v: Any
    w: int


def graph_with(second: Any, calls: list[str]) -> Any:
    """``first``, then ``second`` and ``other`` in parallel."""

    def first(state: State) -> State:
        return {"n": 1}

    def other(state: State) -> State:
        calls.append("other")
        return {"w": 2}

    builder = StateGraph(State)
    builder.add_node("first", first)
    builder.add_node("second", second)
    builder.add_node("other", other)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("first", "other")
    builder.add_edge(["second", "other"], END)
    return builder


@pytest.fixture(params=["memory", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "memory":
        with InMemorySaver() as memory:
            yield memory
    else:
        with SqliteSaver(tmp_path / "c.db") as sqlite:
            yield sqlite


@pytest.mark.parametrize("run", ["sync", "async"])
def test_an_unstorable_output_leaves_the_thread_in_error(saver: Any, run: str) -> None:
    calls: list[str] = []
    graph = graph_with(lambda state: {"v": lambda: 1}, calls).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    with pytest.raises(SerializationError, match="at v"):
        if run == "sync":
            graph.invoke({"n": 0}, config)
        else:
            asyncio.run(graph.ainvoke({"n": 0}, config))
    (info,) = saver.list_threads()
    assert info.status == "error"
    state = graph.get_state(config)
    errors = {task.name: task.error for task in state.tasks}
    assert errors["other"] is None and "SerializationError" in (errors["second"] or "")
    assert "second" in state.next

    report = resume_unfinished(graph, statuses=("error",))[0]
    assert report.outcome == "failed" and isinstance(report.error, SerializationError)
    assert saver.list_threads()[0].status == "error"

    fixed = graph_with(lambda state: {"v": 3}, calls).compile(checkpointer=saver)
    assert fixed.invoke(None, config) == {"n": 1, "v": 3, "w": 2}
    assert calls == ["other"]  # its result was kept: only the failed task ran again
    assert saver.list_threads()[0].status == "idle"
