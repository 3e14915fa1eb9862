"""Where the PostgreSQL saver's connections come from, and running operations on them.

``Connections`` runs an operation (``driver.Op``) on a connection it borrows from a pool and
gives back, sync or async, and turns driver errors into threadline's. Where the pool comes from
is a subclass's (``pools.py``): ``Pools`` opens its own from a URL, ``GivenConnections`` lends
the connection or pool the program made. Neither serialises calls: they
run concurrently up to ``pool_size`` connections.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import psycopg
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

    def run(self, op: Op[_T], begin: Stmt | None) -> _T:
        """Drive ``op`` on a borrowed connection, in a transaction opened with ``begin`` (None:
        each batch on its own, or the transaction the operation's statements open)."""
        try:
            if self.home is not None:
                return self.bridge(self._aon_connection(lambda c: adrive(c, op, begin)))
            return self._on_connection(lambda c: drive(c, op, begin))
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

    def _on_connection(self, work: Callable[[Any], _T]) -> _T:
        """``work`` on a borrowed connection; driver errors become the saver's. Not a context
        manager: this is a put's hottest path (they cost ~10 us a step)."""
        try:
            pool = self._sync_pool()
            conn = pool.getconn()
            try:
                self._ready(conn)
                return work(conn)
            except psycopg.Error as exc:
                if unexpected(exc) and _replaceable(pool):
                    conn.close()
                raise
            finally:
                pool.putconn(conn)
        except Exception as exc:
            if (mapped := self.map_error(exc)) is None:
                raise
            raise mapped from exc

    async def _aon_connection(self, work: Callable[[Any], Awaitable[_T]]) -> _T:
        try:
            pool = await self._async_pool()
            conn = await pool.getconn()
            try:
                await self._aready(conn)
                return await work(conn)
            except psycopg.Error as exc:
                if unexpected(exc) and _replaceable(pool):
                    await conn.close()
                raise
            finally:
                await pool.putconn(conn)
        except Exception as exc:
            if (mapped := self.map_error(exc)) is None:
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
