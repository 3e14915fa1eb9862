"""A saver backed by one SQLite file (stdlib ``sqlite3``), for single-machine durability.

The database runs in WAL mode with ``synchronous=NORMAL``: readers never block the writer, and a
committed checkpoint survives a process crash. One connection is shared by every thread that
uses the saver, guarded by a lock; several savers (or processes) may open the same file, and
wait up to ``timeout`` seconds for each other's write transactions.

Storage follows ``threadline.checkpoint.layout`` (schema version 2): a small ``checkpoints`` row
per checkpoint, one ``blobs`` row per value that changed (list deltas for lists that grew), the
pending ``writes``, and a ``threads`` row per thread (its head, status and ``updated_at``) so
that ``list_threads`` is one query. Each ``put`` is one transaction and one commit: compare-and-
set on the head, the row, the new blobs, the writes, the thread row, and retention.

Every value goes into SQL as a bound parameter. Metadata is stored encoded and filtered in
Python, so a filter key never reaches SQL. Each blob row carries a CRC-32 of its data, checked
on load, so a damaged value fails with an error naming its key instead of loading garbage.

A version-1 database (the layout before deltas) is migrated on open, in one transaction.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

import ormsgpack

from threadline import serde
from threadline.checkpoint.base import (
    BaseSaver,
    Checkpoint,
    CheckpointRecord,
    Retention,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
    metadata_matches,
)
from threadline.checkpoint.layout import (
    BaseLookup,
    BlobRow,
    WriteRow,
    assemble_values,
    chains_needed,
    decode_metadata,
    decode_write,
    encode_record,
    encode_writes,
    referenced_blobs,
    wanted_blobs,
)
from threadline.checkpoint.memory import (
    _check_keep_last,
    age_cutoff,
    check_put,
    created_ts,
    full_blobs,
    now_iso,
    status_of,
)
from threadline.errors import SaverUnavailableError, SerializationError

__all__ = ["SCHEMA_VERSION", "SqliteSaver"]

SCHEMA_VERSION = 2

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS checkpoints (
        thread_id     TEXT    NOT NULL,
        checkpoint_ns TEXT    NOT NULL DEFAULT '',
        checkpoint_id TEXT    NOT NULL,
        parent_id     TEXT,
        step          INTEGER NOT NULL,
        created_at    TEXT    NOT NULL,
        created_ts    REAL,
        body          BLOB    NOT NULL,
        metadata      BLOB    NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS blobs (
        thread_id     TEXT    NOT NULL,
        checkpoint_ns TEXT    NOT NULL DEFAULT '',
        key           TEXT    NOT NULL,
        version       TEXT    NOT NULL,
        start         TEXT    NOT NULL,
        base          TEXT,
        chain_bytes   INTEGER NOT NULL,
        full_bytes    INTEGER NOT NULL,
        crc32         INTEGER NOT NULL,
        data          BLOB    NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, key, version)
    )
    """,
    """
    CREATE INDEX IF NOT EXISTS blobs_by_chain ON blobs (thread_id, checkpoint_ns, key, start)
    """,
    """
    CREATE TABLE IF NOT EXISTS writes (
        thread_id     TEXT    NOT NULL,
        checkpoint_ns TEXT    NOT NULL DEFAULT '',
        checkpoint_id TEXT    NOT NULL,
        task_id       TEXT    NOT NULL,
        kind          TEXT    NOT NULL,
        task_name     TEXT    NOT NULL,
        seq           INTEGER NOT NULL,
        value         BLOB    NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, kind)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS threads (
        thread_id     TEXT    NOT NULL PRIMARY KEY,
        status        TEXT    NOT NULL,
        checkpoint_id TEXT    NOT NULL,
        updated_at    TEXT    NOT NULL,
        next          TEXT    NOT NULL
    )
    """,
    """
    CREATE INDEX IF NOT EXISTS threads_by_update ON threads (updated_at, thread_id)
    """,
    """
    CREATE INDEX IF NOT EXISTS threads_by_status ON threads (status, updated_at, thread_id)
    """,
)

_INSERT_CHECKPOINT = """
    INSERT INTO checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_id, step, created_at, created_ts,
        body, metadata
    ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

# Blobs are immutable: a (key, version) stored already holds the same value.
_INSERT_BLOB = """
    INSERT OR IGNORE INTO blobs (
        thread_id, checkpoint_ns, key, version, start, base, chain_bytes, full_bytes, crc32, data
    ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

# ``seq`` keeps writes in insertion order; replacing a write keeps its original position.
_UPSERT_WRITE = """
    INSERT INTO writes (
        thread_id, checkpoint_ns, checkpoint_id, task_id, kind, task_name, seq, value
    ) VALUES (
        ?, ?, ?, ?, ?, ?,
        (SELECT COALESCE(MAX(seq), -1) + 1 FROM writes
          WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?),
        ?
    )
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, kind) DO UPDATE SET
        task_name = excluded.task_name,
        value = excluded.value
"""

_UPSERT_THREAD = """
    INSERT INTO threads (thread_id, status, checkpoint_id, updated_at, next)
    VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (thread_id) DO UPDATE SET
        status = excluded.status,
        checkpoint_id = excluded.checkpoint_id,
        updated_at = excluded.updated_at,
        next = excluded.next
"""

_HEAD = """
    SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?
"""

_SELECT_ONE = """
    SELECT checkpoint_id, body, metadata FROM checkpoints
     WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?
"""

_SELECT_LATEST = """
    SELECT checkpoint_id, body, metadata FROM checkpoints
     WHERE thread_id = ? AND checkpoint_ns = ?
     ORDER BY checkpoint_id DESC LIMIT 1
"""

_SELECT_PAGE = """
    SELECT checkpoint_id, body, metadata FROM checkpoints
     WHERE thread_id = ? AND checkpoint_ns = ? AND (? IS NULL OR checkpoint_id < ?)
     ORDER BY checkpoint_id DESC LIMIT ?
"""

_BLOB_META = "key, version, start, base, chain_bytes, full_bytes"

_PAGE_SIZE = 64
_CHUNK = 400  # pairs per query: 802 parameters, under the 999 of older SQLite builds
_CACHE_SIZE = 4096  # blob rows (metadata only) remembered for ``base_of``
_HEADS_CACHED = 1024  # (thread, namespace) heads whose versions are remembered

_Row = tuple[str, bytes, bytes]  # checkpoint_id, body, metadata
_T = TypeVar("_T")


class SqliteSaver(BaseSaver):
    """Checkpoints in a SQLite file (default ``":memory:"``, private to this saver).

    Use it as a context manager, or call :meth:`close` when done::

        with SqliteSaver("checkpoints.db") as saver:
            graph = builder.compile(checkpointer=saver)

    ``retention`` prunes a thread's older checkpoints each time one is saved (in the same
    transaction). ``copy_thread`` raises ``ValueError`` if the target already has checkpoints.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        timeout: float = 30.0,
        retention: Retention | None = None,
    ):
        self.path = os.fspath(path)
        self.retention = retention
        self._timeout = timeout
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        # (thread, ns, key, version) -> the blob's row without its data, for ``base_of``
        self._blob_cache: OrderedDict[tuple[str, str, str, str], BlobRow] = OrderedDict()
        # (thread, ns) -> (id, versions) of the checkpoint this saver last saved there
        self._head_versions: OrderedDict[tuple[str, str], tuple[str, dict[str, str]]] = (
            OrderedDict()
        )
        if self.path not in ("", ":memory:") and not self.path.startswith("file:"):
            directory = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(directory):
                raise SaverUnavailableError(
                    f"cannot open SQLite checkpoint database {self.path!r}: "
                    f"directory {directory!r} does not exist; create it first"
                )
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=timeout,  # also the busy timeout for locked databases
                check_same_thread=False,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                uri=self.path.startswith("file:"),
            )
        except sqlite3.Error as exc:
            raise SaverUnavailableError(
                f"cannot open SQLite checkpoint database {self.path!r}: {exc}"
            ) from exc
        try:
            self._setup(conn)
        except sqlite3.Error as exc:
            conn.close()
            raise SaverUnavailableError(
                f"cannot open SQLite checkpoint database {self.path!r}: {exc} "
                "(is it a SQLite database, and writable?)"
            ) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    @classmethod
    def from_conn_string(cls, path: str | os.PathLike[str], **options: Any) -> SqliteSaver:
        """A saver on ``path``; use it as ``with SqliteSaver.from_conn_string(path) as saver:``."""
        return cls(path, **options)

    def _setup(self, conn: sqlite3.Connection) -> None:
        # Switching to WAL needs an exclusive lock and, unlike other statements, can fail with
        # "database is locked" at once instead of waiting for the busy timeout when several
        # connections open a new file together: retry it within the timeout.
        _retry_locked(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone(), self._timeout)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS threadline_schema_version (version INTEGER NOT NULL)"
            )
            (found,) = conn.execute("SELECT MAX(version) FROM threadline_schema_version").fetchone()
            if found is not None and found > SCHEMA_VERSION:
                raise SaverUnavailableError(
                    f"SQLite checkpoint database {self.path!r} has schema version {found}: it "
                    f"was written by a newer threadline (this one reads up to version "
                    f"{SCHEMA_VERSION}); upgrade threadline to open it"
                )
            if found is None:
                foreign = conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name IN ('checkpoints', 'blobs', 'writes', 'threads') ORDER BY name"
                ).fetchall()
                if foreign:
                    raise SaverUnavailableError(
                        f"SQLite database {self.path!r} has tables threadline did not create "
                        f"({', '.join(t for (t,) in foreign)}): is it another tool's database?"
                    )
            if found == 1:
                try:
                    _migrate_v1(conn)
                except (SerializationError, ValueError, TypeError) as exc:
                    raise SaverUnavailableError(
                        f"cannot migrate SQLite checkpoint database {self.path!r} from schema "
                        f"version 1 to {SCHEMA_VERSION}: {exc}; the file was left unchanged"
                    ) from exc
            else:
                for statement in _SCHEMA:
                    conn.execute(statement)
                if found is None:
                    conn.execute(
                        "INSERT INTO threadline_schema_version (version) VALUES (?)",
                        (SCHEMA_VERSION,),
                    )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; further calls raise ``SaverUnavailableError``. Idempotent."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._blob_cache.clear()
            self._head_versions.clear()

    def __enter__(self) -> SqliteSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"SqliteSaver({self.path!r}, {state})"

    def _connection(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            raise SaverUnavailableError(f"SqliteSaver({self.path!r}) is closed")
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
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise self._unavailable(exc) from exc

    def _unavailable(self, exc: sqlite3.Error) -> Exception:
        if isinstance(exc, sqlite3.OperationalError) or type(exc) is sqlite3.DatabaseError:
            return SaverUnavailableError(f"SQLite checkpoint database {self.path!r}: {exc}")
        return exc

    # -- reading -------------------------------------------------------------------------------

    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        with self._transaction() as conn:
            if checkpoint_id is None:
                row = conn.execute(_SELECT_LATEST, (thread_id, checkpoint_ns)).fetchone()
            else:
                row = conn.execute(
                    _SELECT_ONE, (thread_id, checkpoint_ns, checkpoint_id)
                ).fetchone()
            if row is None:
                return None
            (loaded,) = _fetch(conn, thread_id, checkpoint_ns, [row])
        return _record(thread_id, checkpoint_ns, loaded)

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
                rows: list[_Row] = conn.execute(
                    _SELECT_PAGE, (thread_id, checkpoint_ns, cursor, cursor, page_size)
                ).fetchall()
                matching = [
                    row
                    for row in rows
                    if not filter or metadata_matches(decode_metadata(row[2]), filter)
                ]
                loaded = _fetch(conn, thread_id, checkpoint_ns, matching)
            for item in loaded:
                yield _record(thread_id, checkpoint_ns, item)
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
        where = "WHERE status = ?" if status is not None else ""
        params: list[Any] = [status] if status is not None else []
        params.append(-1 if limit is None else limit)
        with self._transaction() as conn:
            rows = conn.execute(
                f"SELECT thread_id, status, checkpoint_id, updated_at, next FROM threads {where} "
                "ORDER BY updated_at DESC, thread_id DESC LIMIT ?",
                params,
            ).fetchall()
        return [
            ThreadInfo(
                thread_id=thread_id,
                status=st,
                checkpoint_id=head,
                updated_at=updated_at,
                next=tuple(json.loads(next_)),
            )
            for thread_id, st, head, updated_at, next_ in rows
        ]

    # -- writing -------------------------------------------------------------------------------

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        thread_id, ns, cp = record.thread_id, record.checkpoint_ns, record.checkpoint
        # Encoding (and looking up the blobs deltas extend) happens before the transaction.
        encoded = encode_record(record, self._base_lookup(thread_id, ns))
        with self._transaction("IMMEDIATE") as conn:
            (head,) = conn.execute(_HEAD, (thread_id, ns)).fetchone()
            check_put(record, head, fork=fork)
            blobs = self._complete(conn, record, encoded.blobs, head)
            row = encoded.row
            conn.execute(
                _INSERT_CHECKPOINT,
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
            conn.executemany(
                _INSERT_BLOB,
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
                        zlib.crc32(b.data),
                        b.data,
                    )
                    for b in blobs
                ],
            )
            _insert_writes(conn, thread_id, ns, cp.id, encoded.writes)
            if ns == "":
                names = [task.name for task in cp.next]
                status = status_of(names, [(w.task_id, w.kind) for w in encoded.writes])
                conn.execute(
                    _UPSERT_THREAD, (thread_id, status, cp.id, now_iso(), json.dumps(names))
                )
            if self.retention is not None:
                self._retain(conn, thread_id, ns, cp.id)
        self._remember(thread_id, ns, blobs)
        self._remember_head(thread_id, ns, cp)

    def _complete(
        self,
        conn: sqlite3.Connection,
        record: CheckpointRecord,
        blobs: tuple[BlobRow, ...],
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
        known = self._head_versions.get((thread_id, ns))
        safe = known[1] if known is not None and head is not None and known[0] == head else {}
        written = {(b.key, b.version): b for b in blobs}
        needed = {(k, v) for k, v in cp.versions.items() if (k, v) not in written}
        needed.update((b.key, b.base) for b in blobs if b.base is not None)
        needed = {(k, v) for k, v in needed if safe.get(k) != v}
        stored = _blob_rows(conn, thread_id, ns, needed) if needed else {}
        redo = {k for k, v in cp.versions.items() if (k, v) in needed and (k, v) not in stored}
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
            written.update({(b.key, b.version): b for b in full_blobs(record, redo)})
        self._remember(thread_id, ns, stored.values())
        return list(written.values())

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        encoded = encode_writes(writes)
        if not encoded:
            return
        with self._transaction("IMMEDIATE") as conn:
            _insert_writes(conn, thread_id, checkpoint_ns, checkpoint_id, encoded)
            if checkpoint_ns != "":
                return
            found = conn.execute(
                "SELECT next FROM threads WHERE thread_id = ? AND checkpoint_id = ?",
                (thread_id, checkpoint_id),
            ).fetchone()
            if found is None:
                return  # not the thread's newest checkpoint: its status is unchanged
            keys = conn.execute(
                "SELECT task_id, kind FROM writes "
                "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
                (thread_id, checkpoint_id),
            ).fetchall()
            conn.execute(
                "UPDATE threads SET status = ?, updated_at = ? WHERE thread_id = ?",
                (status_of(json.loads(found[0]), keys), now_iso(), thread_id),
            )

    def delete_thread(self, thread_id: str) -> None:
        with self._transaction("IMMEDIATE") as conn:
            for table in ("writes", "blobs", "checkpoints", "threads"):
                conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
            self._forget(thread_id)

    # -- history -------------------------------------------------------------------------------

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        _check_keep_last(keep_last)
        deleted = 0
        with self._transaction("IMMEDIATE") as conn:
            namespaces = conn.execute(
                "SELECT DISTINCT checkpoint_ns FROM checkpoints WHERE thread_id = ?", (thread_id,)
            ).fetchall()
            for (ns,) in namespaces:
                ids = _ids_past(conn, thread_id, ns, keep_last)
                deleted += self._drop(conn, thread_id, ns, ids)
        return deleted

    def _retain(self, conn: sqlite3.Connection, thread_id: str, ns: str, head: str) -> None:
        retention = self.retention
        assert retention is not None
        drop: set[str] = set()
        if retention.max_checkpoints is not None:
            drop.update(_ids_past(conn, thread_id, ns, retention.max_checkpoints))
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
            (head,) = conn.execute(_HEAD, (thread_id, "")).fetchone()
            if head is None:
                conn.execute("DELETE FROM threads WHERE thread_id = ?", (thread_id,))
        return len(params)

    def _collect_blobs(self, conn: sqlite3.Connection, thread_id: str, ns: str) -> None:
        """Delete the blobs of a namespace that no checkpoint left in it uses."""
        bodies = conn.execute(
            "SELECT body FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?",
            (thread_id, ns),
        ).fetchall()
        kept: list[Checkpoint] = []
        for (body,) in bodies:
            versions = _body_versions(body)
            if versions is None:
                return  # an unreadable checkpoint: keep every blob rather than guess
            kept.append(Checkpoint("", None, 0, {}, versions, (), ""))
        rows = {
            (key, version): BlobRow(key, version, start, base, chain, full, b"")
            for key, version, start, base, chain, full in conn.execute(
                f"SELECT {_BLOB_META} FROM blobs WHERE thread_id = ? AND checkpoint_ns = ?",
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
                "chain_bytes, full_bytes, crc32, data FROM blobs WHERE thread_id = ?",
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
                            f"SELECT {_BLOB_META} FROM blobs WHERE thread_id = ? "
                            "AND checkpoint_ns = ? AND key = ? AND version = ?",
                            (thread_id, ns, key, version),
                        )
                        .fetchone()
                    )
                except sqlite3.Error as exc:
                    raise self._unavailable(exc) from exc
                if found is None:
                    return None
                row = BlobRow(*found, b"")
                self._remember(thread_id, ns, [row])
                return row

        return base_of

    def _remember(self, thread_id: str, ns: str, rows: Iterable[BlobRow]) -> None:
        with self._lock:
            cache = self._blob_cache
            for row in rows:
                meta = row if not row.data else BlobRow(*_meta_of(row), b"")
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
            for h in [h for h in self._head_versions if h[0] == thread_id]:
                del self._head_versions[h]


# ------------------------------------------------------------------------------------ helpers


def _retry_locked(action: Callable[[], _T], timeout: float) -> _T:
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            message = str(exc).lower()
            if ("locked" not in message and "busy" not in message) or (
                time.monotonic() >= deadline
            ):
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _meta_of(row: BlobRow) -> tuple[str, str, str, str | None, int, int]:
    return row.key, row.version, row.start, row.base, row.chain_bytes, row.full_bytes


def _ids_past(conn: sqlite3.Connection, thread_id: str, ns: str, keep: int) -> list[str]:
    """Ids of a namespace's checkpoints other than the newest ``keep``."""
    rows = conn.execute(
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ? "
        "ORDER BY checkpoint_id DESC LIMIT -1 OFFSET ?",
        (thread_id, ns, keep),
    ).fetchall()
    return [r[0] for r in rows]


def _blob_rows(
    conn: sqlite3.Connection,
    thread_id: str,
    ns: str,
    pairs: Iterable[tuple[str, str]],
    *,
    by: str = "version",
    crcs: dict[tuple[str, str], int] | None = None,
) -> dict[tuple[str, str], BlobRow]:
    """Blob rows of ``(key, version)`` pairs (or ``(key, start)`` with ``by="start"``).

    The pairs are a ``VALUES`` list joined (in that order: ``CROSS JOIN``) to the table, so
    SQLite probes an index once per pair whatever its statistics say; in chunks, to stay under
    the parameter limit. Without ``crcs`` the rows come without their data; with it, with their
    data, and ``crcs`` receives the stored CRC-32 of each.
    """
    columns = _BLOB_META + (", data, crc32" if crcs is not None else "")
    columns = ", ".join(f"b.{c.strip()}" for c in columns.split(","))
    found: dict[tuple[str, str], BlobRow] = {}
    pairs = sorted(set(pairs))
    for i in range(0, len(pairs), _CHUNK):
        chunk = pairs[i : i + _CHUNK]
        params: list[Any] = [part for pair in chunk for part in pair]
        params += [thread_id, ns]
        rows = conn.execute(
            f"WITH wanted (k, v) AS (VALUES {', '.join(['(?, ?)'] * len(chunk))}) "
            f"SELECT {columns} FROM wanted CROSS JOIN blobs AS b WHERE b.thread_id = ? "
            f"AND b.checkpoint_ns = ? AND b.key = wanted.k AND b.{by} = wanted.v",
            params,
        )
        for r in rows:
            if crcs is None:
                found[(r[0], r[1])] = BlobRow(*r, b"")
            else:
                found[(r[0], r[1])] = BlobRow(*r[:7])
                crcs[(r[0], r[1])] = r[7]
    return found


@dataclass(frozen=True, slots=True)
class _Loaded:
    """What a checkpoint row needs to become a record, fetched in the read transaction."""

    checkpoint: Checkpoint  # without values
    metadata: bytes
    rows: dict[tuple[str, str], BlobRow]
    chains: dict[tuple[str, str], list[BlobRow]]
    crcs: dict[tuple[str, str], int]
    writes: list[WriteRow]


def _fetch(
    conn: sqlite3.Connection, thread_id: str, ns: str, rows: Sequence[_Row]
) -> list[_Loaded]:
    """Everything needed to decode ``rows``, in three queries: blobs, chains, writes."""
    if not rows:
        return []
    decoded = [(wanted_blobs(body), metadata) for _, body, metadata in rows]
    wanted = {kv for (_, pairs), _ in decoded for kv in pairs}
    crcs: dict[tuple[str, str], int] = {}
    blobs = _blob_rows(conn, thread_id, ns, wanted, crcs=crcs) if wanted else {}
    starts = chains_needed(blobs.values())
    chains: dict[tuple[str, str], list[BlobRow]] = {}
    if starts:
        for row in _blob_rows(conn, thread_id, ns, starts, by="start", crcs=crcs).values():
            chains.setdefault((row.key, row.start), []).append(row)
    ids = [r[0] for r in rows]
    writes: dict[str, list[WriteRow]] = {cid: [] for cid in ids}
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        marks = ", ".join("?" * len(chunk))
        for cid, task_id, kind, task_name, value in conn.execute(
            "SELECT checkpoint_id, task_id, kind, task_name, value FROM writes "
            f"WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id IN ({marks}) "
            "ORDER BY checkpoint_id, seq",
            [thread_id, ns, *chunk],
        ):
            writes[cid].append(WriteRow(task_id, kind, task_name, value))
    loaded = []
    for (cp, pairs), metadata in decoded:
        mine = {kv: blobs[kv] for kv in pairs if kv in blobs}
        loaded.append(_Loaded(cp, metadata, mine, chains, crcs, writes[cp.id]))
    return loaded


def _record(thread_id: str, ns: str, loaded: _Loaded) -> CheckpointRecord:
    cp = loaded.checkpoint
    _verify(thread_id, ns, loaded)
    values = assemble_values(cp.versions, loaded.rows, loaded.chains)
    return CheckpointRecord(
        thread_id=thread_id,
        checkpoint_ns=ns,
        checkpoint=dataclasses.replace(cp, values=values),
        metadata=decode_metadata(loaded.metadata),
        pending_writes=tuple(decode_write(w) for w in loaded.writes),
    )


def _verify(thread_id: str, ns: str, loaded: _Loaded) -> None:
    """Check the CRC-32 of every blob the checkpoint's values are rebuilt from."""
    for row in loaded.rows.values():
        chain = {r.version: r for r in loaded.chains.get((row.key, row.start), ())}
        part: BlobRow | None = row
        while part is not None:
            crc = loaded.crcs.get((part.key, part.version))
            if crc is not None and zlib.crc32(part.data) != crc:
                raise SerializationError(
                    f"the stored value of key {part.key!r} (version {part.version}) of thread "
                    f"{thread_id!r} (namespace {ns!r}) is corrupted: its checksum does not match"
                )
            part = chain.get(part.base) if part.base is not None else None


def _insert_writes(
    conn: sqlite3.Connection,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    writes: Sequence[WriteRow],
) -> None:
    for w in writes:
        conn.execute(
            _UPSERT_WRITE,
            (
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                w.task_id,
                w.kind,
                w.task_name,
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                w.data,
            ),
        )


# ------------------------------------------------------------------- raw msgpack (migration)
#
# Migrating a version-1 database and collecting unused blobs read a few fields of stored
# checkpoints. Doing it at the msgpack level, leaving typed ext values as opaque bytes, means it
# never needs the classes inside the values registered (and never decodes what it does not
# need). The layout is serde's format version 1: a 2-byte header, then msgpack; a record
# (dataclass) is ext 14 holding ``[name, {field: value}]``, a tuple ext 1 holding an array.

_PLAIN_HEADER = b"\x01\x00"  # serde format version 1, no flags (no compression, no encryption)
_EXT_TUPLE, _EXT_RECORD = 1, 14


class _RawExt:
    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data


def _raw_unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data, ext_hook=_RawExt)


def _raw_pack(obj: Any) -> bytes:
    def default(value: Any) -> Any:
        if type(value) is _RawExt:
            return ormsgpack.Ext(value.code, value.data)
        raise TypeError(type(value).__name__)

    return ormsgpack.packb(obj, default=default)


def _raw_record(ext: Any) -> tuple[list[Any], dict[str, Any]]:
    """``(items, fields)`` of a raw record ext; ``items[1] is fields``. ValueError if not one."""
    if type(ext) is not _RawExt or ext.code != _EXT_RECORD:
        raise ValueError("not a record")
    items = _raw_unpack(ext.data)
    if type(items) is not list or len(items) < 2 or type(items[1]) is not dict:
        raise ValueError("malformed record")
    return items, items[1]


def _raw_blob(blob: bytes) -> Any:
    if blob[:2] != _PLAIN_HEADER:
        raise ValueError("not a plain serde blob")
    return _raw_unpack(blob[2:])


def _body_versions(body: bytes) -> dict[str, str] | None:
    """The ``versions`` of a stored checkpoint body, or ``None`` if it cannot be read."""
    try:
        _, fields = _raw_record(_raw_blob(body))
        versions = fields["versions"]
        if type(versions) is dict and all(type(v) is str for v in versions.values()):
            return versions
    except Exception:
        pass
    try:
        cp, _ = wanted_blobs(body)
    except SerializationError:
        return None
    return dict(cp.versions)


def _v1_values(values_blob: bytes) -> dict[str, bytes]:
    """A version-1 values blob (all values in one dict) split into one blob per key."""
    try:
        raw = _raw_blob(values_blob)
        if type(raw) is not dict or not all(type(k) is str for k in raw):
            raise ValueError("not a dict with str keys")
        return {key: _PLAIN_HEADER + _raw_pack(value) for key, value in raw.items()}
    except Exception:  # not the plain layout: decode and re-encode (needs registered classes)
        values = serde.loads(values_blob)
        return {key: serde.dumps(value, path_prefix=key) for key, value in values.items()}


def _v1_body(checkpoint_blob: bytes, versions: dict[str, str]) -> tuple[bytes, tuple[str, ...]]:
    """A version-1 checkpoint blob with new ``versions``; and the names of its planned tasks."""
    try:
        items, fields = _raw_record(_raw_blob(checkpoint_blob))
        fields["versions"] = versions
        fields["values"] = {}
        planned = fields["next"]
        if type(planned) is not _RawExt or planned.code != _EXT_TUPLE:
            raise ValueError("next is not a tuple")
        names = tuple(str(_raw_record(task)[1]["name"]) for task in _raw_unpack(planned.data))
        body = _PLAIN_HEADER + _raw_pack(_RawExt(_EXT_RECORD, _raw_pack(items)))
        return body, names
    except Exception:  # not the plain layout: decode and re-encode (needs registered classes)
        cp = serde.loads(checkpoint_blob)
        if not isinstance(cp, Checkpoint):
            raise SerializationError(f"stored checkpoint decoded to {type(cp).__name__}") from None
        new = Checkpoint(
            cp.id,
            cp.parent_id,
            cp.step,
            {},
            versions,
            cp.next,
            cp.created_at,
            cp.barriers,
            cp.updated_by,
        )
        return serde.dumps(new), tuple(t.name for t in cp.next)


def _migrate_v1(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2, inside the caller's transaction.

    Version 1 kept each checkpoint's values in one blob, with integer versions. Each v1
    checkpoint becomes a v2 row whose every value is a full blob under the checkpoint's own id
    as version (nothing is shared between checkpoints, which is simple and always right). The
    ``writes`` table is unchanged; the ``threads`` table is built from each thread's newest
    root checkpoint.
    """
    conn.execute("ALTER TABLE checkpoints RENAME TO threadline_v1_checkpoints")
    for statement in _SCHEMA:
        conn.execute(statement)
    heads: dict[str, tuple[str, str, tuple[str, ...]]] = {}  # thread -> (id, created_at, next)
    last = -1
    while True:
        batch = conn.execute(
            "SELECT rowid, thread_id, checkpoint_ns, checkpoint_id, parent_id, step, created_at,"
            " checkpoint, values_blob, metadata FROM threadline_v1_checkpoints"
            " WHERE rowid > ? ORDER BY rowid LIMIT 100",
            (last,),
        ).fetchall()
        if not batch:
            break
        for rowid, thread_id, ns, cid, parent, step, created_at, cp_blob, values, meta in batch:
            last = rowid
            try:
                blobs = _v1_values(values)
                body, names = _v1_body(cp_blob, dict.fromkeys(blobs, cid))
            except Exception as exc:
                raise SerializationError(
                    f"checkpoint {cid} of thread {thread_id!r} (namespace {ns!r}) cannot be "
                    f"read ({exc}); delete that row from the checkpoints table to migrate"
                ) from exc
            conn.execute(
                _INSERT_CHECKPOINT,
                (thread_id, ns, cid, parent, step, created_at, created_ts(created_at), body, meta),
            )
            conn.executemany(
                _INSERT_BLOB,
                [
                    (thread_id, ns, key, cid, cid, None, 0, len(data), zlib.crc32(data), data)
                    for key, data in blobs.items()
                ],
            )
            if ns == "" and (thread_id not in heads or cid > heads[thread_id][0]):
                heads[thread_id] = (cid, created_at, names)
    for thread_id, (cid, created_at, names) in heads.items():
        keys = conn.execute(
            "SELECT task_id, kind FROM writes "
            "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
            (thread_id, cid),
        ).fetchall()
        conn.execute(
            _UPSERT_THREAD,
            (thread_id, status_of(names, keys), cid, created_at, json.dumps(list(names))),
        )
    conn.execute("DROP TABLE threadline_v1_checkpoints")
    conn.execute("UPDATE threadline_schema_version SET version = ?", (SCHEMA_VERSION,))
