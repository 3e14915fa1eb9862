"""The Redis saver's puts: one round trip each, compare-and-set across processes, plain
Redis commands only.
"""

from __future__ import annotations

import dataclasses
import itertools
import multiprocessing
from typing import Any

import pytest
import redis
from redis_fixtures import (
    REDIS_URL,
    Wire,
    _session_keys_are_removed,
    client,
    conversation,
    keys_of,
    record,
    saver,
    step,
    wire,
)

from threadline.checkpoint.base import (
    Checkpoint,
    PlannedTask,
    TaskWrite,
)
from threadline.checkpoint.redis import RedisSaver
from threadline.checkpoint.redis import connection as redis_requests
from threadline.checkpoint.redis.scripts import SCRIPTS
from threadline.errors import ConcurrentUpdateError

__all__ = [
    "_session_keys_are_removed",
    "client",
    "saver",
    "wire",
]  # fixtures used here


# -- one round trip ---------------------------------------------------------------------------


def test_one_round_trip_per_put_and_per_read(saver: RedisSaver, wire: Wire) -> None:
    parent: Checkpoint | None = None
    for i in range(12):
        messages = [*(parent.values["messages"] if parent else []), f"m{i}"]
        cp = step(parent, {"messages": messages, "i": i}, next=(PlannedTask("agent"),))
        writes = (TaskWrite(f"task-{i}", "agent", "result", {"i": i}),)
        rec = record("t", cp, parent, metadata={"i": i}, writes=writes)
        wire.reset()
        saver.put(rec)
        assert wire.requests == [["EVALSHA"]], f"put {i}"
        parent = cp
    assert parent is not None
    wire.reset()
    saver.put_writes("t", "", parent.id, [TaskWrite("late", "agent", "interrupt", "ask")])
    assert wire.requests == [["EVALSHA"]]
    wire.reset()
    got = saver.get_tuple("t")
    assert wire.requests == [["EVALSHA"]]  # checkpoint, writes and every value of a delta chain
    assert got is not None and got.checkpoint.values == parent.values
    wire.reset()
    got_old = saver.get_tuple("t", "", parent.parent_id)
    assert wire.round_trips == 1 and got_old is not None


async def test_one_round_trip_per_async_put(saver: RedisSaver, wire: Wire) -> None:
    first = step(None, {"messages": ["a"]})
    await saver.aput(record("t", first))  # opens this loop's connection
    parent = first
    for i in range(5):
        cp = step(parent, {"messages": [*parent.values["messages"], str(i)]})
        wire.reset()
        await saver.aput(record("t", cp, parent, writes=(TaskWrite("x", "n", "result", i),)))
        assert wire.requests == [["EVALSHA"]]
        parent = cp
    wire.reset()
    got = await saver.aget_tuple("t")
    assert wire.requests == [["EVALSHA"]]
    assert got is not None and got.checkpoint.values == parent.values


def test_cold_cache_costs_one_lookup_then_one_round_trip(saver: RedisSaver, wire: Wire) -> None:
    cps = conversation(saver, "t", 3)
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as fresh:  # knows no blob yet
        nxt = step(cps[-1], {**cps[-1].values, "messages": [*cps[-1].values["messages"], "new"]})
        wire.reset()
        fresh.put(record("t", nxt, cps[-1]))
        assert wire.requests == [["GETRANGE"], ["EVALSHA"]]  # the delta's base, then the put
        after = step(nxt, {**nxt.values, "messages": [*nxt.values["messages"], "newer"]})
        wire.reset()
        fresh.put(record("t", after, nxt))
        assert wire.requests == [["EVALSHA"]]
        got = fresh.get_tuple("t")
        assert got is not None and got.checkpoint == after


# -- compare-and-set ----------------------------------------------------------------------------


def dump_all(client: redis.Redis, saver: RedisSaver) -> dict[str, bytes | None]:
    return {k: client.dump(k) for k in keys_of(client, saver)}


def test_put_on_a_stale_parent_writes_nothing(saver: RedisSaver, client: redis.Redis) -> None:
    a = step(None, {"x": 1})
    saver.put(record("t", a))
    b = step(a, {"x": 2})
    saver.put(record("t", b, a))
    before = dump_all(client, saver)
    stale = step(a, {"x": 3, "new": [1, 2]})
    writes = (TaskWrite("w", "n", "error", "boom"),)
    with pytest.raises(ConcurrentUpdateError) as info:
        saver.put(record("t", stale, a, metadata={"m": 1}, writes=writes))
    message = str(info.value)
    assert "'t'" in message and "namespace ''" in message
    assert a.id in message and b.id in message  # expected and actual
    after = dump_all(client, saver)
    # Nothing changed (TTL-less keys dump identically): no row, blob, write, index or status.
    assert after == before
    assert [r.checkpoint.id for r in saver.list("t")] == [b.id, a.id]


def test_parent_none_only_on_an_empty_namespace(saver: RedisSaver) -> None:
    a = step(None, {"x": 1})
    saver.put(record("t", a))
    other = step(None, {"x": 9})
    with pytest.raises(ConcurrentUpdateError, match="an empty thread"):
        saver.put(record("t", other))
    saver.put(record("t", other, ns="child:1"))  # another namespace is empty
    orphan = step(a, {"x": 2})
    with pytest.raises(ConcurrentUpdateError, match="no checkpoint"):
        saver.put(record("t2", orphan, a))  # a parent on an empty thread


def test_fork_saves_on_an_older_checkpoint(saver: RedisSaver) -> None:
    a = step(None, {"x": 1})
    saver.put(record("t", a))
    b = step(a, {"x": 2})
    saver.put(record("t", b, a))
    branch = step(a, {"x": 3})
    with pytest.raises(ConcurrentUpdateError):
        saver.put(record("t", branch, a))
    saver.put(record("t", branch, a), fork=True)
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == branch
    assert saver.get_tuple("t", "", b.id) is not None  # the old branch stays


def test_a_checkpoint_is_never_saved_twice(saver: RedisSaver) -> None:
    a = step(None, {"x": 1})
    saver.put(record("t", a))
    with pytest.raises(ConcurrentUpdateError, match="has moved on"):
        saver.put(record("t", a))
    with pytest.raises(ConcurrentUpdateError, match="never replaced"):
        saver.put(record("t", a), fork=True)
    older = dataclasses.replace(step(a, {"x": 2}), id="00000000-0000-7000-8000-000000000000")
    with pytest.raises(ConcurrentUpdateError, match="does not sort after"):
        saver.put(record("t", older, a))  # would hide behind the head


def test_a_put_whose_reply_was_lost_is_not_a_conflict(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py's own retries are off; the saver sends a put again flagged as resent, and the
    script recognises its own checkpoint (same id, same bytes) as saved."""
    real_send = redis_requests.send
    lost: list[str] = []

    def lose_first_put_reply(client: Any, request: Any) -> Any:
        reply = real_send(client, request)
        if getattr(request, "script", None) == "put" and not lost:
            lost.append(request.args[3])
            raise redis.ConnectionError("connection reset (reply lost)")
        return reply

    monkeypatch.setattr(redis_requests, "send", lose_first_put_reply)
    a = step(None, {"x": 1})
    saver.put(record("t", a, writes=(TaskWrite("w", "n", "result", 1),)))
    assert lost == [a.id]
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == a and len(got.pending_writes) == 1
    # A different checkpoint resent on a moved thread is still a conflict.
    lost.clear()
    b = step(a, {"x": 2})
    c = step(a, {"x": 3})
    saver.put(record("t", b, a))  # its reply is "lost" too, and it is saved once
    with pytest.raises(ConcurrentUpdateError, match="has moved on"):
        saver.put(record("t", c, a))
    assert [r.checkpoint.id for r in saver.list("t")] == [b.id, a.id]


def _race_worker(url: str, prefix: str, thread_id: str, me: str, inbox: Any, outbox: Any,
                 barrier: Any) -> None:  # fmt: skip
    """Each round: put a child of the given parent at the same moment as the other worker."""
    with RedisSaver(url, prefix=prefix) as saver:
        while (msg := inbox.get()) is not None:
            parent_id, parent_step = msg
            parent = saver.get_tuple(thread_id, "", parent_id)
            assert parent is not None and parent.checkpoint.step == parent_step
            cp = step(parent.checkpoint, {"x": f"{me}-{parent_step + 1}"})
            rec = record(thread_id, cp, parent.checkpoint, metadata={"by": me})
            barrier.wait(timeout=30)
            try:
                saver.put(rec)
                outbox.put(("won", me, cp.id))
            except ConcurrentUpdateError:
                outbox.put(("lost", me, cp.id))


def test_two_processes_racing_on_one_parent_one_wins_every_time(saver: RedisSaver) -> None:
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    outbox = ctx.Queue()
    inboxes = [ctx.Queue(), ctx.Queue()]
    workers = [
        ctx.Process(
            target=_race_worker,
            args=(saver.url, saver.prefix, "race", f"p{n}", inboxes[n], outbox, barrier),
        )
        for n in range(2)
    ]
    first = step(None, {"x": "start"})
    saver.put(record("race", first))
    for w in workers:
        w.start()
    try:
        head = first
        for round_ in range(20):
            for inbox in inboxes:
                inbox.put((head.id, head.step))
            results = sorted(outbox.get(timeout=60) for _ in range(2))
            assert [r[0] for r in results] == ["lost", "won"], (round_, results)
            winner = results[1][2]
            got = saver.get_tuple("race")
            assert got is not None and got.checkpoint.id == winner
            assert got.checkpoint.parent_id == head.id
            head = got.checkpoint
    finally:
        for inbox in inboxes:
            inbox.put(None)
        for w in workers:
            w.join(timeout=30)
            if w.is_alive():
                w.kill()
    assert all(w.exitcode == 0 for w in workers)
    history = list(saver.list("race"))
    assert len(history) == 21  # the first checkpoint and one winner per round: no fork
    for newer, older in itertools.pairwise(history):
        assert newer.checkpoint.parent_id == older.checkpoint.id


# -- plain Redis ------------------------------------------------------------------------------

CORE_COMMANDS = {
    "EVALSHA", "HMGET", "HGET", "HGETALL", "ZRANGE", "ZREVRANGE", "ZREVRANGEBYLEX", "SMEMBERS",
    "EXISTS", "SET", "GET", "GETRANGE", "SCRIPT", "HELLO", "CLIENT", "PING", "SELECT", "AUTH",
}  # fmt: skip


def test_only_core_commands_no_modules(saver: RedisSaver, wire: Wire) -> None:
    for source in SCRIPTS.values():  # commands inside the scripts
        assert "FT." not in source.upper() and "JSON." not in source.upper()
    cps = conversation(saver, "t", 6)
    saver.put_writes("t", "", cps[-1].id, [TaskWrite("w", "n", "error", "x")])
    list(saver.list("t", filter={"i": 2}))
    list(saver.list("t", before=cps[3].id, limit=2))
    saver.list_threads(status="idle")
    saver.copy_thread("t", "t-copy")
    saver.prune("t", keep_last=2)
    saver.delete_thread("t")
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as again:  # setup: version key and scripts
        again.get_tuple("t-copy")
    used = set(wire.commands)
    assert used <= CORE_COMMANDS, used - CORE_COMMANDS
    assert not any(c.startswith(("FT.", "JSON.")) for c in used)
