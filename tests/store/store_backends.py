"""Factories for the persistent stores, each giving a test its own private corner of a backend.

* SQLite: a fresh file in the test's ``tmp_path``.
* PostgreSQL: a fresh schema ``threadline_test_<random>``, dropped (``CASCADE``) afterwards.
* Redis: a fresh key prefix ``threadline-test:<random>:``, whose keys are deleted afterwards.

So reruns and parallel CI jobs sharing one server never see each other's data. Each factory is a
context manager taking ``(clock, tmp_path)`` plus options for the store, as the conformance suite
expects.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services import require_postgres, require_redis

from threadline.store import InMemoryStore, SearchItem, SqliteStore

if TYPE_CHECKING:  # the drivers are optional: imported once the service is known to be there
    from threadline.store import PostgresStore, RedisStore

Clock = Callable[[], datetime]

T0 = datetime(2030, 1, 1, tzinfo=UTC)


class FakeClock:
    """A clock that only moves when told to, so TTL tests neither sleep nor flake."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def durable_search(memory: InMemoryStore, prefix: tuple[str, ...], **options: Any) -> list[Any]:
    """``memory.search`` re-ordered as the durable stores order results: the oracle for them.

    ``InMemoryStore`` keeps LangGraph's insertion order; SQLite, PostgreSQL and Redis put the
    newest ``updated_at`` first, ties broken by namespace text (labels joined with ".") then key.
    """
    limit, offset = options.pop("limit", 10), options.pop("offset", 0)
    items: list[SearchItem] = memory.search(prefix, limit=10**9, **options)
    items.sort(key=lambda it: (".".join(it.namespace), it.key))
    items.sort(key=lambda it: it.updated_at, reverse=True)  # stable: keeps the tie order
    return items[offset : offset + limit]


def unique_name(stem: str) -> str:
    return f"{stem}_{uuid.uuid4().hex[:16]}"


@contextmanager
def sqlite_store(clock: Clock, tmp_path: Path, **options: Any) -> Iterator[SqliteStore]:
    with SqliteStore(tmp_path / "store.db", clock=clock, **options) as store:
        yield store


@contextmanager
def postgres_schema() -> Iterator[tuple[str, str]]:
    """``(url, schema)`` for a schema nobody else uses; dropped with everything in it after."""
    url = require_postgres()  # skips (or fails under CI) before the driver is imported
    import psycopg
    from psycopg import sql

    schema = unique_name("threadline_test")
    try:
        yield url, schema
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def postgres_store(clock: Clock, tmp_path: Path, **options: Any) -> Iterator[PostgresStore]:
    with postgres_schema() as (url, schema):
        from threadline.store import PostgresStore

        store = PostgresStore(url, schema=schema, clock=clock, **options)
        try:
            yield store
        finally:
            store.close()


@contextmanager
def redis_prefix() -> Iterator[tuple[str, str]]:
    """``(url, key_prefix)`` for a prefix nobody else uses; its keys are deleted after."""
    url = require_redis()
    import redis

    prefix = f"{unique_name('threadline-test')}:"
    try:
        yield url, prefix
    finally:
        client = redis.Redis.from_url(url)
        try:
            delete_keys(client, prefix)
        finally:
            client.close()


def delete_keys(client: Any, prefix: str) -> int:
    """Delete every key starting with ``prefix`` (which holds no glob characters)."""
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start : start + 500])
    return len(keys)


@contextmanager
def redis_store(clock: Clock, tmp_path: Path, **options: Any) -> Iterator[RedisStore]:
    with redis_prefix() as (url, prefix):
        from threadline.store import RedisStore

        store = RedisStore(url, key_prefix=prefix, clock=clock, **options)
        try:
            yield store
        finally:
            store.close()


DURABLE_FACTORIES = {"sqlite": sqlite_store, "postgres": postgres_store, "redis": redis_store}


@contextmanager
def store_location(kind: str, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """A private place in one backend, and a function opening stores on it (closed after).

    Every store opened on the location sees the same data: use it for reopening and for several
    stores (processes, in real life) sharing one database.
    """
    opened: list[Any] = []

    def track(store: Any) -> Any:
        opened.append(store)
        return store

    try:
        if kind == "sqlite":
            path = tmp_path / "shared.db"
            yield lambda **options: track(SqliteStore(path, **options))
        elif kind == "postgres":
            with postgres_schema() as (url, schema):
                from threadline.store import PostgresStore

                try:
                    yield lambda **options: track(PostgresStore(url, schema=schema, **options))
                finally:
                    _close_all(opened)
        elif kind == "redis":
            with redis_prefix() as (url, prefix):
                from threadline.store import RedisStore

                try:
                    yield lambda **options: track(RedisStore(url, key_prefix=prefix, **options))
                finally:
                    _close_all(opened)
        else:
            raise ValueError(f"unknown store kind {kind!r}")
    finally:
        _close_all(opened)


def _close_all(stores: list[Any]) -> None:
    while stores:
        stores.pop().close()
