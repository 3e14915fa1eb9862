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
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
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
from threadline.checkpoint.redis import requests as wire
from threadline.checkpoint.redis.keys import SCHEMA_VERSION
from threadline.checkpoint.redis.migration import migrate_v1
from threadline.checkpoint.redis.operations import Operations
from threadline.checkpoint.redis.requests import Call, Emit, Load, Op, Request, T, text
from threadline.errors import SaverUnavailableError
from threadline.serde import DEFAULT, Serializer

_SEND_ATTEMPTS = 3  # a request whose connection broke is sent again (idempotent ones only)
_SEND_BACKOFF = 0.05  # seconds, doubled after each failure


class RedisSaver(BaseSaver):
    """Checkpoints in Redis (standalone, no modules needed), safe to share between processes.

    ``prefix`` starts every key name (use one per application or test run); ``ttl`` (seconds)
    makes a thread expire that long after its last write; ``retention`` prunes old checkpoints
    on save. Sync methods use one ``redis.Redis`` connection pool; the ``a*`` methods use a
    ``redis.asyncio.Redis`` client per event loop, created on first use.

        with RedisSaver("redis://localhost:6379/0", ttl=7 * 86400) as saver:
            graph = builder.compile(checkpointer=saver)
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "threadline",
        ttl: float | None = None,
        retention: Retention | None = None,
        serde: Serializer | None = None,
    ) -> None:
        if not prefix or any(c in prefix for c in "{}"):
            raise ValueError(f"RedisSaver prefix must be non-empty, without braces: {prefix!r}")
        if ttl is not None and ttl <= 0:
            raise ValueError(f"RedisSaver ttl must be positive seconds, got {ttl!r}")
        self.url = url
        self.prefix = prefix
        self.ttl = ttl
        ttl_ms = round(ttl * 1000) if ttl is not None else 0
        self._ops = Operations(prefix, ttl_ms, retention, serde or DEFAULT)
        self._lock = threading.Lock()
        self._closed = False
        self._aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aredis.Redis] = (
            weakref.WeakKeyDictionary()
        )
        try:
            self._client: redis.Redis = redis.Redis.from_url(url, **self._client_options(SyncRetry))
        except (ValueError, RedisError) as exc:
            raise SaverUnavailableError(f"invalid Redis URL {mask_url(url)}: {exc}") from exc
        try:
            self._setup()
        except BaseException:
            self._client.close()
            raise

    @property
    def retention(self) -> Retention | None:
        return self._ops.retention

    @property
    def serde(self) -> Serializer:
        return self._ops.codec

    @classmethod
    def from_conn_string(cls, url: str, **options: Any) -> RedisSaver:
        """A saver on ``url``; use it as ``with RedisSaver.from_conn_string(url) as saver:``."""
        return cls(url, **options)

    @staticmethod
    def _client_options(retry: Any) -> dict[str, Any]:
        # redis-py's own retries are off: a put whose reply was lost must be sent again with
        # its "resent" flag, so the saver retries (``_execute``) instead.
        return {
            "socket_connect_timeout": 10.0,
            "socket_timeout": 60.0,
            "retry": retry(NoBackoff(), 0),
        }

    def _setup(self) -> None:
        """Check (or record) the layout version, migrate older data, and load the scripts."""
        key = f"{self.prefix}:schema_version"
        try:
            self._execute(Call("set", (key, SCHEMA_VERSION), {"nx": True}))
            found = self._execute(Call("get", (key,)))
            version = _version(found)
            if version in (1, 2):  # version 2 data is version 3 data: only the marker moves
                if version == 1:
                    self._run(migrate_v1(self.prefix))
                self._execute(Call("set", (key, SCHEMA_VERSION)))
                version = SCHEMA_VERSION
            self._execute(Load())
        except RedisError as exc:
            raise SaverUnavailableError(f"Redis at {mask_url(self.url)}: {exc}") from exc
        if version != SCHEMA_VERSION:
            raise SaverUnavailableError(
                f"Redis at {mask_url(self.url)} holds threadline data under prefix "
                f"{self.prefix!r} with layout version {text(found)}, which this threadline does "
                f"not understand (it reads version {SCHEMA_VERSION}); upgrade threadline"
            )

    def _unavailable(self, exc: BaseException) -> SaverUnavailableError:
        return SaverUnavailableError(f"cannot reach Redis at {mask_url(self.url)}: {exc}")

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pools; further calls raise ``SaverUnavailableError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            aclients = list(self._aclients.items())
            self._aclients.clear()
        self._client.close()
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
        return f"RedisSaver({mask_url(self.url)!r}, prefix={self.prefix!r}, {state})"

    # -- running requests ------------------------------------------------------------------

    def _execute(self, request: Request) -> Any:
        if self._closed:
            raise SaverUnavailableError(f"{self!r} is closed")
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
        client = self._aclient()
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

    def _aclient(self) -> aredis.Redis:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._closed:
                raise SaverUnavailableError(f"{self!r} is closed")
            client = self._aclients.get(loop)
            if client is None:
                client = aredis.Redis.from_url(self.url, **self._client_options(AsyncRetry))
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


def mask_url(url: str) -> str:
    """``url`` with its password (in the user part or the query) replaced by ``***``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, hostport = netloc.rpartition("@")
            if ":" in userinfo:
                netloc = f"{userinfo.split(':', 1)[0]}:***@{hostport}"
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            query = urlencode(
                [(k, "***" if k.lower() == "password" else v) for k, v in pairs], safe="*"
            )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return "<unparsable Redis URL>"
