"""Behaviour every store backend shares: bad arguments named, async twins, concurrent writers,
clocks and read-refresh defaults.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from store_backends import FakeClock
from store_suite import (
    by_backend,
    clock,
    keys,
    store,
)

from threadline.store import BaseStore, InMemoryStore

__all__ = ["clock", "store"]  # fixtures used here


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ((), "must not be empty"),
        (["a"], "must be a tuple"),
        ("a", "must be a tuple"),
        (("a", ""), "non-empty strings"),
        (("a", 1), "non-empty strings"),
        (("a.b",), "must not contain '.'"),
    ],
)
def test_bad_namespace(store: BaseStore, namespace: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        store.put(namespace, "k", {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        store.get(namespace, "k")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message):
        store.delete(namespace, "k")  # type: ignore[arg-type]


def test_bad_key_value_ttl(store: BaseStore) -> None:
    with pytest.raises(ValueError, match="key must be a str"):
        store.put(("ns",), 1, {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="key must be a str"):
        store.get(("ns",), None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="value must be a dict"):
        store.put(("ns",), "k", [1, 2])  # type: ignore[arg-type]
    for ttl in [0, -1, float("inf"), float("nan"), True, "10"]:
        with pytest.raises(ValueError, match="ttl must be"):
            store.put(("ns",), "k", {}, ttl=ttl)  # type: ignore[arg-type]
    assert store.get(("ns",), "k") is None  # nothing was written


def test_bad_search_and_list_arguments(store: BaseStore) -> None:
    with pytest.raises(ValueError, match="limit"):
        store.search(("ns",), limit=-1)
    with pytest.raises(ValueError, match="offset"):
        store.search(("ns",), offset=-1)
    with pytest.raises(ValueError, match="namespace_prefix"):
        store.search(("a.b",))
    with pytest.raises(ValueError, match="filter must be a dict"):
        store.search(("ns",), filter=[("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        store.list_namespaces(limit=-1)
    with pytest.raises(ValueError, match="offset"):
        store.list_namespaces(offset=-5)
    with pytest.raises(ValueError, match="max_depth"):
        store.list_namespaces(max_depth=0)
    with pytest.raises(ValueError, match="prefix"):
        store.list_namespaces(prefix=("",))
    with pytest.raises(ValueError, match="suffix"):
        store.list_namespaces(suffix="c")  # type: ignore[arg-type]


# -- async twins --------------------------------------------------------------------------------


async def test_async_twins(store: BaseStore, clock: FakeClock) -> None:
    await store.aput(("a", "b"), "k1", {"n": 1})
    clock.advance(1)
    await store.aput(("a", "c"), "k2", {"n": 2}, ttl=5)
    item = await store.aget(("a", "b"), "k1")
    assert item is not None and item.value == {"n": 1}
    order = by_backend(store, durable=["k2", "k1"], memory=["k1", "k2"])
    assert keys(await store.asearch(("a",))) == order
    assert keys(await store.asearch(("a",), filter={"n": {"$gt": 1}})) == ["k2"]
    assert keys(await store.asearch(("a",), limit=1, offset=1)) == order[1:]
    assert await store.alist_namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "c")]
    clock.advance(5)
    assert await store.aget(("a", "c"), "k2") is None
    await store.adelete(("a", "b"), "k1")
    assert await store.aget(("a", "b"), "k1") is None
    assert await store.alist_namespaces() == []
    with pytest.raises(ValueError, match="must not be empty"):
        await store.aput((), "k", {})
    with pytest.raises(ValueError, match=r"\$in"):
        await store.asearch(("a",), filter={"n": {"$in": [1]}})


# -- concurrency --------------------------------------------------------------------------------


def test_concurrent_writers(store: BaseStore) -> None:
    def write(worker: int) -> None:
        for i in range(50):
            store.put(("w", str(worker)), str(i), {"i": i})
            store.get(("w", str(worker)), str(i))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.list_namespaces(prefix=("w",))) == 8
    assert len(store.search(("w",), limit=1000)) == 400


# -- InMemoryStore specifics --------------------------------------------------------------------


def test_default_clock_is_utc() -> None:
    store = InMemoryStore()
    before = datetime.now(UTC)
    store.put(("ns",), "k", {})
    item = store.get(("ns",), "k")
    assert item is not None
    assert before <= item.created_at <= datetime.now(UTC)
    assert item.created_at.utcoffset() == timedelta(0)


def test_naive_clock_is_rejected() -> None:
    store = InMemoryStore(clock=lambda: datetime(2030, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        store.put(("ns",), "k", {})


def test_refresh_on_read_can_default_off(clock: FakeClock) -> None:
    store = InMemoryStore(clock=clock, refresh_on_read=False)
    store.put(("t",), "k", {}, ttl=10)
    clock.advance(8)
    assert store.get(("t",), "k") is not None
    clock.advance(2)
    assert store.get(("t",), "k") is None


async def test_base_async_default_runs_in_a_worker_thread(clock: FakeClock) -> None:
    """The inherited ``_call`` (used by I/O-bound backends) works and propagates errors."""
    seen: list[int] = []

    class ThreadedStore(InMemoryStore):
        _call = BaseStore._call

        def _put(self, *args: object) -> None:  # type: ignore[override]
            seen.append(threading.get_ident())
            super()._put(*args)  # type: ignore[arg-type]

    store = ThreadedStore(clock=clock)
    await store.aput(("ns",), "k", {"v": 1})
    assert seen and seen[0] != threading.get_ident()
    item = await store.aget(("ns",), "k")
    assert item is not None and item.value == {"v": 1}
    with pytest.raises(ValueError, match="must not be empty"):
        await store.aput((), "k", {})
