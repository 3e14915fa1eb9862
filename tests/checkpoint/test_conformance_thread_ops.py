"""The thread-level operations: ``list_threads`` and its statuses, ``prune`` and ``copy_thread``,
with odd thread ids too.

Part of the conformance suite (``conformance_api.py``): every test runs on every saver.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

import pytest
from builders import item, step, w
from conformance_api import (
    Api,
    api,
    assert_loads,
    ids,
    mode,
    newest_first,
    open_saver,
    put_chain,
    saver,
)

from threadline.checkpoint import Checkpoint, PlannedTask, TaskWrite

# Fixtures of conformance_api, imported for the tests here.
__all__ = ["api", "mode", "open_saver", "saver"]

# -- list_threads --------------------------------------------------------------------------------


async def _thread(
    api: Api,
    thread_id: str,
    *,
    next: tuple[str, ...] = (),
    writes: tuple[TaskWrite, ...] = (),
    later: Sequence[TaskWrite] = (),
) -> Checkpoint:
    """A thread of two checkpoints whose head plans ``next``, with ``writes`` on the head."""
    first = step(thread_id, {"x": 0}, None, next=(PlannedTask("start"),))
    await api.put(first)
    head = step(
        thread_id,
        {"x": 1},
        first.checkpoint,
        next=tuple(PlannedTask(n) for n in next),
        writes=writes,
    )
    await api.put(head)
    if later:
        await api.put_writes(thread_id, "", head.checkpoint.id, later)
    return head.checkpoint


async def test_list_threads_statuses(api: Api) -> None:
    heads = {
        "idle": await _thread(api, "idle"),
        "running": await _thread(api, "running", next=("a", "b")),
        "interrupted": await _thread(
            api, "interrupted", next=("a",), later=[w("task-a", "interrupt", "ok?", "a")]
        ),
        "interrupted-in-put": await _thread(
            api, "interrupted-in-put", next=("a",), writes=(w("task-a", "interrupt", "?", "a"),)
        ),
        "breakpoint": await _thread(
            api, "breakpoint", next=("a",), later=[w("bp", "breakpoint", ("a",), "bp")]
        ),
        "error": await _thread(
            api, "error", next=("a", "b"), writes=(w("task-a", "error", "boom", "a"),)
        ),
        "error-later": await _thread(
            api, "error-later", next=("a",), later=[w("task-a", "error", "boom", "a")]
        ),
        # The task that was interrupted has since finished: nothing is waiting any more.
        "answered": await _thread(
            api,
            "answered",
            next=("a",),
            writes=(w("task-a", "interrupt", "?", "a"),),
            later=[w("task-a", "result", {"x": 2}, "a")],
        ),
        # An error beats an interrupt of another task.
        "error-and-interrupt": await _thread(
            api,
            "error-and-interrupt",
            next=("a", "b"),
            writes=(w("task-a", "interrupt", "?", "a"), w("task-b", "error", "boom", "b")),
        ),
    }
    expected = {
        "idle": "idle",
        "running": "running",
        "interrupted": "interrupted",
        "interrupted-in-put": "interrupted",
        "breakpoint": "interrupted",
        "error": "error",
        "error-later": "error",
        "answered": "running",
        "error-and-interrupt": "error",
    }
    infos = {i.thread_id: i for i in await api.list_threads()}
    assert {t: i.status for t, i in infos.items()} == expected
    for thread_id, head in heads.items():
        info = infos[thread_id]
        assert info.checkpoint_id == head.id
        assert info.next == tuple(t.name for t in head.next)
        datetime.fromisoformat(info.updated_at)  # an ISO 8601 timestamp
    for status in ("idle", "running", "interrupted", "error"):
        got = await api.list_threads(status=status)  # type: ignore[arg-type]
        assert {i.thread_id for i in got} == {t for t, s in expected.items() if s == status}
        assert all(i.status == status for i in got)


async def test_list_threads_newest_first_with_limit(api: Api) -> None:
    heads = {}
    for name in ("t1", "t2", "t3"):
        heads[name] = await _thread(api, name, next=("a",))
    order = [i.thread_id for i in await api.list_threads()]
    assert order == ["t3", "t2", "t1"]
    assert [i.thread_id for i in await api.list_threads(limit=2)] == ["t3", "t2"]
    assert await api.list_threads(limit=0) == []
    # A write on a thread's newest checkpoint updates it (and its status)...
    await api.put_writes("t1", "", heads["t1"].id, [w("task-a", "interrupt", "?", "a")])
    infos = await api.list_threads()
    assert [i.thread_id for i in infos] == ["t1", "t3", "t2"]
    assert infos[0].status == "interrupted"
    assert infos[0].updated_at >= infos[1].updated_at
    assert [i.thread_id for i in await api.list_threads(status="running", limit=1)] == ["t3"]
    # ...a write on an older checkpoint does not.
    older = (await api.list("t2"))[-1].checkpoint.id
    await api.put_writes("t2", "", older, [w("task-x", "error", "old news", "x")])
    infos = await api.list_threads()
    assert [i.thread_id for i in infos] == ["t1", "t3", "t2"]
    assert infos[2].status == "running"
    # A new checkpoint moves a thread to the front.
    nxt = step("t2", {"x": 5}, heads["t2"])
    await api.put(nxt)
    infos = await api.list_threads()
    assert [i.thread_id for i in infos] == ["t2", "t1", "t3"]
    assert infos[0].status == "idle" and infos[0].checkpoint_id == nxt.checkpoint.id


async def test_list_threads_shows_root_namespaces_only(api: Api) -> None:
    head = await _thread(api, "parent", next=("sub",))
    await put_chain(api, "parent", 3, ns="sub:1")
    await put_chain(api, "only-child", 2, ns="sub:1")
    infos = await api.list_threads()
    assert [(i.thread_id, i.checkpoint_id) for i in infos] == [("parent", head.id)]


async def test_list_threads_forgets_deleted_and_emptied_threads(api: Api) -> None:
    for name in ("a", "b", "c"):
        await _thread(api, name)
    await api.delete_thread("b")
    assert {i.thread_id for i in await api.list_threads()} == {"a", "c"}
    assert await api.prune("c", keep_last=0) == 2
    assert [i.thread_id for i in await api.list_threads()] == ["a"]
    assert await api.get("c") is None


async def test_list_threads_empty_saver(api: Api) -> None:
    assert await api.list_threads() == []
    assert await api.list_threads(status="idle") == []


# -- prune ---------------------------------------------------------------------------------------


async def test_prune_keeps_the_newest_per_namespace(api: Api) -> None:
    root = await put_chain(api, "t1", 5)
    child = await put_chain(api, "t1", 4, ns="child:a")
    other = await put_chain(api, "t2", 3)
    for cp in root:
        await api.put_writes("t1", "", cp.id, [w("task", value=cp.id)])
    assert await api.prune("t1", keep_last=2) == 3 + 2
    assert ids(await api.list("t1")) == newest_first(root[-2:])
    assert ids(await api.list("t1", "child:a")) == newest_first(child[-2:])
    assert ids(await api.list("t2")) == newest_first(other)
    for cp in root[:3]:
        assert await api.get("t1", "", cp.id) is None
    for cp in root[-2:]:
        got = await api.get("t1", "", cp.id)
        assert got is not None and got.pending_writes == (w("task", value=cp.id),)
    assert await api.prune("t1", keep_last=2) == 0
    assert await api.prune("t1", keep_last=10) == 0
    assert await api.prune("nope", keep_last=1) == 0
    with pytest.raises(ValueError):
        await api.prune("t1", keep_last=-1)


async def test_prune_keeps_values_pruned_checkpoints_stored(api: Api) -> None:
    """Kept checkpoints whose unchanged values, or list chains, began in pruned ones."""
    parent: Checkpoint | None = None
    cps: list[Checkpoint] = []
    messages: list[str] = []
    for i in range(12):
        messages = [*messages, item(i, 300)]
        values = {"config": {"model": "m", "big": "c" * 5000}, "messages": messages, "n": i}
        record = step("t1", values, parent)
        await api.put(record)
        parent = record.checkpoint
        cps.append(parent)
    assert parent is not None
    assert parent.versions["config"] == cps[0].id  # set once, at the first checkpoint
    assert await api.prune("t1", keep_last=3) == 9
    await assert_loads(api, "t1", cps[-3:])
    # The thread goes on, appending to the list whose history was pruned.
    for i in range(12, 20):
        messages = [*messages, item(i, 300)]
        record = step("t1", {**parent.values, "messages": messages, "n": i}, parent)
        await api.put(record)
        parent = record.checkpoint
        cps.append(parent)
    await api.prune("t1", keep_last=1)
    await assert_loads(api, "t1", cps[-1:])
    assert await api.list("t1") == [await api.get("t1")]


async def test_prune_keeps_both_branches_of_a_fork_loadable(api: Api) -> None:
    base = step("t1", {"log": [item(0, 200)], "k": "v"}, None)
    await api.put(base)
    a = step("t1", {"log": [item(0, 200), item(1, 200)], "k": "v"}, base.checkpoint)
    await api.put(a)
    b = step("t1", {"log": [item(0, 200), item(2, 200)], "k": "v"}, base.checkpoint)
    await api.put(b, fork=True)
    assert await api.prune("t1", keep_last=2) == 1  # base goes; a and b stay
    await assert_loads(api, "t1", [a.checkpoint, b.checkpoint])


# -- copy_thread ---------------------------------------------------------------------------------


async def test_copy_thread_copies_every_namespace_and_write(api: Api) -> None:
    parent: Checkpoint | None = None
    root: list[Checkpoint] = []
    for i in range(4):
        record = step(
            "src",
            {"log": [item(j, 100) for j in range(i + 1)], "n": i, "fixed": "f"},
            parent,
            metadata={"i": i},
            writes=(w(f"task-{i}", "result", i),),
            next=(PlannedTask("a"),),
        )
        await api.put(record)
        parent = record.checkpoint
        root.append(parent)
    await api.put_writes("src", "", root[-1].id, [w("task-x", "interrupt", "?", "x")])
    child = await put_chain(api, "src", 2, ns="child:1")
    source_before = {ns: await api.list("src", ns) for ns in ("", "child:1")}

    await api.copy_thread("src", "dst")

    for ns in ("", "child:1"):
        copied = await api.list("dst", ns)
        original = await api.list("src", ns)
        assert original == source_before[ns]
        assert [dataclasses.replace(r, thread_id="src") for r in copied] == original
        assert all(r.thread_id == "dst" for r in copied)
    assert ids(await api.list("dst", "child:1")) == newest_first(child)
    infos = {i.thread_id: i for i in await api.list_threads()}
    assert infos["dst"].checkpoint_id == infos["src"].checkpoint_id == root[-1].id
    assert infos["dst"].status == infos["src"].status == "interrupted"

    # The copy is a thread of its own: it goes on from its head; the source does not move.
    nxt = step("dst", {**root[-1].values, "log": [*root[-1].values["log"], "more"]}, root[-1])
    await api.put(nxt)
    await assert_loads(api, "dst", [*root, nxt.checkpoint])
    assert ids(await api.list("src")) == newest_first(root)
    await api.delete_thread("src")
    await assert_loads(api, "dst", [*root, nxt.checkpoint])


async def test_copy_thread_refuses_a_target_with_checkpoints(api: Api) -> None:
    src = await put_chain(api, "src", 2)
    dst = await put_chain(api, "dst", 1, ns="child:1")  # any namespace counts
    with pytest.raises(ValueError, match="dst"):
        await api.copy_thread("src", "dst")
    assert ids(await api.list("dst", "child:1")) == newest_first(dst)
    assert await api.list("dst") == []
    with pytest.raises(ValueError):
        await api.copy_thread("src", "src")
    assert ids(await api.list("src")) == newest_first(src)


async def test_copy_of_an_unknown_thread_does_nothing(api: Api) -> None:
    await api.copy_thread("nope", "dst")
    assert await api.get("dst") is None
    assert await api.list_threads() == []


async def test_copy_then_prune_the_source_keeps_the_copy_whole(api: Api) -> None:
    parent: Checkpoint | None = None
    cps = []
    for i in range(6):
        record = step("src", {"log": [item(j, 200) for j in range(i + 1)], "c": 1}, parent)
        await api.put(record)
        parent = record.checkpoint
        cps.append(parent)
    await api.copy_thread("src", "dst")
    await api.prune("src", keep_last=1)
    await assert_loads(api, "dst", cps)
    await assert_loads(api, "src", cps[-1:])


# -- odd identifiers, in the thread-level operations ---------------------------------------------

ODD_THREADS = [
    "it's",
    "'; DROP TABLE threads; --",
    "Ωμέγα-線程-🧵",
    "a/b\\c",
    "../..",
    "%_*?[]",
    "",
]


@pytest.mark.parametrize("odd", ODD_THREADS)
async def test_odd_thread_ids_list_prune_copy(api: Api, odd: str) -> None:
    await _thread(api, "bystander", next=("a",))
    cps = await put_chain(api, odd, 4)
    await put_chain(api, odd, 2, ns=f"child:{odd}")
    infos = {i.thread_id: i for i in await api.list_threads()}
    assert infos[odd].checkpoint_id == cps[-1].id
    assert await api.prune(odd, keep_last=2) == 2
    target = odd + "-copy" if odd else "copy"
    await api.copy_thread(odd, target)
    assert ids(await api.list(target)) == newest_first(cps[-2:])
    assert len(await api.list(target, f"child:{odd}")) == 2
    assert {i.thread_id for i in await api.list_threads()} == {"bystander", odd, target}
    await api.delete_thread(odd)
    assert ids(await api.list(target)) == newest_first(cps[-2:])
    assert {i.thread_id for i in await api.list_threads()} == {"bystander", target}
