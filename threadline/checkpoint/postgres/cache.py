"""What the PostgreSQL saver remembers of stored blobs: their metadata, so a list delta needs no
query. (The bytes of large ones are ``bytecache.HeldBlobs``; rows of chains, ``chains.py``.)"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable

from threadline.checkpoint.layout import BlobRow

CACHE_SIZE = 50_000


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
