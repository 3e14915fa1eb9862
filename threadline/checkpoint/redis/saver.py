"""``RedisSaver``: ``core.CoreSaver`` over a ``RedisBackend``, its clients and its setup."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Self

import redis
import redis.asyncio as aredis

from threadline.checkpoint.base import Retention
from threadline.checkpoint.core import CoreSaver
from threadline.checkpoint.formats import migrations_from
from threadline.checkpoint.redis.backend import RedisBackend
from threadline.checkpoint.redis.connection import LOAD, Call, Connection, Op, text
from threadline.checkpoint.redis.keys import SCHEMA_VERSION
from threadline.errors import ConfigError, SaverUnavailableError
from threadline.serde import DEFAULT, Serializer

#: ``MIGRATIONS[n]`` rewrites the data under a prefix from layout ``n`` to ``n + 1`` (see
#: ``formats``; none yet: layout 1, with text creation times and the loop's metadata as bytes,
#: is refused), before the version key is moved.
MIGRATIONS: dict[int, Callable[[str], Op[Any]]] = {}


class RedisSaver(CoreSaver):
    """Checkpoints in Redis (standalone, no modules needed), safe to share between processes.

    Give it a URL (or set ``REDIS_URL``), or, as langgraph-redis accepts, ``redis_client=`` a
    ``redis.Redis`` of yours (kept open when the saver closes; its own retry settings then
    apply, see ``connection.py``). ``connection_args`` go to the clients made from the URL.
    ``prefix`` starts every key name (use one per application or test run); ``ttl`` (seconds,
    or langgraph-redis's ``{"default_ttl": minutes}``) makes a thread expire that long after
    its last write; ``retention`` prunes old checkpoints on save. Sync methods use one
    ``redis.Redis`` connection pool; the ``a*`` methods use a ``redis.asyncio.Redis`` client
    per event loop, created on first use. Once closed, calls raise ``SaverUnavailableError``.

        with RedisSaver.from_conn_string("redis://localhost:6379/0", ttl=7 * 86400) as saver:
            graph = builder.compile(checkpointer=saver)
    """

    backend: RedisBackend

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
        self.prefix = prefix
        self.ttl = ttl_seconds(ttl)
        name = type(self).__name__
        conn = Connection(name, redis_url, redis_client, connection_args, self._setup_op)
        self.url = conn.url
        ttl_ms = round(self.ttl * 1000) if self.ttl is not None else 0
        codec = serde or DEFAULT
        backend = RedisBackend(conn, prefix, ttl_ms, codec)
        super().__init__(backend, retention=retention, serde=codec)
        if conn.ready:
            try:
                conn.setup_now()
            except BaseException:
                conn.close()
                raise

    @property
    def _client(self) -> redis.Redis | None:
        return self.backend.conn.client

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
        self.backend.conn.setup_now()

    async def asetup(self) -> None:
        await self.backend.conn.asetup()

    def _setup_op(self) -> Op[None]:
        key = f"{self.prefix}:schema_version"
        where = self.backend.conn.where
        yield Call("set", (key, SCHEMA_VERSION), {"nx": True})
        found = yield Call("get", (key,))
        try:
            version = int(found) if found is not None else SCHEMA_VERSION
        except ValueError:
            version = -1  # unreadable: refused below
        if version > SCHEMA_VERSION or version < 0:
            raise SaverUnavailableError(
                f"Redis at {where} holds threadline data under prefix {self.prefix!r} with "
                f"layout version {text(found)}, which this threadline does not understand (it "
                f"reads version {SCHEMA_VERSION}); upgrade threadline"
            )
        steps = migrations_from(
            version, SCHEMA_VERSION, MIGRATIONS, f"Redis at {where} (prefix {self.prefix!r})"
        )
        for migrate in steps:
            yield from migrate(self.prefix)
        if steps:
            yield Call("set", (key, SCHEMA_VERSION))
        yield LOAD

    async def aclose(self) -> None:
        """Close the saver, awaiting the async client of the running loop."""
        await self.backend.conn.aclose()
        self.close()

    def __repr__(self) -> str:
        conn = self.backend.conn
        state = "closed" if conn.closed else "open"
        return f"{type(self).__name__}({conn.where!r}, prefix={self.prefix!r}, {state})"


def ttl_seconds(ttl: Any) -> float | None:
    """``ttl`` in seconds: a number of seconds, or langgraph-redis's ``{"default_ttl":
    minutes}``. Refreshing on reads (``refresh_on_read``) is not offered: a thread's TTL
    restarts at each write."""
    if isinstance(ttl, Mapping):
        unknown = sorted(set(ttl) - {"default_ttl", "refresh_on_read"})
        if unknown or ttl.get("refresh_on_read"):
            raise ConfigError(
                f"RedisSaver ttl={dict(ttl)!r}: only 'default_ttl' (minutes) is supported; a "
                "thread's TTL restarts at each write to it, not at reads"
            )
        minutes = ttl.get("default_ttl")
        ttl = None if minutes is None else minutes * 60
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float) or ttl <= 0):
        raise ValueError(f"RedisSaver ttl must be positive seconds, got {ttl!r}")
    return ttl
