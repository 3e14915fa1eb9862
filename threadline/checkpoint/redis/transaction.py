"""``RedisTx``: the ``Transaction`` of the Redis backend, for history pages, pruning, copies,
deletions and thread listings (puts and loads are single scripts: ``backend.py``).

Redis has no multi-command read snapshot, so reads are sent as they come. What must be atomic
is a script of its own: ``delete_thread`` (``DELETE``), ``copy_thread`` (``COPY``, which checks
again that the target is empty), and the deletions of pruning and retention, which a write
transaction collects and sends when it ends as one ``PRUNE`` script per namespace. That script
deletes the blobs no kept checkpoint uses only if the namespace's head is still the one this
transaction saw: a checkpoint saved since may use them (they are left for the next prune).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from threadline.checkpoint.backend import Check, Pair, StoredCheckpoint, ThreadRow
from threadline.checkpoint.base import ThreadStatus
from threadline.checkpoint.layout import BlobRow, CheckpointRow
from threadline.checkpoint.redis.connection import Call, Eval, Op, Pipe, one, text
from threadline.checkpoint.redis.keys import (
    HEADER_READ,
    Keys,
    blob_suffix,
    q,
    unpack_blob,
    unpack_checkpoint,
)
from threadline.clock import increasing_micros, iso_at
from threadline.errors import SerializationError

if TYPE_CHECKING:
    from threadline.checkpoint.redis.backend import RedisBackend

PAGE = 64  # threads read per round trip when listing
_Ns = tuple[str, str]  # (thread, namespace)


class RedisTx:
    """One transaction of a ``RedisBackend`` (``checkpoint.backend.Transaction``)."""

    def __init__(self, backend: RedisBackend) -> None:
        self.backend = backend
        self.run = backend.conn.run
        self.prefix = backend.prefix
        self.pool: dict[Pair, BlobRow] = {}  # blob rows the checkpoints read so far came with
        self.rows: dict[_Ns, dict[str, CheckpointRow]] = {}  # every row of a namespace, by id
        self.deleted: dict[_Ns, list[str]] = {}
        self.doomed: dict[_Ns, list[Pair]] = {}

    # -- reads ---------------------------------------------------------------------------------

    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> list[StoredCheckpoint]:
        """The page's ids, then one ``read`` script per checkpoint, sent together."""
        return self.run(self._page(thread_id, ns, before, limit))

    def _page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> Op[list[StoredCheckpoint]]:
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

    def all_blob_meta(self, thread_id: str, ns: str) -> dict[Pair, BlobRow]:
        return self.run(self._blob_meta(Keys(self.prefix, thread_id), ns))

    def _blob_meta(self, keys: Keys, ns: str) -> Op[dict[Pair, BlobRow]]:
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
            self.rows[(thread_id, ns)] = self.run(self._read_rows(thread_id, ns))
        return self.rows[(thread_id, ns)]

    def _read_rows(self, thread_id: str, ns: str) -> Op[dict[str, CheckpointRow]]:
        keys, qns = Keys(self.prefix, thread_id), q(ns)
        ids = [text(i) for i in (yield Call("zrange", (keys.idx(qns), 0, -1)))]
        stored = yield Pipe([Call("get", (keys.checkpoint(qns, i),)) for i in ids])
        return {
            cid: checkpoint_row(keys.checkpoint(qns, cid), thread_id, ns, cid, value)
            for cid, value in zip(ids, stored, strict=True)
            if value is not None  # else pruned meanwhile
        }

    def namespaces(self, thread_id: str) -> list[str]:
        found = self.run(one(Call("smembers", (Keys(self.prefix, thread_id).namespaces,))))
        return sorted(text(ns) for ns in found)

    def threads(self, status: ThreadStatus | None, limit: int | None) -> list[ThreadRow]:
        return self.run(_threads(self.prefix, status, limit))

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
            self.run(one(Pipe(calls)))
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
        self.run(one(Eval("delete", [keys.registry, keys.threads], [keys.tag, thread_id])))
        self.backend.forget(thread_id)

    def copy_thread(self, source: str, target: str) -> None:
        src, dst = Keys(self.prefix, source), Keys(self.prefix, target)
        score, updated_at = now()
        keys = [src.registry, dst.registry, dst.threads]
        args = [src.tag, dst.tag, target, self.backend.ttl_ms, score, updated_at]
        # sent again after it worked, it would find the target taken: sent once
        if text(self.run(one(Eval("copy", keys, args, once=True)))) == "exists":
            raise ValueError(f"cannot copy thread {source!r} to {target!r}: it was just written")


def _threads(prefix: str, status: ThreadStatus | None, limit: int | None) -> Op[list[ThreadRow]]:
    """Threads newest first, a page per round trip (their thread rows, then their heads'
    rows); threads whose keys expired are forgotten (``FORGET``), unless written again since."""
    found: list[ThreadRow] = []
    threads, gone, start = f"{prefix}:threads", [], 0
    fields = ("checkpoint_id", "status", "updated_at")
    while limit is None or len(found) < limit:
        members = [text(m) for m in (yield Call("zrevrange", (threads, start, start + PAGE - 1)))]
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
                body = checkpoint_row(key, member, "", head, row).body
                found.append(ThreadRow(member, state, head, updated_at, body))  # type: ignore[arg-type]
        if len(members) < PAGE:
            break
        start += PAGE
    if gone:
        yield Eval("forget", [threads], [a for t in gone for a in (Keys(prefix, t).meta, t)])
    return found


def blob_heads(keys: Keys, suffixes: Sequence[str]) -> Op[list[BlobRow | None]]:
    """The metadata of the blobs ``suffixes`` (None: missing or damaged), read without their
    data: the first bytes of each, then all of any whose header is longer than that."""
    heads = yield Pipe([Call("getrange", (keys.tag + s, 0, HEADER_READ - 1)) for s in suffixes])
    long = [i for i, head in enumerate(heads) if len(head) == HEADER_READ and b"\n" not in head]
    if long:
        whole = yield Pipe([Call("get", (keys.tag + suffixes[i],)) for i in long])
        for i, value in zip(long, whole, strict=True):
            heads[i] = value or b""
    rows: list[BlobRow | None] = []
    for suffix, head in zip(suffixes, heads, strict=True):
        try:
            rows.append(unpack_blob(suffix, head)[0].without_data())
        except ValueError:
            rows.append(None)
    return rows


def checkpoint_row(
    key: str, thread_id: str, ns: str, checkpoint_id: str, stored: bytes
) -> CheckpointRow:
    try:
        return unpack_checkpoint(checkpoint_id, stored)
    except ValueError as exc:
        raise malformed(key, thread_id, ns, checkpoint_id, exc) from exc


def malformed(
    key: str, thread_id: str, ns: str, checkpoint_id: str, exc: Exception
) -> SerializationError:
    return SerializationError(
        f"thread {thread_id!r}, namespace {ns!r}, checkpoint {checkpoint_id!r}: "
        f"Redis key {key!r} is malformed ({type(exc).__name__}: {exc}); "
        "it was not written by this threadline or was damaged"
    )


def now() -> tuple[int, str]:
    """(microseconds since the epoch, ISO timestamp) of now, increasing within a process: a
    thread's score in ``P:threads`` and its ``updated_at``."""
    micros = increasing_micros()
    return micros, iso_at(micros)
