"""``Backend.commit`` and ``Backend.load`` written over ``Backend.transaction``, and the row
deletions that pruning and retention share.

A backend whose reads are cheap (in-process, a local file) inherits ``Transactional``; one with a
server implements ``commit`` and ``load`` in one round trip each and keeps these semantics.
``OffLoopCalls`` gives any backend with sync calls their async forms.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager

from threadline.checkpoint.backend import (
    HeadMoved,
    Loaded,
    NextOf,
    NotStored,
    Pair,
    Prepared,
    PutTransaction,
    RowTransaction,
    VersionsOf,
)
from threadline.checkpoint.base import CheckpointRecord, OffLoop, Retention
from threadline.checkpoint.bodies import body_versions
from threadline.checkpoint.layout import BlobRow, WriteRow, named, referenced_blobs
from threadline.checkpoint.rules import age_cutoff, check_put, created_ts, status_of
from threadline.errors import ConcurrentUpdateError, SerializationError

BlobMeta = Callable[[set[Pair]], Mapping[Pair, BlobRow]]
"""Those of some pairs that are stored, as ``PutTransaction.blob_meta`` reads them."""


class OffLoopCalls(OffLoop):
    """``acommit``, ``acommit_writes`` and ``aload``: the sync calls, run off the event loop
    (inline for an ``in_process`` backend, which needs nothing more)."""

    commit: Callable[[Prepared], Sequence[Pair]]
    commit_writes: Callable[[str, str, str, Sequence[WriteRow], NextOf], None]
    load: Callable[[str, str, str | None, VersionsOf], Loaded | None]

    async def acommit(self, put: Prepared) -> Sequence[Pair]:
        return await self._off_loop(self.commit, put)

    async def acommit_writes(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        writes: Sequence[WriteRow],
        next_of: NextOf,
    ) -> None:
        await self._off_loop(self.commit_writes, thread_id, ns, checkpoint_id, writes, next_of)

    async def aload(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Loaded | None:
        return await self._off_loop(self.load, thread_id, ns, checkpoint_id, versions_of)


class Transactional(OffLoopCalls):
    """``commit``/``load`` (sync and async) over the backend's own ``transaction``."""

    def transaction(self, write: bool) -> AbstractContextManager[PutTransaction]:
        raise NotImplementedError

    def commit(self, put: Prepared) -> list[Pair]:
        with self.transaction(True) as tx:
            head = tx.head(put.thread_id, put.ns)
            row = put.row
            if not put.lands_on(head):
                raise HeadMoved(head)
            check_stored(put, head, lambda pairs: tx.blob_meta(put.thread_id, put.ns, pairs))
            tx.insert(put.thread_id, put.ns, row, put.blobs, put.prefixes)
            if put.writes:
                tx.add_writes(put.thread_id, put.ns, row.checkpoint_id, put.writes)
            if put.status is not None and tx.status(put.thread_id) != put.status:
                tx.set_thread(put.thread_id, put.status, row.checkpoint_id, put.next_names)
            if put.retention is None:
                return []
            return retain(tx, put.thread_id, put.ns, row.checkpoint_id, put.retention)

    def commit_writes(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        writes: Sequence[WriteRow],
        next_of: NextOf,
    ) -> None:
        with self.transaction(True) as tx:
            tx.add_writes(thread_id, ns, checkpoint_id, writes)
            if ns != "" or tx.head(thread_id, "") != checkpoint_id:
                return  # not the thread's newest checkpoint: its status is unchanged
            head = tx.checkpoint(thread_id, "", checkpoint_id)
            assert head is not None
            names = next_of(head.row)
            keys = [(w.task_id, w.kind) for w in head.writes]
            # A write on the head moves the thread up in list_threads.
            tx.set_thread(thread_id, status_of(names, keys), checkpoint_id, names)

    def load(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Loaded | None:
        with self.transaction(False) as tx:
            stored = tx.checkpoint(thread_id, ns, checkpoint_id)
            if stored is None:
                return None
            versions = versions_of(stored.row)
            if not versions:  # no blobs, or unreadable (decoding reports it)
                return stored, {}, None
            try:
                pool, check = tx.values(thread_id, ns, [versions])
            except SerializationError as exc:  # a damaged row read
                raise named(exc, thread_id, ns, stored.row.checkpoint_id) from exc
        return stored, pool, check


def check_stored(put: Prepared, head: str | None, blob_meta: BlobMeta) -> None:
    """Raise ``NotStored`` for the keys whose checked pairs or delta bases are not as expected;
    ``blob_meta`` reads those of the pairs stored (asked only for pairs ``put.trusted`` does not
    vouch for)."""
    trusted = put.trusted
    safe = trusted[1] if trusted is not None and head is not None and trusted[0] == head else {}
    needed = {(k, v) for k, v in put.check if safe.get(k) != v}
    if not needed:
        return
    stored = blob_meta(needed)
    gone = {k for k, v in needed if (k, v) not in stored}
    for delta in put.deltas:  # each must extend its base as stored (same value, same chain)
        base = stored.get((delta.key, delta.base or ""))
        if base is not None and (base.start, base.full_bytes, base.chain_bytes) != (
            delta.start,
            delta.full_bytes,
            delta.chain_bytes - len(delta.data),
        ):
            gone.add(delta.key)
    if gone:
        raise NotStored(gone)


def retain(
    tx: RowTransaction, thread_id: str, ns: str, head: str, retention: Retention
) -> list[Pair]:
    """Apply ``retention`` to a namespace whose newest checkpoint is ``head``; returns the pairs
    of the blob rows deleted."""
    ids = tx.ids(thread_id, ns)
    kept = retention.max_checkpoints
    doomed = {cid for cid, _ in ids[kept:]} if kept is not None else set()
    cutoff = age_cutoff(retention)
    if cutoff is not None:
        doomed.update(
            cid
            for cid, created_at in ids
            if cid < head and (ts := created_ts(created_at)) is not None and ts < cutoff
        )
    return drop(tx, thread_id, ns, doomed)


def drop(tx: RowTransaction, thread_id: str, ns: str, ids: Collection[str]) -> list[Pair]:
    """Delete checkpoints of one namespace and their writes, then the blob rows no remaining
    checkpoint uses; returns the pairs of those blob rows."""
    if not ids:
        return []
    tx.delete(thread_id, ns, ids)
    kept: list[Mapping[str, str]] = []
    versions = getattr(tx, "versions", None)  # ``backend.KeptVersions``
    if versions is not None:
        kept = versions(thread_id, ns)
    else:
        for checkpoint_id, body in tx.bodies(thread_id, ns):
            versions = body_versions(body, checkpoint_id)
            if versions is None:
                return []  # an unreadable checkpoint: keep every blob rather than guess
            kept.append(versions)
    rows = tx.all_blob_meta(thread_id, ns)
    used = referenced_blobs(kept, rows)
    unused = [pair for pair in rows if pair not in used]
    if unused:
        tx.delete_blobs(thread_id, ns, unused)
    return unused


def refused_put(record: CheckpointRecord, fork: bool, signal: HeadMoved | NotStored) -> Exception:
    """The error for a put the backend refused: the compare-and-set failed (``HeadMoved``), or
    values it relies on were still missing after storing them whole (``NotStored``)."""
    if isinstance(signal, NotStored):
        return SerializationError(
            f"checkpoint {record.checkpoint.id} of thread {record.thread_id!r} needs stored "
            f"values of keys {sorted(signal.keys)!r} that are not there (another saver pruned "
            "or deleted them while this one saved); nothing was written: load the thread again "
            "and retry"
        )
    try:
        check_put(record, signal.actual, fork=fork)
    except ConcurrentUpdateError as exc:
        return exc
    return ConcurrentUpdateError(  # the head moved back between the commit and this report
        f"thread {record.thread_id!r} (namespace {record.checkpoint_ns!r}) changed while "
        f"checkpoint {record.checkpoint.id} was being saved; nothing was written"
    )
