"""``SqliteBackend``: the backend protocol (``checkpoint.backend``) over one SQLite connection.

A transaction is a ``BEGIN`` (``BEGIN IMMEDIATE`` to write) under the backend's lock. Blobs of
64 KB or more are read in a second query unless the process holds their bytes (``ByteCache``),
and the newest value's delta chain is held (``HeldChains``): a load reads the rows a checkpoint
names, and a delta that is the tip of a held chain with the CRC-32 held needs no chain read.
What a write transaction adds to either is kept only once it commits.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any

from threadline.checkpoint.backend import Check, Pair, StoredCheckpoint, ThreadRow
from threadline.checkpoint.base import ThreadStatus
from threadline.checkpoint.bytecache import ByteCache
from threadline.checkpoint.chains import HeldChains, HoldsChains
from threadline.checkpoint.layout import REPLACE, BlobRow, CheckpointRow, WriteRow
from threadline.checkpoint.rules import now_iso
from threadline.checkpoint.seals import blob_crc
from threadline.checkpoint.sqlite import schema as sql
from threadline.checkpoint.sqlite.connection import misuse
from threadline.checkpoint.sqlite.queries import Blobs, blob_row
from threadline.checkpoint.stamps import created_text, stored_created
from threadline.checkpoint.transactional import Transactional
from threadline.errors import SaverUnavailableError
from threadline.serde import Serializer


class SqliteBackend(HoldsChains, Transactional):
    """Rows in a SQLite file (``schema.py``), through ``conn``."""

    compaction = REPLACE
    in_process = False
    sealed = True

    def __init__(self, conn: sqlite3.Connection, path: str, owns: bool, codec: Serializer):
        self.conn: sqlite3.Connection | None = conn
        self.path = path
        self.owns = owns  # close() closes the connection (not one the program gave)
        self.lock = threading.RLock()
        self.bytes: ByteCache = ByteCache()  # large values' bytes: a long conversation not reread
        self.chains = HeldChains(codec=codec)  # long delta chains, joined and decoded

    def connection(self) -> sqlite3.Connection:
        conn = self.conn
        if conn is None:
            raise SaverUnavailableError(f"SqliteSaver({self.path!r}) is closed")
        return conn

    def close(self) -> None:
        with self.lock:
            if self.conn is not None and self.owns:
                self.conn.close()
            self.conn = None
            self.forget()

    @contextmanager
    def transaction(self, write: bool) -> Iterator[_Tx]:
        """Hold the lock and one transaction; roll back on any error. Reads use a (deferred)
        transaction too, so a checkpoint, its values and its writes come from one snapshot."""
        with self.lock:
            conn = self.connection()
            tx = _Tx(self, conn)
            try:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield tx
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if conn.in_transaction and not isinstance(exc, sqlite3.ProgrammingError):
                    conn.execute("ROLLBACK")
                raise self.unavailable(exc) from exc
            for action in tx.committed:
                action()
            if tx.compacted:
                # Give the pages compaction freed back to the OS, best effort (free pages are
                # reused anyway); ``executescript`` commits first, so it runs on its own.
                with suppress(sqlite3.Error):
                    conn.executescript("PRAGMA incremental_vacuum;")

    def unavailable(self, exc: sqlite3.Error) -> Exception:
        if isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError:
            return misuse(exc, self.path) or SaverUnavailableError(
                f"SQLite checkpoint database {self.path!r}: {exc}"
            )
        return misuse(exc, self.path) or exc

    def blob(self, thread_id: str, ns: str, key: str, version: str) -> BlobRow | None:
        with self.lock:
            conn = self.connection()
            try:
                found = conn.execute(sql.SELECT_BLOB, (thread_id, ns, key, version)).fetchone()
            except sqlite3.Error as exc:
                raise self.unavailable(exc) from exc
        return blob_row(found) if found is not None else None


class _Tx:
    """One transaction of a ``SqliteBackend`` (``checkpoint.backend.Transaction``)."""

    def __init__(self, backend: SqliteBackend, conn: sqlite3.Connection) -> None:
        self.backend = backend
        self.conn = conn
        self.committed: list[Callable[[], None]] = []  # cache updates, once it commits
        self.compacted = False
        self._status: tuple[str, ThreadStatus | None] | None = None  # read with a head
        self._head: tuple[str, str, str | None] | None = None  # (thread, namespace, head) read

    # -- reads ---------------------------------------------------------------------------------

    def head(self, thread_id: str, ns: str) -> str | None:
        head, status = self.conn.execute(sql.HEAD_AND_STATUS, (thread_id, ns, thread_id)).fetchone()
        self._status = (thread_id, status)
        self._head = (thread_id, ns, head)
        return head  # type: ignore[no-any-return]

    def status(self, thread_id: str) -> ThreadStatus | None:
        if self._status is not None and self._status[0] == thread_id:
            return self._status[1]
        row = self.conn.execute(
            "SELECT status FROM threads WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        return row[0] if row is not None else None

    def checkpoint(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        if checkpoint_id is None:
            rows = self.conn.execute(sql.SELECT_LATEST, (thread_id, ns)).fetchall()
        else:
            rows = self.conn.execute(sql.SELECT_ONE, (thread_id, ns, checkpoint_id)).fetchall()
            if rows and rows[0][0] != checkpoint_id:
                return None
        return self._with_writes(thread_id, ns, rows, 1)[0] if rows else None

    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> list[StoredCheckpoint]:
        params = (thread_id, ns, before, before, limit + 1)
        return self._with_writes(
            thread_id, ns, self.conn.execute(sql.SELECT_PAGE, params).fetchall(), limit
        )

    def _with_writes(
        self, thread_id: str, ns: str, stored: Sequence[tuple[Any, ...]], limit: int
    ) -> list[StoredCheckpoint]:
        """The first ``limit`` of stored rows (newest first and consecutive) with their writes.

        An implied parent (NULL, ``schema._SELECT``) is the next row's id, '' is none, and
        ``created_at`` is spelled out (``stamps``).
        """
        rows = []
        for i, (cid, parent, step, created, body, metadata) in enumerate(stored[:limit]):
            if parent is None:
                parent = stored[i + 1][0] if i + 1 < len(stored) else None
            if type(created) is int:
                created = created_text(cid, created)
            rows.append(CheckpointRow(cid, parent or None, step, created, body, metadata))
        writes: dict[str, list[WriteRow]] = {r.checkpoint_id: [] for r in rows}
        ids = list(writes)
        for i in range(0, len(ids), sql.CHUNK):
            chunk = ids[i : i + sql.CHUNK]
            for cid, task_id, kind, task_name, value in self.conn.execute(
                sql.select_writes(len(chunk)), [thread_id, ns, *chunk]
            ):
                writes[cid].append(WriteRow(task_id, kind, task_name, value))
        return [StoredCheckpoint(row, tuple(writes[row.checkpoint_id])) for row in rows]

    def values(
        self, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], Check | None]:
        backend = self.backend
        return Blobs(self.conn, thread_id, ns).values(wanted, backend.chains, backend.bytes)

    def blob_meta(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> dict[Pair, BlobRow]:
        return Blobs(self.conn, thread_id, ns).rows(sorted(set(pairs)), sql.BY_PAIR)

    def all_blob_meta(self, thread_id: str, ns: str) -> dict[Pair, BlobRow]:
        return {
            (r[0], r[1]): blob_row(r)
            for r in self.conn.execute(
                f"SELECT {sql.BLOB_META} FROM blobs WHERE thread_id = ? AND checkpoint_ns = ?",
                (thread_id, ns),
            )
        }

    def ids(self, thread_id: str, ns: str) -> list[tuple[str, str]]:
        rows = self.conn.execute(
            "SELECT checkpoint_id, created_at FROM checkpoints WHERE thread_id = ? "
            "AND checkpoint_ns = ? ORDER BY checkpoint_id DESC",
            (thread_id, ns),
        )
        return [(cid, created_text(cid, created)) for cid, created in rows]

    def bodies(self, thread_id: str, ns: str) -> list[tuple[str, bytes]]:
        return self.conn.execute(
            "SELECT checkpoint_id, body FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ns),
        ).fetchall()

    def namespaces(self, thread_id: str) -> list[str]:
        rows = self.conn.execute(
            "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?", (thread_id,)
        )
        return [ns for (ns,) in rows]

    def threads(self, status: ThreadStatus | None, limit: int | None) -> list[ThreadRow]:
        where = "WHERE t.status = ?" if status is not None else ""
        params: list[object] = [status] if status is not None else []
        params.append(-1 if limit is None else limit)
        rows = self.conn.execute(sql.LIST_THREADS.format(where=where), params).fetchall()
        return [ThreadRow(*row) for row in rows]

    # -- writes --------------------------------------------------------------------------------

    def insert(
        self,
        thread_id: str,
        ns: str,
        row: CheckpointRow,
        blobs: Sequence[BlobRow],
        prefixes: Sequence[BlobRow],
    ) -> None:
        conn, cid = self.conn, row.checkpoint_id
        parent = row.parent_id
        if parent is None:
            parent = ""
        elif self._head == (thread_id, ns, parent):
            parent = None  # the previous checkpoint (``schema._SELECT``)
        created = stored_created(cid, row.created_at)
        conn.execute(
            sql.INSERT_CHECKPOINT,
            (thread_id, ns, cid, parent, row.step, created, row.body, row.metadata),
        )
        if not blobs and not prefixes:
            return
        crcs = [blob_crc(b) for b in blobs]
        conn.executemany(
            sql.INSERT_BLOB,
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
        if prefixes:
            conn.executemany(
                sql.REPLACE_WITH_PREFIX,
                [
                    (thread_id, ns, p.key, p.version, p.start, p.base, p.full_bytes, p.items)
                    for p in prefixes
                ],
            )
            # Prefix rows that pointed at the versions just compacted point at the new full
            # blob: else a version compacted n times ago would load through n prefix rows.
            by_target: dict[Pair, list[BlobRow]] = {}
            for p in prefixes:
                by_target.setdefault((p.key, p.base or ""), []).append(p)
            for (key, target), group in by_target.items():
                for i in range(0, len(group), sql.CHUNK):
                    versions = [p.version for p in group[i : i + sql.CHUNK]]
                    params = (target, target, group[0].full_bytes, thread_id, ns, key, *versions)
                    conn.execute(sql.repoint_prefixes(len(versions)), params)
            self.compacted = True
        backend = self.backend

        def keep() -> None:
            for b, crc in zip(blobs, crcs, strict=True):
                backend.bytes.add((thread_id, ns, b.key, b.version, crc), b.data)
            backend.chains.stored(thread_id, ns, blobs, crcs)

        self.committed.append(keep)

    def add_writes(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None:
        ids = (thread_id, ns, checkpoint_id)
        self.conn.executemany(
            sql.UPSERT_WRITE, [(*ids, w.task_id, w.kind, w.task_name, w.data) for w in writes]
        )

    def set_thread(
        self, thread_id: str, status: ThreadStatus, head: str, next_names: Sequence[str]
    ) -> None:
        names = _names_json(tuple(next_names))
        self.conn.execute(sql.UPSERT_THREAD, (thread_id, status, head, now_iso(), names))

    def delete(self, thread_id: str, ns: str, ids: Collection[str]) -> None:
        self.conn.executemany(sql.NAME_PARENT, [(c, thread_id, ns, thread_id, ns, c) for c in ids])
        params = [(thread_id, ns, cid) for cid in ids]
        where = "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        self.conn.executemany(f"DELETE FROM writes {where}", params)
        self.conn.executemany(f"DELETE FROM checkpoints {where}", params)
        if ns == "" and self.head(thread_id, "") is None:
            self.conn.execute("DELETE FROM threads WHERE thread_id = ?", (thread_id,))

    def delete_blobs(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> None:
        self.conn.executemany(
            "DELETE FROM blobs WHERE thread_id = ? AND checkpoint_ns = ? AND key = ? "
            "AND version = ?",
            [(thread_id, ns, key, version) for key, version in pairs],
        )

    def delete_thread(self, thread_id: str) -> None:
        for table in ("writes", "blobs", "checkpoints", "threads"):
            self.conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
        self.committed.append(lambda: self.backend.forget(thread_id))

    def copy_thread(self, source: str, target: str) -> None:
        for table in ("writes", "blobs", "threads"):  # leftovers without checkpoints
            self.conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (target,))
        self.committed.append(lambda: self.backend.forget(target))
        for statement in sql.COPY_THREAD:
            self.conn.execute(statement, (target, source))
        self.conn.execute(sql.COPY_THREAD_ROW, (target, now_iso(), source))


@functools.lru_cache(maxsize=1024)
def _names_json(names: tuple[str, ...]) -> str:
    """The ``next`` column of a thread row; cached, as a run plans the same few names again."""
    return json.dumps(list(names))
