"""Values as they were put: rich types round-trip, callers' objects stay theirs, odd thread ids
are plain data, and what cannot be encoded is refused with nothing stored.

Part of the conformance suite (``conformance_api.py``): every test runs on every saver.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from builders import make_cp, rec, w
from conformance_api import Api, Opaque, api, ids, mode, newest_first, open_saver, put_chain, saver

from threadline.checkpoint import Checkpoint, PlannedTask, new_checkpoint_id
from threadline.errors import SerializationError

# Fixtures of conformance_api, imported for the tests here.
__all__ = ["api", "mode", "open_saver", "saver"]

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
