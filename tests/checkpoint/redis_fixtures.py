"""Fixtures and builders of the Redis saver's tests.

Needs Redis at ``THREADLINE_TEST_REDIS_URL`` (default ``redis://127.0.0.1:6379/0``; see
``tests/services.py``): skipped when unreachable, failed under ``CI=true``. Every saver made
here writes under its own prefix inside one prefix per test session, and every key under it is
deleted afterwards (SCAN + UNLINK).

Round trips are counted on the client: every request redis-py sends (a command, a pipeline, an
EVALSHA) is one ``send_packed_command`` call on a connection, so the ``wire`` fixture wraps that
method (sync and async) and parses the RESP it sends to record the command names as well.
``replies`` counts the bytes of every reply instead.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio.connection
import redis.connection
from builders import changes_for, child
from services import redis_url, require_redis

from threadline.checkpoint.base import (
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    TaskWrite,
)
from threadline.checkpoint.changes import ChangedRecord
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.redis import RedisSaver
from threadline.checkpoint.redis import connection as redis_requests

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
    return child(parent, cid, values, versions, next, when.isoformat() if when else None)


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


def base_ref(client: redis.Redis, key: str) -> bytes | None:
    """The suffix of the blob a delta extends (None for a full blob), read from its header."""
    stored = client.get(key)
    assert stored is not None, key
    kind, _, _, _, base, *_ = stored.partition(b"\n")[0].split(b"|")
    if kind == b"f":
        return None
    return key.split("}", 1)[1].rsplit(":", 1)[0].encode() + b":" + base


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
