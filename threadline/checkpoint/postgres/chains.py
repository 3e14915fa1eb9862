"""The rows of long values this process holds, so that a load reads only what is new.

A list that grows by deltas is stored as a chain of rows: a full blob, then one delta per
version. Loading the newest version walks the whole chain, which by turn 200 of a conversation
is hundreds of rows. So the saver keeps, per (thread, namespace, key), the rows of the newest
chain it loaded or stored, from the full blob to the tip, with their verified bytes. A load names
each tip with its CRC-32; the server stops walking at a tip whose row still has that checksum,
and sends only the rows above it (new versions); the rows below come from here.

A version's value never changes, so held rows stay right even when the database later rewrites
them (compaction makes them prefix rows of a newer full blob). A tip rewritten meanwhile no
longer matches its checksum, and the server walks the whole chain as it would without this.
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from threadline.checkpoint.layout import BlobRow

#: Bytes held in all, per saver; chains are dropped least recently used first.
MAX_BYTES = 64 * 1024 * 1024
#: Chains smaller than this are not worth holding: their rows come with the load anyway.
MIN_BYTES = 16 * 1024

_Kv = tuple[str, str]  # (key, version)


@dataclass(slots=True)
class _Chain:
    tip: str
    crc: int  # of the tip row's data
    rows: dict[_Kv, BlobRow]
    size: int


class HeldChains:
    """Per (thread, namespace, key), the rows from a full blob up to the newest version held."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self._max = max_bytes
        self._size = 0
        self._lock = threading.Lock()
        # (thread, ns) -> key -> chain; namespaces least recently used first
        self._chains: OrderedDict[tuple[str, str], dict[str, _Chain]] = OrderedDict()

    def tips(self, thread_id: str, ns: str) -> dict[_Kv, tuple[int, bytes]]:
        """``(key, tip version) -> (crc32, data)`` of the namespace's chains."""
        with self._lock:
            chains = self._chains.get((thread_id, ns), {})
            return {(key, c.tip): (c.crc, c.rows[(key, c.tip)].data) for key, c in chains.items()}

    def rows_below(self, thread_id: str, ns: str, tips: Iterable[_Kv]) -> dict[_Kv, BlobRow]:
        """The held rows of the chains ending at ``tips`` (those the server stopped at)."""
        found: dict[_Kv, BlobRow] = {}
        with self._lock:
            chains = self._chains.get((thread_id, ns))
            if chains is None:
                return found
            self._chains.move_to_end((thread_id, ns))
            for key, version in tips:
                chain = chains.get(key)
                if chain is not None and chain.tip == version:
                    found.update(chain.rows)
        return found

    def remember(
        self, thread_id: str, ns: str, key: str, version: str, pool: Mapping[_Kv, BlobRow]
    ) -> None:
        """Hold the chain of ``version`` if ``pool`` has every row of it, down to a full blob
        (or to the tip held now: the rows above it extend that chain)."""
        with self._lock:
            held = self._chains.get((thread_id, ns), {}).get(key)
            if held is not None and held.tip == version:
                return
            tip, below = (held.tip, dict(held.rows)) if held is not None else (None, {})
        rows: dict[_Kv, BlobRow] = {}
        kv: _Kv | None = (key, version)
        while kv is not None:
            if kv[1] == tip:
                rows.update(below)
                break
            row = pool.get(kv)
            if row is None or kv in rows:
                return  # a row is missing (or the chain loops): nothing to hold
            rows[kv] = row
            kv = (key, row.base) if row.base is not None else None
        size = sum(len(r.data) for r in rows.values())
        crc = zlib.crc32(rows[(key, version)].data)
        self._put(thread_id, ns, key, _Chain(version, crc, rows, size))

    def extend(self, thread_id: str, ns: str, row: BlobRow, crc: int) -> None:
        """A row just stored: a delta on the held tip becomes the new tip."""
        with self._lock:
            chains = self._chains.get((thread_id, ns), {})
            chain = chains.get(row.key)
            if chain is None or row.base != chain.tip:
                return
            chain.rows[(row.key, row.version)] = row
            chain.tip, chain.crc = row.version, crc
            chain.size += len(row.data)
            self._size += len(row.data)
            if chain.size > self._max // 4:
                del chains[row.key]
                self._size -= chain.size

    def forget_thread(self, thread_id: str) -> None:
        with self._lock:
            for k in [k for k in self._chains if k[0] == thread_id]:
                self._size -= sum(c.size for c in self._chains.pop(k).values())

    def clear(self) -> None:
        with self._lock:
            self._chains.clear()
            self._size = 0

    def _put(self, thread_id: str, ns: str, key: str, chain: _Chain) -> None:
        """Hold ``chain`` in place of the key's previous one; small or huge ones are not held."""
        keep = MIN_BYTES <= chain.size <= self._max // 4
        with self._lock:
            chains = self._chains.setdefault((thread_id, ns), {})
            old = chains.pop(key, None)
            self._size -= old.size if old is not None else 0
            if keep:
                chains[key] = chain
                self._size += chain.size
            self._chains.move_to_end((thread_id, ns))
            while self._size > self._max and self._chains:
                _, dropped = self._chains.popitem(last=False)
                self._size -= sum(c.size for c in dropped.values())
