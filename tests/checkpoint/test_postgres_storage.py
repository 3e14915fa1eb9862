"""What the PostgreSQL saver stores: growing lists as deltas and compacted, exactly the blobs
kept checkpoints use after pruning, values stored whole when hints prove wrong, and
``list_threads`` paging through many threads.

Needs PostgreSQL; each saver gets a schema of its own (``postgres_fixtures.py``).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from builders import make_cp, rec, step, w
from postgres_fixtures import (
    chain,
    count,
    postgres_saver,
    query,
    saver,
    session_schemas_dropped,
    url,
)

from threadline import serde
from threadline.checkpoint.base import Checkpoint, CheckpointRecord, PlannedTask, Retention
from threadline.checkpoint.bodies import body_versions
from threadline.checkpoint.changes import SET, Append, ChangedRecord
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.layout import BlobRow, Compaction, referenced_blobs
from threadline.checkpoint.postgres import PostgresSaver
from threadline.checkpoint.postgres.backend import PostgresBackend

# Fixtures of postgres_fixtures, imported for the tests here.
__all__ = ["saver", "session_schemas_dropped", "url"]


def put_and_list_rows(saver: PostgresSaver, records: list[CheckpointRecord]) -> list[Any]:
    """(is full, chain_bytes, length of data) of each stored row of ``messages``."""
    for record in records:
        saver.put(record)
    return query(
        saver.schema,
        "SELECT base IS NULL, chain_bytes, length(data) FROM {s}.threadline_blobs"
        " WHERE key = 'messages'",
    )


@pytest.fixture()
def eager_compaction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Full copies after 16 KB of deltas (twice the last copy): compaction in a small test."""
    monkeypatch.setattr(PostgresBackend, "compaction", Compaction(ratio=2.0, rewrite_full=False))


def test_a_growing_list_is_stored_once_as_deltas(saver: PostgresSaver) -> None:
    """The default policy: no full copy until the deltas pass 1 MiB, so a 300 KB list is its
    first (empty) blob and one delta per step, each item stored once."""
    records = chain("t1", 150, size=2000)
    rows = put_and_list_rows(saver, records)
    assert sum(1 for full, _, _ in rows if full) == 1 and len(rows) == 150
    assert all(chain > 0 for full, chain, _ in rows if not full)  # no prefix rows
    final = records[-1].checkpoint.values["messages"]
    assert sum(r[2] for r in rows) < 1.05 * len(serde.DEFAULT.dumps(final))


@pytest.mark.usefixtures("eager_compaction")
def test_compaction_keeps_full_blobs_and_drops_the_deltas_they_hold(
    saver: PostgresSaver,
) -> None:
    """PostgreSQL keeps an updated row's TOAST until a vacuum: old full blobs stay (fewer,
    growing geometrically), and the deltas each new one holds become prefix rows."""
    records = chain("t1", 150, size=2000)
    rows = put_and_list_rows(saver, records)
    fulls = [r for r in rows if r[0]]
    prefixes = [r for r in rows if not r[0] and r[1] == 0]
    assert 2 <= len(fulls) <= 6 and len(prefixes) > 60 and all(r[2] == 0 for r in prefixes)
    final = records[-1].checkpoint.values["messages"]
    assert sum(r[2] for r in rows) < 2.5 * len(serde.DEFAULT.dumps(final))
    with PostgresSaver(saver.url, schema=saver.schema) as fresh:  # no cache: all from SQL
        for record in records[::7]:
            got = fresh.get_tuple("t1", "", record.checkpoint.id)
            assert got is not None and got.checkpoint == record.checkpoint


# -- storage -------------------------------------------------------------------------------------


def _stored(schema: str, thread_id: str) -> dict[tuple[str, str], BlobRow]:
    rows = query(
        schema,
        "SELECT key, version, start, base, chain_bytes, full_bytes FROM {s}.threadline_blobs"
        " WHERE thread_id = %s",
        [thread_id],
    )
    return {(r[0], r[1]): BlobRow(*r, b"") for r in rows}


def _kept(schema: str, thread_id: str) -> list[dict[str, str]]:
    """The blob versions of each checkpoint of the thread."""
    rows = query(
        schema,
        "SELECT checkpoint_id, body FROM {s}.threadline_checkpoints WHERE thread_id = %s",
        [thread_id],
    )
    return [body_versions(r[1], r[0]) or {} for r in rows]


@pytest.mark.parametrize("how", ["prune", "retention"])
def test_pruning_keeps_exactly_the_blobs_kept_checkpoints_use(url: str, how: str) -> None:
    retention = Retention(max_checkpoints=3) if how == "retention" else None
    with postgres_saver(retention=retention) as saver:
        records = chain("t1", 30, size=50)
        for record in records:
            saver.put(record)
        # A fork from an old checkpoint shares the list's chain.
        fork = step("t1", {**records[20].checkpoint.values, "step": [-1]}, records[20].checkpoint)
        if how == "prune":
            saver.put(fork, fork=True)
            assert saver.prune("t1", keep_last=3) == 28
        stored = _stored(saver.schema, "t1")
        assert any(b.base is not None for b in stored.values())
        assert set(stored) == referenced_blobs(_kept(saver.schema, "t1"), stored)
        expected = [fork, *records[-2:]] if how == "prune" else records[-3:]
        assert [r.checkpoint.id for r in saver.list("t1")] == [
            r.checkpoint.id for r in reversed(sorted(expected, key=lambda r: r.checkpoint.id))
        ]
        for r in expected:
            got = saver.get_tuple("t1", "", r.checkpoint.id)
            assert got is not None and got.checkpoint == r.checkpoint
        # Emptied: the thread is gone with every blob.
        assert saver.prune("t1", keep_last=0) == 3
        assert _stored(saver.schema, "t1") == {} and saver.list_threads() == []
        assert count(saver.schema, "heads") == 0


@pytest.mark.parametrize("use_async", [False, True], ids=["put", "aput"])
def test_values_the_hints_wrongly_call_stored_are_stored_in_full(
    saver: PostgresSaver, use_async: bool
) -> None:
    records = chain("t1", 3)
    for record in records:
        saver.put(record)
    # Another process pruned blobs from under this saver's cache: the next delta's base is
    # gone, and so is a value the hints call unchanged. The put finds out in its transaction
    # and is retried once with those values stored whole.
    query(saver.schema, "DELETE FROM {s}.threadline_blobs WHERE key IN ('messages', 'fixed')")
    prev = records[-1].checkpoint
    cid = new_checkpoint_id()
    cp = Checkpoint(
        cid,
        prev.id,
        prev.step + 1,
        {**prev.values, "messages": [*prev.values["messages"], "m"], "step": [9]},
        {**prev.versions, "messages": cid, "step": cid},
        (),
        datetime.now(UTC).isoformat(),
    )
    extends = {"messages": (prev.versions["messages"], len(prev.values["messages"]))}
    changes = {"messages": Append(*extends["messages"]), "step": SET}
    record = ChangedRecord("t1", "", cp, {}, (), changes)
    if use_async:  # through the batcher: the retry too
        asyncio.run(saver.aput(record))
    else:
        saver.put(record)
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == cp
    blobs = _stored(saver.schema, "t1")
    assert blobs[("messages", cid)].base is None  # stored whole
    assert ("fixed", prev.versions["fixed"]) in blobs


def test_list_threads_pages_through_many_threads(saver: PostgresSaver) -> None:
    for k in range(300):
        nxt = (PlannedTask("ask"),) if k % 3 == 0 else ()
        cp = make_cp({"k": k}, next=nxt)
        saver.put(rec(f"t{k:03d}", cp, writes=(w("x", "interrupt", 1),) if k % 3 == 0 else ()))
    every = saver.list_threads()
    assert [t.thread_id for t in every] == [f"t{k:03d}" for k in reversed(range(300))]
    interrupted = saver.list_threads(status="interrupted")
    assert [t.thread_id for t in interrupted] == [f"t{k:03d}" for k in reversed(range(0, 300, 3))]
    assert all(t.next == ("ask",) for t in interrupted)
    assert [t.thread_id for t in saver.list_threads(status="idle", limit=5)] == [
        "t299",
        "t298",
        "t296",
        "t295",
        "t293",
    ]
    updated = [datetime.fromisoformat(t.updated_at) for t in every]
    assert updated == sorted(updated, reverse=True)
    assert all(
        u.tzinfo is not None and u <= datetime.now(UTC) + timedelta(seconds=5) for u in updated
    )
