"""The SQLite saver's connection: one it opens on a path, or one the caller made and keeps, put
in WAL mode with the schema made, checked or migrated.

A caller's ``sqlite3.Connection`` is used as it is, with WAL mode, ``synchronous`` and (if
``timeout`` is given) the busy timeout set on it. The saver issues ``BEGIN`` / ``COMMIT``
itself, so the connection must not keep a transaction open (``autocommit=False`` is refused);
it reads rows by position (``row_factory`` ``None`` or ``sqlite3.Row``, ``text_factory``
``str``) and calls it from other threads under its lock (``check_same_thread=False``). Code of
yours sharing the connection must not use it while a saver call runs.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from threadline.checkpoint.formats import migrations_from
from threadline.checkpoint.sqlite.schema import CREATED_AT, SCHEMA, SCHEMA_VERSION, WRITES
from threadline.checkpoint.stamps import created_text
from threadline.errors import ConfigError, SaverUnavailableError
from threadline.sqlite_tx import immediate

SYNCHRONOUS = ("normal", "full")  # what each guarantees in WAL mode: docs/storage.md
DEFAULT_TIMEOUT = 30.0  # seconds a connection the saver opens waits for another's write lock


def _writes_by_rowid(conn: sqlite3.Connection) -> None:
    """Version 2 to 3: ``writes.seq``, counted per checkpoint, becomes the rowid
    (``schema.WRITES``); rows are copied checkpoint by checkpoint in their old order."""
    conn.execute("ALTER TABLE writes RENAME TO writes_v2")
    conn.execute(WRITES)
    conn.execute(
        "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, kind, task_name,"
        " value) SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, kind, task_name, value"
        " FROM writes_v2 ORDER BY thread_id, checkpoint_ns, checkpoint_id, seq"
    )
    conn.execute("DROP TABLE writes_v2")


#: ``MIGRATIONS[n]`` rewrites a file of schema version ``n`` as version ``n + 1``, inside the
#: transaction that opens it (see ``formats``). Version 1 (text ``created_at`` and metadata)
#: is refused.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {2: _writes_by_rowid}


def synchronous_level(value: Any) -> str:
    """The PRAGMA value for ``synchronous=``; ``ConfigError`` for anything but the two levels."""
    if isinstance(value, str) and value.lower() in SYNCHRONOUS:
        return value.upper()
    raise ConfigError(
        f"SqliteSaver synchronous={value!r} is not supported: use 'normal' (the default: a "
        "committed checkpoint survives a process crash) or 'full' (it survives a power loss "
        "too, one fsync per put)"
    )


def open_path(path: str, timeout: float | None, synchronous: str) -> sqlite3.Connection:
    """A connection of the saver's own on ``path`` (or ``:memory:``), prepared."""
    if path not in ("", ":memory:") and not path.startswith("file:"):
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise SaverUnavailableError(
                f"cannot open SQLite checkpoint database {path!r}: "
                f"directory {directory!r} does not exist; create it first"
            )
    wait = DEFAULT_TIMEOUT if timeout is None else timeout
    try:
        conn = sqlite3.connect(
            path,
            timeout=wait,  # also the busy timeout for locked databases
            check_same_thread=False,
            isolation_level=None,  # we issue BEGIN/COMMIT ourselves
            uri=path.startswith("file:"),
        )
    except sqlite3.Error as exc:
        raise SaverUnavailableError(
            f"cannot open SQLite checkpoint database {path!r}: {exc}"
        ) from exc
    try:
        _prepare(conn, path, wait, synchronous)
    except BaseException:
        conn.close()
        raise
    return conn


def adopt(conn: sqlite3.Connection, timeout: float | None, synchronous: str) -> str:
    """Check and prepare a caller's connection; returns the path of its main database."""
    if getattr(conn, "autocommit", True) is False:
        raise ConfigError(
            "SqliteSaver needs a connection that does not keep a transaction open: it was given "
            "one made with autocommit=False; use sqlite3.connect(path, "
            "check_same_thread=False) (the default transaction control) or autocommit=True"
        )
    if conn.row_factory not in (None, sqlite3.Row):
        raise ConfigError(
            f"SqliteSaver reads rows by position: the connection's row_factory "
            f"{conn.row_factory!r} is not supported (use None or sqlite3.Row)"
        )
    if conn.text_factory is not str:
        raise ConfigError(
            f"SqliteSaver needs text as str: the connection's text_factory "
            f"{conn.text_factory!r} is not supported"
        )
    if conn.in_transaction:
        raise ConfigError(
            "the connection given to SqliteSaver has a transaction open: commit or roll it "
            "back first (the saver runs its own transactions)"
        )
    try:
        rows = conn.execute("PRAGMA database_list").fetchall()
        path = next((row[2] for row in rows if row[1] == "main"), "") or ":memory:"
        if timeout is not None:
            conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        (busy_ms,) = conn.execute("PRAGMA busy_timeout").fetchone()
    except sqlite3.ProgrammingError as exc:
        raise ConfigError(f"SqliteSaver cannot use the connection it was given: {exc}") from exc
    _prepare(conn, path, busy_ms / 1000, synchronous)
    return str(path)


def _prepare(conn: sqlite3.Connection, path: str, timeout: float, synchronous: str) -> None:
    """Put a connection in WAL mode and create, check or migrate the schema, in one
    transaction: a migration that fails leaves the file as it was."""
    try:
        conn.create_function(CREATED_AT, 2, created_text, deterministic=True)
        # Compaction frees the pages of rewritten blobs; with incremental auto-vacuum (settable
        # only before the first table exists: a no-op on older files) ``put`` gives them back.
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        # Switching to WAL needs an exclusive lock and, unlike other statements, can fail with
        # "database is locked" at once instead of waiting for the busy timeout when several
        # connections open a new file together: retry it within the timeout.
        deadline, delay = time.monotonic() + timeout, 0.001
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL").fetchone()
                break
            except sqlite3.OperationalError as exc:
                message = str(exc).lower()
                if "locked" not in message and "busy" not in message:
                    raise
                if time.monotonic() >= deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        conn.execute(f"PRAGMA synchronous={synchronous}")
        with immediate(conn):
            conn.execute(
                "CREATE TABLE IF NOT EXISTS threadline_schema_version (version INTEGER NOT NULL)"
            )
            (found,) = conn.execute("SELECT MAX(version) FROM threadline_schema_version").fetchone()
            _upgrade(conn, path, found)
    except sqlite3.Error as exc:
        raise SaverUnavailableError(
            f"cannot open SQLite checkpoint database {path!r}: {exc} "
            "(is it a SQLite database, and writable?)"
        ) from exc


def _upgrade(conn: sqlite3.Connection, path: str, found: int | None) -> None:
    """Create the schema in a new file, or migrate an older one to ``SCHEMA_VERSION``; refuse
    a file of a newer threadline, or another tool's tables under our names."""
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


def misuse(exc: sqlite3.Error, path: str) -> Exception | None:
    """A clear error for a caller's connection used in a way it does not allow, else None."""
    message = str(exc)
    if isinstance(exc, sqlite3.ProgrammingError) and "thread" in message:
        return ConfigError(
            f"SqliteSaver({path!r}) was used from another thread than the one that made its "
            "connection: create it with sqlite3.connect(path, check_same_thread=False) (the "
            f"saver serialises its own calls with a lock): {message}"
        )
    if "within a transaction" in message:
        return ConfigError(
            f"SqliteSaver({path!r}): its connection has a transaction open that the saver did "
            f"not start; commit or roll it back first: {message}"
        )
    return None


def not_a_connection(saver: str, given: object) -> str:
    """Why ``given`` cannot be the saver's connection."""
    kind = type(given)
    if kind.__module__.split(".")[0] == "aiosqlite":
        return (
            f"{saver} does not run on an aiosqlite connection: use "
            "AsyncSqliteSaver.from_conn_string(path) (it runs SQLite off the event loop "
            "itself), or pass sqlite3.connect(path, check_same_thread=False)"
        )
    return f"{saver} takes a sqlite3.Connection or a path, not {kind.__name__}"
