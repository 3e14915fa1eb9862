"""An in-process saver for tests, notebooks and short-lived runs.

It keeps *encoded* rows, not live objects: mutating a state value after a save cannot rewrite
history, and a value that cannot be serialized fails here exactly as it would on disk. It is
``core.CoreSaver`` over dicts behind a lock (``MemoryBackend``), so values are stored as on
SQLite: one blob per ``(key, version)``, a list that grew as a delta (compacted), small scalars
in the checkpoint's own bytes; a long conversation costs about its own size, and each save
encodes only what is new.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from threadline.checkpoint.backend import Pair, StoredCheckpoint, ThreadRow
from threadline.checkpoint.base import Retention, ThreadStatus
from threadline.checkpoint.core import CoreSaver
from threadline.checkpoint.layout import REPLACE, BlobRow, CheckpointRow, WriteRow
from threadline.checkpoint.rules import now_iso
from threadline.serde import Serializer

__all__ = ["InMemorySaver", "MemoryBackend", "MemorySaver"]

_Key = tuple[str, str]  # (thread_id, checkpoint_ns)


@dataclass(slots=True)
class _Thread:
    status: ThreadStatus
    updated_at: str  # of the last ``set_thread``


class MemoryBackend:
    """Rows in dicts; a transaction holds one lock (nothing to roll back: the core checks
    everything before it writes)."""

    compaction = REPLACE
    in_process = True  # no I/O: async calls need no worker thread

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._checkpoints: dict[_Key, dict[str, CheckpointRow]] = {}
        self._heads: dict[_Key, str] = {}
        self._blobs: dict[_Key, dict[Pair, BlobRow]] = {}
        # (thread, ns, checkpoint id) -> (task id, kind) -> write; dicts keep insertion order,
        # and replacing a key keeps its original position.
        self._writes: dict[tuple[str, str, str], dict[Pair, WriteRow]] = {}
        self._threads: dict[str, _Thread] = {}

    def transaction(self, write: bool) -> MemoryBackend:
        """Itself, holding its lock while in a ``with`` block."""
        return self

    def __enter__(self) -> MemoryBackend:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()

    def close(self) -> None:
        """Nothing to release."""

    def loaded(
        self, thread_id: str, ns: str, versions: Mapping[str, str], pool: Mapping[Pair, BlobRow]
    ) -> None:
        """Rows are in memory already: nothing to hold."""

    def blob(self, thread_id: str, ns: str, key: str, version: str) -> BlobRow | None:
        blobs = self._blobs.get((thread_id, ns))  # one dict read each: safe without the lock
        return blobs.get((key, version)) if blobs is not None else None

    # -- reads ---------------------------------------------------------------------------------

    def head(self, thread_id: str, ns: str) -> str | None:
        return self._heads.get((thread_id, ns))

    def status(self, thread_id: str) -> ThreadStatus | None:
        thread = self._threads.get(thread_id)
        return thread.status if thread is not None else None

    def checkpoint(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        key = (thread_id, ns)
        if checkpoint_id is None:
            checkpoint_id = self._heads.get(key)
            if checkpoint_id is None:
                return None
        row = self._checkpoints.get(key, {}).get(checkpoint_id)
        if row is None:
            return None
        writes = self._writes.get((thread_id, ns, checkpoint_id))
        return StoredCheckpoint(row, tuple(writes.values()) if writes else ())

    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> list[StoredCheckpoint]:
        by_id = self._checkpoints.get((thread_id, ns), {})
        ids = sorted((cid for cid in by_id if before is None or cid < before), reverse=True)
        found = [self.checkpoint(thread_id, ns, cid) for cid in ids[:limit]]
        return [stored for stored in found if stored is not None]

    def values(
        self, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], None]:
        blobs = self._blobs.get((thread_id, ns), {})
        found: dict[Pair, BlobRow] = {}
        pairs = wanted[0].items() if len(wanted) == 1 else [p for v in wanted for p in v.items()]
        for key, version in pairs:
            ref: str | None = version
            while ref is not None and (key, ref) not in found:
                row = blobs.get((key, ref))
                if row is None:
                    break
                found[(key, ref)] = row
                ref = row.base
        return found, None

    def blob_meta(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> dict[Pair, BlobRow]:
        blobs = self._blobs.get((thread_id, ns), {})
        return {kv: blobs[kv] for kv in pairs if kv in blobs}

    def all_blob_meta(self, thread_id: str, ns: str) -> dict[Pair, BlobRow]:
        return dict(self._blobs.get((thread_id, ns), {}))

    def ids(self, thread_id: str, ns: str) -> list[tuple[str, str]]:
        by_id = self._checkpoints.get((thread_id, ns), {})
        return [(cid, by_id[cid].created_at) for cid in sorted(by_id, reverse=True)]

    def bodies(self, thread_id: str, ns: str) -> list[tuple[str, bytes]]:
        return [(cid, row.body) for cid, row in self._checkpoints.get((thread_id, ns), {}).items()]

    def namespaces(self, thread_id: str) -> list[str]:
        return [ns for (t, ns) in self._checkpoints if t == thread_id]

    def threads(self, status: ThreadStatus | None, limit: int | None) -> list[ThreadRow]:
        rows = []
        for thread_id, thread in self._threads.items():
            if status is not None and thread.status != status:
                continue
            head = self._checkpoints[(thread_id, "")][self._heads[(thread_id, "")]]
            at = max(thread.updated_at, head.created_at)
            rows.append(ThreadRow(thread_id, thread.status, head.checkpoint_id, at, head.body))
        rows.sort(key=lambda r: (r.updated_at, r.thread_id), reverse=True)
        return rows[:limit] if limit is not None else rows

    # -- writes --------------------------------------------------------------------------------

    def insert(
        self,
        thread_id: str,
        ns: str,
        row: CheckpointRow,
        blobs: Sequence[BlobRow],
        prefixes: Sequence[BlobRow],
    ) -> None:
        key = (thread_id, ns)
        if blobs or prefixes:
            stored = self._blobs.get(key)
            if stored is None:
                stored = self._blobs[key] = {}
            for b in blobs:
                if (b.key, b.version) not in stored:
                    stored[(b.key, b.version)] = b
            self._prefix(stored, prefixes)
        checkpoints = self._checkpoints.get(key)
        if checkpoints is None:
            checkpoints = self._checkpoints[key] = {}
        checkpoints[row.checkpoint_id] = row
        self._heads[key] = row.checkpoint_id

    @staticmethod
    def _prefix(stored: dict[Pair, BlobRow], prefixes: Sequence[BlobRow]) -> None:
        """Compaction: rewrite versions as prefixes of a newer full blob, and point the prefix
        rows that led to them at that blob too."""
        targets: dict[Pair, BlobRow] = {}
        for p in prefixes:
            if (p.key, p.version) in stored:
                stored[(p.key, p.version)] = targets[(p.key, p.version)] = p
        if not targets:
            return
        for kv, row in stored.items():
            target = targets.get((row.key, row.base or "")) if row.is_prefix else None
            if target is not None and kv not in targets:
                base = target.base
                stored[kv] = BlobRow(row.key, row.version, base, base, 0, target.full_bytes, b"",
                                     row.items)  # fmt: skip

    def add_writes(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None:
        bucket = self._writes.setdefault((thread_id, ns, checkpoint_id), {})
        for w in writes:
            bucket[(w.task_id, w.kind)] = w

    def set_thread(
        self, thread_id: str, status: ThreadStatus, head: str, next_names: Sequence[str]
    ) -> None:
        self._threads[thread_id] = _Thread(status, now_iso())

    def delete(self, thread_id: str, ns: str, ids: Collection[str]) -> None:
        key = (thread_id, ns)
        by_id = self._checkpoints[key]
        for cid in ids:
            by_id.pop(cid, None)
            self._writes.pop((thread_id, ns, cid), None)
        if by_id:
            self._heads[key] = max(by_id)
            return
        del self._checkpoints[key]
        self._heads.pop(key, None)
        if ns == "":
            self._threads.pop(thread_id, None)

    def delete_blobs(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> None:
        blobs = self._blobs.get((thread_id, ns), {})
        for kv in pairs:
            blobs.pop(kv, None)
        if not blobs:
            self._blobs.pop((thread_id, ns), None)

    def delete_thread(self, thread_id: str) -> None:
        for store in (self._checkpoints, self._heads, self._blobs):
            for key in [k for k in store if k[0] == thread_id]:
                del store[key]
        for wkey in [k for k in self._writes if k[0] == thread_id]:
            del self._writes[wkey]
        self._threads.pop(thread_id, None)

    def copy_thread(self, source: str, target: str) -> None:
        self.delete_thread(target)  # writes or blobs left without checkpoints
        for (thread_id, ns), rows in list(self._checkpoints.items()):
            if thread_id == source:
                self._checkpoints[(target, ns)] = dict(rows)
                self._heads[(target, ns)] = self._heads[(source, ns)]
                self._blobs[(target, ns)] = dict(self._blobs.get((source, ns), {}))
        for (thread_id, ns, cid), bucket in list(self._writes.items()):
            if thread_id == source:
                self._writes[(target, ns, cid)] = dict(bucket)
        thread = self._threads.get(source)
        if thread is not None:
            self._threads[target] = _Thread(thread.status, now_iso())


class InMemorySaver(CoreSaver):
    """Keeps checkpoints in this process's memory (lost on exit). Safe to share between threads.

    ``retention`` prunes a thread's older checkpoints each time one is saved.
    ``copy_thread`` raises ``ValueError`` if the target thread already has checkpoints.
    """

    backend: MemoryBackend

    def __init__(
        self, *, retention: Retention | None = None, serde: Serializer | None = None
    ) -> None:
        super().__init__(MemoryBackend(), retention=retention, serde=serde)

    def __repr__(self) -> str:
        threads = len(self.backend._threads)
        return f"InMemorySaver(threads={threads}, retention={self.retention!r})"


MemorySaver = InMemorySaver
