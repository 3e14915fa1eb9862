"""The saver API written once, over a ``backend.Backend`` of row-level primitives.

``CoreSaver`` does everything but storing rows. A put is encoded (``layout``) before any I/O
into a ``backend.Prepared`` -- rows, the head it must sit on, what it relies on, the thread's
new status, retention -- which the backend commits in one call; the core turns its signals into
errors (``HeadMoved``) or stores whole the values whose bases are gone (``NotStored``). A load
is one backend call too, decoded after it. History pages, pruning, retention and copies go
through the backend's ``transaction``: the core decides which rows go, the backend deletes or
copies them.

It remembers, per saver, the metadata of blob rows it stored or read (so encoding a delta
rarely asks the backend for its base) and the versions of the head it saved last in each
namespace (a put on top of that head relies only on blobs that head uses, which stay while it
exists: nothing needs checking). Over an in-process backend it remembers nothing: the backend
answers as fast.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from threadline.checkpoint.backend import (
    Check,
    HeadMoved,
    Loaded,
    NotStored,
    Pair,
    Prepared,
    RowBackend,
    StoredCheckpoint,
    ThreadRow,
    Transaction,
    VersionsOf,
    WholeThreads,
)
from threadline.checkpoint.base import (
    BaseSaver,
    Checkpoint,
    CheckpointRecord,
    Retention,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
    metadata_matches,
)
from threadline.checkpoint.bodies import (
    blob_versions,
    body_next,
    decode_checkpoint,
    decode_metadata,
)
from threadline.checkpoint.bytecache import bounded_set
from threadline.checkpoint.chains import HoldsChains
from threadline.checkpoint.layout import (
    BaseLookup,
    BlobRow,
    CheckpointRow,
    Pool,
    WriteRow,
    checkpoint_values,
    decode_write,
    encode_record,
    encode_writes,
    full_blobs,
    named,
)
from threadline.checkpoint.rules import check_keep_last, target_taken
from threadline.checkpoint.scan import refuse_damaged
from threadline.checkpoint.seals import open_body, open_row, open_write, seal_row, seal_write
from threadline.checkpoint.transactional import drop, refused_put
from threadline.errors import CorruptedDataError, SerializationError
from threadline.serde import DEFAULT, Serializer

_PAGE_SIZE = 64  # checkpoints ``list`` reads per transaction
_META_CACHED = 4096  # blob rows (metadata only) remembered for ``base_of``
_HEADS_CACHED = 1024  # (thread, namespace) heads whose versions are remembered

_Loaded = tuple[StoredCheckpoint, Checkpoint, Pool, Check | None]


class CoreSaver(BaseSaver):
    """A saver over ``backend``; ``retention`` prunes older checkpoints at each put (in the
    put's transaction where the backend can). ``copy_thread`` raises ``ValueError`` if the
    target has checkpoints."""

    def __init__(
        self,
        backend: RowBackend | WholeThreads,
        *,
        retention: Retention | None = None,
        serde: Serializer | None = None,
    ) -> None:
        self.backend = backend
        self.retention = retention
        self.serde = serde or DEFAULT
        self.in_process = backend.in_process
        # An in-process backend answers as fast as the caches would: none then. Its bodies
        # cost memory, not I/O: they are kept whole, which is quicker to make than compact.
        self._cached = self._compact = not backend.in_process
        self._holds = backend if isinstance(backend, HoldsChains) else None
        self._sealed = backend.sealed
        self._lock = threading.Lock()  # guards the two caches
        self._meta: OrderedDict[tuple[str, str, str, str], BlobRow] = OrderedDict()
        # (thread, ns) -> (id, blob versions) of the checkpoint this saver last saved there
        self._heads: OrderedDict[tuple[str, str], tuple[str, dict[str, str]]] = OrderedDict()

    def close(self) -> None:
        """Release the backend's connections; the caches go too."""
        self.backend.close()
        with self._lock:
            self._meta.clear()
            self._heads.clear()

    # -- reading -------------------------------------------------------------------------------

    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        seen: dict[str, Checkpoint] = {}
        reader = self._versions_reader(thread_id, checkpoint_ns, seen)
        try:
            loaded = self.backend.load(thread_id, checkpoint_ns, checkpoint_id, reader)
        except CorruptedDataError as exc:
            raise self.named_error(exc, thread_id, checkpoint_ns, checkpoint_id) from exc
        return self._loaded(thread_id, checkpoint_ns, checkpoint_id, loaded, seen)

    async def aget_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        if self.in_process:
            return self.get_tuple(thread_id, checkpoint_ns, checkpoint_id)
        seen: dict[str, Checkpoint] = {}
        reader = self._versions_reader(thread_id, checkpoint_ns, seen)
        try:
            loaded = await self.backend.aload(thread_id, checkpoint_ns, checkpoint_id, reader)
        except CorruptedDataError as exc:
            raise self.named_error(exc, thread_id, checkpoint_ns, checkpoint_id) from exc
        return self._loaded(thread_id, checkpoint_ns, checkpoint_id, loaded, seen)

    def _versions_reader(self, thread_id: str, ns: str, seen: dict[str, Checkpoint]) -> VersionsOf:
        """``versions_of`` for ``Backend.load``: decodes the row's body once, keeping the
        checkpoint in ``seen`` for the record made after the load."""

        def versions_of(row: CheckpointRow) -> dict[str, str]:
            cp = seen.get(row.checkpoint_id)
            if cp is None:
                cp = seen[row.checkpoint_id] = self._decode_row(thread_id, ns, row)
            return blob_versions(cp)

        return versions_of

    def _loaded(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str | None,
        loaded: Loaded | None,
        seen: Mapping[str, Checkpoint],
    ) -> CheckpointRecord | None:
        """The record of a ``Backend.load``; a newest checkpoint whose rows all passed their
        checks is reported to a backend that holds chains (``HoldsChains.loaded``)."""
        if loaded is None:
            return None
        stored, pool, check = loaded
        row = stored.row
        cp = seen.get(row.checkpoint_id) or self._decode_row(thread_id, ns, row)
        record = self._record(thread_id, ns, (stored, cp, pool, check))
        if checkpoint_id is None and pool and self._holds is not None:
            self._holds.loaded(thread_id, ns, blob_versions(cp), pool)
        return record

    def list(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointRecord]:
        if limit is not None and limit <= 0:
            return
        page_size = min(limit, _PAGE_SIZE) if limit is not None and not filter else _PAGE_SIZE
        produced = 0
        while True:
            # One page per transaction; decoded and yielded with the transaction closed.
            with self.backend.transaction(False) as tx:
                rows = tx.page(thread_id, checkpoint_ns, before, page_size)
                matching = [
                    s
                    for s in rows
                    if not filter
                    or metadata_matches(self._metadata(thread_id, checkpoint_ns, s.row), filter)
                ]
                loaded = self._load(tx, thread_id, checkpoint_ns, matching)
            for item in loaded:
                yield self._record(thread_id, checkpoint_ns, item)
                produced += 1
                if limit is not None and produced >= limit:
                    return
            if len(rows) < page_size:
                return
            before = rows[-1].row.checkpoint_id

    def _load(
        self, tx: Transaction, thread_id: str, ns: str, stored: Sequence[StoredCheckpoint]
    ) -> builtins.list[_Loaded]:
        """Checkpoint bodies decoded and the blob rows their values need, read in ``tx``."""
        decoded = [(item, self._decode_row(thread_id, ns, item.row)) for item in stored]
        wanted = [versions for _, cp in decoded if (versions := blob_versions(cp))]
        pool, check = tx.values(thread_id, ns, wanted) if wanted else ({}, None)
        return [(item, cp, pool, check) for item, cp in decoded]

    def _decode_row(self, thread_id: str, ns: str, row: CheckpointRow) -> Checkpoint:
        """The checkpoint of a stored row, its seal checked first (``seals.open_row``)."""
        fields = (row.checkpoint_id, row.parent_id, row.step, row.created_at)
        try:
            body = open_row(row, "its row")
            return decode_checkpoint(body, {}, self.serde, fields)
        except SerializationError as exc:
            raise self.named_error(exc, thread_id, ns, row.checkpoint_id) from exc

    def checked_body(self, thread_id: str, ns: str, checkpoint_id: str, body: bytes) -> bytes:
        """The body inside a stored one, its seal's first CRC checked (``seals.open_body``)."""
        try:
            return open_body(checkpoint_id, body, "its row")
        except CorruptedDataError as exc:
            raise self.named_error(exc, thread_id, ns, checkpoint_id) from exc

    def _metadata(self, thread_id: str, ns: str, row: CheckpointRow) -> dict[str, Any]:
        """The metadata of a stored row, its seal checked first (it covers the metadata)."""
        try:
            open_row(row, "its row")
            return decode_metadata(row.metadata, self.serde, row.step)
        except SerializationError as exc:
            raise self.named_error(exc, thread_id, ns, row.checkpoint_id) from exc

    def named_error(
        self, exc: SerializationError, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> Exception:
        """``exc`` naming this saver and the checkpoint (``None``: the newest)."""
        return named(exc, thread_id, ns, checkpoint_id or "(the newest)", type(self).__name__)

    def _record(self, thread_id: str, ns: str, loaded: _Loaded) -> CheckpointRecord:
        stored, cp, pool, check = loaded
        codec = self.serde
        try:
            return CheckpointRecord(
                thread_id,
                ns,
                dataclasses.replace(cp, values=checkpoint_values(cp, pool, codec, check)),
                decode_metadata(stored.row.metadata, codec, stored.row.step),
                tuple([self._write(cp.id, w) for w in stored.writes]) if stored.writes else (),
            )
        except SerializationError as exc:
            raise self.named_error(exc, thread_id, ns, cp.id) from exc

    def _write(self, checkpoint_id: str, write: WriteRow) -> TaskWrite:
        """A stored pending write of ``checkpoint_id``, its seal checked first."""
        what = f"the {write.kind!r} write of task {write.task_name!r}"
        data = open_write(checkpoint_id, write, what)
        return decode_write(WriteRow(write.task_id, write.kind, write.task_name, data), self.serde)

    def list_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> builtins.list[ThreadInfo]:
        if limit is not None and limit <= 0:
            return []
        damaged = status == "damaged"  # found here, not stored: every thread is read
        with self.backend.transaction(False) as tx:
            rows = tx.threads(None if damaged else status, None if damaged else limit)
        found = [self._thread_info(r) for r in rows]
        if status is not None:
            found = [info for info in found if info.status == status]
        return found[:limit] if limit is not None else found

    def _thread_info(self, thread: ThreadRow) -> ThreadInfo:
        """A listed thread; ``damaged`` (planning nothing) if its head row fails its check,
        which leaves the thread listed and every other thread readable."""
        t = thread
        try:
            names = body_next(open_body(t.head, t.body, "its head row"), self.serde)
        except CorruptedDataError:
            return ThreadInfo(t.thread_id, "damaged", t.head, t.updated_at, ())
        return ThreadInfo(t.thread_id, t.status, t.head, t.updated_at, names)

    # -- writing -------------------------------------------------------------------------------

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        put = self._prepare(record, fork)
        try:
            try:
                evicted = self.backend.commit(put)
            except NotStored as gone:  # once: store those values whole
                put = self._in_full(record, put, gone)
                evicted = self.backend.commit(put)
        except (HeadMoved, NotStored) as signal:
            raise refused_put(record, fork, signal) from None
        if self._cached:
            self._after_put(put, evicted)

    async def aput(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        if self.in_process:
            return self.put(record, fork=fork)
        put = self._prepare(record, fork)
        try:
            try:
                evicted = await self.backend.acommit(put)
            except NotStored as gone:  # once: store those values whole
                put = self._in_full(record, put, gone)
                evicted = await self.backend.acommit(put)
        except (HeadMoved, NotStored) as signal:
            raise refused_put(record, fork, signal) from None
        if self._cached:
            self._after_put(put, evicted)

    def _prepare(self, record: CheckpointRecord, fork: bool) -> Prepared:
        """The record encoded (before any transaction: deltas extend the blobs ``base_of``
        finds) with what its rows rely on, for ``Backend.commit``."""
        thread_id, ns, cp = record.thread_id, record.checkpoint_ns, record.checkpoint
        base_of = self._base_lookup(thread_id, ns)
        encoded = encode_record(
            record, base_of, self.serde, self.backend.compaction, True, self._compact
        )
        if self._sealed:
            seal_row(encoded.row)
            for write in encoded.writes:
                seal_write(cp.id, write)
        refs = encoded.refs
        blobs = encoded.blobs
        deltas: Sequence[BlobRow] = ()
        check: Sequence[Pair] = tuple(refs.items()) if refs else ()
        if blobs:
            written = {(b.key, b.version) for b in blobs}
            deltas = [b for b in blobs if b.base is not None]
            check = [(k, v) for k, v in check if (k, v) not in written]
            check += [(b.key, b.base) for b in deltas if b.base is not None]
        return Prepared(
            thread_id,
            ns,
            encoded.row,
            fork,
            blobs,
            encoded.prefixes,
            encoded.writes,
            check,
            deltas,
            self._heads.get((thread_id, ns)) if self._cached else None,
            [t.name for t in cp.next] if ns == "" else [],
            self.retention,
            refs,
        )

    def _in_full(self, record: CheckpointRecord, put: Prepared, gone: NotStored) -> Prepared:
        """``put`` with the values of ``gone.keys`` stored whole (what they relied on is not
        stored: wrong hints, a concurrent prune or delete, a stale cache)."""
        keys = gone.keys
        self._forget(record.thread_id, record.checkpoint_ns)
        blobs = [b for b in put.blobs if b.key not in keys]
        blobs += full_blobs(record, keys, self.serde)
        return dataclasses.replace(
            put,
            blobs=blobs,
            check=[(k, v) for k, v in put.check if k not in keys],
            deltas=[b for b in put.deltas if b.key not in keys],
            trusted=None,
        )

    def _after_put(self, put: Prepared, evicted: Sequence[Pair]) -> None:
        """Update the caches (an in-process backend has none)."""
        thread_id, ns = put.thread_id, put.ns
        with self._lock:
            head = (put.row.checkpoint_id, put.refs)
            bounded_set(self._heads, (thread_id, ns), head, _HEADS_CACHED)
            for key, version in evicted:
                self._meta.pop((thread_id, ns, key, version), None)
            for row in (*put.blobs, *put.prefixes):
                meta_key = (thread_id, ns, row.key, row.version)
                bounded_set(self._meta, meta_key, row.without_data(), _META_CACHED)

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        if encoded := self._encode_writes(checkpoint_id, writes):
            self.backend.commit_writes(
                thread_id, checkpoint_ns, checkpoint_id, encoded, self._next_of
            )

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        if self.in_process:
            return self.put_writes(thread_id, checkpoint_ns, checkpoint_id, writes)
        if encoded := self._encode_writes(checkpoint_id, writes):
            await self.backend.acommit_writes(
                thread_id, checkpoint_ns, checkpoint_id, encoded, self._next_of
            )

    def _encode_writes(
        self, checkpoint_id: str, writes: Sequence[TaskWrite]
    ) -> tuple[WriteRow, ...]:
        encoded = encode_writes(writes, self.serde)
        if self._sealed:
            for write in encoded:
                seal_write(checkpoint_id, write)
        return encoded

    def _next_of(self, row: CheckpointRow) -> tuple[str, ...]:
        """The task names of the head a write landed on, for its thread row: a damaged head
        raises rather than giving the thread a made-up status."""
        return body_next(open_row(row, f"checkpoint {row.checkpoint_id}"), self.serde)

    def delete_thread(self, thread_id: str) -> None:
        if isinstance(self.backend, WholeThreads):
            self.backend.delete_whole(thread_id)
        else:
            with self.backend.transaction(True) as tx:
                tx.delete_thread(thread_id)
        self._forget(thread_id)

    # -- history -------------------------------------------------------------------------------

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        check_keep_last(keep_last)
        refuse_damaged(self, thread_id)
        if isinstance(self.backend, WholeThreads):
            deleted, dropped = self.backend.prune_thread(thread_id, keep_last)
            for ns, pair in dropped:
                self._forget(thread_id, ns, [pair])
            return deleted
        deleted = 0
        gone: builtins.list[tuple[str, builtins.list[Pair]]] = []
        with self.backend.transaction(True) as tx:
            for ns in tx.namespaces(thread_id):
                ids = [cid for cid, _ in tx.ids(thread_id, ns)[keep_last:]]
                gone.append((ns, drop(tx, thread_id, ns, ids)))
                deleted += len(ids)
        for ns, pairs in gone:
            self._forget(thread_id, ns, pairs)
        return deleted

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of a thread to an empty thread id.

        Raises ``ValueError`` if the target already has checkpoints (including when it is the
        source); copying a thread that has none does nothing. One transaction.
        """
        src, dst = source_thread_id, target_thread_id
        if isinstance(self.backend, WholeThreads):
            if not self.backend.copy_whole(src, dst):
                raise target_taken(src, dst)
            self._forget(dst)
            return
        with self.backend.transaction(True) as tx:
            # Named in one order: a backend locking threads as named (files) cannot deadlock.
            held = {thread: bool(tx.namespaces(thread)) for thread in sorted({src, dst})}
            if held[dst]:
                raise target_taken(src, dst)
            if not held[src]:
                return
            tx.copy_thread(src, dst)
        self._forget(dst)

    # -- caches --------------------------------------------------------------------------------

    def _base_lookup(self, thread_id: str, ns: str) -> BaseLookup:
        """``base_of`` for ``encode_record``: remembered rows, else a read of the backend."""

        backend = self.backend
        if not self._cached:
            return functools.partial(backend.blob, thread_id, ns)

        def base_of(key: str, version: str) -> BlobRow | None:
            cache_key = (thread_id, ns, key, version)
            with self._lock:
                row = self._meta.get(cache_key)
                if row is not None:
                    self._meta.move_to_end(cache_key)
                    return row
            found = backend.blob(thread_id, ns, key, version)
            if found is not None:
                with self._lock:
                    bounded_set(self._meta, cache_key, found.without_data(), _META_CACHED)
            return found

        return base_of

    def _forget(
        self, thread_id: str, ns: str | None = None, pairs: Iterable[Pair] | None = None
    ) -> None:
        with self._lock:
            cache = self._meta
            if pairs is not None and ns is not None:
                for key, version in pairs:
                    cache.pop((thread_id, ns, key, version), None)
                return
            for k in [k for k in cache if k[0] == thread_id and (ns is None or k[1] == ns)]:
                del cache[k]
            for h in [h for h in self._heads if h[0] == thread_id]:
                del self._heads[h]
