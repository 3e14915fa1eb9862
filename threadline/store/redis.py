"""``RedisStore``: long-term memory in plain Redis (7+, no modules).

Layout (``P`` is ``key_prefix``; ``M`` is an item's *member*: its namespace text — labels
joined with ``"."`` — with bytes ``\\x00``/``\\x01`` escaped as ``\\x01\\x01``/``\\x01\\x02``,
then ``\\x00``, then the key)::

    P version            string: the layout version of everything under P
    P item: M            hash: v (JSON value), c/u/e (created/updated/expires, microseconds
                         since the epoch from the store's clock; e is "" for never), t (TTL in
                         microseconds, "" for none)
    P idx                zset: every item's M, scored -updated (newest first)
    P idx: <ns prefix>   zset: the same, for the items under one namespace prefix; an item in
                         ("a", "b") is in P idx, P idx:a and P idx:a.b
    P exp                zset: M of every item with a TTL, scored by its expiry
    P nscount            hash: namespace text -> number of items in it
    P ns                 zset: the namespaces with items, all scored 0 (so ordered by text)

Members compare as bytes, and the escaping keeps byte order while making the namespace end at
the first ``\\x00``, so equal scores order by namespace text then key in code-point order: a
page of ``search`` is one ``ZRANGE`` on the prefix's index. Items are written, read-and-refreshed
and deleted by Lua scripts that update the item and every index at once.

Filters run in Python with ``matches`` (the function ``InMemoryStore`` uses) over the index in
order, a chunk of hashes per round trip, until ``offset + limit`` items matched; without a filter
``offset`` is a rank. ``list_namespaces`` narrows ``P ns`` with ``ZRANGEBYLEX`` and sorts the
rest in Python (tuple order differs from text order).

Expiry follows the store's clock, not Redis's: an item is live while the clock is before its
``e``. ``search`` and ``list_namespaces`` first delete the items ``P exp`` says have expired
(cheap when none have), so indexes and counts only hold live items; ``get`` deletes an expired
item it meets. Each item hash also gets a native Redis TTL of its TTL plus
``native_expiry_slack`` seconds, which reclaims memory if nothing reads the store; the leftover
index entries go at the next sweep. Pass ``native_expiry_slack=None`` to keep Redis TTLs off
(with a clock that does not follow real time, say).

Timestamps are exact to the microsecond as long as they stay below 2**53 microseconds after
1970 (the year 2255): sorted-set scores and Lua numbers are doubles.

For Redis Cluster, give ``key_prefix`` a hash tag (``"{memory}:"``) so all keys share a slot.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, cast

import redis

from threadline.errors import InvalidStoreInputError, StoreUnavailableError
from threadline.store.base import BaseStore, namespace_matches
from threadline.store.encoding import (
    check_utf8,
    decode_value,
    encode_value,
    from_micros,
    to_micros,
    ttl_micros,
    utf8_encodable,
)
from threadline.store.filters import Condition, matches
from threadline.store.item import Item, Namespace, SearchItem, as_search_item
from threadline.store.semantic import FieldVectors, Vector

__all__ = ["SCHEMA_VERSION", "RedisStore"]

#: The version of the key layout; keys written by a newer layout are refused.
SCHEMA_VERSION = 1

_CHUNK = 128  # index entries read per round trip while filtering
_PURGE_BATCH = 256

# Every script takes KEYS = item, exp, nscount, ns, then the index zsets from P idx down to the
# item's own namespace (so KEYS[#KEYS] holds exactly the items of that namespace).
_LUA_DROP = """
local function drop(member, ns)
  redis.call('DEL', KEYS[1])
  redis.call('ZREM', KEYS[2], member)
  local registered = redis.call('ZREM', KEYS[#KEYS], member) == 1
  for i = 5, #KEYS - 1 do redis.call('ZREM', KEYS[i], member) end
  if registered and redis.call('HINCRBY', KEYS[3], ns, -1) <= 0 then
    redis.call('HDEL', KEYS[3], ns)
    redis.call('ZREM', KEYS[4], ns)
  end
  return registered
end
"""

# ARGV: member, ns, value, now, expires|'', ttl|'', score, pexpire|''
_LUA_PUT = """
local member, ns, now = ARGV[1], ARGV[2], ARGV[4]
if not redis.call('ZSCORE', KEYS[#KEYS], member) then
  redis.call('HINCRBY', KEYS[3], ns, 1)
  redis.call('ZADD', KEYS[4], 0, ns)
end
local old = redis.call('HMGET', KEYS[1], 'c', 'e')
local created = now
if old[1] and (old[2] == '' or tonumber(old[2]) > tonumber(now)) then created = old[1] end
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'c', created, 'u', now, 'e', ARGV[5], 't', ARGV[6])
for i = 5, #KEYS do redis.call('ZADD', KEYS[i], ARGV[7], member) end
if ARGV[5] == '' then
  redis.call('ZREM', KEYS[2], member)
else
  redis.call('ZADD', KEYS[2], ARGV[5], member)
end
if ARGV[8] == '' then
  redis.call('PERSIST', KEYS[1])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[8])
end
return 1
"""

# ARGV: member, ns, now, refresh ('1'|'0'), slack ms|''. Returns {v, c, u, e} or nil.
_LUA_GET = (
    _LUA_DROP
    + """
local member, ns, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local f = redis.call('HMGET', KEYS[1], 'v', 'c', 'u', 'e', 't')
if not f[1] then return false end
if f[4] ~= '' and tonumber(f[4]) <= now then
  drop(member, ns)
  return false
end
if ARGV[4] == '1' and f[5] ~= '' then
  local ttl = tonumber(f[5])
  f[4] = string.format('%d', now + ttl)
  redis.call('HSET', KEYS[1], 'e', f[4])
  redis.call('ZADD', KEYS[2], f[4], member)
  if ARGV[5] ~= '' then
    redis.call('PEXPIRE', KEYS[1], string.format('%d', math.ceil(ttl / 1000) + tonumber(ARGV[5])))
  end
end
return {f[1], f[2], f[3], f[4]}
"""
)

# ARGV: member, ns, now|''. With now, only an item expired by then (or already gone) is dropped.
_LUA_DELETE = (
    _LUA_DROP
    + """
local member, ns = ARGV[1], ARGV[2]
if ARGV[3] ~= '' then
  local e = redis.call('HGET', KEYS[1], 'e')
  if e and (e == '' or tonumber(e) > tonumber(ARGV[3])) then return 0 end
end
if drop(member, ns) then return 1 end
return 0
"""
)


class RedisStore(BaseStore):
    """Long-term memory in Redis, shared by every process that connects.

    ``conn`` is a URL (``redis://host:6379/0``; the store then owns the client and
    :meth:`close` closes it) or an existing ``redis.Redis`` client made with
    ``decode_responses=False`` (the default; shared, left open). ``key_prefix`` starts every key
    the store uses, so several stores (apps, tests) can share a database.
    ``native_expiry_slack`` is how long (seconds) after its logical expiry Redis may drop an
    item hash by itself; ``None`` sets no Redis TTLs.
    """

    def __init__(
        self,
        conn: str | redis.Redis,
        *,
        key_prefix: str = "threadline:store:",
        clock: Callable[[], datetime] | None = None,
        refresh_on_read: bool = True,
        native_expiry_slack: float | None = 60.0,
        index: Mapping[str, Any] | None = None,
    ) -> None:
        if index:
            raise InvalidStoreInputError(
                "RedisStore does not support index=... (semantic search): use InMemoryStore, "
                "SqliteStore or PostgresStore for search(query=...)"
            )
        super().__init__(clock=clock, refresh_on_read=refresh_on_read)
        if not isinstance(key_prefix, str):
            raise InvalidStoreInputError(
                f"key_prefix must be a str, got {type(key_prefix).__name__}"
            )
        if native_expiry_slack is not None and not (
            isinstance(native_expiry_slack, int | float) and native_expiry_slack >= 0
        ):
            raise InvalidStoreInputError(
                f"native_expiry_slack must be a non-negative number or None, "
                f"got {native_expiry_slack!r}"
            )
        if isinstance(conn, redis.Redis):
            if conn.get_connection_kwargs().get("decode_responses"):
                raise InvalidStoreInputError(
                    "RedisStore needs a client made with decode_responses=False"
                )
            self._redis = conn
            self._owns_client = False
        else:
            self._redis = redis.Redis.from_url(conn)
            self._owns_client = True
        self.key_prefix = key_prefix
        self._p = key_prefix.encode("utf-8")
        self._slack_ms = (
            None if native_expiry_slack is None else math.ceil(native_expiry_slack * 1000)
        )
        self._put_script = self._redis.register_script(_LUA_PUT)
        self._get_script = self._redis.register_script(_LUA_GET)
        self._delete_script = self._redis.register_script(_LUA_DELETE)
        self._lock = threading.Lock()
        self._checked = False
        self._closed = False

    # -- lifecycle -----------------------------------------------------------------------------

    @classmethod
    def from_conn_string(cls, url: str, **options: Any) -> RedisStore:
        """A store on ``url`` (LangGraph's spelling); use it as ``with ... as store:``."""
        return cls(url, **options)

    def setup(self) -> None:
        """Check that the keys under ``key_prefix`` use a layout this version understands.

        Redis needs no tables, so this is all there is; the store does it on first use too.
        """
        self._client()

    def close(self) -> None:
        """Close the client if the store made it; later calls raise ``ThreadlineError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._owns_client:
            self._redis.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"RedisStore(key_prefix={self.key_prefix!r}, {state})"

    def _client(self) -> redis.Redis:
        """The client, once the layout version under the prefix is known to be ours."""
        if self._closed:
            raise StoreUnavailableError(f"RedisStore(key_prefix={self.key_prefix!r}) is closed")
        if not self._checked:
            version_key = self._p + b"version"
            self._redis.set(version_key, SCHEMA_VERSION, nx=True)
            found = int(self._redis.get(version_key) or SCHEMA_VERSION)
            if found > SCHEMA_VERSION:
                raise StoreUnavailableError(
                    f"Redis store under {self.key_prefix!r} has layout version {found}, newer "
                    f"than this threadline understands ({SCHEMA_VERSION}); upgrade threadline"
                )
            self._checked = True
        return self._redis

    # -- keys ----------------------------------------------------------------------------------

    def _keys(self, namespace: Namespace, member: bytes) -> list[bytes]:
        """KEYS for the scripts: item, exp, nscount, ns, then P idx down to the namespace."""
        levels = [self._index_key(namespace[:n]) for n in range(len(namespace) + 1)]
        p = self._p
        return [p + b"item:" + member, p + b"exp", p + b"nscount", p + b"ns", *levels]

    def _index_key(self, prefix: Namespace) -> bytes:
        if not prefix:
            return self._p + b"idx"
        return self._p + b"idx:" + ".".join(prefix).encode("utf-8")

    # -- hooks ---------------------------------------------------------------------------------

    def _put(
        self,
        namespace: Namespace,
        key: str,
        value: dict[str, Any],
        now: datetime,
        ttl: float | None,
        vectors: FieldVectors | None,
    ) -> None:
        check_utf8(namespace, key)
        text = encode_value(value)
        client = self._client()
        ns = ".".join(namespace)
        member = _member(ns, key)
        now_us = to_micros(now)
        ttl_us = ttl_micros(ttl)
        pexpire = ""
        if ttl_us is not None and self._slack_ms is not None:
            pexpire = str(-(-ttl_us // 1000) + self._slack_ms)
        self._put_script(
            keys=self._keys(namespace, member),
            args=[
                member,
                ns,
                text,
                now_us,
                "" if ttl_us is None else now_us + ttl_us,
                "" if ttl_us is None else ttl_us,
                -now_us,
                pexpire,
            ],
            client=client,
        )

    def _get(self, namespace: Namespace, key: str, now: datetime, refresh: bool) -> Item | None:
        if not utf8_encodable(namespace, key):
            return None
        client = self._client()
        ns = ".".join(namespace)
        member = _member(ns, key)
        slack = "" if self._slack_ms is None else self._slack_ms
        found = self._get_script(
            keys=self._keys(namespace, member),
            args=[member, ns, to_micros(now), "1" if refresh else "0", slack],
            client=client,
        )
        if found is None:
            return None
        return _item(namespace, key, *found)

    def _search(
        self,
        prefix: Namespace,
        conditions: list[Condition],
        limit: int,
        offset: int,
        now: datetime,
        query: Vector | None,
    ) -> list[SearchItem]:
        if limit == 0 or not utf8_encodable(prefix, ""):
            return []
        client = self._client()
        now_us = to_micros(now)
        self._purge(client, now_us)
        index = self._index_key(prefix)
        # After the purge every indexed item is live, so without a filter offset is a rank.
        start, skip = (0, offset) if conditions else (offset, 0)
        chunk = _CHUNK if conditions else limit
        found: list[SearchItem] = []
        seen: set[bytes] = set()  # a concurrent update can move an item into a later chunk
        while len(found) < limit:
            # replies are bytes: the client has decode_responses=False (checked in __init__)
            members = cast("list[bytes]", client.zrange(index, start, start + chunk - 1))
            if not members:
                break
            start += len(members)
            with client.pipeline(transaction=False) as pipe:
                for member in members:
                    pipe.hmget(self._p + b"item:" + member, "v", "c", "u", "e")
                rows = pipe.execute()
            for member, (text, created, updated, expires) in zip(members, rows, strict=True):
                if text is None or member in seen:
                    continue  # deleted since the ZRANGE
                seen.add(member)
                if expires and int(expires) <= now_us:
                    continue
                value = decode_value(text)
                if not matches(value, conditions):
                    continue
                if skip:
                    skip -= 1
                    continue
                namespace, key = _parse_member(member)
                item = _item(namespace, key, value, created, updated, expires)
                found.append(as_search_item(item, None))
                if len(found) == limit:
                    break
            if len(members) < chunk:
                break
            chunk = _CHUNK
        return found

    def _delete(self, namespace: Namespace, key: str) -> None:
        if not utf8_encodable(namespace, key):
            return
        client = self._client()
        ns = ".".join(namespace)
        member = _member(ns, key)
        self._delete_script(
            keys=self._keys(namespace, member), args=[member, ns, ""], client=client
        )

    def _list_namespaces(
        self,
        prefix: Namespace,
        suffix: Namespace,
        max_depth: int | None,
        limit: int,
        offset: int,
        now: datetime,
    ) -> list[Namespace]:
        if not (utf8_encodable(prefix, "") and utf8_encodable(suffix, "")):
            return []
        client = self._client()
        self._purge(client, to_micros(now))
        if prefix:
            text = ".".join(prefix).encode("utf-8")
            # From the prefix itself up to (not including) text + "/", the byte after ".".
            low, high = b"[" + text, b"(" + text + b"/"
        else:
            low, high = b"-", b"+"
        texts = cast("list[bytes]", client.zrangebylex(self._p + b"ns", low, high))
        names = {
            namespace[:max_depth]
            for namespace in _split_all(texts)
            if namespace_matches(namespace, prefix, suffix)
        }
        return sorted(names)[offset : offset + limit]

    # -- expiry --------------------------------------------------------------------------------

    def sweep_expired(self) -> int:
        """Delete every item expired by the store's clock now; returns how many went."""
        return self._purge(self._client(), to_micros(self._now()))

    def _purge(self, client: redis.Redis, now_us: int) -> int:
        """Drop the items ``P exp`` lists as expired by ``now_us``, with their index entries."""
        dropped = 0
        while True:
            members = cast(
                "list[bytes]",  # decode_responses=False
                client.zrangebyscore(self._p + b"exp", "-inf", now_us, start=0, num=_PURGE_BATCH),
            )
            if not members:
                return dropped
            with client.pipeline(transaction=False) as pipe:
                for member in members:
                    namespace, _ = _parse_member(member)
                    self._delete_script(
                        keys=self._keys(namespace, member),
                        args=[member, ".".join(namespace), now_us],
                        client=pipe,
                    )
                results: list[int] = pipe.execute()
            dropped += sum(results)
            if len(members) < _PURGE_BATCH or not any(results):
                return dropped


# -- members ------------------------------------------------------------------------------------


def _member(ns: str, key: str) -> bytes:
    escaped = ns.encode("utf-8").replace(b"\x01", b"\x01\x02").replace(b"\x00", b"\x01\x01")
    return escaped + b"\x00" + key.encode("utf-8")


def _parse_member(member: bytes) -> tuple[Namespace, str]:
    escaped, _, key = member.partition(b"\x00")
    ns = escaped.replace(b"\x01\x01", b"\x00").replace(b"\x01\x02", b"\x01")
    return tuple(ns.decode("utf-8").split(".")), key.decode("utf-8")


def _split_all(texts: Iterable[bytes]) -> Iterable[Namespace]:
    return (tuple(text.decode("utf-8").split(".")) for text in texts)


def _item(
    namespace: Namespace,
    key: str,
    value: bytes | dict[str, Any],
    created: bytes,
    updated: bytes,
    expires: bytes,
) -> Item:
    return Item(
        value=decode_value(value) if isinstance(value, bytes) else value,
        key=key,
        namespace=namespace,
        created_at=from_micros(int(created)),
        updated_at=from_micros(int(updated)),
        expires_at=from_micros(int(expires)) if expires else None,
    )
