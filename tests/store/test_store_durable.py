"""What the stores that keep data outside the process share beyond the conformance suite.

Values round-trip as JSON with their types intact, non-JSON values are refused up front, filter
field names are data (never SQL), odd characters order and match like ``InMemoryStore``, data
outlives the store object, and random data and filters give exactly ``InMemoryStore``'s answers.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from store_backends import DURABLE_FACTORIES, T0, FakeClock, durable_search, store_location

from threadline.store import BaseStore, InMemoryStore, Item

KINDS = sorted(DURABLE_FACTORIES)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store(kind: str, clock: FakeClock, tmp_path: Path) -> Iterator[BaseStore]:
    with DURABLE_FACTORIES[kind](clock, tmp_path) as s:
        # Connect now: a pool opening connections in the background (using ``random`` for
        # jitter) while hypothesis draws makes it warn about global random state.
        s.list_namespaces()
        yield s


def same_json(a: object, b: object) -> bool:
    """Equal *and* of the same JSON types: ``1.0`` is not ``1`` here, nor ``True``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


# -- values -------------------------------------------------------------------------------------

TRICKY_VALUE: dict[str, Any] = {
    "big_int": 10**30,
    "neg_int": -(2**63) - 1,
    "int_like_float": 3.0,
    "big_float": 1e16,
    "huger_float": 1e23,
    "max_float": 1.7976931348623157e308,
    "tiny_float": 5e-324,
    "fraction": 0.1,
    "small": 1.5e-7,
    "bool": True,
    "null": None,
    "text": '日本語 ✓ 🎉 "quoted" \\ back\nslash\t\x01',
    "empty": {"": "", "list": [], "dict": {}},
    "nested": {"a": [1, {"b": [None, False, 2.5]}], "tuple": (1, "two")},
}


def test_values_round_trip_with_their_types(store: BaseStore) -> None:
    store.put(("ns",), "k", TRICKY_VALUE)
    expected = {
        **TRICKY_VALUE,
        "nested": {"a": [1, {"b": [None, False, 2.5]}], "tuple": [1, "two"]},
    }
    got = store.get(("ns",), "k")
    assert got is not None and same_json(got.value, expected)
    (found,) = store.search(("ns",))
    assert same_json(found.value, expected)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"when": datetime(2030, 1, 1, tzinfo=UTC)}, r"value\['when'\] is a datetime"),
        ({"a": [1, {2, 3}]}, r"value\['a'\]\[1\] is a set"),
        ({"a": {1: "one"}}, r"value\['a'\] has a key 1 of type int"),
        ({"n": math.nan}, r"value\['n'\] is nan"),
        ({"n": [math.inf]}, r"value\['n'\]\[0\] is inf"),
        ({"b": b"bytes"}, r"value\['b'\] is a bytes"),
    ],
)
def test_non_json_values_are_refused(store: BaseStore, value: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        store.put(("ns",), "k", value)
    assert store.get(("ns",), "k") is None
    assert store.list_namespaces() == []


def test_lone_surrogates_in_addresses(store: BaseStore) -> None:
    with pytest.raises(ValueError, match="surrogate"):
        store.put(("ns",), "bad\ud800", {})
    with pytest.raises(ValueError, match="surrogate"):
        store.put(("bad\udfff",), "k", {})
    assert store.get(("ns",), "bad\ud800") is None
    store.delete(("ns",), "bad\ud800")
    assert store.search(("bad\udfff",)) == []
    assert store.list_namespaces(prefix=("bad\udfff",)) == []
    assert store.list_namespaces(suffix=("bad\udfff",)) == []
    assert store.list_namespaces() == []


def test_value_strings_may_hold_lone_surrogates_where_json_text_allows(
    store: BaseStore, kind: str
) -> None:
    if kind == "postgres":
        with pytest.raises(ValueError, match="surrogate"):
            store.put(("ns",), "k", {"s": "\ud800"})
        return
    store.put(("ns",), "k", {"s": "x\ud800y", "\udc00": 1})
    got = store.get(("ns",), "k")
    assert got is not None and got.value == {"s": "x\ud800y", "\udc00": 1}
    assert [it.key for it in store.search(("ns",), filter={"s": "x\ud800y"})] == ["k"]


# -- filters never reach SQL as text ------------------------------------------------------------

HOSTILE_FIELDS = [
    "x'); DROP TABLE threadline_store; --",
    'a" OR 1=1 --',
    "%(now)s",
    "%s",
    "{table}",
    "a.b",
    "a->b",
    "a'->>'b",
    "*",
    "",
    " ",
    "ключ",
]


@pytest.mark.parametrize("field", HOSTILE_FIELDS)
def test_injection_looking_field_names_are_just_field_names(store: BaseStore, field: str) -> None:
    store.put(("ns",), "exact", {field: 1, "a": {"b": 1}})
    store.put(("ns",), "other", {field: 2, "a": {"b": 1}})
    store.put(("ns",), "missing", {"a": {"b": 1}})
    assert [it.key for it in store.search(("ns",), filter={field: 1})] == ["exact"]
    assert sorted(it.key for it in store.search(("ns",), filter={field: {"$ne": 1}})) == [
        "missing",
        "other",
    ]
    assert [it.key for it in store.search(("ns",), filter={field: {"$gt": 1}})] == ["other"]
    # Field names are top-level keys, never paths into nested objects.
    if field not in ("a.b", "a->b", "a'->>'b"):
        return
    assert sorted(it.key for it in store.search(("ns",), filter={"a": {"b": 1}})) == [
        "exact",
        "missing",
        "other",
    ]
    # And the table is still there.
    assert len(store.search(("ns",))) == 3


def test_injection_looking_values_and_addresses(store: BaseStore) -> None:
    evil = "'; DROP TABLE threadline_store; --"
    store.put((evil, "%s", "{table}"), evil, {"v": evil})
    assert store.get((evil, "%s", "{table}"), evil) is not None
    assert [it.key for it in store.search((evil,), filter={"v": evil})] == [evil]
    assert [it.key for it in store.search((evil,), filter={"v": {"$gte": evil}})] == [evil]
    assert store.list_namespaces(prefix=(evil,), suffix=("{table}",)) == [(evil, "%s", "{table}")]


# -- odd characters order and match like InMemoryStore -------------------------------------------


def test_labels_with_wildcard_characters_match_exactly(store: BaseStore) -> None:
    for label in ["a%", "a_", "ab", "a*", "a?", "a[b]", "a/", "a-", "a:b", "a\\"]:
        store.put((label, "x"), "k", {})
    store.put(("a", "x"), "k", {})
    for label in ["a%", "a_", "a*", "a?", "a[b]", "a/", "a-", "a:b", "a\\", "a"]:
        assert [it.namespace for it in store.search((label,))] == [(label, "x")], label
        assert store.list_namespaces(prefix=(label,)) == [(label, "x")], label


def _orderings(store: BaseStore) -> tuple[list[tuple[Any, ...]], list[Any]]:
    search = (
        durable_search(store, (), limit=100)
        if isinstance(store, InMemoryStore)
        else store.search((), limit=100)
    )
    return [(it.namespace, it.key) for it in search], store.list_namespaces()


ODD_LABELS = ["a", "a-c", "b", "Z", "é", "\uffff", "\U0001f600", "a b", "a:b", "10", "9"]


def test_ordering_matches_memory_for_odd_characters(store: BaseStore, clock: FakeClock) -> None:
    memory = InMemoryStore(clock=clock)
    addresses = [((x,), y) for x, y in itertools.product(ODD_LABELS, ["k", "\U0001f600"])]
    addresses += [(("a", x), "k") for x in ODD_LABELS[:4]]
    for namespace, key in addresses:
        for s in (store, memory):
            s.put(namespace, key, {"key": key})
    # Tuple order for namespaces ("a", "b") < ("a-c",); text order for search ties: "a-c" < "a.b".
    assert _orderings(store) == _orderings(memory)
    assert store.list_namespaces()[:3] == [("10",), ("9",), ("Z",)]


def test_string_ranges_use_code_points(store: BaseStore) -> None:
    for key, text in [("bmp", "\uffff"), ("astral", "\U0001f600"), ("ascii", "z"), ("e", "é")]:
        store.put(("ns",), key, {"s": text})
    assert sorted(it.key for it in store.search(("ns",), filter={"s": {"$gt": "\uffff"}})) == [
        "astral"
    ]
    assert sorted(it.key for it in store.search(("ns",), filter={"s": {"$lt": "é"}})) == ["ascii"]


def test_range_operands_outside_what_can_be_stored(store: BaseStore) -> None:
    for key, value in [("a", "a"), ("ab", "ab"), ("a0", "a\x01"), ("n", 5), ("f", -1.5)]:
        store.put(("ns",), key, {"v": value})

    def keys(filter: dict[str, Any]) -> list[str]:
        return sorted(it.key for it in store.search(("ns",), filter={"v": filter}))

    assert keys({"$gt": "a\x00"}) == ["a0", "ab"]
    assert keys({"$gte": "a\x00"}) == ["a0", "ab"]
    assert keys({"$lt": "a\x00"}) == ["a"]
    assert keys({"$lte": "a\x00z"}) == ["a"]
    assert keys({"$lt": "a\ud800"}) == ["a", "a0", "ab"]
    assert keys({"$gt": "a\ud800"}) == []
    assert keys({"$lt": math.inf}) == ["f", "n"]
    assert keys({"$gt": -math.inf}) == ["f", "n"]
    assert keys({"$gt": math.inf}) == []
    assert keys({"$lte": -math.inf}) == []
    assert keys({"$lt": math.nan}) == []
    assert keys({"$gte": math.nan}) == []
    assert keys({"$eq": math.nan}) == []
    assert keys({"$ne": math.nan}) == ["a", "a0", "ab", "f", "n"]
    assert keys({"$eq": "a\x00"}) == []
    assert keys({"$ne": {1, 2}}) == ["a", "a0", "ab", "f", "n"]  # type: ignore[dict-item]


def test_numbers_compare_exactly(store: BaseStore) -> None:
    # 10**23 and 1e23 differ: the float is 99999999999999991611392.
    for key, n in [("int", 10**23), ("float", 1e23), ("big", 2**53 + 1), ("f53", 2.0**53)]:
        store.put(("ns",), key, {"n": n})

    def keys(filter: dict[str, Any]) -> list[str]:
        return sorted(it.key for it in store.search(("ns",), filter={"n": filter}))

    assert keys({"$eq": 1e23}) == ["float"]
    assert keys({"$eq": 10**23}) == ["int"]
    assert keys({"$gt": 1e23}) == ["int"]
    assert keys({"$eq": 2**53}) == ["f53"]
    assert keys({"$gt": 2.0**53, "$lt": 1e20}) == ["big"]


# -- many rows ----------------------------------------------------------------------------------


def test_paging_through_many_filtered_items(store: BaseStore, clock: FakeClock) -> None:
    memory = InMemoryStore(clock=clock)
    for i in range(300):
        for s in (store, memory):
            s.put(("many", str(i % 3)), f"k{i:03}", {"i": i, "sevens": i % 7 == 0})
        if i % 4:
            clock.advance(1)  # some ties too
    for filter, limit, offset in [
        ({"sevens": True}, 10, 0),
        ({"sevens": True}, 10, 35),
        ({"sevens": True}, 100, 0),
        ({"i": {"$gte": 150}}, 7, 140),
        (None, 50, 120),
        (None, 1000, 0),
        (None, 5, 299),
    ]:
        expected = durable_search(memory, ("many",), filter=filter, limit=limit, offset=offset)
        got = store.search(("many",), filter=filter, limit=limit, offset=offset)
        assert got == expected, (filter, limit, offset)


# -- data outlives the store object -------------------------------------------------------------


def test_reopened_store_sees_the_data(kind: str, clock: FakeClock, tmp_path: Path) -> None:
    with store_location(kind, tmp_path) as open_store:
        first = open_store(clock=clock)
        first.put(("a", "b"), "k", {"v": 1}, ttl=60)
        first.put(("a",), "forever", {"v": 2})
        first.close()
        clock.advance(30)
        second = open_store(clock=clock)
        item = second.get(("a", "b"), "k", refresh_ttl=False)
        assert item is not None and item.value == {"v": 1}
        assert item.created_at == T0 and item.expires_at == T0 + timedelta(seconds=60)
        assert second.list_namespaces() == [("a",), ("a", "b")]
        clock.advance(30)
        assert second.list_namespaces() == [("a",)]


def test_separate_locations_do_not_share(kind: str, clock: FakeClock, tmp_path: Path) -> None:
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    with (
        store_location(kind, tmp_path / "one") as open_one,
        store_location(kind, tmp_path / "two") as open_two,
    ):
        one, two = open_one(clock=clock), open_two(clock=clock)
        one.put(("ns",), "k", {"v": 1})
        assert two.get(("ns",), "k") is None
        assert two.search(()) == [] and two.list_namespaces() == []


def test_stores_sharing_a_location_stay_consistent(
    kind: str, clock: FakeClock, tmp_path: Path
) -> None:
    """Several stores (processes, in real life) racing on the same keys keep every index true."""
    with store_location(kind, tmp_path) as open_store:
        stores = [open_store(clock=clock) for _ in range(3)]
        errors: list[BaseException] = []

        def churn(s: BaseStore, n: int) -> None:
            try:
                for i in range(60):
                    namespace = ("shared", str(i % 4))
                    key = str(i % 5)
                    if (i + n) % 3 == 0:
                        s.delete(namespace, key)
                    else:
                        s.put(namespace, key, {"by": n, "i": i}, ttl=None if i % 2 else 5)
                    s.get(namespace, key)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=churn, args=(s, n)) for n, s in enumerate(stores)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        check = open_store(clock=clock)
        truth = {
            (namespace, key)
            for namespace in [("shared", str(j)) for j in range(4)]
            for key in map(str, range(5))
            if check.get(namespace, key) is not None
        }
        found = {(it.namespace, it.key) for it in check.search(("shared",), limit=1000)}
        assert found == truth
        assert check.list_namespaces() == sorted({namespace for namespace, _ in truth})
        clock.advance(5)  # the TTL'd ones go, from every index
        live = {(it.namespace, it.key) for it in check.search(("shared",), limit=1000)}
        assert live <= truth
        assert check.list_namespaces() == sorted({namespace for namespace, _ in live})
        for namespace, key in truth:
            check.delete(namespace, key)
        assert check.list_namespaces() == [] and check.search(()) == []


# -- same answers as InMemoryStore for random data -----------------------------------------------

_FIELDS = ["a", "b", "c"]
_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=4
)
_numbers = (
    st.integers(-(10**20), 10**20)
    | st.sampled_from([2**53, 2**53 + 1, 10**23, 2**64, -0.0, 0.1, 2.0**53, 5e-324, 1e23])
    | st.floats(allow_nan=False, allow_infinity=False)
)
# Most values come from a small pool, so filters often hit stored values and ties.
_common = st.sampled_from(
    [0, 1, 1.0, 2, 2.5, -1, 10**16, 1e16, True, False, None, "", "a", "ab", "B", "é", "10", "9"]
)
_scalars = _common | _common | _common | _numbers | _text
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_FIELDS), inner),
    max_leaves=4,
)
_docs = st.dictionaries(st.sampled_from(_FIELDS), _scalars | _scalars | _json, max_size=3)
_range_operands = (
    _common.filter(lambda v: not isinstance(v, bool) and v is not None)
    | _numbers
    | _text
    | st.sampled_from([math.inf, -math.inf, math.nan, "a\x00", "\ud800", "a\udfffb"])
)


def _orderable(v: object) -> bool:
    return isinstance(v, int | float | str) and not isinstance(v, bool)


@st.composite
def _filters(draw: st.DrawFn, docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Mostly one condition, with operands mostly taken from that field's stored values, so
    that filters often match something and often sit exactly on a stored value."""
    filter: dict[str, Any] = {}
    count = draw(st.sampled_from([0, 1, 1, 1, 2]))
    for field in draw(
        st.lists(st.sampled_from(_FIELDS), min_size=count, max_size=count, unique=True)
    ):
        stored = [doc[field] for doc in docs if field in doc]
        op = draw(st.sampled_from(["eq", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "range"]))
        if op in ("eq", "$eq", "$ne"):
            reuse = stored and draw(st.integers(0, 3))
            operand = draw(st.sampled_from(stored) if reuse else _json)
            filter[field] = operand if op == "eq" else {op: operand}
            continue
        orderable = [v for v in stored if _orderable(v)]
        pick = st.sampled_from(orderable) if orderable else _range_operands
        if op == "range":
            filter[field] = {"$gt": draw(pick | _range_operands), "$lte": draw(pick)}
        else:
            filter[field] = {op: draw(pick if draw(st.integers(0, 3)) else _range_operands)}
    return filter


_counter = itertools.count()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_same_answers_as_memory(store: BaseStore, clock: FakeClock, data: st.DataObject) -> None:
    root = f"h{next(_counter)}"  # each example gets its own corner of the one store
    memory = InMemoryStore(clock=clock)
    namespaces = [(root, "p"), (root, "q"), (root, "p", "r"), (root, "p-", "r")]
    docs = data.draw(st.lists(_docs, min_size=2, max_size=8))
    for i, doc in enumerate(docs):
        namespace = data.draw(st.sampled_from(namespaces))
        key = data.draw(st.sampled_from(["k", "j", "é"])) + str(i % 3)
        ttl = data.draw(st.sampled_from([None, None, 1, 3]))
        for s in (store, memory):
            s.put(namespace, key, doc, ttl=ttl)
        clock.advance(data.draw(st.sampled_from([0, 0.5, 1])))
    for _ in range(3):
        filter = data.draw(_filters(docs))
        prefix = data.draw(st.sampled_from([(root,), (root, "p"), (root, "p", "r")]))
        limit = data.draw(st.sampled_from([10, 10, 10, 3, 1, 0]))
        offset = data.draw(st.sampled_from([0, 0, 0, 1, 2]))
        expected = durable_search(memory, prefix, filter=filter, limit=limit, offset=offset)
        got = store.search(prefix, filter=filter, limit=limit, offset=offset)
        assert _facts(got) == _facts(expected), filter
        suffix = data.draw(st.sampled_from([None, ("r",), ("q",), ("p", "r")]))
        depth = data.draw(st.sampled_from([None, 1, 2]))
        assert store.list_namespaces(
            prefix=(root,), suffix=suffix, max_depth=depth
        ) == memory.list_namespaces(prefix=(root,), suffix=suffix, max_depth=depth)
        clock.advance(data.draw(st.sampled_from([0, 1])))
    for namespace, key in {(it.namespace, it.key) for it in memory.search((root,), limit=100)}:
        store.delete(namespace, key)


def _facts(items: list[Item]) -> list[tuple[Any, ...]]:
    return [
        (it.namespace, it.key, it.created_at, it.updated_at, it.expires_at, _Strict(it.value))
        for it in items
    ]


class _Strict:
    """Compares with ``same_json``, so a float that came back an int is a mismatch."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Strict) and same_json(self.value, other.value)

    def __repr__(self) -> str:
        return repr(self.value)

    __hash__ = None  # type: ignore[assignment]
