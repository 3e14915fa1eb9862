"""Sending a Redis saver's requests: over its sync pool, or an async client per event loop.

Operations are generators of requests (``requests.py``), run here sync (``run``) or async
(``arun``). A request whose connection broke is sent again (up to three times; a ``put`` flagged
as resent, see ``requests.again``); scripts the server lost are loaded again. A saver given only
a ``redis.asyncio`` client of the program's runs sync operations on that client's event loop
(its ``home``), from other threads.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry as SyncRetry

from threadline.checkpoint.redis import requests as wire
from threadline.checkpoint.redis.clients import Clients
from threadline.checkpoint.redis.requests import Load, Op, Request, T
from threadline.errors import ConfigError, SaverUnavailableError

_SEND_ATTEMPTS = 3  # a request whose connection broke is sent again (idempotent ones only)
_SEND_BACKOFF = 0.05  # seconds, doubled after each failure


class Connection:
    """The clients of one saver (``name`` in messages) and the running of its operations.

    ``setup`` is the operation an async client given by the program runs before its first
    request (a saver made on a URL runs it when it is made)."""

    def __init__(self, name: str, clients: Clients, setup: Callable[[], Op[None]]) -> None:
        self.name = name
        self.clients = clients
        self.where = clients.where
        self.setup = setup
        self.lock = threading.Lock()
        self.closed = False
        self.aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aredis.Redis] = (
            weakref.WeakKeyDictionary()
        )
        self.client: redis.Redis | None = clients.sync_client(SyncRetry)
        self.ready = self.client is not None  # setup ran (an async client's runs on first use)
        self.home: asyncio.AbstractEventLoop | None = None  # the given async client's loop

    def describe(self) -> str:
        return f"{self.name}({self.where!r}, {'closed' if self.closed else 'open'})"

    def unavailable(self, exc: BaseException) -> SaverUnavailableError:
        if isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError):
            return SaverUnavailableError(f"cannot reach Redis at {self.where}: {exc}")
        return SaverUnavailableError(f"Redis at {self.where}: {exc}")

    # -- running operations --------------------------------------------------------------------

    def can_block(self) -> bool:
        """Whether ``run`` may be called here (not on the home loop of a given async client)."""
        return self.client is not None or (self.home is not None and not self._on_home())

    def run(self, op: Op[T]) -> T:
        if self.client is None:
            return self._via_home(self.arun(op))
        reply: Any = None
        try:
            while True:
                reply = self._execute(op.send(reply))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def arun(self, op: Op[T]) -> T:
        reply: Any = None
        try:
            while True:
                reply = await self._aexecute(op.send(reply))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    async def asetup(self) -> None:
        self.ready = True  # the setup's own requests must not start another one
        try:
            await self.arun(self.setup())
        except BaseException as exc:
            self.ready = False
            if isinstance(exc, RedisError):
                raise self.unavailable(exc) from exc
            raise

    def _on_home(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.home
        except RuntimeError:
            return False

    def _via_home(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the home loop from another thread (``loopbound.py`` for why)."""
        home = self.home
        if home is None or home.is_closed() or self._on_home():
            coro.close()
            raise ConfigError(
                f"{self.name} runs on an async client: from its event loop, use the async "
                "interface; sync calls are only possible from another thread"
            )
        return asyncio.run_coroutine_threadsafe(coro, home).result()

    def _execute(self, request: Request) -> Any:
        if self.closed:
            raise SaverUnavailableError(f"{self.describe()} is closed")
        assert self.client is not None
        for attempt in itertools.count():
            try:
                try:
                    return wire.send(self.client, request)
                except NoScriptError:  # the server lost its scripts (restart, SCRIPT FLUSH)
                    wire.send(self.client, Load())
                    return wire.send(self.client, request)
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                again = wire.again(request)
                if again is None or attempt + 1 >= _SEND_ATTEMPTS:
                    raise self.unavailable(exc) from exc
                request = again
                time.sleep(_SEND_BACKOFF * 2**attempt)
        raise AssertionError("unreachable")

    async def _aexecute(self, request: Request) -> Any:
        if not self.ready:
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
                    raise self.unavailable(exc) from exc
                request = again
                await asyncio.sleep(_SEND_BACKOFF * 2**attempt)
        raise AssertionError("unreachable")

    def _aclient(self) -> aredis.Redis | None:
        loop = asyncio.get_running_loop()
        with self.lock:
            if self.closed:
                raise SaverUnavailableError(f"{self.describe()} is closed")
            client = self.aclients.get(loop)
            if client is None:
                client = self.clients.new_async_client(AsyncRetry)
                if client is not None and self.clients.url is not None:  # ours: one per loop
                    self.aclients[loop] = client
            return client

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pools (not a client of the program's); idempotent."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            aclients = list(self.aclients.items())
            self.aclients.clear()
        if self.client is not None:
            self.clients.close(self.client)
        for loop, client in aclients:
            wire.close_async_client(loop, client)

    async def aclose(self) -> None:
        """Close, awaiting the async client of the running loop."""
        loop = asyncio.get_running_loop()
        with self.lock:
            client = self.aclients.pop(loop, None)
        if client is not None:
            await client.aclose()
        self.close()
