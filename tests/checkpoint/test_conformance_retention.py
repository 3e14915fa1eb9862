"""Retention: a saver built with ``retention=`` keeps the newest checkpoints by count, age or both.

Part of the conformance suite (``conformance_api.py``): every test runs on every saver.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from builders import item, step, w
from conformance_api import (
    Api,
    OpenSaver,
    assert_loads,
    ids,
    mode,
    newest_first,
    open_saver,
    put_chain,
)

from threadline.checkpoint import Checkpoint, Retention

# Fixtures of conformance_api, imported for the tests here.
__all__ = ["mode", "open_saver"]

# -- retention -----------------------------------------------------------------------------------


async def test_retention_by_count(open_saver: OpenSaver, mode: str) -> None:
    api = Api(open_saver(retention=Retention(max_checkpoints=3)), mode)
    parent: Checkpoint | None = None
    cps = []
    for i in range(10):
        values = {"log": [item(j, 200) for j in range(i + 1)], "set_once": "s", "i": i}
        record = step("t1", values, parent, writes=(w(f"task-{i}", value=i),))
        await api.put(record)
        parent = record.checkpoint
        cps.append(parent)
        assert len(await api.list("t1")) == min(i + 1, 3)
    child = await put_chain(api, "t1", 5, ns="child:1")
    other = await put_chain(api, "t2", 2)
    assert ids(await api.list("t1")) == newest_first(cps[-3:])
    assert ids(await api.list("t1", "child:1")) == newest_first(child[-3:])
    assert ids(await api.list("t2")) == newest_first(other)
    await assert_loads(api, "t1", cps[-3:])
    got = await api.get("t1", "", cps[-3].id)
    assert got is not None and got.pending_writes == (w("task-7", value=7),)


async def test_retention_by_age(open_saver: OpenSaver, mode: str) -> None:
    api = Api(open_saver(retention=Retention(max_age=timedelta(days=1))), mode)
    now = datetime.now(UTC)
    old = (now - timedelta(days=10)).isoformat()
    recent = (now - timedelta(hours=2)).isoformat()
    first = step("t1", {"log": ["a"], "c": 1}, None, created_at=old)
    await api.put(first)
    second = step("t1", {"log": ["a", "b"], "c": 1}, first.checkpoint, created_at=old)
    await api.put(second)
    # Only old checkpoints: the newest always stays.
    assert ids(await api.list("t1")) == [second.checkpoint.id]
    third = step("t1", {"log": ["a", "b", "c"], "c": 1}, second.checkpoint, created_at=recent)
    await api.put(third)
    fourth = step("t1", {"log": ["a", "b", "c", "d"], "c": 1}, third.checkpoint)
    await api.put(fourth)
    assert ids(await api.list("t1")) == [fourth.checkpoint.id, third.checkpoint.id]
    await assert_loads(api, "t1", [third.checkpoint, fourth.checkpoint])
    # Other threads are pruned when they are saved to, not before.
    other = step("t2", {"x": 1}, None, created_at=old)
    await api.put(other)
    await api.put(step("t2", {"x": 2}, other.checkpoint, created_at=old))
    assert len(await api.list("t2")) == 1


async def test_retention_by_count_and_age(open_saver: OpenSaver, mode: str) -> None:
    retention = Retention(max_checkpoints=4, max_age=timedelta(hours=1))
    api = Api(open_saver(retention=retention), mode)
    now = datetime.now(UTC)
    parent: Checkpoint | None = None
    cps = []
    for i, age in enumerate([30, 20, 10, 0.5, 0.2, 0.1]):  # hours old
        created_at = (now - timedelta(hours=age)).isoformat()
        record = step("t1", {"i": i}, parent, created_at=created_at)
        await api.put(record)
        parent = record.checkpoint
        cps.append(parent)
    assert ids(await api.list("t1")) == newest_first(cps[-3:])
