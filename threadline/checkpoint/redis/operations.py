"""What each saver method does, as sans-IO generators over ``requests.py``'s requests.

Every operation is written once and driven by ``RedisSaver``'s sync or async runner. A put is
one script call (``scripts.PUT``); encoding a delta may first cost one lookup of its base's
metadata when this process has not seen that base (``BlobCache``). A read is one script call
too (``scripts.READ``), which sends only the header of a large blob whose bytes this process
holds (``HeldBlobs``) and stops walking a list's delta chain at the tip of one it holds
(``HeldChains``): a load of a long conversation gets only what was added since.
"""

from __future__ import annotations

import dataclasses
import threading
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from threadline import serde
from threadline.checkpoint.base import (
    CheckpointRecord,
    Retention,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
    metadata_matches,
)
from threadline.checkpoint.bodies import blob_versions, decode_metadata, wanted_blobs
from threadline.checkpoint.bytecache import HeldBlobs
from threadline.checkpoint.chains import HeldChains
from threadline.checkpoint.layout import (
    BlobRow,
    EncodedCheckpoint,
    blob_refs,
    checkpoint_values,
    decode_write,
    encode_record,
    encode_writes,
    full_blobs,
    referenced_blobs,
)
from threadline.checkpoint.redis.cache import BlobCache
from threadline.checkpoint.redis.keys import (
    HEADER_READ,
    Keys,
    blob_prefix,
    blob_suffix,
    created_at_of,
    pack_blob,
    pack_checkpoint,
    q,
    stored_crc,
    unpack_blob,
    unpack_checkpoint,
    write_args,
    write_rows,
)
from threadline.checkpoint.redis.requests import Call, Emit, Eval, Op, Pipe, pairs, text
from threadline.errors import ConcurrentUpdateError, SaverUnavailableError, SerializationError
from threadline.serde import DEFAULT, Serializer

PAGE = 64  # checkpoints (or threads) read per round trip when listing
_PRUNE_ATTEMPTS = 5
_PUT_ATTEMPTS = 4

Held = Mapping[str, tuple[int, bytes]]  # key suffix -> (CRC-32, bytes) of blobs a load names
_Kv = tuple[str, str]  # (key, version)


class _ChainLetGo(Exception):
    """The ``read`` script stopped at a tip whose chain this process no longer holds."""


@dataclass(frozen=True, slots=True)
class _Load:
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


@dataclass
class Operations:
    """The saver's operations for keys under ``prefix``; ``ttl_ms`` 0 means no TTL."""

    prefix: str
    ttl_ms: int = 0
    retention: Retention | None = None
    codec: Serializer = DEFAULT
    cache: BlobCache = field(default_factory=BlobCache)
    # large blobs' bytes, by key suffix: a long conversation is not resent
    held: HeldBlobs[str] = field(default_factory=lambda: HeldBlobs(per_namespace=8))
    # long lists' delta chains, joined and decoded: a load reads only the rows above the tip
    chains: HeldChains = field(init=False)

    def __post_init__(self) -> None:
        self.chains = HeldChains(codec=self.codec)

    # -- reading ---------------------------------------------------------------------------

    def get(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> Op[CheckpointRecord | None]:
        load = self._load(thread_id, ns)
        reply = yield load.read(checkpoint_id)
        if not reply:
            return None
        # the newest: the next load most likely extends its chains
        return (yield from self._record(load, reply, newest=checkpoint_id is None))

    def list(
        self,
        thread_id: str,
        ns: str,
        filter: Mapping[str, Any] | None,
        before: str | None,
        limit: int | None,
    ) -> Op[None]:
        """Emits the checkpoints newest first, a page of ids per round trip."""
        if limit is not None and limit <= 0:
            return
        keys, qns = Keys(self.prefix, thread_id), q(ns)
        page = min(limit, PAGE) if limit is not None and not filter else PAGE
        cursor, produced = before, 0
        while True:
            high = "+" if cursor is None else "(" + cursor
            ids = [
                text(i) for i in (yield Call("zrevrangebylex", (keys.idx(qns), high, "-", 0, page)))
            ]
            wanted = ids
            if filter and ids:
                rows = yield Pipe([Call("get", (keys.checkpoint(qns, i),)) for i in ids])
                wanted = [
                    i
                    for i, row in zip(ids, rows, strict=True)
                    if row is not None
                    and metadata_matches(_metadata(keys, thread_id, ns, i, row, self.codec), filter)
                ]
            if wanted:
                load = self._load(thread_id, ns)
                replies = yield Pipe([load.read(i) for i in wanted])
                for reply in replies:
                    if not reply:
                        continue  # pruned or deleted since the page was read
                    record = yield from self._record(load, reply)
                    if record is None:
                        continue
                    yield Emit(record)
                    produced += 1
                    if limit is not None and produced >= limit:
                        return
            if len(ids) < page:
                return
            cursor = ids[-1]

    def _record(
        self, load: _Load, reply: Sequence[Any], newest: bool = False
    ) -> Op[CheckpointRecord | None]:
        """The record from a ``read`` reply; read again naming no tips if the script stopped at
        one whose chain this process let go meanwhile (another load or put moved it)."""
        try:
            return self._decode(load, reply, newest)
        except _ChainLetGo:
            load = dataclasses.replace(load, tips={})
            again = yield load.read(text(reply[0]))
            return self._decode(load, again, newest) if again else None

    def _decode(self, load: _Load, reply: Sequence[Any], newest: bool) -> CheckpointRecord:
        """The record from a ``read`` reply to ``load``; a damaged key is named in the error.
        The chains of the ``newest`` checkpoint are held from now on."""
        keys, thread_id, ns = load.keys, load.thread_id, load.ns
        raw_id, row, writes_flat, blobs_flat = reply
        checkpoint_id = text(raw_id)
        sent: dict[str, tuple[BlobRow, int | None]] = {}  # by suffix, with its CRC-32
        current = keys.checkpoint(q(ns), checkpoint_id)
        try:
            _, metadata_bytes, body = unpack_checkpoint(row)
            cp, wanted = wanted_blobs(body, self.codec)
            for i in range(0, len(blobs_flat) - 1, 2):
                suffix = text(blobs_flat[i])
                current = keys.tag + suffix
                sent[suffix] = self._fetched(load, suffix, blobs_flat[i + 1])
            current = keys.checkpoint(q(ns), checkpoint_id)
            pool = self._pool(load, sent)
            values = checkpoint_values(cp, pool, self.codec)
            metadata = decode_metadata(metadata_bytes, self.codec)
            current = keys.writes(q(ns), checkpoint_id)
            writes = tuple(decode_write(w, self.codec) for w in write_rows(pairs(writes_flat)))
        except SerializationError as exc:
            raise _in_checkpoint(exc, thread_id, ns, checkpoint_id, keys.tag) from exc
        except (KeyError, ValueError) as exc:
            raise _malformed(current, thread_id, ns, checkpoint_id, exc) from exc
        for blob, _ in sent.values():
            self.cache.put(thread_id, ns, blob)
        if newest:
            self.chains.loaded(thread_id, ns, dict(wanted), pool)
        return CheckpointRecord(
            thread_id=thread_id,
            checkpoint_ns=ns,
            checkpoint=dataclasses.replace(cp, values=values),
            metadata=metadata,
            pending_writes=writes,
        )

    def _pool(
        self, load: _Load, sent: Mapping[str, tuple[BlobRow, int | None]]
    ) -> dict[_Kv, BlobRow]:
        """The rows ``sent``, with what holds the values of the tips the walk stopped at
        (``HeldChains.rows_below``, which also lets go of a chain whose tip came back with other
        bytes); ``_ChainLetGo`` if a delta's chain is no longer held."""
        pool = {(row.key, row.version): row for row, _ in sent.values()}
        named: dict[_Kv, int] = {}  # the tips named, with the CRC-32 stored now
        stopped: set[_Kv] = set()  # those the script stopped at (their CRC-32 matched)
        for suffix, (row, crc) in sent.items():
            if suffix in load.tips and crc is not None:
                named[(row.key, row.version)] = crc
                if load.tips[suffix][0] == crc:
                    stopped.add((row.key, row.version))
        if not named:
            return pool
        below = self.chains.rows_below(load.thread_id, load.ns, named)
        if any(pool[kv].base is not None for kv in stopped - below.keys()):
            raise _ChainLetGo
        return pool | below

    def _fetched(self, load: _Load, suffix: str, stored: bytes) -> tuple[BlobRow, int | None]:
        """A blob of a ``read`` reply and the CRC-32 its header records (blobs stored before
        checksums were kept record none): given the bytes ``load`` named with that CRC-32 if
        the script sent only its header, else checked against it and, if large, held from now
        on."""
        row, crc = unpack_blob(suffix, stored), stored_crc(stored)
        if crc is None:
            return row, crc
        if not row.data:
            for held in (load.tips, load.held):
                if suffix in held and held[suffix][0] == crc:
                    return dataclasses.replace(row, data=held[suffix][1]), crc
        if zlib.crc32(row.data) != crc:
            raise SerializationError(
                f"the stored value of key {row.key!r} (version {row.version}) is damaged: its "
                "data does not match the CRC-32 in its header"
            )
        self.held.add(load.thread_id, load.ns, suffix, row.key, str(row.version), crc, row.data)
        return row, crc

    def _load(self, thread_id: str, ns: str) -> _Load:
        """A load of ``(thread_id, ns)`` naming what this process holds of it now."""
        qns = q(ns)
        chains = self.chains.tips(thread_id, ns)
        tips = {blob_suffix(qns, k, v): tip for (k, v), tip in chains.items()}
        held = self.held.held(thread_id, ns)
        return _Load(Keys(self.prefix, thread_id), thread_id, ns, tips, held)

    # -- writing ---------------------------------------------------------------------------

    def put(self, record: CheckpointRecord, fork: bool) -> Op[None]:
        """One ``PUT`` script call; sent again in full when a delta's base turned out missing."""
        thread_id, ns, cp = record.thread_id, record.checkpoint_ns, record.checkpoint
        keys, qns = Keys(self.prefix, thread_id), q(ns)
        in_full: set[str] = set()  # keys the hints called unchanged, but whose blob is missing
        for _ in range(_PUT_ATTEMPTS):
            encoded = yield from self._encode(record)
            # the blobs the checkpoint names: not its small scalars, which its body holds
            key_of = {blob_suffix(qns, k, v): k for k, v in blob_refs(cp, encoded).items()}
            blobs = list(encoded.blobs)
            if in_full - {b.key for b in blobs}:
                blobs += full_blobs(record, in_full - {b.key for b in blobs}, self.codec)
            args = self._put_args(record, fork, encoded, blobs, key_of)
            resend = [*args[:18], "1", *args[19:]]
            reply = yield Eval("put", [keys.registry, keys.threads], args, resend=resend)
            outcome = text(reply[0])
            if outcome == "conflict":
                raise _conflict(record, text(reply[1]) or None, moved=text(reply[2]) == "1")
            if outcome == "nobase":  # a delta's base vanished (pruned or deleted elsewhere)
                self.cache.drop(thread_id, ns)
                continue
            if outcome == "missing":
                in_full |= _missing_keys(record, {key_of[text(s)] for s in reply[1]})
                continue
            existed = {text(s) for s in reply[3]}
            new: list[BlobRow] = []
            for b in blobs:
                suffix = blob_suffix(qns, b.key, b.version)
                if suffix in existed:
                    self.cache.drop_one(thread_id, ns, b.key, str(b.version))
                else:
                    self.cache.put(thread_id, ns, _stringly(b))
                    self.held.add(thread_id, ns, suffix, b.key, str(b.version), None, b.data)
                    new.append(_stringly(b, b.data))
            self.chains.stored(thread_id, ns, new)
            for p in encoded.prefixes:
                self.cache.put(thread_id, ns, _stringly(p))
                self.held.drop(thread_id, ns, [blob_suffix(qns, p.key, p.version)])
            yield from self._retain(keys, thread_id, ns, int(reply[1]), reply[2])
            return
        raise SaverUnavailableError(
            f"checkpoint {cp.id!r} of thread {thread_id!r} (namespace {ns!r}) was not saved: "
            "the values it extends keep disappearing (is another process pruning the thread?)"
        )

    def _put_args(
        self,
        record: CheckpointRecord,
        fork: bool,
        encoded: EncodedCheckpoint,
        blobs: Sequence[BlobRow],
        key_of: Mapping[str, str],
    ) -> list[Any]:
        """The ``PUT`` script's arguments (documented with the script)."""
        thread_id, ns, cp = record.thread_id, record.checkpoint_ns, record.checkpoint
        keys, qns = Keys(self.prefix, thread_id), q(ns)
        score, updated_at = now()
        bases = sorted({blob_suffix(qns, b.key, b.base) for b in blobs if b.base is not None})
        args: list[Any] = [
            keys.tag, ns, qns, cp.id, cp.parent_id or "", "0" if cp.parent_id is None else "1",
            "1" if fork else "0", thread_id, self.ttl_ms, score, updated_at,
            "1" if cp.next else "0", serde.dumps([t.name for t in cp.next]),
            pack_checkpoint(encoded.row, list(key_of)), " ".join(key_of),
            len(blobs), len(bases), len(encoded.writes), "0", len(encoded.prefixes),
        ]  # fmt: skip
        for b in blobs:
            args += [blob_suffix(qns, b.key, b.version), pack_blob(b)]
        args += bases + write_args(encoded.writes)
        for p in encoded.prefixes:
            args += [blob_suffix(qns, p.key, p.version), pack_blob(p)]
        return args

    def _encode(self, record: CheckpointRecord) -> Op[EncodedCheckpoint]:
        """Encode, fetching the metadata of delta bases this process has not seen yet."""
        thread_id, ns = record.thread_id, record.checkpoint_ns
        misses: list[tuple[str, str]] = []

        def base_of(key: str, version: str) -> BlobRow | None:
            row = self.cache.get(thread_id, ns, key, str(version))
            if row is None:
                misses.append((key, str(version)))
            return row

        # raises SerializationError before any I/O; small scalars go into the body (no blob)
        encoded = encode_record(record, base_of, self.codec, inline=True)
        if not misses:
            return encoded
        keys, qns = Keys(self.prefix, thread_id), q(ns)
        bases = yield from _blob_heads(keys, [blob_suffix(qns, k, v) for k, v in misses])
        for base in bases:
            if base is not None:  # else no such base (or a damaged one): stored in full
                self.cache.put(thread_id, ns, base)
        cached = self.cache.get
        return encode_record(
            record, lambda k, v: cached(thread_id, ns, k, str(v)), self.codec, inline=True
        )

    def put_writes(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[TaskWrite]
    ) -> Op[None]:
        encoded = encode_writes(writes, self.codec)  # raises SerializationError before any I/O
        if not encoded:
            return
        keys = Keys(self.prefix, thread_id)
        score, updated_at = now()
        args: list[Any] = [
            keys.tag, ns, q(ns), checkpoint_id, thread_id, self.ttl_ms, score, updated_at,
            len(encoded), *write_args(encoded),
        ]  # fmt: skip
        yield Eval("put_writes", [keys.registry, keys.threads], args)

    def delete(self, thread_id: str) -> Op[None]:
        keys = Keys(self.prefix, thread_id)
        yield Eval("delete", [keys.registry, keys.threads], [keys.tag, thread_id])
        self.cache.drop(thread_id)
        self.held.forget_thread(thread_id)
        self.chains.forget_thread(thread_id)

    def copy(self, source: str, target: str) -> Op[None]:
        src, dst = Keys(self.prefix, source), Keys(self.prefix, target)
        score, updated_at = now()
        reply = yield Eval(
            "copy",
            [src.registry, dst.registry, dst.threads],
            [src.tag, dst.tag, target, self.ttl_ms, score, updated_at],
            once=True,  # sent again after it worked, it would find the target taken
        )
        if text(reply) == "exists":
            raise ValueError(
                f"cannot copy thread {source!r} to {target!r}: the target already has "
                "checkpoints; delete it first or pick another id"
            )

    # -- threads and retention -------------------------------------------------------------

    def list_threads(self, status: ThreadStatus | None, limit: int | None) -> Op[list[ThreadInfo]]:
        found: list[ThreadInfo] = []
        if limit is not None and limit <= 0:
            return found
        threads_key = f"{self.prefix}:threads"
        gone: list[str] = []
        start = 0
        while True:
            members = [
                text(m) for m in (yield Call("zrevrange", (threads_key, start, start + PAGE - 1)))
            ]
            if not members:
                break
            metas = yield Pipe([Call("hgetall", (Keys(self.prefix, m).meta,)) for m in members])
            for member, raw in zip(members, metas, strict=True):
                info = _thread_info(member, raw)
                if info is None:
                    gone.append(member)
                    continue
                if status is not None and info.status != status:
                    continue
                found.append(info)
                if limit is not None and len(found) >= limit:
                    break
            if (limit is not None and len(found) >= limit) or len(members) < PAGE:
                break
            start += PAGE
        if gone:  # expired threads: forget them, unless written again meanwhile
            args = [a for t in gone for a in (Keys(self.prefix, t).meta, t)]
            yield Eval("forget", [threads_key], args)
        return found

    def prune(self, thread_id: str, keep_last: int) -> Op[int]:
        if keep_last < 0:
            raise ValueError(f"keep_last must be 0 or more, not {keep_last}")
        keys = Keys(self.prefix, thread_id)
        namespaces = yield Call("smembers", (keys.namespaces,))
        removed = 0
        for ns in sorted(text(n) for n in namespaces):
            removed += yield from self._prune_ns(keys, thread_id, ns, keep_last, None)
        return removed

    def _retain(
        self, keys: Keys, thread_id: str, ns: str, count: int, oldest: bytes | None
    ) -> Op[None]:
        """Apply ``retention`` after a put, only when the put's summary says it is due."""
        policy = self.retention
        if policy is None or count <= 1:
            return
        cutoff = datetime.now(UTC) - policy.max_age if policy.max_age is not None else None
        too_many = policy.max_checkpoints is not None and count > policy.max_checkpoints
        oldest_at = parse_time(created_at_of(oldest)) if oldest is not None else None
        too_old = cutoff is not None and oldest_at is not None and oldest_at < cutoff
        if too_many or too_old:
            yield from self._prune_ns(keys, thread_id, ns, policy.max_checkpoints, cutoff)

    def _prune_ns(
        self,
        keys: Keys,
        thread_id: str,
        ns: str,
        keep_last: int | None,
        cutoff: datetime | None,
    ) -> Op[int]:
        """Drop all but the newest ``keep_last`` (and those created before ``cutoff``, but never
        the newest), with every blob no kept checkpoint needs. Retries if the head moves."""
        qns = q(ns)
        for _ in range(_PRUNE_ATTEMPTS):
            ids = [text(i) for i in (yield Call("zrange", (keys.idx(qns), 0, -1)))]
            if not ids:
                return 0
            n_keep = len(ids) if keep_last is None else min(keep_last, len(ids))
            drop, keep = ids[: len(ids) - n_keep], ids[len(ids) - n_keep :]
            rows = yield Pipe([Call("get", (keys.checkpoint(qns, i),)) for i in keep])
            kept = []
            for i, row in zip(keep, rows, strict=True):
                if row is None:
                    continue
                try:
                    created_at, _, body = unpack_checkpoint(row)
                    cp, _ = wanted_blobs(body, self.codec)
                except SerializationError as exc:
                    raise _in_checkpoint(exc, thread_id, ns, i, keys.tag) from exc
                except ValueError as exc:
                    raise _malformed(keys.checkpoint(qns, i), thread_id, ns, i, exc) from exc
                when = parse_time(created_at)
                if cutoff is not None and i != ids[-1] and when is not None and when < cutoff:
                    drop.append(i)
                    continue
                kept.append({k: str(v) for k, v in blob_versions(cp).items()})
            if not drop:
                return 0
            suffix_of = yield from self._stored_blobs(keys, qns)
            needed = referenced_blobs(kept, {kv: row for kv, (_, row) in suffix_of.items()})
            doomed = [kv for kv in suffix_of if kv not in needed]
            removed = yield Eval(
                "prune",
                [keys.registry, keys.threads],
                [keys.tag, qns, ids[-1], len(drop), len(doomed), ns, thread_id,
                 *drop, *(suffix_of[kv][0] for kv in doomed)],
            )  # fmt: skip
            if int(removed) < 0:
                continue  # a checkpoint was saved meanwhile: decide again
            for kv in doomed:
                self.cache.drop_one(thread_id, ns, *kv)
                self.held.drop(thread_id, ns, [suffix_of[kv][0]])
            return int(removed)
        return 0

    def _stored_blobs(self, keys: Keys, qns: str) -> Op[dict[tuple[str, str], tuple[str, BlobRow]]]:
        """Every blob of the namespace: (key, version) -> (suffix, metadata without data)."""
        members = yield Call("smembers", (keys.registry,))
        suffixes = sorted(s for s in map(text, members) if s.startswith(blob_prefix(qns)))
        rows = yield from _blob_heads(keys, suffixes)
        return {
            (row.key, row.version): (s, row)
            for s, row in zip(suffixes, rows, strict=True)
            if row is not None  # gone meanwhile, or damaged: nothing can chain to it
        }


# ------------------------------------------------------------------------------- helpers


def _blob_heads(keys: Keys, suffixes: Sequence[str]) -> Op[list[BlobRow | None]]:
    """The metadata of the blobs ``suffixes`` (None: missing or damaged), read without their
    data: the first bytes of each, then all of any whose header is longer than that."""
    if not suffixes:
        return []
    heads = yield Pipe([Call("getrange", (keys.tag + s, 0, HEADER_READ - 1)) for s in suffixes])
    long = [i for i, head in enumerate(heads) if len(head) == HEADER_READ and b"\n" not in head]
    if long:
        whole = yield Pipe([Call("get", (keys.tag + suffixes[i],)) for i in long])
        for i, value in zip(long, whole, strict=True):
            heads[i] = value or b""
    rows: list[BlobRow | None] = []
    for suffix, head in zip(suffixes, heads, strict=True):
        try:
            rows.append(unpack_blob(suffix, head, with_data=False))
        except ValueError:
            rows.append(None)
    return rows


def _metadata(
    keys: Keys, thread_id: str, ns: str, checkpoint_id: str, row: bytes, codec: Serializer
) -> dict[str, Any]:
    """The metadata of a stored checkpoint, for ``list(filter=...)``."""
    try:
        return decode_metadata(unpack_checkpoint(row)[1], codec)
    except SerializationError as exc:
        raise _in_checkpoint(exc, thread_id, ns, checkpoint_id, "") from exc
    except ValueError as exc:
        key = keys.checkpoint(q(ns), checkpoint_id)
        raise _malformed(key, thread_id, ns, checkpoint_id, exc) from exc


def _malformed(
    key: str, thread_id: str, ns: str, checkpoint_id: str, exc: Exception
) -> SerializationError:
    return SerializationError(
        f"thread {thread_id!r}, namespace {ns!r}, checkpoint {checkpoint_id!r}: "
        f"Redis key {key!r} is malformed ({type(exc).__name__}: {exc}); "
        "it was not written by this threadline or was damaged"
    )


def _missing_keys(record: CheckpointRecord, missing: set[str]) -> set[str]:
    """``missing`` (keys whose named blob is not stored), if the record can store them in full."""
    cp = record.checkpoint
    absent = sorted(missing - cp.values.keys())
    if absent:
        raise SerializationError(
            f"checkpoint {cp.id} of thread {record.thread_id!r} (namespace "
            f"{record.checkpoint_ns!r}) names version {cp.versions[absent[0]]!r} of key "
            f"{absent[0]!r}, which is not stored, and carries no value for it; nothing was written"
        )
    return missing


def _stringly(blob: BlobRow, data: bytes = b"") -> BlobRow:
    """The blob as it reads back from Redis: versions as strings, with ``data`` (none: its
    metadata)."""
    return BlobRow(
        blob.key,
        str(blob.version),
        str(blob.start),
        str(blob.base) if blob.base is not None else None,
        blob.chain_bytes,
        blob.full_bytes,
        data,
        blob.items,
    )


def _describe(checkpoint_id: str | None) -> str:
    return "no checkpoint (an empty thread)" if checkpoint_id is None else repr(checkpoint_id)


def _conflict(record: CheckpointRecord, head: str | None, *, moved: bool) -> ConcurrentUpdateError:
    cp = record.checkpoint
    where = f"thread {record.thread_id!r} (namespace {record.checkpoint_ns!r})"
    if moved:
        return ConcurrentUpdateError(
            f"{where} has moved on: checkpoint {cp.id} was computed from parent "
            f"{_describe(cp.parent_id)}, but the newest checkpoint is {_describe(head)}; "
            "another run saved first and nothing was written. Load the thread again and retry, "
            "or save with fork=True to branch on purpose."
        )
    return ConcurrentUpdateError(
        f"{where}: checkpoint {cp.id} does not sort after the newest checkpoint {head}; nothing "
        "was written (it is saved already, and checkpoints are never replaced, or its id was "
        "made by a clock that is behind)"
    )


def _in_checkpoint(
    exc: SerializationError, thread_id: str, ns: str, checkpoint_id: str, tag: str
) -> SerializationError:
    where = f"thread {thread_id!r}, namespace {ns!r}, checkpoint {checkpoint_id!r}"
    if tag:
        where += f" (Redis keys {tag}:*)"
    return SerializationError(f"{where}: {exc}", path=exc.path, type_name=exc.type_name)


def _thread_info(thread_id: str, raw: Mapping[bytes, bytes] | None) -> ThreadInfo | None:
    if not raw or b"checkpoint_id" not in raw:
        return None
    try:
        names = serde.loads(raw[b"next"]) if raw.get(b"next") else []
    except SerializationError:
        names = []
    return ThreadInfo(
        thread_id=text(raw.get(b"thread_id", thread_id.encode())),
        status=text(raw.get(b"status", b"idle")),  # type: ignore[arg-type]
        checkpoint_id=text(raw[b"checkpoint_id"]),
        updated_at=text(raw.get(b"updated_at", b"")),
        next=tuple(names),
    )


_clock_lock = threading.Lock()
_last_now = datetime.min.replace(tzinfo=UTC)


def now() -> tuple[int, str]:
    """(microseconds since the epoch, ISO timestamp) of now, increasing within a process."""
    global _last_now
    when = datetime.now(UTC)
    with _clock_lock:
        if when <= _last_now:
            when = _last_now + timedelta(microseconds=1)
        _last_now = when
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return delta // timedelta(microseconds=1), when.isoformat(timespec="microseconds")


def parse_time(value: str) -> datetime | None:
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
