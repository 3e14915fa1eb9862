"""Verified bytes of large stored blobs, kept between loads in this process.

A long conversation's newest state holds a large full blob that every ``invoke`` would read,
copy and checksum again although it never changes. Stored bytes are immutable, so bytes already
read (or just written) are reused; the cache hands out bytes, never decoded objects, and its
keys include the blob's CRC-32, so a row rewritten meanwhile is never taken for the cached one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

#: Blobs at least this large are worth caching (smaller ones come with their row anyway).
MIN_BYTES = 64 * 1024
#: Default bound on the bytes kept, per saver.
MAX_BYTES = 64 * 1024 * 1024

Key = tuple[str, str, str, str, int]  # thread, namespace, key, version, crc32
_K = TypeVar("_K")
_V = TypeVar("_V")


def bounded_set(cache: OrderedDict[_K, _V], key: _K, value: _V, most: int) -> None:
    """``cache[key] = value`` as its newest entry, the oldest dropped beyond ``most``."""
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > most:
        cache.popitem(last=False)


class ByteCache:
    """A least-recently-used map of blob bytes, bounded by their total size."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self._max = max_bytes
        self._size = 0
        self._lock = threading.Lock()
        self._blobs: OrderedDict[Key, bytes] = OrderedDict()

    def get(self, key: Key) -> bytes | None:
        with self._lock:
            data = self._blobs.get(key)
            if data is not None:
                self._blobs.move_to_end(key)
            return data

    def add(self, key: Key, data: bytes) -> None:
        if len(data) < MIN_BYTES or len(data) > self._max:
            return
        with self._lock:
            old = self._blobs.pop(key, None)
            self._size += len(data) - (len(old) if old is not None else 0)
            self._blobs[key] = data
            while self._size > self._max:
                _, dropped = self._blobs.popitem(last=False)
                self._size -= len(dropped)

    def forget_thread(self, thread_id: str) -> None:
        with self._lock:
            for key in [k for k in self._blobs if k[0] == thread_id]:
                self._size -= len(self._blobs.pop(key))

    def clear(self) -> None:
        with self._lock:
            self._blobs.clear()
            self._size = 0


H = TypeVar("H", bound=Hashable)


class HeldBlobs(Generic[H]):
    """Verified bytes of a saver's large blobs, and which blobs of each (thread, namespace)
    they are, by a handle the saver picks (a key suffix, a ``(key, version)`` pair).

    A load names the held blobs to the server with their CRC-32, and the server leaves out the
    data of those whose stored checksum still matches: one round trip, no large value resent.
    Filled after a put and after a load that checked the bytes against their stored checksum.
    """

    def __init__(self, per_namespace: int, max_bytes: int = MAX_BYTES) -> None:
        self._per_namespace = per_namespace
        self._bytes = ByteCache(max_bytes)
        # Namespaces beyond what the cache could hold blobs for go, least recently used first.
        self._namespaces = max(1, max_bytes // MIN_BYTES)
        self._lock = threading.Lock()
        self._index: OrderedDict[tuple[str, str], OrderedDict[H, Key]] = OrderedDict()

    def add(
        self,
        thread_id: str,
        ns: str,
        handle: H,
        key: str,
        version: str,
        crc: int,
        data: bytes,
    ) -> None:
        """Keep the bytes of a blob just written or read (and verified); small ones are not.

        ``crc`` is the CRC-32 stored with the blob (``seals.blob_crc``), which loads name.
        """
        if len(data) < MIN_BYTES:
            return
        cache_key = (thread_id, ns, key, version, crc)
        self._bytes.add(cache_key, data)
        with self._lock:
            held = self._index.setdefault((thread_id, ns), OrderedDict())
            self._index.move_to_end((thread_id, ns))
            held[handle] = cache_key
            held.move_to_end(handle)
            while len(held) > self._per_namespace:
                held.popitem(last=False)
            while len(self._index) > self._namespaces:
                self._index.popitem(last=False)

    def held(self, thread_id: str, ns: str) -> dict[H, tuple[int, bytes]]:
        """``handle -> (crc32, bytes)`` of the namespace's blobs held now.

        The bytes are returned, not just named: the cache may drop them before the load that
        named them comes back.
        """
        found: dict[H, tuple[int, bytes]] = {}
        with self._lock:
            held = self._index.get((thread_id, ns))
            if not held:
                return found
            self._index.move_to_end((thread_id, ns))
            for handle, cache_key in list(held.items()):
                data = self._bytes.get(cache_key)
                if data is None:  # dropped by the cache
                    del held[handle]
                else:
                    found[handle] = (cache_key[4], data)
        return found

    def drop(self, thread_id: str, ns: str, handles: Iterable[H]) -> None:
        """Stop naming these blobs (pruned, or rewritten as prefix rows); their bytes age out."""
        with self._lock:
            held = self._index.get((thread_id, ns))
            if held is not None:
                for handle in handles:
                    held.pop(handle, None)

    def forget_thread(self, thread_id: str) -> None:
        self._bytes.forget_thread(thread_id)
        with self._lock:
            for k in [k for k in self._index if k[0] == thread_id]:
                del self._index[k]

    def clear(self) -> None:
        with self._lock:
            self._bytes.clear()
            self._index.clear()
