"""What only the in-memory saver promises, seen from inside: bytes only, each value stored once
(small scalars in the checkpoint's own bytes, as on SQLite)."""

from __future__ import annotations

from typing import Any

import pytest
from builders import item, step, w

from threadline.checkpoint import Checkpoint, InMemorySaver, MemorySaver, Retention, transactional
from threadline.checkpoint.bodies import decode_checkpoint
from threadline.errors import ConcurrentUpdateError


def blobs(saver: InMemorySaver, thread_id: str = "t1", ns: str = "") -> dict[Any, Any]:
    thread = saver.backend._threads.get(thread_id)
    space = thread.spaces.get(ns) if thread is not None else None
    return dict(space.blobs) if space is not None else {}


def blob_keys(saver: InMemorySaver, thread_id: str = "t1", ns: str = "") -> list[tuple[str, str]]:
    return sorted(blobs(saver, thread_id, ns))


def checkpoint_count(saver: InMemorySaver, thread_id: str = "t1", ns: str = "") -> int:
    return len(saver.backend._threads[thread_id].spaces[ns].rows)


def everything(saver: InMemorySaver) -> tuple[Any, ...]:
    """Every row the backend holds: checkpoints, blobs, writes, heads and thread times."""
    spaces = {
        (thread_id, ns): space
        for thread_id, thread in saver.backend._threads.items()
        for ns, space in thread.spaces.items()
    }
    return (
        {k: dict(s.rows) for k, s in spaces.items()},
        {k: dict(s.blobs) for k, s in spaces.items()},
        {(*k, cid): dict(w) for k, s in spaces.items() for cid, w in s.writes.items()},
        {k: s.head for k, s in spaces.items() if s.head is not None},
        {t: thread.updated for t, thread in saver.backend._threads.items() if thread.updated},
    )


def test_memory_saver_is_the_in_memory_saver() -> None:
    assert MemorySaver is InMemorySaver


def test_only_what_changed_is_stored_and_only_as_bytes() -> None:
    saver = InMemorySaver()
    parent: Checkpoint | None = None
    for i in range(10):
        record = step("t1", {"big": "b" * 10_000, "n": i}, parent)
        saver.put(record)
        parent = record.checkpoint
    keys = blob_keys(saver)
    assert [k for k, _ in keys] == ["big"]  # a small scalar lives in each checkpoint's body
    for row in blobs(saver).values():
        assert type(row.data) is bytes
    assert [r.checkpoint.values["n"] for r in saver.list("t1")] == list(range(9, -1, -1))


def test_a_refused_put_changes_nothing() -> None:
    saver = InMemorySaver()
    first = step("t1", {"log": ["a"]}, None, next=())
    saver.put(first)
    second = step("t1", {"log": ["a", "b"]}, first.checkpoint)
    saver.put(second)
    before = everything(saver)
    stale = step("t1", {"log": ["a", "c"], "x": 1}, first.checkpoint, writes=(w("t", value=1),))
    with pytest.raises(ConcurrentUpdateError):
        saver.put(stale)
    assert everything(saver) == before


def test_prune_and_retention_drop_values_nothing_uses() -> None:
    saver = InMemorySaver(retention=Retention(max_checkpoints=2))
    parent: Checkpoint | None = None
    for i in range(6):
        values = {"log": [item(j, 10) for j in range(i + 1)], "c": "same" * 20, "n": [i]}
        record = step("t1", values, parent)
        saver.put(record)
        parent = record.checkpoint
    assert checkpoint_count(saver) == 2

    def counts() -> dict[str, int]:
        names = [k for k, _ in blob_keys(saver)]
        return {name: names.count(name) for name in sorted(set(names))}

    # "log" grew by deltas: the kept checkpoints need its whole chain (a full blob, 5 deltas).
    assert counts() == {"c": 1, "log": 6, "n": 2}
    assert saver.prune("t1", keep_last=1) == 1
    assert counts() == {"c": 1, "log": 6, "n": 1}
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == parent
    assert saver.prune("t1", keep_last=0) == 1
    assert everything(saver) == ({}, {}, {}, {}, {})


def test_a_growing_list_costs_about_its_own_size() -> None:
    """A conversation is stored as deltas, compacted now and then: 200 turns of two 1 KB items
    take a few times the items' bytes, not the square of them, and every turn loads."""
    saver = InMemorySaver()
    parent: Checkpoint | None = None
    records = []
    for i in range(200):
        record = step("t1", {"log": [item(j, 1000) for j in range(2 * i + 2)]}, parent)
        saver.put(record)
        parent = record.checkpoint
        records.append(record)
    stored = sum(len(b.data) for b in blobs(saver).values())
    raw = 400 * 1000
    assert stored < 3 * raw  # full copies at every step would be about 200 times raw
    for record in records[::37]:
        got = saver.get_tuple("t1", "", record.checkpoint.id)
        assert got is not None and got.checkpoint == record.checkpoint


def test_a_write_transaction_that_fails_changes_nothing() -> None:
    """Prune, copy and delete run in write transactions: one that raises midway puts every
    thread it touched back as it was."""
    saver = InMemorySaver()
    parent: Checkpoint | None = None
    for i in range(3):
        values = {"log": [item(j, 10) for j in range(i + 1)], "n": i}
        record = step("t1", values, parent, writes=(w("a", value=i),))
        saver.put(record)
        parent = record.checkpoint
    saver.put(step("t2", {"x": "y" * 100}, None))
    assert parent is not None
    before = everything(saver)
    with pytest.raises(RuntimeError), saver.backend.transaction(True) as tx:
        tx.delete("t1", "", [parent.id])
        tx.delete_blobs("t1", "", list(blobs(saver)))
        tx.delete_thread("t2")
        tx.copy_thread("t1", "t3")
        raise RuntimeError("fails midway")
    assert everything(saver) == before
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == parent


def test_bodies_are_kept_whole_and_the_core_keeps_no_cache() -> None:
    """In process a body costs memory, not I/O: it is kept whole (readable without its row's
    fields, unlike the compact bodies of the other savers), and the core keeps no caches (the
    backend answers as fast as they would)."""
    saver = InMemorySaver()
    record = step("t1", {"n": 1, "big": "b" * 1000}, None)
    saver.put(record)
    ((row, refs, _),) = saver.backend._threads["t1"].spaces[""].rows.values()
    assert decode_checkpoint(row.body, {}, saver.serde).id == record.checkpoint.id
    assert refs == {"big": record.checkpoint.versions["big"]}
    assert not saver._heads and not saver._meta


def test_pruning_reads_the_versions_kept_with_each_checkpoint(monkeypatch: Any) -> None:
    """Retention and ``prune`` see which values are still used from the blob versions each
    checkpoint keeps apart: no body is decoded."""

    def decoded(*args: Any) -> None:
        raise AssertionError("a checkpoint body was decoded to prune")

    monkeypatch.setattr(transactional, "body_versions", decoded)
    saver = InMemorySaver(retention=Retention(max_checkpoints=2))
    parent: Checkpoint | None = None
    for i in range(4):
        record = step("t1", {"big": f"{i}" * 100, "same": "s" * 100}, parent)
        saver.put(record)
        parent = record.checkpoint
    assert [k for k, _ in blob_keys(saver)] == ["big", "big", "same"]
    assert saver.prune("t1", keep_last=1) == 1
    assert [k for k, _ in blob_keys(saver)] == ["big", "same"]
