"""``RedisBackend``: the backend protocol (``checkpoint.backend``) over plain Redis.

A put is one script call (``scripts.PUT``: the compare-and-set, the checks of what the put
relies on, the rows), a put of writes one (``PUT_WRITES``), a load one (``READ``), each written
once as an operation (``connection.Op``) that ``connection.Connection`` runs sync or async. A load
names what this process holds: the bytes of large blobs (``HeldBlobs``; the script sends only
their header line if their CRC-32 still matches) and the newest delta chains (``HeldChains``;
the script stops at a held tip), so a load of a long conversation gets only what was added
since. Everything else goes through ``transaction`` (``transaction.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from threadline.checkpoint.backend import (
    HeadMoved,
    Loaded,
    NextOf,
    NotStored,
    Pair,
    Prepared,
    StoredCheckpoint,
    VersionsOf,
)
from threadline.checkpoint.bytecache import HeldBlobs
from threadline.checkpoint.chains import HeldChains, HoldsChains, hold_put
from threadline.checkpoint.layout import REPLACE, BlobRow, WriteRow, named
from threadline.checkpoint.redis.connection import Connection, Eval, Op, text
from threadline.checkpoint.redis.keys import (
    Keys,
    blob_suffix,
    created_at_of,
    pack_blob,
    pack_checkpoint,
    q,
    unpack_blob,
    unpack_checkpoint,
    write_args,
    write_rows,
)
from threadline.checkpoint.redis.transaction import RedisTx, blob_heads, malformed, now
from threadline.checkpoint.rules import age_cutoff, created_ts
from threadline.checkpoint.transactional import retain
from threadline.errors import SerializationError
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
        return self._retain(put) if _due(put, count, oldest) else []

    async def acommit(self, put: Prepared) -> list[Pair]:
        count, oldest = await self.conn.arun(self._put(put))
        if not _due(put, count, oldest):
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
        if zlib.crc32(row.data) != crc:
            raise SerializationError(
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


def _due(put: Prepared, count: int, oldest: str | None) -> bool:
    """Whether ``put.retention`` would delete anything, from the put's reply: how many
    checkpoints the namespace holds and when its oldest was made."""
    policy = put.retention
    if policy is None or count <= 1:
        return False
    if policy.max_checkpoints is not None and count > policy.max_checkpoints:
        return True
    cutoff = age_cutoff(policy)
    oldest_at = created_ts(oldest) if oldest else None
    return cutoff is not None and oldest_at is not None and oldest_at < cutoff
