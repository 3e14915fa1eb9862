"""Threads in Redis: TTLs on every key of a thread, their status and listing, clients per
event loop.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
from redis_fixtures import (
    REDIS_URL,
    _session_keys_are_removed,
    client,
    conversation,
    keys_of,
    record,
    redis_saver,
    saver,
    step,
)

from threadline.checkpoint.base import (
    CheckpointRecord,
    PlannedTask,
    TaskWrite,
    thread_status,
)
from threadline.checkpoint.redis import RedisSaver

__all__ = ["_session_keys_are_removed", "client", "saver"]  # fixtures used here


# -- TTL ------------------------------------------------------------------------------------------


def test_ttl_on_every_key_of_a_thread_and_refreshed(client: redis.Redis) -> None:
    with redis_saver(ttl=100) as saver:
        cps = conversation(saver, "t", 4)
        saver.put(record("t", step(None, {"c": 1}), ns="child:1"))
        saver.put_writes("t", "", cps[-1].id, [TaskWrite("w", "n", "interrupt", 1)])
        keys = keys_of(client, saver, "t")
        assert not [k for k in keys if ":b:child" in k]  # "c" lives in its checkpoint
        kinds = {k.split("}:", 1)[1].split(":", 1)[0] for k in keys}
        assert kinds == {"keys", "meta", "ns", "idx", "c", "w", "b"}
        for key in keys:
            assert 95_000 < client.pttl(key) <= 100_000, key
        for key in keys:
            client.pexpire(key, 5_000)  # as if time passed
        saver.put_writes("t", "", cps[-1].id, [TaskWrite("w2", "n", "result", 2)])
        for key in keys_of(client, saver, "t"):
            assert client.pttl(key) > 95_000, key  # every key refreshed, not only the written ones
        # Keys of other threads and the global index do not expire.
        saver.put(record("other", step(None, {"y": 1})))
        assert client.pttl(f"{saver.prefix}:threads") == -1
        assert client.pttl(f"{saver.prefix}:schema_version") == -1


def test_expired_threads_disappear_and_leave_the_thread_list() -> None:
    with redis_saver(ttl=0.3) as saver, redis_saver() as keeper:
        saver.put(record("short", step(None, {"x": 1})))
        assert [t.thread_id for t in saver.list_threads()] == ["short"]
        keeper.put(record("long", step(None, {"x": 1})))
        time.sleep(0.6)
        assert saver.get_tuple("short") is None
        assert saver.list_threads() == []
        with redis.Redis.from_url(REDIS_URL) as c:
            assert c.zcard(f"{saver.prefix}:threads") == 0  # forgotten
        assert [t.thread_id for t in keeper.list_threads()] == ["long"]


# -- thread listing ---------------------------------------------------------------------------

STATUS_CASES: list[tuple[tuple[PlannedTask, ...], tuple[TaskWrite, ...]]] = [
    ((), ()),
    ((PlannedTask("a"),), ()),
    ((PlannedTask("a"),), (TaskWrite("1", "a", "interrupt", 1),)),
    ((PlannedTask("a"),), (TaskWrite("1", "a", "breakpoint", None),)),
    ((PlannedTask("a"), PlannedTask("b")), (TaskWrite("1", "a", "error", "x"),)),
    ((PlannedTask("a"),), (TaskWrite("1", "a", "error", "x"), TaskWrite("1", "a", "result", 1))),
    (
        (PlannedTask("a"), PlannedTask("b")),
        (TaskWrite("1", "a", "interrupt", 1), TaskWrite("2", "b", "error", "x")),
    ),
    ((PlannedTask("a"),), (TaskWrite("1", "a", "resume", {"i": 1}),)),
]


@pytest.mark.parametrize(("next", "writes"), STATUS_CASES)
def test_thread_status_matches_the_protocol(
    saver: RedisSaver, next: tuple[PlannedTask, ...], writes: tuple[TaskWrite, ...]
) -> None:
    cp = step(None, {"x": 1}, next=next)
    saver.put(record("t", cp, writes=writes[:1]))
    saver.put_writes("t", "", cp.id, writes[1:])
    (info,) = saver.list_threads()
    assert info.status == thread_status(cp, writes)
    assert info.checkpoint_id == cp.id
    assert info.next == tuple(t.name for t in next)


async def test_list_threads_newest_first_with_status_and_limit(saver: RedisSaver) -> None:
    for n in range(5):
        cp = step(None, {"x": n}, next=(PlannedTask("ask"),) if n % 2 else ())
        await saver.aput(record(f"t{n}", cp))
        await saver.aput(record(f"t{n}", step(None, {"c": 1}), ns="child:1"))  # root only
        if n % 2:
            await saver.aput_writes(f"t{n}", "", cp.id, [TaskWrite("i", "ask", "interrupt", 1)])
    threads = await saver.alist_threads()
    assert [t.thread_id for t in threads] == ["t4", "t3", "t2", "t1", "t0"]
    assert [t.status for t in threads] == ["idle", "interrupted", "idle", "interrupted", "idle"]
    assert [t.thread_id for t in saver.list_threads(status="interrupted")] == ["t3", "t1"]
    assert [t.thread_id for t in saver.list_threads(status="idle", limit=2)] == ["t4", "t2"]
    assert saver.list_threads(limit=0) == []
    saver.delete_thread("t3")
    assert [t.thread_id for t in saver.list_threads(status="interrupted")] == ["t1"]


async def test_async_clients_follow_the_event_loop(saver: RedisSaver) -> None:
    cp = step(None, {"x": 1})
    await saver.aput(record("t", cp))

    def in_another_loop() -> CheckpointRecord | None:
        return asyncio.run(saver.aget_tuple("t"))

    got = await asyncio.to_thread(in_another_loop)
    assert got is not None and got.checkpoint == cp
    assert [r.checkpoint.id async for r in saver.alist("t")] == [cp.id]
