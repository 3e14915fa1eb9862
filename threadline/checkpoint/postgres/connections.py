"""Running the PostgreSQL saver's operations on connections, and its errors.

An operation (``Op``) is a generator that yields batches of statements and gets their results
back, so the same logic runs on a sync and on an async connection. A batch is sent in one round
trip, whatever its size: several statements in pipeline mode, a lone one as it is (in a pipeline
the first time a ``hot`` one goes on a connection). ``drive`` opens the transaction with the
first batch (when the operation needs one) and commits with the batch marked ``last``. Rows come
back as tuples whatever the connection's ``row_factory`` (LangGraph's docs make connections with
``dict_row``).

``Connections`` runs an operation on a connection it borrows from a pool and gives back, sync or
async, and turns driver errors into threadline's. Where the pool comes from is a subclass's
(``pools.py``): ``Pools`` opens its own from a URL, ``GivenConnections`` lends the connection or
pool the program made. Neither serialises calls: they run concurrently up to ``pool_size``
connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import psycopg
from psycopg.errors import error_from_result
from psycopg.pq import ExecStatus
from psycopg.pq.abc import PGresult
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from threadline.checkpoint.backend import HeadMoved, NotStored
from threadline.checkpoint.loopbound import run_on
from threadline.checkpoint.postgres.schema import (
    CAS_SQLSTATE,
    MISSING_SQLSTATES,
    REFS_SQLSTATE,
    SCHEMA_VERSION,
)
from threadline.errors import SaverUnavailableError

_T = TypeVar("_T")


class Stmt(NamedTuple):
    query: str
    params: Mapping[str, Any] | None = None
    # In a pipeline, server-side prepared from the first use on each connection. (Not "after
    # a few uses": psycopg loses track of a statement that becomes prepared in a pipeline that
    # fails, and later uses then fail with 'prepared statement "_pg3_N" does not exist'.)
    prepare: bool = True
    # Sent alone at almost every step (a load, the batched put): prepared even alone (see
    # ``_alone``).
    hot: bool = False


class Batch(NamedTuple):
    stmts: Sequence[Stmt]
    last: bool = True


Rows = list[tuple[Any, ...]]
Op = Generator[Batch, list[Rows], _T]  # gets the rows of each statement of the batch it yields
TUPLES_OK = ExecStatus.TUPLES_OK
FATAL_ERROR = ExecStatus.FATAL_ERROR

BEGIN_WRITE = Stmt("BEGIN")
BEGIN_READ = Stmt("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
COMMIT = Stmt("COMMIT")


def batch(*stmts: Stmt) -> Op[list[Rows]]:
    """The operation of sending ``stmts`` in one round trip."""
    results = yield Batch(stmts)
    return results


def drive(conn: psycopg.Connection[Any], op: Op[_T], begin: Stmt | None) -> _T:
    in_txn = False
    try:
        sent = next(op)
        while True:
            stmts, keep, in_txn = _frame(sent, begin, in_txn)
            sent = op.send(_exchange(conn, stmts, keep))
    except StopIteration as stop:
        if in_txn:
            conn.execute("COMMIT")
        return stop.value  # type: ignore[no-any-return]
    except BaseException:
        if not conn.closed and not conn.broken and conn.info.transaction_status != 0:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        raise


async def adrive(conn: psycopg.AsyncConnection[Any], op: Op[_T], begin: Stmt | None) -> _T:
    in_txn = False
    try:
        sent = next(op)
        while True:
            stmts, keep, in_txn = _frame(sent, begin, in_txn)
            sent = op.send(await _aexchange(conn, stmts, keep))
    except StopIteration as stop:
        if in_txn:
            await conn.execute("COMMIT")
        return stop.value  # type: ignore[no-any-return]
    except BaseException:
        if not conn.closed and not conn.broken and conn.info.transaction_status != 0:
            with contextlib.suppress(psycopg.Error):
                await conn.execute("ROLLBACK")
        raise


class Hot(NamedTuple):
    """A statement sent alone at almost every step (a put), with ``$n`` placeholders and its
    parameters already bytes (``formats``: 0 text, 1 binary).

    It runs on libpq itself (``psycopg.pq``: ``prepare`` once per connection, then
    ``exec_prepared``, which releases the GIL while it waits): psycopg's cursor layer (query
    conversion, adapters, result objects) cost a put as much client CPU as everything else it
    does, ~40 us of ~90 here. Only for statements whose result is not read. (Being one libpq
    call, a Ctrl-C during it takes effect when the statement ends, not at once.)
    """

    name: bytes
    sql: bytes
    params: Sequence[bytes]
    formats: Sequence[int]


# The ``Hot`` statements each connection has prepared (a connection dropped is forgotten).
_PREPARED: weakref.WeakKeyDictionary[psycopg.Connection[Any], set[bytes]] = (
    weakref.WeakKeyDictionary()
)
_NO_SUCH_STATEMENT = "26000"


def execute_hot(conn: psycopg.Connection[Any], hot: Hot) -> None:
    """Run ``hot`` on ``conn`` (in autocommit: its own transaction); raise its error."""
    prepared = _PREPARED.setdefault(conn, set())
    for attempt in range(2):
        if hot.name not in prepared:
            res = conn.pgconn.prepare(hot.name, hot.sql)
            if res.status == FATAL_ERROR:
                raise _error(conn, res)
            prepared.add(hot.name)
        res = conn.pgconn.exec_prepared(hot.name, hot.params, hot.formats)
        if res.status != FATAL_ERROR:
            return
        error = _error(conn, res)
        if error.sqlstate != _NO_SUCH_STATEMENT or attempt:
            raise error
        prepared.discard(hot.name)  # the server forgot it (a DISCARD ALL): prepare it again


def _error(conn: psycopg.Connection[Any], res: PGresult) -> psycopg.Error:
    """The error of a failed result. One without a SQLSTATE is the connection failing (libpq
    says so only in its message): an ``OperationalError``, as psycopg's own cursors raise."""
    error = error_from_result(res, conn.info.encoding)
    return error if error.sqlstate is not None else psycopg.OperationalError(str(error))


def _frame(batch: Batch, begin: Stmt | None, in_txn: bool) -> tuple[list[Stmt], slice, bool]:
    """The batch's statements with BEGIN / COMMIT around them as needed: the statements, where
    the batch's own results are among theirs, and whether a transaction stays open."""
    stmts = list(batch.stmts)
    skip = 0
    if begin is not None and not in_txn:
        stmts.insert(0, begin)
        skip = 1
        in_txn = True
    if in_txn and batch.last:
        stmts.append(COMMIT)
        in_txn = False
    return stmts, slice(skip, skip + len(batch.stmts)), in_txn


# The ``hot`` statements each connection has been sent (so psycopg has prepared them).
_SENT_HOT: weakref.WeakKeyDictionary[Any, set[str]] = weakref.WeakKeyDictionary()


def _alone(conn: Any, stmts: Sequence[Stmt]) -> bool:
    """Whether ``stmts`` go without a pipeline: a lone statement (cheaper in Python), unless it
    is ``hot`` (a load, the batched ``put_many``) and new on ``conn``. A hot one is prepared:
    in a pipeline the first time (outside one, preparing costs a round trip of its own), alone
    after that, which saves the server parsing and planning it every time. (A sync put alone
    runs on ``execute_hot``.)"""
    if len(stmts) != 1:
        return False
    stmt = stmts[0]
    if not stmt.hot:
        return True
    sent = _SENT_HOT.setdefault(conn, set())
    if stmt.query in sent:
        return True
    sent.add(stmt.query)
    return False


def _exchange(conn: psycopg.Connection[Any], stmts: Sequence[Stmt], keep: slice) -> list[Rows]:
    """Send ``stmts`` in one round trip (see ``_alone``); the results ``keep`` selects. In a
    pipeline, the first error is raised once the pipeline block has ended cleanly (psycopg may
    notice it while still sending)."""
    if _alone(conn, stmts):
        cur = conn.cursor(binary=True, row_factory=tuple_row)
        stmt = stmts[0]
        cur.execute(stmt.query, stmt.params, prepare=stmt.prepare and stmt.hot)
        return [cur.fetchall() if _has_rows(cur) else []][keep]
    cursors = []
    error: psycopg.Error | None = None
    try:
        with conn.pipeline():
            for stmt in stmts:
                cur = conn.cursor(binary=True, row_factory=tuple_row)
                try:
                    cur.execute(stmt.query, stmt.params, prepare=stmt.prepare)
                except psycopg.Error as exc:
                    error = exc
                    break
                cursors.append(cur)
    except psycopg.Error:
        if error is None:
            raise
    if error is not None:
        raise error
    return [c.fetchall() if _has_rows(c) else [] for c in cursors[keep]]


async def _aexchange(
    conn: psycopg.AsyncConnection[Any], stmts: Sequence[Stmt], keep: slice
) -> list[Rows]:
    if _alone(conn, stmts):
        cur = conn.cursor(binary=True, row_factory=tuple_row)
        stmt = stmts[0]
        await cur.execute(stmt.query, stmt.params, prepare=stmt.prepare and stmt.hot)
        return [await cur.fetchall() if _has_rows(cur) else []][keep]
    cursors = []
    error: psycopg.Error | None = None
    try:
        async with conn.pipeline():
            for stmt in stmts:
                cur = conn.cursor(binary=True, row_factory=tuple_row)
                try:
                    await cur.execute(stmt.query, stmt.params, prepare=stmt.prepare)
                except psycopg.Error as exc:
                    error = exc
                    break
                cursors.append(cur)
    except psycopg.Error:
        if error is None:
            raise
    if error is not None:
        raise error
    return [await c.fetchall() if _has_rows(c) else [] for c in cursors[keep]]


def _has_rows(cur: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> bool:
    """Whether the statement returned rows (``cur.description`` would tell, but builds a
    ``Column`` per column to do so)."""
    res = cur.pgresult
    return res is not None and res.status == TUPLES_OK


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
        """Run ``hot`` alone on a borrowed connection (see ``Hot``)."""
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
        if found[0][0] is None:
            return
        (version,) = yield Batch([Stmt(f"SELECT max(version) FROM {self.version_table}")])
        if version[0][0] is not None and version[0][0] > SCHEMA_VERSION:
            raise self.too_new(version[0][0])

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


def put_failure(state: str | None, detail: str | None) -> HeadMoved | NotStored | None:
    """What a put's SQLSTATE and JSON detail say went wrong: a lost compare-and-set, values
    that are not stored, or None (neither)."""
    if state not in (CAS_SQLSTATE, REFS_SQLSTATE):
        return None
    try:
        found = json.loads(detail or "null")
    except (ValueError, TypeError):
        found = None
    if state == CAS_SQLSTATE:
        return HeadMoved(found.get("actual") if isinstance(found, dict) else None)
    return NotStored([str(k) for k in found] if isinstance(found, list) else [])
