"""What only the Redis saver promises: one round trip per put, compare-and-set across processes,
TTLs on every key of a thread, plain Redis only, clear errors for bad data and dead servers.

Needs Redis at ``THREADLINE_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``; see
``tests/services.py``): skipped when unreachable, failed under ``CI=true``. Every saver made
here writes under its own prefix inside one prefix per test session, and every key under it is
deleted afterwards (SCAN + UNLINK).

Round trips are counted on the client: every request redis-py sends (a command, a pipeline, an
EVALSHA) is one ``send_packed_command`` call on a connection, so the ``wire`` fixture wraps that
method (sync and async) and parses the RESP it sends to record the command names as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import multiprocessing
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
import redis
import redis.asyncio.connection
import redis.connection
from builders import changes_for
from redis.crc import key_slot
from services import redis_url, require_redis

from threadline import serde
from threadline.checkpoint.base import (
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    Retention,
    TaskWrite,
    thread_status,
)
from threadline.checkpoint.changes import Append, ChangedRecord
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.redis import SCHEMA_VERSION, RedisSaver, mask_url
from threadline.checkpoint.redis import requests as redis_requests
from threadline.checkpoint.redis import saver as saver_module
from threadline.checkpoint.redis.scripts import SCRIPTS
from threadline.errors import ConcurrentUpdateError, SaverUnavailableError, SerializationError

REDIS_URL = redis_url()
SESSION_PREFIX = f"threadline-test:{os.getpid()}-{uuid.uuid4().hex[:8]}"
_savers = itertools.count()
_used = False  # whether this process wrote anything under SESSION_PREFIX


def unlink_prefix(prefix: str) -> int:
    """Delete every key under ``prefix`` (SCAN + UNLINK); returns how many there were."""
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in prefix) + ":*"
    removed = 0
    with redis.Redis.from_url(REDIS_URL) as client:
        batch: list[bytes] = []
        for key in client.scan_iter(match=pattern, count=1000):
            batch.append(key)
            if len(batch) >= 500:
                removed += client.unlink(*batch)
                batch = []
        if batch:
            removed += client.unlink(*batch)
    return removed


@contextmanager
def redis_saver(tmp_path: Path | None = None, **options: Any) -> Iterator[RedisSaver]:
    """A saver under a fresh prefix of this session's; its keys are deleted on exit.

    This is the factory the shared conformance suite runs the Redis saver with.
    """
    global _used
    url = require_redis()
    _used = True
    prefix = f"{SESSION_PREFIX}:{next(_savers)}"
    saver = RedisSaver(url, prefix=prefix, **options)
    try:
        yield saver
    finally:
        saver.close()
        unlink_prefix(prefix)


@pytest.fixture(scope="module", autouse=True)
def _session_keys_are_removed() -> Iterator[None]:
    yield
    if _used:
        unlink_prefix(SESSION_PREFIX)
        with redis.Redis.from_url(REDIS_URL) as client:
            assert list(client.scan_iter(match=SESSION_PREFIX + ":*")) == []


@pytest.fixture
def saver() -> Iterator[RedisSaver]:
    with redis_saver() as s:
        yield s


@pytest.fixture
def client() -> Iterator[redis.Redis]:
    with redis.Redis.from_url(require_redis()) as c:
        yield c


def keys_of(client: redis.Redis, saver: RedisSaver, thread_id: str | None = None) -> list[str]:
    tag = saver.prefix + (":{t:" + thread_id + "}" if thread_id is not None else "")
    return keys_under(client, tag)


def keys_under(client: redis.Redis, start: str) -> list[str]:
    """Every key named ``<start>:...``, sorted."""
    pattern = "".join("\\" + c if c in "*?[]\\" else c for c in start) + ":*"
    return sorted(k.decode() for k in client.scan_iter(match=pattern, count=1000))


# -- counting what goes over the wire -----------------------------------------------------------


def command_names(packed: Any) -> list[str]:
    """The command names in a packed RESP request (one or several commands)."""
    chunks = [packed] if isinstance(packed, bytes | str | memoryview) else packed
    data = b"".join(c.encode() if isinstance(c, str) else bytes(c) for c in chunks)
    names, i = [], 0
    while i < len(data):
        assert data[i : i + 1] == b"*", data[i : i + 20]
        j = data.index(b"\r\n", i)
        count, i = int(data[i + 1 : j]), j + 2
        for n in range(count):
            j = data.index(b"\r\n", i)
            length, i = int(data[i + 1 : j]), j + 2
            if n == 0:
                names.append(data[i : i + length].decode().upper())
            i += length + 2
    return names


class Wire:
    def __init__(self) -> None:
        self.requests: list[list[str]] = []

    def reset(self) -> None:
        self.requests.clear()

    @property
    def round_trips(self) -> int:
        return len(self.requests)

    @property
    def commands(self) -> list[str]:
        return [name for request in self.requests for name in request]


@pytest.fixture
def wire(monkeypatch: pytest.MonkeyPatch) -> Wire:
    seen = Wire()
    sync_send = redis.connection.AbstractConnection.send_packed_command
    async_send = redis.asyncio.connection.AbstractConnection.send_packed_command

    def spy(self: Any, command: Any, check_health: bool = True) -> Any:
        seen.requests.append(command_names(command))
        return sync_send(self, command, check_health)

    async def aspy(self: Any, command: Any, check_health: bool = True) -> Any:
        seen.requests.append(command_names(command))
        return await async_send(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", spy)
    monkeypatch.setattr(redis.asyncio.connection.AbstractConnection, "send_packed_command", aspy)
    return seen


# -- building checkpoints as the engine does ----------------------------------------------------


def step(
    parent: Checkpoint | None,
    values: dict[str, Any],
    *,
    next: tuple[PlannedTask, ...] = (),
    when: datetime | None = None,
) -> Checkpoint:
    """A checkpoint after ``parent`` whose changed keys get this checkpoint's id as version."""
    cid = new_checkpoint_id()
    versions = dict(parent.versions) if parent else {}
    for key, value in values.items():
        if parent is None or key not in parent.values or parent.values[key] != value:
            versions[key] = cid
    return Checkpoint(
        id=cid,
        parent_id=parent.id if parent else None,
        step=parent.step + 1 if parent else -1,
        values=values,
        versions=versions,
        next=next,
        created_at=(when or datetime.now(UTC)).isoformat(),
    )


def record(
    thread_id: str,
    cp: Checkpoint,
    parent: Checkpoint | None = None,
    *,
    ns: str = "",
    metadata: dict[str, Any] | None = None,
    writes: tuple[TaskWrite, ...] = (),
) -> CheckpointRecord:
    return ChangedRecord(thread_id, ns, cp, metadata or {}, writes, changes_for(parent, cp))


def conversation(
    saver: RedisSaver, thread_id: str, turns: int, *, ns: str = ""
) -> list[Checkpoint]:
    """``turns`` checkpoints, each appending one message to a list (stored as deltas). ("count"
    is a list so that it is stored as a blob: small scalars live in the checkpoint.)"""
    cps: list[Checkpoint] = []
    parent: Checkpoint | None = None
    for i in range(turns):
        messages = [*(parent.values["messages"] if parent else []), f"message {i} " + "x" * 50]
        cp = step(parent, {"messages": messages, "count": [i], "big": "b" * 1000})
        saver.put(record(thread_id, cp, parent, ns=ns, metadata={"i": i}))
        cps.append(cp)
        parent = cp
    return cps


def long_log(saver: RedisSaver, thread_id: str, turns: int) -> list[Checkpoint]:
    """``turns`` checkpoints, each appending a 2 KB entry to ``log`` (60 of them: 120 KB)."""
    cps: list[Checkpoint] = []
    parent: Checkpoint | None = None
    for i in range(turns):
        log = [*(parent.values["log"] if parent else []), f"{i:04d}" + "x" * 2000]
        cps.append(step(parent, {"log": log}))
        saver.put(record(thread_id, cps[-1], parent))
        parent = cps[-1]
    return cps


def blob_keys(client: redis.Redis, saver: RedisSaver, thread_id: str) -> list[str]:
    return [k for k in keys_of(client, saver, thread_id) if ":b:" in k]


def blob_data(client: redis.Redis, key: str) -> bytes:
    """A stored blob's data, without its header line."""
    stored = client.get(key)
    assert stored is not None, key
    return stored.partition(b"\n")[2]


def base_ref(client: redis.Redis, key: str) -> bytes | None:
    """The suffix of the blob a delta extends (None for a full blob), read from its header."""
    stored = client.get(key)
    assert stored is not None, key
    kind, _, _, _, base, *_ = stored.partition(b"\n")[0].split(b"|")
    if kind == b"f":
        return None
    return key.split("}", 1)[1].rsplit(":", 1)[0].encode() + b":" + base


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


# -- isolation of odd ids -------------------------------------------------------------------------


@pytest.mark.parametrize("thread_id", ["{braces}", "a:b", "*?[x]", "", "tab\tnew\nline", "線程"])
def test_a_threads_keys_share_one_slot_and_stay_apart(
    saver: RedisSaver, client: redis.Redis, thread_id: str
) -> None:
    cps = conversation(saver, thread_id, 3)
    saver.put(record(thread_id, step(None, {"c": 1}), ns="child:{x}"))
    saver.put_writes(thread_id, "", cps[-1].id, [TaskWrite("t:{1}", "n", "result", 1)])
    conversation(saver, thread_id + "x", 2)  # a neighbour whose id extends this one
    keys = [k for k in keys_of(client, saver) if not k.startswith(saver.prefix + ":threads")]
    mine = [k for k in keys if k.startswith(saver.prefix + ":{t:" + _quoted(thread_id) + "}")]
    assert len({key_slot(k.encode()) for k in mine}) == 1
    assert len(mine) > 10
    got = saver.get_tuple(thread_id)
    assert got is not None and got.thread_id == thread_id and got.checkpoint == cps[-1]
    assert [t.thread_id for t in saver.list_threads()] == [thread_id + "x", thread_id]
    saver.delete_thread(thread_id)
    assert [k for k in keys_of(client, saver) if k in mine] == []
    assert saver.get_tuple(thread_id + "x") is not None


def _quoted(text: str) -> str:
    return quote(text, safe="")


# -- bad data and dead servers ------------------------------------------------------------------


def test_a_corrupted_blob_is_a_clear_error_and_harms_no_other_thread(
    saver: RedisSaver, client: redis.Redis
) -> None:
    cps = conversation(saver, "bad", 2)
    good = conversation(saver, "good", 2)
    (key,) = [k for k in blob_keys(client, saver, "bad") if ":b::big:" in k]
    stored = client.get(key)
    assert stored is not None
    client.set(key, stored[: len(stored) // 2])  # truncated
    with pytest.raises(SerializationError) as info:
        saver.get_tuple("bad")
    message = str(info.value)
    assert "'big'" in message and "'bad'" in message and cps[-1].id in message
    with pytest.raises(SerializationError):
        list(saver.list("bad"))
    got = saver.get_tuple("good")
    assert got is not None and got.checkpoint == good[-1]
    assert [r.checkpoint for r in saver.list("good")] == good[::-1]


def test_a_damaged_row_names_its_redis_key(saver: RedisSaver, client: redis.Redis) -> None:
    (cp,) = conversation(saver, "bad", 1)
    row = f"{saver.prefix}:{{t:bad}}:c::{cp.id}"
    client.set(row, b"no header")
    with pytest.raises(SerializationError, match="malformed") as info:
        saver.get_tuple("bad")
    assert row in str(info.value)
    client.set(row, b"2026-01-01 9 \n\x01\x00garbage\x01")  # metadata and body undecodable
    with pytest.raises(SerializationError, match="'bad'"):
        saver.get_tuple("bad")


def test_unreachable_server_is_saver_unavailable_with_masked_password() -> None:
    url = "redis://ada:s3cret-pw@127.0.0.1:1/0"
    with pytest.raises(SaverUnavailableError) as info:
        RedisSaver(url)
    message = str(info.value)
    assert "127.0.0.1:1" in message and "***" in message and "s3cret-pw" not in message
    assert mask_url("redis://:pw@h:1/0?password=x&db=2") == "redis://:***@h:1/0?password=***&db=2"


class Proxy:
    """A TCP forwarder to the test Redis that can be cut, as when the server goes away."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self.listener = socket.create_server(("127.0.0.1", 0))
        port = self.listener.getsockname()[1]
        netloc = parts.netloc.rpartition("@")[0]
        self.url = urlunsplit(
            parts._replace(netloc=f"{netloc}@" * bool(netloc) + f"127.0.0.1:{port}")
        )
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                inbound, _ = self.listener.accept()
            except OSError:
                return
            outbound = socket.create_connection(self.target)
            self.sockets += [inbound, outbound]
            for a, b in ((inbound, outbound), (outbound, inbound)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self.listener.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


async def test_server_lost_after_start_is_saver_unavailable() -> None:
    proxy = Proxy(require_redis())
    prefix = f"{SESSION_PREFIX}:lost"
    saver = RedisSaver(proxy.url, prefix=prefix)
    try:
        saver.put(record("t", step(None, {"x": 1})))
        assert await saver.aget_tuple("t") is not None
        proxy.cut()
        port = proxy.url.rsplit(":", 1)[1].split("/")[0]
        with pytest.raises(SaverUnavailableError, match=f"cannot reach Redis at .*:{port}"):
            saver.get_tuple("t")
        with pytest.raises(SaverUnavailableError, match=f"cannot reach Redis at .*:{port}"):
            await saver.aput(record("t2", step(None, {"x": 1})))
    finally:
        saver.close()
        unlink_prefix(prefix)


async def test_closed_saver_refuses_work() -> None:
    with redis_saver() as saver:
        await saver.aput(record("t", step(None, {"x": 1})))
    with pytest.raises(SaverUnavailableError, match="closed"):
        saver.get_tuple("t")
    with pytest.raises(SaverUnavailableError, match="closed"):
        await saver.aget_tuple("t")


def test_a_newer_layout_is_refused(client: redis.Redis) -> None:
    prefix = f"{SESSION_PREFIX}:newer"
    client.set(f"{prefix}:schema_version", SCHEMA_VERSION + 1)
    with pytest.raises(SaverUnavailableError, match="upgrade threadline"):
        RedisSaver(REDIS_URL, prefix=prefix)
    client.set(f"{prefix}:schema_version", SCHEMA_VERSION)
    RedisSaver(REDIS_URL, prefix=prefix).close()
    unlink_prefix(prefix)


def test_an_older_layout_is_migrated_when_a_saver_starts(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A synthetic next layout adds a key per thread: data of the current layout is migrated
    when a saver starts and the version key moves; a layout older than any migration (layout
    1: text creation times, the loop's metadata as bytes) is refused."""
    prefix = f"{SESSION_PREFIX}:older"
    first = step(None, {"n": 1, "items": [1]})
    with RedisSaver(REDIS_URL, prefix=prefix) as saver:
        saver.put(record("t", first))
    current, synthetic = SCHEMA_VERSION, SCHEMA_VERSION + 1

    def to_next(migrated_prefix: str) -> Any:
        yield redis_requests.Call("set", (f"{migrated_prefix}:layout-next-note", "migrated"))

    try:
        monkeypatch.setattr(saver_module, "SCHEMA_VERSION", synthetic)
        monkeypatch.setattr(saver_module, "MIGRATIONS", {current: to_next})
        with RedisSaver(REDIS_URL, prefix=prefix) as saver:
            assert client.get(f"{prefix}:schema_version") == str(synthetic).encode()
            assert client.get(f"{prefix}:layout-next-note") == b"migrated"
            got = saver.get_tuple("t")
            assert got is not None and got.checkpoint == first
        client.set(f"{prefix}:schema_version", 1)
        with pytest.raises(SaverUnavailableError, match="format version 1, which this threadline"):
            RedisSaver(REDIS_URL, prefix=prefix)
    finally:
        unlink_prefix(prefix)


def test_prefix_with_braces_is_refused() -> None:
    with pytest.raises(ValueError, match="braces"):
        RedisSaver(REDIS_URL, prefix="a{b}")


# -- storage: deltas, pruning, retention, copies ------------------------------------------------


def test_growing_list_is_stored_as_deltas(saver: RedisSaver, client: redis.Redis) -> None:
    cps = conversation(saver, "t", 60)
    final = cps[-1].values["messages"]
    list_bytes = sum(
        len(blob_data(client, k)) for k in blob_keys(client, saver, "t") if ":b::messages:" in k
    )
    one_copy = len("".join(final))
    assert list_bytes < 1.5 * one_copy  # not 60 copies of a growing list
    assert len([k for k in blob_keys(client, saver, "t") if ":b::big:" in k]) == 1  # unchanged
    for i in (0, 1, 17, 59):
        got = saver.get_tuple("t", "", cps[i].id)
        assert got is not None and got.checkpoint == cps[i]


def test_compaction_turns_old_versions_into_prefix_rows(
    saver: RedisSaver, client: redis.Redis
) -> None:
    cps = long_log(saver, "t", 150)
    headers = [client.get(k).partition(b"\n")[0] for k in blob_keys(client, saver, "t")]
    kinds = [h.split(b"|")[0] for h in headers]
    assert kinds.count(b"f") == 1 and kinds.count(b"p") > 100 and kinds.count(b"d") < 40
    stored = sum(len(client.get(k)) for k in blob_keys(client, saver, "t"))
    assert stored < 1.2 * len(serde.DEFAULT.dumps(cps[-1].values["log"]))
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as fresh:  # nothing cached: reads follow
        for cp in cps:  # prefix rows to later versions, in the read script
            got = fresh.get_tuple("t", "", cp.id)
            assert got is not None and got.checkpoint == cp


def test_one_key_per_checkpoint_and_per_value(saver: RedisSaver, client: redis.Redis) -> None:
    """Keys cost Redis memory of their own: a checkpoint is one string, its writes (if any) one
    hash, an unchanged value is not stored again."""
    cps = conversation(saver, "t", 10)
    saver.put_writes("t", "", cps[3].id, [TaskWrite("a", "n", "result", 1)])
    saver.put_writes("t", "", cps[3].id, [TaskWrite("b", "n", "error", "x")])
    keys = keys_of(client, saver, "t")
    checkpoints = [k for k in keys if ":c::" in k]
    assert len(checkpoints) == 10
    assert all(client.type(k) == b"string" for k in checkpoints)
    assert [k for k in keys if ":w::" in k] == [f"{saver.prefix}:{{t:t}}:w::{cps[3].id}"]
    assert len([k for k in keys if ":b::big:" in k]) == 1
    assert len([k for k in keys if ":b::count:" in k]) == 10


def test_small_scalars_live_in_the_checkpoints(saver: RedisSaver, client: redis.Redis) -> None:
    """A step that changes only small scalars writes its checkpoint key and no blob key; each
    checkpoint holds every small scalar, changed or not, so none is looked up elsewhere."""
    small = {"n": 0, "ratio": 0.5, "done": False, "none": None, "word": "w" * 64, "raw": b"r"}
    records = []
    parent: Checkpoint | None = None
    for i in range(5):
        values = {**small, "n": i, "doc": "d" * 65, "items": [1]}
        records.append(record("t", step(parent, values), parent))
        saver.put(records[-1])
        parent = records[-1].checkpoint
    tag = f"{saver.prefix}:{{t:t}}"
    # "doc" is one character too long to be inline, "items" a list: one blob each, as ever.
    blobs = [k.removeprefix(tag).rsplit(":", 1)[0] for k in blob_keys(client, saver, "t")]
    assert blobs == [":b::doc", ":b::items"]
    header = client.get(f"{tag}:c::{parent.id}").partition(b"\n")[0].split(b" ")
    assert [s.rsplit(b":", 1)[0] for s in header[2:]] == [b":b::doc", b":b::items"]
    for rec in records:
        got = saver.get_tuple("t", "", rec.checkpoint.id)
        assert got is not None and got.checkpoint == rec.checkpoint
    assert saver.prune("t", keep_last=1) == 4  # the kept checkpoint still holds "word", "raw"
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == parent
    assert len(blob_keys(client, saver, "t")) == 2
    saver.copy_thread("t", "copy")
    saver.delete_thread("t")
    assert keys_of(client, saver, "t") == []
    got = saver.get_tuple("copy")
    assert got is not None and got.checkpoint == parent


def test_long_versions_chain_and_prune_like_short_ones(
    saver: RedisSaver, client: redis.Redis
) -> None:
    """A blob header longer than the bytes first read for it is read whole."""
    cps: list[Checkpoint] = []
    parent: Checkpoint | None = None
    for i in range(6):
        cp = step(parent, {"messages": [*(parent.values["messages"] if parent else []), i]})
        cp = dataclasses.replace(cp, versions={"messages": "v" * 600 + str(i)})
        saver.put(record("t", cp, parent))
        cps.append(cp)
        parent = cp
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as fresh:  # knows no blob yet
        nxt = dataclasses.replace(
            step(cps[-1], {"messages": [*cps[-1].values["messages"], 6]}),
            versions={"messages": "v" * 600 + "6"},
        )
        fresh.put(record("t", nxt, cps[-1]))
        assert fresh.prune("t", keep_last=2) == 5
    new_blob = f"{saver.prefix}:{{t:t}}:b::messages:{'v' * 600}6"
    assert base_ref(client, new_blob) == f":b::messages:{'v' * 600}5".encode()
    assert [r.checkpoint for r in saver.list("t")] == [nxt, cps[-1]]


def test_prune_keeps_what_kept_checkpoints_need(saver: RedisSaver, client: redis.Redis) -> None:
    cps = conversation(saver, "t", 30)
    child = conversation(saver, "t", 5, ns="child:1")
    saver.put_writes("t", "", cps[0].id, [TaskWrite("old", "n", "result", 1)])
    assert saver.prune("t", keep_last=3) == 27 + 2
    assert [r.checkpoint for r in saver.list("t")] == cps[:-4:-1]
    assert [r.checkpoint for r in saver.list("t", "child:1")] == child[:-4:-1]
    for kept in saver.list("t"):
        assert kept.checkpoint.values == next(c for c in cps if c.id == kept.checkpoint.id).values
    # No orphans: every key left is a kept checkpoint's or a blob it needs.
    keys = keys_of(client, saver, "t")
    dropped = {c.id for c in cps[:-3]}
    assert not [k for k in keys if k.rsplit(":", 1)[1] in dropped and ":c:" in k]
    assert not [k for k in keys if k.rsplit(":", 1)[1] in dropped and ":w:" in k]
    tag = f"{saver.prefix}:{{t:t}}"
    reachable = set()
    for kept_cp in [*cps[-3:], *child[-3:]]:
        ns = "" if kept_cp in cps else "child%3A1"
        for key, version in kept_cp.versions.items():
            ref: bytes | None = f":b:{ns}:{key}:{version}".encode()
            while ref:
                reachable.add(tag + ref.decode())
                ref = base_ref(client, tag + ref.decode())
    assert set(blob_keys(client, saver, "t")) == reachable  # every blob left is needed
    assert len([k for k in keys if ":c:" in k]) == 3 + 3
    assert len([k for k in keys if ":b::big:" in k]) == 1
    # The registry names every key but checkpoints and their writes (found from the index).
    registry = {s.decode() for s in client.smembers(f"{saver.prefix}:{{t:t}}:keys")}
    derived = {k for k in keys if ":c:" in k or ":w:" in k}
    assert {tag + s for s in registry} == set(keys) - derived - {tag + ":keys"}
    # The chain goes on from what was kept.
    nxt = step(cps[-1], {**cps[-1].values, "messages": [*cps[-1].values["messages"], "more"]})
    saver.put(record("t", nxt, cps[-1]))
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == nxt
    with pytest.raises(ValueError):
        saver.prune("t", keep_last=-1)


def test_prune_to_nothing_removes_the_thread(saver: RedisSaver, client: redis.Redis) -> None:
    conversation(saver, "t", 4)
    conversation(saver, "t", 2, ns="child:1")
    conversation(saver, "other", 1)
    assert saver.prune("t", keep_last=0) == 6
    assert saver.get_tuple("t") is None and list(saver.list("t", "child:1")) == []
    assert [t.thread_id for t in saver.list_threads()] == ["other"]
    assert keys_of(client, saver, "t") == []


def test_retention_keeps_the_newest_n_on_save(client: redis.Redis) -> None:
    with redis_saver(retention=Retention(max_checkpoints=4)) as saver:
        cps = conversation(saver, "t", 25)
        assert [r.checkpoint for r in saver.list("t")] == cps[:-5:-1]
        assert len([k for k in keys_of(client, saver, "t") if ":c:" in k]) == 4


async def test_retention_by_age_never_drops_the_newest() -> None:
    old = datetime.now(UTC) - timedelta(days=3)
    with redis_saver(retention=Retention(max_age=timedelta(days=1))) as saver:
        a = step(None, {"x": 1}, when=old)
        await saver.aput(record("t", a))
        b = step(a, {"x": 2}, when=old + timedelta(minutes=1))
        await saver.aput(record("t", b, a))
        assert [r.checkpoint.id async for r in saver.alist("t")] == [b.id]
        c = step(b, {"x": 3})
        await saver.aput(record("t", c, b))
        assert [r.checkpoint.id async for r in saver.alist("t")] == [c.id]
        got = await saver.aget_tuple("t")
        assert got is not None and got.checkpoint.values == {"x": 3}


def test_copy_thread_is_independent(saver: RedisSaver) -> None:
    cps = conversation(saver, "src", 5)
    saver.put_writes("src", "", cps[-1].id, [TaskWrite("w", "n", "interrupt", "ask")])
    conversation(saver, "src", 2, ns="child:1")
    saver.copy_thread("src", "dst")
    saver.delete_thread("src")
    got = saver.get_tuple("dst")
    assert got is not None and got.thread_id == "dst" and got.checkpoint == cps[-1]
    assert got.pending_writes == (TaskWrite("w", "n", "interrupt", "ask"),)
    assert len(list(saver.list("dst", "child:1"))) == 2
    assert [t.thread_id for t in saver.list_threads()] == ["dst"]
    nxt = step(cps[-1], {**cps[-1].values, "messages": [*cps[-1].values["messages"], "more"]})
    saver.put(record("dst", nxt, cps[-1]))
    saver.copy_thread("dst", "dst2")
    with pytest.raises(ValueError, match="already has checkpoints"):
        saver.copy_thread("dst", "dst2")
    with pytest.raises(ValueError, match="already has checkpoints"):
        saver.copy_thread("dst", "dst")
    saver.copy_thread("nothing", "dst3")  # copying an empty thread does nothing
    assert saver.get_tuple("dst3") is None
    got2 = saver.get_tuple("dst2")
    assert got2 is not None and got2.checkpoint == nxt


def test_a_base_deleted_behind_the_cache_is_stored_in_full(saver: RedisSaver) -> None:
    cps = conversation(saver, "t", 3)
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as other:
        other.delete_thread("t")  # this saver's cache still knows the blobs
    old = cps[-1].values["messages"]
    values = {"messages": [*old, "more"]}
    cp = step(None, values)
    changes = {"messages": Append(cps[-1].versions["messages"], len(old))}
    saver.put(ChangedRecord("t", "", cp, {}, (), changes))  # the put retries, storing in full
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == cp


# -- large values held in the process -----------------------------------------------------------


class Replies:
    """Bytes of every reply the saver receives, one entry per request (sync and async)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def reset(self) -> None:
        self.sizes.clear()

    @property
    def total(self) -> int:
        return sum(self.sizes)


def reply_bytes(reply: Any) -> int:
    if isinstance(reply, bytes | str):
        return len(reply)
    if isinstance(reply, list | tuple):
        return sum(reply_bytes(r) for r in reply)
    return 0


@pytest.fixture
def replies(monkeypatch: pytest.MonkeyPatch) -> Replies:
    seen = Replies()
    sync_send, async_send = redis_requests.send, redis_requests.asend

    def send(client: Any, request: Any) -> Any:
        reply = sync_send(client, request)
        seen.sizes.append(reply_bytes(reply))
        return reply

    async def asend(client: Any, request: Any) -> Any:
        reply = await async_send(client, request)
        seen.sizes.append(reply_bytes(reply))
        return reply

    monkeypatch.setattr(redis_requests, "send", send)
    monkeypatch.setattr(redis_requests, "asend", asend)
    return seen


def test_a_large_value_loaded_again_comes_as_its_header_only(
    saver: RedisSaver, wire: Wire, replies: Replies
) -> None:
    cps = long_log(saver, "t", 2)
    big = [f"{i:04d}" + "y" * 2000 for i in range(60)]  # one full blob of about 120 KB
    cps.append(step(cps[-1], {"log": big}))
    saver.put(record("t", cps[-1], cps[-2]))
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as fresh:  # holds nothing yet
        replies.reset()
        got = fresh.get_tuple("t")
        assert got is not None and got.checkpoint == cps[-1]
        assert replies.total > 100_000
        wire.reset()
        replies.reset()
        again = fresh.get_tuple("t")
        assert wire.requests == [["EVALSHA"]]
        assert again is not None and again.checkpoint == cps[-1]
        assert replies.total < 2_000
    replies.reset()
    got = saver.get_tuple("t")  # the saver that wrote the blob holds its bytes since the put
    assert got is not None and got.checkpoint == cps[-1] and replies.total < 2_000


async def test_async_loads_use_the_held_bytes_too(saver: RedisSaver, replies: Replies) -> None:
    cps = long_log(saver, "t", 80)
    got = await saver.aget_tuple("t")
    assert got is not None and got.checkpoint == cps[-1]
    replies.reset()
    got = await saver.aget_tuple("t")
    assert got is not None and got.checkpoint == cps[-1]
    assert replies.total < 0.2 * len(serde.DEFAULT.dumps(cps[-1].values["log"]))


def test_load_cost_stays_flat_as_a_conversation_grows(saver: RedisSaver, replies: Replies) -> None:
    """Each load brings the chain of small deltas, never the large full blob again."""
    cps = long_log(saver, "t", 150)
    per_load = []
    for cp in (cps[40], cps[99], cps[149]):
        replies.reset()
        got = saver.get_tuple("t", "", cp.id)
        assert got is not None and got.checkpoint == cp
        per_load.append(replies.total)
    replies.reset()
    assert [r.checkpoint for r in saver.list("t", limit=3)] == cps[:-4:-1]
    assert replies.total < 3 * 64 * 1024
    full = len(serde.DEFAULT.dumps(cps[-1].values["log"]))
    assert full > 250_000 and max(per_load) < 64 * 1024


def test_a_large_value_rewritten_behind_the_saver_is_read_again(
    saver: RedisSaver, replies: Replies
) -> None:
    cp = step(None, {"log": [f"{i:04d}" + "y" * 2000 for i in range(60)]})
    saver.put(record("t", cp))
    assert (got := saver.get_tuple("t")) is not None and got.checkpoint == cp
    rewritten = dataclasses.replace(
        cp, values={"log": [f"{i:04d}" + "z" * 2000 for i in range(60)]}
    )
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as other:  # another process, same ids
        other.delete_thread("t")
        other.put(record("t", rewritten))
    replies.reset()
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == rewritten
    assert replies.total > 100_000  # a different CRC-32: sent whole
    replies.reset()
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == rewritten and replies.total < 2_000


def test_a_damaged_blob_that_still_decodes_fails_its_checksum(
    saver: RedisSaver, client: redis.Redis
) -> None:
    (cp,) = conversation(saver, "bad", 1)
    (key,) = [k for k in blob_keys(client, saver, "bad") if ":b::big:" in k]
    header, _, data = client.get(key).partition(b"\n")
    client.set(key, header + b"\n" + data.replace(b"b", b"c"))  # same length, still a string
    with pytest.raises(SerializationError, match="CRC-32") as info:
        saver.get_tuple("bad")  # 1 KB: never held, always sent and checked
    assert "'big'" in str(info.value) and cp.id in str(info.value)


def test_delete_thread_forgets_the_held_bytes(
    saver: RedisSaver, client: redis.Redis, replies: Replies
) -> None:
    cps = long_log(saver, "t", 60)
    assert saver.get_tuple("t") is not None
    dumped = {k: client.dump(k) for k in keys_of(client, saver, "t")}
    saver.delete_thread("t")
    for k, value in dumped.items():  # the very same bytes come back
        client.restore(k, 0, value)
    replies.reset()
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == cps[-1]
    assert replies.total > 100_000  # forgotten: the data came over the wire again


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
