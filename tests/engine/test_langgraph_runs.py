"""Runs that LangGraph 1.x programs rely on: a step that cannot be applied, replay and going on
from a checkpoint, and subgraphs compiled with a checkpointer of their own (a saver, True,
False). Each expectation was observed on LangGraph 1.2.22 running the same program."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, TypedDict

import pytest

from threadline import END, START, Command, StateGraph, interrupt
from threadline.checkpoint.memory import InMemorySaver
from threadline.errors import ConfigError, GraphValidationError, InvalidUpdateError


def cfg(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


def sources(graph, config: dict) -> list[tuple[str, int, tuple[str, ...]]]:
    return [
        (h.metadata["source"], h.metadata["step"], h.next) for h in graph.get_state_history(config)
    ]


# ----------------------------------------------------------------- a step that cannot be applied
class One(TypedDict):
    x: int


def conflicting(saver, **compile_kw):
    """``first`` fans out to ``a`` and ``b``, which both set ``x`` in one step."""
    g = StateGraph(One)
    g.add_node("first", lambda s: {})
    g.add_node("a", lambda s: {"x": 1})
    g.add_node("b", lambda s: {"x": 2})
    g.add_edge(START, "first")
    g.add_edge("first", "a")
    g.add_edge("first", "b")
    g.add_edge("a", END)
    g.add_edge("b", END)
    return g.compile(checkpointer=saver, **compile_kw)


@pytest.mark.parametrize("durability", ["sync", "exit"])
def test_a_step_whose_writes_conflict_stays_next_and_shows_why(saver, durability):
    graph = conflicting(saver)
    with pytest.raises(InvalidUpdateError, match="'x'"):
        graph.invoke({"x": 0}, cfg(), durability=durability)

    state = graph.get_state(cfg())
    assert state.next == ("a", "b")  # not finished: the step is still to do
    assert state.values == {"x": 0}
    assert [t.result for t in state.tasks] == [{"x": 1}, {"x": 2}]
    assert all("InvalidUpdateError" in t.error and "'x'" in t.error for t in state.tasks)
    assert sources(graph, cfg())[0] == ("loop", 1, ("a", "b"))

    # As in LangGraph, going on applies the same writes and fails the same way...
    count = len(list(graph.get_state_history(cfg())))
    with pytest.raises(InvalidUpdateError):
        graph.invoke(None, cfg())
    assert graph.get_state(cfg()).next == ("a", "b")
    assert len(list(graph.get_state_history(cfg()))) == count

    # ...until the state is repaired as if one of them had written it
    graph.update_state(cfg(), {"x": 2}, as_node="b")
    repaired = graph.get_state(cfg())
    assert (repaired.values, repaired.next, repaired.tasks) == ({"x": 2}, (), ())


def test_new_input_after_a_conflicting_step_starts_over(saver):
    graph = conflicting(saver)
    with pytest.raises(InvalidUpdateError):
        graph.invoke({"x": 0}, cfg())
    with pytest.raises(InvalidUpdateError):
        graph.invoke({"x": 5}, cfg())
    assert [s for s, _, _ in sources(graph, cfg())] == ["loop", "loop", "input"] * 2


# ----------------------------------------------------------------- replay and going on
class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def abc(saver, **compile_kw):
    g = StateGraph(Log)
    for name in "abc":
        g.add_node(name, lambda s, name=name: {"log": [name]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    return g.compile(checkpointer=saver, **compile_kw)


def test_replaying_the_newest_checkpoint_forks_it_one_step_later(saver):
    graph = abc(saver)
    graph.invoke({"log": ["x"]}, cfg())
    newest = graph.get_state(cfg())

    assert graph.invoke(None, newest.config) == {"log": ["x", "a", "b", "c"]}
    history = list(graph.get_state_history(cfg()))
    assert [(h.metadata["source"], h.metadata["step"]) for h in history[:2]] == [
        ("fork", 4),
        ("loop", 3),
    ]
    assert len(history) == 6
    assert history[0].parent_config == newest.config


def test_replaying_an_older_checkpoint_reruns_what_follows_on_a_new_branch(saver):
    graph = abc(saver)
    graph.invoke({"log": ["x"]}, cfg())
    at_b = next(h for h in graph.get_state_history(cfg()) if h.next == ("b",))

    assert graph.invoke(None, at_b.config) == {"log": ["x", "a", "b", "c"]}
    assert sources(graph, cfg())[:3] == [("loop", 4, ()), ("loop", 3, ("c",)), ("fork", 2, ("b",))]
    assert len(list(graph.get_state_history(cfg()))) == 8


def test_going_on_from_an_update_writes_a_fork_only_once_the_thread_moved_past_it(saver):
    graph = abc(saver)
    graph.invoke({"log": ["x"]}, cfg())
    at_b = next(h for h in graph.get_state_history(cfg()) if h.next == ("b",))
    updated = graph.update_state(at_b.config, {"log": ["u"]})

    # The update is the newest checkpoint: the run goes on from it
    assert graph.invoke(None, updated) == {"log": ["x", "a", "u", "b", "c"]}
    assert sources(graph, cfg())[:3] == [
        ("loop", 4, ()),
        ("loop", 3, ("c",)),
        ("update", 2, ("b",)),
    ]
    assert len(list(graph.get_state_history(cfg()))) == 8

    # Now it has children: going on from it again starts a branch
    assert graph.invoke(None, updated) == {"log": ["x", "a", "u", "b", "c"]}
    assert sources(graph, cfg())[:3] == [("loop", 5, ()), ("loop", 4, ("c",)), ("fork", 3, ("b",))]
    assert len(list(graph.get_state_history(cfg()))) == 11


def test_going_on_does_not_stop_again_at_the_breakpoint_it_starts_from(saver):
    graph = abc(saver, interrupt_before=["b"])
    assert graph.invoke({"log": ["x"]}, cfg()) == {"log": ["x", "a"]}
    paused = graph.get_state(cfg())
    assert paused.next == ("b",)

    # Editing the state there, then going on, runs b (LangGraph does the same)
    graph.update_state(cfg(), {"log": ["u"]})
    assert graph.invoke(None, cfg()) == {"log": ["x", "a", "u", "b", "c"]}

    # Replaying the paused checkpoint runs b too, on a branch of its own
    assert graph.invoke(None, paused.config) == {"log": ["x", "a", "b", "c"]}
    # A replay from before the breakpoint stops there again
    start = list(graph.get_state_history(cfg()))[-1]
    assert graph.invoke(None, start.config) == {"log": ["x", "a"]}
    assert graph.get_state(cfg()).next == ("b",)


# ----------------------------------------------------------------- subgraphs with a checkpointer
class Inner(TypedDict):
    log: Annotated[list[str], operator.add]
    seen: Annotated[list[int], operator.add]


def inner_graph(checkpointer, ask: bool = False):
    """One node that counts the calls it has seen so far (it asks first when ``ask``)."""

    def step(state: Inner) -> dict:
        answer = interrupt("value?") if ask else len(state["seen"])
        return {"log": [f"inner{answer}"], "seen": [answer]}

    g = StateGraph(Inner)
    g.add_node("step", step)
    g.add_edge(START, "step")
    g.add_edge("step", END)
    return g.compile(checkpointer=checkpointer)


def calling(sub, parent_saver):
    """A parent whose node invokes ``sub`` and reports what it saw."""

    def call(state: Log) -> dict:
        out = sub.invoke({"log": []})
        return {"log": [*out["log"], f"seen={out['seen']}"]}

    g = StateGraph(Log)
    g.add_node("call", call)
    g.add_edge(START, "call")
    g.add_edge("call", END)
    return g.compile(checkpointer=parent_saver)


def test_a_subgraph_with_its_own_saver_runs_on_the_parents_thread(saver):
    own = InMemorySaver()
    parent = calling(inner_graph(own, ask=True), saver)

    stopped = parent.invoke({"log": ["x"]}, cfg())  # no "needs a thread id" error
    assert stopped["__interrupt__"][0].value == "value?"
    assert parent.get_state(cfg()).next == ("call",)
    assert parent.invoke(Command(resume=7), cfg()) == {"log": ["x", "inner7", "seen=[7]"]}
    # As in LangGraph, the parent's saver keeps the subgraph's checkpoints; its own gets none
    assert list(own.list("t", "")) == []


def test_a_subgraph_with_its_own_saver_added_as_a_node(saver):
    own = InMemorySaver()
    g = StateGraph(Inner)
    g.add_node("child", inner_graph(own, ask=True))
    g.add_edge(START, "child")
    g.add_edge("child", END)
    parent = g.compile(checkpointer=saver)

    parent.invoke({"log": ["x"], "seen": []}, cfg())
    snap = parent.get_state(cfg(), subgraphs=True)
    assert snap.next == ("child",)
    assert snap.tasks[0].state is not None and snap.tasks[0].state.next == ("step",)
    assert parent.invoke(Command(resume=3), cfg()) == {"log": ["x", "inner3"], "seen": [3]}
    assert list(own.list("t", "")) == []


def test_a_subgraph_with_its_own_saver_in_a_parent_without_one_saves_nothing():
    own = InMemorySaver()
    parent = calling(inner_graph(own), None)
    assert parent.invoke({"log": ["x"]}) == {"log": ["x", "inner0", "seen=[0]"]}
    assert list(own.list("t", "")) == []


async def test_a_subgraph_with_its_own_saver_inside_an_async_node(saver):
    sub = inner_graph(InMemorySaver(), ask=True)

    async def call(state: Log) -> dict:
        out = await sub.ainvoke({"log": []})
        return {"log": out["log"]}

    g = StateGraph(Log)
    g.add_node("call", call)
    g.add_edge(START, "call")
    g.add_edge("call", END)
    parent = g.compile(checkpointer=saver)
    await parent.ainvoke({"log": ["x"]}, cfg())
    assert await parent.ainvoke(Command(resume=1), cfg()) == {"log": ["x", "inner1"]}


@pytest.mark.parametrize(
    ("checkpointer", "second_seen"),
    [(None, "seen=[0]"), (True, "seen=[0, 1]"), (False, "seen=[0]")],
)
def test_what_a_subgraph_remembers_across_its_parents_runs(saver, checkpointer, second_seen):
    parent = calling(inner_graph(checkpointer), saver)
    parent.invoke({"log": ["x0"]}, cfg())
    assert parent.invoke({"log": ["x1"]}, cfg())["log"][-1] == second_seen


@pytest.mark.parametrize("checkpointer", [None, True, False])
def test_interrupts_inside_a_subgraph_resume_in_every_mode(saver, checkpointer):
    parent = calling(inner_graph(checkpointer, ask=True), saver)
    for run, answer in enumerate((10, 11)):
        stopped = parent.invoke({"log": [f"x{run}"]}, cfg())
        assert [i.value for i in stopped["__interrupt__"]] == ["value?"]
        assert parent.get_state(cfg()).next == ("call",)
        done = parent.invoke(Command(resume=answer), cfg())
    # the second run's subgraph saw the first answer only when it keeps its state (True)
    assert done["log"][-1] == ("seen=[10, 11]" if checkpointer is True else "seen=[11]")


def test_a_subgraph_keeping_its_state_takes_new_input_when_the_parent_starts_over(saver):
    # Its interrupted call is abandoned, as the parent's own interrupt is (LangGraph agrees)
    parent = calling(inner_graph(True, ask=True), saver)
    first = parent.invoke({"log": ["x0"]}, cfg())["__interrupt__"][0]
    second = parent.invoke({"log": ["x1"]}, cfg())["__interrupt__"][0]
    assert second.id != first.id
    assert parent.invoke(Command(resume=5), cfg())["log"][-2:] == ["inner5", "seen=[5]"]


def test_subgraph_checkpoints_name_the_parent_checkpoint_they_ran_under(saver):
    g = StateGraph(Inner)
    g.add_node("child", inner_graph(None, ask=True))
    g.add_edge(START, "child")
    g.add_edge("child", END)
    parent = g.compile(checkpointer=saver)
    parent.invoke({"log": [], "seen": []}, cfg())
    snap = parent.get_state(cfg(), subgraphs=True)
    assert snap.metadata["parents"] == {}
    parent_id = snap.config["configurable"]["checkpoint_id"]
    assert snap.tasks[0].state.metadata["parents"] == {"": parent_id}


def test_a_subgraph_keeping_its_state_is_shown_under_its_node_name(saver):
    g = StateGraph(Inner)
    g.add_node("child", inner_graph(True, ask=True))
    g.add_edge(START, "child")
    g.add_edge("child", END)
    parent = g.compile(checkpointer=saver)
    parent.invoke({"log": ["x"], "seen": []}, cfg())
    inner = parent.get_state(cfg(), subgraphs=True).tasks[0].state
    assert (inner.values["log"], inner.next) == (["x"], ("step",))
    assert inner.config["configurable"]["checkpoint_ns"] == "child"


def test_a_subgraph_that_never_saves_leaves_no_checkpoint_to_look_at(saver):
    g = StateGraph(Inner)
    g.add_node("child", inner_graph(False, ask=True))
    g.add_edge(START, "child")
    g.add_edge("child", END)
    parent = g.compile(checkpointer=saver)
    parent.invoke({"log": [], "seen": []}, cfg())
    snap = parent.get_state(cfg(), subgraphs=True)
    assert snap.next == ("child",) and snap.tasks[0].state is None
    assert parent.invoke(Command(resume=5), cfg()) == {"log": ["inner5"], "seen": [5]}


def test_checkpointer_true_is_for_subgraphs_only():
    graph = inner_graph(True)
    with pytest.raises(ConfigError, match="root graphs"):
        graph.invoke({"log": []}, cfg())
    with pytest.raises(ConfigError, match="root graphs"):
        asyncio.run(graph.ainvoke({"log": []}, cfg()))
    with pytest.raises(ConfigError, match="root graphs"):
        graph.get_state(cfg())


def test_checkpointer_false_on_its_own_runs_without_checkpoints():
    assert inner_graph(False).invoke({"log": []}) == {"log": ["inner0"], "seen": [0]}


def test_checkpointer_must_be_a_saver_or_a_mode():
    g = StateGraph(Log)
    g.add_node("a", lambda s: {})
    g.add_edge(START, "a")
    g.add_edge("a", END)
    with pytest.raises(GraphValidationError, match="True, False or None"):
        g.compile(checkpointer="memory")
