"""What only the SQLite saver promises: durability across reopening, sharing a file, WAL, one
commit per put, storing only what changed, checksums, migrating version-1 files, errors."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from builders import counter_graph, item, make_cp, rec, step, stored, w

from threadline import serde
from threadline.checkpoint import (
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    Retention,
    SqliteSaver,
    TaskWrite,
)
from threadline.checkpoint.sqlite import SCHEMA_VERSION
from threadline.checkpoint.sqlite import migration as sqlite_migration
from threadline.errors import ConcurrentUpdateError, SaverUnavailableError, SerializationError

TABLES = ("checkpoints", "blobs", "writes", "threads")


def counts(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}


def query(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql, params).fetchall()


def execute(path: Path, sql: str, *params: Any) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(sql, params)


class Statements:
    """The statements a saver's connection runs, through ``set_trace_callback``."""

    def __init__(self, saver: SqliteSaver) -> None:
        self.conn = saver._conn
        assert self.conn is not None
        self.log: list[str] = []

    def __enter__(self) -> Statements:
        assert self.conn is not None
        self.conn.set_trace_callback(lambda s: self.log.append(" ".join(s.split())))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.conn is not None
        self.conn.set_trace_callback(None)

    def starting(self, *words: str) -> list[str]:
        return [s for s in self.log if s.upper().startswith(words)]


# -- durability and sharing ----------------------------------------------------------------------


def test_data_survives_reopening_the_file(tmp_path: Path) -> None:
    path = tmp_path / "cp.db"
    first = step("t1", {"messages": ["hi"], "when": datetime(2030, 1, 1, tzinfo=UTC)}, None)
    second = step(
        "t1",
        {"messages": ["hi", "there"], "when": datetime(2030, 1, 1, tzinfo=UTC), "seen": {1, 2}},
        first.checkpoint,
        metadata={"source": "loop"},
        writes=(TaskWrite("task-1", "agent", "result", {"messages": ["again"]}),),
        next=(PlannedTask("agent"),),
    )
    with SqliteSaver(path) as saver:
        saver.put(dataclasses.replace(first, metadata={"source": "input"}))
        saver.put(second)
        saver.put(dataclasses.replace(first, checkpoint_ns="child:1"))

    with SqliteSaver(str(path)) as reopened:
        got = reopened.get_tuple("t1")
        assert got is not None
        assert got.checkpoint == second.checkpoint
        assert got.metadata == {"source": "loop"}
        assert got.pending_writes == second.pending_writes
        ids = [r.checkpoint.id for r in reopened.list("t1")]
        assert ids == [second.checkpoint.id, first.checkpoint.id]
        by_filter = reopened.list("t1", filter={"source": "input"})
        assert [r.checkpoint.id for r in by_filter] == [first.checkpoint.id]
        child = reopened.get_tuple("t1", "child:1")
        assert child is not None and child.checkpoint == first.checkpoint
        (info,) = reopened.list_threads()
        assert (info.thread_id, info.status, info.next) == ("t1", "running", ("agent",))


def test_two_savers_on_one_file_from_two_threads_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    SqliteSaver(path).close()  # create the schema up front; opening concurrently is tested below
    per_thread = 60
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def work(thread_id: str) -> None:
        try:
            with SqliteSaver(path) as saver:
                start.wait()
                parent: Checkpoint | None = None
                for i in range(per_thread):
                    record = step(
                        thread_id, {"i": i}, parent, metadata={"i": i}, writes=(w("a", value=i),)
                    )
                    saver.put(record)
                    cp = record.checkpoint
                    saver.put_writes(thread_id, "", cp.id, [w("b", value=-i)])
                    parent = cp
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(name,)) for name in ("left", "right")]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert errors == []

    with SqliteSaver(path) as saver:
        for thread_id in ("left", "right"):
            records = list(saver.list(thread_id))
            assert [r.metadata["i"] for r in records] == list(reversed(range(per_thread)))
            for r in records:
                i = r.metadata["i"]
                assert [x.value for x in r.pending_writes] == [i, -i]


def test_two_savers_racing_on_one_parent_exactly_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "race.db"
    with SqliteSaver(path) as a, SqliteSaver(path) as b:
        for round_ in range(50):
            thread_id = f"race-{round_}"
            root = step(thread_id, {"n": 0}, None)
            a.put(root)
            records = [step(thread_id, {"n": k}, root.checkpoint) for k in (1, 2)]
            gate = threading.Barrier(2)
            results: list[str] = ["", ""]

            def run(
                k: int,
                saver: SqliteSaver,
                gate: threading.Barrier = gate,
                records: list[CheckpointRecord] = records,
                results: list[str] = results,
            ) -> None:
                gate.wait()
                try:
                    saver.put(records[k])
                    results[k] = "won"
                except ConcurrentUpdateError:
                    results[k] = "lost"

            workers = [threading.Thread(target=run, args=(k, s)) for k, s in enumerate((a, b))]
            for t in workers:
                t.start()
            for t in workers:
                t.join()
            assert sorted(results) == ["lost", "won"]
            assert len(list(a.list(thread_id))) == 2
            assert counts(path)["checkpoints"] == 2 * (round_ + 1)


@pytest.mark.parametrize("round_", range(25))
def test_opening_concurrently_creates_the_schema_once(tmp_path: Path, round_: int) -> None:
    # Four connections opening a new file at once: switching it to WAL could fail at once with
    # "database is locked" (SQLite does not wait on the busy timeout there); it is retried.
    path = tmp_path / "race.db"
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def open_and_put(k: int) -> None:
        try:
            start.wait()
            with SqliteSaver(path) as saver:
                saver.put(step(f"t{k}", {"k": k}, None))
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=open_and_put, args=(k,)) for k in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert errors == []
    assert query(path, "SELECT version FROM threadline_schema_version") == [(SCHEMA_VERSION,)]
    assert counts(path)["checkpoints"] == 4


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


# -- one transaction, one commit -----------------------------------------------------------------


@pytest.mark.parametrize("retention", [None, Retention(max_checkpoints=2)])
def test_one_commit_per_put(tmp_path: Path, retention: Retention | None) -> None:
    with SqliteSaver(tmp_path / "c.db", retention=retention) as saver:
        parent: Checkpoint | None = None
        for i in range(6):
            record = step(
                "t1",
                {"log": [item(j, 100) for j in range(i + 1)], "n": i, "c": "same"},
                parent,
                writes=(w(f"task-{i}", value=i), w(f"task-{i}", "interrupt", "?")),
                next=(PlannedTask("a"),),
            )
            with Statements(saver) as trace:
                saver.put(record)
            assert trace.starting("COMMIT") == ["COMMIT"]
            assert trace.starting("BEGIN") == ["BEGIN IMMEDIATE"]
            assert trace.log[0] == "BEGIN IMMEDIATE"  # the deltas' bases came from the cache
            parent = record.checkpoint
        with Statements(saver) as trace:
            saver.put_writes("t1", "", parent.id, [w("late", "error", "boom")])
        assert trace.starting("COMMIT") == ["COMMIT"]
        (info,) = saver.list_threads()
        assert info.status == "error"


def test_loading_takes_a_few_queries(tmp_path: Path) -> None:
    with SqliteSaver(tmp_path / "c.db") as saver:
        parent: Checkpoint | None = None
        for i in range(30):
            values = {f"k{j}": j * i // 7 for j in range(20)}
            values["log"] = [item(j, 50) for j in range(i + 1)]
            record = step("t1", values, parent, writes=(w("t", value=i),))
            saver.put(record)
            parent = record.checkpoint
        with Statements(saver) as trace:
            got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == parent
        # BEGIN, the row, its blobs, the chains of its deltas, its writes, COMMIT
        assert len(trace.log) <= 6, trace.log
        with Statements(saver) as trace:
            assert len(list(saver.list("t1"))) == 30
        # One page: the same queries for all rows (the blob query in chunks of pairs).
        assert len(trace.log) <= 8, trace.log


def test_a_held_chain_loads_without_reading_its_rows(tmp_path: Path) -> None:
    """The saver that stored (or last loaded) a long chain holds it as one blob: the next load
    reads the tip's row, finds its checksum unchanged and reads no chain; a saver that holds
    nothing reads the chain, and a delta another saver adds is read as a new tip."""
    path = tmp_path / "c.db"
    records = []
    with SqliteSaver(path) as writer, SqliteSaver(path) as reader:
        parent: Checkpoint | None = None
        for i in range(40):
            records.append(step("t1", {"log": [item(j, 1000) for j in range(i + 1)]}, parent))
            writer.put(records[-1])
            parent = records[-1].checkpoint
        chain_query = "b.start = w.v"  # the WHERE of queries.chain_rows
        for saver, reads_chain in ((writer, False), (reader, True), (reader, False)):
            with Statements(saver) as trace:
                got = saver.get_tuple("t1")
            assert got is not None and got.checkpoint == records[-1].checkpoint
            assert any(chain_query in q for q in trace.log) == reads_chain, trace.log
        records.append(step("t1", {"log": [item(j, 1000) for j in range(41)]}, parent))
        writer.put(records[-1])
        got = reader.get_tuple("t1")  # its held tip is the parent's: it reads the chain again
        assert got is not None and got.checkpoint == records[-1].checkpoint


def test_a_large_value_is_read_from_the_file_once(tmp_path: Path) -> None:
    """Its verified bytes stay in the process: the next load reads only the small rows."""
    path = tmp_path / "c.db"
    big = [item(j, 1000) for j in range(200)]  # ~200 KB: above bytecache.MIN_BYTES
    with SqliteSaver(path) as writer, SqliteSaver(path) as reader:
        record = step("t1", {"log": big}, None)
        writer.put(record)
        for expected_big_reads in (1, 0):
            with Statements(reader) as trace:
                got = reader.get_tuple("t1")
            assert got is not None and got.checkpoint == record.checkpoint
            big_reads = [q for q in trace.log if "SELECT b.key, b.version, b.data" in q]
            assert len(big_reads) == expected_big_reads, trace.log
        with Statements(writer) as trace:  # the writer kept what it wrote
            assert writer.get_tuple("t1") is not None
        assert not any("SELECT b.key, b.version, b.data" in q for q in trace.log)


def test_cached_bytes_survive_another_process_compacting_the_chain(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    records: list[CheckpointRecord] = []
    parent: Checkpoint | None = None
    with SqliteSaver(path) as writer, SqliteSaver(path) as reader:
        for i in range(120):
            log = [item(j, 2000) for j in range(i + 1)]
            records.append(step("t1", {"log": log}, parent))
            writer.put(records[-1])
            parent = records[-1].checkpoint
            if i % 7 == 0:  # the reader caches blobs the writer later turns into prefix rows
                got = reader.get_tuple("t1")
                assert got is not None and got.checkpoint == parent
        for r in records:
            got = reader.get_tuple("t1", "", r.checkpoint.id)
            assert got is not None and got.checkpoint == r.checkpoint


# -- storing only what changed -------------------------------------------------------------------


def test_only_changed_values_are_stored(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    big = "b" * 100_000
    with SqliteSaver(path) as saver:
        parent: Checkpoint | None = None
        for i in range(20):
            values = {"big": big, "n": [i], **{f"fixed{j}": [j] for j in range(8)}}
            record = step("t1", values, parent)
            saver.put(record)
            parent = record.checkpoint
    rows = query(path, "SELECT key, COUNT(*), SUM(length(data)) FROM blobs GROUP BY key")
    by_key = {key: (n, size) for key, n, size in rows}
    assert by_key["n"][0] == 20
    assert by_key["big"][0] == 1 and by_key["big"][1] < 100_100
    assert all(by_key[f"fixed{j}"][0] == 1 for j in range(8))
    assert sum(n for n, _ in by_key.values()) == 20 + 1 + 8


def test_small_scalars_live_in_the_checkpoint_rows(tmp_path: Path) -> None:
    """A step that changes only small scalars writes its checkpoint row and no blob; each row
    holds every small scalar, changed or not, so none is looked up elsewhere."""
    path = tmp_path / "c.db"
    small = {"n": 0, "ratio": 0.5, "done": False, "none": None, "word": "w" * 64, "raw": b"r"}
    with SqliteSaver(path) as saver:
        parent: Checkpoint | None = None
        records = []
        for i in range(5):
            values = {**small, "n": i, "doc": "d" * 65, "items": [i]}
            records.append(step("t1", values, parent))
            saver.put(records[-1])
            parent = records[-1].checkpoint
        assert saver.prune("t1", keep_last=1) == 4  # the kept row still holds "word" and "raw"
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == records[-1].checkpoint
    # "doc" is one character too long to be inline, "items" a list: blobs as ever.
    blobs = query(path, "SELECT key, COUNT(*) FROM blobs GROUP BY key ORDER BY key")
    assert blobs == [("doc", 1), ("items", 1)]


def test_a_record_without_hints_stores_each_value_under_its_version(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path) as saver:
        first = make_cp({"a": "x" * 1000, "b": [1]})
        saver.put(rec("t1", first))
        second = make_cp({"a": "x" * 1000, "b": [2]}, parent=first)  # "a" keeps its version
        saver.put(rec("t1", second))  # no hints: every value is encoded; "a" is stored once
    assert query(path, "SELECT key, COUNT(*) FROM blobs GROUP BY key") == [("a", 1), ("b", 2)]


def test_wrong_hints_cost_space_not_correctness(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path) as saver:
        first = step("t1", {"a": 1}, None)
        saver.put(first)
        # "b" is new, but the changes say nothing changed: its value is stored anyway.
        cp = make_cp({"a": 1, "b": "new"}, parent=first.checkpoint)
        saver.put(rec("t1", cp, changes={}))
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == cp
        # A version that is neither stored nor given a value cannot be saved.
        bad = dataclasses.replace(
            make_cp({"a": 1}, parent=cp), versions={"a": cp.versions["a"], "ghost": "v-none"}
        )
        with pytest.raises(SerializationError, match="ghost"):
            saver.put(rec("t1", bad, changes={}))
    assert counts(path)["checkpoints"] == 2


def test_two_hundred_turns_store_about_the_list_once(tmp_path: Path) -> None:
    """200 turns appending two ~1 KB messages: storage stays linear in the final list."""
    path = tmp_path / "chat.db"
    raw = 0
    with SqliteSaver(path) as saver:
        parent: Checkpoint | None = None
        messages: list[str] = []
        for turn in range(200):
            new = [item(2 * turn), item(2 * turn + 1)]
            raw += sum(len(m) for m in new)
            messages = [*messages, *new]
            record = step("chat", {"messages": messages, "turn": turn}, parent)
            saver.put(record)
            parent = record.checkpoint
        got = saver.get_tuple("chat")
        assert got is not None and got.checkpoint.values["messages"] == messages
    stored = stored_bytes(path)
    data = query(path, "SELECT SUM(length(data)) FROM blobs")[0][0]
    size = file_size(path)
    print(f"raw {raw}, blob data {data}, stored {stored}, file {size}")
    assert raw == 400_000
    assert data <= 2.5 * raw  # each item once in a delta, plus geometrically growing full copies
    assert stored <= 3 * raw  # everything the database holds: rows, keys, versions, indexes
    # The file also holds the free space of half-filled 4 KiB pages (a 2 KB delta row leaves
    # the rest of its page empty); still linear, where rewriting the list would be 100x.
    assert size <= 4 * raw


def stored_bytes(path: Path) -> int:
    """Bytes of every value in every row of every table (indexes counted as their columns)."""
    total = 0
    with closing(sqlite3.connect(path)) as conn:
        for table in TABLES:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            sizes = " + ".join(f"COALESCE(length(CAST({c} AS BLOB)), 0)" for c in columns)
            total += conn.execute(f"SELECT COALESCE(SUM({sizes}), 0) FROM {table}").fetchone()[0]
        # The blobs' primary-key index repeats (thread, ns, key, version); checkpoints are a
        # WITHOUT ROWID table, their primary key is the table itself.
        total += conn.execute(
            "SELECT COALESCE(SUM(length(thread_id) + length(checkpoint_ns) + length(key)"
            " + length(version)), 0) FROM blobs"
        ).fetchone()[0]
    return total


def file_size(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    return sum(os.path.getsize(p) for p in (str(path), f"{path}-wal") if os.path.exists(p))


def test_compaction_keeps_each_item_about_once_and_every_version_loads(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    records: list[CheckpointRecord] = []
    with SqliteSaver(path) as saver:
        parent: Checkpoint | None = None
        messages: list[str] = []
        for i in range(200):
            messages = [*messages, item(i, 500)]
            records.append(step("t1", {"messages": messages}, parent))
            saver.put(records[-1])
            parent = records[-1].checkpoint
        for r in records:
            got = saver.get_tuple("t1", "", r.checkpoint.id)
            assert got is not None and got.checkpoint.values == r.checkpoint.values
    rows = query(path, "SELECT version, base, chain_bytes, length(data), items FROM blobs")
    fulls = [r for r in rows if r[1] is None]
    prefixes = [r for r in rows if r[1] is not None and r[2] == 0]
    deltas = [r for r in rows if r[2] > 0]
    assert len(fulls) == 1 and len(fulls) + len(prefixes) + len(deltas) == 200
    assert len(deltas) < 60  # the chain after the newest full blob stays short
    assert all(r[3] == 0 and r[1] == fulls[0][0] for r in prefixes)
    assert sorted(r[4] for r in rows) == list(range(1, 201))
    stored = sum(r[3] for r in rows)
    assert stored < 1.1 * len(serde.DEFAULT.dumps(messages))  # not 2x, not 200 copies


def test_a_fork_shares_the_chain_it_branches_from(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path) as saver:
        start = step("t1", {"log": [item(0, 800)]}, None)
        saver.put(start)
        a = step("t1", {"log": [item(0, 800), item(1, 800)]}, start.checkpoint)
        saver.put(a)
        b = step("t1", {"log": [item(0, 800), item(2, 800)]}, start.checkpoint)
        saver.put(b, fork=True)
        for r in (start, a, b):
            got = saver.get_tuple("t1", "", r.checkpoint.id)
            assert got is not None and got.checkpoint == r.checkpoint
    rows = query(path, "SELECT version, start, base FROM blobs ORDER BY version")
    s = start.checkpoint.id
    assert rows == [(s, s, None), (a.checkpoint.id, s, s), (b.checkpoint.id, s, s)]


def test_a_chain_whose_versions_do_not_grow_still_loads(tmp_path: Path) -> None:
    """Chains are read as a range of versions; hand-picked versions that sort backwards are
    found another way."""
    path = tmp_path / "c.db"
    logs = [[item(i, 300) for i in range(n)] for n in (1, 2, 3)]
    versions = ["v-9", "v-5", "v-1"]  # each delta's version sorts before its base
    records: list[CheckpointRecord] = []
    parent: Checkpoint | None = None
    for n, (log, version) in enumerate(zip(logs, versions, strict=True)):
        cp = dataclasses.replace(make_cp({"log": log}, parent=parent), versions={"log": version})
        extends = {"log": (versions[n - 1], n)} if n else {}
        records.append(rec("t1", cp, changes=stored({"log"}, extends)))
        parent = cp
    with SqliteSaver(path) as saver:
        for r in records:
            saver.put(r)
        rows = query(path, "SELECT version, base FROM blobs ORDER BY version DESC")
        assert rows == [("v-9", None), ("v-5", "v-9"), ("v-1", "v-5")]  # a chain, backwards
        for r in records:
            got = saver.get_tuple("t1", "", r.checkpoint.id)
            assert got is not None and got.checkpoint.values == r.checkpoint.values
        assert [r.checkpoint.values for r in saver.list("t1")] == [
            r.checkpoint.values for r in reversed(records)
        ]


def test_a_stale_put_leaves_no_rows_behind(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path) as saver:
        first = step("t1", {"log": ["a"], "n": 0}, None, next=(PlannedTask("x"),))
        saver.put(first)
        second = step("t1", {"log": ["a", "b"], "n": 1}, first.checkpoint)
        saver.put(second)
        before = counts(path)
        stale = step(
            "t1",
            {"log": ["a", "c"], "n": 2, "new": "v"},
            first.checkpoint,
            writes=(w("task", value=1),),
        )
        with pytest.raises(ConcurrentUpdateError):
            saver.put(stale)
        assert counts(path) == before
        assert query(path, "SELECT checkpoint_id, status FROM threads") == [
            (second.checkpoint.id, "idle")
        ]


# -- history: prune, retention, copy -------------------------------------------------------------


def test_prune_deletes_unused_blobs_and_keeps_chains_in_use(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path) as saver:
        parent: Checkpoint | None = None
        cps = []
        messages = [item(j, 300) for j in range(10)]  # a big first value: one chain throughout
        for i in range(10):
            messages = [*messages, item(10 + i, 300)]
            record = step("t1", {"messages": messages, "n": [i], "c": ["const"]}, parent)
            saver.put(record)
            parent = record.checkpoint
            cps.append(parent)
        head_blob = query(
            path, "SELECT start, base FROM blobs WHERE key = 'messages' AND version = ?", parent.id
        )[0]
        assert head_blob[1] is not None and head_blob[0] == cps[0].id  # a chain from cps[0]
        assert saver.prune("t1", keep_last=2) == 8
        for cp in cps[-2:]:
            got = saver.get_tuple("t1", "", cp.id)
            assert got is not None and got.checkpoint == cp
    keys = query(path, "SELECT key, version FROM blobs ORDER BY key, version")
    n_versions = {v for k, v in keys if k == "n"}
    assert n_versions == {cps[-2].id, cps[-1].id}  # the other values of "n" are gone
    assert ("c", cps[0].id) in keys  # still used by the kept checkpoints
    chain = {v for k, v in keys if k == "messages"}
    assert chain == {cp.id for cp in cps}  # the whole chain the kept deltas are built on
    assert counts(path)["checkpoints"] == 2


def test_retention_prunes_in_the_put_and_collects_blobs(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path, retention=Retention(max_checkpoints=3)) as saver:
        parent: Checkpoint | None = None
        for i in range(20):
            record = step("t1", {"n": [i], "big": "x" * 10_000 if i < 10 else "y" * 10_000}, parent)
            saver.put(record)
            parent = record.checkpoint
    assert counts(path)["checkpoints"] == 3
    assert query(path, "SELECT key, COUNT(*) FROM blobs GROUP BY key") == [("big", 1), ("n", 3)]


def test_retention_by_age_uses_created_at(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    old = (datetime.now(UTC) - timedelta(days=3)).replace(tzinfo=None).isoformat()  # naive: UTC
    other_zone = (datetime.now(UTC) - timedelta(hours=5)).astimezone(
        datetime.now().astimezone().tzinfo
    )
    with SqliteSaver(path, retention=Retention(max_age=timedelta(days=1))) as saver:
        a = step("t1", {"n": 0}, None, created_at=old)
        saver.put(a)
        b = step("t1", {"n": 1}, a.checkpoint, created_at="not a timestamp")  # never too old
        saver.put(b)
        c = step("t1", {"n": 2}, b.checkpoint, created_at=other_zone.isoformat())
        saver.put(c)
        assert [r.checkpoint.id for r in saver.list("t1")] == [c.checkpoint.id, b.checkpoint.id]


def test_copy_thread_copies_rows_in_one_transaction(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path) as saver:
        parent: Checkpoint | None = None
        for i in range(5):
            record = step("src", {"log": [item(j, 300) for j in range(i + 1)]}, parent)
            saver.put(record)
            parent = record.checkpoint
        saver.put_writes("src", "", parent.id, [w("t", value=1)])
        before = counts(path)
        with Statements(saver) as trace:
            saver.copy_thread("src", "dst")
        assert trace.starting("COMMIT") == ["COMMIT"]
        after = counts(path)
        assert after == {t: 2 * n for t, n in before.items()}
        with pytest.raises(ValueError, match="already has checkpoints"):
            saver.copy_thread("src", "dst")
        assert counts(path) == after


# -- damaged data --------------------------------------------------------------------------------


@contextmanager
def two_threads(path: Path) -> Iterator[tuple[list[Checkpoint], Checkpoint]]:
    """Thread "t1" with a growing list (a delta chain) and bystander thread "t2"."""
    with SqliteSaver(path) as saver:
        parent: Checkpoint | None = None
        cps = []
        for i in range(4):
            log = [item(j, 400) for j in range(4 + i)]  # one full value, then three deltas
            record = step("t1", {"log": log, "k": ["v"]}, parent)  # a list: not inline
            saver.put(record)
            parent = record.checkpoint
            cps.append(parent)
        other = step("t2", {"log": [item(0, 400)], "k": ["v"]}, None)
        saver.put(other)
    yield cps, other.checkpoint


def flip_one_byte(data: bytes) -> bytes:
    return data[:100] + bytes([data[100] ^ 0x01]) + data[101:]


@pytest.mark.parametrize(
    "damage",
    [flip_one_byte, lambda data: data[:-7], lambda data: b""],
    ids=["flipped", "truncated", "emptied"],
)
def test_a_damaged_value_fails_clearly_and_alone(tmp_path: Path, damage: Any) -> None:
    path = tmp_path / "c.db"
    with two_threads(path) as (cps, other):
        where = "WHERE thread_id = 't1' AND key = 'log' AND version = ?"
        damaged = cps[2].id  # a delta in the middle of the chain
        ((data, base),) = query(path, f"SELECT data, base FROM blobs {where}", damaged)
        assert base == cps[1].id
        execute(path, f"UPDATE blobs SET data = ? {where}", damage(data), damaged)
        with SqliteSaver(path) as saver:
            for cp in cps[2:]:  # built on the damaged delta
                with pytest.raises(SerializationError, match="'log'"):
                    saver.get_tuple("t1", "", cp.id)
            with pytest.raises(SerializationError, match="'log'"):
                list(saver.list("t1"))
            for cp in cps[:2]:  # older checkpoints do not use it
                got = saver.get_tuple("t1", "", cp.id)
                assert got is not None and got.checkpoint == cp
            got = saver.get_tuple("t2")
            assert got is not None and got.checkpoint == other
            assert {i.thread_id for i in saver.list_threads()} == {"t1", "t2"}


def test_a_damaged_full_value_names_its_key(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with two_threads(path):
        execute(path, "UPDATE blobs SET data = zeroblob(length(data)) WHERE key = 'k'")
        with SqliteSaver(path) as saver:
            with pytest.raises(SerializationError, match="'k'"):
                saver.get_tuple("t1")
            with pytest.raises(SerializationError, match="'k'"):
                saver.get_tuple("t2")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("UPDATE blobs SET items = 1000000 WHERE version = :v", "longer than its value"),
        ("UPDATE blobs SET base = version WHERE version = :v", "loops"),
        ("DELETE FROM blobs WHERE version = (SELECT base FROM blobs WHERE version = :v)", "lost"),
    ],
    ids=["too-long", "loop", "target-gone"],
)
def test_a_damaged_prefix_row_fails_clearly(tmp_path: Path, damage: str, message: str) -> None:
    path = tmp_path / "c.db"
    cps: list[Checkpoint] = []
    with SqliteSaver(path) as saver:
        parent: Checkpoint | None = None
        for i in range(30):
            record = step("t1", {"log": [item(j, 2000) for j in range(i + 1)]}, parent)
            saver.put(record)
            cps.append(parent := record.checkpoint)
    old = cps[1].versions["log"]
    assert query(path, "SELECT chain_bytes, length(data) FROM blobs WHERE version = ?", old) == [
        (0, 0)
    ]  # compacted into a prefix row
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(damage, {"v": old})
    with SqliteSaver(path) as saver, pytest.raises(SerializationError, match=message):
        saver.get_tuple("t1", "", cps[1].id)


def test_a_missing_value_names_its_key(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with two_threads(path) as (cps, _):
        execute(path, "DELETE FROM blobs WHERE thread_id = 't1' AND version = ?", cps[1].id)
        with SqliteSaver(path) as saver:
            with pytest.raises(SerializationError, match="'log'"):
                saver.get_tuple("t1")
            got = saver.get_tuple("t1", "", cps[0].id)
            assert got is not None and got.checkpoint == cps[0]


def test_a_stale_blob_cache_is_caught_in_the_transaction(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path) as a, SqliteSaver(path) as b:
        first = step("t1", {"log": [item(0)]}, None)
        a.put(first)  # a caches the metadata of the blob its next delta would extend
        b.delete_thread("t1")  # ...which another saver deletes
        again = step("t1", {"log": [item(0), item(1)]}, first.checkpoint)
        a.put(again, fork=True)
        got = b.get_tuple("t1")
        assert got is not None and got.checkpoint == again.checkpoint
    assert query(path, "SELECT base FROM blobs") == [(None,)]  # stored in full, not as a delta


def test_reading_versions_from_a_stored_body_needs_no_classes() -> None:
    from threadline.checkpoint.bodies import body_versions
    from threadline.checkpoint.layout import encode_record

    @serde.register(name="tests.checkpoint.Payload")
    @dataclass(frozen=True)
    class Payload:
        n: int

    cp = make_cp({"a": 1, "b": [2]}, next=(PlannedTask("x", arg=Payload(3), send=True),))
    body = encode_record(rec("t1", cp), lambda key, version: None).row.body
    assert body_versions(body) == cp.versions
    renamed = body.replace(b"checkpoint.Payload", b"checkpoint.Paylo4d")  # unknown class
    assert body_versions(renamed) == cp.versions
    assert body_versions(b"garbage") is None


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


def test_a_put_that_keeps_the_status_writes_no_thread_row(tmp_path: Path) -> None:
    """Most steps of a run leave the thread running: the thread row is not rewritten (two
    pages less to commit), and list_threads still shows the newest checkpoint."""
    with SqliteSaver(tmp_path / "t.db") as saver:
        running = (PlannedTask("n"),)
        parent = step("t", {"x": 0}, None, next=running)
        saver.put(parent)
        statements: list[str] = []
        saver._conn.set_trace_callback(statements.append)  # type: ignore[union-attr]
        for i in range(1, 4):
            record = step("t", {"x": i}, parent.checkpoint, next=running)
            saver.put(record)
            parent = record
        assert not [s for s in statements if "INTO threads" in s]
        (info,) = saver.list_threads()
        assert (info.checkpoint_id, info.status, info.next) == (
            parent.checkpoint.id,
            "running",
            ("n",),
        )
        assert info.updated_at == parent.checkpoint.created_at
        saver.put(step("t", {"x": 9}, parent.checkpoint))  # the run ends: the status changes
        assert len([s for s in statements if "INTO threads" in s]) == 1
        assert saver.list_threads()[0].status == "idle"


def test_another_tools_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    execute(path, "CREATE TABLE checkpoints (thread_id TEXT, checkpoint BLOB)")
    with pytest.raises(SaverUnavailableError, match="did not create"):
        SqliteSaver(path)
    assert query(path, "SELECT name FROM sqlite_master WHERE type = 'table'") == [("checkpoints",)]


def test_a_counter_step_costs_at_most_200_bytes_of_checkpoint_rows(tmp_path: Path) -> None:
    """A step that only moves a counter writes one compact row (its body leaves out what the
    row's columns hold): at most 200 bytes of the checkpoints table's pages a checkpoint."""
    builder = counter_graph(2000)
    path = tmp_path / "counter.db"
    with SqliteSaver(path) as saver:
        config = {"configurable": {"thread_id": "t"}, "recursion_limit": 4000}
        assert builder.compile(checkpointer=saver).invoke({"n": 0}, config) == {"n": 2000}
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (count,) = conn.execute("SELECT count(*) FROM checkpoints").fetchone()
        (pages,) = conn.execute(
            "SELECT SUM(pgsize) FROM dbstat WHERE name = 'checkpoints'"
        ).fetchone()
        (bodies,) = conn.execute("SELECT MAX(length(body)) FROM checkpoints").fetchone()
    assert count == 2002 and pages / count <= 200 and bodies < 40
