"""The ``store`` fixture the conformance tests (``test_store_*``) run every ``BaseStore`` backend
with.

To cover a new backend, write a factory (a context manager taking the fake clock and a temp dir
and yielding a store built with ``clock=clock``) and add one line to ``STORE_FACTORIES``.
Factories for services (PostgreSQL, Redis) live in ``store_backends``: each test gets its own
schema or key prefix, removed afterwards, and is skipped (failed under ``CI=true``) when the
service is down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from store_backends import FakeClock, postgres_store, redis_store, sqlite_store

from threadline.store import BaseStore, InMemoryStore, Item


@contextmanager
def memory_store(clock: FakeClock, tmp_path: Path) -> Iterator[BaseStore]:
    yield InMemoryStore(clock=clock)


StoreFactory = Callable[[FakeClock, Path], AbstractContextManager[BaseStore]]


STORE_FACTORIES: list[object] = [
    pytest.param(memory_store, id="memory"),
    pytest.param(sqlite_store, id="sqlite"),
    pytest.param(postgres_store, id="postgres"),
    pytest.param(redis_store, id="redis"),
]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=STORE_FACTORIES)
def store(request: pytest.FixtureRequest, clock: FakeClock, tmp_path: Path) -> Iterator[BaseStore]:
    factory: StoreFactory = request.param
    with factory(clock, tmp_path) as s:
        yield s


def keys(items: list[Item]) -> list[str]:
    return [item.key for item in items]


def by_backend(store: BaseStore, *, durable: list[object], memory: list[object]) -> list[object]:
    """The search order LangGraph gives on this kind of store: ``InMemoryStore`` keeps insertion
    order; the durable stores put the newest update first (ties: namespace text, then key)."""
    return memory if isinstance(store, InMemoryStore) else durable


@pytest.fixture
def people(store: BaseStore, clock: FakeClock) -> BaseStore:
    rows = {
        "ann": {"age": 17, "name": "ann", "admin": False, "tags": ["a"]},
        "bob": {"age": 18, "name": "bob", "admin": True},
        "cy": {"age": 30.5, "name": "cy", "admin": True, "tags": ["a", "b"]},
        "dee": {"name": "dee", "age": None},
        "eve": {"age": "40", "name": "eve"},  # a string: never in numeric ranges
        "one": {"age": 1, "admin": 1},  # 1 is not True in JSON
    }
    for key, value in rows.items():
        store.put(("people",), key, value)
        clock.advance(1)
    return store


def found(store: BaseStore, filter: dict[str, object]) -> list[str]:
    return sorted(keys(store.search(("people",), filter=filter)))
