"""What this process knows of stored blobs: their metadata, so that a delta can be encoded
without asking Redis first. (The bytes of large ones are ``bytecache.HeldBlobs``.)"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from threadline.checkpoint.layout import BlobRow

CACHE_SIZE = 20_000  # blob metadata entries kept for delta encoding


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
