"""The protocol a storage backend implements: row-level primitives inside a transaction.

``core.CoreSaver`` implements the saver API once over a ``Backend``, which stores the rows
``layout`` makes as they are and never decodes a value. A put, a put of writes and a load are
one call each (``commit``, ``commit_writes``, ``load``), so that a backend with a server does
each in one round trip; ``transactional.Transactional`` writes them over a ``PutTransaction``
for backends with cheap reads. Everything else goes through ``transaction``: a ``RowBackend``'s
answers row-level calls, with which the core prunes, copies and deletes threads; a ``WholeThreads``
backend does those itself and its transaction answers only what every backend's does.

Writing a backend: docs/storage.md ("Writing a backend"); ``tests/checkpoint/toy_backend.py``
is a complete one over dicts, and ``tests/checkpoint/factories.py`` runs the conformance suite
on it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from threadline.checkpoint.base import Retention, ThreadStatus
from threadline.checkpoint.layout import BlobRow, CheckpointRow, Compaction, WriteRow
from threadline.checkpoint.rules import status_of

Pair = tuple[str, str]  # (key, version) of a blob row
Check = Callable[[BlobRow], None]  # raises ``layout.corrupted(row)`` if a row's bytes are damaged


@dataclass(slots=True)
class StoredCheckpoint:
    """A checkpoint as read: its ``CheckpointRow`` and its pending writes in the order they were
    first saved."""

    row: CheckpointRow
    writes: tuple[WriteRow, ...] = ()


Loaded = tuple[StoredCheckpoint, dict[Pair, BlobRow], Check | None]
"""A checkpoint read for loading: its rows, the blob rows its values need, their check."""
VersionsOf = Callable[[CheckpointRow], "Mapping[str, str] | None"]
"""The blob versions a checkpoint row's values need (``None``: unreadable; decoding reports it)."""
NextOf = Callable[[CheckpointRow], Sequence[str]]
"""The names of the tasks a checkpoint row plans (what a thread row keeps)."""


@dataclass(slots=True)
class Prepared:
    """One put, encoded, for ``Backend.commit`` to store as one transaction.

    The compare-and-set: unless ``fork``, the namespace's head must be ``row.parent_id``; in any
    case ``row.checkpoint_id`` must sort after the head. Then every pair of ``check`` must be
    stored (values the checkpoint uses without storing them, bases of its deltas), and each of
    ``deltas`` must extend its base as it was computed (same start and sizes). ``trusted``: the
    core's ``(head id, blob versions that head uses)``; if the head is still that id, those pairs
    are stored (every blob a checkpoint uses stays while it exists) and need no read.
    """

    thread_id: str
    ns: str
    row: CheckpointRow
    fork: bool
    blobs: Sequence[BlobRow]  # new blob rows (a pair stored already is kept as it is)
    prefixes: Sequence[BlobRow]  # compaction: replace the stored rows of their pairs
    writes: Sequence[WriteRow]
    check: Sequence[Pair]
    deltas: Sequence[BlobRow]  # those of ``blobs`` with a ``base``
    trusted: tuple[str, Mapping[str, str]] | None
    next_names: list[str]  # root namespace: the planned task names the thread row keeps
    retention: Retention | None  # prune older checkpoints of the namespace (see ``commit``)
    refs: dict[str, str]  # key -> version of every value the checkpoint keeps in blobs

    def lands_on(self, head: str | None) -> bool:
        """The compare-and-set: whether ``row`` may be stored on top of ``head``."""
        row = self.row
        return (self.fork or row.parent_id == head) and (head is None or row.checkpoint_id > head)

    @property
    def status(self) -> ThreadStatus | None:
        """Root namespace: the thread's status after the put (read only by backends that keep
        it; the others decide it themselves)."""
        if self.ns != "":
            return None
        return status_of(self.next_names, [(w.task_id, w.kind) for w in self.writes])


class HeadMoved(Exception):
    """``Backend.commit`` found another head (``actual``); nothing was written."""

    def __init__(self, actual: str | None) -> None:
        super().__init__(actual)
        self.actual = actual


class NotStored(Exception):
    """``Backend.commit`` found pairs of ``Prepared.check`` missing, or deltas whose base
    changed, for values of ``keys``; nothing was written (the core stores them whole)."""

    def __init__(self, keys: Collection[str]) -> None:
        super().__init__(sorted(keys))
        self.keys = frozenset(keys)


@dataclass(slots=True)
class ThreadRow:
    """A thread as ``list_threads`` reads it: the thread row's status and the root namespace's
    *current* newest checkpoint (``head``, ``body``), not the head the thread row last recorded
    (a put whose status did not change does not rewrite the row).

    ``updated_at`` is the later of the thread row's write and the head's ``created_at``; both are
    ``clock.iso_at`` text (UTC, microseconds), which sorts as it compares.
    """

    thread_id: str
    status: ThreadStatus
    head: str
    updated_at: str
    body: bytes  # the head's body (its planned task names are read from it)


class Transaction(Protocol):
    """Reads and writes of one transaction: all see one snapshot and, in a write transaction,
    commit together or not at all (an exception rolls it back). Write transactions of one
    thread must not interleave (a lock, ``BEGIN IMMEDIATE``, a ``flock``...): the compare-and-set
    reads the head and writes on top of it. A backend may lock a thread when a call first names
    it: the core's one transaction over two threads (``copy_thread``) names them in sorted order.

    A thread has namespaces (``""`` is the root), each with checkpoint rows (by id), blob rows (by
    ``(key, version)``) and each checkpoint's pending writes (by ``(task_id, kind)``, in first-write
    order; the same key replaces in place). "Newest" is always the largest id: ids sort by
    creation time. The root has a thread row: status, head and planned task names as of the
    last ``set_thread``, with the time it was written.

    This is what the core asks of every backend; ``RowTransaction`` adds what pruning, retention,
    copies and deletions need when the backend does not do them itself.
    """

    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> list[StoredCheckpoint]:
        """Up to ``limit`` checkpoints with their writes, newest first, ids below ``before``."""
        ...

    def values(
        self, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], Check | None]:
        """The blob rows (with their data) that rebuilding each of ``wanted`` (the versions of
        one or more checkpoints) needs: each named row and, following ``base``, every row below
        it down to a full blob; and what checks a row's bytes (``None``: nothing to check), run
        by the core on each row a value is rebuilt from. Rows that are missing are left out;
        ``layout`` reports them."""
        ...

    def threads(self, status: ThreadStatus | None, limit: int | None) -> list[ThreadRow]:
        """Threads with a root checkpoint (the first put writes the thread row), most recently
        updated first (``ThreadRow``: the head from the checkpoints, the status from the row)."""
        ...


class RowTransaction(Transaction, Protocol):
    """What the core (``prune``, ``copy_thread``, ``delete_thread``) and ``transactional``
    (retention) need to prune, copy and delete row by row: a ``WholeThreads`` backend, which does
    those itself, needs none of it (its transactions only read)."""

    def all_blob_meta(self, thread_id: str, ns: str) -> dict[Pair, BlobRow]:
        """Every blob row of the namespace, without data (to collect unused ones)."""
        ...

    def ids(self, thread_id: str, ns: str) -> list[tuple[str, str]]:
        """``(id, created_at)`` of every checkpoint of the namespace, newest first."""
        ...

    def bodies(self, thread_id: str, ns: str) -> list[tuple[str, bytes]]:
        """``(id, body)`` of every checkpoint of the namespace (to see which blobs they use)."""
        ...

    def namespaces(self, thread_id: str) -> list[str]:
        """The namespaces of a thread that hold checkpoints."""
        ...

    def delete(self, thread_id: str, ns: str, ids: Collection[str]) -> None:
        """Delete checkpoints and their writes; the thread row too once the root is empty."""
        ...

    def delete_blobs(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> None: ...

    def delete_thread(self, thread_id: str) -> None:
        """Delete every row of the thread (checkpoints, blobs, writes, thread row)."""
        ...

    def copy_thread(self, source: str, target: str) -> None:
        """Copy every row of ``source`` to ``target``, which has no checkpoints (rows it still
        has, writes or blobs without checkpoints, are replaced); its thread row's time:
        ``clock.increasing_iso()``."""
        ...


class PutTransaction(RowTransaction, Protocol):
    """What ``transactional.Transactional`` needs to commit a put or writes and load a
    checkpoint: a backend with its own ``commit``, ``commit_writes`` and ``load`` needs none of it.
    """

    def head(self, thread_id: str, ns: str) -> str | None:
        """The newest checkpoint id of a namespace (``None`` if it has none)."""
        ...

    def status(self, thread_id: str) -> ThreadStatus | None:
        """The status the thread row records (``None``: no thread row)."""
        ...

    def checkpoint(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        """One checkpoint with its writes (``None``: the newest)."""
        ...

    def blob_meta(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> dict[Pair, BlobRow]:
        """Those of ``pairs`` stored in the namespace (their data may be left out)."""
        ...

    # -- writes --------------------------------------------------------------------------------
    def insert(
        self,
        thread_id: str,
        ns: str,
        row: CheckpointRow,
        blobs: Sequence[BlobRow],
        prefixes: Sequence[BlobRow],
    ) -> None:
        """Store a new checkpoint row and its new blobs. A blob whose ``(key, version)`` is
        stored already is kept as it is. ``prefixes`` then replace the stored rows of their
        ``(key, version)`` (compaction; a pair no longer stored stays gone). A backend may also
        point stored prefix rows whose ``base`` is one of theirs at their ``base`` (so no value
        loads through two prefix rows); values load either way."""
        ...

    def add_writes(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None:
        """Store pending writes of a checkpoint (same ``(task_id, kind)``: replaced in place)."""
        ...

    def set_thread(
        self, thread_id: str, status: ThreadStatus, head: str, next_names: Sequence[str]
    ) -> None:
        """Write the thread row; its time is ``clock.increasing_iso()``. ``Transactional.commit``
        calls it when a put changes the thread's status (``Prepared.status``)."""
        ...


class Backend(Protocol):
    """Where rows live. ``in_process``: calls do no I/O (async calls run inline). ``sealed``: the
    core seals the checkpoint rows and pending writes it stores (``seals``), for a backend that
    keeps their bytes where they can be damaged and checks none itself. The core takes a
    ``RowBackend`` or a ``WholeThreads``."""

    compaction: Compaction
    in_process: bool
    sealed: bool

    def transaction(self, write: bool) -> AbstractContextManager[Transaction]: ...

    def commit(self, put: Prepared) -> Sequence[Pair]:
        """Store ``put`` as one transaction (see ``Prepared``): check the compare-and-set
        (``HeadMoved``) and what it relies on (``NotStored``), insert the rows and writes, write
        the thread row if ``put.status`` differs from the stored one, apply ``put.retention``
        (in the same transaction where the store allows; Redis prunes just after, atomically).
        Returns the pairs of the blob rows retention deleted."""
        ...

    async def acommit(self, put: Prepared) -> Sequence[Pair]: ...

    def commit_writes(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        writes: Sequence[WriteRow],
        next_of: NextOf,
    ) -> None:
        """Store pending writes of a checkpoint, as one transaction (``Transaction.add_writes``);
        if it is the thread's head (root namespace), write the thread row with the status its
        writes now give (``rules.status_of`` over ``next_of(head row)`` and every write's
        ``(task_id, kind)``): a write on the head moves the thread up in ``list_threads``."""
        ...

    async def acommit_writes(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        writes: Sequence[WriteRow],
        next_of: NextOf,
    ) -> None: ...

    def load(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Loaded | None:
        """One checkpoint (``None``: the newest) with its writes and the blob rows its values
        need (as ``Transaction.values``; ``versions_of`` reads which from a row, if the backend
        does not store them apart), read in one transaction; ``None`` if not stored."""
        ...

    async def aload(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Loaded | None: ...

    def blob(self, thread_id: str, ns: str, key: str, version: str) -> BlobRow | None:
        """A stored blob row (its data may be left out), read outside any transaction: what a
        delta being encoded extends. It may be stale by the time the put commits; the put's
        transaction checks what it relies on (``Transaction.blob_meta``)."""
        ...

    def close(self) -> None: ...


class KeptVersions(Protocol):
    """Optional, for a ``RowTransaction`` that keeps each checkpoint's blob versions apart from its
    body: pruning and retention then decode no body to see which blobs are still used (found
    by name, ``transactional.drop``)."""

    def versions(self, thread_id: str, ns: str) -> list[Mapping[str, str]]:
        """The blob versions of every checkpoint of the namespace."""
        ...


class RowBackend(Backend, Protocol):
    """A backend whose threads the core prunes and copies through its row-level transaction."""

    def transaction(self, write: bool) -> AbstractContextManager[RowTransaction]: ...


@runtime_checkable
class WholeThreads(Backend, Protocol):
    """A backend that prunes, copies and deletes a whole thread itself, faster than the core does
    through ``transaction`` (one SQL statement instead of a round trip per read)."""

    def prune_thread(self, thread_id: str, keep_last: int) -> tuple[int, list[tuple[str, Pair]]]:
        """``CoreSaver.prune`` as one transaction: returns how many checkpoints went and the
        ``(namespace, (key, version))`` of the blob rows deleted."""
        ...

    def copy_whole(self, source: str, target: str) -> bool:
        """``CoreSaver.copy_thread`` as one transaction, if ``target`` has no checkpoints (else
        nothing is done: returns False)."""
        ...

    def delete_whole(self, thread_id: str) -> None:
        """``CoreSaver.delete_thread`` as one transaction."""
        ...
