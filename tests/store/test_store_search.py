"""Behaviour every store backend shares: search prefixes, order, limits and filters."""

from __future__ import annotations

import pytest
from store_backends import FakeClock
from store_suite import (
    by_backend,
    clock,
    found,
    keys,
    people,
    store,
)

from threadline.store import BaseStore

__all__ = ["clock", "people", "store"]  # fixtures used here


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
