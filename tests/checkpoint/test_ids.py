"""Checkpoint ids sort by creation time and never repeat, across threads and forked processes."""

from __future__ import annotations

import os
import threading
import uuid

from threadline.checkpoint import ids
from threadline.checkpoint.ids import new_checkpoint_id


def test_ids_are_uuid7_and_increase():
    ids = [new_checkpoint_id() for _ in range(20_000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert {uuid.UUID(i).version for i in ids} == {7}


def test_ids_from_many_threads_are_unique():
    found: list[str] = []
    lock = threading.Lock()

    def make() -> None:
        mine = [new_checkpoint_id() for _ in range(2_000)]
        with lock:
            found.extend(mine)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(found)) == len(found)


def test_a_forked_child_does_not_repeat_its_parents_ids(monkeypatch):
    frozen = ids.time.time_ns()  # same millisecond and counter in both: only randomness differs
    monkeypatch.setattr(ids.time, "time_ns", lambda: frozen)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        os.write(write, "\n".join(new_checkpoint_id() for _ in range(200)).encode())
        os._exit(0)
    os.close(write)
    mine = {new_checkpoint_id() for _ in range(200)}
    with os.fdopen(read) as pipe:
        theirs = set(pipe.read().split("\n"))
    os.waitpid(pid, 0)
    assert len(theirs) == 200 and not mine & theirs


def test_more_ids_than_a_millisecond_holds_still_increase(monkeypatch):
    frozen = ids.time.time_ns() + 10**9  # a clock that stands still, ahead of earlier ids
    monkeypatch.setattr(ids.time, "time_ns", lambda: frozen)
    made = [new_checkpoint_id() for _ in range(10_000)]  # 4,096 fit in one millisecond
    assert made == sorted(made) and len(set(made)) == len(made)
    assert {uuid.UUID(i).version for i in made} == {7}
    assert len({uuid.UUID(i).int >> 80 for i in made}) == 3  # the millisecond moved on twice
