"""``PostgresSaver``: the saver protocol on PostgreSQL, each method sync and async.

Each operation (``_get_op``, ``_put_op``, ...) is written once, as a generator of statement
batches (``driver``), and run by ``Connections.run`` or ``Connections.arun``.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Self

from threadline.checkpoint.base import (
    BaseSaver,
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
from threadline.checkpoint.changes import hints_of
from threadline.checkpoint.formats import migrations_from
from threadline.checkpoint.layout import (
    BlobRow,
    Compaction,
    EncodedCheckpoint,
    WriteRow,
    blob_refs,
    checkpoint_values,
    corrupted,
    decode_write,
    encode_record,
    encode_writes,
    full_blobs,
    loading,
)
from threadline.checkpoint.postgres.batcher import PutBatchers
from threadline.checkpoint.postgres.cache import BlobCache
from threadline.checkpoint.postgres.driver import BEGIN_READ, BEGIN_WRITE, Batch, Op, Stmt
from threadline.checkpoint.postgres.given import Given, connections_for
from threadline.checkpoint.postgres.rows import (
    HeadMoved,
    Loaded,
    Named,
    NotStored,
    Pieces,
    PutParams,
    blob_row,
    dedupe_writes,
    held_params,
    loaded_blobs,
    normalized,
    split_load,
    tip_params,
    writes_params,
)
from threadline.checkpoint.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from threadline.checkpoint.postgres.sources import RecentWrites
from threadline.checkpoint.postgres.statements import Queries
from threadline.checkpoint.rules import (
    age_cutoff,
    check_keep_last,
    check_put,
    created_ts,
    status_of,
)
from threadline.errors import ConcurrentUpdateError, SerializationError
from threadline.serde import DEFAULT, Serializer

# An updated row's TOAST stays until a vacuum, so old full blobs are kept, not rewritten (their
# deltas still become prefix rows), and full blobs are rare: a list is stored about once (its
# deltas), a full copy only once its deltas outweigh 16 times the last one (and 1 MiB). Loads
# stay flat without them: the saver holds the chains it reads (``chains.py``).
COMPACTION = Compaction(ratio=16.0, min_chain_bytes=1 << 20, rewrite_full=False)
_PAGE_SIZE = 64


class PostgresSaver(BaseSaver):
    """Checkpoints in PostgreSQL, shared safely by any number of processes and machines.

    Give it a URL, or (as LangGraph's docs do) a ``psycopg.Connection`` or ``ConnectionPool``
    made with ``autocommit=True``, which stays yours (``given.py``). Call :meth:`setup` once
    (idempotent, safe to run concurrently) to create the tables, and :meth:`close` (or use the
    saver as a context manager) when done::

        with PostgresSaver.from_conn_string("postgresql://localhost/app") as saver:
            graph = builder.compile(checkpointer=saver)

    ``schema`` puts the tables in another schema (``setup`` creates it). ``pool_size`` bounds
    the connections of the sync pool and of each event loop's async pool opened from a URL.
    ``retention`` prunes a namespace's older checkpoints each time one is saved, in the same
    transaction. ``copy_thread`` raises ``ValueError`` if the target already has checkpoints.
    No connection is made before the first call.
    """

    def __init__(
        self,
        conn: str | Given,
        *,
        pool_size: int | None = None,
        retention: Retention | None = None,
        serde: Serializer | None = None,
        schema: str = "public",
        connect_timeout: float | None = None,
        pool_timeout: float | None = None,
    ) -> None:
        if not schema:
            raise ValueError("PostgresSaver schema must not be empty")
        self.url = conn if isinstance(conn, str) else None
        self.schema = schema
        self.retention = retention
        self.serde = serde or DEFAULT
        self._q = Queries(schema)
        pools = {"pool_size": pool_size, "connect_timeout": connect_timeout}
        pools["pool_timeout"] = pool_timeout
        name, table = type(self).__name__, self._q.version_table
        self._db = connections_for(name, conn, schema, table, pools)
        self._cache = BlobCache()
        # large values' bytes, by (key, version): a long conversation is not resent
        self._bytes: HeldBlobs[tuple[str, str]] = HeldBlobs(per_namespace=16)
        self._chains = HeldChains(codec=self.serde)  # long delta chains: a load walks new rows
        self._recent = RecentWrites()  # the run input's write, which the next put refers to
        self._batchers = PutBatchers(self._db, self._q.put_many)  # aput: many puts, one call

    @classmethod
    def from_conn_string(cls, conn_string: str, *, pipeline: bool = False, **options: Any) -> Self:
        """A set-up saver: ``with PostgresSaver.from_conn_string(url) as saver:``. Its
        operations are pipelined whatever ``pipeline`` says (each is one round trip)."""
        saver = cls(conn_string, **options)
        try:
            saver.setup()
        except BaseException:
            saver.close()
            raise
        return saver

    def __repr__(self) -> str:
        state = "closed" if self._db.closed else "open"
        return f"PostgresSaver({self._db.masked!r}, schema={self.schema!r}, {state})"

    @property
    def pool_size(self) -> int:
        """The most connections of the sync pool, and of each event loop's async pool."""
        return self._db.pool_size

    # -- setup ---------------------------------------------------------------------------------

    def setup(self) -> None:
        """Create the schema, tables and functions if missing; safe to call concurrently.

        Raises ``SaverUnavailableError`` if the tables were made by a newer threadline.
        """
        self._db.run(self._setup_op(), BEGIN_WRITE)

    async def asetup(self) -> None:
        await self._db.arun(self._setup_op(), BEGIN_WRITE)

    def _setup_op(self) -> Op[None]:
        q = self._q
        # Concurrent CREATE ... IF NOT EXISTS can still collide: one setup at a time per schema.
        lock = Stmt(
            "SELECT pg_advisory_xact_lock(hashtext('threadline.setup'), hashtext(%(schema)s))",
            {"schema": self.schema},
            prepare=False,
        )
        stmts = [lock]
        if self.schema != "public":
            stmts.append(Stmt(f"CREATE SCHEMA IF NOT EXISTS {q.schema}", prepare=False))
        stmts += [
            Stmt(q.ddl_version_table, prepare=False),
            Stmt(f"SELECT max(version) FROM {q.version_table}", prepare=False),
        ]
        results = yield Batch(stmts, last=False)
        found = results[-1].rows[0][0]
        if found is not None and found > SCHEMA_VERSION:
            raise self._db.too_new(found)
        stmts = [
            Stmt(q.format(migration), prepare=False)
            for step in migrations_from(found, SCHEMA_VERSION, MIGRATIONS, f"schema {q.schema}")
            for migration in step
        ]
        stmts += [Stmt(ddl, prepare=False) for ddl in q.ddl]
        if found is None:
            stmts.append(
                Stmt(
                    f"INSERT INTO {q.version_table} (version) VALUES (%(v)s)",
                    {"v": SCHEMA_VERSION},
                    prepare=False,
                )
            )
        elif found < SCHEMA_VERSION:
            stmts.append(
                Stmt(
                    f"UPDATE {q.version_table} SET version = %(v)s",
                    {"v": SCHEMA_VERSION},
                    prepare=False,
                )
            )
        yield Batch(stmts)

    # -- reading -------------------------------------------------------------------------------

    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        args = (thread_id, checkpoint_ns, checkpoint_id)
        loaded = self._db.run(self._get_op(*args), None)
        records = self._records(thread_id, checkpoint_ns, loaded)
        if records is None:
            loaded = self._db.run(self._get_op(*args, tips=False), None)
            records = self._decode(thread_id, checkpoint_ns, loaded)
        return records[0] if records else None

    async def aget_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        args = (thread_id, checkpoint_ns, checkpoint_id)
        loaded = await self._db.arun(self._get_op(*args), None)
        records = self._records(thread_id, checkpoint_ns, loaded)
        if records is None:
            loaded = await self._db.arun(self._get_op(*args, tips=False), None)
            records = self._decode(thread_id, checkpoint_ns, loaded)
        return records[0] if records else None

    def _get_op(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None, tips: bool = True
    ) -> Op[Loaded]:
        """The checkpoint, its writes and its blobs: one statement, one snapshot."""
        held, params = self._held(thread_id, checkpoint_ns, tips)
        params.update({"cid": checkpoint_id})
        query = self._q.load["latest" if checkpoint_id is None else "one"]
        (result,) = yield Batch([Stmt(query, params, hot=True)])
        return split_load(result.rows, held)

    def _records(self, thread_id: str, ns: str, loaded: Loaded) -> list[CheckpointRecord] | None:
        """The records of ``loaded``; None if they must be read again naming no chain tips.

        A load names the tips of the chains this process holds, and the server stops there;
        if a chain was let go meanwhile (another load or put moved it, or it was evicted), the
        rows below its tip are missing. Any load that fails to decode after naming tips is
        read again without them: a damaged value then fails that second read.
        """
        try:
            return self._decode(thread_id, ns, loaded)
        except SerializationError:
            if not loaded.tips:
                raise
            return None

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
        produced, cursor = 0, before
        while True:
            n = self._page_size(filter, limit, produced)
            op = self._page_op(thread_id, checkpoint_ns, filter, cursor, n)
            loaded, n_rows, last_id = self._db.run(op, _snapshot(filter))
            # Decoded and yielded with no connection held.
            records = self._records(thread_id, checkpoint_ns, loaded)
            if records is None:
                op = self._page_op(thread_id, checkpoint_ns, filter, cursor, n, tips=False)
                loaded, n_rows, last_id = self._db.run(op, _snapshot(filter))
                records = self._decode(thread_id, checkpoint_ns, loaded)
            for record in records:
                yield record
                produced += 1
                if limit is not None and produced >= limit:
                    return
            if n_rows < n:
                return
            cursor = last_id

    async def alist(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointRecord]:
        if limit is not None and limit <= 0:
            return
        produced, cursor = 0, before
        while True:
            n = self._page_size(filter, limit, produced)
            op = self._page_op(thread_id, checkpoint_ns, filter, cursor, n)
            loaded, n_rows, last_id = await self._db.arun(op, _snapshot(filter))
            records = self._records(thread_id, checkpoint_ns, loaded)
            if records is None:
                op = self._page_op(thread_id, checkpoint_ns, filter, cursor, n, tips=False)
                loaded, n_rows, last_id = await self._db.arun(op, _snapshot(filter))
                records = self._decode(thread_id, checkpoint_ns, loaded)
            for record in records:
                yield record
                produced += 1
                if limit is not None and produced >= limit:
                    return
            if n_rows < n:
                return
            cursor = last_id

    @staticmethod
    def _page_size(filter: Mapping[str, Any] | None, limit: int | None, produced: int) -> int:
        if limit is None or filter:
            return _PAGE_SIZE
        return max(1, min(_PAGE_SIZE, limit - produced))

    def _page_op(
        self,
        thread_id: str,
        checkpoint_ns: str,
        filter: Mapping[str, Any] | None,
        before: str | None,
        n: int,
        tips: bool = True,
    ) -> Op[tuple[Loaded, int, str | None]]:
        """One page of ``n`` checkpoints older than ``before``: (matching ones, rows, last id)."""
        held, params = self._held(thread_id, checkpoint_ns, tips)
        params.update({"before": before, "n": n})
        if not filter:
            # The page, its writes and its blobs in one statement.
            query = self._q.load["page" if before is None else "page_before"]
            (result,) = yield Batch([Stmt(query, params, hot=True)])
            loaded = split_load(result.rows, held)
            rows = loaded.checkpoints
            return loaded, len(rows), rows[-1][0] if rows else None
        # With a filter: the page first, then writes and blobs of the matching checkpoints only
        # (same transaction, so the same snapshot).
        query = self._q.page if before is None else self._q.page_before
        (page,) = yield Batch([Stmt(query, params)], last=False)
        rows = page.rows
        last_id = rows[-1][0] if rows else None
        matching = [r for r in rows if metadata_matches(decode_metadata(r[2], self.serde), filter)]
        if not matching:
            return Loaded([], [], [], *held), len(rows), last_id
        params["ids"] = [r[0] for r in matching]
        (result,) = yield Batch([Stmt(self._q.load["ids"], params, hot=True)])
        return split_load(result.rows, held), len(rows), last_id

    def _held(self, thread_id: str, ns: str, tips: bool) -> tuple[Named, dict[str, Any]]:
        """What a load names (held bytes and, with ``tips``, chain tips), and its parameters."""
        named = self._chains.tips(thread_id, ns) if tips else {}
        held = {**self._bytes.held(thread_id, ns), **named}
        params = {"thread": thread_id, "ns": ns, **held_params(held), **tip_params(named)}
        return Named(held, bool(named)), params

    def _decode(self, thread_id: str, checkpoint_ns: str, loaded: Loaded) -> list[CheckpointRecord]:
        if not loaded.checkpoints:
            return []
        # Exactly the rows the chains need were fetched (down to a held tip, the rest held
        # here): values are rebuilt through ``base``.
        rows, sent, damaged = loaded_blobs(loaded)
        self._cache.add(thread_id, checkpoint_ns, rows.values())  # held rows are known
        # Held rows hold the same values (a version's never changes); a tip's is the whole
        # value in one blob.
        crcs = {(b[0], b[1]): b[7] for b in loaded.blobs}
        rows.update(self._chains.rows_below(thread_id, checkpoint_ns, crcs))
        for (key, version), crc in sent.items():
            data = rows[key, version].data
            self._bytes.add(thread_id, checkpoint_ns, (key, version), key, version, crc, data)
        writes: dict[str, list[TaskWrite]] = {}
        for cid, task_id, kind, task_name, data in loaded.writes:
            write = decode_write(WriteRow(task_id, kind, task_name, data), self.serde)
            writes.setdefault(cid, []).append(write)

        def check(row: BlobRow) -> None:
            if (row.key, row.version) in damaged:
                raise corrupted(row)

        records = []
        for cid, body, metadata in loaded.checkpoints:
            with loading(thread_id, checkpoint_ns, cid):
                cp, _ = wanted_blobs(body, self.serde)
                values = checkpoint_values(cp, rows, self.serde, check)
                record = CheckpointRecord(
                    thread_id=thread_id,
                    checkpoint_ns=checkpoint_ns,
                    checkpoint=dataclasses.replace(cp, values=values),
                    metadata=decode_metadata(metadata, self.serde),
                    pending_writes=tuple(writes.get(cid, ())),
                )
            if not records:  # the newest
                self._chains.loaded(thread_id, checkpoint_ns, blob_versions(cp), rows)
            records.append(record)
        return records

    # -- writing -------------------------------------------------------------------------------

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        missing = self._missing_bases(record)
        if missing:
            op = self._bases_op(record.thread_id, record.checkpoint_ns, missing)
            self._cache.add(record.thread_id, record.checkpoint_ns, self._db.run(op, None))
        encoded, blobs = self._encode(record)
        try:
            evicted, crcs = self._put_once(record, fork, encoded, blobs)
        except HeadMoved as moved:
            raise self._moved(record, fork, moved) from None
        except NotStored as gone:
            blobs = self._store_in_full(record, blobs, gone)
            try:
                evicted, crcs = self._put_once(record, fork, encoded, blobs)
            except HeadMoved as moved:
                raise self._moved(record, fork, moved) from None
            except NotStored as still:
                raise self._not_stored(record, still) from None
        self._after_put(record, blobs, crcs, encoded, evicted)

    def _put_once(
        self, record: CheckpointRecord, fork: bool, encoded: EncodedCheckpoint, blobs: list[BlobRow]
    ) -> tuple[list[tuple[str, str, str]], list[int]]:
        """One try of a sync ``put``: alone on libpq, or with retention's prune (``_put_op``)."""
        if self._retains():
            return self._db.run(self._put_op(record, fork, encoded, blobs), BEGIN_WRITE)
        params, crcs = self._put_params(record, fork, encoded, blobs)
        self._db.run_hot(params.hot(self._q.put_hot_name, self._q.put_hot))
        return [], crcs

    async def aput(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        missing = self._missing_bases(record)
        if missing:
            op = self._bases_op(record.thread_id, record.checkpoint_ns, missing)
            self._cache.add(record.thread_id, record.checkpoint_ns, await self._db.arun(op, None))
        encoded, blobs = self._encode(record)
        try:
            evicted, crcs = await self._aput_once(record, fork, encoded, blobs)
        except HeadMoved as moved:
            raise self._moved(record, fork, moved) from None
        except NotStored as gone:
            blobs = self._store_in_full(record, blobs, gone)
            try:
                evicted, crcs = await self._aput_once(record, fork, encoded, blobs)
            except HeadMoved as moved:
                raise self._moved(record, fork, moved) from None
            except NotStored as still:
                raise self._not_stored(record, still) from None
        self._after_put(record, blobs, crcs, encoded, evicted)

    async def _aput_once(
        self, record: CheckpointRecord, fork: bool, encoded: EncodedCheckpoint, blobs: list[BlobRow]
    ) -> tuple[list[tuple[str, str, str]], list[int]]:
        """One try of ``aput``: with the puts of other threads through this loop's
        ``PutBatcher``, or with retention's prune (``_put_op``)."""
        if self._retains():
            return await self._db.arun(self._put_op(record, fork, encoded, blobs), BEGIN_WRITE)
        params, crcs = self._put_params(record, fork, encoded, blobs)
        failure = await self._batchers.here().put(params)
        if failure is not None:
            raise failure
        return [], crcs

    def _missing_bases(self, record: CheckpointRecord) -> list[tuple[str, str]]:
        """(key, version) of list bases a delta could extend that the cache does not know."""
        hints = hints_of(record)
        if hints is None:
            return []
        wanted = {
            (key, str(base))
            for key, (base, _) in hints.extends.items()
            if key in hints.changed and key in record.checkpoint.values
        }
        return sorted(
            (key, version)
            for key, version in wanted
            if self._cache.get(record.thread_id, record.checkpoint_ns, key, version) is None
        )

    def _bases_op(
        self, thread_id: str, checkpoint_ns: str, wanted: Sequence[tuple[str, str]]
    ) -> Op[list[BlobRow]]:
        params = {
            "thread": thread_id,
            "ns": checkpoint_ns,
            "keys": [k for k, _ in wanted],
            "versions": [v for _, v in wanted],
        }
        (result,) = yield Batch([Stmt(self._q.select_bases, params)])
        return [blob_row(r) for r in result.rows]

    def _encode(self, record: CheckpointRecord) -> tuple[EncodedCheckpoint, list[BlobRow]]:
        """The encoded record and its blobs (``SerializationError`` before anything is sent)."""
        thread_id, ns = record.thread_id, record.checkpoint_ns

        def base_of(key: str, version: str) -> BlobRow | None:
            return self._cache.get(thread_id, ns, key, str(version))

        encoded = encode_record(record, base_of, self.serde, COMPACTION, inline=True)
        return encoded, _normalized(encoded.blobs)

    def _store_in_full(
        self, record: CheckpointRecord, blobs: Sequence[BlobRow], gone: NotStored
    ) -> list[BlobRow]:
        """``blobs`` with the values of ``gone.keys`` stored whole (their bases, or the values
        the hints called unchanged, are not stored: wrong hints, a prune, a stale cache)."""
        self._cache.drop(record.thread_id, record.checkpoint_ns)
        keys = set(gone.keys)
        full = [normalized(b) for b in full_blobs(record, keys, self.serde)]
        return [b for b in blobs if b.key not in keys] + full

    def _moved(
        self, record: CheckpointRecord, fork: bool, moved: HeadMoved
    ) -> ConcurrentUpdateError:
        try:
            check_put(record, moved.actual, fork=fork)
        except ConcurrentUpdateError as exc:
            return exc
        return ConcurrentUpdateError(  # the head moved back between the check and this report
            f"thread {record.thread_id!r} (namespace {record.checkpoint_ns!r}) changed while "
            f"checkpoint {record.checkpoint.id} was being saved; nothing was written"
        )

    @staticmethod
    def _not_stored(record: CheckpointRecord, still: NotStored) -> SerializationError:
        return SerializationError(
            f"checkpoint {record.checkpoint.id} of thread {record.thread_id!r} needs stored "
            f"values of keys {list(still.keys)!r} that are not there; nothing was written"
        )

    def _put_op(
        self,
        record: CheckpointRecord,
        fork: bool,
        encoded: EncodedCheckpoint,
        blobs: Sequence[BlobRow],
    ) -> Op[tuple[list[tuple[str, str, str]], list[int]]]:
        """A put with retention's prune after it, in one batch (without retention a sync put runs
        alone on libpq and an ``aput`` goes with others: ``_put_once``, ``_aput_once``).

        Returns the ``(namespace, key, version)`` of blobs retention deleted, and the CRC-32 of
        each of ``blobs``.
        """
        params, crcs = self._put_params(record, fork, encoded, blobs)
        prune = self._prune_stmt(record.thread_id, record.checkpoint_ns)
        results = yield Batch([Stmt(self._q.put, params.alone()), prune])
        _, namespaces, keys, versions = results[-1].rows[0]
        return list(zip(namespaces, keys, versions, strict=True)), crcs

    def _put_params(
        self,
        record: CheckpointRecord,
        fork: bool,
        encoded: EncodedCheckpoint,
        blobs: Sequence[BlobRow],
    ) -> tuple[PutParams, list[int]]:
        """This record as ``threadline_put`` takes it, and each blob's CRC-32."""
        thread_id, ns, cp = record.thread_id, record.checkpoint_ns, record.checkpoint
        writes = dedupe_writes(encoded.writes) if encoded.writes else ()
        sources = self._recent.sources(thread_id, ns, cp.parent_id, blobs) if blobs else ()
        prefixes = _normalized(encoded.prefixes)
        refs = sorted((key, str(version)) for key, version in blob_refs(cp, encoded).items())
        # A value this put stores in full is there once it commits; only the others (values
        # the hints call unchanged, deltas and their bases) need checking.
        written = {(b.key, b.version) for b in blobs if b.base is None}
        crcs = [zlib.crc32(b.data) for b in blobs]
        data = Pieces()
        fields = {
            "thread": thread_id,
            "ns": ns,
            "cid": cp.id,
            "parent": cp.parent_id,
            "fork": fork,
            "step": cp.step,
            "ts": created_ts(cp.created_at),
            "body": data.add(encoded.row.body),
            "meta": data.add(encoded.row.metadata),
            "next": [task.name for task in cp.next],
            "refs": refs,
            "check": [ref for ref in refs if ref not in written],
            "blobs": [
                [*(b.key, b.version, b.start, b.base, b.chain_bytes, b.full_bytes), crc, b.items]
                + ([None] * 4 if src is None else [*dataclasses.astuple(src)])
                + data.add(b.data if src is None else b.data[:2])
                for b, crc, src in zip(blobs, crcs, sources, strict=True)
            ],
            "writes": [[r.task_id, r.kind, r.task_name, *data.add(r.data)] for r in writes],
            "prefixes": [[p.key, p.version, p.base, p.full_bytes, p.items] for p in prefixes],
        }
        return PutParams(fields, data), crcs

    def _prune_stmt(self, thread_id: str, checkpoint_ns: str) -> Stmt:
        """Retention's prune of the namespace after a put (``_retains`` is true)."""
        retention = self.retention
        assert retention is not None
        cutoff = age_cutoff(retention)
        params = {
            "thread": thread_id,
            "ns": checkpoint_ns,
            "keep": retention.max_checkpoints,
            "cutoff": None if cutoff is None else datetime.fromtimestamp(cutoff, UTC),
        }
        return Stmt(self._q.prune_ns, params)

    def _retains(self) -> bool:
        r = self.retention
        return r is not None and (r.max_checkpoints is not None or r.max_age is not None)

    def _after_put(
        self,
        record: CheckpointRecord,
        blobs: Sequence[BlobRow],
        crcs: Sequence[int],
        encoded: EncodedCheckpoint,
        evicted: Sequence[tuple[str, str, str]],
    ) -> None:
        thread_id, ns = record.thread_id, record.checkpoint_ns
        self._recent.remember(thread_id, ns, record.checkpoint.id, encoded.writes)
        prefixes = _normalized(encoded.prefixes)
        if blobs or prefixes:
            self._cache.add(thread_id, ns, [*blobs, *prefixes])
        for b, crc in zip(blobs, crcs, strict=True):
            self._bytes.add(thread_id, ns, (b.key, b.version), b.key, b.version, crc, b.data)
        if blobs:
            self._chains.stored(thread_id, ns, blobs, crcs)
        if evicted or prefixes:
            # Versions compaction turned into prefix rows no longer hold those bytes.
            self._drop_held(thread_id, [*evicted, *((ns, p.key, p.version) for p in prefixes)])
        if evicted:
            self._cache.discard(thread_id, evicted)

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        op = self._put_writes_op(thread_id, checkpoint_ns, checkpoint_id, writes)
        if op is not None:
            self._db.run(op, BEGIN_WRITE)

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        op = self._put_writes_op(thread_id, checkpoint_ns, checkpoint_id, writes)
        if op is not None:
            await self._db.arun(op, BEGIN_WRITE)

    def _put_writes_op(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> Op[None] | None:
        rows = dedupe_writes(encode_writes(writes, self.serde))  # raises before anything is sent
        if not rows:
            return None
        params = writes_params(thread_id, checkpoint_ns, checkpoint_id, rows)
        # The head first (locked only if it is this checkpoint), as in ``put``: no deadlocks.
        stmts = [Stmt(self._q.touch_head, params), Stmt(self._q.upsert_writes, params)]

        def op() -> Op[None]:
            yield Batch(stmts)

        return op()

    def delete_thread(self, thread_id: str) -> None:
        self._db.run(self._delete_op(thread_id), BEGIN_WRITE)
        self._forget(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._db.arun(self._delete_op(thread_id), BEGIN_WRITE)
        self._forget(thread_id)

    def _drop_held(self, thread_id: str, blobs: Iterable[tuple[str, str, str]]) -> None:
        """Stop naming ``(namespace, key, version)`` blobs in loads (deleted, or rewritten)."""
        for ns, key, version in blobs:
            self._bytes.drop(thread_id, ns, [(key, version)])

    def _forget(self, thread_id: str) -> None:
        """Forget what is remembered of a thread's blobs (deleted, or replaced by a copy)."""
        self._cache.drop(thread_id)
        self._bytes.forget_thread(thread_id)
        self._chains.forget_thread(thread_id)

    def _delete_op(self, thread_id: str) -> Op[None]:
        params = {"thread": thread_id}
        stmts = [Stmt(self._q.lock_heads_update, params)]
        stmts += [Stmt(query, params) for query in self._q.delete_thread]
        yield Batch(stmts)

    # -- threads and history -------------------------------------------------------------------

    def list_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        found: list[ThreadInfo] = []
        after: tuple[datetime, str] | None = None
        while limit is None or len(found) < limit:
            infos, after, more = self._db.run(self._threads_op(after, status, limit, found), None)
            found += infos
            if not more:
                break
        return found if limit is None else found[: max(0, limit)]

    async def alist_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        found: list[ThreadInfo] = []
        after: tuple[datetime, str] | None = None
        while limit is None or len(found) < limit:
            op = self._threads_op(after, status, limit, found)
            infos, after, more = await self._db.arun(op, None)
            found += infos
            if not more:
                break
        return found if limit is None else found[: max(0, limit)]

    def _threads_op(
        self,
        after: tuple[datetime, str] | None,
        status: ThreadStatus | None,
        limit: int | None,
        found: Sequence[ThreadInfo],
    ) -> Op[tuple[list[ThreadInfo], tuple[datetime, str] | None, bool]]:
        """One page of threads, newest update first; status is worked out here, in Python."""
        n = 256 if limit is None or status is not None else max(1, limit - len(found))
        params: dict[str, Any] = {"n": n}
        query = self._q.list_threads
        if after is not None:
            params["at"], params["tid"] = after
            query = self._q.list_threads_after
        (result,) = yield Batch([Stmt(query, params)])
        infos = []
        for thread_id, head, updated_at, next_, task_ids, kinds in result.rows:
            info_status = status_of(next_, zip(task_ids, kinds, strict=True))
            if status is not None and info_status != status:
                continue
            infos.append(
                ThreadInfo(
                    thread_id=thread_id,
                    status=info_status,
                    checkpoint_id=head,
                    updated_at=updated_at.astimezone(UTC).isoformat(timespec="microseconds"),
                    next=tuple(next_),
                )
            )
        rows = result.rows
        last = (rows[-1][2], rows[-1][0]) if rows else None
        return infos, last, len(rows) == n

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        check_keep_last(keep_last)
        count, evicted = self._db.run(self._prune_op(thread_id, keep_last), BEGIN_WRITE)
        self._cache.discard(thread_id, evicted)
        self._drop_held(thread_id, evicted)
        return count

    async def aprune(self, thread_id: str, *, keep_last: int) -> int:
        check_keep_last(keep_last)
        count, evicted = await self._db.arun(self._prune_op(thread_id, keep_last), BEGIN_WRITE)
        self._cache.discard(thread_id, evicted)
        self._drop_held(thread_id, evicted)
        return count

    def _prune_op(
        self, thread_id: str, keep_last: int
    ) -> Op[tuple[int, list[tuple[str, str, str]]]]:
        params = {"thread": thread_id, "keep": keep_last, "cutoff": None}
        lock = Stmt(self._q.lock_heads_update, params)  # no put on this thread meanwhile
        _, result = yield Batch([lock, Stmt(self._q.prune_thread, params)])
        count, namespaces, keys, versions = result.rows[0]
        return count, list(zip(namespaces, keys, versions, strict=True))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of a thread to an empty thread id.

        Raises ``ValueError`` if the target already has checkpoints (including when it is the
        source); copying a thread that has none does nothing. One transaction.
        """
        self._db.run(self._copy_op(source_thread_id, target_thread_id), BEGIN_WRITE)
        self._forget(target_thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._db.arun(self._copy_op(source_thread_id, target_thread_id), BEGIN_WRITE)
        self._forget(target_thread_id)

    def _copy_op(self, source: str, target: str) -> Op[None]:
        params = {"source": source, "target": target, "thread": source}
        # The source's heads are share-locked: no put or prune changes it while it is copied.
        exists, _ = yield Batch(
            [Stmt(self._q.thread_exists, params), Stmt(self._q.lock_heads_share, params)],
            last=False,
        )
        if exists.rows[0][0]:
            raise ValueError(
                f"cannot copy thread {source!r} to {target!r}: the target already has "
                "checkpoints; delete it first or pick another id"
            )
        yield Batch([Stmt(query, params) for query in self._q.copy_thread])

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the pools; further calls raise ``SaverUnavailableError``. Idempotent.

        An async pool is closed on its event loop when that loop can still run; in async code
        prefer ``await saver.aclose()`` (or ``async with``).
        """
        self._db.close()
        self._cache.clear()
        self._bytes.clear()
        self._chains.clear()

    async def aclose(self) -> None:
        """Close the pools from async code: this loop's pool is awaited, others as in close."""
        await self._db.aclose()
        self._cache.clear()
        self._bytes.clear()
        self._chains.clear()


def _normalized(rows: Sequence[BlobRow]) -> list[BlobRow]:
    return [normalized(row) for row in rows] if rows else []


def _snapshot(filter: Mapping[str, Any] | None) -> Stmt | None:
    """How a page of ``list`` begins: a page is one statement (one snapshot) unless a filter
    reads the page's metadata first, and then its blobs in the same transaction."""
    return BEGIN_READ if filter else None
