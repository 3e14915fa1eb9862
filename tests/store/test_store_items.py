"""Behaviour every store backend shares: putting, getting and deleting items, and the copies
and shapes it returns.
"""

from __future__ import annotations

from datetime import timedelta

from store_backends import T0, FakeClock
from store_suite import (
    clock,
    store,
)

from threadline.store import BaseStore, SearchItem

__all__ = ["clock", "store"]  # fixtures used here


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
