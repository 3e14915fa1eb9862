"""The execution trace: every run records what ran, how it ended and what nodes noted, in the
saver, with the checkpoints; ``get_trace`` reads it back. Run on every saver."""

from __future__ import annotations

import asyncio
import operator
from datetime import UTC, datetime, timedelta
from typing import Annotated, TypedDict

import pytest

from threadline import (
    END,
    START,
    Command,
    RetryPolicy,
    StateGraph,
    entrypoint,
    interrupt,
    record_event,
    task,
)
from threadline.errors import SerializationError
from threadline.runtime import trace as trace_module


class State(TypedDict, total=False):
    n: int
    log: Annotated[list[str], operator.add]


def bump(name: str):
    def node(state: State) -> dict:
        return {"n": state.get("n", 0) + 1, "log": [name]}

    node.__name__ = name
    return node


def chain(saver, *names: str, trace: bool = True, **nodes):
    graph = StateGraph(State)
    previous = START
    for name in names:
        graph.add_node(name, nodes.get(name) or bump(name))
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    return graph.compile(checkpointer=saver, trace=trace)


def config(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


def summary(entries) -> list[tuple]:
    return [(e.kind, e.name, e.status) for e in entries]


def trace_writes(saver, thread: str = "t") -> list:
    return [
        w
        for r in saver.list(thread)
        for w in r.pending_writes
        if w.kind == trace_module.TRACE_WRITE
    ]


@pytest.fixture
def every_checkpoint(monkeypatch):
    """Entries go with every checkpoint saved, as they do when steps take a second or more."""
    monkeypatch.setattr(trace_module, "SAVE_EVERY", 0.0)


# ----------------------------------------------------------------------------- what is recorded


def test_a_chain_records_one_entry_per_node_in_order(saver):
    graph = chain(saver, "a", "b", "c")
    assert graph.invoke({"n": 0}, config())["n"] == 3

    entries = graph.get_trace(config())
    assert summary(entries) == [("node", "a", "ok"), ("node", "b", "ok"), ("node", "c", "ok")]
    assert [e.id for e in entries] == sorted(e.id for e in entries)
    assert len({e.id for e in entries}) == 3
    assert all(e.attempt == 1 and e.duration is not None and e.duration >= 0 for e in entries)
    # each node names the checkpoint its step started from, and the step's number
    history = {
        s.metadata["step"]: s.config["configurable"]["checkpoint_id"]
        for s in graph.get_state_history(config())
    }
    assert [(e.step, e.checkpoint_id) for e in entries] == [
        (1, history[0]),
        (2, history[1]),
        (3, history[2]),
    ]
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    assert entries[0].at.endswith("+00:00")


def test_a_failing_node_records_each_attempt_with_its_error(saver):
    calls = {"flaky": 0}

    def flaky(state: State) -> dict:
        calls["flaky"] += 1
        if calls["flaky"] < 3:
            raise ConnectionError(f"down {calls['flaky']}")
        return {"n": 1}

    graph = StateGraph(State)
    graph.add_node(
        "flaky",
        flaky,
        retry_policy=RetryPolicy(initial_interval=0.001, jitter=False, retry_on=ConnectionError),
    )
    graph.add_edge(START, "flaky")
    app = graph.compile(checkpointer=saver)
    app.invoke({"n": 0}, config())

    entries = app.get_trace(config())
    assert [(e.attempt, e.status, e.error_type, e.error_message) for e in entries] == [
        (1, "error", "ConnectionError", "down 1"),
        (2, "error", "ConnectionError", "down 2"),
        (3, "ok", None, None),
    ]
    assert len({e.task_id for e in entries}) == 1


def test_a_failed_run_keeps_its_trace_and_the_retry_adds_to_it(saver):
    broken = {"on": True}

    def check(state: State) -> dict:
        if broken["on"]:
            raise ValueError("bad input")
        return {"log": ["check"]}

    app = chain(saver, "a", "check", check=check)
    with pytest.raises(ValueError):
        app.invoke({"n": 0}, config())
    failed = app.get_trace(config())
    assert [(e.name, e.status, e.error_type, e.error_message) for e in failed] == [
        ("a", "ok", None, None),
        ("check", "error", "ValueError", "bad input"),
    ]

    broken["on"] = False
    app.invoke(None, config())
    assert summary(app.get_trace(config())) == [
        ("node", "a", "ok"),
        ("node", "check", "error"),
        ("node", "check", "ok"),
    ]


def test_an_interrupt_raised_and_answered(saver):
    def ask(state: State) -> dict:
        answer = interrupt("approve?")
        return {"log": [f"answer:{answer}"]}

    app = chain(saver, "a", "ask", ask=ask)
    out = app.invoke({"n": 0}, config())
    (asked,) = out["__interrupt__"]
    assert summary(app.get_trace(config())) == [
        ("node", "a", "ok"),
        ("node", "ask", "interrupted"),
        ("interrupt", "ask", None),
    ]

    app.invoke(Command(resume="yes"), config())
    entries = app.get_trace(config())
    assert summary(entries) == [
        ("node", "a", "ok"),
        ("node", "ask", "interrupted"),
        ("interrupt", "ask", None),
        ("resume", "ask", None),
        ("node", "ask", "ok"),
    ]
    raised, answered = entries[2], entries[3]
    assert (raised.interrupt_id, raised.data) == (asked.id, "approve?")
    assert (answered.interrupt_id, answered.data) == (asked.id, "yes")
    assert raised.task_id == answered.task_id == entries[4].task_id


def test_record_event_adds_what_a_node_notes(saver):
    def agent(state: State) -> dict:
        record_event("tool_call", {"tool": "search", "query": "weather"})
        record_event("tool_result", {"tool": "search", "ok": True})
        return {"log": ["agent"]}

    app = chain(saver, "agent", "b", agent=agent)
    app.invoke({"n": 0}, config())

    entries = app.get_trace(config())
    assert [(e.kind, e.name) for e in entries] == [
        ("node", "agent"),
        ("event", "tool_call"),
        ("event", "tool_result"),
        ("node", "b"),
    ]
    call = entries[1]
    assert call.data == {"tool": "search", "query": "weather"}
    assert call.recorded_by == "agent" and call.task_id == entries[0].task_id
    assert call.step == entries[0].step


def test_record_event_refuses_bad_use_early(saver):
    with pytest.raises(RuntimeError, match="inside a running node"):
        record_event("tool_call", {})

    def node(state: State) -> dict:
        record_event("tool_call", {"client": object()})
        return {}

    app = chain(saver, "node", node=node)
    with pytest.raises(SerializationError, match="record_event\\('tool_call'\\) in 'node'"):
        app.invoke({"n": 0}, config())

    def unnamed(state: State) -> dict:
        record_event("", {})
        return {}

    with pytest.raises(ValueError, match="non-empty event name"):
        chain(saver, "unnamed", unnamed=unnamed).invoke({"n": 0}, config("u"))


def test_task_calls_record_their_attempts(saver):
    tries = {"n": 0}

    @task(retry_policy=RetryPolicy(initial_interval=0.001, jitter=False, retry_on=ConnectionError))
    def fetch(x: int) -> int:
        tries["n"] += 1
        if tries["n"] == 1:
            raise ConnectionError("timeout")
        return x * 2

    @task
    def store(x: int) -> int:
        record_event("stored", {"x": x})
        return x

    def node(state: State) -> dict:
        return {"n": store(fetch(state["n"]).result()).result()}

    app = chain(saver, "node", node=node)
    assert app.invoke({"n": 3}, config())["n"] == 6

    entries = app.get_trace(config())
    assert [(e.kind, e.name, e.attempt, e.status, e.error_type) for e in entries] == [
        ("node", "node", 1, "ok", None),
        ("task", "fetch", 1, "error", "ConnectionError"),
        ("task", "fetch", 2, "ok", None),
        ("task", "store", 1, "ok", None),
        ("event", "stored", None, None, None),
    ]
    assert entries[4].recorded_by == "store"
    assert {e.checkpoint_id for e in entries} == {entries[0].checkpoint_id}


def test_an_entrypoint_records_its_function_and_tasks(saver):
    @task
    def double(x: int) -> int:
        return x * 2

    @entrypoint(checkpointer=saver)
    def workflow(x: int) -> int:
        answer = interrupt("go?")
        return double(x).result() + answer

    assert "__interrupt__" in workflow.invoke(1, config())
    assert workflow.invoke(Command(resume=10), config()) == 12
    assert summary(workflow.get_trace(config())) == [
        ("node", "workflow", "interrupted"),
        ("interrupt", "workflow", None),
        ("resume", "workflow", None),
        ("node", "workflow", "ok"),
        ("task", "double", "ok"),
    ]


def test_entrypoint_trace_false_records_nothing(saver):
    @entrypoint(checkpointer=saver, trace=False)
    def workflow(x: int) -> int:
        record_event("ignored", {})
        return x

    assert workflow.invoke(1, config()) == 1
    assert workflow.get_trace(config()) == []
    assert trace_writes(saver) == []


def test_trace_false_writes_nothing(saver):
    def node(state: State) -> dict:
        record_event("tool_call", {"tool": "search"})  # a no-op without a trace
        return {"n": 1}

    app = chain(saver, "a", "node", trace=False, node=node)
    app.invoke({"n": 0}, config())
    assert app.get_trace(config()) == []
    assert trace_writes(saver) == []


def test_compile_refuses_a_trace_that_is_not_a_bool(saver):
    from threadline.errors import GraphValidationError

    graph = StateGraph(State)
    graph.add_node("a", bump("a"))
    graph.add_edge(START, "a")
    with pytest.raises(GraphValidationError, match="trace must be True or False"):
        graph.compile(checkpointer=saver, trace="yes")


# ----------------------------------------------------------------------------- where it is kept


def test_the_trace_is_pruned_deleted_and_copied_with_its_checkpoints(saver, every_checkpoint):
    app = chain(saver, "a", "b")
    app.invoke({"n": 0}, config())
    first_run = app.get_trace(config())
    app.invoke({"n": 0}, config())
    assert len(app.get_trace(config())) == 4

    saver.copy_thread("t", "copy")
    assert app.get_trace(config("copy")) == app.get_trace(config())

    saver.prune("t", keep_last=1)
    kept = app.get_trace(config())
    assert summary(kept) == [("node", "b", "ok")]  # the last step's entry went with its checkpoint
    assert not {e.id for e in kept} & {e.id for e in first_run}

    saver.delete_thread("t")
    assert app.get_trace(config()) == []
    assert len(app.get_trace(config("copy"))) == 4


def test_trace_entries_never_change_how_a_run_resumes(saver, every_checkpoint):
    app = chain(saver, "a", "b", "c")
    app.invoke({"n": 0}, config(), interrupt_before=["b"])
    # the checkpoint before b carries trace entries: b has still not started
    state = app.get_state(config())
    assert state.next == ("b",)
    assert state.tasks[0].result is None and state.tasks[0].error is None
    assert [t.status for t in saver.list_threads()] == ["interrupted"]
    app.invoke(None, config(), interrupt_before=["c"])
    assert app.get_state(config()).next == ("c",)
    assert app.invoke(None, config())["log"] == ["a", "b", "c"]
    assert [t.status for t in saver.list_threads()] == ["idle"]
    assert summary(app.get_trace(config())) == [
        ("node", "a", "ok"),
        ("node", "b", "ok"),
        ("node", "c", "ok"),
    ]


def test_a_replay_records_the_nodes_it_runs_again(saver):
    app = chain(saver, "a", "b", "c")
    app.invoke({"n": 0}, config())
    original = app.get_trace(config())
    after_a = next(s.config for s in app.get_state_history(config()) if s.metadata["step"] == 1)
    app.invoke(None, after_a)

    entries = app.get_trace(config())
    assert entries[:3] == original
    replayed = entries[3:]
    assert summary(replayed) == [("node", "b", "ok"), ("node", "c", "ok")]
    history = list(app.get_state_history(config()))
    (fork,) = [s for s in history if s.metadata["source"] == "fork"]
    after_b = next(s for s in history if s.parent_config == fork.config)
    assert [e.checkpoint_id for e in replayed] == [
        fork.config["configurable"]["checkpoint_id"],
        after_b.config["configurable"]["checkpoint_id"],
    ]
    assert [e.step for e in replayed] == [3, 4]


def test_exit_durability_saves_the_trace_where_the_run_stops(saver):
    app = chain(saver, "a", "b", "c")
    app.invoke({"n": 0}, config(), durability="exit")
    (record,) = list(saver.list("t"))
    assert [w.kind for w in record.pending_writes] == ["trace"]
    assert summary(app.get_trace(config())) == [
        ("node", "a", "ok"),
        ("node", "b", "ok"),
        ("node", "c", "ok"),
    ]


# ----------------------------------------------------------------------------- reading


def test_since_an_entry_id_or_a_time(saver):
    app = chain(saver, "a", "b")
    app.invoke({"n": 0}, config())
    first = app.get_trace(config())
    between = datetime.now(UTC)
    app.invoke({"n": 0}, config())

    newer = app.get_trace(config(), since=first[-1].id)
    assert summary(newer) == [("node", "a", "ok"), ("node", "b", "ok")]
    assert app.get_trace(config(), since=between) == newer
    assert app.get_trace(config(), since=between + timedelta(days=1)) == []

    with pytest.raises(ValueError, match="aware datetime"):
        app.get_trace(config(), since=datetime.now())
    with pytest.raises(TypeError, match=r"TraceEntry\.id or an aware datetime"):
        app.get_trace(config(), since="2026-01-01T00:00:00")


def test_async_runs_and_aget_trace(saver):
    async def slow(state: State) -> dict:
        record_event("waited", {"ms": 1})
        await asyncio.sleep(0.001)
        return {"log": ["slow"]}

    app = chain(saver, "a", "slow", slow=slow)

    async def main() -> list:
        await app.ainvoke({"n": 0}, config())
        return await app.aget_trace(config())

    entries = asyncio.run(main())
    assert [(e.kind, e.name) for e in entries] == [
        ("node", "a"),
        ("node", "slow"),
        ("event", "waited"),
    ]
    assert entries == app.get_trace(config())
    assert entries[1].duration >= 0.001


def test_entries_saved_in_several_batches_stay_in_order(saver, monkeypatch):
    monkeypatch.setattr(trace_module, "MAX_HELD", 2)  # a checkpoint carries them every 2 entries
    app = chain(saver, "a", "b", "c", "d", "e")
    app.invoke({"n": 0}, config())
    assert len(trace_writes(saver)) >= 2
    entries = app.get_trace(config())
    assert [e.name for e in entries] == ["a", "b", "c", "d", "e"]
    assert [e.id for e in entries] == sorted(e.id for e in entries)
    assert app.get_trace(config(), since=entries[2].id) == entries[3:]


def test_a_subgraph_keeps_its_own_trace_in_its_namespace(saver):
    def inner(state: State) -> dict:
        record_event("inside", {"n": state["n"]})
        return {"n": state["n"] + interrupt("more?")}

    sub = StateGraph(State)
    sub.add_node("inner", inner)
    sub.add_edge(START, "inner")
    parent = StateGraph(State)
    parent.add_node("sub", sub.compile())
    parent.add_edge(START, "sub")
    app = parent.compile(checkpointer=saver)

    app.invoke({"n": 1}, config())
    (paused,) = app.get_state(config(), subgraphs=True).tasks
    inside = app.get_trace(paused.state.config)
    assert [(e.kind, e.name) for e in inside] == [
        ("node", "inner"),
        ("event", "inside"),
        ("interrupt", "inner"),
    ]
    assert summary(app.get_trace(config())) == [
        ("node", "sub", "interrupted"),
        ("interrupt", "sub", None),
    ]


def test_release_thread_keeps_or_drops_the_trace_with_the_checkpoints(saver):
    graph = StateGraph(State)
    graph.add_node("a", bump("a"))
    graph.add_edge(START, "a")
    kept = graph.compile(checkpointer=saver, release_thread="keep_last")
    kept.invoke({"n": 0}, config("kept"))
    assert summary(kept.get_trace(config("kept"))) == [("node", "a", "ok")]

    dropped = graph.compile(checkpointer=saver, release_thread="delete")
    dropped.invoke({"n": 0}, config("dropped"))
    assert dropped.get_trace(config("dropped")) == []
