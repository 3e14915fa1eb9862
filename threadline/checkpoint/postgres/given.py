"""Connections the program made and hands to the saver, as LangGraph's docs do:
``PostgresSaver(conn)`` with a ``psycopg.Connection`` or a ``psycopg_pool.ConnectionPool``,
``AsyncPostgresSaver(conn)`` with an ``AsyncConnection`` or an ``AsyncConnectionPool``.

They stay the program's: closing the saver leaves them open. The saver needs
``autocommit=True`` on them (as LangGraph's does: it sends ``BEGIN`` / ``COMMIT`` itself) and
refuses a connection without it; it reads rows as tuples whatever their ``row_factory``, and
prepares its statements whatever their ``prepare_threshold``. One connection runs one saver
call at a time (a lock; a pool runs them side by side). With a sync connection or pool the
saver's ``a*`` methods run its sync ones on a worker thread; with an async one, sync calls are
handed to the event loop the saver was made in (``Connections.home``), statement by statement:
called on that loop's own thread they would block it forever, so they raise.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from threadline.checkpoint.postgres.connections import Connections, Pools, mask_url
from threadline.checkpoint.postgres.driver import adrive, drive
from threadline.errors import ConfigError, SaverUnavailableError

Given = (
    psycopg.Connection[Any]
    | ConnectionPool[Any]
    | psycopg.AsyncConnection[Any]
    | AsyncConnectionPool[Any]
)
SYNC_KINDS = (psycopg.Connection, ConnectionPool)
ASYNC_KINDS = (psycopg.AsyncConnection, AsyncConnectionPool)
_POOL_DEFAULTS = {"pool_size": 10, "connect_timeout": 10.0, "pool_timeout": 30.0}


def connections_for(
    saver: str, conn: Any, schema: str, version_table: str, pools: dict[str, Any]
) -> Connections:
    """The connections of a saver given ``conn``: pools it opens from a URL, or the
    connection or pool the program made. ``pools`` (``pool_size``, ``connect_timeout``,
    ``pool_timeout``; ``None`` when not passed) apply only to a URL's pools."""
    if isinstance(conn, str):
        options = {k: _POOL_DEFAULTS[k] if v is None else v for k, v in pools.items()}
        if options["pool_size"] < 1:
            raise ValueError(f"{saver} pool_size must be at least 1")
        return Pools(
            conn,
            schema=schema,
            version_table=version_table,
            pool_size=int(options["pool_size"]),
            connect_timeout=float(options["connect_timeout"]),
            pool_timeout=float(options["pool_timeout"]),
        )
    if not isinstance(conn, SYNC_KINDS + ASYNC_KINDS):
        raise ConfigError(
            f"{saver} takes a PostgreSQL URL, a psycopg Connection or a psycopg_pool "
            f"ConnectionPool (AsyncPostgresSaver also their async kinds), not {type(conn).__name__}"
        )
    passed = sorted(k for k, v in pools.items() if v is not None)
    if passed:
        raise ConfigError(
            f"{saver}: {', '.join(passed)} apply to the pools the saver opens from a URL; "
            "it was given a connection or pool of yours: size and time that one instead"
        )
    if isinstance(conn, ASYNC_KINDS) and saver == "PostgresSaver":
        raise ConfigError(
            "PostgresSaver was given an async psycopg connection or pool: use "
            "AsyncPostgresSaver (from threadline.checkpoint.postgres.aio) for those"
        )
    return GivenConnections(conn, schema=schema, version_table=version_table)


class Lone:
    """A lone connection lent as a pool of one: one saver call at a time."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.lock = threading.Lock()

    def getconn(self) -> Any:
        self.lock.acquire()
        return self.conn

    def putconn(self, conn: Any) -> None:
        self.lock.release()


class AsyncLone:
    """A lone async connection lent as a pool of one: one saver call at a time."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.lock = asyncio.Lock()

    async def getconn(self) -> Any:
        await self.lock.acquire()
        return self.conn

    async def putconn(self, conn: Any) -> None:
        self.lock.release()


class GivenConnections(Connections):
    """The saver's connections when the program gave it one connection or one pool."""

    def __init__(self, given: Any, *, schema: str, version_table: str) -> None:
        is_pool = isinstance(given, ConnectionPool | AsyncConnectionPool)
        if is_pool:
            where = mask_url(given.conninfo if isinstance(given.conninfo, str) else "<pool>")
        else:
            try:
                where = str(given.info.dsn)  # libpq leaves the password out
            except psycopg.Error:
                where = "<closed connection>"
        size = given.max_size if is_pool else 1
        super().__init__(where, schema, version_table, size, getattr(given, "timeout", 0))
        self.is_async = isinstance(given, ASYNC_KINDS)
        self.threaded = not self.is_async
        if self.is_async:
            try:
                self.home = asyncio.get_running_loop()
            except RuntimeError:
                raise ConfigError(
                    "AsyncPostgresSaver over an async connection or pool must be made inside "
                    "the event loop that connection belongs to (in an async function)"
                ) from None
            self._pool: Any = given if is_pool else AsyncLone(given)
        else:
            self._pool = given if is_pool else Lone(given)
        self._checked = False  # tables checked for a newer threadline's version

    def _sync_pool(self) -> Any:
        if self.closed:
            raise self.closed_error()
        return self._pool

    async def _async_pool(self) -> Any:
        return self._sync_pool()

    def _ready(self, conn: Any) -> None:
        self._usable(conn)
        if not self._checked:
            drive(conn, self.version_op(), None)
            self._checked = True

    async def _aready(self, conn: Any) -> None:
        self._usable(conn)
        if not self._checked:
            await adrive(conn, self.version_op(), None)
            self._checked = True

    def _usable(self, conn: Any) -> None:
        if conn.closed:
            raise SaverUnavailableError(
                f"the psycopg connection given to the saver ({self.masked}) is closed"
            )
        if not conn.autocommit:
            raise ConfigError(
                "PostgresSaver needs its psycopg connections in autocommit mode (it sends "
                "BEGIN/COMMIT itself), as LangGraph's does: connect with autocommit=True, "
                "or give a pool kwargs={'autocommit': True}"
            )
