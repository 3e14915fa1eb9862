"""Behaviour every store backend shares: listing namespaces, and items expiring by TTL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from store_backends import T0, FakeClock
from store_suite import (
    clock,
    keys,
    store,
)

from threadline.store import BaseStore

__all__ = ["clock", "store"]  # fixtures used here


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
