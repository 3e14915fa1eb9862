"""``PostgresBackend``: the backend protocol (``checkpoint.backend``) on PostgreSQL.

A put is one statement, a call of the server-side ``threadline_put`` (``schema.py``): alone on
libpq for a sync put, with the puts of other threads in one ``threadline_put_many`` call for an
``acommit`` (``batcher.py``), followed by retention's prune in the same pipeline when the saver
retains. A load is one statement returning the checkpoint, its writes and the blob rows its
values need (``statements._LOAD``). Both name what this process holds so the server sends less:
the bytes of large values (``bytecache.HeldBlobs``, sent back as NULL) and the tips of the delta
chains it holds (``chains.HeldChains``, where the chain walk stops). A load that names a tip
whose chain was let go meanwhile misses the rows below it, and is read again naming none.

Pages and thread listings go through ``transaction`` (``PostgresTx``), one statement per call;
pruning, copying and deleting a thread are one batch each (``WholeThreads``).
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import Any
from weakref import WeakKeyDictionary

from threadline.checkpoint.backend import (
    Check,
    Loaded,
    NextOf,
    Pair,
    Prepared,
    StoredCheckpoint,
    ThreadRow,
    VersionsOf,
)
from threadline.checkpoint.base import ThreadStatus
from threadline.checkpoint.bodies import body_versions
from threadline.checkpoint.bytecache import HeldBlobs
from threadline.checkpoint.chains import HeldChains, HoldsChains, hold_put
from threadline.checkpoint.layout import (
    BlobRow,
    CheckpointRow,
    Compaction,
    WriteRow,
    corrupted,
    missing_rows,
)
from threadline.checkpoint.postgres.batcher import PutBatcher
from threadline.checkpoint.postgres.connections import (
    BEGIN_WRITE,
    Batch,
    Connections,
    Op,
    Rows,
    Stmt,
    batch,
)
from threadline.checkpoint.postgres.rows import (
    PutParams,
    RecentWrites,
    created_text,
    dedupe_writes,
    put_params,
    threads_op,
    writes_params,
)
from threadline.checkpoint.postgres.statements import Queries
from threadline.checkpoint.rules import age_cutoff
from threadline.checkpoint.seals import blob_intact
from threadline.serde import Serializer

# An updated row's TOAST stays until a vacuum, so old full blobs are kept, not rewritten (their
# deltas still become prefix rows), and full blobs are rare: a list is stored about once (its
# deltas), a full copy only once its deltas outweigh 16 times the last one (and 1 MiB). Loads
# stay flat without them: the backend holds the chains it reads (``chains.py``).
COMPACTION = Compaction(ratio=16.0, min_chain_bytes=1 << 20, rewrite_full=False)

Unpacked = tuple[list[StoredCheckpoint], dict[Pair, BlobRow], Check]
_ord = operator.itemgetter(1)  # a load row's place: newest checkpoint first, writes by seq


class PostgresBackend(HoldsChains):
    """Rows in the tables of ``schema.py``, through ``db``."""

    compaction = COMPACTION
    in_process = False
    sealed = True

    def __init__(self, db: Connections, queries: Queries, codec: Serializer) -> None:
        self.db = db
        self.q = queries
        self.codec = codec
        # large values' bytes, by (key, version): a long conversation is not resent
        self.bytes: HeldBlobs[Pair] = HeldBlobs(per_namespace=16)
        self.chains = HeldChains(codec=codec)  # long delta chains: a load walks new rows
        self.recent = RecentWrites()  # the run input's write, which the next put refers to
        # acommit: the puts made on one event loop meanwhile go in one call (``batcher.py``)
        self.batchers: WeakKeyDictionary[asyncio.AbstractEventLoop, PutBatcher] = (
            WeakKeyDictionary()
        )

    def transaction(self, write: bool) -> AbstractContextManager[PostgresTx]:
        """Read-only: the core writes through ``commit``, ``commit_writes`` and ``WholeThreads``."""
        return nullcontext(PostgresTx(self))

    def close(self) -> None:
        self.db.close()
        self.forget()

    async def aclose(self) -> None:
        await self.db.aclose()
        self.forget()

    # -- a put ---------------------------------------------------------------------------------

    def commit(self, put: Prepared) -> list[Pair]:
        if self.db.home is not None:
            return self.db.bridge(self.acommit(put))
        params, crcs = put_params(put, self.recent)
        if _retains(put):
            evicted = self.db.run(self._put_op(put, params), BEGIN_WRITE)
        else:
            self.db.run_hot(params.hot(self.q.put_hot_name, self.q.put_hot))
            evicted = []
        return self._stored(put, crcs, evicted)

    async def acommit(self, put: Prepared) -> list[Pair]:
        params, crcs = put_params(put, self.recent)
        if _retains(put):
            evicted = await self.db.arun(self._put_op(put, params), BEGIN_WRITE)
        else:
            loop = asyncio.get_running_loop()  # only this loop's thread adds its batcher
            batcher = self.batchers.get(loop) or self.batchers.setdefault(
                loop, PutBatcher(self.db, self.q.put_many)
            )
            failure = await batcher.put(params)
            if failure is not None:
                raise failure
            evicted = []
        return self._stored(put, crcs, evicted)

    def _put_op(self, put: Prepared, params: PutParams) -> Op[list[Pair]]:
        """The put with retention's prune of its namespace after it, in one batch."""
        retention = put.retention
        assert retention is not None
        cutoff = age_cutoff(retention)
        prune = {
            "thread": put.thread_id,
            "ns": put.ns,
            "keep": retention.max_checkpoints,
            "cutoff": None if cutoff is None else datetime.fromtimestamp(cutoff, UTC),
        }
        stmts = [Stmt(self.q.put, params.alone()), Stmt(self.q.prune_ns, prune)]
        results = yield Batch(stmts)
        _, _, keys, versions = results[-1][0]
        return list(zip(keys, versions, strict=True))

    def _stored(self, put: Prepared, crcs: Sequence[int], evicted: list[Pair]) -> list[Pair]:
        """Hold what a committed put stored; returns the pairs retention deleted."""
        thread_id, ns = put.thread_id, put.ns
        self.recent.remember(thread_id, ns, put.row.checkpoint_id, put.writes)
        blobs = [((b.key, b.version), b) for b in put.blobs]
        gone = [*evicted, *((p.key, p.version) for p in put.prefixes)]
        hold_put(self.bytes, self.chains, thread_id, ns, blobs, crcs, gone)
        return evicted

    # -- pending writes ------------------------------------------------------------------------

    def commit_writes(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        writes: Sequence[WriteRow],
        next_of: NextOf,
    ) -> None:
        # The thread's status is worked out when threads are listed (heads.next and the
        # head's writes), so ``next_of`` is not needed here.
        self.db.run(self._writes_op(thread_id, ns, checkpoint_id, writes), BEGIN_WRITE)

    async def acommit_writes(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        writes: Sequence[WriteRow],
        next_of: NextOf,
    ) -> None:
        await self.db.arun(self._writes_op(thread_id, ns, checkpoint_id, writes), BEGIN_WRITE)

    def _writes_op(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> Op[list[Rows]]:
        params = writes_params(thread_id, ns, checkpoint_id, dedupe_writes(writes))
        # The head first (locked only if it is this checkpoint), as a put: no deadlocks.
        return batch(Stmt(self.q.touch_head, params), Stmt(self.q.upsert_writes, params))

    # -- loads ---------------------------------------------------------------------------------

    def load(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Loaded | None:
        return _first(self.db.run(self._load_one(thread_id, ns, checkpoint_id, versions_of), None))

    async def aload(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Loaded | None:
        op = self._load_one(thread_id, ns, checkpoint_id, versions_of)
        return _first(await self.db.arun(op, None))

    def _load_one(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Op[Unpacked]:
        target = "latest" if checkpoint_id is None else "one"
        return self.load_op(thread_id, ns, target, {"cid": checkpoint_id}, versions_of)

    def load_op(
        self, thread_id: str, ns: str, target: str, params: dict[str, Any], versions_of: VersionsOf
    ) -> Op[Unpacked]:
        """The checkpoints chosen by ``target`` (``Queries.load``) with their writes, the blob
        rows their values need (held bytes filled in) and the check of those rows.

        One statement naming the bytes held and the held chains' tips; read again naming no
        tips if a chain it named was let go meanwhile (the rows below its tip did not come)."""
        for tips in (True, False):
            named = self.chains.tips(thread_id, ns) if tips else {}
            held = {**self.bytes.held(thread_id, ns), **named}
            stmt = Stmt(
                self.q.load[target],
                {
                    "thread": thread_id,
                    "ns": ns,
                    **params,
                    "held_keys": [key for key, _ in held],
                    "held_versions": [version for _, version in held],
                    "held_crcs": [crc for crc, _ in held.values()],
                    "held_sizes": [len(data) for _, data in held.values()],
                    "tip_keys": [key for key, _ in named],
                    "tip_versions": [version for _, version in named],
                    "tip_crcs": [crc for crc, _ in named.values()],
                },
                hot=True,
            )
            (rows,) = yield Batch([stmt])
            unpacked = self._unpack(thread_id, ns, rows, held, bool(named), versions_of)
            if unpacked is not None:
                return unpacked
        raise AssertionError("a load naming no tips is complete")

    def _unpack(
        self,
        thread_id: str,
        ns: str,
        rows: list[tuple[Any, ...]],
        held: Mapping[Pair, tuple[int, bytes]],
        tips: bool,
        versions_of: VersionsOf,
    ) -> Unpacked | None:
        """The rows of a load (``statements._LOAD``) taken apart by ``part``: the checkpoints
        newest first with their writes in the order they were saved, and the blob rows (those
        whose bytes are ``held`` came back NULL) checked against their CRC-32. ``None`` if the
        load named chain ``tips`` and misses rows below one."""
        checkpoints, writes = [], []
        blobs: dict[Pair, BlobRow] = {}
        crcs: dict[Pair, int] = {}
        sent: dict[Pair, int] = {}
        damaged: set[Pair] = set()
        for r in rows:
            if r[0] == 0:
                checkpoints.append(r)
            elif r[0] == 1:
                writes.append(r)
            else:
                _, _, key, version, start, base, data, _, chain, full, crc, items = r
                pair = (key, version)
                crcs[pair] = crc
                sent_data = data is not None
                if data is None:
                    data = held[pair][1]  # matched the CRC-32 and length the load named
                row = blobs[pair] = BlobRow(key, version, start, base, chain, full, data, items)
                if not sent_data:
                    continue
                if blob_intact(row, crc):
                    sent[pair] = crc
                else:
                    damaged.add(pair)
        blobs.update(self.chains.rows_below(thread_id, ns, crcs))
        checkpoints.sort(key=_ord)
        stored_rows = [
            CheckpointRow(r[2], r[3], r[8], created_text(r[9], r[4]), r[6], r[7])
            for r in checkpoints
        ]
        if tips and any(missing_rows(versions_of(row) or {}, blobs) for row in stored_rows):
            return None
        for pair, crc in sent.items():
            self.bytes.add(thread_id, ns, pair, *pair, crc, blobs[pair].data)
        by_checkpoint: dict[str, list[WriteRow]] = {}
        for w in sorted(writes, key=_ord):
            by_checkpoint.setdefault(w[2], []).append(WriteRow(w[3], w[4], w[5], w[6]))
        stored = [
            StoredCheckpoint(row, tuple(by_checkpoint.get(row.checkpoint_id, ())))
            for row in stored_rows
        ]

        def check(row: BlobRow) -> None:
            if (row.key, row.version) in damaged:
                raise corrupted(row)

        return stored, blobs, check

    # -- whole threads (``checkpoint.backend.WholeThreads``) ------------------------------------

    def prune_thread(self, thread_id: str, keep_last: int) -> tuple[int, list[tuple[str, Pair]]]:
        count, gone = self.db.run(self._prune_op(thread_id, keep_last), BEGIN_WRITE)
        for ns, pair in gone:
            self.bytes.drop(thread_id, ns, [pair])
        return count, gone

    def _prune_op(self, thread_id: str, keep_last: int) -> Op[tuple[int, list[tuple[str, Pair]]]]:
        params = {"thread": thread_id, "keep": keep_last, "cutoff": None}
        lock = Stmt(self.q.lock_heads_update, params)  # no put on this thread meanwhile
        _, rows = yield Batch([lock, Stmt(self.q.prune_thread, params)])
        count, namespaces, keys, versions = rows[0]
        return count, [(ns, (k, v)) for ns, k, v in zip(namespaces, keys, versions, strict=True)]

    def copy_whole(self, source: str, target: str) -> bool:
        copied = self.db.run(self._copy_op(source, target), BEGIN_WRITE)
        if copied:
            self.forget(target)
        return copied

    def _copy_op(self, source: str, target: str) -> Op[bool]:
        params = {"source": source, "target": target, "thread": source}
        # The source's heads are share-locked: no put or prune changes it while it is copied.
        stmts = [Stmt(self.q.thread_exists, params), Stmt(self.q.lock_heads_share, params)]
        exists, _ = yield Batch(stmts, last=False)
        if exists[0][0]:
            return False
        clear = [Stmt(query, {"thread": target}) for query in self.q.delete_thread]
        yield Batch([*clear, *(Stmt(query, params) for query in self.q.copy_thread)])
        return True

    def delete_whole(self, thread_id: str) -> None:
        params = {"thread": thread_id}  # the heads first, locked as a put locks them
        stmts = [Stmt(s, params) for s in (self.q.lock_heads_update, *self.q.delete_thread)]
        self.db.run(batch(*stmts), BEGIN_WRITE)
        self.forget(thread_id)

    def blob(self, thread_id: str, ns: str, key: str, version: str) -> BlobRow | None:
        params = {"thread": thread_id, "ns": ns, "key": key, "version": version}
        (rows,) = self.db.run(batch(Stmt(self.q.blob_meta, params)), None)
        return BlobRow(*rows[0]) if rows else None


def _first(unpacked: Unpacked) -> Loaded | None:
    stored, rows, check = unpacked
    return (stored[0], rows, check) if stored else None


def _retains(put: Prepared) -> bool:
    r = put.retention
    return r is not None and (r.max_checkpoints is not None or r.max_age is not None)


class PostgresTx:
    """One read-only transaction of a ``PostgresBackend`` (``checkpoint.backend.Transaction``),
    a statement a call, each on a connection borrowed for it and one snapshot: a page's values
    are read with the page (``page`` stashes them), and only ``threads`` may need more than one
    statement (``rows.threads_op``)."""

    def __init__(self, backend: PostgresBackend) -> None:
        self.backend = backend
        self._stash: tuple[dict[Pair, BlobRow], Check] | None = None  # blobs of the last page

    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> list[StoredCheckpoint]:
        """Checkpoints with their writes and blobs in one statement (``backend.load_op``); the
        blobs are stashed for ``values``."""
        target = "page" if before is None else "page_before"
        params = {"before": before, "n": limit}
        op = self.backend.load_op(thread_id, ns, target, params, self._versions_of)
        stored, rows, check = self.backend.db.run(op, None)
        self._stash = (rows, check)
        return stored

    def _versions_of(self, row: CheckpointRow) -> dict[str, str] | None:
        return body_versions(row.body, row.checkpoint_id, self.backend.codec)

    def values(
        self, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], Check | None]:
        """The blob rows the last ``page`` came with: its one statement read every row its
        checkpoints' values need (rows it missed are not stored in that snapshot)."""
        assert self._stash is not None, "values are read with a page"
        return self._stash

    def threads(self, status: ThreadStatus | None, limit: int | None) -> list[ThreadRow]:
        return self.backend.db.run(threads_op(self.backend.q.threads, status, limit), None)
