"""``SqliteStore``: long-term memory in one SQLite file (stdlib ``sqlite3``).

The table layout and its versions are in ``threadline.store.sqlite_schema``.

The database runs in WAL mode, so readers never block the writer. One connection is shared by
every thread, guarded by a lock; other stores (or processes) may open the same file and wait up to
``timeout`` seconds for each other's writes. ``put`` is one upsert that keeps ``created_at``
only while the old row is live (with its new vectors, if any, in the same transaction), and a
TTL refresh is a compare-and-set ``UPDATE`` that loses quietly to a concurrent ``put``.

Timestamps come from the store's clock (never SQLite's), so an injected clock governs expiry.
``TEXT`` compares as bytes (``BINARY`` collation), and UTF-8 byte order is code-point order, so
SQL ordering matches the other durable stores'. A namespace prefix ``("a", "b")`` becomes the range
``prefix = 'a.b' OR 'a.b.' <= prefix < 'a.b/'`` (``"/"`` follows ``"."``), which the primary key
serves.

Filters are evaluated in Python with ``matches``, the function ``InMemoryStore`` uses, over rows
streamed from a cursor already in search order; reading stops once ``offset + limit`` rows
matched. SQLite runs in-process, so streaming rows costs no round trips, and the semantics are
exactly the shared ones. No filter field or value ever reaches SQL text: every value is bound.

Expired rows are invisible at once and deleted lazily: ``get`` deletes the one it finds expired,
and ``search``/``list_namespaces`` delete all of them at most once per ``sweep_interval``
seconds of the store's clock; ``sweep_expired()`` does it on demand.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from threadline.errors import InvalidStoreInputError, StoreUnavailableError
from threadline.sqlite_tx import immediate
from threadline.store.base import BaseStore, namespace_matches
from threadline.store.encoding import (
    check_utf8,
    decode_value,
    encode_value,
    from_micros,
    to_micros,
    ttl_micros,
    utf8_encodable,
)
from threadline.store.filters import Condition, matches
from threadline.store.item import Item, Namespace, SearchItem, as_search_item
from threadline.store.semantic import FieldVectors, Similarity, Vector, norm, pack_vector
from threadline.store.sqlite_schema import SCHEMA_VERSION, create_schema

__all__ = ["SCHEMA_VERSION", "SqliteStore"]

# ``:now`` is the writer's clock; a live old row keeps its created_at, an expired one does not.
_UPSERT = """
    INSERT INTO threadline_store (prefix, key, value, created_at, updated_at, expires_at, ttl)
    VALUES (:prefix, :key, :value, :now, :now, :expires_at, :ttl)
    ON CONFLICT (prefix, key) DO UPDATE SET
        value = excluded.value,
        created_at = CASE
            WHEN threadline_store.expires_at IS NULL OR threadline_store.expires_at > :now
            THEN threadline_store.created_at ELSE excluded.created_at END,
        updated_at = excluded.updated_at,
        expires_at = excluded.expires_at,
        ttl = excluded.ttl
"""

_COLUMNS = "prefix, key, value, created_at, updated_at, expires_at"
_LIVE = "(expires_at IS NULL OR expires_at > :now)"
_IN_PREFIX = "(prefix = :p OR (prefix >= :p_lo AND prefix < :p_hi))"
_ORDER = "ORDER BY updated_at DESC, prefix, key"

_INSERT_VECTOR = """
    INSERT INTO threadline_store_vectors (prefix, key, field, vector, norm)
    VALUES (?, ?, ?, ?, ?)
"""

# The best similarity of a row's vectors; NULL (and so no result) when it has none.
_SCORE = """(SELECT MAX(threadline_similarity(v.vector, v.norm)) FROM threadline_store_vectors v
              WHERE v.prefix = threadline_store.prefix AND v.key = threadline_store.key)"""

_SELECT_ONE = f"""
    SELECT {_COLUMNS}, ttl FROM threadline_store WHERE prefix = :prefix AND key = :key
"""

# Compare-and-set: refresh only the row that was read, never one a concurrent put replaced.
_REFRESH = """
    UPDATE threadline_store SET expires_at = :new_expires
     WHERE prefix = :prefix AND key = :key AND updated_at = :updated_at AND expires_at = :expires
"""

_DELETE_IF_EXPIRED = """
    DELETE FROM threadline_store
     WHERE prefix = :prefix AND key = :key AND expires_at IS NOT NULL AND expires_at <= :now
"""

_FETCH = 128  # rows read per fetchmany while filtering in Python

_Row = tuple[str, str, str, int, int, int | None]


class SqliteStore(BaseStore):
    """Long-term memory in a SQLite file (default ``":memory:"``, private to this store).

    ``path`` may also be an open ``sqlite3.Connection`` (as LangGraph's ``SqliteStore`` takes);
    the store switches it to autocommit (``isolation_level=None``), as it runs its own
    transactions, and leaves it open on :meth:`close`. Make it with
    ``check_same_thread=False`` to use the async methods, which run in worker threads.

    Use it as a context manager, or call :meth:`close` when done::

        with SqliteStore("memory.db") as store:
            graph = builder.compile(store=store)

    ``timeout`` is how long to wait for another connection's write lock. ``sweep_interval``
    (seconds of the store's clock, ``None`` for never) paces the automatic deletion of expired
    rows; they are invisible either way. ``index`` (``{"embed", "dims", "fields"}``, as
    LangGraph's) enables ``search(..., query=...)``; see ``threadline.store.semantic``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | sqlite3.Connection = ":memory:",
        *,
        timeout: float = 30.0,
        clock: Callable[[], datetime] | None = None,
        refresh_on_read: bool = True,
        sweep_interval: float | None = 60.0,
        index: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(clock=clock, refresh_on_read=refresh_on_read, index=index)
        self.sweep_interval = sweep_interval
        self._next_sweep: datetime | None = None
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._owns_conn = not isinstance(path, sqlite3.Connection)
        if isinstance(path, sqlite3.Connection):
            conn = path
            conn.isolation_level = None  # autocommit: the store issues its own BEGINs
            self.path = _database_path(conn)
        else:
            self.path = os.fspath(path)
            conn = sqlite3.connect(
                self.path,
                timeout=timeout,
                check_same_thread=False,  # shared by threads, serialized by self._lock
                isolation_level=None,  # autocommit; the store issues its own BEGINs
                uri=self.path.startswith("file:"),
            )
        try:
            if self.path not in ("", ":memory:"):
                conn.execute("PRAGMA journal_mode=WAL").fetchone()
            conn.execute("PRAGMA synchronous=NORMAL")
            self._conn = conn
            self.setup()
        except BaseException:
            self._conn = None
            if self._owns_conn:
                conn.close()
            raise

    def setup(self) -> None:
        """Create the tables if missing, or bring an older layout up to date. The store does
        this when it opens; calling it again (as LangGraph's docs do) is harmless."""
        with self._lock:
            dims = None if self._index is None else self._index.dims
            create_schema(self._connection(), self.path, dims)

    # -- lifecycle -----------------------------------------------------------------------------

    @classmethod
    def from_conn_string(cls, path: str | os.PathLike[str], **options: Any) -> SqliteStore:
        """A store on ``path`` (LangGraph's spelling); use it as ``with ... as store:``."""
        return cls(path, **options)

    def close(self) -> None:
        """Close the connection (unless it was passed in: its owner closes it); later calls
        raise ``ThreadlineError``. Idempotent."""
        with self._lock:
            if self._conn is not None and self._owns_conn:
                self._conn.close()
            self._conn = None

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"SqliteStore({self.path!r}, {state})"

    def _connection(self) -> sqlite3.Connection:
        """The open connection; the caller holds ``self._lock``."""
        if self._conn is None:
            raise StoreUnavailableError(f"SqliteStore({self.path!r}) is closed")
        return self._conn

    # -- hooks ---------------------------------------------------------------------------------

    def _put(
        self,
        namespace: Namespace,
        key: str,
        value: dict[str, Any],
        now: datetime,
        ttl: float | None,
        vectors: FieldVectors | None,
    ) -> None:
        check_utf8(namespace, key)
        ttl_us = ttl_micros(ttl)
        now_us = to_micros(now)
        params = {
            "prefix": ".".join(namespace),
            "key": key,
            "value": encode_value(value),
            "now": now_us,
            "expires_at": None if ttl_us is None else now_us + ttl_us,
            "ttl": ttl_us,
        }
        with self._lock:
            conn = self._connection()
            if vectors is None:
                conn.execute(_UPSERT, params)
                return
            rows = [(params["prefix"], key, field, pack_vector(v), norm(v)) for field, v in vectors]
            with immediate(conn):
                conn.execute(_UPSERT, params)  # its trigger drops the old vectors
                conn.executemany(_INSERT_VECTOR, rows)

    def _get(self, namespace: Namespace, key: str, now: datetime, refresh: bool) -> Item | None:
        if not utf8_encodable(namespace, key):
            return None
        address = {"prefix": ".".join(namespace), "key": key}
        now_us = to_micros(now)
        with self._lock:
            conn = self._connection()
            row = conn.execute(_SELECT_ONE, address).fetchone()
            if row is None:
                return None
            *fields, ttl = row
            expires = fields[5]
            if expires is not None and expires <= now_us:
                conn.execute(_DELETE_IF_EXPIRED, {**address, "now": now_us})
                return None
            if refresh and ttl is not None:
                fields[5] = now_us + ttl
                conn.execute(
                    _REFRESH,
                    {
                        **address,
                        "new_expires": fields[5],
                        "updated_at": fields[4],
                        "expires": expires,
                    },
                )
        return _item(tuple(fields))

    def _search(
        self,
        prefix: Namespace,
        conditions: list[Condition],
        limit: int,
        offset: int,
        now: datetime,
        query: Vector | None,
    ) -> list[SearchItem]:
        if limit == 0 or not utf8_encodable(prefix, ""):
            return []
        where, params = _where(prefix, now)
        if query is None:
            sql = f"SELECT {_COLUMNS}, NULL FROM threadline_store WHERE {where} {_ORDER}"
        else:
            sql = f"""
                SELECT * FROM (SELECT {_COLUMNS}, {_SCORE} AS score
                               FROM threadline_store WHERE {where})
                 WHERE score IS NOT NULL ORDER BY score DESC, updated_at DESC, prefix, key
            """
        similarity = None if query is None else Similarity(query)
        with self._lock:
            conn = self._connection()
            self._maybe_sweep(conn, now)
            if similarity is not None:
                conn.create_function("threadline_similarity", 2, similarity, deterministic=True)
            if not conditions:
                rows = conn.execute(
                    f"{sql} LIMIT :limit OFFSET :offset",
                    {**params, "limit": limit, "offset": offset},
                ).fetchall()
                found = [_result(row) for row in rows]
            else:
                found = _filtered(conn.execute(sql, params), conditions, limit, offset)
        if similarity is not None and similarity.mismatched:
            raise InvalidStoreInputError(
                f"SqliteStore({self.path!r}) holds vectors whose length is not the index's "
                f"dims={len(query or ())}; they were written under another index: put those "
                "items again"
            )
        return found

    def _delete(self, namespace: Namespace, key: str) -> None:
        if not utf8_encodable(namespace, key):
            return
        with self._lock:
            self._connection().execute(
                "DELETE FROM threadline_store WHERE prefix = ? AND key = ?",
                (".".join(namespace), key),
            )

    def _list_namespaces(
        self,
        prefix: Namespace,
        suffix: Namespace,
        max_depth: int | None,
        limit: int,
        offset: int,
        now: datetime,
    ) -> list[Namespace]:
        if not (utf8_encodable(prefix, "") and utf8_encodable(suffix, "")):
            return []
        where, params = _where(prefix, now)
        with self._lock:
            conn = self._connection()
            self._maybe_sweep(conn, now)
            rows = conn.execute(
                f"SELECT DISTINCT prefix FROM threadline_store WHERE {where}", params
            ).fetchall()
        names = {
            namespace[:max_depth]
            for (text,) in rows
            if namespace_matches(namespace := tuple(text.split(".")), prefix, suffix)
        }
        return sorted(names)[offset : offset + limit]

    # -- expiry --------------------------------------------------------------------------------

    def sweep_expired(self) -> int:
        """Delete every expired row now; returns how many went."""
        now = self._now()
        with self._lock:
            return self._sweep(self._connection(), now)

    def _maybe_sweep(self, conn: sqlite3.Connection, now: datetime) -> None:
        if self.sweep_interval is None:
            return
        if self._next_sweep is None or now >= self._next_sweep:
            self._sweep(conn, now)

    def _sweep(self, conn: sqlite3.Connection, now: datetime) -> int:
        if self.sweep_interval is not None:
            self._next_sweep = now + timedelta(seconds=self.sweep_interval)
        cursor = conn.execute(
            "DELETE FROM threadline_store WHERE expires_at IS NOT NULL AND expires_at <= ?",
            (to_micros(now),),
        )
        return cursor.rowcount


def _database_path(conn: sqlite3.Connection) -> str:
    """The file behind a connection (``""`` for an in-memory database), for messages."""
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return file or ":memory:"
    return ":memory:"


def _where(prefix: Namespace, now: datetime) -> tuple[str, dict[str, Any]]:
    """The ``WHERE`` clause for live rows under ``prefix``, and its parameters."""
    params: dict[str, Any] = {"now": to_micros(now)}
    if not prefix:
        return _LIVE, params
    text = ".".join(prefix)
    params.update(p=text, p_lo=text + ".", p_hi=text + "/")
    return f"{_IN_PREFIX} AND {_LIVE}", params


def _filtered(
    cursor: sqlite3.Cursor, conditions: list[Condition], limit: int, offset: int
) -> list[SearchItem]:
    """Rows of ``cursor`` (in search order) whose value matches, paged; reads no further."""
    found: list[SearchItem] = []
    try:
        while len(found) < limit and (rows := cursor.fetchmany(_FETCH)):
            for row in rows:
                value = decode_value(row[2])
                if not matches(value, conditions):
                    continue
                if offset:
                    offset -= 1
                    continue
                found.append(_result(row, value))
                if len(found) == limit:
                    break
    finally:
        cursor.close()
    return found


def _result(row: tuple[Any, ...], value: dict[str, Any] | None = None) -> SearchItem:
    """A search row: the item's columns, then its score (``NULL`` without a query)."""
    return as_search_item(_item(row[:6], value), row[6])


def _item(row: _Row, value: dict[str, Any] | None = None) -> Item:
    prefix, key, text, created, updated, expires = row
    return Item(
        value=decode_value(text) if value is None else value,
        key=key,
        namespace=tuple(prefix.split(".")),
        created_at=from_micros(created),
        updated_at=from_micros(updated),
        expires_at=None if expires is None else from_micros(expires),
    )
