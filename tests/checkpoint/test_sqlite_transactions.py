"""The SQLite saver's statements: one transaction and one commit per put, a load in a few
queries, held chains and cached bytes that spare reading rows, and no thread row rewritten
while a run's status stays the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import item, step, w
from sqlite_files import Statements

from threadline.checkpoint import Checkpoint, CheckpointRecord, PlannedTask, Retention, SqliteSaver

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
        chain_query = "b.start = w.v"  # the WHERE of queries.Blobs._chains
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
