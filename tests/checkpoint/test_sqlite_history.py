"""Pruning, retention and copying on SQLite: blobs nobody uses go, chains in use stay, and a
copy is one transaction.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from builders import item, step, w
from sqlite_files import Statements, counts, query

from threadline.checkpoint import Checkpoint, Retention, SqliteSaver

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
