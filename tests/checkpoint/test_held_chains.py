"""``chains.HeldChains``, the long lists a saver holds between loads: on its own, and in every
saver that uses it, which must stay right when another process rewrites the thread under it,
even with the same checkpoint ids and versions.

A version's value never changes in normal use (versions are new checkpoint ids), but versions
can be chosen by hand, or a thread deleted and written again from the same records with other
values. A held chain whose tip has the version the storage now holds with other bytes must not
be grown by the next put, or a later load would return the old values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from builders import changes_for, item, rec, step
from factories import SAVER_FACTORIES

from threadline import serde
from threadline.checkpoint import BaseSaver, Checkpoint, CheckpointRecord, FileSaver, SqliteSaver
from threadline.checkpoint.chains import MIN_BYTES, HeldChains
from threadline.checkpoint.layout import BlobRow
from threadline.checkpoint.seals import blob_crc

TURNS = 40  # 40 KB: a chain long enough to be held


@pytest.fixture(params=["files", "postgres", "redis", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSaver]:
    with SAVER_FACTORIES[request.param](tmp_path) as instance:
        yield instance


def twin(saver: BaseSaver) -> AbstractContextManager[BaseSaver]:
    """Another saver on the same storage, as another process would open it."""
    if isinstance(saver, SqliteSaver):
        return SqliteSaver(saver.path)
    if isinstance(saver, FileSaver):
        return FileSaver(saver.directory)
    if type(saver).__name__ == "RedisSaver":
        from threadline.checkpoint.redis import RedisSaver

        return RedisSaver(saver.url, prefix=saver.prefix)  # type: ignore[attr-defined]
    from postgres_fixtures import postgres_saver

    return postgres_saver(schema=saver.schema)  # type: ignore[attr-defined]


def conversation(thread_id: str, texts: list[str]) -> list[CheckpointRecord]:
    """One checkpoint per message, the list growing by one each time."""
    records: list[CheckpointRecord] = []
    parent: Checkpoint | None = None
    for i in range(len(texts)):
        record = step(thread_id, {"messages": texts[: i + 1]}, parent)
        records.append(record)
        parent = record.checkpoint
    return records


@contextmanager
def rewritten(saver: BaseSaver, records: list[CheckpointRecord]) -> Iterator[list[Checkpoint]]:
    """The thread deleted and written again by another saver: same ids, other messages."""
    again: list[Checkpoint] = []
    with twin(saver) as other:
        other.delete_thread(records[0].thread_id)
        for record in records:
            messages = [m.replace("x", "z") for m in record.checkpoint.values["messages"]]
            cp = dataclasses.replace(record.checkpoint, values={"messages": messages})
            other.put(
                rec(record.thread_id, cp, changes=changes_for(again[-1] if again else None, cp))
            )
            again.append(cp)
        yield again


def test_a_tip_rewritten_with_the_same_version_is_not_grown_from(saver: BaseSaver) -> None:
    records = conversation("t", [item(i) for i in range(TURNS)])
    for record in records:
        saver.put(record)
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == records[-1].checkpoint  # now held
    with rewritten(saver, records) as again:
        got = saver.get_tuple("t")
        assert got is not None and got.checkpoint == again[-1]
        latest = step("t", {"messages": [*again[-1].values["messages"], "new"]}, again[-1])
        saver.put(latest)
        got = saver.get_tuple("t")
        assert got is not None and got.checkpoint == latest.checkpoint


# -- HeldChains on its own ----------------------------------------------------------------------


def row(version: str, base: str | None, size: int) -> BlobRow:
    return BlobRow("k", version, "1", base, 0, 0, b"x" * size, None)


def test_held_chains_need_every_row_and_grow_only_from_their_tip() -> None:
    chains = HeldChains(max_bytes=40 * MIN_BYTES)
    full, delta = row("1", None, MIN_BYTES), row("2", "1", 10)
    chains.remember("t", "", "k", "2", {("k", "2"): delta})  # its base is missing
    assert chains.tips("t", "") == {}
    chains.remember("t", "", "k", "2", {("k", "1"): full, ("k", "2"): delta})
    assert set(chains.tips("t", "")) == {("k", "2")}
    chains.extend("t", "", row("3", "1", 10), 0)  # a fork from below the tip: not this chain
    assert set(chains.tips("t", "")) == {("k", "2")}
    chains.extend("t", "", row("3", "2", 10), 0)
    assert set(chains.rows_below("t", "", {("k", "3"): 0})) == {("k", "1"), ("k", "2"), ("k", "3")}
    assert chains.rows_below("t", "", {("k", "3"): 1}) == {}  # the tip changed in the database
    assert chains.rows_below("t", "", {("k", "2"): 0}) == {}  # no longer the tip


def plain_row(version: str, base: str | None, items: list[str]) -> BlobRow:
    data = serde.DEFAULT.dumps(items)
    return BlobRow("k", version, "1", base, len(data), 0, data, None)


def value(row: BlobRow) -> object:
    """What a load makes of a held row: its decoded items copied, or its bytes decoded."""
    return row.value() if row.value is not None else serde.DEFAULT.loads(row.data)


def test_a_chain_of_plain_lists_is_held_and_loaded_as_one_value() -> None:
    chains = HeldChains()
    first, second = ["a" * MIN_BYTES], [f"m{i}" for i in range(20)]  # array16 and fixarray
    rows = {("k", "1"): plain_row("1", None, first), ("k", "2"): plain_row("2", "1", second)}
    chains.remember("t", "", "k", "2", rows)
    (tip,) = chains.rows_below("t", "", {("k", "2"): blob_crc(rows[("k", "2")])}).values()
    assert tip.base is None and value(tip) == first + second
    third = plain_row("3", "2", ["x"])
    chains.extend("t", "", third, 7)  # a delta stored on the tip
    (tip,) = chains.rows_below("t", "", {("k", "3"): 7}).values()
    assert value(tip) == [*first, *second, "x"] and tip.items == 22
    fourth = plain_row("4", "3", ["y"])
    chains.remember("t", "", "k", "4", {("k", "4"): fourth})  # loaded above the tip
    (tip,) = chains.rows_below("t", "", {("k", "4"): blob_crc(fourth)}).values()
    assert value(tip)[-2:] == ["x", "y"]  # type: ignore[index]


def test_a_held_chain_of_plain_items_is_decoded_once_and_copied_for_each_load() -> None:
    chains = HeldChains()
    first = [{"text": "a" * MIN_BYTES, "tags": ["t"]}, ("frozen", 1)]
    rows = {("k", "1"): plain_row("1", None, first)}
    chains.remember("t", "", "k", "1", rows)
    crc = blob_crc(rows[("k", "1")])

    def load() -> list:
        (tip,) = chains.rows_below("t", "", {("k", "1"): crc}).values()
        assert tip.value is not None and not tip.data  # held decoded, no bytes to decode
        return tip.value()  # type: ignore[return-value]

    one, two = load(), load()
    assert one == two == first
    assert one[0] is not two[0] and one[0]["tags"] is not two[0]["tags"]
    assert one[0]["text"] is two[0]["text"] and one[1] is two[1]  # immutable: shared
    one[0]["tags"].append("changed")
    assert load() == first


def test_a_held_chain_with_an_item_that_is_not_plain_is_decoded_at_each_load() -> None:
    chains = HeldChains()
    rows = {("k", "1"): plain_row("1", None, ["a" * MIN_BYTES])}
    chains.remember("t", "", "k", "1", rows)
    (tip,) = chains.rows_below("t", "", {("k", "1"): blob_crc(rows[("k", "1")])}).values()
    assert tip.value is not None
    chains.extend("t", "", plain_row("2", "1", [{"ids": {1, 2}}]), 5)  # a set: not shared
    (tip,) = chains.rows_below("t", "", {("k", "2"): 5}).values()
    assert tip.value is None and value(tip) == ["a" * MIN_BYTES, {"ids": {1, 2}}]


def test_held_chains_keep_neither_small_nor_oversized_ones_and_stay_bounded() -> None:
    chains = HeldChains(max_bytes=8 * MIN_BYTES)
    chains.remember("t", "", "k", "1", {("k", "1"): row("1", None, MIN_BYTES - 1)})
    assert chains.tips("t", "") == {}  # its rows come with a load anyway
    chains.remember("t", "", "k", "1", {("k", "1"): row("1", None, 3 * MIN_BYTES)})
    assert chains.tips("t", "") == {}  # more than a quarter of the bound
    for thread in "abcdef":
        chains.remember(thread, "", "k", "1", {("k", "1"): row("1", None, 2 * MIN_BYTES)})
    assert [t for t in "abcdef" if chains.tips(t, "")] == ["c", "d", "e", "f"]


def test_held_chains_account_for_what_they_hold_as_they_grow() -> None:
    chains = HeldChains(max_bytes=40 * MIN_BYTES)  # a chain may take 10 * MIN_BYTES

    def held() -> int:  # white box: what the chains hold, against the running total
        return sum(c.size for ns in chains._chains.values() for c in ns.values())

    pool = {("k", "0"): plain_row("0", None, ["a" * MIN_BYTES])}
    chains.remember("t", "", "k", "0", pool)
    was_held = []
    for i in range(1, 200, 2):  # loads that each bring two new deltas, until too big to hold
        for v in (i, i + 1):
            pool[("k", str(v))] = plain_row(str(v), str(v - 1), ["b" * 999])
        chains.remember("t", "", "k", str(i + 1), pool)
        was_held.append(bool(chains.tips("t", "")))
        assert chains._size == held()
    assert was_held[0] and not was_held[-1] and chains._size == 0


def test_a_chain_stored_again_in_full_keeps_the_items_it_had_decoded() -> None:
    """Compaction stores the whole list again: the held items carry over (only the new ones
    are decoded) when the new blob starts with the old items, and are decoded anew if not."""
    chains = HeldChains()
    first = [{"text": "a" * MIN_BYTES}, {"text": "b"}]

    def held_items() -> object:  # white box: what the chain holds decoded
        return chains._chains[("t", "")]["k"].items

    def load(version: str, crc: int) -> list:
        (tip,) = chains.rows_below("t", "", {("k", version): crc}).values()
        return tip.value() if tip.value is not None else serde.DEFAULT.loads(tip.data)

    rows = {("k", "1"): plain_row("1", None, first)}
    chains.remember("t", "", "k", "1", rows)
    assert load("1", blob_crc(rows[("k", "1")])) == first
    assert held_items() is not None
    grown = [*first, {"text": "c"}]
    chains.remember("t", "", "k", "2", {("k", "2"): plain_row("2", None, grown)})
    assert held_items() is not None  # before any load: carried over
    assert load("2", blob_crc(plain_row("2", None, grown))) == grown
    other = [{"text": "z" * MIN_BYTES}, {"text": "c"}]
    chains.remember("t", "", "k", "3", {("k", "3"): plain_row("3", None, other)})
    assert held_items() is None  # not an extension: decoded at the next load
    assert load("3", blob_crc(plain_row("3", None, other))) == other


@pytest.mark.parametrize(
    "first",
    [
        [{"role": "user", "text": "a" * MIN_BYTES}, {"role": "ai", "text": "b"}],  # all flat dicts
        ["a" * MIN_BYTES, "b"],  # all immutable
    ],
)
def test_a_held_chain_of_items_all_alike_hands_out_copies(first: list) -> None:
    chains = HeldChains()
    rows = {("k", "1"): plain_row("1", None, first)}
    chains.remember("t", "", "k", "1", rows)
    crc = blob_crc(rows[("k", "1")])

    def load() -> list:
        (tip,) = chains.rows_below("t", "", {("k", "1"): crc}).values()
        return tip.value()  # type: ignore[misc, return-value]

    one, two = load(), load()
    assert one == two == first and one is not two
    assert all(a is not b for a, b in zip(one, two, strict=True) if isinstance(a, dict))
    if isinstance(one[0], dict):
        one[0]["role"] = "changed"
    one.append("stray")
    assert load() == first


def test_values_too_small_to_hold_leave_nothing_behind() -> None:
    """Small values are stored and loaded on every thread: none may leave an entry behind."""
    chains = HeldChains()
    small_chain = {("k", "1"): row("1", None, 10), ("k", "2"): row("2", "1", 10)}
    for t in range(100):
        chains.stored(f"s{t}", "", [row("1", None, 10)])
        chains.remember(f"r{t}", "", "k", "2", small_chain)
    assert chains._chains == {} and chains._size == 0  # white box: nothing else tells
    chains.stored("t", "", [row("1", None, MIN_BYTES)])
    assert chains.tips("t", "")
    chains.stored("t", "", [row("2", None, 10)])  # the value replaced by a small one
    assert chains._chains == {} and chains._size == 0
