"""``SqliteSaver``: the connection, its lock and transactions, the public API, the blob cache."""

from __future__ import annotations

import os
import sqlite3
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any, Self

from threadline.checkpoint.base import (
    BaseSaver,
    Checkpoint,
    CheckpointRecord,
    Retention,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
    metadata_matches,
    thread_status,
)
from threadline.checkpoint.bytecache import ByteCache
from threadline.checkpoint.chains import HeldChains
from threadline.checkpoint.layout import (
    BaseLookup,
    BlobRow,
    EncodedCheckpoint,
    blob_refs,
    blob_versions,
    decode_metadata,
    encode_record,
    encode_writes,
    full_blobs,
    referenced_blobs,
)
from threadline.checkpoint.rawbody import body_next, body_versions
from threadline.checkpoint.rules import (
    age_cutoff,
    check_keep_last,
    check_put,
    created_ts,
    now_iso,
    status_of,
)
from threadline.checkpoint.sqlite.connection import (
    adopt,
    misuse,
    not_a_connection,
    open_path,
    synchronous_level,
)
from threadline.checkpoint.sqlite.queries import (
    CHUNK,
    Row,
    blob_rows,
    fetch,
    ids_past,
    insert_writes,
    meta_row,
    names_json,
    to_record,
)
from threadline.checkpoint.sqlite.schema import (
    BLOB_META,
    HEAD,
    HEAD_AND_STATUS,
    INSERT_BLOB,
    INSERT_CHECKPOINT,
    LIST_THREADS,
    REPLACE_WITH_PREFIX,
    SELECT_BODY,
    SELECT_LATEST,
    SELECT_ONE,
    SELECT_PAGE,
    UPSERT_THREAD,
    repoint_prefixes,
)
from threadline.errors import ConfigError, SaverUnavailableError
from threadline.serde import DEFAULT, Serializer

_PAGE_SIZE = 64
_CACHE_SIZE = 4096  # blob rows (metadata only) remembered for ``base_of``
_HEADS_CACHED = 1024  # (thread, namespace) heads whose versions are remembered


class SqliteSaver(BaseSaver):
    """Checkpoints in a SQLite file (default ``":memory:"``, private to this saver).

    Give it a path, or a connection as LangGraph's docs do (``close()`` leaves one you gave
    open; see ``connection.py`` for what it must allow)::

        with SqliteSaver("checkpoints.db") as saver:  # or SqliteSaver.from_conn_string(...)
            graph = builder.compile(checkpointer=saver)

        saver = SqliteSaver(sqlite3.connect("checkpoints.db", check_same_thread=False))

    ``synchronous="full"`` syncs each commit, so a saved checkpoint survives a power loss
    (``"normal"``, the default, a process crash; docs/storage.md). ``timeout``: how long a
    write waits for another connection's (30 s; a given connection keeps its own unless
    passed). ``retention`` prunes a thread's older checkpoints each time one is saved (in the
    same transaction). ``copy_thread`` raises ``ValueError`` if the target has checkpoints.
    """

    def __init__(
        self,
        conn: sqlite3.Connection | str | os.PathLike[str] = ":memory:",
        *,
        timeout: float | None = None,
        synchronous: str = "normal",
        retention: Retention | None = None,
        serde: Serializer | None = None,
    ):
        level = synchronous_level(synchronous)
        self.retention = retention
        self.serde = serde or DEFAULT
        self.synchronous = level.lower()
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        # (thread, ns, key, version) -> the blob's row without its data, for ``base_of``
        self._blob_cache: OrderedDict[tuple[str, str, str, str], BlobRow] = OrderedDict()
        self._bytes = ByteCache()  # large values' bytes, so a long conversation is not reread
        self._chains = HeldChains(codec=self.serde)  # long delta chains, joined and decoded
        # (thread, ns) -> (id, versions) of the checkpoint this saver last saved there
        self._head_versions: OrderedDict[tuple[str, str], tuple[str, dict[str, str]]] = (
            OrderedDict()
        )
        self._owns_conn = not isinstance(conn, sqlite3.Connection)
        if isinstance(conn, sqlite3.Connection):
            self.path = adopt(conn, timeout, level)
            self._conn = conn
        elif isinstance(conn, str | os.PathLike):
            self.path = os.fspath(conn)
            self._conn = open_path(self.path, timeout, level)
        else:
            raise ConfigError(not_a_connection(type(self).__name__, conn))

    @classmethod
    def from_conn_string(cls, conn_string: str | os.PathLike[str], **options: Any) -> Self:
        """A saver on a path or ``":memory:"``, closed when the ``with`` block ends::

        with SqliteSaver.from_conn_string("checkpoints.db") as saver: ...
        """
        return cls(conn_string, **options)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (one given to the saver stays open); further calls raise
        ``SaverUnavailableError``. Idempotent."""
        with self._lock:
            if self._conn is not None and self._owns_conn:
                self._conn.close()
            self._conn = None
            self._blob_cache.clear()
            self._head_versions.clear()
            self._chains.clear()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"{type(self).__name__}({self.path!r}, {state})"

    def _connection(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            raise SaverUnavailableError(f"{type(self).__name__}({self.path!r}) is closed")
        return conn

    @contextmanager
    def _transaction(self, mode: str = "DEFERRED") -> Iterator[sqlite3.Connection]:
        """Hold the lock and one transaction; roll back on any error.

        Reads use a (deferred) transaction too, so a checkpoint, its values and its writes come
        from one snapshot even while another connection writes.
        """
        with self._lock:
            conn = self._connection()
            try:
                conn.execute("BEGIN IMMEDIATE" if mode == "IMMEDIATE" else "BEGIN")
                try:
                    yield conn
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction and not isinstance(exc, sqlite3.ProgrammingError):
                    conn.execute("ROLLBACK")
                raise self._unavailable(exc) from exc

    def _unavailable(self, exc: sqlite3.Error) -> Exception:
        if isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError:
            return misuse(exc, self.path) or SaverUnavailableError(
                f"SQLite checkpoint database {self.path!r}: {exc}"
            )
        return misuse(exc, self.path) or exc

    # -- reading -------------------------------------------------------------------------------

    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        with self._transaction() as conn:
            if checkpoint_id is None:
                row = conn.execute(SELECT_LATEST, (thread_id, checkpoint_ns)).fetchone()
            else:
                row = conn.execute(SELECT_ONE, (thread_id, checkpoint_ns, checkpoint_id)).fetchone()
            if row is None:
                return None
            (loaded,) = fetch(
                conn, thread_id, checkpoint_ns, [row], self.serde, self._bytes, self._chains
            )
        record = to_record(thread_id, checkpoint_ns, loaded, self.serde)  # checks every row
        if checkpoint_id is None:
            versions = blob_versions(loaded.checkpoint)
            self._chains.loaded(thread_id, checkpoint_ns, versions, loaded.pool)
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
        cursor = before
        produced = 0
        while True:
            # Fetch one page under the lock, then decode and yield with the lock released.
            with self._transaction() as conn:
                rows: list[Row] = conn.execute(
                    SELECT_PAGE, (thread_id, checkpoint_ns, cursor, cursor, page_size)
                ).fetchall()
                matching = [
                    row
                    for row in rows
                    if not filter or metadata_matches(decode_metadata(row[2], self.serde), filter)
                ]
                loaded = fetch(conn, thread_id, checkpoint_ns, matching, self.serde, self._bytes)
            for item in loaded:
                yield to_record(thread_id, checkpoint_ns, item, self.serde)
                produced += 1
                if limit is not None and produced >= limit:
                    return
            if len(rows) < page_size:
                return
            cursor = rows[-1][0]

    def list_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        if limit is not None and limit <= 0:
            return []
        where = "WHERE t.status = ?" if status is not None else ""
        params: list[Any] = [status] if status is not None else []
        params.append(-1 if limit is None else limit)
        with self._transaction() as conn:
            rows = conn.execute(LIST_THREADS.format(where=where), params).fetchall()
        return [
            ThreadInfo(
                thread_id=thread_id,
                status=st,
                checkpoint_id=head,
                updated_at=updated_at,
                next=body_next(body, self.serde),
            )
            for thread_id, st, head, updated_at, body in rows
        ]

    # -- writing -------------------------------------------------------------------------------

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        thread_id, ns, cp = record.thread_id, record.checkpoint_ns, record.checkpoint
        # Encoding (and looking up the blobs deltas extend) happens before the transaction.
        encoded = encode_record(record, self._base_lookup(thread_id, ns), self.serde, inline=True)
        with self._transaction("IMMEDIATE") as conn:
            head, status = conn.execute(HEAD_AND_STATUS, (thread_id, ns, thread_id)).fetchone()
            check_put(record, head, fork=fork)
            blobs = self._complete(conn, record, encoded, head)
            row = encoded.row
            conn.execute(
                INSERT_CHECKPOINT,
                (
                    thread_id,
                    ns,
                    row.checkpoint_id,
                    row.parent_id,
                    row.step,
                    row.created_at,
                    created_ts(row.created_at),
                    row.body,
                    row.metadata,
                ),
            )
            crcs = [zlib.crc32(b.data) for b in blobs]
            conn.executemany(
                INSERT_BLOB,
                [
                    (
                        thread_id,
                        ns,
                        b.key,
                        b.version,
                        b.start,
                        b.base,
                        b.chain_bytes,
                        b.full_bytes,
                        crc,
                        b.data,
                        b.items,
                    )
                    for b, crc in zip(blobs, crcs, strict=True)
                ],
            )
            if encoded.prefixes:
                conn.executemany(
                    REPLACE_WITH_PREFIX,
                    [
                        (thread_id, ns, p.key, p.version, p.start, p.base, p.full_bytes, p.items)
                        for p in encoded.prefixes
                    ],
                )
                self._repoint(conn, thread_id, ns, encoded.prefixes)
            insert_writes(conn, thread_id, ns, cp.id, encoded.writes)
            if ns == "":
                now = thread_status(cp, record.pending_writes)
                if now != status:
                    self._note_status(conn, thread_id, cp, now)
            if self.retention is not None:
                self._retain(conn, thread_id, ns, cp.id)
        self._remember_head(thread_id, ns, cp)
        if blobs:
            self._remember(thread_id, ns, [*blobs, *encoded.prefixes])
            for b, crc in zip(blobs, crcs, strict=True):
                self._bytes.add((thread_id, ns, b.key, b.version, crc), b.data)
            self._chains.stored(thread_id, ns, blobs, crcs)
        if encoded.prefixes:
            self._release_free_pages()

    @staticmethod
    def _note_status(conn: sqlite3.Connection, thread_id: str, cp: Checkpoint, status: str) -> None:
        """Write the thread row: the status changed (see ``schema.HEAD_AND_STATUS``)."""
        planned = names_json(tuple(t.name for t in cp.next))
        conn.execute(UPSERT_THREAD, (thread_id, status, cp.id, now_iso(), planned))

    def _release_free_pages(self) -> None:
        """Give the pages compaction freed back to the OS (files created since schema 4).

        Its own transaction: ``executescript`` (the one call that runs the pragma to the end)
        commits first. Best effort: pages left on the freelist are reused by later writes.
        """
        with self._lock, suppress(sqlite3.Error):
            self._connection().executescript("PRAGMA incremental_vacuum;")

    @staticmethod
    def _repoint(
        conn: sqlite3.Connection, thread_id: str, ns: str, prefixes: Sequence[BlobRow]
    ) -> None:
        by_target: dict[tuple[str, str], list[BlobRow]] = {}
        for p in prefixes:
            by_target.setdefault((p.key, p.base or ""), []).append(p)
        for (key, target), rows in by_target.items():
            for i in range(0, len(rows), CHUNK):
                versions = [r.version for r in rows[i : i + CHUNK]]
                conn.execute(
                    repoint_prefixes(len(versions)),
                    (target, target, rows[0].full_bytes, thread_id, ns, key, *versions),
                )

    def _complete(
        self,
        conn: sqlite3.Connection,
        record: CheckpointRecord,
        encoded: EncodedCheckpoint,
        head: str | None,
    ) -> list[BlobRow]:
        """The blobs to insert, after checking (in the transaction) what they rely on.

        A value the hints call unchanged must already be stored under its version, and a delta's
        base must still be there with the chain it was computed against. Whatever is missing
        (wrong hints, a concurrent prune or delete, a stale cache) is stored in full instead, so
        a saved checkpoint always loads.

        Versions the current ``head`` uses need no query: every blob a stored checkpoint uses
        stays while it exists. So in the usual case (a run saving on top of the head it saved
        last) nothing is read here.
        """
        thread_id, ns, cp = record.thread_id, record.checkpoint_ns, record.checkpoint
        blobs = encoded.blobs
        refs = blob_refs(cp, encoded)
        if not blobs and not refs:  # every value is in the row itself
            return []
        known = self._head_versions.get((thread_id, ns))
        safe = known[1] if known is not None and head is not None and known[0] == head else {}
        written = {(b.key, b.version): b for b in blobs}
        needed = {(k, v) for k, v in refs.items() if (k, v) not in written}
        needed.update((b.key, b.base) for b in blobs if b.base is not None)
        needed = {(k, v) for k, v in needed if safe.get(k) != v}
        stored = blob_rows(conn, thread_id, ns, needed) if needed else {}
        redo = {k for k, v in refs.items() if (k, v) in needed and (k, v) not in stored}
        for b in blobs:
            if b.base is None or (b.key, b.base) not in needed:
                continue
            base = stored.get((b.key, b.base))
            if base is None or (base.start, base.full_bytes, base.chain_bytes + len(b.data)) != (
                b.start,
                b.full_bytes,
                b.chain_bytes,
            ):
                redo.add(b.key)
        if redo:
            written.update({(b.key, b.version): b for b in full_blobs(record, redo, self.serde)})
        self._remember(thread_id, ns, stored.values())
        return list(written.values())

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        encoded = encode_writes(writes, self.serde)
        if not encoded:
            return
        with self._transaction("IMMEDIATE") as conn:
            insert_writes(conn, thread_id, checkpoint_ns, checkpoint_id, encoded)
            if checkpoint_ns != "":
                return
            (head,) = conn.execute(HEAD, (thread_id, "")).fetchone()
            if head != checkpoint_id:
                return  # not the thread's newest checkpoint: its status is unchanged
            (body,) = conn.execute(SELECT_BODY, (thread_id, "", head)).fetchone()
            keys = conn.execute(
                "SELECT task_id, kind FROM writes "
                "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
                (thread_id, checkpoint_id),
            ).fetchall()
            next_ = body_next(body, self.serde)
            conn.execute(  # a write on the head moves the thread up in list_threads
                UPSERT_THREAD,
                (thread_id, status_of(next_, keys), head, now_iso(), names_json(next_)),
            )

    def delete_thread(self, thread_id: str) -> None:
        with self._transaction("IMMEDIATE") as conn:
            for table in ("writes", "blobs", "checkpoints", "threads"):
                conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
            self._forget(thread_id)

    # -- history -------------------------------------------------------------------------------

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        check_keep_last(keep_last)
        deleted = 0
        with self._transaction("IMMEDIATE") as conn:
            namespaces = conn.execute(
                "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?", (thread_id,)
            ).fetchall()
            for (ns,) in namespaces:
                ids = ids_past(conn, thread_id, ns, keep_last)
                deleted += self._drop(conn, thread_id, ns, ids)
        return deleted

    def _retain(self, conn: sqlite3.Connection, thread_id: str, ns: str, head: str) -> None:
        retention = self.retention
        assert retention is not None
        drop: set[str] = set()
        if retention.max_checkpoints is not None:
            drop.update(ids_past(conn, thread_id, ns, retention.max_checkpoints))
        cutoff = age_cutoff(retention)
        if cutoff is not None:
            rows = conn.execute(
                "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?"
                " AND created_ts < ? AND checkpoint_id < ?",
                (thread_id, ns, cutoff, head),
            ).fetchall()
            drop.update(r[0] for r in rows)
        self._drop(conn, thread_id, ns, drop)

    def _drop(self, conn: sqlite3.Connection, thread_id: str, ns: str, ids: Iterable[str]) -> int:
        """Delete checkpoints of one namespace, their writes, and blobs no longer used."""
        params = [(thread_id, ns, cid) for cid in ids]
        if not params:
            return 0
        where = "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        conn.executemany(f"DELETE FROM writes {where}", params)
        conn.executemany(f"DELETE FROM checkpoints {where}", params)
        self._collect_blobs(conn, thread_id, ns)
        if ns == "":
            (head,) = conn.execute(HEAD, (thread_id, "")).fetchone()
            if head is None:
                conn.execute("DELETE FROM threads WHERE thread_id = ?", (thread_id,))
        return len(params)

    def _collect_blobs(self, conn: sqlite3.Connection, thread_id: str, ns: str) -> None:
        """Delete the blobs of a namespace that no checkpoint left in it uses."""
        bodies = conn.execute(
            "SELECT body FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ns),
        ).fetchall()
        kept: list[dict[str, str]] = []
        for (body,) in bodies:
            versions = body_versions(body)
            if versions is None:
                return  # an unreadable checkpoint: keep every blob rather than guess
            kept.append(versions)
        rows = {
            (r[0], r[1]): meta_row(r)
            for r in conn.execute(
                f"SELECT {BLOB_META} FROM blobs WHERE thread_id = ? AND checkpoint_ns = ?",
                (thread_id, ns),
            )
        }
        used = referenced_blobs(kept, rows)
        unused = [kv for kv in rows if kv not in used]
        conn.executemany(
            "DELETE FROM blobs WHERE thread_id = ? AND checkpoint_ns = ? AND key = ? "
            "AND version = ?",
            [(thread_id, ns, key, version) for key, version in unused],
        )
        self._forget(thread_id, ns, unused)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of a thread to an empty thread id.

        Raises ``ValueError`` if the target already has checkpoints (including when it is the
        source); copying a thread that has none does nothing. One transaction.
        """
        src, dst = source_thread_id, target_thread_id
        with self._transaction("IMMEDIATE") as conn:
            if conn.execute(
                "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1", (dst,)
            ).fetchone():
                raise ValueError(
                    f"cannot copy thread {src!r} to {dst!r}: the target already has "
                    "checkpoints; delete it first or pick another id"
                )
            if not conn.execute(
                "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1", (src,)
            ).fetchone():
                return
            for table in ("writes", "blobs", "threads"):  # leftovers without checkpoints
                conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (dst,))
            self._forget(dst)
            conn.execute(
                "INSERT INTO checkpoints SELECT ?, checkpoint_ns, checkpoint_id, parent_id, step,"
                " created_at, created_ts, body, metadata FROM checkpoints WHERE thread_id = ?",
                (dst, src),
            )
            conn.execute(
                "INSERT INTO blobs SELECT ?, checkpoint_ns, key, version, start, base, "
                "chain_bytes, full_bytes, crc32, data, items FROM blobs WHERE thread_id = ?",
                (dst, src),
            )
            conn.execute(
                "INSERT INTO writes SELECT ?, checkpoint_ns, checkpoint_id, task_id, kind, "
                "task_name, seq, value FROM writes WHERE thread_id = ?",
                (dst, src),
            )
            conn.execute(
                "INSERT INTO threads SELECT ?, status, checkpoint_id, ?, next FROM threads "
                "WHERE thread_id = ?",
                (dst, now_iso(), src),
            )

    # -- the blob cache --------------------------------------------------------------------------

    def _base_lookup(self, thread_id: str, ns: str) -> BaseLookup:
        """``base_of`` for ``encode_record``: cached blob rows, else one indexed query."""

        def base_of(key: str, version: str) -> BlobRow | None:
            cache_key = (thread_id, ns, key, version)
            with self._lock:
                row = self._blob_cache.get(cache_key)
                if row is not None:
                    self._blob_cache.move_to_end(cache_key)
                    return row
                try:
                    found = (
                        self._connection()
                        .execute(
                            f"SELECT {BLOB_META} FROM blobs WHERE thread_id = ? "
                            "AND checkpoint_ns = ? AND key = ? AND version = ?",
                            (thread_id, ns, key, version),
                        )
                        .fetchone()
                    )
                except sqlite3.Error as exc:
                    raise self._unavailable(exc) from exc
                if found is None:
                    return None
                row = meta_row(found)
                self._remember(thread_id, ns, [row])
                return row

        return base_of

    def _remember(self, thread_id: str, ns: str, rows: Iterable[BlobRow]) -> None:
        with self._lock:
            cache = self._blob_cache
            for row in rows:
                meta = row.without_data()
                cache[(thread_id, ns, row.key, row.version)] = meta
                cache.move_to_end((thread_id, ns, row.key, row.version))
            while len(cache) > _CACHE_SIZE:
                cache.popitem(last=False)

    def _remember_head(self, thread_id: str, ns: str, cp: Checkpoint) -> None:
        with self._lock:
            self._head_versions[(thread_id, ns)] = (cp.id, dict(cp.versions))
            self._head_versions.move_to_end((thread_id, ns))
            while len(self._head_versions) > _HEADS_CACHED:
                self._head_versions.popitem(last=False)

    def _forget(
        self, thread_id: str, ns: str | None = None, pairs: Iterable[tuple[str, str]] | None = None
    ) -> None:
        with self._lock:
            cache = self._blob_cache
            if pairs is not None and ns is not None:
                for key, version in pairs:
                    cache.pop((thread_id, ns, key, version), None)
                return
            for k in [k for k in cache if k[0] == thread_id and (ns is None or k[1] == ns)]:
                del cache[k]
            if ns is None:
                self._bytes.forget_thread(thread_id)
                self._chains.forget_thread(thread_id)
            for h in [h for h in self._head_versions if h[0] == thread_id]:
                del self._head_versions[h]
