"""Reading back what was put: the newest checkpoint or one by id, listings filtered, bounded
and limited, and a saver as a context manager.

Part of the conformance suite (``conformance_api.py``): every test runs on every saver.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from builders import make_cp, rec, step
from conformance_api import (
    Api,
    OpenSaver,
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

from threadline.checkpoint import new_checkpoint_id
from threadline.errors import ConcurrentUpdateError, SerializationError

# Fixtures of conformance_api, imported for the tests here.
__all__ = ["api", "mode", "open_saver", "saver"]

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


# -- lifecycle -----------------------------------------------------------------------------------


def test_a_saver_is_a_context_manager(open_saver: OpenSaver) -> None:
    saver = open_saver()
    with saver as same:
        assert same is saver
        same.put(step("t1", {"x": 1}, None))
        assert same.get_tuple("t1") is not None
    saver.close()  # closing twice is fine
