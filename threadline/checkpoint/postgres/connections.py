"""Where the PostgreSQL saver's connections come from, and running operations on them.

``Connections`` runs an operation (``driver.Op``) on a connection it borrows from a pool and
gives back, sync or async, and turns driver errors into threadline's. Where the pool comes from
is a subclass's: ``Pools`` opens its own from a URL (a sync one, and one per event loop);
``given.Given`` lends the connection or pool the program made. Neither serialises calls: they
run concurrently up to ``pool_size`` connections.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import re
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from typing import Any, NamedTuple, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from threadline.checkpoint.loopbound import run_on
from threadline.checkpoint.postgres.driver import Batch, Hot, Op, Stmt, adrive, drive, execute_hot
from threadline.checkpoint.postgres.rows import put_failure
from threadline.checkpoint.postgres.schema import (
    CAS_SQLSTATE,
    MISSING_SQLSTATES,
    REFS_SQLSTATE,
    SCHEMA_VERSION,
)
from threadline.errors import SaverUnavailableError

_T = TypeVar("_T")
Held = tuple[Any, Any]  # a pool (or ``given.Lone``) and a connection checked out of it


def mask_url(url: str) -> str:
    """The URL with its password (``user:pw@`` or ``password=...``) replaced by ``***``."""
    masked = re.sub(r"(://[^:/@?#]*:)[^@/?#]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]+)", r"\1***", masked, flags=re.I)


class Connections:
    """Runs operations on borrowed connections; subclasses say where they are borrowed from.

    ``home`` is set when the connections belong to one event loop (an ``AsyncPostgresSaver``
    given an async connection or pool): sync calls are then sent to that loop (``bridge``).
    ``threaded`` when they are sync only: async calls run the sync ones on a worker thread.
    """

    home: asyncio.AbstractEventLoop | None = None
    threaded = False

    def __init__(
        self, masked: str, schema: str, version_table: str, pool_size: int, pool_timeout: float
    ) -> None:
        self.masked = masked
        self.schema = schema
        self.version_table = version_table
        self.pool_size = pool_size
        self.pool_timeout = pool_timeout
        self.secret: str | None = None  # scrubbed from error messages
        self.closed = False

    # -- where connections come from (subclasses) ----------------------------------------------

    def _sync_pool(self) -> Any:
        """The pool to borrow from (``getconn``/``putconn``); raises once closed."""
        raise NotImplementedError

    async def _async_pool(self) -> Any:
        raise NotImplementedError

    def _ready(self, conn: Any) -> None:
        """Raise if the saver cannot run on ``conn``, just checked out."""

    async def _aready(self, conn: Any) -> None:
        """Raise if the saver cannot run on ``conn``, just checked out."""

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True

    # -- running operations --------------------------------------------------------------------

    def run(self, op: Op[_T], begin: Stmt | None, held: Held | None = None) -> _T:
        """Drive ``op`` on a connection (``held``, or one borrowed for it), in a transaction
        opened with ``begin`` (None: each batch on its own, for single-statement operations)."""
        try:
            if self.home is not None:
                return self.bridge(self._aon_connection(lambda c: adrive(c, op, begin), held))
            return self._on_connection(lambda c: drive(c, op, begin), held)
        finally:
            op.close()

    async def arun(self, op: Op[_T], begin: Stmt | None) -> _T:
        if self.threaded:
            return await asyncio.to_thread(self.run, op, begin)
        try:
            return await self._aon_connection(lambda c: adrive(c, op, begin))
        finally:
            op.close()

    def run_hot(self, hot: Hot) -> None:
        """Run ``hot`` alone on a borrowed connection (see ``driver.Hot``)."""
        self._on_connection(lambda conn: execute_hot(conn, hot))

    def bridge(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Run ``coro`` on ``home``, the event loop the connections belong to."""
        assert self.home is not None
        return run_on(self.home, coro, "AsyncPostgresSaver")

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """One connection held for several operations (a transaction)."""
        try:
            held = self.bridge(self._acheckout()) if self.home else self._checkout()
        except Exception as exc:
            raise self.mapped(exc) from exc
        try:
            yield Session(self, held)
        finally:
            pool, conn = held
            if self.home is not None:
                self.bridge(pool.putconn(conn))
            else:
                pool.putconn(conn)

    def _checkout(self) -> Held:
        pool = self._sync_pool()
        conn = pool.getconn()
        try:
            self._ready(conn)
        except BaseException:
            pool.putconn(conn)
            raise
        return pool, conn

    async def _acheckout(self) -> Held:
        pool = await self._async_pool()
        conn = await pool.getconn()
        try:
            await self._aready(conn)
        except BaseException:
            await pool.putconn(conn)
            raise
        return pool, conn

    def _on_connection(self, work: Callable[[Any], _T], held: Held | None = None) -> _T:
        """``work`` on a connection; driver errors become the saver's. Not a context manager:
        this is a put's hottest path (they cost ~10 us a step)."""
        try:
            pool, conn = held or self._checkout()
            try:
                return work(conn)
            except psycopg.Error as exc:
                if unexpected(exc) and _replaceable(pool):
                    conn.close()
                raise
            finally:
                if held is None:
                    pool.putconn(conn)
        except Exception as exc:
            mapped = self.map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc

    async def _aon_connection(
        self, work: Callable[[Any], Awaitable[_T]], held: Held | None = None
    ) -> _T:
        try:
            pool, conn = held or await self._acheckout()
            try:
                return await work(conn)
            except psycopg.Error as exc:
                if unexpected(exc) and _replaceable(pool):
                    await conn.close()
                raise
            finally:
                if held is None:
                    await pool.putconn(conn)
        except Exception as exc:
            mapped = self.map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc

    def version_op(self) -> Op[None]:
        """Refuse tables a newer threadline made."""
        (found,) = yield Batch([Stmt("SELECT to_regclass(%(t)s)", {"t": self.version_table})])
        if found.rows[0][0] is None:
            return
        (version,) = yield Batch([Stmt(f"SELECT max(version) FROM {self.version_table}")])
        if version.rows[0][0] is not None and version.rows[0][0] > SCHEMA_VERSION:
            raise self.too_new(version.rows[0][0])

    # -- errors --------------------------------------------------------------------------------

    def map_error(self, exc: BaseException) -> BaseException | None:
        """The exception a driver error stands for, or None to let it through."""
        if isinstance(exc, PoolTimeout):
            return SaverUnavailableError(
                f"no PostgreSQL connection to {self.masked} became free within "
                f"{self.pool_timeout}s (pool_size={self.pool_size}): {exc}"
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

    def mapped(self, exc: Exception) -> BaseException:
        """The saver's exception for ``exc`` (itself if it stands for none)."""
        return self.map_error(exc) or exc

    def closed_error(self) -> SaverUnavailableError:
        return SaverUnavailableError(
            f"PostgresSaver({self.masked!r}, schema={self.schema!r}, closed) is closed"
        )

    def unreachable(self, exc: BaseException) -> SaverUnavailableError:
        reason = str(exc).strip() or type(exc).__name__
        if self.secret:
            reason = reason.replace(self.secret, "***")
        return SaverUnavailableError(f"cannot reach PostgreSQL at {self.masked}: {reason}")

    def too_new(self, found: int) -> SaverUnavailableError:
        return SaverUnavailableError(
            f"the PostgreSQL checkpoint tables in schema {self.schema!r} at {self.masked} have "
            f"schema version {found}: they were made by a newer threadline (this one reads up "
            f"to version {SCHEMA_VERSION}); upgrade threadline to use them"
        )


class Session(NamedTuple):
    """A connection held for a transaction: ``run`` drives operations on it, each batch of
    statements one round trip; driver errors become the saver's."""

    db: Connections
    held: Held

    def run(self, op: Op[_T]) -> _T:
        return self.db.run(op, None, self.held)


def unexpected(exc: psycopg.Error) -> bool:
    """An error other than a lost compare-and-set or missing values (which the put expects).

    After a statement fails in a pipeline, psycopg may believe statements queued behind it were
    prepared (their Parse never ran), and later uses fail with "prepared statement does not
    exist" (seen after a put on tables not set up yet): such a connection is closed, so the
    pool replaces it.
    """
    return exc.sqlstate not in (CAS_SQLSTATE, REFS_SQLSTATE)


def _replaceable(pool: Any) -> bool:
    """Whether a connection of ``pool`` may be closed (a lone connection is the program's)."""
    return isinstance(pool, ConnectionPool | AsyncConnectionPool)


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
        super().__init__(mask_url(url), schema, version_table, pool_size, pool_timeout)
        self.url = url
        try:
            self.secret = conninfo_to_dict(url).get("password")  # type: ignore[assignment]
        except Exception:
            self.secret = None
        self._connect_timeout = connect_timeout
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
        """Close the pools from async code: this loop's pool is awaited, others as in close."""
        pool, apools = self._take_pools()
        mine = apools.pop(asyncio.get_running_loop(), None)
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
            asyncio.run_coroutine_threadsafe(pool.close(), loop).result(self.pool_timeout)
        else:
            loop.run_until_complete(pool.close())
