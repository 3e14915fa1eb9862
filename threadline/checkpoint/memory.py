"""An in-process saver for tests, notebooks and short-lived runs.

It keeps *encoded* bytes, not live objects: mutating a state value after a save cannot rewrite
history, and a value that cannot be serialized fails here exactly as it would on disk. Values
are stored with the shared layout (``threadline.checkpoint.layout``), one blob per ``(key,
version)``: a value that did not change is neither encoded nor stored again, and a list that
grew stores its new items as a delta (compacted as on SQLite), so a long conversation costs
about its own size, not the square of it, and each save encodes only what is new. Small scalars
(``layout.inlined``) live in each checkpoint's own bytes instead, as on SQLite: a step that
moves a counter encodes one thing less.
"""

from __future__ import annotations

import builtins
import dataclasses
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline.checkpoint.base import (
    BaseSaver,
    CheckpointRecord,
    Retention,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
    metadata_matches,
)
from threadline.checkpoint.bodies import decode_metadata, wanted_blobs
from threadline.checkpoint.layout import (
    BlobRow,
    CheckpointRow,
    WriteRow,
    blob_refs,
    checkpoint_values,
    decode_write,
    encode_record,
    encode_writes,
    full_blobs,
    referenced_blobs,
)
from threadline.checkpoint.rules import (
    age_cutoff,
    check_keep_last,
    check_put,
    created_ts,
    status_of,
)
from threadline.clock import iso_at
from threadline.serde import DEFAULT, Serializer

__all__ = ["InMemorySaver", "MemorySaver"]


# --------------------------------------------------------------------------------------------
# The saver
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Stored:
    row: CheckpointRow
    versions: dict[str, str]  # a private copy: which blobs hold the values (not inline ones)
    next: tuple[str, ...]  # names of the planned tasks (for list_threads)


_Key = tuple[str, str]  # (thread_id, checkpoint_ns)
_WriteKey = tuple[str, str]  # (task_id, kind)
_Snapshot = tuple[_Stored, dict[tuple[str, str], BlobRow], tuple[WriteRow, ...]]


class InMemorySaver(BaseSaver):
    """Keeps checkpoints in this process's memory (lost on exit). Safe to share between threads.

    ``retention`` prunes a thread's older checkpoints each time one is saved.
    ``copy_thread`` raises ``ValueError`` if the target thread already has checkpoints.
    """

    in_process = True  # dicts behind a lock: no I/O, so async calls need no worker thread

    def __init__(
        self, *, retention: Retention | None = None, serde: Serializer | None = None
    ) -> None:
        self.retention = retention
        self.serde = serde or DEFAULT
        self._lock = threading.RLock()
        # (thread, ns) -> checkpoint id -> stored row
        self._checkpoints: dict[_Key, dict[str, _Stored]] = {}
        self._heads: dict[_Key, str] = {}
        # (thread, ns) -> (key, version) -> full blob
        self._blobs: dict[_Key, dict[tuple[str, str], BlobRow]] = {}
        # (thread, ns, checkpoint id) -> (task id, kind) -> write; dicts keep insertion order,
        # and replacing a key keeps its original position.
        self._writes: dict[tuple[str, str, str], dict[_WriteKey, WriteRow]] = {}
        # thread -> updated_at (increasing Unix microseconds, formatted only when listed), for
        # threads with a root-namespace checkpoint
        self._updated: dict[str, int] = {}
        self._last_update = 0

    def __repr__(self) -> str:
        return f"InMemorySaver(threads={len(self._updated)}, retention={self.retention!r})"

    # -- reading ------------------------------------------------------------------------------

    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        key = (thread_id, checkpoint_ns)
        with self._lock:
            if checkpoint_id is None:
                checkpoint_id = self._heads.get(key)
                if checkpoint_id is None:
                    return None
            stored = self._checkpoints.get(key, {}).get(checkpoint_id)
            if stored is None:
                return None
            snapshot = self._snapshot(key, checkpoint_id, stored)
        return _decode(thread_id, checkpoint_ns, snapshot, self.serde)

    def list(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointRecord]:
        key = (thread_id, checkpoint_ns)
        with self._lock:
            by_id = self._checkpoints.get(key, {})
            ids = sorted((cid for cid in by_id if before is None or cid < before), reverse=True)
            snapshots = [self._snapshot(key, cid, by_id[cid]) for cid in ids]
        return _iter(thread_id, checkpoint_ns, snapshots, filter, limit, self.serde)

    def _snapshot(self, key: _Key, checkpoint_id: str, stored: _Stored) -> _Snapshot:
        blobs = self._blobs.get(key, {})
        rows = {kv: blobs[kv] for kv in referenced_blobs([stored.versions], blobs) if kv in blobs}
        writes = tuple(self._writes.get((*key, checkpoint_id), {}).values())
        return stored, rows, writes

    def list_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> builtins.list[ThreadInfo]:
        if limit is not None and limit <= 0:
            return []
        with self._lock:
            infos = []
            for thread_id, updated_at in self._updated.items():
                head = self._heads[(thread_id, "")]
                stored = self._checkpoints[(thread_id, "")][head]
                writes = self._writes.get((thread_id, "", head), {})
                infos.append(
                    ThreadInfo(
                        thread_id=thread_id,
                        status=status_of(stored.next, writes),
                        checkpoint_id=head,
                        updated_at=iso_at(updated_at),
                        next=stored.next,
                    )
                )
        infos.sort(key=lambda i: (i.updated_at, i.thread_id), reverse=True)
        if status is not None:
            infos = [i for i in infos if i.status == status]
        return infos[:limit] if limit is not None else infos

    # -- writing ------------------------------------------------------------------------------

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        cp = record.checkpoint
        key = (record.thread_id, record.checkpoint_ns)
        # Stored rows never change, so reading them here without the lock is safe; a base pruned
        # meanwhile is found missing below. Encoding fails before anything is stored.
        have = self._blobs.get(key) or {}
        encoded = encode_record(record, lambda k, v: have.get((k, v)), self.serde, inline=True)
        refs = blob_refs(cp, encoded)
        stored = _Stored(encoded.row, refs, tuple([t.name for t in cp.next]))
        with self._lock:
            check_put(record, self._heads.get(key), fork=fork)
            rows = self._blobs.get(key)
            if rows is None:
                rows = self._blobs[key] = {}
            if refs or encoded.blobs:  # (a step that only moved small scalars has neither)
                # Nothing can fail after this.
                rows.update(self._new_blobs(record, encoded.blobs, refs, rows))
            for p in encoded.prefixes:  # compaction: the versions the new full blob holds
                if (p.key, p.version) in rows:
                    rows[(p.key, p.version)] = p
            checkpoints = self._checkpoints.get(key)
            if checkpoints is None:
                checkpoints = self._checkpoints[key] = {}
            checkpoints[cp.id] = stored
            self._heads[key] = cp.id
            if encoded.writes:
                self._store_writes((*key, cp.id), encoded.writes)
            if record.checkpoint_ns == "":
                self._touch(record.thread_id)
            if self.retention is not None:
                self._retain(key)

    def _new_blobs(
        self,
        record: CheckpointRecord,
        blobs: Sequence[BlobRow],
        refs: Mapping[str, str],
        rows: Mapping[tuple[str, str], BlobRow],
    ) -> dict[tuple[str, str], BlobRow]:
        """The blobs a put adds to ``rows``. Where the hints said "unchanged" but the value is
        not stored, or a delta's base went (a prune since it was encoded), the value is stored
        whole."""
        new = {(b.key, b.version): b for b in blobs if (b.key, b.version) not in rows}
        missing = [k for k, v in refs.items() if (k, v) not in rows and (k, v) not in new]
        gone = [b for b in new.values() if b.base is not None and (b.key, b.base) not in rows]
        missing += [b.key for b in gone]
        if missing:
            new.update({(b.key, b.version): b for b in full_blobs(record, missing, self.serde)})
        return new

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        encoded = encode_writes(writes, self.serde)
        if not encoded:
            return
        with self._lock:
            self._store_writes((thread_id, checkpoint_ns, checkpoint_id), encoded)
            if checkpoint_ns == "" and self._heads.get((thread_id, "")) == checkpoint_id:
                self._touch(thread_id)

    def _touch(self, thread_id: str) -> None:
        """Mark the thread updated now (under the lock): times only increase, so they order."""
        self._last_update = max(time.time_ns() // 1000, self._last_update + 1)
        self._updated[thread_id] = self._last_update

    def _store_writes(self, key: tuple[str, str, str], writes: Sequence[WriteRow]) -> None:
        if not writes:
            return
        bucket = self._writes.setdefault(key, {})
        for w in writes:
            bucket[(w.task_id, w.kind)] = w

    def delete_thread(self, thread_id: str) -> None:
        with self._lock:
            for store in (self._checkpoints, self._heads, self._blobs):
                for key in [k for k in store if k[0] == thread_id]:
                    del store[key]
            for wkey in [k for k in self._writes if k[0] == thread_id]:
                del self._writes[wkey]
            self._updated.pop(thread_id, None)

    # -- history ------------------------------------------------------------------------------

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        check_keep_last(keep_last)
        deleted = 0
        with self._lock:
            for key in [k for k in self._checkpoints if k[0] == thread_id]:
                ids = sorted(self._checkpoints[key], reverse=True)
                deleted += self._drop(key, ids[keep_last:])
        return deleted

    def _retain(self, key: _Key) -> None:
        retention = self.retention
        assert retention is not None
        by_id = self._checkpoints[key]
        ids = sorted(by_id, reverse=True)
        drop = set(ids[retention.max_checkpoints :]) if retention.max_checkpoints else set()
        cutoff = age_cutoff(retention)
        if cutoff is not None:
            drop.update(
                cid
                for cid in ids[1:]
                if (created := created_ts(by_id[cid].row.created_at)) is not None
                and created < cutoff
            )
        self._drop(key, drop)

    def _drop(self, key: _Key, ids: Iterable[str]) -> int:
        """Delete checkpoints of one namespace, their writes, and blobs no longer used."""
        by_id = self._checkpoints[key]
        count = 0
        for cid in ids:
            del by_id[cid]
            self._writes.pop((*key, cid), None)
            count += 1
        if not count:
            return 0
        if not by_id:
            del self._checkpoints[key]
            self._heads.pop(key, None)
            self._blobs.pop(key, None)
            if key[1] == "":
                self._updated.pop(key[0], None)
            return count
        blobs = self._blobs.get(key, {})
        used = referenced_blobs([stored.versions for stored in by_id.values()], blobs)
        for kv in [kv for kv in blobs if kv not in used]:
            del blobs[kv]
        return count

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of a thread to an empty thread id.

        Raises ``ValueError`` if the target already has checkpoints (including when it is the
        source); copying a thread that has none does nothing.
        """
        with self._lock:
            sources = [k for k in self._checkpoints if k[0] == source_thread_id]
            if any(k[0] == target_thread_id for k in self._checkpoints):
                raise ValueError(
                    f"cannot copy thread {source_thread_id!r} to {target_thread_id!r}: the "
                    "target already has checkpoints; delete it first or pick another id"
                )
            if not sources:
                return
            for wkey in [k for k in self._writes if k[0] == target_thread_id]:
                del self._writes[wkey]  # writes left against checkpoints that do not exist
            for _, ns in sources:
                src, dst = (source_thread_id, ns), (target_thread_id, ns)
                self._checkpoints[dst] = dict(self._checkpoints[src])
                self._heads[dst] = self._heads[src]
                self._blobs[dst] = dict(self._blobs.get(src, {}))
            for (thread_id, ns, cid), bucket in list(self._writes.items()):
                if thread_id == source_thread_id:
                    self._writes[(target_thread_id, ns, cid)] = dict(bucket)
            if (target_thread_id, "") in self._heads:
                self._touch(target_thread_id)


def _iter(
    thread_id: str,
    checkpoint_ns: str,
    snapshots: Sequence[_Snapshot],
    filter: Mapping[str, Any] | None,
    limit: int | None,
    codec: Serializer,
) -> Iterator[CheckpointRecord]:
    if limit is not None and limit <= 0:
        return
    count = 0
    for snapshot in snapshots:
        metadata = snapshot[0].row.metadata
        if filter and not metadata_matches(decode_metadata(metadata, codec), filter):
            continue
        yield _decode(thread_id, checkpoint_ns, snapshot, codec)
        count += 1
        if limit is not None and count >= limit:
            return


def _decode(
    thread_id: str, checkpoint_ns: str, snapshot: _Snapshot, codec: Serializer
) -> CheckpointRecord:
    stored, rows, writes = snapshot
    cp, _ = wanted_blobs(stored.row.body, codec)
    values = checkpoint_values(cp, rows, codec)
    return CheckpointRecord(
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        checkpoint=dataclasses.replace(cp, values=values),
        metadata=decode_metadata(stored.row.metadata, codec),
        pending_writes=tuple(decode_write(w, codec) for w in writes),
    )


MemorySaver = InMemorySaver
