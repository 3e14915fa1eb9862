"""``RedisSaver``: the public API, its connections, and running operations over them.

Sync methods use one ``redis.Redis`` connection pool; the ``a*`` methods use a
``redis.asyncio.Redis`` client per event loop. Both run the same operations
(``operations.py``); this module only sends their requests and retries lost connections.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Self

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry as SyncRetry

from threadline.checkpoint.base import (
    BaseSaver,
    CheckpointRecord,
    Retention,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
)
from threadline.checkpoint.formats import migrations_from
from threadline.checkpoint.redis import requests as wire
from threadline.checkpoint.redis.clients import Clients, ttl_seconds
from threadline.checkpoint.redis.keys import SCHEMA_VERSION
from threadline.checkpoint.redis.operations import Operations
from threadline.checkpoint.redis.requests import Call, Emit, Load, Op, Request, T, text
from threadline.errors import SaverUnavailableError
from threadline.serde import DEFAULT, Serializer

#: ``MIGRATIONS[n]`` rewrites the data under a prefix from layout ``n`` to ``n + 1`` (see
#: ``formats``; none yet), before the version key is moved.
MIGRATIONS: dict[int, Callable[[str], Op[Any]]] = {}

_SEND_ATTEMPTS = 3  # a request whose connection broke is sent again (idempotent ones only)
_SEND_BACKOFF = 0.05  # seconds, doubled after each failure


class RedisSaver(BaseSaver):
    """Checkpoints in Redis (standalone, no modules needed), safe to share between processes.

    Give it a URL (or set ``REDIS_URL``), or, as langgraph-redis accepts, ``redis_client=`` a
    ``redis.Redis`` of yours (kept open when the saver closes; its own retry settings then
    apply, see ``clients.py``). ``connection_args`` go to the clients made from the URL.
    ``prefix`` starts every key name (use one per application or test run); ``ttl`` (seconds,
    or langgraph-redis's ``{"default_ttl": minutes}``) makes a thread expire that long after
    its last write; ``retention`` prunes old checkpoints on save. Sync methods use one
    ``redis.Redis`` connection pool; the ``a*`` methods use a ``redis.asyncio.Redis`` client
    per event loop, created on first use.

        with RedisSaver.from_conn_string("redis://localhost:6379/0", ttl=7 * 86400) as saver:
            graph = builder.compile(checkpointer=saver)
    """

    def __init__(
        self,
        redis_url: str | None = None,
        *,
        redis_client: redis.Redis | aredis.Redis | None = None,
        connection_args: Mapping[str, Any] | None = None,
        prefix: str = "threadline",
        ttl: float | Mapping[str, Any] | None = None,
        retention: Retention | None = None,
        serde: Serializer | None = None,
    ) -> None:
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError(f"RedisSaver prefix must be non-empty, without braces: {prefix!r}")
        seconds = ttl_seconds(ttl)
        self.prefix = prefix
        self.ttl = seconds
        ttl_ms = round(seconds * 1000) if seconds is not None else 0
        self._ops = Operations(prefix, ttl_ms, retention, serde or DEFAULT)
        self._lock = threading.Lock()
        self._closed = False
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aredis.Redis] = (
            weakref.WeakKeyDictionary()
        )
        self._clients = Clients.of(type(self).__name__, redis_url, redis_client, connection_args)
        self.url = self._clients.url
        self._where = self._clients.where
        self._client: redis.Redis | None = self._clients.sync_client(SyncRetry)
        self._ready = self._client is not None  # setup ran (an async client's runs on first use)
        if self._client is not None:
            try:
                self._setup()
            except BaseException:
                self._clients.close(self._client)
                raise

    @property
    def retention(self) -> Retention | None:
        return self._ops.retention

    @property
    def serde(self) -> Serializer:
        return self._ops.codec

    @classmethod
    def from_conn_string(
        cls,
        redis_url: str | None = None,
        *,
        redis_client: redis.Redis | aredis.Redis | None = None,
        **options: Any,
    ) -> Self:
        """A saver: ``with RedisSaver.from_conn_string(url) as saver:``."""
        return cls(redis_url, redis_client=redis_client, **options)

    def setup(self) -> None:
        """Check (or record) the layout version, migrate older data, and load the scripts.

        Run when the saver is made; again it only checks (idempotent)."""
        self._setup()

    def _setup(self) -> None:
        try:
            self._run(self._setup_op())
        except RedisError as exc:
            raise SaverUnavailableError(f"Redis at {self._where}: {exc}") from exc

    async def asetup(self) -> None:
        self._ready = True  # the setup's own requests must not start another one
        try:
            await self._arun(self._setup_op())
        except BaseException as exc:
            self._ready = False
            if isinstance(exc, RedisError):
                raise SaverUnavailableError(f"Redis at {self._where}: {exc}") from exc
            raise

    def _setup_op(self) -> Op[None]:
        key = f"{self.prefix}:schema_version"
        yield Call("set", (key, SCHEMA_VERSION), {"nx": True})
        found = yield Call("get", (key,))
        version = _version(found)
        if version > SCHEMA_VERSION or version < 0:
            raise SaverUnavailableError(
                f"Redis at {self._where} holds threadline data under prefix "
                f"{self.prefix!r} with layout version {text(found)}, which this threadline does "
                f"not understand (it reads version {SCHEMA_VERSION}); upgrade threadline"
            )
        where = f"Redis at {self._where} (prefix {self.prefix!r})"
        steps = migrations_from(version, SCHEMA_VERSION, MIGRATIONS, where)
        for migrate in steps:
            yield from migrate(self.prefix)
        if steps:
            yield Call("set", (key, SCHEMA_VERSION))
        yield Load()

    def _unavailable(self, exc: BaseException) -> SaverUnavailableError:
        return SaverUnavailableError(f"cannot reach Redis at {self._where}: {exc}")

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pools; further calls raise ``SaverUnavailableError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            aclients = list(self._aclients.items())
            self._aclients.clear()
        if self._client is not None:
            self._clients.close(self._client)
        for loop, client in aclients:
            wire.close_async_client(loop, client)

    async def aclose(self) -> None:
        """Close the saver, awaiting the async client of the running loop."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._aclients.pop(loop, None)
        if client is not None:
            await client.aclose()
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"{type(self).__name__}({self._where!r}, prefix={self.prefix!r}, {state})"

    # -- running requests ------------------------------------------------------------------

    def _execute(self, request: Request) -> Any:
        if self._closed:
            raise SaverUnavailableError(f"{self!r} is closed")
        assert self._client is not None  # without one, sync calls go through ``loopbound``
        for attempt in itertools.count():
            try:
                try:
                    return wire.send(self._client, request)
                except NoScriptError:  # the server lost its scripts (restart, SCRIPT FLUSH)
                    wire.send(self._client, Load())
                    return wire.send(self._client, request)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                again = wire.again(request)
                if again is None or attempt + 1 >= _SEND_ATTEMPTS:
                    raise self._unavailable(exc) from exc
                request = again
                time.sleep(_SEND_BACKOFF * 2**attempt)
        raise AssertionError("unreachable")

    async def _aexecute(self, request: Request) -> Any:
        if not self._ready:
            await self.asetup()
        client = self._aclient()
        if client is None:  # only a sync client of the program's
            return await asyncio.to_thread(self._execute, request)
        for attempt in itertools.count():
            try:
                try:
                    return await wire.asend(client, request)
                except NoScriptError:
                    await wire.asend(client, Load())
                    return await wire.asend(client, request)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                again = wire.again(request)
                if again is None or attempt + 1 >= _SEND_ATTEMPTS:
                    raise self._unavailable(exc) from exc
                request = again
                await asyncio.sleep(_SEND_BACKOFF * 2**attempt)
        raise AssertionError("unreachable")

    def _aclient(self) -> aredis.Redis | None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise SaverUnavailableError(f"{self!r} is closed")
            if self.url is None:
                return self._clients.new_async_client(AsyncRetry)
            client = self._aclients.get(loop)
            if client is None:
                client = self._clients.new_async_client(AsyncRetry)
                self._aclients[loop] = client
            return client

    def _run(self, op: Op[T]) -> T:
        reply: Any = None
        try:
            while True:
                reply = self._execute(op.send(reply))
        except StopIteration as stop:
            return stop.value

    async def _arun(self, op: Op[T]) -> T:
        reply: Any = None
        try:
            while True:
                reply = await self._aexecute(op.send(reply))
        except StopIteration as stop:
            return stop.value

    def _stream(self, op: Op[None]) -> Iterator[CheckpointRecord]:
        reply: Any = None
        while True:
            try:
                request = op.send(reply)
            except StopIteration:
                return
            if isinstance(request, Emit):
                reply = None
                yield request.record
            else:
                reply = self._execute(request)

    async def _astream(self, op: Op[None]) -> AsyncIterator[CheckpointRecord]:
        reply: Any = None
        while True:
            try:
                request = op.send(reply)
            except StopIteration:
                return
            if isinstance(request, Emit):
                reply = None
                yield request.record
            else:
                reply = await self._aexecute(request)

    # -- public API: sync ------------------------------------------------------------------

    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        return self._run(self._ops.get(thread_id, checkpoint_ns, checkpoint_id))

    def list(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointRecord]:
        return self._stream(self._ops.list(thread_id, checkpoint_ns, filter, before, limit))

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        self._run(self._ops.put(record, fork))

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        self._run(self._ops.put_writes(thread_id, checkpoint_ns, checkpoint_id, writes))

    def delete_thread(self, thread_id: str) -> None:
        self._run(self._ops.delete(thread_id))

    def list_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        return self._run(self._ops.list_threads(status, limit))

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        return self._run(self._ops.prune(thread_id, keep_last))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._run(self._ops.copy(source_thread_id, target_thread_id))

    # -- public API: async -----------------------------------------------------------------

    async def aget_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        return await self._arun(self._ops.get(thread_id, checkpoint_ns, checkpoint_id))

    async def alist(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointRecord]:
        op = self._ops.list(thread_id, checkpoint_ns, filter, before, limit)
        async for record in self._astream(op):
            yield record

    async def aput(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        await self._arun(self._ops.put(record, fork))

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        await self._arun(self._ops.put_writes(thread_id, checkpoint_ns, checkpoint_id, writes))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(self._ops.delete(thread_id))

    async def alist_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        return await self._arun(self._ops.list_threads(status, limit))

    async def aprune(self, thread_id: str, *, keep_last: int) -> int:
        return await self._arun(self._ops.prune(thread_id, keep_last))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(self._ops.copy(source_thread_id, target_thread_id))


def _version(found: bytes | None) -> int:
    """The stored layout version (-1 if unreadable)."""
    try:
        return int(found) if found is not None else SCHEMA_VERSION
    except ValueError:
        return -1
