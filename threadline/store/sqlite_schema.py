"""The table layout of ``SqliteStore``, created or brought up to date when a store opens.

Layout (schema version 2)::

    threadline_store_schema_version (version)
    threadline_store (
        prefix      TEXT     -- the namespace, labels joined with "." (labels never hold ".")
        key         TEXT
        value       TEXT     -- compact JSON (``encode_value``)
        created_at  INTEGER  -- microseconds since the Unix epoch, from the store's clock
        updated_at  INTEGER
        expires_at  INTEGER  -- NULL: never expires
        ttl         INTEGER  -- microseconds the item was written with, for refresh on read
        PRIMARY KEY (prefix, key)
    )
    threadline_store_vectors (   -- semantic search: one row per embedded text of an item
        prefix, key  TEXT
        field        TEXT     -- the path it came from ("text", "tags.1")
        vector       BLOB     -- little-endian float64s (``pack_vector``)
        norm         REAL     -- its Euclidean norm, computed once at put
        PRIMARY KEY (prefix, key, field)
    )

Triggers delete an item's vectors whenever its row is deleted or its value replaced, so no
code path (expiry, sweep, another store without an ``index``) can leave stale vectors; a
``put`` on a store with an ``index`` then inserts the new ones in the same transaction.
A ``query`` search scores rows with a SQL function registered for that search, computing the
cosine in Python over the rows the namespace and TTL conditions leave; items without vectors
are not returned, as in LangGraph's SQL stores.
"""

from __future__ import annotations

import sqlite3

from threadline.errors import InvalidStoreInputError, StoreUnavailableError
from threadline.sqlite_tx import immediate

#: The version of the table layout; a database written by a newer layout is refused.
#: Version 2 added the vectors table and its triggers (created on opening a version 1 file).
SCHEMA_VERSION = 2

_SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS threadline_store_schema_version (
        version INTEGER NOT NULL
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS threadline_store (
        prefix     TEXT    NOT NULL,
        key        TEXT    NOT NULL,
        value      TEXT    NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        expires_at INTEGER,
        ttl        INTEGER,
        PRIMARY KEY (prefix, key)
    ) WITHOUT ROWID
    """,
    """
    CREATE INDEX IF NOT EXISTS threadline_store_updated
        ON threadline_store (updated_at DESC, prefix, key)
    """,
    """
    CREATE INDEX IF NOT EXISTS threadline_store_expires
        ON threadline_store (expires_at) WHERE expires_at IS NOT NULL
    """,
    """
    CREATE TABLE IF NOT EXISTS threadline_store_vectors (
        prefix TEXT NOT NULL,
        key    TEXT NOT NULL,
        field  TEXT NOT NULL,
        vector BLOB NOT NULL,
        norm   REAL NOT NULL,
        PRIMARY KEY (prefix, key, field)
    ) WITHOUT ROWID
    """,
    """
    CREATE TRIGGER IF NOT EXISTS threadline_store_drop_vectors
    AFTER DELETE ON threadline_store BEGIN
        DELETE FROM threadline_store_vectors WHERE prefix = old.prefix AND key = old.key;
    END
    """,
    """
    CREATE TRIGGER IF NOT EXISTS threadline_store_replace_vectors
    AFTER UPDATE OF value ON threadline_store BEGIN
        DELETE FROM threadline_store_vectors WHERE prefix = old.prefix AND key = old.key;
    END
    """,
)

_VERSIONS = "threadline_store_schema_version"


def create_schema(conn: sqlite3.Connection, path: str, dims: int | None) -> None:
    """Create or upgrade the tables in one transaction; refuse a newer layout, and ``dims``
    that differ from the vectors already stored."""
    with immediate(conn):
        for statement in _SCHEMA:
            conn.execute(statement)
        (found,) = conn.execute(
            "SELECT MAX(version) FROM threadline_store_schema_version"
        ).fetchone()
        if found is None:
            conn.execute(
                "INSERT INTO threadline_store_schema_version (version) VALUES (?)",
                (SCHEMA_VERSION,),
            )
        elif found < SCHEMA_VERSION:  # version 1: the statements above added what was new
            conn.execute(
                "UPDATE threadline_store_schema_version SET version = ?", (SCHEMA_VERSION,)
            )
        elif found > SCHEMA_VERSION:
            raise StoreUnavailableError(
                f"SQLite store {path!r} has schema version {found}, newer than this "
                f"threadline understands ({SCHEMA_VERSION}); upgrade threadline"
            )
        if dims is not None:
            _check_dims(conn, path, dims)


def _check_dims(conn: sqlite3.Connection, path: str, dims: int) -> None:
    row = conn.execute(
        "SELECT length(vector) / 8 FROM threadline_store_vectors WHERE length(vector) != ? LIMIT 1",
        (8 * dims,),
    ).fetchone()
    if row is not None:
        raise InvalidStoreInputError(
            f"SQLite store {path!r} holds vectors of {row[0]} dims, but index says "
            f"dims={dims}; open it with the index it was written with"
        )
