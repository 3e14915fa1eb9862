"""``PostgresStore`` specifics: setup, schema, pool ownership, what reaches SQL, jsonb limits.

Each test works in its own schema (``store_backends.postgres_schema``), dropped afterwards.
"""

# ruff: noqa: E402 - the driver is imported only after require_driver() has checked for it

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from store_backends import T0, FakeClock, postgres_schema
from store_drivers import require_driver

require_driver("psycopg")  # skips without it, but fails under CI=true

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from threadline.errors import InvalidStoreInputError, ThreadlineError
from threadline.store import PostgresStore
from threadline.store.postgres import SCHEMA_VERSION


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def location() -> Iterator[tuple[str, str]]:
    with postgres_schema() as found:
        yield found


def tables(url: str, schema: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        ).fetchall()
    return {name for (name,) in rows}


def test_setup_runs_lazily_once_and_is_idempotent(location: tuple[str, str]) -> None:
    url, schema = location
    with PostgresStore(url, schema=schema) as store:
        assert tables(url, schema) == set()  # nothing happens before the first call
        assert store.get(("ns",), "k") is None
        assert tables(url, schema) == {
            "threadline_store",
            "threadline_store_schema_version",
            "threadline_store_vectors",
        }
        store.setup()
        store.setup()
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT version FROM {}").format(
                sql.Identifier(schema, "threadline_store_schema_version")
            )
        ).fetchall()
    assert rows == [(SCHEMA_VERSION,)]


def test_concurrent_setup_from_many_stores(location: tuple[str, str]) -> None:
    url, schema = location
    stores = [PostgresStore(url, schema=schema) for _ in range(4)]
    errors: list[BaseException] = []

    def run(store: PostgresStore) -> None:
        try:
            store.setup()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert errors == []


def test_newer_schema_is_refused(location: tuple[str, str]) -> None:
    url, schema = location
    with PostgresStore(url, schema=schema) as store:
        store.setup()
    with psycopg.connect(url) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET version = %s").format(
                sql.Identifier(schema, "threadline_store_schema_version")
            ),
            (SCHEMA_VERSION + 1,),
        )
    with (
        PostgresStore(url, schema=schema) as store,
        pytest.raises(ThreadlineError, match="newer than this threadline understands"),
    ):
        store.put(("ns",), "k", {})


def test_schema_names_are_identifiers_not_sql(location: tuple[str, str]) -> None:
    url, schema = location
    odd = schema + '"; DROP SCHEMA public; --'
    try:
        with PostgresStore(url, schema=odd) as store:
            store.put(("ns",), "k", {"v": 1})
            assert store.get(("ns",), "k") is not None
        assert "threadline_store_vectors" in tables(url, odd)
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(odd)))
    with pytest.raises(ValueError, match="schema"):
        PostgresStore(url, schema="")


def test_a_shared_pool_is_left_open(location: tuple[str, str]) -> None:
    url, schema = location
    with ConnectionPool(url, min_size=1, max_size=2, open=True) as pool:
        store = PostgresStore(pool, schema=schema)
        store.put(("ns",), "k", {"v": 1})
        store.close()
        store.close()
        assert "closed" in repr(store)
        with pytest.raises(ThreadlineError, match="closed"):
            store.get(("ns",), "k")
        with pool.connection() as conn:  # still usable, and the write was committed
            rows = conn.execute(
                sql.SQL("SELECT key FROM {}").format(sql.Identifier(schema, "threadline_store"))
            ).fetchall()
        assert rows == [("k",)]


def test_filter_fields_never_reach_sql_text(
    location: tuple[str, str], clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, schema = location
    field = "x'); DROP TABLE threadline_store; --"
    seen: list[tuple[str, dict[str, Any]]] = []
    with PostgresStore(url, schema=schema, clock=clock) as store:
        store.put(("ns",), "k", {field: 1})
        real = store._execute

        def spy(query: sql.Composable, params: dict[str, Any], **kw: Any) -> Any:
            with psycopg.connect(url) as conn:
                seen.append((query.as_string(conn), params))
            return real(query, params, **kw)

        monkeypatch.setattr(store, "_execute", spy)
        for filter in ({field: 1}, {field: {"$ne": 2}}, {field: {"$gte": 1, "$lt": "x'"}}):
            store.search(("ns",), filter=filter)
    searches = [(text, params) for text, params in seen if text.lstrip().startswith("SELECT")]
    assert len(searches) == 3
    for text, params in searches:
        assert field not in text and "x'" not in text
        assert field in params.values()


def test_nul_characters_cannot_be_stored(location: tuple[str, str]) -> None:
    url, schema = location
    with PostgresStore(url, schema=schema) as store:
        with pytest.raises(ValueError, match="NUL"):
            store.put(("ns",), "k\x00", {})
        with pytest.raises(ValueError, match="NUL"):
            store.put(("n\x00s",), "k", {})
        with pytest.raises(ValueError, match=r"value\['a'\]\[0\] holds a NUL"):
            store.put(("ns",), "k", {"a": ["\x00"]})
        with pytest.raises(ValueError, match="NUL"):
            store.put(("ns",), "k", {"\x00": 1})
        assert store.get(("ns",), "k\x00") is None
        store.delete(("ns",), "k\x00")
        assert store.search(("n\x00s",)) == []
        assert store.list_namespaces(prefix=("n\x00s",)) == []
        store.put(("ns",), "k", {"a": 1})
        assert [it.key for it in store.search(("ns",), filter={"\x00": {"$ne": 1}})] == ["k"]
        assert store.search(("ns",), filter={"\x00": {"$eq": 1}}) == []


def test_expired_rows_are_deleted_not_just_hidden(
    location: tuple[str, str], clock: FakeClock
) -> None:
    url, schema = location

    def rows() -> int:
        with psycopg.connect(url) as conn:
            query = sql.SQL("SELECT COUNT(*) FROM {}").format(
                sql.Identifier(schema, "threadline_store")
            )
            row = conn.execute(query).fetchone()
            assert row is not None
            return int(row[0])

    with PostgresStore(url, schema=schema, clock=clock, sweep_interval=100) as store:
        store.put(("ns",), "a", {}, ttl=1)
        store.put(("ns",), "keep", {})
        assert len(store.search(("ns",))) == 2  # sweeps now; the next sweep is due at +100 s
        clock.advance(2)
        assert [it.key for it in store.search(("ns",))] == ["keep"]
        assert rows() == 2
        assert store.sweep_expired() == 1
        assert rows() == 1
        store.put(("ns",), "b", {}, ttl=1)
        clock.advance(200)
        assert store.list_namespaces() == [("ns",)]
        assert rows() == 1


def test_timestamps_come_from_the_store_clock(location: tuple[str, str], clock: FakeClock) -> None:
    url, schema = location
    with PostgresStore(url, schema=schema, clock=clock) as store:
        store.put(("ns",), "k", {}, ttl=0.000_001)
        item = store.get(("ns",), "k", refresh_ttl=False)
        assert item is not None and item.created_at == T0
        assert (item.expires_at - T0).total_seconds() == 0.000_001  # type: ignore[operator]
        clock.advance(0.000_001)
        assert store.get(("ns",), "k") is None


def test_key_order_of_objects_is_not_kept(location: tuple[str, str]) -> None:
    """Documented: jsonb reorders object keys; the value is still equal."""
    url, schema = location
    with PostgresStore(url, schema=schema) as store:
        store.put(("ns",), "k", {"bbb": 1, "a": 2})
        item = store.get(("ns",), "k")
        assert item is not None and item.value == {"bbb": 1, "a": 2}
        assert list(item.value) == ["a", "bbb"]


def test_from_conn_string(location: tuple[str, str]) -> None:
    url, schema = location
    with PostgresStore.from_conn_string(url, schema=schema) as store:
        store.put(("ns",), "k", {})
        assert store.get(("ns",), "k") is not None


def test_semantic_vectors_live_and_die_with_their_items(location: tuple[str, str]) -> None:
    """No pgvector needed; the vectors table follows deletes, sweeps and plain overwrites."""
    url, schema = location
    index = {"embed": lambda texts: [[1.0, float(len(t))] for t in texts], "dims": 2}
    with PostgresStore(url, schema=schema, index=index) as store:
        store.put(("ns",), "a", {"t": "x"})
        store.put(("ns",), "b", {"t": "y"})
        store.put(("ns",), "c", {"t": "z"})
        store.delete(("ns",), "a")
    with PostgresStore(url, schema=schema) as plain:  # no index: an overwrite drops vectors
        plain.put(("ns",), "b", {"t": "changed"})
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT key FROM {} ORDER BY key").format(
                sql.Identifier(schema, "threadline_store_vectors")
            )
        ).fetchall()
    assert rows == [("c",)]
    with (
        PostgresStore(url, schema=schema, index={**index, "dims": 3}) as wrong,
        pytest.raises(InvalidStoreInputError, match="vectors of 2 dims, but index says dims=3"),
    ):
        wrong.setup()


def test_schema_1_database_gains_the_vectors_table(location: tuple[str, str]) -> None:
    url, schema = location
    with PostgresStore(url, schema=schema) as store:
        store.put(("ns",), "old", {"t": "x"})
    with psycopg.connect(url, autocommit=True) as conn:  # what a schema-1 database looked like
        conn.execute(
            sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, "threadline_store_vectors"))
        )
        conn.execute(
            sql.SQL("UPDATE {} SET version = 1").format(
                sql.Identifier(schema, "threadline_store_schema_version")
            )
        )
    index = {"embed": lambda texts: [[1.0, 0.0] for _ in texts], "dims": 2}
    with PostgresStore(url, schema=schema, index=index) as store:
        store.put(("ns",), "new", {"t": "y"})
        assert [it.key for it in store.search(("ns",), query="q")] == ["new"]
        assert {it.key for it in store.search(("ns",))} == {"old", "new"}
    with psycopg.connect(url) as conn:
        found = conn.execute(
            sql.SQL("SELECT version FROM {}").format(
                sql.Identifier(schema, "threadline_store_schema_version")
            )
        ).fetchall()
    assert found == [(SCHEMA_VERSION,)] == [(2,)]
