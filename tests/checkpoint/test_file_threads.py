"""Threads in plain files: listing, pruning, copying, retention, async methods and deleting a
thread while others write it.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from file_fixtures import (
    chain,
    make,
    ns_dir,
    rec,
    saver,
)

from threadline.checkpoint.base import (
    Checkpoint,
    PlannedTask,
    Retention,
    TaskWrite,
)
from threadline.checkpoint.changes import SET, Append
from threadline.checkpoint.files import FileSaver
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.errors import ConcurrentUpdateError

__all__ = ["saver"]  # fixtures used here


# -- threads, prune, copy, retention -------------------------------------------------------------


def test_list_threads_newest_updated_first_with_status(saver: FileSaver) -> None:
    (idle,) = chain(saver, "idle", 1)
    waiting, changes = make({"x": 1}, next=(PlannedTask("review"),))
    saver.put(rec("waiting", waiting, changes))
    saver.put_writes("waiting", "", waiting.id, [TaskWrite("r1", "review", "interrupt", "ok?")])
    failed, changes = make({"x": 1}, next=(PlannedTask("boom"),))
    saver.put(rec("failed", failed, changes))
    saver.put_writes("failed", "", failed.id, [TaskWrite("b1", "boom", "error", "bad")])
    infos = saver.list_threads()
    assert [i.thread_id for i in infos] == ["failed", "waiting", "idle"]
    assert [i.status for i in infos] == ["error", "interrupted", "idle"]
    assert infos[1].next == ("review",) and infos[1].checkpoint_id == waiting.id
    assert [i.thread_id for i in saver.list_threads(status="interrupted")] == ["waiting"]
    assert [i.thread_id for i in saver.list_threads(limit=2)] == ["failed", "waiting"]
    # A subgraph namespace alone does not make a thread show up.
    chain(saver, "only-child", 1, ns="child:1")
    assert "only-child" not in [i.thread_id for i in saver.list_threads()]
    # A stale thread.json (a crash after the row landed) is recomputed.
    (Path(saver.backend.thread_dir("idle")) / "thread.json").unlink()
    info = {i.thread_id: i for i in saver.list_threads()}["idle"]
    assert info.checkpoint_id == idle.id and info.status == "idle"


def test_prune_keeps_the_newest_and_the_values_they_use(saver: FileSaver) -> None:
    base, changes = make({"big": "x" * 1000, "messages": ["m0"]})
    saver.put(rec("t1", base, changes))
    cps = [base]
    for i in range(1, 6):
        parent = cps[-1]
        values = {"big": "x" * 1000, "messages": [*parent.values["messages"], f"m{i}"]}
        cp, _ = make(values, parent, changed={"messages"})
        grown = {"messages": Append(parent.versions["messages"], i)}
        saver.put(rec("t1", cp, grown))
        saver.put_writes("t1", "", cp.id, [TaskWrite(f"w{i}", "n", "result", i)])
        cps.append(cp)
    chain(saver, "t1", 3, ns="child:1")
    blobs = ns_dir(saver, "t1") / "blobs"
    headers = [json.loads(p.read_bytes().split(b"\n")[0]) for p in blobs.iterdir()]
    assert any(h["base"] is not None for h in headers)  # the list was stored as deltas

    assert saver.prune("t1", keep_last=2) == 4 + 1
    assert [r.checkpoint.id for r in saver.list("t1")] == [cps[5].id, cps[4].id]
    assert len(list(saver.list("t1", "child:1"))) == 2
    for r in saver.list("t1"):
        assert r.checkpoint == next(c for c in cps if c.id == r.checkpoint.id)
    assert len(list((ns_dir(saver, "t1") / "writes").iterdir())) == 2
    kept = {p.name for p in blobs.iterdir()}
    assert f"big@{base.id}.blob" in kept  # still used by the kept checkpoints
    needed = {("big", base.id)}
    for cp in cps[4:]:
        ref: str | None = cp.versions["messages"]
        while ref is not None:
            needed.add(("messages", ref))
            header = json.loads((blobs / f"messages@{ref}.blob").read_bytes().split(b"\n")[0])
            ref = header["base"]
    assert kept == {f"{k}@{v}.blob" for k, v in needed}
    assert saver.prune("t1", keep_last=2) == 0
    assert saver.prune("nope", keep_last=1) == 0


def test_prune_does_not_move_a_thread_up_in_list_threads(saver: FileSaver) -> None:
    """Pruning old checkpoints is not an update: the thread keeps its ``updated_at``."""
    chain(saver, "older", 3)
    chain(saver, "newer", 1)
    before = saver.list_threads()
    assert [i.thread_id for i in before] == ["newer", "older"]
    assert saver.prune("older", keep_last=1) == 2
    assert saver.list_threads() == before


def test_copy_thread(saver: FileSaver) -> None:
    cps = chain(saver, "src", 3)
    saver.put_writes("src", "", cps[-1].id, [TaskWrite("a", "n", "interrupt", 1)])
    child = chain(saver, "src", 2, ns="child:1")
    saver.copy_thread("src", "dst")
    saver.delete_thread("src")
    got = saver.get_tuple("dst")
    assert got is not None and got.thread_id == "dst" and got.checkpoint == cps[-1]
    assert got.pending_writes == (TaskWrite("a", "n", "interrupt", 1),)
    assert [r.checkpoint.id for r in saver.list("dst")] == [c.id for c in reversed(cps)]
    assert [r.checkpoint.id for r in saver.list("dst", "child:1")] == [
        c.id for c in reversed(child)
    ]
    assert [i.thread_id for i in saver.list_threads()] == ["dst"]
    more, changes = make({"i": 9}, cps[-1])
    saver.put(rec("dst", more, changes))  # the copy carries on on its own
    chain(saver, "other", 1)
    with pytest.raises(ValueError, match="already has checkpoints"):
        saver.copy_thread("other", "dst")
    saver.copy_thread("missing", "dst2")
    assert saver.get_tuple("dst2") is None


def test_retention_max_checkpoints(tmp_path: Path) -> None:
    saver = FileSaver(tmp_path / "store", retention=Retention(max_checkpoints=3))
    cps: list[Checkpoint] = []
    for i in range(6):
        cp, changes = make({"i": [i]}, cps[-1] if cps else None)  # a list: one blob each
        saver.put(rec("t1", cp, changes))
        cps.append(cp)
    assert [r.checkpoint.id for r in saver.list("t1")] == [c.id for c in reversed(cps[3:])]
    assert len(list((ns_dir(saver, "t1") / "blobs").iterdir())) == 3


def test_retention_max_age_never_drops_the_newest(tmp_path: Path) -> None:
    saver = FileSaver(tmp_path / "store", retention=Retention(max_age=timedelta(hours=1)))
    old = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    a, changes = make({"i": 0}, created_at=old)
    saver.put(rec("t1", a, changes))
    b, changes = make({"i": 1}, a, created_at=old)
    saver.put(rec("t1", b, changes))
    assert [r.checkpoint.id for r in saver.list("t1")] == [b.id]  # a dropped, b is the newest
    c, changes = make({"i": 2}, b)
    saver.put(rec("t1", c, changes))
    d, changes = make({"i": 3}, c)
    saver.put(rec("t1", d, changes))
    assert [r.checkpoint.id for r in saver.list("t1")] == [d.id, c.id]


def test_hinted_value_missing_on_disk_is_stored_in_full(saver: FileSaver) -> None:
    (a,) = chain(saver, "t1", 1)
    # The engine says "topic" is unchanged since a version this namespace never stored.
    cp = Checkpoint(
        new_checkpoint_id(),
        a.id,
        1,
        {"i": 1, "topic": "t"},
        {"i": "v2", "topic": "elsewhere"},
        (),
        datetime.now(UTC).isoformat(),
    )
    saver.put(rec("t1", cp, {"i": SET}))
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint.values == {"i": 1, "topic": "t"}


async def test_async_methods_and_context_manager(tmp_path: Path) -> None:
    with FileSaver(tmp_path / "store") as saver:
        cp, changes = make({"x": 1})
        await saver.aput(rec("t1", cp, changes))
        await saver.aput_writes("t1", "", cp.id, [TaskWrite("a", "n", "result", 2)])
        got = await saver.aget_tuple("t1")
        assert got is not None and got.pending_writes == (TaskWrite("a", "n", "result", 2),)
        assert [t.thread_id for t in await saver.alist_threads()] == ["t1"]
        assert await saver.aprune("t1", keep_last=1) == 0
        await saver.acopy_thread("t1", "t2")
        await saver.adelete_thread("t1")
        assert await saver.aget_tuple("t1") is None
        assert [r.thread_id async for r in saver.alist("t2")] == ["t2"]
    saver.close()  # idempotent


def test_delete_thread_while_others_write_it(tmp_path: Path) -> None:
    """Deletes remove a thread's folder (lock file included) under writers waiting on it."""
    directory = tmp_path / "store"
    errors: list[BaseException] = []
    stop = threading.Event()
    wins = [0]

    def writer() -> None:
        saver = FileSaver(directory)
        try:
            while not stop.is_set():
                head = saver.get_tuple("t1")
                parent = head.checkpoint if head else None
                cp, changes = make({"i": parent.step + 1 if parent else 0}, parent)
                try:
                    saver.put(rec("t1", cp, changes, writes=(TaskWrite("a", "n", "result", 1),)))
                    wins[0] += 1
                except ConcurrentUpdateError:
                    pass
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer) for _ in range(3)]
    for t in workers:
        t.start()
    deleter = FileSaver(directory)
    try:
        for _ in range(30):
            time.sleep(0.01)
            deleter.delete_thread("t1")
    finally:
        stop.set()
        for t in workers:
            t.join()
    assert errors == []
    assert wins[0] > 0
    records = list(deleter.list("t1"))  # whatever survived the last delete is whole
    for older, newer in itertools.pairwise(reversed(records)):
        assert newer.checkpoint.parent_id == older.checkpoint.id
    assert all(len(r.pending_writes) == 1 for r in records)
    assert not list(directory.glob(".trash-*"))
