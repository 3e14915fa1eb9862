"""Where the saver's connections come from: pools it opens from a URL (``Pools``), or the
connection or pool the program made and hands to the saver, as LangGraph's docs do
(``GivenConnections``):
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
import atexit
import contextlib
import threading
import weakref
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from threadline.checkpoint.postgres.connections import Connections, adrive, drive, mask_url
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
        return Pools(conn, schema, version_table, options)
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
        self.threaded = not isinstance(given, ASYNC_KINDS)
        if not self.threaded:
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


# Pools a program left open, closed at exit while their worker threads can still stop: at
# interpreter teardown Python 3.13 cannot join them, and each pool would wait 5 s per thread.
_OPEN_POOLS: weakref.WeakSet[ConnectionPool] = weakref.WeakSet()


@atexit.register
def _close_open_pools() -> None:
    for pool in list(_OPEN_POOLS):
        with contextlib.suppress(Exception):
            pool.close(timeout=1.0)


class Pools(Connections):
    """The pools of one saver, opened from its URL on first use: a sync one, and one per event
    loop. The first connection of each is made directly, which gives a clear error (the pool
    would only time out) and checks that the tables are not from a newer threadline."""

    def __init__(self, url: str, schema: str, version_table: str, options: dict[str, Any]) -> None:
        size, timeout = int(options["pool_size"]), float(options["pool_timeout"])
        super().__init__(mask_url(url), schema, version_table, size, timeout)
        self.url = url
        try:
            self.secret = conninfo_to_dict(url).get("password")  # type: ignore[assignment]
        except Exception:
            self.secret = None
        self._connect_timeout = float(options["connect_timeout"])
        self._lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._apools: dict[asyncio.AbstractEventLoop, asyncio.Task[AsyncConnectionPool]] = {}
        self._closing: set[asyncio.Task[Any]] = set()

    def _pool_kwargs(self) -> dict[str, Any]:
        return {
            "conninfo": self.url,
            "min_size": 1,
            "max_size": self.pool_size,
            # BEGIN / COMMIT travel in the pipeline with the statements they wrap.
            "kwargs": {"autocommit": True},
            "timeout": self.pool_timeout,
            "name": f"threadline-{self.schema}",
            "open": False,
        }

    def _connect_kwargs(self) -> dict[str, Any]:
        return {"autocommit": True, "connect_timeout": max(1, round(self._connect_timeout))}

    def _sync_pool(self) -> ConnectionPool:
        pool = self._pool
        if pool is not None:
            return pool
        with self._lock:
            if self.closed:
                raise self.closed_error()
            if self._pool is None:
                try:
                    with psycopg.connect(self.url, **self._connect_kwargs()) as conn:
                        drive(conn, self.version_op(), None)
                except psycopg.Error as exc:
                    raise self.unreachable(exc) from exc
                pool = ConnectionPool(**self._pool_kwargs())
                try:
                    pool.open(wait=True, timeout=self._connect_timeout)
                except PoolTimeout as exc:
                    pool.close()
                    raise self.unreachable(exc) from exc
                self._pool = pool
                _OPEN_POOLS.add(pool)
            return self._pool

    async def _async_pool(self) -> AsyncConnectionPool:
        """This event loop's pool, opened by the first call made on the loop."""
        loop = asyncio.get_running_loop()
        task = self._apools.get(loop)
        if task is None:
            with self._lock:
                if self.closed:
                    raise self.closed_error()
                task = self._apools.get(loop)
                if task is None:
                    for other in [lp for lp in self._apools if lp.is_closed()]:
                        del self._apools[other]  # left behind by a finished asyncio.run()
                    task = loop.create_task(self._open_async_pool())
                    self._apools[loop] = task
        try:
            return await asyncio.shield(task)
        except BaseException:
            if task.done():
                with self._lock:
                    if self._apools.get(loop) is task:
                        del self._apools[loop]  # let the next call try again
            raise

    async def _open_async_pool(self) -> AsyncConnectionPool:
        try:
            conn = await psycopg.AsyncConnection.connect(self.url, **self._connect_kwargs())
            async with conn:
                await adrive(conn, self.version_op(), None)
        except psycopg.Error as exc:
            raise self.unreachable(exc) from exc
        pool = AsyncConnectionPool(**self._pool_kwargs())
        try:
            await pool.open(wait=True, timeout=self._connect_timeout)
        except PoolTimeout as exc:
            await pool.close()
            raise self.unreachable(exc) from exc
        return pool

    def _take_pools(self) -> tuple[ConnectionPool | None, dict[Any, Any]]:
        with self._lock:
            self.closed = True
            pool, self._pool = self._pool, None
            apools, self._apools = self._apools, {}
        return pool, apools

    def close(self) -> None:
        """Close the pools; further calls raise ``SaverUnavailableError``. Idempotent."""
        pool, apools = self._take_pools()
        if pool is not None:
            pool.close()
        for loop, task in apools.items():
            self._close_apool_from_sync(loop, task)

    async def aclose(self) -> None:
        """Close the pools from async code: ``close`` on a worker thread, so that this event
        loop, free meanwhile, closes its own pool (once it has opened, if it is opening)."""
        opening = self._apools.get(asyncio.get_running_loop())
        if opening is not None:
            await asyncio.wait([opening])
        await asyncio.to_thread(self.close)

    def _close_apool_from_sync(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[AsyncConnectionPool]
    ) -> None:
        if loop.is_closed():
            return  # its connections close when they are collected
        if not task.done():
            loop.call_soon_threadsafe(task.cancel)
            return
        if task.cancelled() or task.exception() is not None:
            return
        pool = task.result()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # close() called from async code on that loop: finish in the loop
            closing = loop.create_task(pool.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        elif loop.is_running():
            asyncio.run_coroutine_threadsafe(pool.close(), loop).result(self.pool_timeout)
        else:
            loop.run_until_complete(pool.close())
