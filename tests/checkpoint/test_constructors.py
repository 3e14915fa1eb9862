"""Savers built as LangGraph's docs build them: over a connection or pool the program made,
with ``from_conn_string`` in a ``with`` / ``async with`` block, under LangGraph's import paths,
and ``setup()`` on every one."""

from __future__ import annotations

import asyncio
import importlib
import operator
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

from threadline import END, START, StateGraph
from threadline.checkpoint import BaseSaver, FileSaver, InMemorySaver, SqliteSaver
from threadline.checkpoint.sqlite.aio import AsyncSqliteSaver
from threadline.errors import ConfigError, SaverUnavailableError


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def graph(saver: BaseSaver) -> Any:
    builder = StateGraph(State)
    builder.add_node("a", lambda s: {"log": ["a"]})
    builder.add_node("b", lambda s: {"log": ["b"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    return builder.compile(checkpointer=saver)


def run_twice(saver: BaseSaver, thread: str = "t1") -> None:
    """Two runs on one thread: the second sees the first's checkpoints."""
    app = graph(saver)
    config = {"configurable": {"thread_id": thread}}
    assert app.invoke({"log": ["x"]}, config) == {"log": ["x", "a", "b"]}
    assert app.invoke({"log": ["y"]}, config) == {"log": ["x", "a", "b", "y", "a", "b"]}
    assert len(list(app.get_state_history(config))) == 8


async def arun_twice(saver: BaseSaver, thread: str = "t1") -> None:
    app = graph(saver)
    config = {"configurable": {"thread_id": thread}}
    assert await app.ainvoke({"log": ["x"]}, config) == {"log": ["x", "a", "b"]}
    assert await app.ainvoke({"log": ["y"]}, config) == {"log": ["x", "a", "b", "y", "a", "b"]}
    assert (await app.aget_state(config)).values["log"][-1] == "b"


def rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql).fetchall()


# -- import paths --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("threadline.checkpoint.memory", "InMemorySaver"),
        ("threadline.checkpoint.memory", "MemorySaver"),
        ("threadline.checkpoint.sqlite", "SqliteSaver"),
        ("threadline.checkpoint.sqlite.aio", "AsyncSqliteSaver"),
        ("threadline.checkpoint.postgres", "PostgresSaver"),
        ("threadline.checkpoint.postgres.aio", "AsyncPostgresSaver"),
        ("threadline.checkpoint.redis", "RedisSaver"),
        ("threadline.checkpoint.redis.aio", "AsyncRedisSaver"),
    ],
)
def test_every_saver_imports_from_the_path_langgraph_uses(module: str, name: str) -> None:
    saver = getattr(importlib.import_module(module), name)
    assert issubclass(saver, BaseSaver)


@pytest.mark.parametrize("name", ["AsyncSqliteSaver", "AsyncPostgresSaver", "AsyncRedisSaver"])
def test_async_savers_are_exported_by_the_package_too(name: str) -> None:
    import threadline.checkpoint as package

    assert name in package.__all__
    assert getattr(package, name).__name__ == name


def test_memory_saver_is_the_in_memory_saver() -> None:
    from threadline.checkpoint.memory import InMemorySaver as Imported
    from threadline.checkpoint.memory import MemorySaver

    assert MemorySaver is Imported is InMemorySaver


# -- setup() everywhere ----------------------------------------------------------------------------


def test_setup_is_an_idempotent_no_op_on_savers_that_need_nothing(tmp_path: Path) -> None:
    for saver in (InMemorySaver(), FileSaver(tmp_path / "files"), SqliteSaver(tmp_path / "s.db")):
        with saver:
            assert saver.setup() is None
            saver.setup()
            asyncio.run(saver.asetup())
            run_twice(saver)


# -- SqliteSaver ---------------------------------------------------------------------------------


def test_sqlite_saver_over_a_connection_the_program_made(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    assert saver.path == str(path)
    run_twice(saver)
    asyncio.run(arun_twice(saver, "t2"))  # calls from worker threads
    saver.close()
    # the connection stays the program's: open, usable, in WAL mode set by the saver
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    with SqliteSaver(path) as again:
        assert [t.thread_id for t in again.list_threads()] == ["t2", "t1"]


def test_sqlite_saver_over_an_in_memory_connection() -> None:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    saver = SqliteSaver(conn)
    assert saver.path == ":memory:"
    run_twice(saver)
    # the program's own tables live beside the saver's on the same connection
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('kept')")
    conn.commit()
    run_twice(saver, "t2")
    assert conn.execute("SELECT body FROM notes").fetchall() == [("kept",)]


def test_sqlite_saver_accepts_autocommit_and_row_connections(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "a.db", check_same_thread=False, isolation_level=None)
    conn.row_factory = sqlite3.Row
    run_twice(SqliteSaver(conn))


def test_a_connection_bound_to_its_thread_gets_a_clear_error_when_used_elsewhere() -> None:
    saver = SqliteSaver(sqlite3.connect(":memory:"))  # check_same_thread defaults to True
    failure: list[BaseException] = []

    def elsewhere() -> None:
        try:
            saver.get_tuple("t1")
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    assert isinstance(failure[0], ConfigError)
    assert "check_same_thread=False" in str(failure[0])
    run_twice(saver)  # on its own thread it works


def test_unusable_connections_are_refused_clearly(tmp_path: Path) -> None:
    conn = sqlite3.connect(":memory:")
    conn.row_factory = lambda cur, row: {c[0]: v for c, v in zip(cur.description, row, strict=True)}
    with pytest.raises(ConfigError, match="row_factory"):
        SqliteSaver(conn)
    busy = sqlite3.connect(tmp_path / "busy.db")
    busy.execute("CREATE TABLE x (a)")
    busy.execute("INSERT INTO x VALUES (1)")  # opens an implicit transaction
    with pytest.raises(ConfigError, match="transaction open"):
        SqliteSaver(busy)
    with pytest.raises(ConfigError, match=r"sqlite3\.Connection or a path"):
        SqliteSaver(42)  # type: ignore[arg-type]


@pytest.mark.skipif(not hasattr(sqlite3.Connection, "autocommit"), reason="Python 3.12+")
def test_a_connection_that_always_holds_a_transaction_is_refused() -> None:
    conn = sqlite3.connect(":memory:", autocommit=False)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="autocommit=False"):
        SqliteSaver(conn)


def test_sqlite_from_conn_string_is_a_context_manager(tmp_path: Path) -> None:
    with SqliteSaver.from_conn_string(":memory:") as memory:
        run_twice(memory)
    path = tmp_path / "checkpoints.sqlite"
    with SqliteSaver.from_conn_string(str(path)) as saver:
        run_twice(saver)
    with pytest.raises(SaverUnavailableError, match="closed"):
        saver.get_tuple("t1")
    assert rows(path, "SELECT COUNT(*) FROM checkpoints") == [(4 * 2,)]


def test_sqlite_synchronous_full_is_set_and_bad_values_are_refused(tmp_path: Path) -> None:
    with SqliteSaver(tmp_path / "full.db", synchronous="full") as saver:
        assert saver._connection().execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
        run_twice(saver)
    with SqliteSaver(tmp_path / "normal.db") as saver:
        assert saver.synchronous == "normal"
        assert saver._connection().execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    SqliteSaver(conn, synchronous="FULL")
    assert conn.execute("PRAGMA synchronous").fetchone() == (2,)
    for bad in ("off", "extra", "", 2, None):
        with pytest.raises(ConfigError, match=r"'normal'.*'full'"):
            SqliteSaver(":memory:", synchronous=bad)  # type: ignore[arg-type]


def test_timeout_given_with_a_connection_becomes_its_busy_timeout() -> None:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    SqliteSaver(conn, timeout=2.5)
    assert conn.execute("PRAGMA busy_timeout").fetchone() == (2500,)


# -- AsyncSqliteSaver ------------------------------------------------------------------------------


async def test_async_sqlite_saver_from_conn_string(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.db"
    async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
        await saver.setup()
        await saver.setup()
        await arun_twice(saver)
    assert rows(path, "SELECT DISTINCT thread_id FROM checkpoints") == [("t1",)]
    with pytest.raises(SaverUnavailableError, match="closed"):
        await saver.aget_tuple("t1")


async def test_async_sqlite_saver_over_a_sqlite3_connection() -> None:
    saver = AsyncSqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    await saver.asetup()
    await arun_twice(saver)


def test_async_sqlite_saver_refuses_an_aiosqlite_connection_clearly() -> None:
    class Connection:  # what aiosqlite.connect(...) gives, as far as the saver can tell
        __module__ = "aiosqlite.core"

    with pytest.raises(ConfigError, match=r"AsyncSqliteSaver\.from_conn_string"):
        AsyncSqliteSaver(Connection())  # type: ignore[arg-type]


# -- PostgresSaver ---------------------------------------------------------------------------------

psycopg = pytest.importorskip("psycopg")
from psycopg.rows import dict_row  # noqa: E402
from psycopg_pool import AsyncConnectionPool, ConnectionPool  # noqa: E402
from services import require_postgres, require_redis  # noqa: E402

from threadline.checkpoint.postgres import PostgresSaver  # noqa: E402
from threadline.checkpoint.postgres.aio import AsyncPostgresSaver  # noqa: E402

# How LangGraph's docs make connections and pools for its savers.
LANGGRAPH_KWARGS = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
_schemas = iter(range(1_000_000))


@pytest.fixture
def pg() -> Iterator[tuple[str, str]]:
    """The server's URL and a fresh schema name, dropped afterwards."""
    url = require_postgres()
    schema = f"threadline_ctor_{os.getpid()}_{next(_schemas)}"
    yield url, schema
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_postgres_saver_over_a_connection_made_as_langgraph_docs_do(pg: tuple[str, str]) -> None:
    url, schema = pg
    with psycopg.connect(url, **LANGGRAPH_KWARGS) as conn:
        saver = PostgresSaver(conn, schema=schema)
        saver.setup()
        saver.setup()
        run_twice(saver)
        asyncio.run(arun_twice(saver, "t2"))  # the sync connection, off the event loop
        saver.close()
        assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}  # still the program's
        with pytest.raises(SaverUnavailableError, match="closed"):
            saver.get_tuple("t1")


def test_postgres_saver_over_a_pool(pg: tuple[str, str]) -> None:
    url, schema = pg
    with ConnectionPool(url, min_size=1, max_size=4, kwargs=LANGGRAPH_KWARGS, open=True) as pool:
        with PostgresSaver(pool, schema=schema) as saver:
            saver.setup()
            assert saver.pool_size == 4
            app = graph(saver)
            threads = [
                threading.Thread(
                    target=app.invoke, args=({"log": ["x"]}, {"configurable": {"thread_id": t}})
                )
                for t in ("p1", "p2", "p3")
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert {t.thread_id for t in saver.list_threads()} == {"p1", "p2", "p3"}
        assert not pool.closed


def test_postgres_connections_it_cannot_use_are_refused_clearly(pg: tuple[str, str]) -> None:
    url, schema = pg
    with psycopg.connect(url) as conn:  # autocommit off
        saver = PostgresSaver(conn, schema=schema)
        with pytest.raises(ConfigError, match="autocommit=True"):
            saver.setup()
        with pytest.raises(ConfigError, match="pool_size"):
            PostgresSaver(conn, pool_size=3)
    with pytest.raises(ConfigError, match="psycopg Connection"):
        PostgresSaver(object())  # type: ignore[arg-type]

    async def async_conn() -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as aconn:
            with pytest.raises(ConfigError, match="AsyncPostgresSaver"):
                PostgresSaver(aconn)

    asyncio.run(async_conn())


def test_postgres_saver_on_a_connection_refuses_tables_of_a_newer_threadline(
    pg: tuple[str, str],
) -> None:
    url, schema = pg
    with PostgresSaver.from_conn_string(url, schema=schema) as made:
        run_twice(made)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'UPDATE "{schema}".threadline_schema_version SET version = 999')
        with pytest.raises(SaverUnavailableError, match="newer threadline"):
            PostgresSaver(conn, schema=schema).get_tuple("t1")


def test_postgres_from_conn_string_is_a_set_up_context_manager(pg: tuple[str, str]) -> None:
    url, schema = pg
    with PostgresSaver.from_conn_string(url, schema=schema, pipeline=True) as saver:
        run_twice(saver)
    with pytest.raises(SaverUnavailableError, match="closed"):
        saver.get_tuple("t1")


async def test_async_postgres_from_conn_string(pg: tuple[str, str]) -> None:
    url, schema = pg
    async with AsyncPostgresSaver.from_conn_string(url, schema=schema) as saver:
        await saver.setup()
        await arun_twice(saver)
        assert saver.get_tuple("t1") is not None  # on a URL, sync calls work too
    with pytest.raises(SaverUnavailableError, match="closed"):
        await saver.aget_tuple("t1")


async def test_async_postgres_saver_over_an_async_connection(pg: tuple[str, str]) -> None:
    url, schema = pg
    async with await psycopg.AsyncConnection.connect(url, **LANGGRAPH_KWARGS) as conn:
        saver = AsyncPostgresSaver(conn, schema=schema)
        await saver.setup()
        await arun_twice(saver)
        # sync calls from another thread run on the connection's loop
        app = graph(saver)
        config = {"configurable": {"thread_id": "t1"}}
        final = await asyncio.to_thread(app.invoke, {"log": ["z"]}, config)
        assert final["log"][-3:] == ["z", "a", "b"]
        # on the loop's own thread they would block it: a clear error instead
        with pytest.raises(ConfigError, match=r"await graph\.ainvoke"):
            app.get_state(config)
        await saver.aclose()
        assert not conn.closed


async def test_async_postgres_saver_over_an_async_pool(pg: tuple[str, str]) -> None:
    url, schema = pg
    async with AsyncConnectionPool(
        url, min_size=1, max_size=3, kwargs=LANGGRAPH_KWARGS, open=False
    ) as pool:
        saver = AsyncPostgresSaver(pool, schema=schema)
        await saver.setup()
        await asyncio.gather(*(arun_twice(saver, f"t{i}") for i in range(5)))
        assert len(await saver.alist_threads()) == 5


# -- RedisSaver ------------------------------------------------------------------------------------

redis = pytest.importorskip("redis")
import redis.asyncio as aredis  # noqa: E402

from threadline.checkpoint.redis import RedisSaver  # noqa: E402
from threadline.checkpoint.redis.aio import AsyncRedisSaver  # noqa: E402


@pytest.fixture
def rd() -> Iterator[tuple[str, str]]:
    """The server's URL and a fresh key prefix, whose keys are deleted afterwards."""
    url = require_redis()
    prefix = f"threadline_ctor_{os.getpid()}_{next(_schemas)}"
    yield url, prefix
    with redis.Redis.from_url(url) as client:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        if keys:
            client.unlink(*keys)


def test_redis_from_conn_string_and_setup(rd: tuple[str, str]) -> None:
    url, prefix = rd
    with RedisSaver.from_conn_string(url, prefix=prefix) as saver:
        saver.setup()
        saver.setup()
        run_twice(saver)
        asyncio.run(arun_twice(saver, "t2"))
    with pytest.raises(SaverUnavailableError, match="closed"):
        saver.get_tuple("t1")


def test_redis_saver_over_a_client_the_program_made(rd: tuple[str, str]) -> None:
    url, prefix = rd
    client = redis.Redis.from_url(url)
    with RedisSaver(redis_client=client, prefix=prefix) as saver:
        assert saver.url is None
        run_twice(saver)
        asyncio.run(arun_twice(saver, "t2"))  # the sync client, off the event loop
        assert "prefix=" in repr(saver) and "127.0.0.1" in repr(saver)
    assert client.ping()  # still the program's
    client.close()


def test_redis_url_comes_from_redis_url_when_not_given(
    rd: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, prefix = rd
    monkeypatch.setenv("REDIS_URL", url)
    with RedisSaver(prefix=prefix) as saver:
        run_twice(saver)
    monkeypatch.delenv("REDIS_URL")
    with pytest.raises(ConfigError, match="REDIS_URL"):
        RedisSaver(prefix=prefix)


def test_redis_arguments_it_cannot_honour_are_refused(rd: tuple[str, str]) -> None:
    url, prefix = rd
    client = redis.Redis.from_url(url)
    with pytest.raises(ConfigError, match="not both"):
        RedisSaver(url, redis_client=client)
    with pytest.raises(ConfigError, match="AsyncRedisSaver"):
        RedisSaver(redis_client=aredis.Redis.from_url(url))
    with pytest.raises(ConfigError, match="refresh"):
        RedisSaver(url, prefix=prefix, ttl={"default_ttl": 5, "refresh_on_read": True})
    with RedisSaver(url, prefix=prefix, ttl={"default_ttl": 5}) as saver:
        assert saver.ttl == 300  # langgraph-redis counts minutes
    with RedisSaver(url, prefix=prefix, connection_args={"socket_timeout": 5}) as saver:
        assert saver._client.connection_pool.connection_kwargs["socket_timeout"] == 5
    client.close()


async def test_async_redis_from_conn_string(rd: tuple[str, str]) -> None:
    url, prefix = rd
    async with AsyncRedisSaver.from_conn_string(url, prefix=prefix) as saver:
        await saver.asetup()
        await saver.setup()
        await arun_twice(saver)
    with pytest.raises(SaverUnavailableError, match="closed"):
        await saver.aget_tuple("t1")


async def test_async_redis_saver_over_an_async_client(rd: tuple[str, str]) -> None:
    url, prefix = rd
    client = aredis.Redis.from_url(url)
    async with AsyncRedisSaver(redis_client=client, prefix=prefix) as saver:
        await arun_twice(saver)
        app = graph(saver)
        config = {"configurable": {"thread_id": "t1"}}
        final = await asyncio.to_thread(app.invoke, {"log": ["z"]}, config)
        assert final["log"][-3:] == ["z", "a", "b"]
        with pytest.raises(ConfigError, match=r"await graph\.ainvoke"):
            app.get_state(config)
    assert await client.ping()  # still the program's
    await client.aclose()


async def test_async_redis_saver_sets_itself_up_on_first_use(rd: tuple[str, str]) -> None:
    url, prefix = rd
    client = aredis.Redis.from_url(url)
    saver = AsyncRedisSaver(redis_client=client, prefix=prefix)
    assert await client.get(f"{prefix}:schema_version") is None  # nothing sent yet
    await arun_twice(saver)
    assert await client.get(f"{prefix}:schema_version") is not None
    await saver.aclose()
    await client.aclose()
