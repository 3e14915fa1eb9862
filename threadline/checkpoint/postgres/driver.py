"""Running an operation: a generator that yields batches of statements and gets their results
back, so the same logic runs on a sync and on an async connection.

A batch is sent in one round trip, whatever its size: several statements in pipeline mode, a
lone one as it is (in a pipeline the first time a ``hot`` one goes on a connection). The driver
opens the transaction with the first batch (when the operation needs one) and commits with the
batch marked ``last``. Rows come back as tuples whatever the connection's ``row_factory``
(LangGraph's docs make connections with ``dict_row``).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Generator, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

import psycopg
from psycopg.errors import error_from_result
from psycopg.pq import ExecStatus
from psycopg.pq.abc import PGresult
from psycopg.rows import tuple_row

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


class Result(NamedTuple):
    rowcount: int
    rows: list[tuple[Any, ...]]


class Batch(NamedTuple):
    stmts: Sequence[Stmt]
    last: bool = True


Op = Generator[Batch, list[Result], _T]
TUPLES_OK = ExecStatus.TUPLES_OK
FATAL_ERROR = ExecStatus.FATAL_ERROR

BEGIN_WRITE = Stmt("BEGIN")
BEGIN_READ = Stmt("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
COMMIT = Stmt("COMMIT")


def batch(*stmts: Stmt) -> Op[list[Result]]:
    """The operation of sending ``stmts`` in one round trip."""
    results = yield Batch(stmts)
    return results


def drive(conn: psycopg.Connection[Any], op: Op[_T], begin: Stmt | None) -> _T:
    in_txn = False
    try:
        batch = next(op)
        while True:
            stmts, keep, in_txn = _frame(batch, begin, in_txn)
            batch = op.send(_exchange(conn, stmts, keep))
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
        batch = next(op)
        while True:
            stmts, keep, in_txn = _frame(batch, begin, in_txn)
            batch = op.send(await _aexchange(conn, stmts, keep))
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


def _exchange(conn: psycopg.Connection[Any], stmts: Sequence[Stmt], keep: slice) -> list[Result]:
    """Send ``stmts`` in one round trip (see ``_alone``); the results ``keep`` selects. In a
    pipeline, the first error is raised once the pipeline block has ended cleanly (psycopg may
    notice it while still sending)."""
    if _alone(conn, stmts):
        cur = conn.cursor(binary=True, row_factory=tuple_row)
        stmt = stmts[0]
        cur.execute(stmt.query, stmt.params, prepare=stmt.prepare and stmt.hot)
        return [Result(cur.rowcount, cur.fetchall() if _has_rows(cur) else [])][keep]
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
    return [Result(c.rowcount, c.fetchall() if _has_rows(c) else []) for c in cursors[keep]]


async def _aexchange(
    conn: psycopg.AsyncConnection[Any], stmts: Sequence[Stmt], keep: slice
) -> list[Result]:
    if _alone(conn, stmts):
        cur = conn.cursor(binary=True, row_factory=tuple_row)
        stmt = stmts[0]
        await cur.execute(stmt.query, stmt.params, prepare=stmt.prepare and stmt.hot)
        return [Result(cur.rowcount, await cur.fetchall() if _has_rows(cur) else [])][keep]
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
    return [Result(c.rowcount, await c.fetchall() if _has_rows(c) else []) for c in cursors[keep]]


def _has_rows(cur: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> bool:
    """Whether the statement returned rows (``cur.description`` would tell, but builds a
    ``Column`` per column to do so)."""
    res = cur.pgresult
    return res is not None and res.status == TUPLES_OK
