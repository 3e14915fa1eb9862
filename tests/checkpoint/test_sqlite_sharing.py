"""What the SQLite saver promises about its file: data survives reopening it, and savers sharing
it from several threads lose nothing, race fairly on a parent and create the schema once.
"""

from __future__ import annotations

import dataclasses
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
from builders import step, w
from sqlite_files import counts, query

from threadline.checkpoint import Checkpoint, CheckpointRecord, PlannedTask, SqliteSaver, TaskWrite
from threadline.checkpoint.sqlite import SCHEMA_VERSION
from threadline.errors import ConcurrentUpdateError

# -- durability and sharing ----------------------------------------------------------------------


def test_data_survives_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cp.db"
    first = step("t1", {"messages": ["hi"], "when": datetime(2030, 1, 1, tzinfo=UTC)}, None)
    second = step(
        "t1",
        {"messages": ["hi", "there"], "when": datetime(2030, 1, 1, tzinfo=UTC), "seen": {1, 2}},
        first.checkpoint,
        metadata={"source": "loop"},
        writes=(TaskWrite("task-1", "agent", "result", {"messages": ["again"]}),),
        next=(PlannedTask("agent"),),
    )
    with SqliteSaver(path) as saver:
        saver.put(dataclasses.replace(first, metadata={"source": "input"}))
        saver.put(second)
        saver.put(dataclasses.replace(first, checkpoint_ns="child:1"))

    with SqliteSaver(str(path)) as reopened:
        got = reopened.get_tuple("t1")
        assert got is not None
        assert got.checkpoint == second.checkpoint
        assert got.metadata == {"source": "loop"}
        assert got.pending_writes == second.pending_writes
        ids = [r.checkpoint.id for r in reopened.list("t1")]
        assert ids == [second.checkpoint.id, first.checkpoint.id]
        by_filter = reopened.list("t1", filter={"source": "input"})
        assert [r.checkpoint.id for r in by_filter] == [first.checkpoint.id]
        child = reopened.get_tuple("t1", "child:1")
        assert child is not None and child.checkpoint == first.checkpoint
        (info,) = reopened.list_threads()
        assert (info.thread_id, info.status, info.next) == ("t1", "running", ("agent",))


def test_two_savers_on_one_file_from_two_threads_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    SqliteSaver(path).close()  # create the schema up front; opening concurrently is tested below
    per_thread = 60
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def work(thread_id: str) -> None:
        try:
            with SqliteSaver(path) as saver:
                start.wait()
                parent: Checkpoint | None = None
                for i in range(per_thread):
                    record = step(
                        thread_id, {"i": i}, parent, metadata={"i": i}, writes=(w("a", value=i),)
                    )
                    saver.put(record)
                    cp = record.checkpoint
                    saver.put_writes(thread_id, "", cp.id, [w("b", value=-i)])
                    parent = cp
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(name,)) for name in ("left", "right")]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert errors == []

    with SqliteSaver(path) as saver:
        for thread_id in ("left", "right"):
            records = list(saver.list(thread_id))
            assert [r.metadata["i"] for r in records] == list(reversed(range(per_thread)))
            for r in records:
                i = r.metadata["i"]
                assert [x.value for x in r.pending_writes] == [i, -i]


def test_two_savers_racing_on_one_parent_exactly_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    with SqliteSaver(path) as a, SqliteSaver(path) as b:
        for round_ in range(50):
            thread_id = f"race-{round_}"
            root = step(thread_id, {"n": 0}, None)
            a.put(root)
            records = [step(thread_id, {"n": k}, root.checkpoint) for k in (1, 2)]
            gate = threading.Barrier(2)
            results: list[str] = ["", ""]

            def run(
                k: int,
                saver: SqliteSaver,
                gate: threading.Barrier = gate,
                records: list[CheckpointRecord] = records,
                results: list[str] = results,
            ) -> None:
                gate.wait()
                try:
                    saver.put(records[k])
                    results[k] = "won"
                except ConcurrentUpdateError:
                    results[k] = "lost"

            workers = [threading.Thread(target=run, args=(k, s)) for k, s in enumerate((a, b))]
            for t in workers:
                t.start()
            for t in workers:
                t.join()
            assert sorted(results) == ["lost", "won"]
            assert len(list(a.list(thread_id))) == 2
            assert counts(path)["checkpoints"] == 2 * (round_ + 1)


@pytest.mark.parametrize("round_", range(25))
def test_opening_concurrently_creates_the_schema_once(tmp_path: Path, round_: int) -> None:
    # Four connections opening a new file at once: switching it to WAL could fail at once with
    # "database is locked" (SQLite does not wait on the busy timeout there); it is retried.
    path = tmp_path / "race.db"
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_and_put(k: int) -> None:
        try:
            start.wait()
            with SqliteSaver(path) as saver:
                saver.put(step(f"t{k}", {"k": k}, None))
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=open_and_put, args=(k,)) for k in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert errors == []
    assert query(path, "SELECT version FROM threadline_schema_version") == [(SCHEMA_VERSION,)]
    assert counts(path)["checkpoints"] == 4
