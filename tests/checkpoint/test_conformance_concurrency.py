"""Compare-and-set on a thread's head: stale parents and racing puts lose with nothing stored,
forks branch on purpose, and one saver serves many threads at once.

Part of the conformance suite (``conformance_api.py``): every test runs on every saver.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from builders import make_cp, rec, step, w
from conformance_api import (
    Api,
    api,
    assert_loads,
    history,
    ids,
    mode,
    newest_first,
    open_saver,
    put_chain,
    saver,
)

from threadline.checkpoint import BaseSaver, Checkpoint
from threadline.errors import ConcurrentUpdateError

# Fixtures of conformance_api, imported for the tests here.
__all__ = ["api", "mode", "open_saver", "saver"]

# -- compare-and-set -----------------------------------------------------------------------------


async def test_put_on_a_stale_parent_raises_and_writes_nothing(api: Api) -> None:
    cps = await put_chain(api, "t1", 3)
    await api.put_writes("t1", "", cps[-1].id, [w("keep", value=1)])
    before = await history(api, "t1")
    # Computed from cps[1] by a run that did not see cps[2]: new values, writes and metadata.
    stale = step(
        "t1",
        {"i": 100, "big": ["x"] * 50},
        cps[1],
        metadata={"source": "loop"},
        writes=(w("task", "result", {"out": 1}),),
    )
    with pytest.raises(ConcurrentUpdateError) as info:
        await api.put(stale)
    message = str(info.value)
    for part in ("'t1'", "''", cps[1].id, cps[2].id):
        assert part in message
    assert await history(api, "t1") == before
    assert await api.get("t1", "", stale.checkpoint.id) is None
    got = await api.get("t1")
    assert got is not None and got.checkpoint == cps[-1]
    assert got.pending_writes == (w("keep", value=1),)
    # The thread goes on from its real head, as if the stale put never happened.
    nxt = step("t1", {"i": 3, "big": ["y"]}, cps[-1])
    await api.put(nxt)
    await assert_loads(api, "t1", [*cps, nxt.checkpoint])


async def test_first_put_must_have_no_parent(api: Api) -> None:
    orphan = make_cp({"x": 1}, parent=make_cp({"x": 0}))
    with pytest.raises(ConcurrentUpdateError):
        await api.put(rec("t1", orphan))
    assert await api.get("t1") is None
    assert await api.list("t1") == []


async def test_second_put_without_parent_is_refused(api: Api) -> None:
    (first,) = await put_chain(api, "t1", 1)
    with pytest.raises(ConcurrentUpdateError) as info:
        await api.put(step("t1", {"i": 5}, None))
    assert first.id in str(info.value)
    assert ids(await api.list("t1")) == [first.id]


async def test_compare_and_set_is_per_namespace_and_thread(api: Api) -> None:
    await put_chain(api, "t1", 3)
    child = await put_chain(api, "t1", 2, ns="child:a")  # first put there: parent None
    other = await put_chain(api, "t2", 2)
    assert ids(await api.list("t1", "child:a")) == newest_first(child)
    assert ids(await api.list("t2")) == newest_first(other)


async def test_fork_branches_from_an_old_checkpoint(api: Api) -> None:
    cps = await put_chain(api, "t1", 3)
    branch = step("t1", {"i": 10}, cps[0], metadata={"source": "fork"})
    with pytest.raises(ConcurrentUpdateError):
        await api.put(branch)
    await api.put(branch, fork=True)
    got = await api.get("t1")
    assert got is not None and got.checkpoint == branch.checkpoint  # the branch is the head now
    assert ids(await api.list("t1")) == [branch.checkpoint.id, *newest_first(cps)]
    await assert_loads(api, "t1", [*cps, branch.checkpoint])
    # Later puts go on from the branch; the old head is no longer a valid parent.
    with pytest.raises(ConcurrentUpdateError):
        await api.put(step("t1", {"i": 3}, cps[-1]))
    nxt = step("t1", {"i": 11}, branch.checkpoint)
    await api.put(nxt)
    await assert_loads(api, "t1", [nxt.checkpoint])


def _race_once(saver: BaseSaver, thread_id: str, parent: Checkpoint) -> list[str]:
    """Two threads put children of ``parent`` at once; returns ``won``/``lost`` per thread."""
    records = [step(thread_id, {"who": who, "i": 1}, parent) for who in ("a", "b")]
    gate = threading.Barrier(2)
    results: list[str] = ["", ""]

    def run(k: int) -> None:
        gate.wait()
        try:
            saver.put(records[k])
            results[k] = "won"
        except ConcurrentUpdateError:
            results[k] = "lost"
        except BaseException as exc:  # reported by the caller
            results[k] = repr(exc)

    workers = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return results


def test_racing_puts_on_one_parent_exactly_one_wins(saver: BaseSaver) -> None:
    for round_ in range(50):
        thread_id = f"race-{round_}"
        root = step(thread_id, {"i": 0}, None)
        saver.put(root)
        results = _race_once(saver, thread_id, root.checkpoint)
        assert sorted(results) == ["lost", "won"], results
        history_ = list(saver.list(thread_id))
        assert len(history_) == 2
        assert history_[-1].checkpoint.id == root.checkpoint.id
        winner = "ab"[results.index("won")]
        assert history_[0].checkpoint.values == {"who": winner, "i": 1}


async def test_racing_aputs_on_one_parent_exactly_one_wins(saver: BaseSaver) -> None:
    for round_ in range(50):
        thread_id = f"arace-{round_}"
        root = step(thread_id, {"i": 0}, None)
        await saver.aput(root)
        records = [step(thread_id, {"who": who}, root.checkpoint) for who in ("a", "b")]
        results = await asyncio.gather(*(saver.aput(r) for r in records), return_exceptions=True)
        lost = [r for r in results if isinstance(r, ConcurrentUpdateError)]
        assert len(lost) == 1 and results.count(None) == 1, results
        assert len([r async for r in saver.alist(thread_id)]) == 2


# -- threads -------------------------------------------------------------------------------------


def test_one_saver_shared_by_many_threads(saver: BaseSaver) -> None:
    n_threads, per_thread = 8, 20
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            parent: Checkpoint | None = None
            for i in range(per_thread):
                record = step(f"thread-{k}", {"k": k, "i": i}, parent, metadata={"i": i})
                saver.put(record)
                cp = record.checkpoint
                saver.put_writes(f"thread-{k}", "", cp.id, [w(f"task-{i}", value=i)])
                got = saver.get_tuple(f"thread-{k}")
                assert got is not None and got.checkpoint == cp
                parent = cp
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert errors == []
    for k in range(n_threads):
        records = list(saver.list(f"thread-{k}"))
        assert [r.metadata["i"] for r in records] == list(reversed(range(per_thread)))
        assert all(len(r.pending_writes) == 1 for r in records)
    assert len(saver.list_threads()) == n_threads
