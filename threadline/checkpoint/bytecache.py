"""Verified bytes of large stored blobs, kept between loads in this process.

Loading a thread's newest state reads its values again on every ``invoke``; for a long
conversation that is one large full blob (hundreds of KB) read, copied and checksummed each
time, although it never changes. Stored bytes are immutable and a version's value never
changes, so the bytes already read (or just written) can be reused safely: the cache hands out
bytes, never decoded objects, so nothing a node does to its state can reach it. Keys include the
blob's CRC-32, so a row rewritten meanwhile (say by another process) can never be mistaken for
the cached one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

#: Blobs at least this large are worth caching (smaller ones come with their row anyway).
MIN_BYTES = 64 * 1024
#: Default bound on the bytes kept, per saver.
MAX_BYTES = 64 * 1024 * 1024

Key = tuple[str, str, str, str, int]  # thread, namespace, key, version, crc32


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
