"""Opening a database: WAL mode, the schema version check, migrating older versions (none
yet: see ``formats``).

A migration runs inside the transaction that opens the file, so a failure leaves it as it was.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from typing import TypeVar

from threadline.checkpoint.formats import migrations_from
from threadline.checkpoint.sqlite.schema import CREATED_AT, SCHEMA, SCHEMA_VERSION
from threadline.checkpoint.stamps import created_text
from threadline.errors import SaverUnavailableError

_T = TypeVar("_T")


def prepare(
    conn: sqlite3.Connection, path: str, timeout: float, synchronous: str = "NORMAL"
) -> None:
    """Put a newly opened connection in WAL mode and create, check or migrate the schema.

    ``synchronous`` is one of ``SYNCHRONOUS`` (checked by the caller). One transaction: a
    migration that fails leaves the file as it was.
    """
    conn.create_function(CREATED_AT, 2, created_text, deterministic=True)
    # Compaction frees the pages of rewritten blobs; with incremental auto-vacuum (settable only
    # before the first table exists: a no-op on older files) ``put`` gives them back to the OS.
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    # Switching to WAL needs an exclusive lock and, unlike other statements, can fail with
    # "database is locked" at once instead of waiting for the busy timeout when several
    # connections open a new file together: retry it within the timeout.
    _retry_locked(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone(), timeout)
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS threadline_schema_version (version INTEGER NOT NULL)"
        )
        (found,) = conn.execute("SELECT MAX(version) FROM threadline_schema_version").fetchone()
        _check_version(conn, path, found)
        _upgrade(conn, path, found)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _check_version(conn: sqlite3.Connection, path: str, found: int | None) -> None:
    """Refuse a file of a newer threadline, or another tool's tables under our names."""
    if found is not None and found > SCHEMA_VERSION:
        raise SaverUnavailableError(
            f"SQLite checkpoint database {path!r} has schema version {found}: it "
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
                f"SQLite database {path!r} has tables threadline did not create "
                f"({', '.join(t for (t,) in foreign)}): is it another tool's database?"
            )


#: ``MIGRATIONS[n]`` rewrites a file of schema version ``n`` as version ``n + 1``, inside the
#: transaction that opens it (see ``formats``). None yet: version 1 (text ``created_at`` and
#: metadata) is refused.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {}


def _upgrade(conn: sqlite3.Connection, path: str, found: int | None) -> None:
    """Create the schema in a new file, or migrate an older one to ``SCHEMA_VERSION``."""
    steps = migrations_from(found, SCHEMA_VERSION, MIGRATIONS, f"SQLite database {path!r}")
    for migrate in steps:
        migrate(conn)
    if steps:
        conn.execute("UPDATE threadline_schema_version SET version = ?", (SCHEMA_VERSION,))
    for statement in SCHEMA:
        conn.execute(statement)
    if found is None:
        conn.execute(
            "INSERT INTO threadline_schema_version (version) VALUES (?)", (SCHEMA_VERSION,)
        )


def _retry_locked(action: Callable[[], _T], timeout: float) -> _T:
    """Run ``action``, again while SQLite says the file is locked or busy, up to ``timeout``."""
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
