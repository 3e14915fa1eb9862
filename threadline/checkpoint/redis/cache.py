"""What this process knows of stored blobs: their metadata, so that a delta can be encoded
without asking Redis first (``BlobCache``), and the bytes of large ones, so that a load need not
transfer them again (``HeldBlobs``)."""

from __future__ import annotations

import dataclasses
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field

from threadline.checkpoint import bytecache
from threadline.checkpoint.bytecache import ByteCache
from threadline.checkpoint.layout import BlobRow

CACHE_SIZE = 20_000  # blob metadata entries kept for delta encoding
HELD_PER_NAMESPACE = 8  # large blobs of one (thread, namespace) a read names to the script


@dataclass
class BlobCache:
    """``BlobRow`` metadata (no data) by (thread, ns, key, version): ``layout.BaseLookup``.

    Filled from what this process wrote and read; a miss costs one lookup before a put.
    """

    size: int = CACHE_SIZE
    rows: OrderedDict[tuple[str, str, str, str], BlobRow] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, thread_id: str, ns: str, key: str, version: str) -> BlobRow | None:
        with self.lock:
            row = self.rows.get((thread_id, ns, key, version))
            if row is not None:
                self.rows.move_to_end((thread_id, ns, key, version))
            return row

    def put(self, thread_id: str, ns: str, row: BlobRow) -> None:
        meta = row if not row.data else dataclasses.replace(row, data=b"")
        with self.lock:
            self.rows[(thread_id, ns, meta.key, meta.version)] = meta
            self.rows.move_to_end((thread_id, ns, meta.key, meta.version))
            while len(self.rows) > self.size:
                self.rows.popitem(last=False)

    def drop(self, thread_id: str, ns: str | None = None) -> None:
        with self.lock:
            for k in [k for k in self.rows if k[0] == thread_id and ns in (None, k[1])]:
                del self.rows[k]

    def drop_one(self, thread_id: str, ns: str, key: str, version: str) -> None:
        with self.lock:
            self.rows.pop((thread_id, ns, key, version), None)


class HeldBlobs:
    """Verified bytes of large blobs (a ``ByteCache``), and which blobs of each (thread,
    namespace) they are: a read names those to the ``read`` script with their CRC-32, and the
    script sends only the header of a blob whose stored checksum is the same.

    Filled after a put and after a read that checked the bytes against their stored checksum.
    """

    def __init__(self, max_bytes: int = bytecache.MAX_BYTES) -> None:
        self.bytes = ByteCache(max_bytes)
        self._max_namespaces = max(1, max_bytes // bytecache.MIN_BYTES)
        self._lock = threading.Lock()
        # (thread, ns) -> blob suffix -> ByteCache key; least recently added first
        self._index: OrderedDict[tuple[str, str], OrderedDict[str, bytecache.Key]] = OrderedDict()

    def add(self, thread_id: str, ns: str, suffix: str, row: BlobRow, crc: int | None) -> None:
        """Keep ``row``'s bytes, if large enough; ``crc`` (None: computed) must be theirs."""
        if len(row.data) < bytecache.MIN_BYTES:
            return
        key = (
            thread_id,
            ns,
            row.key,
            str(row.version),
            zlib.crc32(row.data) if crc is None else crc,
        )
        self.bytes.add(key, row.data)
        with self._lock:
            blobs = self._index.setdefault((thread_id, ns), OrderedDict())
            self._index.move_to_end((thread_id, ns))
            blobs[suffix] = key
            blobs.move_to_end(suffix)
            while len(blobs) > HELD_PER_NAMESPACE:
                blobs.popitem(last=False)
            while len(self._index) > self._max_namespaces:
                self._index.popitem(last=False)

    def of(self, thread_id: str, ns: str) -> dict[str, tuple[int, bytes]]:
        """Blob suffix -> (CRC-32, bytes) of the blobs of (thread, ns) held now."""
        with self._lock:
            blobs = list(self._index.get((thread_id, ns), {}).items())
        held: dict[str, tuple[int, bytes]] = {}
        gone = []
        for suffix, key in blobs:
            data = self.bytes.get(key)
            if data is None:  # evicted from the ByteCache
                gone.append((suffix, key))
            else:
                held[suffix] = (key[4], data)
        if gone:
            with self._lock:
                index = self._index.get((thread_id, ns), {})
                for suffix, key in gone:
                    if index.get(suffix) == key:
                        del index[suffix]
        return held

    def drop(self, thread_id: str, ns: str, suffix: str) -> None:
        """Stop naming a blob (it was pruned, or became a prefix row); its bytes age out."""
        with self._lock:
            blobs = self._index.get((thread_id, ns))
            if blobs is not None:
                blobs.pop(suffix, None)

    def forget_thread(self, thread_id: str) -> None:
        with self._lock:
            for k in [k for k in self._index if k[0] == thread_id]:
                del self._index[k]
        self.bytes.forget_thread(thread_id)
