"""Where checkpoints go: one table, one entry per backend, one opener per library.

Adding a backend is one entry in ``BACKENDS``. Each opener is a context manager that yields a
fresh, empty ``Store`` (a new SQLite file, a new PostgreSQL schema, fresh Redis keys) and removes
it afterwards, so byte counts only ever see one workload's data.

threadline's PostgreSQL and Redis savers will be reached through
``threadline.checkpoint.from_url(url)``; until that function exists those entries report
"unavailable" instead of failing, and they start measuring as soon as it lands.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

DEFAULT_PG_URL = "postgresql://root@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/14"


class BackendUnavailable(RuntimeError):
    """This library has no saver for this backend (yet), or the server is not reachable."""


@dataclass
class Env:
    """Where the suite may put data: a temp dir, a PostgreSQL database, a Redis database."""

    tmpdir: str
    pg_url: str = field(default_factory=lambda: os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL))
    redis_url: str = field(
        default_factory=lambda: os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS_URL)
    )
    _counter: Iterator[int] = field(default_factory=itertools.count)

    def unique(self, prefix: str) -> str:
        return f"{prefix}_{os.getpid()}_{next(self._counter)}"

    def sqlite_path(self) -> str:
        return os.path.join(self.tmpdir, self.unique("bench") + ".sqlite")


@dataclass
class Store:
    """An open saver plus what the suite needs to look inside its storage."""

    saver: Any
    backend: str
    bytes_stored: Callable[[], int] | None = None  # storage used now, in bytes
    sqlite_conn: sqlite3.Connection | None = None  # the saver's own connection (commit counting)


@dataclass
class Opener:
    """How one library opens one backend: ``open`` for sync runs, ``aopen`` for asyncio runs."""

    open: Callable[[Env], contextlib.AbstractContextManager[Store]]
    aopen: Callable[[Env], contextlib.AbstractAsyncContextManager[Store]] | None = None

    def async_open(self, env: Env) -> contextlib.AbstractAsyncContextManager[Store]:
        if self.aopen is not None:
            return self.aopen(env)
        return _async_wrap(self.open(env))  # the same saver serves both APIs


@contextlib.asynccontextmanager
async def _async_wrap(cm: contextlib.AbstractContextManager[Store]) -> AsyncIterator[Store]:
    with cm as store:
        yield store


# ------------------------------------------------------------------------------ storage probes


def sqlite_bytes(path: str) -> int:
    """File size after folding the WAL into the main file (``wal_checkpoint(TRUNCATE)``)."""
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    total = os.path.getsize(path)
    for suffix in ("-wal", "-journal"):
        if os.path.exists(path + suffix):
            total += os.path.getsize(path + suffix)
    return total


def _remove_sqlite(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


def _with_search_path(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options=-csearch_path%3D{schema}"


@contextlib.contextmanager
def pg_schema(env: Env) -> Iterator[tuple[str, Callable[[], int], str]]:
    """A fresh schema; yields a URL whose search_path is that schema, a size probe, its name."""
    try:
        import psycopg
    except ImportError as exc:
        raise BackendUnavailable(f"psycopg is not installed: {exc}") from exc
    schema = env.unique("tlbench")
    try:
        admin = psycopg.connect(env.pg_url, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        raise BackendUnavailable(f"PostgreSQL at {env.pg_url} is not reachable: {exc}") from exc
    with admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')

        def size() -> int:
            # Tables + their indexes + TOAST (pg_total_relation_size), 8 KiB-page granular.
            row = admin.execute(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r'",
                (schema,),
            ).fetchone()
            return int(row[0])

        try:
            yield _with_search_path(env.pg_url, schema), size, schema
        finally:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.contextmanager
def redis_keys(env: Env) -> Iterator[tuple[str, Callable[[], int], None]]:
    """The Redis database of ``env.redis_url``; measures and deletes only keys made meanwhile."""
    try:
        import redis
    except ImportError as exc:
        raise BackendUnavailable(f"redis-py is not installed: {exc}") from exc
    client = redis.Redis.from_url(env.redis_url, socket_connect_timeout=5)
    try:
        before = set(client.scan_iter(count=1000))
    except redis.ConnectionError as exc:
        raise BackendUnavailable(f"Redis at {env.redis_url} is not reachable: {exc}") from exc

    def new_keys() -> list[bytes]:
        return [k for k in client.scan_iter(count=1000) if k not in before]

    def size() -> int:
        return sum(client.memory_usage(k) or 0 for k in new_keys())

    try:
        yield env.redis_url, size, None
    finally:
        keys = new_keys()
        for i in range(0, len(keys), 500):
            client.delete(*keys[i : i + 500])
        client.close()


# ------------------------------------------------------------------------------ threadline


@contextlib.contextmanager
def _tl_none(env: Env) -> Iterator[Store]:
    yield Store(None, "none")


@contextlib.contextmanager
def _tl_memory(env: Env) -> Iterator[Store]:
    from threadline.checkpoint import InMemorySaver

    yield Store(InMemorySaver(), "memory")


def _tl_sqlite(synchronous: str) -> Opener:
    """threadline's SQLite saver at a ``synchronous`` level (LangGraph's keeps SQLite's
    default, FULL, so "sqlite-full" compares the same durability)."""
    return Opener(lambda env: _tl_sqlite_at(env, synchronous))


@contextlib.contextmanager
def _tl_sqlite_at(env: Env, synchronous: str) -> Iterator[Store]:
    from threadline.checkpoint import SqliteSaver

    path = env.sqlite_path()
    saver = SqliteSaver(path, synchronous=synchronous)
    try:
        # ``_conn`` is private; it is read only to count commits (see docs/performance.md).
        conn = getattr(saver, "_conn", None)
        yield Store(saver, "sqlite", lambda: sqlite_bytes(path), conn)
    finally:
        saver.close()
        _remove_sqlite(path)


def folder_bytes(path: str) -> int:
    """Bytes of every file under ``path`` (their sizes, not the blocks they occupy)."""
    return sum(
        os.path.getsize(os.path.join(root, name))
        for root, _, names in os.walk(path)
        for name in names
    )


@contextlib.contextmanager
def _tl_files(env: Env) -> Iterator[Store]:
    from threadline.checkpoint import FileSaver

    path = os.path.join(env.tmpdir, env.unique("files"))
    try:
        yield Store(FileSaver(path), "files", lambda: folder_bytes(path))
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _tl_url_saver(kind: str, url: str, schema: str | None) -> Any:
    from_url = _threadline_from_url(kind)
    options = {"schema": schema} if schema else {}
    try:
        return from_url(url, **options)  # sets the saver up (creates tables) before returning it
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("threadline."):
            raise BackendUnavailable(f"threadline has no {kind} saver yet: {exc}") from exc
        raise


def _tl_storage(kind: str, env: Env) -> contextlib.AbstractContextManager[tuple[str, Any, Any]]:
    return pg_schema(env) if kind == "postgres" else redis_keys(env)


def _tl_from_url(kind: str) -> Opener:
    """threadline's saver for a URL; PostgreSQL tables go in a fresh schema (``schema=``)."""

    @contextlib.contextmanager
    def open_(env: Env) -> Iterator[Store]:
        with _tl_storage(kind, env) as (url, size, schema):
            saver = _tl_url_saver(kind, url, schema)
            try:
                yield Store(saver, kind, size)
            finally:
                saver.close()

    @contextlib.asynccontextmanager
    async def aopen(env: Env) -> AsyncIterator[Store]:
        with _tl_storage(kind, env) as (url, size, schema):
            saver = _tl_url_saver(kind, url, schema)
            try:
                yield Store(saver, kind, size)
            finally:
                aclose = getattr(saver, "aclose", None)
                if aclose is not None:
                    await aclose()  # its async pool lives on this loop
                else:
                    saver.close()

    return Opener(open_, aopen)


def _threadline_from_url(kind: str) -> Callable[[str], Any]:
    try:
        from threadline.checkpoint import from_url
    except ImportError:
        try:  # where it lives before the package exports it
            from threadline.checkpoint.urls import from_url
        except ImportError as exc:
            raise BackendUnavailable(
                f"threadline.checkpoint.from_url does not exist yet (no threadline {kind} saver)"
            ) from exc
    return from_url


# ------------------------------------------------------------------------------ LangGraph


@contextlib.contextmanager
def _lg_none(env: Env) -> Iterator[Store]:
    yield Store(None, "none")


@contextlib.contextmanager
def _lg_memory(env: Env) -> Iterator[Store]:
    from langgraph.checkpoint.memory import InMemorySaver

    yield Store(InMemorySaver(), "memory")


@contextlib.contextmanager
def _lg_sqlite(env: Env) -> Iterator[Store]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    path = env.sqlite_path()
    # What SqliteSaver.from_conn_string does; we keep the connection to count commits.
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()
        yield Store(saver, "sqlite", lambda: sqlite_bytes(path), conn)
    finally:
        conn.close()
        _remove_sqlite(path)


@contextlib.asynccontextmanager
async def _lg_sqlite_async(env: Env) -> AsyncIterator[Store]:
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    path = env.sqlite_path()
    try:
        async with AsyncSqliteSaver.from_conn_string(path) as saver:
            await saver.setup()
            yield Store(saver, "sqlite", lambda: sqlite_bytes(path))
    finally:
        _remove_sqlite(path)


def _pg_kwargs() -> dict[str, Any]:
    from psycopg.rows import dict_row

    # What PostgresSaver.from_conn_string and LangGraph's docs use.
    return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


@contextlib.contextmanager
def _lg_postgres(env: Env) -> Iterator[Store]:
    try:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError as exc:
        raise BackendUnavailable(f"langgraph-checkpoint-postgres is not installed: {exc}") from exc
    with pg_schema(env) as (url, size, _), psycopg.Connection.connect(url, **_pg_kwargs()) as conn:
        saver = PostgresSaver(conn)
        saver.setup()
        yield Store(saver, "postgres", size)


@contextlib.asynccontextmanager
async def _lg_postgres_async(env: Env) -> AsyncIterator[Store]:
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg_pool import AsyncConnectionPool
    except ImportError as exc:
        raise BackendUnavailable(f"langgraph-checkpoint-postgres is not installed: {exc}") from exc
    with pg_schema(env) as (url, size, _):
        # A pool, as LangGraph recommends for concurrent use; 2 cores, so 20 is plenty.
        async with AsyncConnectionPool(
            url, min_size=4, max_size=20, kwargs=_pg_kwargs(), open=False
        ) as pool:
            saver = AsyncPostgresSaver(pool)
            await saver.setup()
            yield Store(saver, "postgres", size)


# ------------------------------------------------------------------------------ the table

LIBRARIES = ("threadline", "langgraph")

# backend -> library -> opener (None: that library has no saver for it here).
BACKENDS: dict[str, dict[str, Opener | None]] = {
    "none": {"threadline": Opener(_tl_none), "langgraph": Opener(_lg_none)},
    "memory": {"threadline": Opener(_tl_memory), "langgraph": Opener(_lg_memory)},
    "sqlite": {
        "threadline": _tl_sqlite("normal"),
        "langgraph": Opener(_lg_sqlite, _lg_sqlite_async),
    },
    "sqlite-full": {"threadline": _tl_sqlite("full"), "langgraph": Opener(_lg_sqlite)},
    "postgres": {
        "threadline": _tl_from_url("postgres"),
        "langgraph": Opener(_lg_postgres, _lg_postgres_async),
    },
    # langgraph-checkpoint-redis is a separate project, not installed by `make bench`.
    "redis": {"threadline": _tl_from_url("redis"), "langgraph": None},
    "files": {"threadline": Opener(_tl_files), "langgraph": None},  # LangGraph has none
}


def opener(backend: str, lib: str) -> Opener:
    entry = BACKENDS[backend].get(lib)
    if entry is None:
        raise BackendUnavailable(f"{lib} has no {backend} saver in this suite")
    return entry


# ------------------------------------------------------------------------------ commit counting


class CommitCounter:
    """Counts write transactions on one ``sqlite3`` connection through ``set_trace_callback``.

    The callback sees every statement the connection runs, including the ``BEGIN``/``COMMIT``
    that Python's ``sqlite3`` module issues by itself. A write commit is a ``COMMIT`` that ends a
    transaction containing an INSERT/UPDATE/DELETE/REPLACE, or a write run in autocommit mode.
    Read-only transactions are counted separately in ``read_commits``. Enable it only around
    untimed runs: the callback costs time.
    """

    _WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE")

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self.write_commits = 0
        self.read_commits = 0
        self._in_txn = False
        self._wrote = False
        self._lock = threading.Lock()

    def _trace(self, statement: str) -> None:
        head = statement.lstrip().split(None, 1)[0].upper() if statement.strip() else ""
        with self._lock:
            if head == "BEGIN":
                self._in_txn, self._wrote = True, False
            elif head in ("COMMIT", "END"):
                if self._wrote:
                    self.write_commits += 1
                else:
                    self.read_commits += 1
                self._in_txn = self._wrote = False
            elif head == "ROLLBACK":
                self._in_txn = self._wrote = False
            elif head in self._WRITES:
                if self._in_txn:
                    self._wrote = True
                else:
                    self.write_commits += 1  # autocommit: the statement is its own transaction

    def __enter__(self) -> CommitCounter:
        self.conn.set_trace_callback(self._trace)
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.set_trace_callback(None)
