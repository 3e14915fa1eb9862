"""The server's own tables (assistants, threads, runs, stream events, API keys).

One SQL text for SQLite and PostgreSQL: statements are written with ``?`` placeholders and run
through a DB-API connection of either kind, so every records operation exists once. Calls are
synchronous and short; the app runs them in a worker thread (``Database.call``).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar
from urllib.parse import unquote, urlsplit

from threadline.errors import ConfigError

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS tl_assistants (
    assistant_id TEXT PRIMARY KEY, owner TEXT NOT NULL, graph_id TEXT NOT NULL,
    name TEXT NOT NULL, description TEXT, config TEXT NOT NULL, context TEXT NOT NULL,
    metadata TEXT NOT NULL, version INTEGER NOT NULL, created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tl_threads (
    thread_id TEXT PRIMARY KEY, owner TEXT NOT NULL, metadata TEXT NOT NULL,
    status TEXT NOT NULL, state_values TEXT, interrupts TEXT NOT NULL, error TEXT,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS tl_runs (
    run_id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, owner TEXT NOT NULL,
    assistant_id TEXT NOT NULL, status TEXT NOT NULL, kwargs TEXT NOT NULL,
    metadata TEXT NOT NULL, multitask_strategy TEXT NOT NULL, stateless INTEGER NOT NULL,
    cancel_action TEXT, start_after TEXT NOT NULL, worker TEXT, lease_until TEXT,
    attempt INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS tl_runs_by_thread ON tl_runs (thread_id, created_at);
CREATE INDEX IF NOT EXISTS tl_runs_by_status ON tl_runs (status, start_after);
CREATE UNIQUE INDEX IF NOT EXISTS tl_runs_one_running ON tl_runs (thread_id)
    WHERE status = 'running';
CREATE TABLE IF NOT EXISTS tl_events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS tl_keys (
    key_id TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, scope TEXT NOT NULL,
    name TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT);
"""


class Cursor(Protocol):
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def fetchone(self) -> Any: ...
    @property
    def rowcount(self) -> int: ...


class UniqueViolation(Exception):
    """A row broke a unique index: another worker holds the thread, or the id is taken."""


class Tx:
    """One transaction: ``?``-placeholder SQL on either database, rows as dicts."""

    def __init__(self, cursor: Cursor, postgres: bool) -> None:
        self._cursor = cursor
        self._postgres = postgres

    def run(self, sql: str, *params: Any) -> int:
        """Execute; the number of rows changed."""
        self._execute(sql, params)
        return self._cursor.rowcount

    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        self._execute(sql, params)
        return [dict(row) for row in self._cursor.fetchall()]

    def notify(self, channel: str, payload: str) -> None:
        """Tell listening processes at commit (PostgreSQL); SQLite serves one process, whose
        readers are woken by its ``EventBus``."""
        if self._postgres:
            self.run("SELECT pg_notify(?, ?)", channel, payload)

    def row(self, sql: str, *params: Any) -> dict[str, Any] | None:
        found = self.rows(sql, *params)
        return found[0] if found else None

    def _execute(self, sql: str, params: Sequence[Any]) -> None:
        if self._postgres:
            sql = sql.replace("%", "%%").replace("?", "%s")
        try:
            self._cursor.execute(sql, params)
        except sqlite3.IntegrityError as exc:
            raise UniqueViolation(str(exc)) from exc
        except Exception as exc:
            if type(exc).__name__ == "UniqueViolation":  # psycopg.errors.UniqueViolation
                raise UniqueViolation(str(exc)) from exc
            raise


class Database:
    """The server's records database: a SQLite file or a PostgreSQL database (``schema``)."""

    def __init__(self, url: str, *, schema: str = "public") -> None:
        self.url = url
        scheme = urlsplit(url).scheme.lower()
        self.postgres = scheme in ("postgres", "postgresql")
        self._lock = threading.Lock()
        if self.postgres:
            self._pool = _postgres_pool(url, schema)
        elif scheme in ("sqlite", "memory"):
            self._sqlite = _sqlite_connection(url)
        else:
            raise ConfigError(
                f"the server keeps its records in SQLite or PostgreSQL, not {scheme!r} ({url}); "
                "use a sqlite:/// or postgresql:// db URL"
            )
        with self.tx() as tx:
            if self.postgres:  # processes starting together would race on CREATE ... IF NOT EXISTS
                tx.run("SELECT pg_advisory_xact_lock(hashtext('threadline server records'))")
                tx.run(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            for statement in filter(str.strip, SCHEMA.split(";")):
                tx.run(statement)

    @contextmanager
    def tx(self) -> Iterator[Tx]:
        """A transaction, committed when the block ends without an error."""
        if self.postgres:
            with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                yield Tx(cur, True)
            return
        with self._lock:
            conn = self._sqlite
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(conn.cursor(), False)
            except BaseException:
                conn.rollback()
                raise
            conn.commit()

    def do(self, fn: Callable[[Tx], T]) -> T:
        """Run ``fn`` in one transaction."""
        with self.tx() as tx:
            return fn(tx)

    async def call(self, fn: Callable[[Tx], T]) -> T:
        """``do`` from async code, off the event loop."""
        return await asyncio.to_thread(self.do, fn)

    def close(self) -> None:
        if self.postgres:
            self._pool.close()
        else:
            self._sqlite.close()


def _sqlite_connection(url: str) -> sqlite3.Connection:
    rest = url.split("://", 1)[1]
    path = ":memory:" if rest in ("", ":memory:", "/:memory:") else unquote(rest[1:])
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    conn.row_factory = sqlite3.Row
    if path != ":memory:":
        conn.execute("PRAGMA journal_mode=WAL")
        # Records survive a process crash at every commit; a power cut may lose the last few
        # (a run's status is then settled again from its checkpoints by the lease expiry).
        conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _postgres_pool(url: str, schema: str) -> Any:
    try:
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool
    except ModuleNotFoundError as exc:  # pragma: no cover - the server extra installs it
        raise ConfigError("PostgreSQL needs psycopg: pip install 'threadline[postgres]'") from exc

    def configure(conn: Any) -> None:
        conn.execute(f'SET search_path TO "{schema}"')
        conn.commit()

    return ConnectionPool(
        url,
        min_size=1,
        max_size=8,
        kwargs={"row_factory": dict_row},
        configure=configure,
        check=ConnectionPool.check_connection,
        open=True,
    )
