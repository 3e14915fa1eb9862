"""Opening and closing a SQLite saver: WAL and the schema version, in memory and from a
connection string, clear errors once closed and for files it cannot use, and migrating
files of an older format.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from builders import item, make_cp, rec, step, w
from sqlite_files import TABLES, execute, query

from threadline.checkpoint import Retention, SqliteSaver, TaskWrite
from threadline.checkpoint.sqlite import SCHEMA_VERSION
from threadline.checkpoint.sqlite import connection as sqlite_migration
from threadline.errors import SaverUnavailableError


def test_wal_mode_and_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "wal.db"
    with SqliteSaver(path) as saver:
        saver.put(step("t1", {"x": 1}, None))
        assert query(path, "PRAGMA journal_mode")[0][0].lower() == "wal"
        assert query(path, "SELECT version FROM threadline_schema_version") == [(SCHEMA_VERSION,)]


def test_in_memory_default() -> None:
    with SqliteSaver() as saver:
        record = step("t1", {"x": (1, 2)}, None)
        saver.put(record)
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == record.checkpoint


def test_from_conn_string_is_a_context_manager(tmp_path: Path) -> None:
    path = tmp_path / "lg.db"
    record = step("t1", {"x": 1}, None)
    with SqliteSaver.from_conn_string(str(path)) as saver:
        assert isinstance(saver, SqliteSaver)
        saver.put(record)
    with pytest.raises(SaverUnavailableError, match="closed"):
        saver.get_tuple("t1")
    with SqliteSaver.from_conn_string(path, retention=Retention(max_checkpoints=1)) as saver:
        assert saver.retention == Retention(max_checkpoints=1)
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == record.checkpoint


def test_close_is_idempotent_and_later_calls_fail_clearly(tmp_path: Path) -> None:
    saver = SqliteSaver(tmp_path / "c.db")
    saver.close()
    saver.close()
    for call in (
        lambda: saver.put(step("t1", {}, None)),
        lambda: list(saver.list("t1")),
        lambda: saver.list_threads(),
        lambda: saver.prune("t1", keep_last=1),
        lambda: saver.copy_thread("t1", "t2"),
    ):
        with pytest.raises(SaverUnavailableError, match="closed"):
            call()


async def test_closed_saver_fails_through_async_api(tmp_path: Path) -> None:
    saver = SqliteSaver(tmp_path / "c.db")
    saver.close()
    with pytest.raises(SaverUnavailableError):
        await saver.aget_tuple("t1")
    with pytest.raises(SaverUnavailableError):
        await saver.alist_threads()


def test_missing_directory_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "no" / "such" / "dir" / "cp.db"
    with pytest.raises(SaverUnavailableError) as info:
        SqliteSaver(path)
    assert str(path) in str(info.value)
    assert not path.parent.exists()


def test_a_file_that_is_not_sqlite_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_bytes(b"this is not a database, just some text " * 100)
    with pytest.raises(SaverUnavailableError) as info:
        SqliteSaver(path)
    assert str(path) in str(info.value)
    assert path.read_bytes().startswith(b"this is not a database")


def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    SqliteSaver(path).close()
    execute(path, "UPDATE threadline_schema_version SET version = 99")
    with pytest.raises(SaverUnavailableError, match="newer threadline") as info:
        SqliteSaver(path)
    assert "99" in str(info.value)
    assert query(path, "SELECT version FROM threadline_schema_version") == [(99,)]


def test_injection_attempts_leave_tables_intact(tmp_path: Path) -> None:
    path = tmp_path / "inj.db"
    evil = "x'); DROP TABLE checkpoints; --"
    with SqliteSaver(path) as saver:
        record = rec(evil, make_cp({evil: evil}), ns=evil, metadata={evil: evil})
        saver.put(record)
        cp = record.checkpoint
        saver.put_writes(evil, evil, cp.id, [TaskWrite(evil, evil, "result", evil)])
        assert list(saver.list(evil, evil, filter={evil: evil}, before=evil + "~"))
        saver.copy_thread(evil, evil + "2")
        saver.prune(evil, keep_last=0)
        saver.delete_thread(evil)
    tables = {r[0] for r in query(path, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert {*TABLES, "threadline_schema_version"} <= tables


# -- migrating an older format ---------------------------------------------------------------


def test_an_older_schema_is_migrated_on_open_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A synthetic next version adds a table: a file of the current version is migrated when
    opened, its data kept; a migration that fails leaves the file as it was; a file older than
    any known migration (version 1: text ``created_at`` and metadata) is refused."""
    path = tmp_path / "old.db"
    with SqliteSaver(path) as saver:
        first = step("t1", {"log": [item(0)], "n": 1}, None)
        saver.put(first)

    current, synthetic = SCHEMA_VERSION, SCHEMA_VERSION + 1

    def to_next(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE threadline_next_marker (x INTEGER)")

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE threadline_half_done (x INTEGER)")
        raise SaverUnavailableError("cannot migrate this file")

    monkeypatch.setattr(sqlite_migration, "SCHEMA_VERSION", synthetic)
    monkeypatch.setattr(sqlite_migration, "MIGRATIONS", {current: broken})
    with pytest.raises(SaverUnavailableError, match="cannot migrate this file"):
        SqliteSaver(path)
    assert query(path, "SELECT version FROM threadline_schema_version") == [(current,)]
    tables = {name for (name,) in query(path, "SELECT name FROM sqlite_master")}
    assert "threadline_half_done" not in tables

    monkeypatch.setattr(sqlite_migration, "MIGRATIONS", {current: to_next})
    with SqliteSaver(path) as saver:
        assert query(path, "SELECT version FROM threadline_schema_version") == [(synthetic,)]
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == first.checkpoint
        saver.put(step("t1", {"log": [item(0), item(1)], "n": 2}, first.checkpoint))
    with SqliteSaver(path):  # opening a migrated file again migrates nothing
        pass
    assert query(path, "SELECT COUNT(*) FROM threadline_next_marker") == [(0,)]

    execute(path, "UPDATE threadline_schema_version SET version = 1")
    with pytest.raises(SaverUnavailableError, match="format version 1, which this threadline"):
        SqliteSaver(path)


# ``writes`` as schema version 2 made it: ``seq`` counted per checkpoint (rowid apart).
WRITES_V2 = """
    CREATE TABLE writes (
        thread_id     TEXT    NOT NULL,
        checkpoint_ns TEXT    NOT NULL DEFAULT '',
        checkpoint_id TEXT    NOT NULL,
        task_id       TEXT    NOT NULL,
        kind          TEXT    NOT NULL,
        task_name     TEXT    NOT NULL,
        seq           INTEGER NOT NULL,
        value         BLOB    NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, kind)
    )
"""


def test_a_version_2_file_keeps_its_checkpoints_and_writes_in_order(tmp_path: Path) -> None:
    """A file whose ``writes`` table is version 2's (the other tables did not change) is
    migrated to the current version on open: its checkpoints load as they did, each with its
    writes in their old ``seq`` order (rows inserted in the reverse order, so the rowid would
    get it wrong), and writes added later go after them."""
    path, fresh = tmp_path / "v2.db", tmp_path / "fresh.db"
    SqliteSaver(fresh).close()
    with SqliteSaver(path) as saver:
        first = step("t1", {"log": [item(0)], "n": 1}, None, writes=(w("a", value=1),))
        second = step("t1", {"log": [item(0), item(1)], "n": 2}, first.checkpoint)
        saver.put(first)
        saver.put(second)
        saver.put_writes("t1", "", first.checkpoint.id, [w("b", value=2), w("c", value=3)])
        saver.put_writes("t1", "", second.checkpoint.id, [w("x", value=4), w("y", value=5)])
        before = list(saver.list("t1"))
    execute(path, "ALTER TABLE writes RENAME TO writes_v3")
    execute(path, WRITES_V2)
    execute(
        path,
        "INSERT INTO writes SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, kind,"
        " task_name, (SELECT COUNT(*) FROM writes_v3 o WHERE o.checkpoint_id = n.checkpoint_id"
        " AND o.seq < n.seq), value FROM writes_v3 n ORDER BY seq DESC",
    )
    execute(path, "DROP TABLE writes_v3")
    execute(path, "UPDATE threadline_schema_version SET version = 2")
    assert query(path, "SELECT seq FROM writes ORDER BY rowid") == [(1,), (0,), (2,), (1,), (0,)]

    with SqliteSaver(path) as saver:
        assert query(path, "SELECT version FROM threadline_schema_version") == [(SCHEMA_VERSION,)]
        assert list(saver.list("t1")) == before
        assert [x.task_id for x in before[1].pending_writes] == ["a", "b", "c"]
        saver.put_writes("t1", "", first.checkpoint.id, [w("d", value=6), w("a", value=7)])
        got = saver.get_tuple("t1", "", first.checkpoint.id)
        assert got is not None
        assert [(x.task_id, x.value) for x in got.pending_writes] == [
            ("a", 7),
            ("b", 2),
            ("c", 3),
            ("d", 6),
        ]
    tables = "SELECT type, name, sql FROM sqlite_master ORDER BY name"
    assert query(path, tables) == query(fresh, tables)


def test_another_tools_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    execute(path, "CREATE TABLE checkpoints (thread_id TEXT, checkpoint BLOB)")
    with pytest.raises(SaverUnavailableError, match="did not create"):
        SqliteSaver(path)
    assert query(path, "SELECT name FROM sqlite_master WHERE type = 'table'") == [("checkpoints",)]
