"""``SqliteStore`` specifics: the file, its schema, its lifecycle and what reaches SQL."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from store_backends import FakeClock

from threadline.errors import ThreadlineError
from threadline.store import SqliteStore
from threadline.store.sqlite import SCHEMA_VERSION


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_schema_and_version_table(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        assert {"threadline_store", "threadline_store_schema_version"} <= tables
        versions = conn.execute("SELECT version FROM threadline_store_schema_version").fetchall()
        assert versions == [(SCHEMA_VERSION,)]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    SqliteStore(path).close()  # reopening neither fails nor adds a second version row
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM threadline_store_schema_version").fetchone() == (
            1,
        )


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(
            "UPDATE threadline_store_schema_version SET version = ?", (SCHEMA_VERSION + 1,)
        )
    with pytest.raises(ThreadlineError, match="newer than this threadline understands"):
        SqliteStore(path)


def test_shares_a_file_with_the_checkpoint_saver(tmp_path: Path) -> None:
    from threadline.checkpoint import SqliteSaver

    path = tmp_path / "app.db"
    with SqliteSaver(path), SqliteStore(path) as store:
        store.put(("ns",), "k", {"v": 1})
        assert store.get(("ns",), "k") is not None


def test_in_memory_by_default() -> None:
    with SqliteStore() as store:
        store.put(("ns",), "k", {"v": 1})
        item = store.get(("ns",), "k")
        assert item is not None and item.value == {"v": 1}
    with SqliteStore() as other:  # each :memory: store is private
        assert other.get(("ns",), "k") is None


def test_close_is_idempotent_and_final(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "store.db")
    assert "open" in repr(store)
    store.close()
    store.close()
    assert "closed" in repr(store)
    with pytest.raises(ThreadlineError, match="closed"):
        store.put(("ns",), "k", {})
    with pytest.raises(ThreadlineError, match="closed"):
        store.search(())


def test_filter_fields_and_values_never_reach_sql_text(tmp_path: Path) -> None:
    field = "x'); DROP TABLE threadline_store; --"
    statements: list[str] = []
    with SqliteStore(tmp_path / "store.db") as store:
        store.put(("ns",), "k", {field: "'; DELETE FROM threadline_store; --"})
        assert store._conn is not None
        store._conn.set_trace_callback(statements.append)
        found = store.search(("ns",), filter={field: {"$ne": "x' OR '1'='1"}})
        assert [it.key for it in found] == ["k"]
        assert store.list_namespaces() == [("ns",)]
    assert statements
    assert not any("DROP" in s or "DELETE FROM threadline_store;" in s for s in statements)
    assert not any("x' OR" in s for s in statements)


def test_expired_rows_are_deleted_not_just_hidden(tmp_path: Path, clock: FakeClock) -> None:
    path = tmp_path / "store.db"

    def rows() -> int:
        with sqlite3.connect(path) as conn:
            return conn.execute("SELECT COUNT(*) FROM threadline_store").fetchone()[0]

    with SqliteStore(path, clock=clock, sweep_interval=100) as store:
        store.put(("ns",), "a", {}, ttl=1)
        store.put(("ns",), "b", {}, ttl=1)
        store.put(("ns",), "c", {}, ttl=1)
        store.put(("ns",), "keep", {})
        assert store.search(("ns",), limit=10) != []  # first search sweeps (nothing yet)
        clock.advance(2)
        assert store.get(("ns",), "a") is None  # get removes what it finds expired
        assert rows() == 3
        assert [it.key for it in store.search(("ns",))] == ["keep"]  # hidden, next sweep later
        assert rows() == 3
        assert store.sweep_expired() == 2
        assert rows() == 1
        store.put(("ns",), "d", {}, ttl=1)
        clock.advance(200)
        assert store.list_namespaces() == [("ns",)]  # the interval has passed: swept
        assert rows() == 1


def test_refresh_loses_to_a_concurrent_put(tmp_path: Path, clock: FakeClock) -> None:
    """The TTL refresh is compare-and-set: it never re-arms a TTL on an item rewritten since."""
    path = tmp_path / "store.db"
    with SqliteStore(path, clock=clock) as store, SqliteStore(path, clock=clock) as other:
        store.put(("ns",), "k", {"v": 1}, ttl=10)
        assert store._conn is not None
        real_execute = store._conn.execute

        def execute(sql: str, params: object = ()) -> sqlite3.Cursor:
            if sql.lstrip().startswith("UPDATE"):  # between our SELECT and our refresh...
                clock.advance(1)
                other.put(("ns",), "k", {"v": 2})  # ...another store rewrites it, TTL-free
            return real_execute(sql, params)  # type: ignore[arg-type]

        store._conn = _Proxy(store._conn, execute)  # type: ignore[assignment]
        item = store.get(("ns",), "k")
        assert item is not None and item.value == {"v": 1}  # what was read
        clock.advance(10_000)
        again = other.get(("ns",), "k")
        assert again is not None and again.value == {"v": 2} and again.expires_at is None


class _Proxy:
    def __init__(self, conn: sqlite3.Connection, execute: object) -> None:
        self._conn = conn
        self.execute = execute

    def __getattr__(self, name: str) -> object:
        return getattr(self._conn, name)


def test_labels_and_keys_with_nul_characters(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "store.db") as store:
        store.put(("a\x00b", "c"), "k\x00", {"v": "\x00"})
        item = store.get(("a\x00b", "c"), "k\x00")
        assert item is not None and item.value == {"v": "\x00"}
        assert item.namespace == ("a\x00b", "c")
        assert store.list_namespaces(prefix=("a\x00b",)) == [("a\x00b", "c")]
        assert store.get(("a",), "k") is None


def test_from_conn_string(tmp_path: Path) -> None:
    with SqliteStore.from_conn_string(tmp_path / "store.db", sweep_interval=None) as store:
        store.put(("ns",), "k", {})
        assert store.sweep_interval is None and store.get(("ns",), "k") is not None


def test_an_open_connection_as_langgraph_passes_it(tmp_path: Path) -> None:
    path = tmp_path / "given.db"
    conn = sqlite3.connect(path, check_same_thread=False)
    store = SqliteStore(conn)
    store.setup()  # LangGraph's docs call it; harmless here
    store.put(("ns",), "k", {"v": 1})
    assert repr(store) == f"SqliteStore({str(path)!r}, open)"
    store.close()
    assert conn.execute("SELECT key FROM threadline_store").fetchall() == [("k",)]  # still open
    conn.close()
    with SqliteStore(path) as again:
        assert again.get(("ns",), "k") is not None


def test_an_in_memory_connection(tmp_path: Path) -> None:
    store = SqliteStore(sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None))
    store.put(("ns",), "k", {"v": 1})
    assert [it.key for it in store.search(("ns",))] == ["k"]
    assert repr(store) == "SqliteStore(':memory:', open)"
