"""An in-process saver for tests, notebooks and short-lived runs: ``CoreSaver`` over dicts.

It keeps *encoded* bytes, not live objects: mutating a state value after a save cannot rewrite
history, and a value that cannot be serialized fails here exactly as it would on disk.

``MemoryBackend`` keeps the rows in dicts behind one lock. A put checks everything that can
refuse it before its first write, so a refused put leaves nothing. Other write transactions
(prune, copy, delete) change copies of the threads they touch and put the old ones back if they
fail. Each checkpoint keeps the blob versions its values use and the task names it plans, so
loading, pruning and listing threads decode nothing extra.
"""

from __future__ import annotations

import builtins
import time
from bisect import bisect_left
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from threading import Lock

from threadline.checkpoint.backend import (
    HeadMoved,
    Loaded,
    NextOf,
    Pair,
    Prepared,
    StoredCheckpoint,
    ThreadRow,
    VersionsOf,
)
from threadline.checkpoint.base import Retention, ThreadStatus
from threadline.checkpoint.core import CoreSaver
from threadline.checkpoint.layout import REPLACE, BlobRow, CheckpointRow, WriteRow, referenced_blobs
from threadline.checkpoint.rules import status_of
from threadline.checkpoint.transactional import OffLoopCalls, check_stored, retain
from threadline.clock import iso_at
from threadline.serde import Serializer

__all__ = ["InMemorySaver", "MemoryBackend", "MemorySaver"]

_Stored = tuple[CheckpointRow, Mapping[str, str], Sequence[str]]
"""A checkpoint: its row, the blob versions its values use, the task names it plans (root)."""


@dataclass(slots=True)
class _Space:
    """One namespace of a thread. ``rows`` are in id order: a put's id sorts after the head, and
    nothing else adds rows but copies, which keep the order."""

    rows: dict[str, _Stored] = field(default_factory=dict)
    blobs: dict[Pair, BlobRow] = field(default_factory=dict)
    writes: dict[str, dict[tuple[str, str], WriteRow]] = field(default_factory=dict)
    head: str | None = None  # the newest id (the last of ``rows``)

    def stored(self, checkpoint_id: str) -> StoredCheckpoint:
        writes = self.writes.get(checkpoint_id)
        return StoredCheckpoint(
            self.rows[checkpoint_id][0], tuple(writes.values()) if writes else ()
        )

    def add_writes(self, checkpoint_id: str, writes: Sequence[WriteRow]) -> None:
        """Same ``(task_id, kind)``: replaced in place (a dict keeps the first position)."""
        bucket = self.writes.get(checkpoint_id)
        if bucket is None:
            bucket = self.writes[checkpoint_id] = {}
        for w in writes:
            bucket[(w.task_id, w.kind)] = w

    def copy(self) -> _Space:
        writes = {cid: dict(bucket) for cid, bucket in self.writes.items()}
        return _Space(dict(self.rows), dict(self.blobs), writes, self.head)


@dataclass(slots=True)
class _Thread:
    spaces: dict[str, _Space] = field(default_factory=dict)
    updated: int = 0  # when the root last changed (increasing Unix µs): orders list_threads

    def copy(self) -> _Thread:
        return _Thread({ns: space.copy() for ns, space in self.spaces.items()}, self.updated)

    def root(self) -> tuple[str, _Stored, _Space] | None:
        """The root namespace's head, if it has one."""
        space = self.spaces.get("")
        head = space.head if space is not None else None
        if space is None or head is None:
            return None
        return head, space.rows[head], space


class MemoryBackend(OffLoopCalls):
    """Rows in dicts: thread -> namespace -> checkpoints (with their writes) and blobs.

    Rows are stored as the core made them (bytes) and never changed: a reader may keep them.
    """

    compaction = REPLACE
    in_process = True
    sealed = False

    def __init__(self) -> None:
        self._lock = Lock()
        self._threads: dict[str, _Thread] = {}
        self._last = 0  # the last thread time given (Unix µs)
        # Retention deletes in place, with no copy to put back: it runs once nothing can refuse
        # the put, and stopping midway would leave only rows nothing uses.
        self._in_place = _Tx(self, True, undo=False)

    def _now(self) -> int:
        """Unix time in µs, increasing (under the lock: no second lock, as ``clock`` takes)."""
        self._last = max(time.time_ns() // 1000, self._last + 1)
        return self._last

    @contextmanager
    def transaction(self, write: bool) -> Iterator[_Tx]:
        with self._lock:
            tx = _Tx(self, write)
            try:
                yield tx
            except BaseException:
                tx.rollback()
                raise

    def commit(self, put: Prepared) -> Sequence[Pair]:
        row = put.row
        with self._lock:
            thread = self._threads.get(put.thread_id)
            space = thread.spaces.get(put.ns) if thread is not None else None
            head = space.head if space is not None else None
            if not put.lands_on(head):
                raise HeadMoved(head)
            if put.check:
                blobs = space.blobs if space is not None else {}
                check_stored(put, head, lambda pairs: {p: blobs[p] for p in pairs if p in blobs})
            # Nothing can refuse the put after this.
            if thread is None or space is None:
                thread, space = self._created(put.thread_id, put.ns)
            cid = row.checkpoint_id
            space.rows[cid] = (row, put.refs, put.next_names)
            space.head = cid
            if put.blobs or put.prefixes:
                _add_blobs(space.blobs, put.blobs, put.prefixes)
            if put.writes:
                space.add_writes(cid, put.writes)
            if put.ns == "":  # as _now, inline: a put is the hot path
                thread.updated = self._last = max(time.time_ns() // 1000, self._last + 1)
            if put.retention is None:
                return ()
            return retain(self._in_place, put.thread_id, put.ns, cid, put.retention)

    def _created(self, thread_id: str, ns: str) -> tuple[_Thread, _Space]:
        """The thread and namespace, made if new."""
        thread = self._threads.get(thread_id)
        if thread is None:
            thread = self._threads[thread_id] = _Thread()
        space = thread.spaces.get(ns)
        if space is None:
            space = thread.spaces[ns] = _Space()
        return thread, space

    def commit_writes(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        writes: Sequence[WriteRow],
        next_of: NextOf,
    ) -> None:
        """The thread's status is read from the head's writes when threads are listed (the
        head keeps its task names): only the thread's time moves here."""
        with self._lock:
            thread, space = self._created(thread_id, ns)
            space.add_writes(checkpoint_id, writes)
            if ns == "" and space.head == checkpoint_id:
                thread.updated = self._now()

    def load(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Loaded | None:
        """The blob versions are kept with each checkpoint: ``versions_of`` is not needed."""
        with self._lock:
            thread = self._threads.get(thread_id)
            space = thread.spaces.get(ns) if thread is not None else None
            if space is None:
                return None
            if checkpoint_id is None:
                checkpoint_id = space.head
            stored = space.rows.get(checkpoint_id) if checkpoint_id is not None else None
            if stored is None or checkpoint_id is None:
                return None
            refs = stored[1]
            pool = _values(space.blobs, [refs]) if refs else {}
            return space.stored(checkpoint_id), pool, None

    def blob(self, thread_id: str, ns: str, key: str, version: str) -> BlobRow | None:
        """Read without the lock: one ``dict.get`` per level sees a whole dict either way (a
        write transaction swaps threads whole, a put only adds)."""
        thread = self._threads.get(thread_id)
        space = thread.spaces.get(ns) if thread is not None else None
        return space.blobs.get((key, version)) if space is not None else None

    def close(self) -> None:
        """Nothing to release (the rows stay)."""

    def thread_count(self) -> int:
        """Threads with a root checkpoint."""
        with self._lock:
            return sum(1 for thread in self._threads.values() if thread.root() is not None)


def _add_blobs(
    blobs: dict[Pair, BlobRow], new: Sequence[BlobRow], prefixes: Sequence[BlobRow]
) -> None:
    """A pair stored already is kept; ``prefixes`` (compaction) replace the rows of versions a
    new full blob holds."""
    for b in new:
        blobs.setdefault((b.key, b.version), b)
    for p in prefixes:
        if (p.key, p.version) in blobs:
            blobs[(p.key, p.version)] = p


def _values(
    blobs: Mapping[Pair, BlobRow], wanted: Sequence[Mapping[str, str]]
) -> dict[Pair, BlobRow]:
    return {pair: blobs[pair] for pair in referenced_blobs(wanted, blobs) if pair in blobs}


_NO_SPACE = _Space()


class _Tx:
    """One transaction over the threads (under the backend's lock). A write transaction
    changes a copy of each thread it touches, made when it first does; ``rollback`` puts the
    originals back. Without ``undo`` it changes them in place."""

    def __init__(self, backend: MemoryBackend, write: bool, *, undo: bool = True) -> None:
        self._backend = backend
        self._threads = backend._threads
        self._write = write
        self._undo: dict[str, _Thread | None] | None = {} if write and undo else None

    def rollback(self) -> None:
        for thread_id, original in (self._undo or {}).items():
            if original is None:
                self._threads.pop(thread_id, None)
            else:
                self._threads[thread_id] = original

    def _space(self, thread_id: str, ns: str) -> _Space:
        """The namespace, or an empty one (to read only) if it has no rows."""
        thread = self._threads.get(thread_id)
        space = thread.spaces.get(ns) if thread is not None else None
        return space if space is not None else _NO_SPACE

    def _replace(self, thread_id: str, thread: _Thread | None) -> None:
        assert self._write, "a write in a read transaction"
        if self._undo is not None:
            self._undo.setdefault(thread_id, self._threads.get(thread_id))
        if thread is None:
            self._threads.pop(thread_id, None)
        else:
            self._threads[thread_id] = thread

    def _own(self, thread_id: str) -> _Thread | None:
        """The thread, copied the first time this transaction changes it (unless no ``undo``)."""
        assert self._write, "a write in a read transaction"
        thread = self._threads.get(thread_id)
        if thread is None or self._undo is None or thread_id in self._undo:
            return thread
        mine = thread.copy()
        self._replace(thread_id, mine)
        return mine

    # -- reads ---------------------------------------------------------------------------------
    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> builtins.list[StoredCheckpoint]:
        space = self._space(thread_id, ns)
        ids = list(space.rows)
        end = len(ids) if before is None else bisect_left(ids, before)
        return [space.stored(cid) for cid in reversed(ids[max(0, end - limit) : end])]

    def values(
        self, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], None]:
        return _values(self._space(thread_id, ns).blobs, wanted), None

    def all_blob_meta(self, thread_id: str, ns: str) -> dict[Pair, BlobRow]:
        """With their data: in memory, leaving it out would only cost a copy of each row."""
        return dict(self._space(thread_id, ns).blobs)

    def versions(self, thread_id: str, ns: str) -> builtins.list[Mapping[str, str]]:
        return [stored[1] for stored in self._space(thread_id, ns).rows.values()]

    def ids(self, thread_id: str, ns: str) -> builtins.list[tuple[str, str]]:
        rows = self._space(thread_id, ns).rows
        return [(cid, stored[0].created_at) for cid, stored in reversed(rows.items())]

    def bodies(self, thread_id: str, ns: str) -> builtins.list[tuple[str, bytes]]:
        return [(cid, stored[0].body) for cid, stored in self._space(thread_id, ns).rows.items()]

    def namespaces(self, thread_id: str) -> builtins.list[str]:
        thread = self._threads.get(thread_id)
        spaces = thread.spaces if thread is not None else {}
        return sorted(ns for ns, space in spaces.items() if space.rows)

    def threads(self, status: ThreadStatus | None, limit: int | None) -> builtins.list[ThreadRow]:
        found = []
        for thread_id, thread in self._threads.items():
            root = thread.root()
            if root is None:
                continue
            head, (row, _, names), space = root
            writes = space.writes.get(head, {})
            now = status_of(names, writes)
            if status is None or now == status:
                at = max(iso_at(thread.updated), row.created_at)
                found.append(ThreadRow(thread_id, now, head, at, row.body))
        found.sort(key=lambda r: (r.updated_at, r.thread_id), reverse=True)
        return found[:limit] if limit is not None else found

    # -- writes --------------------------------------------------------------------------------
    def delete(self, thread_id: str, ns: str, ids: Collection[str]) -> None:
        """A namespace left without checkpoints goes whole (writes and blobs of none), and a
        thread left without namespaces."""
        thread = self._own(thread_id)
        space = thread.spaces.get(ns) if thread is not None else None
        if thread is None or space is None:
            return
        for cid in ids:
            space.rows.pop(cid, None)
            space.writes.pop(cid, None)
        space.head = next(reversed(space.rows), None)
        if not space.rows:
            del thread.spaces[ns]
        if not thread.spaces:
            self._replace(thread_id, None)

    def delete_blobs(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> None:
        thread = self._own(thread_id)
        space = thread.spaces.get(ns) if thread is not None else None
        if space is not None:
            for pair in pairs:
                space.blobs.pop(pair, None)

    def delete_thread(self, thread_id: str) -> None:
        self._replace(thread_id, None)

    def copy_thread(self, source: str, target: str) -> None:
        thread = self._threads.get(source)
        copy = thread.copy() if thread is not None else None
        if copy is not None:
            copy.updated = self._backend._now() if copy.root() is not None else 0
        self._replace(target, copy)


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
        return f"InMemorySaver(threads={self.backend.thread_count()}, retention={self.retention!r})"


MemorySaver = InMemorySaver
