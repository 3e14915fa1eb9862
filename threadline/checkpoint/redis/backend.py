"""``RedisBackend`` and its ``RedisTx``: the backend protocol (``checkpoint.backend``) over
plain Redis.

A put is one script call (``scripts.PUT``: the compare-and-set, the checks of what the put
relies on, the rows), a put of writes one (``PUT_WRITES``), a load one (``READ``), each written
once as an operation (``connection.Op``) that ``connection.Connection`` runs sync or async. A load
names what this process holds: the bytes of large blobs (``HeldBlobs``; the script sends only
their header line if their CRC-32 still matches) and the newest delta chains (``HeldChains``;
the script stops at a held tip), so a load of a long conversation gets only what was added
since.

Everything else goes through ``RedisTx``. Redis has no multi-command read snapshot, so reads are
sent as they come. What must be atomic is a script of its own: ``delete_thread`` (``DELETE``),
``copy_thread`` (``COPY``, which checks again that the target is empty), and the deletions of
pruning and retention, which a write transaction collects and sends when it ends as one
``PRUNE`` script per namespace. That script deletes the blobs no kept checkpoint uses only if
the namespace's head is still the one this transaction saw: a checkpoint saved since may use
them (they are left for the next prune).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from threadline.checkpoint.backend import (
    Check,
    HeadMoved,
    Loaded,
    NextOf,
    NotStored,
    Pair,
    Prepared,
    StoredCheckpoint,
    ThreadRow,
    VersionsOf,
)
from threadline.checkpoint.base import ThreadStatus
from threadline.checkpoint.bytecache import HeldBlobs
from threadline.checkpoint.chains import HeldChains, HoldsChains, hold_put
from threadline.checkpoint.layout import REPLACE, BlobRow, CheckpointRow, WriteRow, named
from threadline.checkpoint.redis.connection import Call, Connection, Eval, Op, Pipe, one, runs, text
from threadline.checkpoint.redis.keys import (
    Keys,
    blob_heads,
    blob_suffix,
    checkpoint_row,
    created_at_of,
    malformed,
    now,
    pack_blob,
    pack_checkpoint,
    q,
    unpack_blob,
    unpack_checkpoint,
    write_args,
    write_rows,
)
from threadline.checkpoint.rules import retention_due
from threadline.checkpoint.seals import blob_intact
from threadline.checkpoint.transactional import retain
from threadline.errors import CorruptedDataError, SerializationError
from threadline.serde import Serializer

Held = Mapping[str, tuple[int, bytes]]  # key suffix -> (CRC-32, bytes) of blobs a load names


class _ChainLetGo(Exception):
    """The ``read`` script stopped at a tip whose chain this process no longer holds."""


@dataclass(frozen=True, slots=True)
class Reading:
    """A load's thread and namespace, and what it names to the ``read`` script: the tips of
    the held chains and the blobs whose bytes are held (each by key suffix, with its CRC-32)."""

    keys: Keys
    thread_id: str
    ns: str
    tips: Held
    held: Held

    def read(self, checkpoint_id: str | None) -> Eval:
        """The ``read`` script call (its arguments are documented with the script)."""
        has_id = "0" if checkpoint_id is None else "1"
        args: list[Any] = [self.keys.tag, q(self.ns), checkpoint_id or "", has_id, len(self.tips)]
        for suffix, (crc, _) in [*self.tips.items(), *self.held.items()]:
            args += [suffix, crc]
        return Eval("read", [self.keys.idx(q(self.ns))], args)


class RedisBackend(HoldsChains):
    """Rows under key ``prefix`` (``keys.py``), through ``conn``; ``ttl_ms`` 0: no TTL."""

    compaction = REPLACE
    in_process = False
    sealed = True

    def __init__(self, conn: Connection, prefix: str, ttl_ms: int, codec: Serializer) -> None:
        self.conn = conn
        self.prefix = prefix
        self.ttl_ms = ttl_ms
        # large blobs' bytes, by key suffix: a long conversation is not resent
        self.bytes: HeldBlobs[str] = HeldBlobs(per_namespace=8)
        # long lists' delta chains, joined and decoded: a load reads only the rows above the tip
        self.chains = HeldChains(codec=codec)

    def close(self) -> None:
        self.conn.close()
        self.forget()

    @contextmanager
    def transaction(self, write: bool) -> Iterator[RedisTx]:
        """Reads as they come (Redis has no read snapshot); a write transaction's deletions
        are sent when it ends, one ``PRUNE`` script per namespace."""
        tx = RedisTx(self)
        yield tx
        if write:
            tx.flush()

    # -- put -----------------------------------------------------------------------------------

    def commit(self, put: Prepared) -> list[Pair]:
        count, oldest = self.conn.run(self._put(put))
        return self._retain(put) if retention_due(put.retention, count, oldest) else []

    async def acommit(self, put: Prepared) -> list[Pair]:
        count, oldest = await self.conn.arun(self._put(put))
        if not retention_due(put.retention, count, oldest):
            return []
        return await asyncio.to_thread(self._retain, put)

    def _retain(self, put: Prepared) -> list[Pair]:
        assert put.retention is not None
        with self.transaction(True) as tx:
            return retain(tx, put.thread_id, put.ns, put.row.checkpoint_id, put.retention)

    def _put(self, put: Prepared) -> Op[tuple[int, str | None]]:
        """The ``put`` script call; its reply's count and oldest creation time (retention)."""
        keys, qns = Keys(self.prefix, put.thread_id), q(put.ns)
        args, key_of = self._put_args(put, keys, qns)
        resend = [*args[:17], "1", *args[18:]]
        reply = yield Eval("put", [keys.registry, keys.threads], args, resend=resend)
        outcome = text(reply[0])
        if outcome == "conflict":
            raise HeadMoved(text(reply[1]) or None)
        if outcome == "missing":
            raise NotStored({key_of[text(s)] for s in reply[1]})
        self._stored(put, qns, {text(s) for s in reply[3]})
        return int(reply[1]), created_at_of(text(reply[4]), reply[2]) if reply[2] else None

    def _put_args(self, put: Prepared, keys: Keys, qns: str) -> tuple[list[Any], dict[str, str]]:
        """The ``put`` script's arguments (documented with the script), and the key of each
        suffix it may report missing."""
        row = put.row
        score, updated_at = now()
        key_of = {blob_suffix(qns, k, v): k for k, v in put.check}
        named_blobs = [blob_suffix(qns, k, v) for k, v in put.refs.items()]
        args: list[Any] = [
            keys.tag, put.ns, qns, row.checkpoint_id, row.parent_id or "",
            "0" if row.parent_id is None else "1", "1" if put.fork else "0", put.thread_id,
            self.ttl_ms, score, updated_at, "1" if put.next_names else "0",
            pack_checkpoint(row, named_blobs), " ".join(key_of), len(put.blobs),
            len(put.deltas), len(put.writes), "0", len(put.prefixes),
        ]  # fmt: skip
        for b in put.blobs:
            args += [blob_suffix(qns, b.key, b.version), pack_blob(b)]
        for d in put.deltas:
            below = f"{q(d.start)}|{d.chain_bytes - len(d.data)}|{d.full_bytes}"
            args += [blob_suffix(qns, d.key, d.base), below]
        args += write_args(put.writes)
        for p in put.prefixes:
            args += [blob_suffix(qns, p.key, p.version), pack_blob(p)]
        return args, key_of

    def _stored(self, put: Prepared, qns: str, existed: set[str]) -> None:
        """Hold what a put stored: large blobs' bytes, chains grown (not blobs stored before)."""
        suffixes = [(blob_suffix(qns, b.key, b.version), b) for b in put.blobs]
        new = [(suffix, b) for suffix, b in suffixes if suffix not in existed]
        gone = [blob_suffix(qns, p.key, p.version) for p in put.prefixes]
        hold_put(self.bytes, self.chains, put.thread_id, put.ns, new, None, gone)

    # -- writes --------------------------------------------------------------------------------

    def commit_writes(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        writes: Sequence[WriteRow],
        next_of: NextOf,
    ) -> None:
        """The script reads the thread's planned tasks from its thread row (``has_next``)."""
        self.conn.run(self._put_writes(thread_id, ns, checkpoint_id, writes))

    async def acommit_writes(
        self,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        writes: Sequence[WriteRow],
        next_of: NextOf,
    ) -> None:
        await self.conn.arun(self._put_writes(thread_id, ns, checkpoint_id, writes))

    def _put_writes(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> Op[None]:
        keys = Keys(self.prefix, thread_id)
        score, updated_at = now()
        args: list[Any] = [
            keys.tag, ns, q(ns), checkpoint_id, thread_id, self.ttl_ms, score, updated_at,
            len(writes), *write_args(writes),
        ]  # fmt: skip
        yield Eval("put_writes", [keys.registry, keys.threads], args)

    # -- load ----------------------------------------------------------------------------------

    def load(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Loaded | None:
        """The script finds the blobs from the checkpoint's header: ``versions_of`` is unused."""
        return self.conn.run(self.read(thread_id, ns, checkpoint_id))

    async def aload(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Loaded | None:
        return await self.conn.arun(self.read(thread_id, ns, checkpoint_id))

    def read(self, thread_id: str, ns: str, checkpoint_id: str | None) -> Op[Loaded | None]:
        """One ``read`` script call (the newest checkpoint if ``checkpoint_id`` is None)."""
        reading = self.reading(thread_id, ns)
        reply = yield reading.read(checkpoint_id)
        return (yield from self.decoded(reading, reply))

    def reading(self, thread_id: str, ns: str) -> Reading:
        """A load of ``(thread_id, ns)`` naming what this process holds of it now."""
        qns = q(ns)
        chains = self.chains.tips(thread_id, ns)
        tips = {blob_suffix(qns, k, v): tip for (k, v), tip in chains.items()}
        held = self.bytes.held(thread_id, ns)
        return Reading(Keys(self.prefix, thread_id), thread_id, ns, tips, held)

    def decoded(self, reading: Reading, reply: Sequence[Any] | None) -> Op[Loaded | None]:
        """The rows of a ``read`` reply (None: no such checkpoint); read again naming no tips
        if the script stopped at one whose chain this process let go meanwhile (another load or
        put moved it)."""
        if not reply:
            return None
        try:
            return self._rows(reading, reply)
        except _ChainLetGo:
            reading = dataclasses.replace(reading, tips={})
            again = yield reading.read(text(reply[0]))
            return self._rows(reading, again) if again else None

    def _rows(self, reading: Reading, reply: Sequence[Any]) -> Loaded:
        """The checkpoint row, its writes and the blob rows of a ``read`` reply; a damaged key
        is named in the error."""
        keys, thread_id, ns = reading.keys, reading.thread_id, reading.ns
        raw_id, stored, stored_writes, blobs_flat = reply
        checkpoint_id = text(raw_id)
        sent: dict[str, tuple[BlobRow, int | None]] = {}  # by suffix, with its CRC-32
        current = keys.checkpoint(q(ns), checkpoint_id)
        try:
            row = unpack_checkpoint(checkpoint_id, stored)
            for i in range(0, len(blobs_flat) - 1, 2):
                suffix = text(blobs_flat[i])
                current = keys.tag + suffix
                sent[suffix] = self._fetched(reading, suffix, blobs_flat[i + 1])
            current = keys.writes(q(ns), checkpoint_id)
            writes = tuple(write_rows(stored_writes))
        except SerializationError as exc:
            raise named(exc, thread_id, ns, checkpoint_id) from exc
        except (KeyError, ValueError) as exc:
            raise malformed(current, thread_id, ns, checkpoint_id, exc) from exc
        return StoredCheckpoint(row, writes), self._pool(reading, sent), None

    def _pool(
        self, reading: Reading, sent: Mapping[str, tuple[BlobRow, int | None]]
    ) -> dict[Pair, BlobRow]:
        """The rows ``sent``, with what holds the values of the tips the walk stopped at
        (``HeldChains.rows_below``, which also lets go of a chain whose tip came back with other
        bytes); ``_ChainLetGo`` if a delta's chain is no longer held."""
        pool = {(row.key, row.version): row for row, _ in sent.values()}
        named_tips: dict[Pair, int] = {}  # the tips named, with the CRC-32 stored now
        stopped: set[Pair] = set()  # those the script stopped at (their CRC-32 matched)
        for suffix, (row, crc) in sent.items():
            if suffix in reading.tips and crc is not None:
                named_tips[(row.key, row.version)] = crc
                if reading.tips[suffix][0] == crc:
                    stopped.add((row.key, row.version))
        if not named_tips:
            return pool
        below = self.chains.rows_below(reading.thread_id, reading.ns, named_tips)
        if any(pool[kv].base is not None for kv in stopped - below.keys()):
            raise _ChainLetGo
        return pool | below

    def _fetched(self, reading: Reading, suffix: str, stored: bytes) -> tuple[BlobRow, int | None]:
        """A blob of a ``read`` reply and the CRC-32 its header records (none for a prefix
        row): given the bytes ``reading`` named with that CRC-32 if the script sent only its
        header, else checked against it and, if large, held from now on."""
        row, crc = unpack_blob(suffix, stored)
        if crc is None:
            return row, crc
        if not row.data:
            for held in (reading.tips, reading.held):
                if suffix in held and held[suffix][0] == crc:
                    return dataclasses.replace(row, data=held[suffix][1]), crc
        if not blob_intact(row, crc):
            raise CorruptedDataError(
                f"the stored value of key {row.key!r} (version {row.version}) is damaged: its "
                "data does not match the CRC-32 in its header"
            )
        thread_id, ns = reading.thread_id, reading.ns
        self.bytes.add(thread_id, ns, suffix, row.key, row.version, crc, row.data)
        return row, crc

    # -- what the core asks outside transactions -----------------------------------------------

    def blob(self, thread_id: str, ns: str, key: str, version: str) -> BlobRow | None:
        """One ``GETRANGE`` (the header); ``None`` on the home loop of an async client, where
        nothing can wait for a reply: the value is then stored whole."""
        if not self.conn.can_block():
            return None
        keys = Keys(self.prefix, thread_id)
        (row,) = self.conn.run(blob_heads(keys, [blob_suffix(q(ns), key, version)]))
        return row


PAGE = 64  # threads read per round trip when listing
_Ns = tuple[str, str]  # (thread, namespace)


class RedisTx:
    """One transaction of a ``RedisBackend`` (``checkpoint.backend.Transaction``)."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend
        self.conn = backend.conn
        self.prefix = backend.prefix
        self.pool: dict[Pair, BlobRow] = {}  # blob rows the checkpoints read so far came with
        self.rows: dict[_Ns, dict[str, CheckpointRow]] = {}  # every row of a namespace, by id
        self.deleted: dict[_Ns, list[str]] = {}
        self.doomed: dict[_Ns, list[Pair]] = {}

    # -- reads ---------------------------------------------------------------------------------

    @runs
    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> Op[list[StoredCheckpoint]]:
        """The page's ids, then one ``read`` script per checkpoint, sent together."""
        idx = Keys(self.prefix, thread_id).idx(q(ns))
        high = "+" if before is None else "(" + before
        ids = yield Call("zrevrangebylex", (idx, high, "-", 0, limit))
        reading = self.backend.reading(thread_id, ns)
        replies = yield Pipe([reading.read(text(i)) for i in ids])
        found = []
        for reply in replies:
            loaded = yield from self.backend.decoded(reading, reply)
            if loaded is not None:  # else pruned or deleted since the page was read
                found.append(loaded[0])
                self.pool.update(loaded[1])
        return found

    def values(
        self, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], Check | None]:
        """What the checkpoints read came with (checked as they were read)."""
        return self.pool, None

    @runs
    def all_blob_meta(self, thread_id: str, ns: str) -> Op[dict[Pair, BlobRow]]:
        keys = Keys(self.prefix, thread_id)
        start = f":b:{q(ns)}:"  # what the suffix of every blob of the namespace starts with
        members = map(text, (yield Call("smembers", (keys.registry,))))
        rows = yield from blob_heads(keys, sorted(s for s in members if s.startswith(start)))
        return {(r.key, r.version): r for r in rows if r}

    def ids(self, thread_id: str, ns: str) -> list[tuple[str, str]]:
        rows = self._all_rows(thread_id, ns)
        return [(cid, rows[cid].created_at) for cid in sorted(rows, reverse=True)]

    def bodies(self, thread_id: str, ns: str) -> list[tuple[str, bytes]]:
        gone = set(self.deleted.get((thread_id, ns), ()))
        rows = self._all_rows(thread_id, ns)
        return [(cid, row.body) for cid, row in rows.items() if cid not in gone]

    def _all_rows(self, thread_id: str, ns: str) -> dict[str, CheckpointRow]:
        """Every checkpoint row of the namespace, read once per transaction (the newest is the
        head ``PRUNE`` checks)."""
        if (thread_id, ns) not in self.rows:
            self.rows[(thread_id, ns)] = self._read_rows(thread_id, ns)
        return self.rows[(thread_id, ns)]

    @runs
    def _read_rows(self, thread_id: str, ns: str) -> Op[dict[str, CheckpointRow]]:
        keys, qns = Keys(self.prefix, thread_id), q(ns)
        ids = [text(i) for i in (yield Call("zrange", (keys.idx(qns), 0, -1)))]
        stored = yield Pipe([Call("get", (keys.checkpoint(qns, i),)) for i in ids])
        return {
            cid: checkpoint_row(keys.checkpoint(qns, cid), thread_id, ns, cid, value)
            for cid, value in zip(ids, stored, strict=True)
            if value is not None  # else pruned meanwhile
        }

    @runs
    def namespaces(self, thread_id: str) -> Op[list[str]]:
        found = yield Call("smembers", (Keys(self.prefix, thread_id).namespaces,))
        return sorted(text(ns) for ns in found)

    @runs
    def threads(self, status: ThreadStatus | None, limit: int | None) -> Op[list[ThreadRow]]:
        """Threads newest first, a page per round trip (their thread rows, then their heads'
        rows); threads whose keys expired are forgotten (``FORGET``), unless written again
        since."""
        prefix = self.prefix
        found: list[ThreadRow] = []
        threads, gone, start = f"{prefix}:threads", [], 0
        fields = ("checkpoint_id", "status", "updated_at")
        while limit is None or len(found) < limit:
            members = [
                text(m) for m in (yield Call("zrevrange", (threads, start, start + PAGE - 1)))
            ]
            metas = yield Pipe([Call("hmget", (Keys(prefix, m).meta, *fields)) for m in members])
            live = []
            for member, (head, state, updated_at) in zip(members, metas, strict=True):
                if head is None:
                    gone.append(member)
                elif status is None or text(state) == status:
                    live.append((member, text(head), text(state), text(updated_at or b"")))
            live = live[: None if limit is None else limit - len(found)]
            heads = [Keys(prefix, m).checkpoint(q(""), head) for m, head, _, _ in live]
            rows = yield Pipe([Call("get", (key,)) for key in heads])
            for (member, head, state, updated_at), key, row in zip(live, heads, rows, strict=True):
                if row is not None:  # else pruned meanwhile
                    body = _head_body(key, member, head, row)
                    found.append(ThreadRow(member, state, head, updated_at, body))  # type: ignore[arg-type]
            if len(members) < PAGE:
                break
            start += PAGE
        if gone:
            yield Eval("forget", [threads], [a for t in gone for a in (Keys(prefix, t).meta, t)])
        return found

    # -- writes --------------------------------------------------------------------------------

    def delete(self, thread_id: str, ns: str, ids: Collection[str]) -> None:
        self.deleted.setdefault((thread_id, ns), []).extend(ids)

    def delete_blobs(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> None:
        self.doomed.setdefault((thread_id, ns), []).extend(pairs)

    def flush(self) -> None:
        """Send the deletions collected, one ``PRUNE`` script per namespace, in one round
        trip; the bytes held of the blobs deleted are let go."""
        calls = [self._prune(thread_id, ns, ids) for (thread_id, ns), ids in self.deleted.items()]
        if calls:
            self.conn.run(one(Pipe(calls)))
        for (thread_id, ns), pairs in self.doomed.items():
            self.backend.bytes.drop(thread_id, ns, [blob_suffix(q(ns), k, v) for k, v in pairs])

    def _prune(self, thread_id: str, ns: str, ids: Sequence[str]) -> Eval:
        keys, qns = Keys(self.prefix, thread_id), q(ns)
        doomed = [blob_suffix(qns, k, v) for k, v in self.doomed.get((thread_id, ns), ())]
        head = max(self.rows.get((thread_id, ns)) or [""])  # none read: no blob is deleted
        args = [keys.tag, qns, head, len(ids), len(doomed), ns, thread_id, *ids, *doomed]
        return Eval("prune", [keys.registry, keys.threads], args)

    def delete_thread(self, thread_id: str) -> None:
        keys = Keys(self.prefix, thread_id)
        self.conn.run(one(Eval("delete", [keys.registry, keys.threads], [keys.tag, thread_id])))
        self.backend.forget(thread_id)

    def copy_thread(self, source: str, target: str) -> None:
        src, dst = Keys(self.prefix, source), Keys(self.prefix, target)
        score, updated_at = now()
        keys = [src.registry, dst.registry, dst.threads]
        args = [src.tag, dst.tag, target, self.backend.ttl_ms, score, updated_at]
        # sent again after it worked, it would find the target taken: sent once
        if text(self.conn.run(one(Eval("copy", keys, args, once=True)))) == "exists":
            raise ValueError(f"cannot copy thread {source!r} to {target!r}: it was just written")


def _head_body(key: str, thread_id: str, head: str, stored: bytes) -> bytes:
    """The body of a thread's head for ``list_threads``; none (which fails its check, so the
    thread is listed ``damaged``) if the key is malformed."""
    try:
        return checkpoint_row(key, thread_id, "", head, stored).body
    except CorruptedDataError:
        return b""
