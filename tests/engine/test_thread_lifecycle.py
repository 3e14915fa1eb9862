"""Threads that finish or are abandoned: release at END, prune old threads, resume crashed runs."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import operator
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from threadline import END, START, Command, StateGraph, interrupt
from threadline.checkpoint import BaseSaver, SqliteSaver
from threadline.errors import ConfigError, GraphValidationError, NothingToResumeError
from threadline.maintenance import Pruned, aprune, aresume_unfinished, prune, resume_unfinished


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


class Crash(BaseException):
    """Stands for the process dying inside a node: nothing of the step gets saved."""


def cfg(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


class Flow:
    """``a → b → c``; ``b`` can crash, fail or ask a person, per thread id."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.crash: set[str] = set()
        self.fail: set[str] = set()
        self.ask: set[str] = set()

    def builder(self) -> StateGraph:
        def step(name: str) -> Any:
            def node(state: State, config: dict[str, Any]) -> State:
                thread = config["configurable"]["thread_id"]
                self.runs.append(f"{thread}:{name}")
                if name == "b" and thread in self.crash:
                    raise Crash()
                if name == "b" and thread in self.fail:
                    raise RuntimeError("b failed")
                if name == "b" and thread in self.ask:
                    return {"log": [f"b={interrupt('ok?')}"]}
                return {"log": [name]}

            return node

        g = StateGraph(State)
        for name in "abc":
            g.add_node(name, step(name))
        return g.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)


# ---------------------------------------------------------------------- a finished thread
def test_invoke_none_on_a_finished_thread_is_a_no_op(saver: BaseSaver) -> None:
    """As in LangGraph: the final state comes back; nothing runs and nothing is written."""
    flow = Flow()
    graph = flow.builder().compile(checkpointer=saver)
    final = graph.invoke({"log": []}, cfg("t"))
    history = [s.config for s in graph.get_state_history(cfg("t"))]
    flow.runs.clear()

    assert graph.invoke(None, cfg("t")) == final == {"log": ["a", "b", "c"]}
    assert list(graph.stream(None, cfg("t"), stream_mode="values")) == [final]
    assert list(graph.stream(None, cfg("t"))) == []  # no update: no node ran
    assert asyncio.run(graph.ainvoke(None, cfg("t"))) == final
    assert flow.runs == []
    assert [s.config for s in graph.get_state_history(cfg("t"))] == history
    assert saver.list_threads()[0].status == "idle"


# ---------------------------------------------------------------------- release_thread
def test_release_delete_removes_a_thread_that_reaches_end(saver: BaseSaver) -> None:
    flow = Flow()
    graph = flow.builder().compile(checkpointer=saver, release_thread="delete")
    assert graph.invoke({"log": []}, cfg("done")) == {"log": ["a", "b", "c"]}
    assert saver.list_threads() == []
    assert list(saver.list("done")) == []
    with pytest.raises(NothingToResumeError):
        graph.invoke(None, cfg("done"))


def test_release_waits_for_a_paused_thread_to_finish(saver: BaseSaver) -> None:
    flow = Flow()
    flow.ask.add("t")
    graph = flow.builder().compile(checkpointer=saver, release_thread="delete")
    out = graph.invoke({"log": []}, cfg("t"))
    assert out["__interrupt__"][0].value == "ok?"
    assert [t.status for t in saver.list_threads()] == ["interrupted"]  # kept while it waits
    assert graph.invoke(Command(resume="yes"), cfg("t")) == {"log": ["a", "b=yes", "c"]}
    assert saver.list_threads() == []


def test_release_keep_last_keeps_the_final_checkpoint(saver: BaseSaver) -> None:
    flow = Flow()
    graph = flow.builder().compile(checkpointer=saver, release_thread="keep_last")
    graph.invoke({"log": []}, cfg("t"))
    history = list(graph.get_state_history(cfg("t")))
    assert [(s.values, s.next) for s in history] == [({"log": ["a", "b", "c"]}, ())]
    flow.runs.clear()
    assert graph.invoke(None, cfg("t")) == {"log": ["a", "b", "c"]}  # still a no-op
    assert flow.runs == []
    graph.invoke({"log": []}, cfg("t"))  # a new run on the thread starts from that checkpoint
    assert graph.get_state(cfg("t")).values == {"log": ["a", "b", "c"] * 2}
    assert len(list(graph.get_state_history(cfg("t")))) == 1


def test_release_from_async_runs_and_streams(tmp_path: Path) -> None:
    flow = Flow()
    with SqliteSaver(tmp_path / "t.db") as saver:
        graph = flow.builder().compile(checkpointer=saver, release_thread="delete")

        async def main() -> list[Any]:
            await graph.ainvoke({"log": []}, cfg("x"))
            return [c async for c in graph.astream({"log": []}, cfg("y"))]

        chunks = asyncio.run(main())
        assert chunks[-1] == {"c": {"log": ["c"]}}
        assert saver.list_threads() == []


def test_a_failed_run_is_not_released(tmp_path: Path) -> None:
    flow = Flow()
    flow.fail.add("t")
    with SqliteSaver(tmp_path / "t.db") as saver:
        graph = flow.builder().compile(checkpointer=saver, release_thread="delete")
        with pytest.raises(RuntimeError):
            graph.invoke({"log": []}, cfg("t"))
        assert [t.status for t in saver.list_threads()] == ["error"]


def test_release_thread_is_checked_at_compile(tmp_path: Path) -> None:
    builder = Flow().builder()
    with SqliteSaver(tmp_path / "t.db") as saver, pytest.raises(ConfigError, match="must be"):
        builder.compile(checkpointer=saver, release_thread="drop")
    with pytest.raises(ConfigError, match="needs a saver"):
        builder.compile(release_thread="delete")
    child = builder.compile(checkpointer=True, release_thread=None)
    assert child.release_thread is None
    with SqliteSaver(tmp_path / "u.db") as saver:
        released_child = Flow().builder().compile(checkpointer=saver, release_thread="delete")
        parent = StateGraph(State)
        with pytest.raises(GraphValidationError, match="release threads on the parent"):
            parent.add_node("child", released_child)


# ---------------------------------------------------------------------- prune(before=...)
def test_prune_removes_threads_last_updated_before_a_time(saver: BaseSaver) -> None:
    flow = Flow()
    flow.ask.add("old-paused")
    graph = flow.builder().compile(checkpointer=saver)
    for thread in ("old-done", "old-paused"):
        graph.invoke({"log": []}, cfg(thread))
    time.sleep(0.01)
    cut = datetime.now(UTC)
    time.sleep(0.01)
    graph.invoke({"log": []}, cfg("new"))

    only_finished = prune(saver, before=cut, status="idle")
    assert only_finished.threads == ("old-done",)
    assert only_finished.checkpoints == 5
    assert sorted(t.thread_id for t in saver.list_threads()) == ["new", "old-paused"]

    trimmed = prune(saver, before=cut, keep_last=1)
    assert trimmed.threads == ("old-paused",)
    assert len(list(saver.list("old-paused"))) == 1
    assert graph.get_state(cfg("old-paused")).next == ("b",)  # still resumable
    assert len(list(saver.list("new"))) == 5


def test_prune_deletes_every_thread_before_a_time(saver: BaseSaver) -> None:
    graph = Flow().builder().compile(checkpointer=saver)
    graph.invoke({"log": []}, cfg("old"))
    time.sleep(0.01)
    cut = datetime.now(UTC)
    graph.invoke({"log": []}, cfg("new"))
    assert prune(saver, before=cut) == Pruned(("old",), 5)
    assert [t.thread_id for t in saver.list_threads()] == ["new"]
    assert list(saver.list("old")) == []


def test_prune_checks_its_arguments(tmp_path: Path) -> None:
    with SqliteSaver(tmp_path / "t.db") as saver:
        with pytest.raises(ConfigError, match="timezone-aware"):
            prune(saver, before=datetime.now())
        with pytest.raises(ConfigError, match="keep_last"):
            prune(saver, before=datetime.now(UTC), keep_last=-1)
        with pytest.raises(ConfigError, match="'done' is not one of"):
            prune(saver, before=datetime.now(UTC), status="done")


def test_aprune(tmp_path: Path) -> None:
    with SqliteSaver(tmp_path / "t.db") as saver:
        graph = Flow().builder().compile(checkpointer=saver)
        graph.invoke({"log": []}, cfg("t"))
        pruned = asyncio.run(aprune(saver, before=datetime.now(UTC) + timedelta(seconds=1)))
        assert (pruned.threads, pruned.checkpoints, saver.list_threads()) == (("t",), 5, [])


# ---------------------------------------------------------------------- resume_unfinished
def threads_in_every_state(flow: Flow, graph: Any) -> None:
    """crashed (running), failed (error), waiting (interrupted), done (idle), edited."""
    flow.crash.add("crashed")
    flow.fail.add("failed")
    flow.ask.add("waiting")
    for thread in ("crashed", "failed", "waiting", "done", "edited"):
        with contextlib.suppress(Crash, RuntimeError):
            graph.invoke({"log": []}, cfg(thread))
    graph.update_state(cfg("edited"), {"log": ["edit"]}, as_node="a")
    flow.crash.clear()
    flow.fail.clear()
    flow.runs.clear()


def test_resume_unfinished_continues_what_a_crash_left(saver: BaseSaver) -> None:
    flow = Flow()
    graph = flow.builder().compile(checkpointer=saver)
    threads_in_every_state(flow, graph)
    statuses = {t.thread_id: t.status for t in saver.list_threads()}
    assert statuses == {
        "crashed": "running",
        "failed": "error",
        "waiting": "interrupted",
        "done": "idle",
        "edited": "running",
    }

    reports = resume_unfinished(graph)
    assert [(r.thread_id, r.status, r.outcome, r.ok) for r in reports] == [
        ("crashed", "running", "finished", True)
    ]
    assert reports[0].values == {"log": ["a", "b", "c"]}
    assert flow.runs == ["crashed:b", "crashed:c"]  # a, checkpointed before the crash, did not

    flow.runs.clear()
    reports = resume_unfinished(graph, statuses=("running", "error"))
    assert [(r.thread_id, r.status, r.outcome) for r in reports] == [
        ("failed", "error", "finished")
    ]
    assert flow.runs == ["failed:b", "failed:c"]
    assert graph.get_state(cfg("waiting")).interrupts[0].value == "ok?"
    assert graph.get_state(cfg("edited")).next == ("b",)  # its caller continues it
    assert resume_unfinished(graph, statuses=("running", "error")) == []


def test_resume_unfinished_reports_failures_and_skips_recent_threads(tmp_path: Path) -> None:
    flow = Flow()
    with SqliteSaver(tmp_path / "t.db") as saver:
        graph = flow.builder().compile(checkpointer=saver)
        flow.crash.add("t")
        with pytest.raises(Crash):
            graph.invoke({"log": []}, cfg("t"))
        flow.crash.clear()
        assert resume_unfinished(graph, idle_for=timedelta(hours=1)) == []
        flow.fail.add("t")
        [report] = resume_unfinished(graph)
        assert (report.outcome, report.ok, str(report.error)) == ("failed", False, "b failed")
        assert saver.list_threads()[0].status == "error"


def test_resume_unfinished_stops_at_interrupts_and_checks_arguments(tmp_path: Path) -> None:
    flow = Flow()
    with SqliteSaver(tmp_path / "t.db") as saver:
        graph = flow.builder().compile(checkpointer=saver)
        flow.crash.add("t")
        with pytest.raises(Crash):
            graph.invoke({"log": []}, cfg("t"))
        flow.crash.clear()
        flow.ask.add("t")
        [report] = resume_unfinished(graph)
        assert (report.outcome, report.values["__interrupt__"][0].value) == ("interrupted", "ok?")
        with pytest.raises(ConfigError, match="waiting for a person"):
            resume_unfinished(graph, statuses=("interrupted",))
        with pytest.raises(ConfigError, match="picks each thread itself"):
            resume_unfinished(graph, config={"configurable": {"thread_id": "x"}})
    with pytest.raises(ConfigError, match="needs a saver"):
        resume_unfinished(Flow().builder().compile())


def test_resume_unfinished_on_a_saver_given_apart(tmp_path: Path) -> None:
    """A cron job can compile the graph without a saver and name the saver to sweep."""
    flow = Flow()
    with SqliteSaver(tmp_path / "t.db") as saver:
        flow.crash.add("t")
        with pytest.raises(Crash):
            flow.builder().compile(checkpointer=saver).invoke({"log": []}, cfg("t"))
        flow.crash.clear()
        graph = flow.builder().compile()
        [report] = resume_unfinished(graph, saver)
        assert report.values == {"log": ["a", "b", "c"]}
        assert graph.checkpointer is None  # the caller's graph is left as it was


def test_aresume_unfinished_runs_threads_concurrently(tmp_path: Path) -> None:
    flow = Flow()
    with SqliteSaver(tmp_path / "t.db") as saver:
        graph = flow.builder().compile(checkpointer=saver)
        threads_in_every_state(flow, graph)
        for thread in ("x1", "x2", "x3"):
            flow.crash.add(thread)
            with pytest.raises(Crash):
                graph.invoke({"log": []}, cfg(thread))
        flow.crash.clear()
        reports = asyncio.run(
            aresume_unfinished(graph, statuses=["running", "error"], concurrency=2)
        )
        assert sorted((r.thread_id, r.outcome) for r in reports) == [
            ("crashed", "finished"),
            ("failed", "finished"),
            ("x1", "finished"),
            ("x2", "finished"),
            ("x3", "finished"),
        ]
        assert {t.status for t in saver.list_threads()} == {"idle", "interrupted", "running"}


KILLED_APP = textwrap.dedent(
    """
    import operator, os, sys, time
    from typing import Annotated, TypedDict
    from threadline import END, START, StateGraph
    from threadline.checkpoint import SqliteSaver

    class State(TypedDict, total=False):
        log: Annotated[list[str], operator.add]

    def build(path, workdir):
        def step(name):
            def node(state):
                with open(os.path.join(workdir, "ran"), "a") as f:
                    f.write(name + "\\n")
                if name == "b" and not os.path.exists(os.path.join(workdir, "resumed")):
                    open(os.path.join(workdir, "hanging"), "w").close()
                    time.sleep(60)  # killed here
                return {"log": [name]}
            return node
        g = StateGraph(State)
        for name in "abc":
            g.add_node(name, step(name))
        g.add_edge(START, "a").add_edge("a", "b").add_edge("b", "c").add_edge("c", END)
        return g.compile(checkpointer=SqliteSaver(path))

    if __name__ == "__main__":
        build(sys.argv[1], sys.argv[2]).invoke({"log": []}, {"configurable": {"thread_id": "k"}})
    """
)


def test_resume_unfinished_after_a_sigkill(tmp_path: Path) -> None:
    """A worker killed mid-node; the next worker's start-up sweep finishes its run."""
    app = tmp_path / "app.py"
    app.write_text(KILLED_APP)
    db = tmp_path / "k.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen([sys.executable, str(app), str(db), str(tmp_path)], env=env)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "hanging").exists():
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.02)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait()
    (tmp_path / "resumed").touch()
    spec = importlib.util.spec_from_file_location("killed_worker_app", app)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the same graph definition, in this process
    graph = module.build(str(db), str(tmp_path))
    with graph.checkpointer:
        assert [t.status for t in graph.checkpointer.list_threads()] == ["running"]
        [report] = resume_unfinished(graph)
        assert (report.thread_id, report.outcome) == ("k", "finished")
        assert report.values == {"log": ["a", "b", "c"]}
    assert (tmp_path / "ran").read_text().split() == ["a", "b", "b", "c"]


def test_a_thread_paused_by_interrupt_after_is_not_taken_for_a_crashed_run(
    saver: BaseSaver,
) -> None:
    flow = Flow()
    graph = flow.builder().compile(checkpointer=saver, interrupt_after=["a"])
    assert graph.invoke({"log": []}, cfg("t")) == {"log": ["a"]}
    assert [t.status for t in saver.list_threads()] == ["interrupted"]
    paused = graph.get_state(cfg("t"))
    assert (paused.next, paused.interrupts, paused.tasks[0].result) == (("b",), (), None)
    assert resume_unfinished(graph) == []
    assert graph.invoke(None, cfg("t")) == {"log": ["a", "b", "c"]}
    assert flow.runs == ["t:a", "t:b", "t:c"]
