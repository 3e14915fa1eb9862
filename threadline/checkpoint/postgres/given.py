"""Connections the program made and hands to the saver, as LangGraph's docs do:
``PostgresSaver(conn)`` with a ``psycopg.Connection`` or a ``psycopg_pool.ConnectionPool``,
``AsyncPostgresSaver(conn)`` with an ``AsyncConnection`` or an ``AsyncConnectionPool``.

They stay the program's: closing the saver leaves them open. The saver needs
``autocommit=True`` on them (as LangGraph's does: it sends ``BEGIN`` / ``COMMIT`` itself) and
refuses a connection without it; it reads rows as tuples whatever their ``row_factory``, and
prepares its statements whatever their ``prepare_threshold``. One connection runs one saver
call at a time (a lock; a pool runs them side by side). With a sync connection or pool the
saver's ``a*`` methods run its sync ones on a worker thread; with an async one, sync calls are
handed to the event loop the connection belongs to (``home``, set by ``AsyncPostgresSaver``),
statement by statement (``bridge``): called on that loop's own thread they would block it
forever, so they raise.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from threadline.checkpoint.loopbound import run_on
from threadline.checkpoint.postgres.connections import (
    Connections,
    Session,
    mask_url,
    unexpected,
)
from threadline.checkpoint.postgres.driver import Batch, Op, Stmt, adrive, drive
from threadline.errors import ConfigError, SaverUnavailableError

_T = TypeVar("_T")
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
        return Connections(
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


def describe(conn: Any) -> str:
    """Where ``conn`` points, without its password, for messages and ``repr``."""
    if isinstance(conn, ConnectionPool | AsyncConnectionPool):
        return mask_url(conn.conninfo if isinstance(conn.conninfo, str) else "<pool>")
    try:
        return str(conn.info.dsn)  # libpq leaves the password out
    except psycopg.Error:
        return "<closed connection>"


class GivenConnections(Connections):
    """The saver's connections when the program gave it one connection or one pool."""

    def __init__(self, given: Any, *, schema: str, version_table: str) -> None:
        size = given.max_size if isinstance(given, ConnectionPool | AsyncConnectionPool) else 1
        super().__init__(
            describe(given),
            schema=schema,
            version_table=version_table,
            pool_size=size,
            connect_timeout=0,
            pool_timeout=getattr(given, "timeout", 0),
        )
        self.given = given
        self.is_async = isinstance(given, ASYNC_KINDS)
        self.bridged = self.is_async
        self.home: asyncio.AbstractEventLoop | None = None  # the async connection's loop
        self._one = threading.Lock()  # a lone sync connection: one call at a time
        self._aone: asyncio.Lock | None = None  # the same for a lone async connection
        self._checked = False  # tables checked for a newer threadline's version

    def close(self) -> None:
        """The connection or pool stays open (it is the program's); the saver is closed."""
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True

    # -- sync ----------------------------------------------------------------------------------

    def run(self, op: Op[_T], begin: Stmt | None) -> _T:
        if self.is_async:
            return self.bridge(self.arun(op, begin))
        return super().run(op, begin)

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        if self.is_async:
            with self._bridged_session() as session:
                yield session
            return
        try:
            if isinstance(self.given, ConnectionPool):
                conn = self._checked_out(self.given.getconn())
                try:
                    yield self._session(conn)
                finally:
                    self.given.putconn(conn)
                return
            with self._one:
                yield self._session(self._usable(self.given))
        except Exception as exc:
            raise self.mapped(exc) from exc

    def _session(self, conn: psycopg.Connection[Any]) -> Session:
        if not self._checked:
            drive(conn, self._version_op(), None)
            self._checked = True
        return Session(self, conn)

    def bridge(self, coro: Coroutine[Any, Any, _T]) -> _T:
        assert self.home is not None
        return run_on(self.home, coro, "AsyncPostgresSaver")

    @contextlib.contextmanager
    def _bridged_session(self) -> Iterator[Session]:
        """A connection of the loop held for a transaction run from another thread."""
        held = self._aheld()
        conn = self.bridge(_start(held))
        try:
            yield _BridgedSession(self, conn)
        finally:
            self.bridge(_finish(held))

    def _on_connection(self, work: Callable[[psycopg.Connection[Any]], _T]) -> _T:
        if self.is_async:
            raise ConfigError(
                f"this saver runs on an async psycopg connection ({self.masked}): call its "
                "a* methods (graph.ainvoke), or use PostgresSaver with a sync connection"
            )
        try:
            if isinstance(self.given, ConnectionPool):
                conn = self._checked_out(self.given.getconn())
                try:
                    return self._work(conn, work)
                finally:
                    self.given.putconn(conn)
            with self._one:
                return self._work(self._usable(self.given), work)
        except Exception as exc:
            mapped = self.map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc

    def _work(self, conn: psycopg.Connection[Any], work: Callable[..., _T]) -> _T:
        if not self._checked:
            drive(conn, self._version_op(), None)
            self._checked = True
        try:
            return work(conn)
        except psycopg.Error as exc:
            if unexpected(exc) and isinstance(self.given, ConnectionPool):
                conn.close()  # the pool replaces it (see ``connections.unexpected``)
            raise

    def _checked_out(self, conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        try:
            usable: psycopg.Connection[Any] = self._usable(conn)
            return usable
        except BaseException:
            self.given.putconn(conn)
            raise

    # -- async ---------------------------------------------------------------------------------

    async def arun(self, op: Op[_T], begin: Stmt | None) -> _T:
        if not self.is_async:  # a sync connection: its sync path, off the event loop
            return await asyncio.to_thread(self.run, op, begin)
        return await super().arun(op, begin)

    async def _aon_connection(
        self, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[_T]]
    ) -> _T:
        try:
            if isinstance(self.given, AsyncConnectionPool):
                conn = await self.given.getconn()
                try:
                    return await self._awork(self._usable(conn), work)
                finally:
                    await self.given.putconn(conn)
            if self._aone is None:
                self._aone = asyncio.Lock()
            async with self._aone:
                return await self._awork(self._usable(self.given), work)
        except Exception as exc:
            mapped = self.map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc

    async def _awork(
        self,
        conn: psycopg.AsyncConnection[Any],
        work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[_T]],
    ) -> _T:
        if not self._checked:
            await adrive(conn, self._version_op(), None)
            self._checked = True
        try:
            return await work(conn)
        except psycopg.Error as exc:
            if unexpected(exc) and isinstance(self.given, AsyncConnectionPool):
                await conn.close()
            raise

    async def _aheld(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """Yields a connection of the loop (checked out, or the lone one locked), held until
        the generator is resumed."""
        loop = asyncio.get_running_loop()
        got: asyncio.Future[psycopg.AsyncConnection[Any]] = loop.create_future()
        release = asyncio.Event()

        async def hold(conn: psycopg.AsyncConnection[Any]) -> None:
            got.set_result(conn)
            await release.wait()

        task = loop.create_task(self._aon_connection(hold))
        try:
            either: list[asyncio.Future[Any]] = [got, task]
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not got.done():
                task.result()  # raises why there is no connection
            yield got.result()
        finally:
            release.set()
            await task

    # -- checks --------------------------------------------------------------------------------

    def _usable(self, conn: Any) -> Any:
        """``conn`` if the saver can run on it; else a clear error."""
        if self.closed:
            raise self.closed_error()
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
        return conn

    def _version_op(self) -> Op[None]:
        """Refuse tables a newer threadline made (a URL saver checks on its first connection)."""
        (found,) = yield Batch([Stmt("SELECT to_regclass(%(t)s)", {"t": self._version_table})])
        if found.rows[0][0] is None:
            return
        (version,) = yield Batch([Stmt(f"SELECT max(version) FROM {self._version_table}")])
        self._check_version(version.rows[0][0])


async def _start(held: AsyncIterator[_T]) -> _T:
    return await anext(held)


async def _finish(held: AsyncIterator[Any]) -> None:
    with contextlib.suppress(StopAsyncIteration):
        await anext(held)


class _BridgedSession(Session):
    """A ``Session`` whose connection belongs to an event loop another thread runs."""

    db: GivenConnections

    def run(self, op: Op[_T]) -> _T:
        return self.db.bridge(self._arun(op))

    async def _arun(self, op: Op[_T]) -> _T:
        try:
            return await adrive(self.conn, op, None)
        except Exception as exc:
            raise self.db.mapped(exc) from exc
        finally:
            op.close()
