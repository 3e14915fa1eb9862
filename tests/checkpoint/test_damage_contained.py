"""One damaged row among four threads, as the issue found it: ``list_threads``,
``resume_unfinished``, ``check``, ``maintenance.prune`` and ``scan_damage`` name the damaged
thread and carry on with the others; nothing is written over the damage; deleting the thread
still works."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypedDict

import pytest
from sqlite_files import execute, query

import threadline
from threadline import END, START, StateGraph
from threadline.checkpoint import SqliteSaver
from threadline.errors import CorruptedDataError
from threadline.maintenance import prune, resume_unfinished, scan_damage

THREADS = ("bad", "ok-1", "ok-2", "ok-3")


class State(TypedDict):
    n: int


def flaky_graph(failing: dict[str, bool]) -> Any:
    """Two steps; the second raises while ``failing["now"]``: the thread is left ``error``."""

    def second(state: State) -> State:
        if failing["now"]:
            raise ValueError("not yet")
        return {"n": state["n"] + 10}

    builder = StateGraph(State)
    builder.add_node("first", lambda s: {"n": s["n"] + 1})
    builder.add_node("second", second)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder


def failed_threads(path: Path, failing: dict[str, bool]) -> None:
    with SqliteSaver(path) as saver:
        graph = flaky_graph(failing).compile(checkpointer=saver)
        for thread_id in THREADS:
            with pytest.raises(ValueError):
                graph.invoke({"n": 0}, {"configurable": {"thread_id": thread_id}})


@pytest.mark.parametrize("where", ["head", "older"])
def test_a_damaged_row_is_named_and_the_other_threads_go_on(tmp_path: Path, where: str) -> None:
    path = tmp_path / "c.db"
    failing = {"now": True}
    failed_threads(path, failing)
    order = "DESC" if where == "head" else "ASC"
    ((cid,),) = query(
        path,
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 'bad'"
        f" ORDER BY checkpoint_id {order} LIMIT 1",
    )
    execute(path, "UPDATE checkpoints SET body = x'deadbeef' WHERE checkpoint_id = ?", cid)
    failing["now"] = False
    with SqliteSaver(path) as saver:
        graph = flaky_graph(failing).compile(checkpointer=saver)
        listed = {info.thread_id: info.status for info in saver.list_threads()}
        assert listed == {"bad": "damaged" if where == "head" else "error"} | {
            t: "error" for t in THREADS[1:]
        }

        (found,) = scan_damage(saver)
        assert (found.thread_id, found.checkpoint_id) == ("bad", cid)
        assert isinstance(found.error, CorruptedDataError) and "'bad'" in found.problem

        problems = threadline.check(graph)
        assert [(p.thread_id, p.status) for p in problems] == [("bad", "damaged")] * (
            where == "head"
        )

        reports = {r.thread_id: r for r in resume_unfinished(graph, statuses=("error",))}
        for thread_id in THREADS[1:]:
            assert reports[thread_id].outcome == "finished"
            assert reports[thread_id].values == {"n": 11}
        if where == "head":
            assert reports["bad"].outcome == "damaged"
            assert isinstance(reports["bad"].error, CorruptedDataError)

        later = datetime.now(UTC) + timedelta(days=1)
        pruned = prune(saver, before=later, keep_last=1)
        assert pruned.damaged == ("bad",)
        assert set(pruned.threads) == set(THREADS[1:])

    (body,) = query(path, "SELECT body FROM checkpoints WHERE checkpoint_id = ?", cid)[0]
    assert body == bytes.fromhex("deadbeef")  # left for a person to inspect
    with SqliteSaver(path) as saver:
        saver.delete_thread("bad")
        assert {info.thread_id for info in saver.list_threads()} == set(THREADS[1:])
        assert scan_damage(saver) == []
