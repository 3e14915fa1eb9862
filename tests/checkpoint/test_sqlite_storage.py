"""What the SQLite saver stores: only the values that changed, small scalars in the checkpoint
rows, growing lists as deltas that are compacted, and compact rows for small steps.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from builders import counter_graph, item, make_cp, rec, step, stored, w
from sqlite_files import TABLES, counts, query

from threadline import serde
from threadline.checkpoint import Checkpoint, CheckpointRecord, PlannedTask, SqliteSaver
from threadline.errors import ConcurrentUpdateError, SerializationError

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
