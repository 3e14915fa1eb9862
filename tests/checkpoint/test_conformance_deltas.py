"""Storing only what changed: unchanged values are not encoded again, growing lists are stored
as deltas and compacted, and every version still loads, on forks too and in random histories.

Part of the conformance suite (``conformance_api.py``): every test runs on every saver.
"""

from __future__ import annotations

import dataclasses
import random

from builders import item, make_cp, rec, step, stored
from conformance_api import Api, Opaque, OpenSaver, api, assert_loads, ids, mode, open_saver, saver

from threadline.checkpoint import Checkpoint, new_checkpoint_id
from threadline.checkpoint.changes import Append, changes_of

# Fixtures of conformance_api, imported for the tests here.
__all__ = ["api", "mode", "open_saver", "saver"]


async def grow(
    api: Api, thread_id: str, n: int, parent: Checkpoint | None = None, first: int = 0
) -> list[Checkpoint]:
    """Append one 2 KB item per checkpoint to ``log``, long enough to be compacted often."""
    log = list(parent.values["log"]) if parent is not None else []
    cps: list[Checkpoint] = []
    for i in range(first, first + n):
        log = [*log, item(i, 2000)]
        record = step(thread_id, {"log": log, "n": i}, parent)
        await api.put(record, fork=parent is not None and not cps and first > 0)
        parent = record.checkpoint
        cps.append(parent)
    return cps


async def test_every_version_of_a_compacted_list_loads(api: Api) -> None:
    cps = await grow(api, "t1", 60)
    await assert_loads(api, "t1", cps)
    assert [r.checkpoint for r in await api.list("t1")] == cps[::-1]


async def test_forks_from_compacted_versions_grow_and_load(api: Api) -> None:
    cps = await grow(api, "t1", 40)
    branch = await grow(api, "t1", 30, parent=cps[3], first=1000)  # compacted long ago
    await assert_loads(api, "t1", [*cps, *branch])
    again = await grow(api, "t1", 30, parent=cps[-1], first=2000)  # back to the first line
    await assert_loads(api, "t1", [*cps, *branch, *again])


async def test_prune_and_copy_after_compaction(api: Api) -> None:
    cps = await grow(api, "t1", 50)
    await api.prune("t1", keep_last=5)
    await assert_loads(api, "t1", cps[-5:])
    more = await grow(api, "t1", 20, parent=cps[-1], first=100)
    await api.copy_thread("t1", "t2")
    await assert_loads(api, "t2", [*cps[-5:], *more])


# -- storing only what changed -------------------------------------------------------------------


async def test_unchanged_values_are_not_encoded_again(api: Api) -> None:
    first = step("t1", {"x": [1], "n": 0}, None)
    await api.put(first)
    # The engine says only "n" changed: "x" keeps its version, so the saver must not touch the
    # value it is given for it (here one that cannot even be encoded). (A small scalar, which
    # SQLite keeps in every checkpoint row, would be encoded again: it costs next to nothing.)
    cp = make_cp({"x": [1], "n": 1}, parent=first.checkpoint)
    cp = dataclasses.replace(cp, values={"x": Opaque(), "n": 1})
    assert cp.versions["x"] == first.checkpoint.id
    await api.put(rec("t1", cp, changes=stored({"n"})))
    got = await api.get("t1")
    assert got is not None and got.checkpoint.values == {"x": [1], "n": 1}


async def test_values_load_from_the_versions_that_hold_them(api: Api) -> None:
    parent: Checkpoint | None = None
    cps = []
    big = {"doc": "d" * 20_000}
    for i in range(15):
        values = {"big": big, "n": i, "third": i // 3, "flag": i % 2 == 0}
        record = step("t1", values, parent)
        await api.put(record)
        parent = record.checkpoint
        cps.append(parent)
    assert parent is not None
    assert parent.versions["big"] == cps[0].id
    assert parent.versions["third"] == cps[12].id
    await assert_loads(api, "t1", cps)
    assert [r.checkpoint for r in await api.list("t1")] == cps[::-1]


async def test_a_key_can_disappear_and_come_back(api: Api) -> None:
    a = step("t1", {"x": 1, "y": [1]}, None)
    await api.put(a)
    b = step("t1", {"x": 1}, a.checkpoint)
    await api.put(b)
    c = step("t1", {"x": 1, "y": [1]}, b.checkpoint)
    await api.put(c)
    await assert_loads(api, "t1", [a.checkpoint, b.checkpoint, c.checkpoint])


async def test_two_hundred_turns_of_a_growing_list(api: Api) -> None:
    parent: Checkpoint | None = None
    messages: list[str] = []
    cps = []
    for turn in range(200):
        messages = [*messages, item(2 * turn), item(2 * turn + 1)]
        record = step("chat", {"messages": messages, "turn": turn}, parent)
        if parent is not None:
            changes = changes_of(record)
            assert changes is not None and isinstance(changes.get("messages"), Append)
        await api.put(record)
        parent = record.checkpoint
        cps.append(parent)
        got = await api.get("chat")
        assert got is not None and got.checkpoint.values["messages"] == messages
    await assert_loads(api, "chat", cps)


async def test_a_list_that_shrinks_or_is_replaced(api: Api) -> None:
    seq = [
        ["a", "b"],
        ["a", "b", "c"],
        ["a", "b", "c", "d"],
        ["z"],  # replaced
        ["z", "y"],
        [],  # emptied
        ["q"],
    ]
    parent: Checkpoint | None = None
    cps = []
    for value in seq:
        record = step("t1", {"l": value}, parent)
        await api.put(record)
        parent = record.checkpoint
        cps.append(parent)
    await assert_loads(api, "t1", cps)


async def test_forks_sharing_a_list_chain_load_on_both_branches(api: Api) -> None:
    start = step("t1", {"log": [item(0, 500)]}, None)
    await api.put(start)
    a1 = step("t1", {"log": [item(0, 500), item(1, 500)]}, start.checkpoint)
    await api.put(a1)
    a2 = step("t1", {"log": [item(0, 500), item(1, 500), item(2, 500)]}, a1.checkpoint)
    await api.put(a2)
    # Branch b forks from the start: its deltas extend the same full value as a's.
    b1 = step("t1", {"log": [item(0, 500), item(10, 500)]}, start.checkpoint)
    await api.put(b1, fork=True)
    b2 = step("t1", {"log": [item(0, 500), item(10, 500), item(11, 500)]}, b1.checkpoint)
    await api.put(b2)
    # And branch c forks from the middle of a.
    c1 = step("t1", {"log": [item(0, 500), item(1, 500), item(20, 500)]}, a1.checkpoint)
    await api.put(c1, fork=True)
    every = [start, a1, a2, b1, b2, c1]
    await assert_loads(api, "t1", [r.checkpoint for r in every])
    assert ids(await api.list("t1")) == [r.checkpoint.id for r in reversed(every)]


async def test_hints_may_name_lists_whose_base_is_elsewhere(api: Api) -> None:
    """A record whose append names a version this namespace never stored still saves."""
    first = step("t1", {"log": ["a"]}, None)
    await api.put(first)
    cp = make_cp({"log": ["a", "b"]}, parent=first.checkpoint)
    changes = stored({"log"}, {"log": (new_checkpoint_id(), 1)})
    await api.put(rec("t1", cp, changes=changes))
    await assert_loads(api, "t1", [first.checkpoint, cp])


# -- a model-based check of histories with deltas, forks, prunes and copies ----------------------


def test_random_histories_match_a_model(open_saver: OpenSaver) -> None:
    """Random appends, replacements, forks, prunes and copies; every checkpoint left loads."""
    rng = random.Random(20241122)
    saver = open_saver()
    for round_ in range(6):
        thread = f"model-{round_}"
        model: dict[str, dict[str, Checkpoint]] = {thread: {}}
        heads: dict[str, Checkpoint | None] = {thread: None}
        for _ in range(60):
            name = rng.choice(sorted(model))
            head = heads[name]
            op = rng.random()
            if head is not None and op < 0.1:  # fork from a random kept checkpoint
                base = rng.choice(sorted(model[name].values(), key=lambda c: c.id))
                fork = True
            else:
                base, fork = head, False
            log = list(base.values["log"]) if base else []
            counter = base.values["counter"] if base else 0
            if op < 0.6 or not log:
                log += [f"{name}:{len(log)}:" + "x" * rng.randint(1, 400)]
            elif op < 0.7:
                log = log[: rng.randint(0, len(log))]
            else:
                counter += 1
            record = step(name, {"log": log, "counter": counter, "const": "c" * 100}, base)
            saver.put(record, fork=fork)
            model[name][record.checkpoint.id] = record.checkpoint
            heads[name] = record.checkpoint
            roll = rng.random()
            if roll < 0.08:
                keep = rng.randint(1, 4)
                kept = sorted(model[name])[-keep:]
                saver.prune(name, keep_last=keep)
                model[name] = {cid: model[name][cid] for cid in kept}
            elif roll < 0.12 and len(model) < 4:
                target = f"{name}-copy{len(model)}"
                saver.copy_thread(name, target)
                model[target] = dict(model[name])
                heads[target] = heads[name]
        for name, cps in model.items():
            assert [r.checkpoint.id for r in saver.list(name)] == sorted(cps, reverse=True)
            for cp in cps.values():
                got = saver.get_tuple(name, "", cp.id)
                assert got is not None and got.checkpoint == cp, (name, cp.id)
