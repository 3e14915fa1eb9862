"""``PostgresStore``: long-term memory in PostgreSQL (psycopg 3 with a connection pool).

Layout (schema version 2; the tables live in ``schema`` when one is given, else on the
connection's ``search_path``)::

    threadline_store_schema_version (version)
    threadline_store (
        prefix      text COLLATE "C"  -- the namespace, labels joined with "." (never in labels)
        key         text COLLATE "C"
        value       jsonb
        created_at  timestamptz       -- from the store's clock, never the server's
        updated_at  timestamptz
        expires_at  timestamptz       -- NULL: never expires
        ttl_us      bigint            -- the TTL the item was written with, for refresh on read
        PRIMARY KEY (prefix, key)
    )
    threadline_store_vectors (        -- semantic search: one row per embedded text of an item
        prefix, key                   -- the item's; deleted with it (ON DELETE CASCADE)
        field       text              -- the path it came from ("text", "tags.1")
        vector      float8[]
        norm        float8            -- its Euclidean norm, computed once at put
        PRIMARY KEY (prefix, key, field)
    )

Semantic search needs no extension (pgvector is not required): a ``query`` search computes each
cosine in SQL over the rows the namespace, TTL and filter conditions leave, exactly as Python
would (same additions in the same order), and returns only items that have vectors, as
LangGraph's ``PostgresStore`` does. Every ``put`` drops the item's old vectors in the same
statement as its upsert, so a store without an ``index`` never leaves stale ones behind.

``setup()`` creates (or checks) the schema; it is idempotent, safe to run from many processes at
once (an advisory lock serializes it), and runs by itself before the first operation of a store
that was not set up explicitly.

Everything happens in SQL, in one statement per call, with every value bound as a parameter —
field names included (``value -> %(f0)s``); nothing from the caller is ever formatted into SQL
text, and the optional ``schema`` goes in only as a quoted identifier. ``put`` is one upsert
that keeps ``created_at`` while the old row is live; ``get`` with a TTL refresh is one
``UPDATE ... RETURNING`` joined with a plain read.

Filters translate each ``(field, operator, operand)`` term of ``parse_filter`` to SQL with the
semantics of ``matches``: ``$eq``/``$ne`` compare ``jsonb`` values (``true`` is not ``1``, ``1``
equals ``1.0``, objects compare as key sets, a missing field only satisfies ``$ne``); range
operators first require the field to hold the operand's JSON type, then compare numbers as
``numeric`` (exact, like Python) and strings under ``COLLATE "C"`` (code-point order). Ordering is
``updated_at DESC, prefix, key`` in ``"C"`` collation, the order ``sort_items`` defines, and
``limit``/``offset`` are applied by the server. ``list_namespaces`` sorts ``text[]`` arrays, which
order like Python tuples, and truncates them with an array slice.

``jsonb`` cannot hold NUL characters or lone surrogates, nor can ``text``: values, keys and labels
containing them are refused with ``ValueError`` (so no filter or lookup can ever find one).
``jsonb`` also does not keep the order of object keys; values compare equal, but a value may
come back with its keys reordered. Floats stay floats: an integral float that Python would
print in exponent form (``1e+16``) is written out in full with ``.0``, as ``jsonb`` would
otherwise return it as an ``int``.

Expired rows are invisible at once and deleted lazily: ``search``/``list_namespaces`` delete
all of them at most once per ``sweep_interval`` seconds of the store's clock;
``sweep_expired()`` does it on demand (from a cron job, say).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from psycopg import sql
from psycopg_pool import ConnectionPool

from threadline.errors import InvalidStoreInputError, StoreUnavailableError
from threadline.store.base import BaseStore, expiry
from threadline.store.encoding import encode_value, ttl_micros
from threadline.store.filters import Condition
from threadline.store.item import Item, Namespace, SearchItem, as_search_item
from threadline.store.postgres_sql import (
    COLUMNS,
    IN_PREFIX,
    LIVE,
    SCORE,
    WITH_SUFFIX,
    condition_sql,
    item_of,
    jsonb_text,
    prefix_params,
    storable,
)
from threadline.store.semantic import FieldVectors, Vector, norm

__all__ = ["SCHEMA_VERSION", "PostgresStore"]

#: The version of the table layout; a database written by a newer layout is refused.
#: Version 2 added the vectors table (created by ``setup`` on a version 1 database).
SCHEMA_VERSION = 2


class PostgresStore(BaseStore):
    """Long-term memory in PostgreSQL, shared by every process that connects.

    ``conn`` is a connection URL/DSN (the store then owns a ``psycopg_pool.ConnectionPool`` of
    ``min_size``..``max_size`` connections, closed by :meth:`close`) or an existing
    ``ConnectionPool`` (shared: ``close`` leaves it open). ``schema`` puts the tables in that
    schema, created if missing; use it to keep apps or tests apart. Use the store as a context
    manager, or call :meth:`close`::

        with PostgresStore("postgresql://app@db/app") as store:
            store.setup()  # optional: the first call sets up anyway
            graph = builder.compile(store=store)

    ``sweep_interval`` (seconds of the store's clock, ``None`` for never) paces the automatic
    deletion of expired rows; they are invisible either way.
    """

    def __init__(
        self,
        conn: str | ConnectionPool,
        *,
        schema: str | None = None,
        min_size: int = 1,
        max_size: int = 10,
        clock: Callable[[], datetime] | None = None,
        refresh_on_read: bool = True,
        sweep_interval: float | None = 60.0,
        index: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(clock=clock, refresh_on_read=refresh_on_read, index=index)
        if schema is not None and (not isinstance(schema, str) or not schema):
            raise InvalidStoreInputError(
                f"schema must be a non-empty string or None, got {schema!r}"
            )
        self.schema = schema
        self.sweep_interval = sweep_interval
        self._next_sweep: datetime | None = None
        self._lock = threading.Lock()
        self._ready = False
        self._closed = False
        if isinstance(conn, ConnectionPool):
            self._pool = conn
            self._owns_pool = False
        else:
            self._pool = ConnectionPool(
                conn,
                min_size=min_size,
                max_size=max_size,
                kwargs={"autocommit": True},
                check=ConnectionPool.check_connection,
                open=True,
                name="threadline-store",
            )
            self._owns_pool = True

        def table(name: str) -> sql.Composable:
            return sql.Identifier(schema, name) if schema else sql.Identifier(name)

        self._table = table("threadline_store")
        self._version_table = table("threadline_store_schema_version")
        self._vectors = table("threadline_store_vectors")

    # -- lifecycle -----------------------------------------------------------------------------

    @classmethod
    def from_conn_string(cls, url: str, **options: Any) -> PostgresStore:
        """A store on ``url`` (LangGraph's spelling); use it as ``with ... as store:``."""
        return cls(url, **options)

    def setup(self) -> None:
        """Create the schema, tables and indexes if missing, and check the schema version.

        Idempotent and safe to run concurrently; the store calls it before its first operation.
        """
        statements: list[sql.Composed] = []
        if self.schema:
            statements.append(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema))
            )
        statements += [
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (version integer NOT NULL)").format(
                self._version_table
            ),
            sql.SQL(
                """
                CREATE TABLE IF NOT EXISTS {} (
                    prefix     text COLLATE "C" NOT NULL,
                    key        text COLLATE "C" NOT NULL,
                    value      jsonb            NOT NULL,
                    created_at timestamptz      NOT NULL,
                    updated_at timestamptz      NOT NULL,
                    expires_at timestamptz,
                    ttl_us     bigint,
                    PRIMARY KEY (prefix, key)
                )
                """
            ).format(self._table),
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS threadline_store_updated "
                "ON {} (updated_at DESC, prefix, key)"
            ).format(self._table),
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS threadline_store_expires "
                "ON {} (expires_at) WHERE expires_at IS NOT NULL"
            ).format(self._table),
            sql.SQL(
                """
                CREATE TABLE IF NOT EXISTS {} (
                    prefix text COLLATE "C" NOT NULL,
                    key    text COLLATE "C" NOT NULL,
                    field  text             NOT NULL,
                    vector float8[]         NOT NULL,
                    norm   float8           NOT NULL,
                    PRIMARY KEY (prefix, key, field),
                    FOREIGN KEY (prefix, key) REFERENCES {} ON DELETE CASCADE
                )
                """
            ).format(self._vectors, self._table),
        ]
        lock_name = f"threadline_store_setup:{self.schema or ''}"
        with self._pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (lock_name,))
            for statement in statements:
                conn.execute(statement)
            row = conn.execute(
                sql.SQL("SELECT MAX(version) FROM {}").format(self._version_table)
            ).fetchone()
            found = row[0] if row else None
            if found is None:
                conn.execute(
                    sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(self._version_table),
                    (SCHEMA_VERSION,),
                )
            elif found < SCHEMA_VERSION:  # version 1: the statements above added what was new
                conn.execute(
                    sql.SQL("UPDATE {} SET version = %s").format(self._version_table),
                    (SCHEMA_VERSION,),
                )
            elif found > SCHEMA_VERSION:
                raise StoreUnavailableError(
                    f"PostgreSQL store {self._where()} has schema version {found}, newer than "
                    f"this threadline understands ({SCHEMA_VERSION}); upgrade threadline"
                )
            self._check_dims(conn)
        self._ready = True

    def _check_dims(self, conn: Any) -> None:
        """Refuse an ``index`` whose ``dims`` differ from the vectors already stored."""
        if self._index is None:
            return
        row = conn.execute(
            sql.SQL(
                "SELECT cardinality(vector) FROM {} WHERE cardinality(vector) <> %s LIMIT 1"
            ).format(self._vectors),
            (self._index.dims,),
        ).fetchone()
        if row is not None:
            raise InvalidStoreInputError(
                f"PostgreSQL store {self._where()} holds vectors of {row[0]} dims, but index "
                f"says dims={self._index.dims}; open it with the index it was written with"
            )

    def close(self) -> None:
        """Close the pool if the store opened it; later calls raise ``ThreadlineError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._owns_pool:
            self._pool.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"PostgresStore({self._where()}, {state})"

    def _where(self) -> str:
        return f"schema {self.schema!r}" if self.schema else "on the search_path"

    def _execute(
        self, query: sql.Composable, params: dict[str, Any], *, fetch: bool = True
    ) -> list[tuple[Any, ...]]:
        """Run one statement on a pooled connection (setting up first if needed)."""
        with self._connection() as conn:
            cursor = conn.execute(query, params)
            return cursor.fetchall() if fetch else []

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A pooled connection, once the store is known to be open and set up."""
        if self._closed:
            raise StoreUnavailableError(f"PostgresStore({self._where()}) is closed")
        if not self._ready:
            with self._lock:
                if not self._ready:
                    self.setup()
        with self._pool.connection() as conn:
            yield conn

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
        encode_value(value)  # the shared checks and messages for non-JSON values
        if not storable(namespace, key):
            raise InvalidStoreInputError(
                f"namespace {namespace!r} or key {key!r} holds a NUL character or a lone "
                "surrogate, which PostgreSQL text cannot store"
            )
        statement = sql.SQL(
            """
            WITH dropped AS (
                DELETE FROM {vectors} WHERE prefix = %(prefix)s AND key = %(key)s
            )
            INSERT INTO {table} AS t
                (prefix, key, value, created_at, updated_at, expires_at, ttl_us)
            VALUES (%(prefix)s, %(key)s, %(value)s::jsonb, %(now)s, %(now)s,
                    %(expires_at)s, %(ttl_us)s)
            ON CONFLICT (prefix, key) DO UPDATE SET
                value = excluded.value,
                created_at = CASE WHEN t.expires_at IS NULL OR t.expires_at > excluded.updated_at
                                  THEN t.created_at ELSE excluded.created_at END,
                updated_at = excluded.updated_at,
                expires_at = excluded.expires_at,
                ttl_us = excluded.ttl_us
            """
        ).format(table=self._table, vectors=self._vectors)
        params = {
            "prefix": ".".join(namespace),
            "key": key,
            "value": jsonb_text(value, "value"),
            "now": now,
            "expires_at": expiry(now, ttl),
            "ttl_us": ttl_micros(ttl),
        }
        if not vectors:
            self._execute(statement, params, fetch=False)
            return
        rows = [(params["prefix"], key, field, v, norm(v)) for field, v in vectors]
        insert = sql.SQL(
            "INSERT INTO {} (prefix, key, field, vector, norm) VALUES (%s, %s, %s, %s, %s)"
        ).format(self._vectors)
        with self._connection() as conn, conn.transaction():
            conn.execute(statement, params)
            conn.cursor().executemany(insert, rows)

    def _get(self, namespace: Namespace, key: str, now: datetime, refresh: bool) -> Item | None:
        if not storable(namespace, key):
            return None
        # The CTE refreshes a live TTL item and returns it; otherwise the plain read answers.
        query = sql.SQL(
            f"""
            WITH refreshed AS (
                UPDATE {{table}}
                   SET expires_at = %(now)s + ttl_us * interval '1 microsecond'
                 WHERE prefix = %(prefix)s AND key = %(key)s AND %(refresh)s
                   AND ttl_us IS NOT NULL AND expires_at > %(now)s
                RETURNING {COLUMNS}
            )
            SELECT * FROM refreshed
            UNION ALL
            SELECT {COLUMNS} FROM {{table}}
             WHERE prefix = %(prefix)s AND key = %(key)s AND {LIVE}
               AND NOT EXISTS (SELECT 1 FROM refreshed)
            """
        ).format(table=self._table)
        params = {"prefix": ".".join(namespace), "key": key, "now": now, "refresh": refresh}
        rows = self._execute(query, params)
        return item_of(rows[0]) if rows else None

    def _search(
        self,
        prefix: Namespace,
        conditions: list[Condition],
        limit: int,
        offset: int,
        now: datetime,
        query: Vector | None,
    ) -> list[SearchItem]:
        if limit == 0 or not storable(prefix, ""):
            return []
        self._maybe_sweep(now)
        params: dict[str, Any] = {"now": now, "limit": limit, "offset": offset}
        where: list[sql.Composable] = [sql.SQL(LIVE)]
        if prefix:
            where.append(sql.SQL(IN_PREFIX))
            params.update(prefix_params(prefix))
        for i, condition in enumerate(conditions):
            where.append(condition_sql(condition, i, params))
        if query is None:
            template = sql.SQL(
                f"""
                SELECT {COLUMNS}, NULL FROM {{table}} WHERE {{where}}
                 ORDER BY updated_at DESC, prefix, key LIMIT %(limit)s OFFSET %(offset)s
                """
            )
        else:
            params.update(q=query, q_norm=norm(query))
            template = sql.SQL(
                f"""
                SELECT * FROM (
                    SELECT {COLUMNS}, {SCORE} AS score FROM {{table}} AS t WHERE {{where}}
                ) AS found
                 WHERE score IS NOT NULL
                 ORDER BY score DESC, updated_at DESC, prefix, key
                 LIMIT %(limit)s OFFSET %(offset)s
                """
            )
        statement = template.format(
            table=self._table, vectors=self._vectors, where=sql.SQL(" AND ").join(where)
        )
        rows = self._execute(statement, params)
        return [as_search_item(item_of(row[:6]), row[6]) for row in rows]

    def _delete(self, namespace: Namespace, key: str) -> None:
        if not storable(namespace, key):
            return
        query = sql.SQL("DELETE FROM {} WHERE prefix = %(prefix)s AND key = %(key)s").format(
            self._table
        )
        self._execute(query, {"prefix": ".".join(namespace), "key": key}, fetch=False)

    def _list_namespaces(
        self,
        prefix: Namespace,
        suffix: Namespace,
        max_depth: int | None,
        limit: int,
        offset: int,
        now: datetime,
    ) -> list[Namespace]:
        if limit == 0 or not (storable(prefix, "") and storable(suffix, "")):
            return []
        self._maybe_sweep(now)
        params: dict[str, Any] = {"now": now, "limit": limit, "offset": offset}
        where = [LIVE]
        if prefix:
            where.append(IN_PREFIX)
            params.update(prefix_params(prefix))
        if suffix:
            text = ".".join(suffix)
            where.append(WITH_SUFFIX)
            params.update(s=text, s_len=len(text) + 1, s_dot="." + text)
        labels = "string_to_array(prefix, '.') COLLATE \"C\""
        if max_depth is not None:
            labels = f"({labels})[1:%(depth)s]"
            params["depth"] = max_depth
        # text[] sorts element by element, a shorter array first on a tie: tuple order.
        query = sql.SQL(
            f"""
            SELECT ns FROM (
                SELECT DISTINCT {labels} AS ns FROM {{table}} WHERE {" AND ".join(where)}
            ) AS found
            ORDER BY ns LIMIT %(limit)s OFFSET %(offset)s
            """
        ).format(table=self._table)
        return [tuple(ns) for (ns,) in self._execute(query, params)]

    # -- expiry --------------------------------------------------------------------------------

    def sweep_expired(self) -> int:
        """Delete every expired row now; returns how many went."""
        return self._sweep(self._now())

    def _maybe_sweep(self, now: datetime) -> None:
        if self.sweep_interval is None:
            return
        if self._next_sweep is None or now >= self._next_sweep:
            self._sweep(now)

    def _sweep(self, now: datetime) -> int:
        if self.sweep_interval is not None:
            self._next_sweep = now + timedelta(seconds=self.sweep_interval)
        query = sql.SQL(
            "DELETE FROM {} WHERE expires_at IS NOT NULL AND expires_at <= %(now)s RETURNING 1"
        ).format(self._table)
        return len(self._execute(query, {"now": now}))
