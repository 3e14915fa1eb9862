"""The Redis saver's clients: made from a URL, or the program's own (``redis_client=``).

Clients the saver makes from a URL have redis-py's automatic retries turned off: a ``put`` whose
reply was lost must be sent again flagged as resent, so the saver retries itself. A client the
program gives keeps its own settings and stays open when the saver closes (langgraph-redis
does the same); with redis-py's retries on, a ``put`` that actually ran before its connection
broke can then be sent again unflagged and fail with ``ConcurrentUpdateError``. A sync
``redis.Redis`` serves the saver's ``a*`` methods through a worker thread; an async
``redis.asyncio.Redis`` (``AsyncRedisSaver`` only) belongs to its event loop, where sync calls
are sent from other threads (``loopbound.py``). Redis Cluster clients are refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
import redis.asyncio as aredis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError

from threadline.errors import ConfigError, SaverUnavailableError


@dataclass
class Clients:
    """Where a saver's clients come from: ``url`` (its own) or ``given`` (the program's)."""

    url: str | None
    where: str  # for messages and repr, without a password
    given: Any = None
    connection_args: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        saver: str,
        redis_url: str | None,
        redis_client: Any,
        connection_args: Mapping[str, Any] | None,
    ) -> Clients:
        """Check what the saver was given; ``REDIS_URL`` when it was given nothing."""
        if redis_client is None:
            url = redis_url or os.environ.get("REDIS_URL")
            if not url:
                raise ConfigError(f"{saver} needs a redis_url, a redis_client or REDIS_URL set")
            return cls(url, mask_url(url), connection_args=dict(connection_args or {}))
        if redis_url is not None or connection_args:
            raise ConfigError(
                f"{saver} takes either a redis_url (with connection_args) or a redis_client, "
                "not both"
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
        return cls(None, describe(redis_client), given=redis_client)

    def options(self, retry: Any) -> dict[str, Any]:
        """Keyword arguments for a client made from the URL."""
        return {
            "socket_connect_timeout": 10.0,
            "socket_timeout": 60.0,
            "retry": retry(NoBackoff(), 0),
            **self.connection_args,
        }

    def sync_client(self, retry: Any) -> redis.Redis | None:
        """The client of the sync methods; ``None`` for an async one given."""
        if self.url is None:
            return self.given if isinstance(self.given, redis.Redis) else None
        try:
            return redis.Redis.from_url(self.url, **self.options(retry))
        except (ValueError, RedisError) as exc:
            raise SaverUnavailableError(f"invalid Redis URL {self.where}: {exc}") from exc

    def new_async_client(self, retry: Any) -> aredis.Redis | None:
        """An async client for the running loop: the given one, a new one from the URL, or
        ``None`` when only a sync client was given (its calls then go through a thread)."""
        if self.url is None:
            return self.given if isinstance(self.given, aredis.Redis) else None
        return aredis.Redis.from_url(self.url, **self.options(retry))

    def close(self, client: redis.Redis) -> None:
        if client is not self.given:
            client.close()


def describe(client: Any) -> str:
    """Where a client points (host, port, db), without its password."""
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return f"unix://{kwargs['path']}?db={kwargs.get('db', 0)}"
    host, port = kwargs.get("host", "localhost"), kwargs.get("port", 6379)
    return f"redis://{host}:{port}/{kwargs.get('db', 0)}"


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
