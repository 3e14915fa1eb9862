"""Behaviour every ``BaseStore`` backend must share.

To cover a new backend, write a factory (a context manager taking the fake clock and a temp dir
and yielding a store built with ``clock=clock``) and add one line to ``STORE_FACTORIES``.
Factories for services (PostgreSQL, Redis) live in ``store_backends``: each test gets its own
schema or key prefix, removed afterwards, and is skipped (failed under ``CI=true``) when the
service is down.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from store_backends import T0, FakeClock, postgres_store, redis_store, sqlite_store

from threadline.store import BaseStore, InMemoryStore, Item, SearchItem


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


# -- put / get / delete -------------------------------------------------------------------------


def test_put_then_get(store: BaseStore, clock: FakeClock) -> None:
    store.put(("users", "u1"), "profile", {"name": "Ada", "tags": ["x"]})
    item = store.get(("users", "u1"), "profile")
    assert item is not None
    assert item.value == {"name": "Ada", "tags": ["x"]}
    assert (item.namespace, item.key) == (("users", "u1"), "profile")
    assert item.created_at == item.updated_at == T0
    assert item.created_at.tzinfo is not None and item.created_at.utcoffset() == timedelta(0)
    assert item.expires_at is None


def test_overwrite_keeps_created_at_and_bumps_updated_at(
    store: BaseStore, clock: FakeClock
) -> None:
    store.put(("ns",), "k", {"v": 1})
    clock.advance(5)
    store.put(("ns",), "k", {"v": 2})
    item = store.get(("ns",), "k")
    assert item is not None
    assert item.value == {"v": 2}
    assert item.created_at == T0
    assert item.updated_at == T0 + timedelta(seconds=5)


def test_get_missing_returns_none(store: BaseStore) -> None:
    assert store.get(("nope",), "k") is None
    store.put(("ns",), "k", {})
    assert store.get(("ns",), "other") is None
    assert store.get(("ns", "deeper"), "k") is None


def test_delete(store: BaseStore) -> None:
    store.put(("ns",), "k", {"v": 1})
    store.put(("ns",), "keep", {"v": 2})
    store.delete(("ns",), "k")
    assert store.get(("ns",), "k") is None
    assert store.get(("ns",), "keep") is not None
    store.delete(("ns",), "k")  # deleting again is a no-op
    store.delete(("never",), "k")


def test_deleting_last_item_removes_namespace_from_listing(store: BaseStore) -> None:
    store.put(("a",), "k", {})
    store.put(("b",), "k", {})
    store.delete(("a",), "k")
    assert store.list_namespaces() == [("b",)]


def test_item_dict(store: BaseStore) -> None:
    store.put(("a", "b"), "k", {"v": 1}, ttl=60)
    item = store.get(("a", "b"), "k", refresh_ttl=False)
    assert item is not None
    assert item.dict() == {
        "namespace": ["a", "b"],
        "key": "k",
        "value": {"v": 1},
        "created_at": T0.isoformat(),
        "updated_at": T0.isoformat(),
        "expires_at": (T0 + timedelta(seconds=60)).isoformat(),
    }


def test_search_results_are_search_items_shaped_as_langgraph(store: BaseStore) -> None:
    store.put(("a", "b"), "k", {"v": 1})
    [found] = store.search(("a",))
    assert isinstance(found, SearchItem) and found.score is None
    assert found == store.get(("a", "b"), "k")  # equality ignores score, as in LangGraph
    assert found.dict() == {
        "namespace": ["a", "b"],
        "key": "k",
        "value": {"v": 1},
        "created_at": T0.isoformat(),
        "updated_at": T0.isoformat(),
        "score": None,
    }
    # LangGraph prints search results as "Item(...)" too, score last.
    stamp = "'2030-01-01T00:00:00+00:00'"
    assert repr(found) == (
        f"Item(namespace=['a', 'b'], key='k', value={{'v': 1}}, created_at={stamp}, "
        f"updated_at={stamp}, score=None)"
    )
    assert repr(store.get(("a", "b"), "k")) == repr(found).replace(", score=None", "")
    assert len({found, store.get(("a", "b"), "k")}) == 1  # hashed by address


# -- copies -------------------------------------------------------------------------------------


def test_put_copies_the_value(store: BaseStore) -> None:
    value = {"list": [1], "nested": {"a": 1}}
    store.put(("ns",), "k", value)
    value["list"].append(2)
    value["nested"]["a"] = 99
    value["new"] = True
    item = store.get(("ns",), "k")
    assert item is not None and item.value == {"list": [1], "nested": {"a": 1}}


def test_get_and_search_return_copies(store: BaseStore) -> None:
    store.put(("ns",), "k", {"list": [1]})
    got = store.get(("ns",), "k")
    assert got is not None
    got.value["list"].append(2)
    found = store.search(("ns",))
    found[0].value["list"].append(3)
    again = store.get(("ns",), "k")
    assert again is not None and again.value == {"list": [1]}


# -- search -------------------------------------------------------------------------------------


def test_search_prefix_matches_whole_labels(store: BaseStore) -> None:
    store.put(("a",), "1", {})
    store.put(("a", "b"), "2", {})
    store.put(("a", "b", "c"), "3", {})
    store.put(("ab",), "4", {})
    store.put(("b", "a"), "5", {})
    assert sorted(keys(store.search(("a",)))) == ["1", "2", "3"]
    assert sorted(keys(store.search(("a", "b")))) == ["2", "3"]
    assert sorted(keys(store.search(("ab",)))) == ["4"]
    assert store.search(("a", "b", "c", "d")) == []
    assert sorted(keys(store.search(()))) == ["1", "2", "3", "4", "5"]


def test_search_order_follows_langgraph(store: BaseStore, clock: FakeClock) -> None:
    for key in ["first", "second", "third"]:
        store.put(("ns",), key, {})
        clock.advance(1)
    store.put(("ns",), "first", {"touched": True})  # durable stores: moves it to the front
    assert keys(store.search(("ns",))) == by_backend(
        store, durable=["first", "third", "second"], memory=["first", "second", "third"]
    )


def test_search_ties_break_by_namespace_then_key(store: BaseStore) -> None:
    # The fake clock stands still, so every item has the same updated_at.
    store.put(("b",), "a", {})
    store.put(("a",), "z", {})
    store.put(("a",), "b", {})
    store.put(("a", "c"), "a", {})
    found = store.search(())
    assert [(it.namespace, it.key) for it in found] == by_backend(
        store,
        durable=[(("a",), "b"), (("a",), "z"), (("a", "c"), "a"), (("b",), "a")],
        memory=[(("b",), "a"), (("a",), "z"), (("a",), "b"), (("a", "c"), "a")],
    )


def test_search_limit_and_offset(store: BaseStore, clock: FakeClock) -> None:
    for i in range(5):
        store.put(("ns",), f"k{i}", {"i": i})
        clock.advance(1)
    order = by_backend(
        store, durable=["k4", "k3", "k2", "k1", "k0"], memory=[f"k{i}" for i in range(5)]
    )
    assert keys(store.search(("ns",), limit=2)) == order[:2]
    assert keys(store.search(("ns",), limit=2, offset=2)) == order[2:4]
    assert keys(store.search(("ns",), limit=2, offset=4)) == order[4:]
    assert store.search(("ns",), offset=5) == []
    assert store.search(("ns",), limit=0) == []
    assert len(store.search(("ns",))) == 5  # default limit is 10


def test_search_limit_applies_after_filter(store: BaseStore, clock: FakeClock) -> None:
    for i in range(6):
        store.put(("ns",), f"k{i}", {"even": i % 2 == 0})
        clock.advance(1)
    assert keys(store.search(("ns",), filter={"even": True}, limit=2)) == by_backend(
        store, durable=["k4", "k2"], memory=["k0", "k2"]
    )


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


def test_filter_equality(people: BaseStore) -> None:
    assert found(people, {"name": "bob"}) == ["bob"]
    assert found(people, {"admin": True}) == ["bob", "cy"]
    assert found(people, {"admin": True, "name": "cy"}) == ["cy"]
    assert found(people, {"age": None}) == ["dee"]  # explicit null, not a missing field
    assert found(people, {"tags": ["a", "b"]}) == ["cy"]
    assert found(people, {"name": "nobody"}) == []
    assert found(people, {}) == ["ann", "bob", "cy", "dee", "eve", "one"]


def test_filter_booleans_and_numbers_differ(people: BaseStore) -> None:
    assert found(people, {"admin": 1}) == ["one"]
    assert found(people, {"admin": {"$eq": True}}) == ["bob", "cy"]


@pytest.mark.parametrize(
    ("op", "operand", "expected"),
    [
        ("$eq", 18, ["bob"]),
        ("$ne", 18, ["ann", "cy", "dee", "eve", "one"]),
        ("$gt", 18, ["cy"]),
        ("$gte", 18, ["bob", "cy"]),
        ("$lt", 18, ["ann", "one"]),
        ("$lte", 18, ["ann", "bob", "one"]),
        ("$gt", "3", ["eve"]),  # strings compare with strings only
    ],
)
def test_filter_operators(people: BaseStore, op: str, operand: object, expected: list[str]) -> None:
    assert found(people, {"age": {op: operand}}) == expected


def test_filter_operators_combine(people: BaseStore) -> None:
    assert found(people, {"age": {"$gte": 17, "$lt": 30}}) == ["ann", "bob"]
    assert found(people, {"age": {"$gte": 17}, "admin": True}) == ["bob", "cy"]


def test_filter_missing_field_matches_only_ne(people: BaseStore) -> None:
    assert found(people, {"tags": {"$ne": ["a"]}}) == ["bob", "cy", "dee", "eve", "one"]
    assert found(people, {"tags": {"$gte": "a"}}) == []
    assert found(people, {"nickname": {"$eq": None}}) == []


def test_filter_unknown_operator_is_named(store: BaseStore) -> None:
    with pytest.raises(ValueError, match=r"\$regex"):
        store.search(("ns",), filter={"name": {"$regex": "a.*"}})
    with pytest.raises(ValueError, match=r"\$or"):
        store.search(("ns",), filter={"$or": [{"a": 1}]})
    with pytest.raises(ValueError, match="needs a number or string"):
        store.search(("ns",), filter={"age": {"$gt": None}})


def test_filter_dict_without_operators_is_equality(store: BaseStore) -> None:
    store.put(("ns",), "k", {"meta": {"lang": "en"}})
    store.put(("ns",), "j", {"meta": {"lang": "en", "x": 1}})
    assert keys(store.search(("ns",), filter={"meta": {"lang": "en"}})) == ["k"]


# -- list_namespaces ----------------------------------------------------------------------------


@pytest.fixture
def tree(store: BaseStore) -> BaseStore:
    for namespace in [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "e"),
        ("ab", "c"),
        ("x", "b", "c"),
        ("x",),
    ]:
        store.put(namespace, "k", {})
    return store


def test_list_namespaces_sorted(tree: BaseStore) -> None:
    assert tree.list_namespaces() == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "e"),
        ("ab", "c"),
        ("x",),
        ("x", "b", "c"),
    ]


def test_list_namespaces_prefix_and_suffix(tree: BaseStore) -> None:
    assert tree.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]
    assert tree.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("ab", "c"), ("x", "b", "c")]
    assert tree.list_namespaces(suffix=("b", "c")) == [("a", "b", "c"), ("x", "b", "c")]
    assert tree.list_namespaces(prefix=("a",), suffix=("c",)) == [("a", "b", "c")]
    assert tree.list_namespaces(prefix=("a", "b", "c", "d")) == []


def test_list_namespaces_max_depth(tree: BaseStore) -> None:
    assert tree.list_namespaces(max_depth=1) == [("a",), ("ab",), ("x",)]
    assert tree.list_namespaces(max_depth=2) == [
        ("a", "b"),
        ("a", "e"),
        ("ab", "c"),
        ("x",),
        ("x", "b"),
    ]
    # prefix/suffix match the full namespace before truncation
    assert tree.list_namespaces(suffix=("d",), max_depth=1) == [("a",)]


def test_list_namespaces_limit_offset(tree: BaseStore) -> None:
    assert tree.list_namespaces(limit=2) == [("a", "b", "c"), ("a", "b", "d")]
    assert tree.list_namespaces(limit=2, offset=4) == [("x",), ("x", "b", "c")]
    assert tree.list_namespaces(offset=10) == []


# -- TTL ----------------------------------------------------------------------------------------


def test_ttl_expiry_hides_item_everywhere(store: BaseStore, clock: FakeClock) -> None:
    store.put(("t",), "short", {"v": 1}, ttl=10)
    store.put(("t",), "forever", {"v": 2})
    store.put(("gone",), "k", {}, ttl=10)
    item = store.get(("t",), "short", refresh_ttl=False)
    assert item is not None and item.expires_at == T0 + timedelta(seconds=10)

    clock.advance(9.999)
    assert store.get(("t",), "short", refresh_ttl=False) is not None
    clock.advance(0.001)  # expiry is exclusive: gone at exactly expires_at
    assert store.get(("t",), "short") is None
    assert keys(store.search(("t",))) == ["forever"]
    assert store.list_namespaces() == [("t",)]


def test_get_refreshes_ttl_by_default(store: BaseStore, clock: FakeClock) -> None:
    store.put(("t",), "k", {}, ttl=10)
    clock.advance(8)
    item = store.get(("t",), "k")
    assert item is not None and item.expires_at == clock.now + timedelta(seconds=10)
    assert item.updated_at == T0  # a refresh is not an update
    clock.advance(8)  # 16s after the put, 8s after the refresh
    assert store.get(("t",), "k", refresh_ttl=False) is not None
    clock.advance(2)
    assert store.get(("t",), "k") is None


def test_get_without_refresh_keeps_expiry(store: BaseStore, clock: FakeClock) -> None:
    store.put(("t",), "k", {}, ttl=10)
    clock.advance(8)
    assert store.get(("t",), "k", refresh_ttl=False) is not None
    clock.advance(2)
    assert store.get(("t",), "k") is None


def test_search_does_not_refresh_ttl(store: BaseStore, clock: FakeClock) -> None:
    store.put(("t",), "k", {}, ttl=10)
    clock.advance(8)
    assert keys(store.search(("t",))) == ["k"]
    clock.advance(2)
    assert store.search(("t",)) == []


def test_put_resets_ttl_and_none_clears_it(store: BaseStore, clock: FakeClock) -> None:
    store.put(("t",), "k", {}, ttl=10)
    clock.advance(5)
    store.put(("t",), "k", {"v": 2}, ttl=10)
    clock.advance(8)
    assert store.get(("t",), "k", refresh_ttl=False) is not None
    store.put(("t",), "k", {"v": 3})
    clock.advance(10_000)
    item = store.get(("t",), "k")
    assert item is not None and item.expires_at is None and item.created_at == T0


def test_put_over_expired_item_starts_fresh(store: BaseStore, clock: FakeClock) -> None:
    store.put(("t",), "k", {"v": 1}, ttl=1)
    clock.advance(5)
    store.put(("t",), "k", {"v": 2})
    item = store.get(("t",), "k")
    assert item is not None and item.created_at == clock.now


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
