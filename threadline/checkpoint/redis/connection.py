"""The Redis saver's clients, the requests its operations yield, and their sending.

The backend's operations (``backend.py``, ``keys.blob_heads``) are generators: they yield a
request, receive its reply and go on, so one piece of code serves ``put`` and ``aput`` alike;
``Connection.run`` and ``arun`` send what they yield. This module is the only one that touches
a redis-py client.

Clients come from a URL (one sync pool, and an async client per event loop, made on first use)
or are the program's own (``redis_client=``). On clients made from a URL redis-py's automatic
retries are off: a request whose connection broke is sent again here (up to three times), a
``put`` flagged as resent (``Eval``). A client the program gives keeps its own settings and
stays open when the saver closes (langgraph-redis does the same); with redis-py's retries on, a
``put`` that ran before its connection broke can then be sent again unflagged and fail with
``ConcurrentUpdateError``. A given sync ``redis.Redis`` serves the ``a*`` methods through a
worker thread; a given ``redis.asyncio.Redis`` (``AsyncRedisSaver`` only) belongs to the event
loop the saver was made in (its ``home``), where sync calls are sent from other threads
(``loopbound.run_on``). Redis Cluster clients are refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.retry import Retry as SyncRetry

from threadline.checkpoint.loopbound import run_on
from threadline.checkpoint.redis.scripts import SCRIPTS, SHAS
from threadline.errors import ConfigError, SaverUnavailableError


@dataclass(frozen=True, slots=True)
class Call:
    """One Redis command, by redis-py method name."""

    method: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Eval:
    """A script call. After a lost connection it is sent again with ``resend`` args (if any)
    unless ``once``: a script that cannot tell its own earlier run from someone else's."""

    script: str
    keys: Sequence[str]
    args: Sequence[Any]
    resend: Sequence[Any] | None = None
    once: bool = False


@dataclass(frozen=True, slots=True)
class Pipe:
    """Several calls sent together (one round trip, no transaction)."""

    calls: Sequence[Call | Eval]


Request = Call | Eval | Pipe
T = TypeVar("T")
P = ParamSpec("P")
Op = Generator[Any, Any, T]
"""An operation: yields requests, receives replies, returns its result."""

LOAD = Pipe([Call("script_load", (source,)) for source in SCRIPTS.values()])
_ATTEMPTS = 3  # sends of a request whose connection broke
_BACKOFF = 0.05  # seconds before the second send, doubled before the third
_LOST = (RedisConnectionError, RedisTimeoutError, OSError)


def one(request: Request) -> Op[Any]:
    """An operation of a single request."""
    return (yield request)


def runs(op: Callable[Concatenate[Any, P], Op[T]]) -> Callable[Concatenate[Any, P], T]:
    """A method written as the operation ``op``, run by its object's ``conn``."""

    def method(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.conn.run(op(self, *args, **kwargs))  # type: ignore[no-any-return]

    return method


def send(client: redis.Redis, request: Request) -> Any:
    """Every request goes to a client through ``send`` or ``asend``, and nothing else does."""
    return _send(client, request)


async def asend(client: aredis.Redis, request: Request) -> Any:
    return await _send(client, request)


def _send(client: Any, request: Request) -> Any:
    """The reply to ``request`` on a sync client (or pipeline), its awaitable on an async one."""
    if isinstance(request, Call):
        return getattr(client, request.method)(*request.args, **request.kwargs)
    if isinstance(request, Eval):
        return client.evalsha(SHAS[request.script], len(request.keys), *request.keys, *request.args)
    pipe = client.pipeline(transaction=False)
    for call in request.calls:
        _send(pipe, call)  # queued
    return pipe.execute()


def text(value: Any) -> str:
    """A reply as ``str`` (redis-py returns bytes)."""
    return value.decode() if isinstance(value, bytes) else str(value)


class Connection:
    """The clients of one saver (``name`` in messages) and the running of its operations.

    ``setup`` is the operation a given async client runs before its first request (a saver
    with a sync client runs it when it is made)."""

    def __init__(
        self,
        name: str,
        redis_url: str | None,
        redis_client: Any,
        connection_args: Mapping[str, Any] | None,
        setup: Callable[[], Op[None]],
    ) -> None:
        self.name = name
        self.setup = setup
        self.given = redis_client
        self.url = _url(name, redis_url, redis_client, connection_args)
        self.where = mask_url(self.url) if self.url else _where(redis_client)
        self.options = {"socket_connect_timeout": 10.0, "socket_timeout": 60.0}
        self.options.update(connection_args or {})
        self.lock = threading.Lock()
        self.closed = False
        self.aclients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, aredis.Redis] = (
            weakref.WeakKeyDictionary()
        )
        self.home: asyncio.AbstractEventLoop | None = None
        self.client: redis.Redis | None = None
        if self.url is not None:
            try:
                self.client = redis.Redis.from_url(self.url, **self._options(SyncRetry))
            except (ValueError, RedisError) as exc:
                raise SaverUnavailableError(f"invalid Redis URL {self.where}: {exc}") from exc
        elif isinstance(redis_client, redis.Redis):
            self.client = redis_client
        else:
            try:
                self.home = asyncio.get_running_loop()
            except RuntimeError:
                raise ConfigError(
                    f"{name} over a redis.asyncio client must be made inside the event loop "
                    "that client belongs to (in an async function)"
                ) from None
        self.ready = self.client is not None  # setup ran (an async client's runs on first use)

    def _options(self, retry: type[SyncRetry] | type[AsyncRetry]) -> dict[str, Any]:
        return {"retry": retry(NoBackoff(), 0), **self.options}

    def _closed(self) -> SaverUnavailableError:
        return SaverUnavailableError(f"{self.name}({self.where!r}, closed) is closed")

    def unavailable(self, exc: BaseException) -> SaverUnavailableError:
        if isinstance(exc, _LOST):
            return SaverUnavailableError(f"cannot reach Redis at {self.where}: {exc}")
        return SaverUnavailableError(f"Redis at {self.where}: {exc}")

    # -- running operations --------------------------------------------------------------------

    def can_block(self) -> bool:
        """Whether ``run`` may wait here (not on the home loop of a given async client)."""
        try:
            return asyncio.get_running_loop() is not self.home
        except RuntimeError:
            return True

    def run(self, op: Op[T]) -> T:
        if self.client is None:
            assert self.home is not None
            return run_on(self.home, self.arun(op), self.name)
        if self.closed:
            raise self._closed()
        client = self.client

        async def sent(request: Request) -> Any:
            return send(client, request)

        async def pause(seconds: float) -> None:
            time.sleep(seconds)

        coro = self._run(op, sent, pause)
        try:
            coro.send(None)  # the awaits above are sync calls: it ends without suspending
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        raise AssertionError("a sync operation suspended")

    async def arun(self, op: Op[T]) -> T:
        if not self.ready:
            await self.asetup()
        client = self._aclient()
        if client is None:  # only a sync client of the program's
            return await asyncio.to_thread(self.run, op)

        async def sent(request: Request) -> Any:
            return await asend(client, request)

        return await self._run(op, sent, asyncio.sleep)

    async def _run(
        self,
        op: Op[T],
        sent: Callable[[Request], Awaitable[Any]],
        pause: Callable[[float], Awaitable[None]],
    ) -> T:
        """Send what ``op`` yields, written once for ``run`` and ``arun``: the scripts again if
        the server lost them (a restart, ``SCRIPT FLUSH``), and after a broken connection a
        pause and the request again as ``Eval`` says, up to three sends."""
        reply: Any = None
        while True:
            try:
                request = op.send(reply)
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            for attempt in range(_ATTEMPTS):
                try:
                    try:
                        reply = await sent(request)
                    except NoScriptError:
                        await sent(LOAD)
                        reply = await sent(request)
                    break
                except _LOST as exc:
                    once = isinstance(request, Eval) and request.once
                    if once or attempt + 1 == _ATTEMPTS:
                        raise self.unavailable(exc) from exc
                    if isinstance(request, Eval) and request.resend is not None:
                        request = dataclasses.replace(request, args=request.resend)
                    await pause(_BACKOFF * 2**attempt)

    def setup_now(self) -> None:
        try:
            self.run(self.setup())
        except RedisError as exc:
            raise self.unavailable(exc) from exc

    async def asetup(self) -> None:
        self.ready = True  # the setup's own requests must not start another one
        try:
            await self.arun(self.setup())
        except BaseException as exc:
            self.ready = False
            if isinstance(exc, RedisError):
                raise self.unavailable(exc) from exc
            raise

    def _aclient(self) -> aredis.Redis | None:
        """The async client of the running loop (made from the URL on first use); ``None``
        when the program gave a sync client."""
        loop = asyncio.get_running_loop()
        with self.lock:
            if self.closed:
                raise self._closed()
            if self.url is None:
                return self.given if self.client is None else None
            client = self.aclients.get(loop)
            if client is None:
                options = self._options(AsyncRetry)
                client = self.aclients[loop] = aredis.Redis.from_url(self.url, **options)
            return client

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the clients made from the URL (not a client of the program's); idempotent."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            aclients = list(self.aclients.items())
            self.aclients.clear()
        if self.url is not None:
            assert self.client is not None
            self.client.close()
        for loop, client in aclients:
            if loop.is_running():
                asyncio.run_coroutine_threadsafe(client.aclose(), loop)
            elif not loop.is_closed():
                loop.run_until_complete(client.aclose())

    async def aclose(self) -> None:
        """Close, awaiting the async client of the running loop."""
        with self.lock:
            client = self.aclients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.aclose()
        self.close()


def _url(
    saver: str, redis_url: str | None, redis_client: Any, connection_args: Mapping[str, Any] | None
) -> str | None:
    """The URL to make clients from (``REDIS_URL`` when given nothing), ``None`` for a client
    of the program's, after checking what the saver was given."""
    if redis_client is None:
        url = redis_url or os.environ.get("REDIS_URL")
        if not url:
            raise ConfigError(f"{saver} needs a redis_url, a redis_client or REDIS_URL set")
        return url
    if redis_url is not None or connection_args:
        raise ConfigError(
            f"{saver} takes either a redis_url (with connection_args) or a redis_client, not both"
        )
    if isinstance(redis_client, aredis.Redis) and saver == "RedisSaver":
        raise ConfigError(
            "RedisSaver was given a redis.asyncio client: use AsyncRedisSaver (from "
            "threadline.checkpoint.redis.aio) for one, or give a redis.Redis"
        )
    if not isinstance(redis_client, redis.Redis | aredis.Redis):
        raise ConfigError(
            f"{saver} takes a redis.Redis or redis.asyncio.Redis client, not "
            f"{type(redis_client).__name__} (Redis Cluster is not supported)"
        )
    return None


def _where(client: Any) -> str:
    """Where a client points (host, port, db), without its password."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}?db={kwargs.get('db', 0)}"
    host, port = kwargs.get("host", "localhost"), kwargs.get("port", 6379)
    return f"redis://{host}:{port}/{kwargs.get('db', 0)}"


def mask_url(url: str) -> str:
    """``url`` with its password (in the user part or the query) replaced by ``***``."""
    masked = re.sub(r"(://[^:/?#@]*:)[^/?#]*@", r"\1***@", url)
    return re.sub(r"([?&]password=)[^&#]*", r"\1***", masked, flags=re.IGNORECASE)
