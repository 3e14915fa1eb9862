"""Namespaces kept apart, threads deleted whole, and the pending writes of a checkpoint: added,
replaced, kept in order.

Part of the conformance suite (``conformance_api.py``): every test runs on every saver.
"""

from __future__ import annotations

from builders import make_cp, rec, w
from conformance_api import Api, api, ids, mode, newest_first, open_saver, put_chain, saver

# Fixtures of conformance_api, imported for the tests here.
__all__ = ["api", "mode", "open_saver", "saver"]

# -- namespaces and deletion ---------------------------------------------------------------------


async def test_namespaces_are_separate(api: Api) -> None:
    root = await put_chain(api, "t1", 2, ns="")
    child = await put_chain(api, "t1", 3, ns="child:abc")
    got_root = await api.get("t1", "")
    got_child = await api.get("t1", "child:abc")
    assert got_root is not None and got_root.checkpoint == root[-1]
    assert got_child is not None and got_child.checkpoint == child[-1]
    assert got_child.checkpoint_ns == "child:abc"
    assert ids(await api.list("t1", "")) == newest_first(root)
    assert ids(await api.list("t1", "child:abc")) == newest_first(child)
    assert await api.get("t1", "", child[0].id) is None
    assert await api.get("t1", "child:abc", root[0].id) is None
    assert await api.get("t1", "child:other") is None


async def test_namespace_writes_are_separate(api: Api) -> None:
    cp = make_cp()
    await api.put(rec("t1", cp, ns=""))
    await api.put(rec("t1", cp, ns="child:abc"))  # the same id in two namespaces
    await api.put_writes("t1", "child:abc", cp.id, [w("a", value=1)])
    root = await api.get("t1", "", cp.id)
    child = await api.get("t1", "child:abc", cp.id)
    assert root is not None and root.pending_writes == ()
    assert child is not None and child.pending_writes == (w("a", value=1),)


async def test_delete_thread_removes_every_namespace_and_nothing_else(api: Api) -> None:
    await put_chain(api, "t1", 2, ns="")
    doomed = await put_chain(api, "t1", 2, ns="child:abc")
    await api.put_writes("t1", "child:abc", doomed[-1].id, [w("a", value=1)])
    keep = await put_chain(api, "t2", 2)
    keep_child = await put_chain(api, "t2", 1, ns="child:abc")
    await api.put_writes("t2", "", keep[-1].id, [w("b", value=2)])

    await api.delete_thread("t1")

    assert await api.get("t1") is None
    assert await api.get("t1", "child:abc") is None
    assert await api.list("t1") == []
    assert await api.list("t1", "child:abc") == []
    got = await api.get("t2")
    assert got is not None and got.checkpoint == keep[-1]
    assert got.pending_writes == (w("b", value=2),)
    assert ids(await api.list("t2")) == newest_first(keep)
    assert ids(await api.list("t2", "child:abc")) == newest_first(keep_child)

    # Writes went too: saving the same checkpoint id again (a branch: its parent is gone)
    # starts with none.
    await api.put(rec("t1", doomed[-1], ns="child:abc"), fork=True)
    again = await api.get("t1", "child:abc")
    assert again is not None and again.pending_writes == ()


async def test_delete_unknown_thread_is_a_no_op(api: Api) -> None:
    cps = await put_chain(api, "t1", 1)
    await api.delete_thread("nope")
    assert ids(await api.list("t1")) == newest_first(cps)


# -- pending writes ------------------------------------------------------------------------------


async def test_put_with_pending_writes(api: Api) -> None:
    first = make_cp({"x": 1})
    await api.put(rec("t1", first))
    writes = (w("task-1", "result", {"x": 2}, "a"), w("task-2", "error", "boom", "b"))
    cp = make_cp({"x": 2}, parent=first)
    await api.put(rec("t1", cp, writes=writes))
    got = await api.get("t1")
    assert got is not None
    assert got.checkpoint == cp
    assert got.pending_writes == writes
    by_id = await api.get("t1", "", cp.id)
    assert by_id is not None and by_id.pending_writes == writes
    listed = await api.list("t1")
    assert [r.pending_writes for r in listed] == [writes, ()]


async def test_put_writes_adds_to_a_saved_checkpoint(api: Api) -> None:
    (cp,) = await put_chain(api, "t1", 1)
    await api.put_writes("t1", "", cp.id, [w("t-a", value=1)])
    await api.put_writes("t1", "", cp.id, [w("t-b", value=2), w("t-c", "interrupt", value=3)])
    got = await api.get("t1")
    assert got is not None
    assert got.pending_writes == (w("t-a", value=1), w("t-b", value=2), w("t-c", "interrupt", 3))


async def test_put_writes_replaces_same_task_and_kind(api: Api) -> None:
    (cp,) = await put_chain(api, "t1", 1)
    await api.put_writes("t1", "", cp.id, [w("t-a", "result", 1), w("t-b", "result", 2)])
    await api.put_writes("t1", "", cp.id, [w("t-a", "result", 10)])
    await api.put_writes("t1", "", cp.id, [w("t-a", "result", 10)])  # idempotent
    await api.put_writes("t1", "", cp.id, [w("t-a", "interrupt", "ask")])  # distinct kind
    got = await api.get("t1")
    assert got is not None
    assert got.pending_writes == (
        w("t-a", "result", 10),
        w("t-b", "result", 2),
        w("t-a", "interrupt", "ask"),
    )


async def test_put_writes_empty_is_a_no_op(api: Api) -> None:
    (cp,) = await put_chain(api, "t1", 1)
    await api.put_writes("t1", "", cp.id, [])
    got = await api.get("t1")
    assert got is not None and got.pending_writes == ()


async def test_writes_keep_insertion_order(api: Api) -> None:
    (cp,) = await put_chain(api, "t1", 1)
    # Deliberately not in any sorted order of task id, kind or name.
    order = [
        w("zeta", "result", 1, "n3"),
        w("alpha", "resume", 2, "n1"),
        w("mid", "error", 3, "n9"),
        w("alpha", "interrupt", 4, "n1"),
        w("beta", "breakpoint", 5, "n0"),
    ]
    await api.put_writes("t1", "", cp.id, order[:2])
    await api.put_writes("t1", "", cp.id, order[2:3])
    await api.put_writes("t1", "", cp.id, order[3:])
    for _ in range(2):  # stable across reads
        got = await api.get("t1")
        assert got is not None and list(got.pending_writes) == order
    # Replacing a write keeps its place.
    await api.put_writes("t1", "", cp.id, [w("alpha", "resume", 20, "n1")])
    got = await api.get("t1")
    assert got is not None
    assert [(x.task_id, x.kind, x.value) for x in got.pending_writes] == [
        ("zeta", "result", 1),
        ("alpha", "resume", 20),
        ("mid", "error", 3),
        ("alpha", "interrupt", 4),
        ("beta", "breakpoint", 5),
    ]


async def test_writes_are_per_checkpoint(api: Api) -> None:
    a, b = await put_chain(api, "t1", 2)
    await api.put_writes("t1", "", a.id, [w("x", value="on a")])
    await api.put_writes("t1", "", b.id, [w("x", value="on b")])
    got_a = await api.get("t1", "", a.id)
    got_b = await api.get("t1", "", b.id)
    assert got_a is not None and got_a.pending_writes == (w("x", value="on a"),)
    assert got_b is not None and got_b.pending_writes == (w("x", value="on b"),)
