"""``RedisStore`` specifics: the key layout, native TTLs, index upkeep, client ownership.

Each test works under its own key prefix (``store_backends.redis_prefix``), deleted afterwards.
"""

# ruff: noqa: E402 - the driver is imported only after require_driver() has checked for it

from __future__ import annotations

from collections.abc import Iterator

import pytest
from store_backends import FakeClock, durable_search, redis_prefix
from store_drivers import require_driver

require_driver("redis")  # skips without it, but fails under CI=true

import redis

from threadline.errors import InvalidStoreInputError, ThreadlineError
from threadline.store import InMemoryStore, RedisStore
from threadline.store.redis import SCHEMA_VERSION


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def location() -> Iterator[tuple[str, str]]:
    with redis_prefix() as found:
        yield found


@pytest.fixture
def client(location: tuple[str, str]) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(location[0])
    yield c
    c.close()


@pytest.fixture
def store(location: tuple[str, str], clock: FakeClock) -> Iterator[RedisStore]:
    url, prefix = location
    with RedisStore(url, key_prefix=prefix, clock=clock) as s:
        yield s


def keys_under(client: redis.Redis, prefix: str) -> set[bytes]:
    return set(client.scan_iter(match=f"{prefix}*", count=1000))


def test_key_layout(store: RedisStore, client: redis.Redis, location: tuple[str, str]) -> None:
    _, prefix = location
    p = prefix.encode()
    store.put(("a", "b"), "k", {"v": 1}, ttl=10)
    store.put(("a",), "j", {"v": 2})
    member = b"a.b\x00k"
    assert keys_under(client, prefix) == {
        p + b"version",
        p + b"item:" + member,
        p + b"item:a\x00j",
        p + b"idx",
        p + b"idx:a",
        p + b"idx:a.b",
        p + b"exp",
        p + b"nscount",
        p + b"ns",
    }
    assert client.get(p + b"version") == str(SCHEMA_VERSION).encode()
    assert client.hgetall(p + b"item:" + member) == {
        b"v": b'{"v":1}',
        b"c": b"1893456000000000",  # 2030-01-01 in microseconds
        b"u": b"1893456000000000",
        b"e": b"1893456010000000",
        b"t": b"10000000",
    }
    assert client.zrange(p + b"idx:a", 0, -1) == [b"a\x00j", b"a.b\x00k"]  # tie: by text
    assert client.zrange(p + b"idx:a.b", 0, -1, withscores=True) == [(member, -1893456000000000)]
    assert client.zrange(p + b"exp", 0, -1, withscores=True) == [(member, 1893456010000000)]
    assert client.hgetall(p + b"nscount") == {b"a": b"1", b"a.b": b"1"}
    assert client.zrange(p + b"ns", 0, -1) == [b"a", b"a.b"]
    store.delete(("a", "b"), "k")
    store.delete(("a",), "j")
    assert keys_under(client, prefix) == {p + b"version"}


def test_native_ttl_backs_up_logical_expiry(
    store: RedisStore, client: redis.Redis, location: tuple[str, str], clock: FakeClock
) -> None:
    p = location[1].encode()
    store.put(("ns",), "k", {}, ttl=10)
    assert 69_000 < client.pttl(p + b"item:ns\x00k") <= 70_000  # 10 s + 60 s of slack
    clock.advance(5)
    store.put(("ns",), "k", {}, ttl=100)
    assert 159_000 < client.pttl(p + b"item:ns\x00k") <= 160_000
    store.put(("ns",), "k", {})
    assert client.pttl(p + b"item:ns\x00k") == -1  # no TTL: persisted
    store.put(("ns",), "k", {}, ttl=1)
    client.pexpire(p + b"item:ns\x00k", 5)
    assert store.get(("ns",), "k") is not None  # refreshing re-arms the Redis TTL too
    assert 60_000 < client.pttl(p + b"item:ns\x00k") <= 61_000


def test_native_ttl_can_be_off(
    location: tuple[str, str], client: redis.Redis, clock: FakeClock
) -> None:
    url, prefix = location
    with RedisStore(url, key_prefix=prefix, clock=clock, native_expiry_slack=None) as store:
        store.put(("ns",), "k", {}, ttl=10)
        assert client.pttl(prefix.encode() + b"item:ns\x00k") == -1
        store.get(("ns",), "k")
        assert client.pttl(prefix.encode() + b"item:ns\x00k") == -1
    with pytest.raises(ValueError, match="native_expiry_slack"):
        RedisStore(url, key_prefix=prefix, native_expiry_slack=-1)


def test_items_redis_dropped_by_itself_are_cleaned_up(
    store: RedisStore, client: redis.Redis, location: tuple[str, str], clock: FakeClock
) -> None:
    """A hash Redis expired natively leaves index entries; they neither show nor double-count."""
    prefix = location[1]
    p = prefix.encode()
    store.put(("ns",), "k", {"v": 1}, ttl=10)
    store.put(("ns",), "other", {"v": 2})
    client.delete(p + b"item:ns\x00k")  # as if its Redis TTL had run out
    assert store.get(("ns",), "k") is None
    assert [it.key for it in store.search(("ns",))] == ["other"]
    store.put(("ns",), "k", {"v": 3})  # re-created: counted once, not twice
    assert client.hget(p + b"nscount", "ns") == b"2"
    store.delete(("ns",), "k")
    store.delete(("ns",), "other")
    assert store.list_namespaces() == []
    # And once the store's clock passes the expiry, the sweep removes the leftovers.
    store.put(("gone",), "k", {}, ttl=10)
    client.delete(p + b"item:gone\x00k")
    assert store.list_namespaces() == [("gone",)]  # still counted: its expiry is not due yet
    clock.advance(10)
    assert store.list_namespaces() == []
    assert keys_under(client, prefix) == {p + b"version"}


def test_sweep_removes_expired_items_from_every_index(
    store: RedisStore, client: redis.Redis, location: tuple[str, str], clock: FakeClock
) -> None:
    prefix = location[1]
    p = prefix.encode()
    for i in range(300):  # more than one purge batch
        store.put(("a", str(i % 3)), str(i), {}, ttl=5)
    store.put(("a",), "keep", {})
    clock.advance(5)
    assert store.sweep_expired() == 300
    assert keys_under(client, prefix) == {
        p + b"version",
        p + b"item:a\x00keep",
        p + b"idx",
        p + b"idx:a",
        p + b"nscount",
        p + b"ns",
    }
    assert store.sweep_expired() == 0


def test_prefixes_keep_stores_apart(location: tuple[str, str], clock: FakeClock) -> None:
    url, prefix = location
    with (
        RedisStore(url, key_prefix=prefix + "one:", clock=clock) as one,
        RedisStore(url, key_prefix=prefix + "two:", clock=clock) as two,
    ):
        one.put(("ns",), "k", {"v": 1})
        assert two.get(("ns",), "k") is None
        assert two.search(()) == [] and two.list_namespaces() == []


def test_newer_layout_is_refused(
    location: tuple[str, str], client: redis.Redis, clock: FakeClock
) -> None:
    url, prefix = location
    client.set(prefix.encode() + b"version", SCHEMA_VERSION + 1)
    with (
        RedisStore(url, key_prefix=prefix) as store,
        pytest.raises(ThreadlineError, match="newer than this threadline understands"),
    ):
        store.get(("ns",), "k")


def test_a_shared_client_is_left_open(location: tuple[str, str], client: redis.Redis) -> None:
    _, prefix = location
    store = RedisStore(client, key_prefix=prefix)
    store.put(("ns",), "k", {"v": 1})
    store.close()
    store.close()
    assert "closed" in repr(store)
    with pytest.raises(ThreadlineError, match="closed"):
        store.get(("ns",), "k")
    assert client.ping()
    decoding = redis.Redis.from_url(location[0], decode_responses=True)
    with pytest.raises(ValueError, match="decode_responses=False"):
        RedisStore(decoding, key_prefix=prefix)
    decoding.close()


def test_control_characters_in_labels_order_like_memory(
    store: RedisStore, clock: FakeClock
) -> None:
    """Members escape \\x00 and \\x01, so namespaces holding them still sort by text."""
    memory = InMemoryStore(clock=clock)
    for namespace, key in [
        (("a",), "k"),
        (("a\x00",), "k"),
        (("a\x00b",), "\x00"),
        (("a\x01",), "k"),
        (("a\x01\x00",), "k"),
        (("a", "\x00"), "k"),
        (("a\x02",), ""),
        (("\x01",), "\x01"),
    ]:
        for s in (store, memory):
            s.put(namespace, key, {})
    assert [(it.namespace, it.key) for it in store.search(())] == [
        (it.namespace, it.key) for it in durable_search(memory, ())
    ]
    assert store.list_namespaces() == memory.list_namespaces()
    assert store.list_namespaces(prefix=("a\x00",)) == [("a\x00",)]


def test_from_conn_string(location: tuple[str, str]) -> None:
    url, prefix = location
    with RedisStore.from_conn_string(url, key_prefix=prefix) as store:
        store.put(("ns",), "k", {})
        assert store.get(("ns",), "k") is not None


def test_semantic_index_is_refused_clearly(location: tuple[str, str]) -> None:
    url, prefix = location
    embed = {"embed": lambda texts: [[1.0] for _ in texts], "dims": 1}
    with pytest.raises(InvalidStoreInputError, match=r"RedisStore does not support index="):
        RedisStore(url, key_prefix=prefix, index=embed)
