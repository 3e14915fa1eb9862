"""The PostgreSQL saver's connections: a sync pool, an async pool per event loop, the check
that the tables are not from a newer threadline, and driver errors mapped to threadline's."""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from threadline.checkpoint.postgres.driver import Hot, Op, Stmt, adrive, drive, execute_hot
from threadline.checkpoint.postgres.rows import put_failure
from threadline.checkpoint.postgres.schema import (
    CAS_SQLSTATE,
    MISSING_SQLSTATES,
    REFS_SQLSTATE,
    SCHEMA_VERSION,
)
from threadline.errors import SaverUnavailableError

_T = TypeVar("_T")

_PROBE = "SELECT to_regclass(%s)"


def mask_url(url: str) -> str:
    """The URL with its password (``user:pw@`` or ``password=...``) replaced by ``***``."""
    masked = re.sub(r"(://[^:/@?#]*:)[^@/?#]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]+)", r"\1***", masked, flags=re.I)


def password_of(url: str) -> str | None:
    """The URL's password, to scrub from error messages; None if it has none (or no parse)."""
    try:
        return conninfo_to_dict(url).get("password")  # type: ignore[return-value]
    except Exception:
        return None


# Pools a program left open, closed at exit while their worker threads can still stop: at
# interpreter teardown Python 3.13 cannot join them, and each pool would wait 5 s per thread.
_OPEN_POOLS: weakref.WeakSet[ConnectionPool] = weakref.WeakSet()


@atexit.register
def _close_open_pools() -> None:
    for pool in list(_OPEN_POOLS):
        with contextlib.suppress(Exception):
            pool.close(timeout=1.0)


class Connections:
    """The pools of one saver, opened on first use; runs operations on them.

    Neither pool serialises calls: they run concurrently up to ``pool_size`` connections.
    """

    def __init__(
        self,
        url: str,
        *,
        schema: str,
        version_table: str,
        pool_size: int,
        connect_timeout: float,
        pool_timeout: float,
    ) -> None:
        self.url = url
        self.schema = schema
        self.pool_size = pool_size
        self.masked = mask_url(url)
        self._version_table = version_table
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._secret = password_of(url)
        self._lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._apools: dict[asyncio.AbstractEventLoop, asyncio.Task[AsyncConnectionPool]] = {}
        self._closing: set[asyncio.Task[Any]] = set()
        self.closed = False

    # -- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the pools; further calls raise ``SaverUnavailableError``. Idempotent."""
        with self._lock:
            self.closed = True
            pool, self._pool = self._pool, None
            apools, self._apools = self._apools, {}
        if pool is not None:
            pool.close()
        for loop, task in apools.items():
            self._close_apool_from_sync(loop, task)

    async def aclose(self) -> None:
        """Close the pools from async code: this loop's pool is awaited, others as in close."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self.closed = True
            pool, self._pool = self._pool, None
            apools, self._apools = self._apools, {}
        mine = apools.pop(loop, None)
        if mine is not None:
            apool: AsyncConnectionPool | None = None
            with contextlib.suppress(Exception):
                apool = await mine
            if apool is not None:
                await apool.close()
        if pool is not None:
            await asyncio.to_thread(pool.close)
        for other, task in apools.items():
            self._close_apool_from_sync(other, task)

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
            asyncio.run_coroutine_threadsafe(pool.close(), loop).result(self._pool_timeout)
        else:
            loop.run_until_complete(pool.close())

    # -- connections ---------------------------------------------------------------------------

    def _pool_kwargs(self) -> dict[str, Any]:
        return {
            "conninfo": self.url,
            "min_size": 1,
            "max_size": self.pool_size,
            # BEGIN / COMMIT travel in the pipeline with the statements they wrap.
            "kwargs": {"autocommit": True},
            "timeout": self._pool_timeout,
            "name": f"threadline-{self.schema}",
            "open": False,
        }

    def closed_error(self) -> SaverUnavailableError:
        return SaverUnavailableError(
            f"PostgresSaver({self.masked!r}, schema={self.schema!r}, closed) is closed"
        )

    def unreachable(self, exc: BaseException) -> SaverUnavailableError:
        reason = str(exc).strip() or type(exc).__name__
        if self._secret:
            reason = reason.replace(self._secret, "***")
        return SaverUnavailableError(f"cannot reach PostgreSQL at {self.masked}: {reason}")

    def _connect_kwargs(self) -> dict[str, Any]:
        return {"autocommit": True, "connect_timeout": max(1, round(self._connect_timeout))}

    def _check_version(self, found: Any) -> None:
        if found is not None and found > SCHEMA_VERSION:
            raise self.too_new(found)

    def _sync_pool(self) -> ConnectionPool:
        pool = self._pool
        if pool is not None:
            return pool
        with self._lock:
            if self.closed:
                raise self.closed_error()
            if self._pool is None:
                # A first direct connection gives a clear error (the pool would only time out)
                # and checks that the tables are not from a newer threadline.
                try:
                    with psycopg.connect(self.url, **self._connect_kwargs()) as conn:
                        exists = conn.execute(_PROBE, [self._version_table]).fetchone()
                        if exists and exists[0] is not None:
                            row = conn.execute(
                                f"SELECT max(version) FROM {self._version_table}"
                            ).fetchone()
                            self._check_version(row[0] if row else None)
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
                cur = await conn.execute(_PROBE, [self._version_table])
                exists = await cur.fetchone()
                if exists and exists[0] is not None:
                    cur = await conn.execute(f"SELECT max(version) FROM {self._version_table}")
                    row = await cur.fetchone()
                    self._check_version(row[0] if row else None)
        except psycopg.Error as exc:
            raise self.unreachable(exc) from exc
        pool = AsyncConnectionPool(**self._pool_kwargs())
        try:
            await pool.open(wait=True, timeout=self._connect_timeout)
        except PoolTimeout as exc:
            await pool.close()
            raise self.unreachable(exc) from exc
        return pool

    def map_error(self, exc: BaseException) -> BaseException | None:
        """The exception a driver error stands for, or None to let it through."""
        if isinstance(exc, PoolTimeout):
            return SaverUnavailableError(
                f"no PostgreSQL connection to {self.masked} became free within "
                f"{self._pool_timeout}s (pool_size={self.pool_size}): {exc}"
            )
        if not isinstance(exc, psycopg.Error):
            return None
        state = exc.sqlstate
        failure = put_failure(state, exc.diag.message_detail)
        if failure is not None:
            return failure
        if state in MISSING_SQLSTATES:
            return SaverUnavailableError(
                f"the PostgreSQL checkpoint tables are missing in schema {self.schema!r} at "
                f"{self.masked} ({str(exc).strip()}); call saver.setup() first"
            )
        if isinstance(exc, psycopg.OperationalError) and (
            state is None or state.startswith("08") or state.startswith("57P")
        ):
            return self.unreachable(exc)
        return None

    # -- running operations --------------------------------------------------------------------

    def run(self, op: Op[_T], begin: Stmt | None) -> _T:
        """Drive ``op`` on a pooled connection, in a transaction opened with ``begin`` (None:
        each batch on its own, for single-statement operations)."""
        try:
            return self._on_connection(lambda conn: drive(conn, op, begin))
        finally:
            op.close()

    def run_hot(self, hot: Hot) -> None:
        """Run ``hot`` alone on a pooled connection (see ``driver.Hot``)."""
        self._on_connection(lambda conn: execute_hot(conn, hot))

    bridged = False  # sync calls run on an event loop's connection (``given.py``)

    def bridge(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on the event loop the connections belong to (``bridged`` only)."""
        coro.close()
        raise NotImplementedError

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """One pooled connection for several operations (a transaction: ``Session``)."""
        try:
            pool = self._sync_pool()
            conn = pool.getconn()
        except Exception as exc:
            raise self.mapped(exc) from exc
        try:
            yield Session(self, conn)
        finally:
            pool.putconn(conn)

    def mapped(self, exc: Exception) -> BaseException:
        """The saver's exception for ``exc`` (itself if it stands for none)."""
        return self.map_error(exc) or exc

    def _on_connection(self, work: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        """``work`` on a pooled connection; driver errors become the saver's."""
        try:
            pool = self._sync_pool()
            conn = pool.getconn()  # not ``pool.connection()``: ``drive`` commits, and this is
            try:  # a put's hottest path (the context managers cost ~10 us a step)
                return work(conn)
            except psycopg.Error as exc:
                if unexpected(exc):
                    conn.close()
                raise
            finally:
                pool.putconn(conn)
        except Exception as exc:
            mapped = self.map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc

    async def arun(self, op: Op[_T], begin: Stmt | None) -> _T:
        try:
            return await self._aon_connection(lambda conn: adrive(conn, op, begin))
        finally:
            op.close()

    async def _aon_connection(
        self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[_T]]
    ) -> _T:
        """``work`` on a connection of this event loop's pool; driver errors become the
        saver's."""
        try:
            pool = await self._async_pool()
            conn = await pool.getconn()
            try:
                return await work(conn)
            except psycopg.Error as exc:
                if unexpected(exc):
                    await conn.close()
                raise
            finally:
                await pool.putconn(conn)
        except Exception as exc:
            mapped = self.map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc

    def too_new(self, found: int) -> SaverUnavailableError:
        return SaverUnavailableError(
            f"the PostgreSQL checkpoint tables in schema {self.schema!r} at {self.masked} have "
            f"schema version {found}: they were made by a newer threadline (this one reads up "
            f"to version {SCHEMA_VERSION}); upgrade threadline to use them"
        )


class Session:
    """A connection held for a transaction: ``run`` drives operations on it, each batch of
    statements one round trip; driver errors become the saver's."""

    def __init__(self, db: Connections, conn: Any) -> None:
        self.db = db
        self.conn = conn

    def run(self, op: Op[_T]) -> _T:
        try:
            return drive(self.conn, op, None)
        except Exception as exc:
            if isinstance(exc, psycopg.Error) and unexpected(exc):
                self.conn.close()  # the pool replaces it (see ``unexpected``)
            raise self.db.mapped(exc) from exc
        finally:
            op.close()


def unexpected(exc: psycopg.Error) -> bool:
    """An error other than a lost compare-and-set or missing values (which the put expects).

    After a statement fails in a pipeline, psycopg may believe statements queued behind it were
    prepared (their Parse never ran), and later uses fail with "prepared statement does not
    exist" (seen after a put on tables not set up yet): such a connection is closed, so the
    pool replaces it.
    """
    return exc.sqlstate not in (CAS_SQLSTATE, REFS_SQLSTATE)
