"""The SQLite saver's connection: one it opens on a path, or one the caller made and keeps.

A caller's ``sqlite3.Connection`` (LangGraph's ``SqliteSaver(sqlite3.connect(...))``) is used as
it is, with three settings the saver needs made on it: WAL mode (stored in the file, as
LangGraph's saver also sets; an in-memory database keeps its own journal), ``synchronous`` and,
if ``timeout`` is given, the busy timeout. The saver issues ``BEGIN`` / ``COMMIT`` itself, so
the connection must not hold a transaction of its own: Python's default (legacy) transaction
control and ``autocommit=True`` work; ``autocommit=False`` (Python 3.12+), which always keeps
a transaction open, is refused. Rows are read by position, so ``row_factory`` must be ``None``
or ``sqlite3.Row``, and ``text_factory`` ``str``. The saver serialises its own calls with a
lock and makes them from other threads too (an ``ainvoke``, ``durability="async"``): create the
connection with ``check_same_thread=False``. Code of yours sharing the connection must not use
it while a saver call runs (take no lock of the saver's: use the connection from one thread, or
give the saver its own).
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any

from threadline.checkpoint.sqlite.migration import prepare
from threadline.errors import ConfigError, SaverUnavailableError

# What each ``synchronous`` level guarantees in WAL mode (docs/storage.md): "normal" keeps every
# committed checkpoint through a process crash, but a power loss or OS crash may lose the last
# commits (never corrupting the file); "full" syncs the WAL at each commit, so a committed
# checkpoint survives a power loss too, at the cost of one fsync per put.
SYNCHRONOUS = ("normal", "full")
DEFAULT_TIMEOUT = 30.0  # seconds a connection the saver opens waits for another's write lock


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
    _prepare(conn, path, wait, synchronous, close=True)
    return conn


def adopt(conn: sqlite3.Connection, timeout: float | None, synchronous: str) -> str:
    """Check and prepare a caller's connection; returns the path of its main database."""
    _check_usable(conn)
    try:
        rows = conn.execute("PRAGMA database_list").fetchall()
        path = next((row[2] for row in rows if row[1] == "main"), "") or ":memory:"
        if timeout is not None:
            conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        (busy_ms,) = conn.execute("PRAGMA busy_timeout").fetchone()
    except sqlite3.ProgrammingError as exc:
        raise ConfigError(f"SqliteSaver cannot use the connection it was given: {exc}") from exc
    _prepare(conn, path, busy_ms / 1000, synchronous, close=False)
    return str(path)


def _check_usable(conn: sqlite3.Connection) -> None:
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


def _prepare(
    conn: sqlite3.Connection, path: str, timeout: float, synchronous: str, *, close: bool
) -> None:
    try:
        prepare(conn, path, timeout, synchronous)
    except sqlite3.Error as exc:
        if close:
            conn.close()
        raise SaverUnavailableError(
            f"cannot open SQLite checkpoint database {path!r}: {exc} "
            "(is it a SQLite database, and writable?)"
        ) from exc
    except BaseException:
        if close:
            conn.close()
        raise


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
