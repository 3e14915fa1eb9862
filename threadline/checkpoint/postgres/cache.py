"""What the PostgreSQL saver remembers of stored blobs: their metadata, so a list delta needs no
query, and the bytes of large ones, so a load need not transfer them again."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

from threadline.checkpoint import bytecache
from threadline.checkpoint.bytecache import ByteCache
from threadline.checkpoint.layout import BlobRow

CACHE_SIZE = 50_000
_HELD_PER_NAMESPACE = 16  # a load names at most this many blobs it has


def _shape(row: BlobRow) -> tuple[object, ...]:
    """What the cache keeps of a row besides its key and version."""
    return (row.start, row.base, row.chain_bytes, row.full_bytes, row.items)


class BlobCache:
    """Metadata (no data) of stored blobs, by (thread, ns, key, version); a bounded LRU."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._rows: OrderedDict[tuple[str, str, str, str], BlobRow] = OrderedDict()

    def get(self, thread_id: str, checkpoint_ns: str, key: str, version: str) -> BlobRow | None:
        k = (thread_id, checkpoint_ns, key, version)
        with self._lock:
            row = self._rows.get(k)
            if row is not None:
                self._rows.move_to_end(k)
            return row

    def add(self, thread_id: str, checkpoint_ns: str, rows: Iterable[BlobRow]) -> None:
        with self._lock:
            for row in rows:
                k = (thread_id, checkpoint_ns, row.key, row.version)
                known = self._rows.get(k)
                # A load brings back every row of a chain: copy only what is new or changed.
                if known is None or _shape(known) != _shape(row):
                    self._rows[k] = row.without_data()
                self._rows.move_to_end(k)
            while len(self._rows) > self._size:
                self._rows.popitem(last=False)

    def discard(self, thread_id: str, keys: Iterable[tuple[str, str, str]]) -> None:
        """Forget ``(namespace, key, version)`` blobs of a thread."""
        with self._lock:
            for ns, key, version in keys:
                self._rows.pop((thread_id, ns, key, version), None)

    def drop(self, thread_id: str, checkpoint_ns: str | None = None) -> None:
        """Forget every blob of a thread (of one of its namespaces)."""
        with self._lock:
            doomed = [
                k
                for k in self._rows
                if k[0] == thread_id and (checkpoint_ns is None or k[1] == checkpoint_ns)
            ]
            for k in doomed:
                del self._rows[k]

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()


class HeldBytes:
    """Verified bytes of large blobs (a ``bytecache.ByteCache``), and which of them each
    (thread, namespace) has, so a load can name them and the server leave their data out.

    A blob is named by its ``(key, version)`` with the CRC-32 and length of the bytes held: the
    server sends the data of a row that differs (rewritten by another process, say) as usual.
    """

    def __init__(self, max_bytes: int = bytecache.MAX_BYTES) -> None:
        self._max_bytes = max_bytes
        self._bytes = ByteCache(max_bytes)
        # Namespaces are dropped least recently used first, when more than the cache could
        # hold blobs for; a namespace keeps its newest few blobs.
        self._namespaces = max(1, max_bytes // bytecache.MIN_BYTES)
        self._lock = threading.Lock()
        self._index: OrderedDict[tuple[str, str], dict[tuple[str, str], int]] = OrderedDict()

    def add(
        self, thread_id: str, checkpoint_ns: str, key: str, version: str, crc: int, data: bytes
    ) -> None:
        """Keep the bytes of a blob just written or read (and verified); small ones are not."""
        if len(data) < bytecache.MIN_BYTES:
            return
        self._bytes.add((thread_id, checkpoint_ns, key, version, crc), data)
        with self._lock:
            held = self._index.setdefault((thread_id, checkpoint_ns), {})
            held.pop((key, version), None)
            held[(key, version)] = crc
            while len(held) > _HELD_PER_NAMESPACE:
                del held[next(iter(held))]
            self._index.move_to_end((thread_id, checkpoint_ns))
            while len(self._index) > self._namespaces:
                self._index.popitem(last=False)

    def held(self, thread_id: str, checkpoint_ns: str) -> dict[tuple[str, str], tuple[int, bytes]]:
        """``(key, version) -> (crc32, bytes)`` of the namespace's blobs held here.

        The bytes are returned, not just named: the cache may drop them before the load that
        named them comes back.
        """
        found: dict[tuple[str, str], tuple[int, bytes]] = {}
        with self._lock:
            held = self._index.get((thread_id, checkpoint_ns))
            if not held:
                return found
            self._index.move_to_end((thread_id, checkpoint_ns))
            for kv, crc in list(held.items()):
                data = self._bytes.get((thread_id, checkpoint_ns, *kv, crc))
                if data is None:  # dropped by the cache
                    del held[kv]
                else:
                    found[kv] = (crc, data)
        return found

    def discard(self, thread_id: str, keys: Iterable[tuple[str, str, str]]) -> None:
        """Stop naming ``(namespace, key, version)`` blobs of a thread (deleted, or rewritten)."""
        with self._lock:
            for ns, key, version in keys:
                held = self._index.get((thread_id, ns))
                if held is not None:
                    held.pop((key, version), None)

    def forget_thread(self, thread_id: str) -> None:
        self._bytes.forget_thread(thread_id)
        with self._lock:
            for k in [k for k in self._index if k[0] == thread_id]:
                del self._index[k]

    def clear(self) -> None:
        with self._lock:
            self._bytes = ByteCache(self._max_bytes)
            self._index.clear()
