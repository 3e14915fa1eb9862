"""Behaviour every checkpoint saver must share, through its sync and its async methods.

To cover a new saver, add one line to ``SAVER_FACTORIES`` in ``factories.py``. Every test runs
once per saver, and those taking ``api`` once per API flavour too (``sync`` calls
``get_tuple``/``put``/..., ``async`` calls ``aget_tuple``/``aput``/...).

Records are built as the engine builds them (``builders.py``): versions name the checkpoint at
which a key last changed, and a record's changes say which keys changed and which lists only grew.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import random
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from builders import item, make_cp, rec, step, stored, w
from factories import SAVER_FACTORIES

from threadline.checkpoint import (
    BaseSaver,
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    Retention,
    TaskWrite,
    ThreadInfo,
    new_checkpoint_id,
)
from threadline.checkpoint.changes import hints_of
from threadline.errors import ConcurrentUpdateError, SerializationError

# -- savers under test ---------------------------------------------------------------------------

OpenSaver = Callable[..., BaseSaver]


@pytest.fixture(params=sorted(SAVER_FACTORIES))
def open_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenSaver]:
    """Opens savers of one backend, each in its own corner; ``options`` go to the constructor."""
    factory = SAVER_FACTORIES[request.param]
    counter = itertools.count()
    with ExitStack() as stack:

        def open_(**options: Any) -> BaseSaver:
            where = tmp_path / f"saver-{next(counter)}"
            where.mkdir()
            return stack.enter_context(factory(where, **options))

        yield open_


@pytest.fixture
def saver(open_saver: OpenSaver) -> BaseSaver:
    return open_saver()


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


class Api:
    """One awaitable interface over either the sync or the async methods of a saver."""

    def __init__(self, saver: BaseSaver, mode: str) -> None:
        self.saver = saver
        self.mode = mode

    @property
    def sync(self) -> bool:
        return self.mode == "sync"

    async def get(
        self, thread_id: str, ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        if self.sync:
            return self.saver.get_tuple(thread_id, ns, checkpoint_id)
        return await self.saver.aget_tuple(thread_id, ns, checkpoint_id)

    async def list(
        self,
        thread_id: str,
        ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> list[CheckpointRecord]:
        if self.sync:
            return list(self.saver.list(thread_id, ns, filter=filter, before=before, limit=limit))
        return [
            r
            async for r in self.saver.alist(
                thread_id, ns, filter=filter, before=before, limit=limit
            )
        ]

    async def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        if self.sync:
            self.saver.put(record, fork=fork)
        else:
            await self.saver.aput(record, fork=fork)

    async def put_writes(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[TaskWrite]
    ) -> None:
        if self.sync:
            self.saver.put_writes(thread_id, ns, checkpoint_id, writes)
        else:
            await self.saver.aput_writes(thread_id, ns, checkpoint_id, writes)

    async def delete_thread(self, thread_id: str) -> None:
        if self.sync:
            self.saver.delete_thread(thread_id)
        else:
            await self.saver.adelete_thread(thread_id)

    async def list_threads(
        self, *, status: Any = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        if self.sync:
            return self.saver.list_threads(status=status, limit=limit)
        return await self.saver.alist_threads(status=status, limit=limit)

    async def prune(self, thread_id: str, *, keep_last: int) -> int:
        if self.sync:
            return self.saver.prune(thread_id, keep_last=keep_last)
        return await self.saver.aprune(thread_id, keep_last=keep_last)

    async def copy_thread(self, source: str, target: str) -> None:
        if self.sync:
            self.saver.copy_thread(source, target)
        else:
            await self.saver.acopy_thread(source, target)


@pytest.fixture
def api(saver: BaseSaver, mode: str) -> Api:
    return Api(saver, mode)


# -- helpers -------------------------------------------------------------------------------------


async def put_chain(
    api: Api,
    thread_id: str,
    n: int,
    *,
    ns: str = "",
    metadata: Callable[[int], dict[str, Any]] | None = None,
) -> list[Checkpoint]:
    """Save ``n`` checkpoints, each the parent of the next; returns them oldest first."""
    cps: list[Checkpoint] = []
    for i in range(n):
        record = step(
            thread_id,
            {"i": i},
            cps[-1] if cps else None,
            ns=ns,
            metadata=metadata(i) if metadata else {"i": i},
        )
        await api.put(record)
        cps.append(record.checkpoint)
    return cps


def ids(records: list[CheckpointRecord]) -> list[str]:
    return [r.checkpoint.id for r in records]


def newest_first(cps: list[Checkpoint]) -> list[str]:
    return [cp.id for cp in reversed(cps)]


class Opaque:
    """A plain class nobody registered with serde: must never be stored."""


async def history(api: Api, thread_id: str, ns: str = "") -> list[tuple[str, Any, Any]]:
    """Everything a thread namespace holds, as comparable data."""
    return [
        (r.checkpoint.id, r.checkpoint, r.metadata, r.pending_writes)  # type: ignore[misc]
        for r in await api.list(thread_id, ns)
    ]


async def assert_loads(
    api: Api, thread_id: str, expected: Sequence[Checkpoint], ns: str = ""
) -> None:
    """Each checkpoint loads by id with exactly its values (and lists in the same order)."""
    for cp in expected:
        got = await api.get(thread_id, ns, cp.id)
        assert got is not None, cp.id
        assert got.checkpoint == cp, cp.id


# -- put / get -----------------------------------------------------------------------------------


async def test_put_then_get_latest(api: Api) -> None:
    cps = await put_chain(api, "t1", 3)
    got = await api.get("t1")
    assert got is not None
    assert got.checkpoint == cps[-1]
    assert got.thread_id == "t1"
    assert got.checkpoint_ns == ""
    assert got.metadata == {"i": 2}
    assert got.pending_writes == ()


async def test_get_by_id(api: Api) -> None:
    cps = await put_chain(api, "t1", 3)
    for i, cp in enumerate(cps):
        got = await api.get("t1", "", cp.id)
        assert got is not None
        assert got.checkpoint == cp
        assert got.checkpoint.values == {"i": i}
        assert got.metadata == {"i": i}


async def test_versions_that_are_not_strings_are_refused(api: Api) -> None:
    """Records made by hand may version values with numbers; stored, they did not load back on
    every saver, so every saver refuses them, saying which, and stores nothing."""
    (first,) = await put_chain(api, "t1", 1)
    cp = make_cp({"log": ["x" * 200], "n": 1}, parent=first)
    cp = dataclasses.replace(cp, versions={"log": 7, "n": cp.id})  # type: ignore[dict-item]
    with pytest.raises(SerializationError, match="gives key 'log' the version 7 \\(int\\)"):
        await api.put(rec("t1", cp))
    got = await api.get("t1")
    assert got is not None and got.checkpoint == first


async def test_unknown_checkpoint_id_is_none(api: Api) -> None:
    await put_chain(api, "t1", 2)
    assert await api.get("t1", "", new_checkpoint_id()) is None
    assert await api.get("t1", "", "not-a-checkpoint-id") is None


async def test_unknown_thread_is_none(api: Api) -> None:
    await put_chain(api, "t1", 1)
    assert await api.get("nope") is None
    assert await api.get("nope", "", new_checkpoint_id()) is None
    assert await api.list("nope") == []


async def test_checkpoint_id_belongs_to_its_thread(api: Api) -> None:
    (cp,) = await put_chain(api, "t1", 1)
    assert await api.get("t2", "", cp.id) is None


async def test_putting_a_saved_checkpoint_again_is_refused(api: Api) -> None:
    cps = await put_chain(api, "t1", 2)
    before = await history(api, "t1")
    again = dataclasses.replace(cps[0], values={"i": 99})
    with pytest.raises(ConcurrentUpdateError):
        await api.put(rec("t1", again, metadata={"rev": 2}))
    assert await history(api, "t1") == before


async def test_a_record_without_hints_stores_every_value(api: Api) -> None:
    first = make_cp({"a": 1, "b": [1, 2]})
    await api.put(rec("t1", first))  # no changes given: everything is stored
    second = make_cp({"a": 1, "b": [1, 2, 3], "c": "new"}, parent=first)
    await api.put(rec("t1", second))
    await assert_loads(api, "t1", [first, second])


# -- list ----------------------------------------------------------------------------------------


async def test_list_newest_first(api: Api) -> None:
    cps = await put_chain(api, "t1", 5)
    records = await api.list("t1")
    assert ids(records) == newest_first(cps)
    assert [r.metadata for r in records] == [{"i": i} for i in reversed(range(5))]
    assert all(r.thread_id == "t1" and r.checkpoint_ns == "" for r in records)


def _meta(i: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"source": "loop" if i % 2 else "input", "step": i, "user": "ada"}
    if i % 3 == 0:
        meta["tag"] = None  # present but None, which is not the same as absent
    return meta


async def test_list_filter_one_key(api: Api) -> None:
    cps = await put_chain(api, "t1", 6, metadata=_meta)
    records = await api.list("t1", filter={"source": "loop"})
    assert ids(records) == [cps[5].id, cps[3].id, cps[1].id]
    assert all(r.metadata["source"] == "loop" for r in records)


async def test_list_filter_several_keys(api: Api) -> None:
    cps = await put_chain(api, "t1", 6, metadata=_meta)
    assert ids(await api.list("t1", filter={"source": "loop", "step": 3})) == [cps[3].id]
    assert ids(await api.list("t1", filter={"source": "loop", "step": 2})) == []
    assert ids(await api.list("t1", filter={"user": "ada", "source": "input"})) == [
        cps[4].id,
        cps[2].id,
        cps[0].id,
    ]


async def test_list_filter_absent_key(api: Api) -> None:
    cps = await put_chain(api, "t1", 6, metadata=_meta)
    assert await api.list("t1", filter={"missing": 1}) == []
    assert await api.list("t1", filter={"missing": None}) == []
    # ``None`` matches only where the key is present with the value None.
    assert ids(await api.list("t1", filter={"tag": None})) == [cps[3].id, cps[0].id]


async def test_list_empty_filter_matches_all(api: Api) -> None:
    cps = await put_chain(api, "t1", 3)
    assert ids(await api.list("t1", filter={})) == newest_first(cps)


async def test_list_filter_key_is_not_sql(api: Api) -> None:
    cps = await put_chain(api, "t1", 3)
    evil = {"'; DROP TABLE checkpoints; --": 1, 'a") OR 1=1 --': 2}
    assert await api.list("t1", filter=evil) == []
    assert ids(await api.list("t1")) == newest_first(cps)


async def test_list_filter_on_nested_value(api: Api) -> None:
    cps = await put_chain(
        api, "t1", 3, metadata=lambda i: {"writes": {"node": i % 2}, "parents": {}}
    )
    assert ids(await api.list("t1", filter={"writes": {"node": 1}})) == [cps[1].id]


async def test_list_before(api: Api) -> None:
    cps = await put_chain(api, "t1", 5)
    assert ids(await api.list("t1", before=cps[3].id)) == [cps[2].id, cps[1].id, cps[0].id]
    assert await api.list("t1", before=cps[0].id) == []
    # ``before`` need not be a saved id: anything newer than all of them lists everything.
    assert ids(await api.list("t1", before=new_checkpoint_id())) == newest_first(cps)


async def test_list_limit(api: Api) -> None:
    cps = await put_chain(api, "t1", 5)
    assert ids(await api.list("t1", limit=2)) == [cps[4].id, cps[3].id]
    assert ids(await api.list("t1", limit=1)) == [cps[4].id]
    assert ids(await api.list("t1", limit=10)) == newest_first(cps)
    assert await api.list("t1", limit=0) == []


async def test_list_filter_before_limit_combined(api: Api) -> None:
    cps = await put_chain(api, "t1", 10, metadata=_meta)
    got = await api.list("t1", filter={"source": "loop"}, before=cps[7].id, limit=2)
    assert ids(got) == [cps[5].id, cps[3].id]
    got = await api.list("t1", filter={"source": "loop"}, before=cps[7].id, limit=5)
    assert ids(got) == [cps[5].id, cps[3].id, cps[1].id]
    assert ids(await api.list("t1", before=cps[7].id, limit=2)) == [cps[6].id, cps[5].id]
    assert ids(await api.list("t1", filter={"source": "loop"}, limit=1)) == [cps[9].id]


async def test_list_limit_counts_only_matches(api: Api) -> None:
    # The only matches are the two oldest of many: a saver that limited before filtering (or
    # filtered one page only) would return nothing.
    cps = await put_chain(api, "t1", 150, metadata=lambda i: {"keep": i < 2, "i": i})
    assert ids(await api.list("t1", filter={"keep": True}, limit=2)) == [cps[1].id, cps[0].id]
    assert ids(await api.list("t1", filter={"keep": True}, limit=1)) == [cps[1].id]
    assert len(await api.list("t1")) == 150
    assert ids(await api.list("t1", before=cps[100].id, limit=3)) == [
        cps[99].id,
        cps[98].id,
        cps[97].id,
    ]


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


# -- values --------------------------------------------------------------------------------------

RICH: dict[str, Any] = {
    "tuple": (1, "two", (3.0, None)),
    "set": {1, 2, 3},
    "frozenset": frozenset({"a", "b"}),
    "aware": datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=2))),
    "utc": datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC),
    "nested": {"a": {"b": [1, {"c": (2, 3)}], "d": {}}, "e": []},
    "bytes": b"\x00\xffbinary\n",
    "empty_bytes": b"",
    "big": 2**62,
    "negative": -17,
    "float": 0.1,
    "bool": True,
    "none": None,
    "unicode": "héllo ✓ 世界",
    "list_of_tuples": [(1, 2), (3, 4)],
}


async def test_values_round_trip_rich_types(api: Api) -> None:
    cp_id = new_checkpoint_id()
    cp = Checkpoint(
        id=cp_id,
        parent_id=None,
        step=3,
        values=RICH,
        versions=dict.fromkeys(RICH, cp_id),
        next=(PlannedTask("a"), PlannedTask("b", arg={"x": (1, 2)}, send=True)),
        created_at=datetime.now(UTC).isoformat(),
        barriers={"join": ("a", "b")},
        updated_by=("a",),
    )
    writes = (w("t1", "result", {"out": (1, {2, 3}), "when": RICH["aware"]}),)
    meta = {"source": "loop", "step": 3, "writes": {"a": {"x": 1}}, "parents": {}}
    await api.put(rec("t1", cp, metadata=meta, writes=writes))
    got = await api.get("t1")
    assert got is not None
    assert got.checkpoint == cp
    assert got.metadata == meta
    assert got.pending_writes == writes
    values = got.checkpoint.values
    for key, expected in RICH.items():
        assert values[key] == expected, key
        assert type(values[key]) is type(expected), key
    assert type(values["nested"]["a"]["b"][1]["c"]) is tuple
    assert values["aware"].utcoffset() == timedelta(hours=2)
    assert isinstance(got.checkpoint.next, tuple)
    assert got.checkpoint.next[1] == PlannedTask("b", arg={"x": (1, 2)}, send=True)
    assert got.checkpoint.barriers == {"join": ("a", "b")}


async def test_history_is_isolated_from_callers(api: Api) -> None:
    values: dict[str, Any] = {"items": [1, 2], "nested": {"k": "v"}}
    meta: dict[str, Any] = {"source": "input", "tags": ["a"]}
    cp = make_cp(values)
    await api.put(rec("t1", cp, metadata=meta))
    values["items"].append(3)
    values["nested"]["k"] = "changed"
    values["new"] = True
    meta["tags"].append("b")

    got = await api.get("t1")
    assert got is not None
    assert got.checkpoint.values == {"items": [1, 2], "nested": {"k": "v"}}
    assert got.metadata == {"source": "input", "tags": ["a"]}

    # Mutating what a read returned does not change the next read either.
    got.checkpoint.values["items"].append(99)
    got.metadata["tags"].append("z")
    again = await api.get("t1")
    assert again is not None
    assert again.checkpoint.values == {"items": [1, 2], "nested": {"k": "v"}}
    assert again.metadata == {"source": "input", "tags": ["a"]}


async def test_write_values_are_isolated_from_callers(api: Api) -> None:
    (cp,) = await put_chain(api, "t1", 1)
    value: dict[str, Any] = {"messages": ["hi"]}
    await api.put_writes("t1", "", cp.id, [w("t", value=value)])
    value["messages"].append("changed")
    got = await api.get("t1")
    assert got is not None and got.pending_writes[0].value == {"messages": ["hi"]}


# -- odd identifiers -----------------------------------------------------------------------------

ODD_IDS = [
    "it's",
    'say "hi"',
    "'; DROP TABLE checkpoints; --",
    '"); DELETE FROM writes; --',
    "Ωμέγα-線程-🧵",
    "a/b\\c",
    "../../etc/passwd",
    "with space\tand\nnewline",
    "%_*?[]",
    "",
]


@pytest.mark.parametrize("odd", ODD_IDS)
async def test_odd_thread_ids(api: Api, odd: str) -> None:
    bystander = await put_chain(api, "bystander", 2)
    await api.put_writes("bystander", "", bystander[-1].id, [w("keep", value=1)])

    cps = await put_chain(api, odd, 2)
    await api.put_writes(odd, "", cps[-1].id, [w(odd, value=odd, name=odd)])
    child = await put_chain(api, odd, 1, ns=f"child:{odd}")

    got = await api.get(odd)
    assert got is not None
    assert got.thread_id == odd
    assert got.checkpoint == cps[-1]
    assert got.pending_writes == (w(odd, value=odd, name=odd),)
    assert ids(await api.list(odd)) == newest_first(cps)
    assert ids(await api.list(odd, f"child:{odd}")) == newest_first(child)
    assert ids(await api.list(odd, filter={odd: odd})) == []

    await api.delete_thread(odd)
    assert await api.get(odd) is None
    assert await api.get(odd, f"child:{odd}") is None

    kept = await api.get("bystander")
    assert kept is not None and kept.checkpoint == bystander[-1]
    assert kept.pending_writes == (w("keep", value=1),)
    assert ids(await api.list("bystander")) == newest_first(bystander)


# -- serialization failures ----------------------------------------------------------------------


async def test_unserializable_value_raises_and_writes_nothing(api: Api) -> None:
    cp = make_cp({"messages": ["a", "b", "c", {"payload": Opaque()}]})
    with pytest.raises(SerializationError) as info:
        await api.put(rec("t1", cp))
    # Values are encoded apart from the rest of the checkpoint: the path is relative to the state.
    assert info.value.path == "messages[3].payload"
    assert info.value.type_name is not None and info.value.type_name.endswith("Opaque")
    assert await api.get("t1") is None
    assert await api.list("t1") == []


async def test_unserializable_value_leaves_earlier_history_alone(api: Api) -> None:
    cps = await put_chain(api, "t1", 2)
    bad = make_cp({"x": Opaque()}, parent=cps[-1])
    with pytest.raises(SerializationError):
        await api.put(rec("t1", bad))
    got = await api.get("t1")
    assert got is not None and got.checkpoint == cps[-1]
    assert ids(await api.list("t1")) == newest_first(cps)


async def test_unserializable_pending_write_in_put_stores_nothing(api: Api) -> None:
    cp = make_cp({"ok": 1})
    writes = (w("good", value=1), w("bad", value=Opaque()))
    with pytest.raises(SerializationError):
        await api.put(rec("t1", cp, writes=writes))
    assert await api.get("t1") is None
    assert await api.get("t1", "", cp.id) is None


async def test_unserializable_metadata_stores_nothing(api: Api) -> None:
    cp = make_cp({"ok": 1})
    with pytest.raises(SerializationError):
        await api.put(rec("t1", cp, metadata={"who": Opaque()}))
    assert await api.get("t1") is None


async def test_unserializable_put_writes_stores_none_of_the_batch(api: Api) -> None:
    (cp,) = await put_chain(api, "t1", 1)
    await api.put_writes("t1", "", cp.id, [w("before", value=0)])
    with pytest.raises(SerializationError):
        await api.put_writes("t1", "", cp.id, [w("good", value=1), w("bad", value=Opaque())])
    got = await api.get("t1")
    assert got is not None and got.pending_writes == (w("before", value=0),)


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
            hints = hints_of(record)
            assert hints is not None and "messages" in hints.extends
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


# -- lifecycle -----------------------------------------------------------------------------------


def test_a_saver_is_a_context_manager(open_saver: OpenSaver) -> None:
    saver = open_saver()
    with saver as same:
        assert same is saver
        same.put(step("t1", {"x": 1}, None))
        assert same.get_tuple("t1") is not None
    saver.close()  # closing twice is fine


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
