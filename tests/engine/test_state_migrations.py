"""Code changes and paused threads: state versions, upcasters, and ``threadline.check``.

Each test writes threads with one definition of a graph and reads them with a later one, on
the same SQLite file, as a deploy does.
"""

from __future__ import annotations

import asyncio
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

import threadline
from threadline import END, START, Command, StateGraph, interrupt
from threadline.checkpoint import BaseSaver, SqliteSaver
from threadline.errors import GraphValidationError, IncompatibleThreadError


class Crash(BaseException):
    """Stands for the process dying inside a node."""


def cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


# ---------------------------------------------------------------------- version 1
class StateV1(TypedDict, total=False):
    name: str
    log: Annotated[list[str], operator.add]


def graph_v1(saver: BaseSaver, crash: bool = False) -> Any:
    """``greet`` → ``ask`` (a person confirms) → ``done``; with ``crash``, ``ask`` dies."""

    def greet(state: StateV1) -> StateV1:
        return {"name": "Ada Lovelace", "log": ["greet"]}

    def ask(state: StateV1) -> StateV1:
        if crash:
            raise Crash()
        return {"log": [f"ask:{interrupt('confirm ' + state['name'])}"]}

    def done(state: StateV1) -> StateV1:
        return {"log": [f"done:{state['name']}"]}

    g = StateGraph(StateV1).add_node("greet", greet).add_node("ask", ask).add_node("done", done)
    g.add_edge(START, "greet").add_edge("greet", "ask").add_edge("ask", "done")
    return g.add_edge("done", END).compile(checkpointer=saver)


# ---------------------------------------------------------------------- version 2: name split
class StateV2(TypedDict, total=False):
    first: str
    last: str
    log: Annotated[list[str], operator.add]


def builder_v2(version: int = 2) -> StateGraph:
    def greet(state: StateV2) -> StateV2:
        return {"first": "Ada", "last": "Lovelace", "log": ["greet"]}

    def ask(state: StateV2) -> StateV2:
        return {"log": [f"ask:{interrupt('confirm ' + state['first'])}"]}

    def done(state: StateV2) -> StateV2:
        return {"log": [f"done:{state['last']}, {state['first']}"]}

    g = StateGraph(StateV2, state_version=version)
    g.add_node("greet", greet).add_node("ask", ask).add_node("done", done)
    g.add_edge(START, "greet").add_edge("greet", "ask").add_edge("ask", "done")
    g.add_edge("done", END)

    @g.upcaster(from_version=1)
    def split_name(values: dict[str, Any]) -> dict[str, Any]:
        if "name" in values:  # also given the partial updates of finished tasks
            values["first"], values["last"] = values.pop("name").split(" ", 1)
        return values

    return g


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "deploys.db"


def test_an_interrupted_thread_of_version_1_resumes_on_version_2(db: Path) -> None:
    with SqliteSaver(db) as saver:
        old = graph_v1(saver)
        assert "__interrupt__" in old.invoke({"log": []}, cfg("t"))
        assert old.get_state(cfg("t")).values["name"] == "Ada Lovelace"

    with SqliteSaver(db) as saver:  # the new deploy
        new = builder_v2().compile(checkpointer=saver)
        paused = new.get_state(cfg("t"))
        assert paused.values == {"first": "Ada", "last": "Lovelace", "log": ["greet"]}
        assert paused.interrupts[0].value == "confirm Ada Lovelace"  # the same interrupt waits
        assert "state_version" not in paused.metadata  # saved by version 1

        out = new.invoke(Command(resume="yes"), cfg("t"))
        assert out == {
            "first": "Ada",
            "last": "Lovelace",
            "log": ["greet", "ask:yes", "done:Lovelace, Ada"],
        }
        history = list(new.get_state_history(cfg("t")))
        assert [h.metadata.get("state_version") for h in history] == [2, 2, None, None, None]
        assert all("name" not in h.values for h in history)  # old ones are upcast when read

    with SqliteSaver(db) as saver:  # stored in the new shape, not upcast again at each read
        raw = saver.get_tuple("t").checkpoint.values
        assert raw == out


def _split(name: str | None) -> dict[str, str]:
    if name is None:
        return {}
    first, last = name.split(" ", 1)
    return {"first": first, "last": last}


def test_finished_siblings_saved_update_is_upcast(db: Path) -> None:
    """A version-1 step that failed after one task finished: on version 2 that task's saved
    update goes through the upcaster, and only the failed task runs again."""

    class Fan(TypedDict, total=False):
        name: str
        log: Annotated[list[str], operator.add]

    def namer(state: Any) -> Any:
        return {"name": "Grace Hopper"}

    def failing(state: Any) -> Any:
        raise RuntimeError("worker down")

    with SqliteSaver(db) as saver:
        g1 = StateGraph(Fan).add_node("namer", namer).add_node("worker", failing)
        g1 = g1.add_edge(START, "namer").add_edge(START, "worker").compile(checkpointer=saver)
        with pytest.raises(RuntimeError):
            g1.invoke({"log": []}, cfg("t"))
        assert {t.name: t.result for t in g1.get_state(cfg("t")).tasks} == {
            "namer": {"name": "Grace Hopper"},
            "worker": None,
        }

    ran: list[str] = []

    class FanV2(TypedDict, total=False):
        first: str
        last: str
        log: Annotated[list[str], operator.add]

    def worker(state: FanV2) -> FanV2:
        ran.append("worker")
        return {"log": ["worked"]}

    def namer_v2(state: FanV2) -> FanV2:
        ran.append("namer")
        return {"first": "?", "last": "?"}

    with SqliteSaver(db) as saver:
        g2 = StateGraph(FanV2, state_version=2).add_node("namer", namer_v2)
        g2.add_node("worker", worker).add_edge(START, "namer").add_edge(START, "worker")
        g2.upcaster(from_version=1)(lambda v: {**_split(v.pop("name", None)), **v})
        graph = g2.compile(checkpointer=saver)
        assert threadline.check(graph) == []
        assert {t.name: t.result for t in graph.get_state(cfg("t")).tasks}["namer"] == {
            "first": "Grace",
            "last": "Hopper",
        }
        [report] = threadline.resume_unfinished(graph, statuses=("error",))
        assert report.values == {"first": "Grace", "last": "Hopper", "log": ["worked"]}
        assert ran == ["worker"]


def test_upcasters_chain_from_any_older_version(db: Path) -> None:
    with SqliteSaver(db) as saver:
        graph_v1(saver).invoke({"log": []}, cfg("from-1"))
    with SqliteSaver(db) as saver:
        builder_v2().compile(checkpointer=saver).invoke({"log": []}, cfg("from-2"))

    v3 = builder_v2(version=3)

    @v3.upcaster(from_version=2)
    def shout(values: dict[str, Any]) -> dict[str, Any]:
        if "last" in values:
            values["last"] = values["last"].upper()
        return values

    with SqliteSaver(db) as saver:
        graph = v3.compile(checkpointer=saver)
        for thread in ("from-1", "from-2"):
            assert graph.get_state(cfg(thread)).values["last"] == "LOVELACE"
            out = graph.invoke(Command(resume="ok"), cfg(thread))
            assert out["log"][-1] == "done:LOVELACE, Ada"


def test_update_state_on_an_old_checkpoint_stores_the_new_shape(db: Path) -> None:
    with SqliteSaver(db) as saver:
        graph_v1(saver).invoke({"log": []}, cfg("t"))
    with SqliteSaver(db) as saver:
        graph = builder_v2().compile(checkpointer=saver)
        asyncio.run(graph.aupdate_state(cfg("t"), {"first": "Augusta"}, as_node="greet"))
        record = saver.get_tuple("t")
        assert record.metadata["state_version"] == 2
        assert record.checkpoint.values == {
            "first": "Augusta",
            "last": "Lovelace",
            "log": ["greet"],
        }
    with SqliteSaver(db) as saver:
        graph = builder_v2().compile(checkpointer=saver)
        assert graph.get_state(cfg("t")).values["first"] == "Augusta"


def test_a_thread_saved_by_a_newer_version_is_refused(db: Path) -> None:
    with SqliteSaver(db) as saver:
        builder_v2().compile(checkpointer=saver).invoke({"log": []}, cfg("t"))
    with SqliteSaver(db) as saver:
        older = builder_v2(version=2)
        older.state_version = 1  # a rollback to a build that knew only version 1
        older.upcasters.clear()
        graph = older.compile(checkpointer=saver)
        with pytest.raises(IncompatibleThreadError, match=r"=2.*reads state_version=1"):
            graph.invoke(Command(resume="ok"), cfg("t"))
        assert len(list(saver.list("t"))) == 3  # nothing was written


def test_a_missing_or_failing_upcaster_is_a_clear_error(db: Path) -> None:
    with SqliteSaver(db) as saver:
        graph_v1(saver).invoke({"log": []}, cfg("t"))
    skipped = builder_v2(version=3)  # has 1 -> 2 but not 2 -> 3
    broken = builder_v2()
    broken.upcasters[1] = lambda values: values["no such key"]
    with SqliteSaver(db) as saver:
        with pytest.raises(IncompatibleThreadError, match="no upcaster from version 2"):
            skipped.compile(checkpointer=saver).invoke(Command(resume="ok"), cfg("t"))
        with pytest.raises(IncompatibleThreadError, match="upcaster from state_version=1 failed"):
            broken.compile(checkpointer=saver).get_state(cfg("t"))


def test_versions_and_upcasters_are_checked_when_building() -> None:
    with pytest.raises(GraphValidationError, match="state_version must be"):
        StateGraph(StateV2, state_version=0)
    g = StateGraph(StateV2, state_version=2).add_node("a", lambda s: {}).add_edge(START, "a")
    g.upcaster(from_version=2)(lambda v: v)
    with pytest.raises(GraphValidationError, match="from_version=2 does not lead"):
        g.compile()
    plain = StateGraph(StateV2).add_node("a", lambda s: {}).add_edge(START, "a")
    plain.upcaster(from_version=1)(lambda v: v)
    with pytest.raises(GraphValidationError, match="upcasters need a state version"):
        plain.compile()
    with pytest.raises(GraphValidationError, match="exists"):
        builder_v2().upcaster(from_version=1)(lambda v: v)
    with pytest.raises(GraphValidationError, match="from_version must be"):
        builder_v2().upcaster(from_version="1")


# ---------------------------------------------------------------------- threadline.check
def test_check_lists_threads_the_new_graph_cannot_continue(db: Path) -> None:
    with SqliteSaver(db) as saver:
        old = graph_v1(saver)
        old.invoke({"log": []}, cfg("paused"))  # waits at ask
        old.invoke({"log": []}, cfg("paused-too"))
        old.update_state(cfg("paused-too"), {"name": "Alan Turing"}, as_node="greet")
        with pytest.raises(Crash):
            graph_v1(saver, crash=True).invoke({"log": []}, cfg("crashed"))
        old.invoke({"log": []}, cfg("done"))
        old.invoke(Command(resume="y"), cfg("done"))

    class Renamed(TypedDict, total=False):
        name: int  # was str
        log: Annotated[list[str], operator.add]

    g = StateGraph(Renamed).add_node("greet", lambda s: {}).add_node("confirm", lambda s: {})
    g.add_edge(START, "greet").add_edge("greet", "confirm")
    with SqliteSaver(db) as saver:
        graph = g.compile(checkpointer=saver)
        problems = threadline.check(graph)
        by_thread: dict[str, list[str]] = {}
        for p in problems:
            by_thread.setdefault(p.thread_id, []).append(p.problem)
        assert by_thread == {
            "paused": [
                "plans node 'ask', which this graph does not have",
                "key 'name' holds a str, but the schema says int",
            ],
            "paused-too": [
                "plans node 'ask', which this graph does not have",
                "key 'name' holds a str, but the schema says int",
            ],
            "crashed": [
                "plans node 'ask', which this graph does not have",
                "key 'name' holds a str, but the schema says int",
            ],
        }
        assert {p.status for p in problems} == {"interrupted", "running"}
        assert asyncio.run(threadline.acheck(graph)) == problems
        assert threadline.check(graph, statuses=("interrupted",)) != problems

        with pytest.raises(IncompatibleThreadError, match="plans 'ask', which this graph"):
            graph.invoke(None, cfg("crashed"))
        assert [t.status for t in saver.list_threads() if t.thread_id == "crashed"] == ["running"]


def test_check_is_empty_when_upcasters_cover_the_change(db: Path) -> None:
    with SqliteSaver(db) as saver:
        graph_v1(saver).invoke({"log": []}, cfg("paused"))
    with SqliteSaver(db) as saver:
        assert threadline.check(builder_v2().compile(checkpointer=saver)) == []
        unversioned = builder_v2()
        unversioned.state_version = None
        unversioned.upcasters.clear()
        problems = threadline.check(unversioned.compile(checkpointer=saver))
        assert [p.problem for p in problems] == ["key 'name' is in no state schema of this graph"]
        missing = threadline.check(builder_v2(version=3).compile(checkpointer=saver))
        assert "no upcaster from version 2" in missing[0].problem


def test_check_looks_inside_a_subgraph_paused_in_a_thread(db: Path) -> None:
    def child(step: str) -> Any:
        c = StateGraph(StateV1).add_node(step, lambda s: {"log": [f"ok:{interrupt('?')}"]})
        return c.add_edge(START, step).compile()

    def parent(sub: Any, saver: BaseSaver) -> Any:
        p = StateGraph(StateV1).add_node("child", sub).add_edge(START, "child")
        return p.compile(checkpointer=saver)

    with SqliteSaver(db) as saver:
        old = parent(child("review"), saver)
        assert "__interrupt__" in old.invoke({"log": []}, cfg("t"))
        assert threadline.check(old) == []
        new = parent(child("approve"), saver)  # the paused node was renamed
        [problem] = threadline.check(new)
        assert problem.problem == (
            "in subgraph 'child': plans node 'review', which this graph does not have"
        )
        assert problem.status == "interrupted"
