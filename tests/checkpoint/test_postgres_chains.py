"""The PostgreSQL saver holds the rows of a long list's delta chain, so a load walks and reads
only the rows added since: loading turn 200 of a conversation costs what turn 10 does.

Bytes are counted on the wire (``WireCounter.received``, from ``test_postgres_saver``).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import pytest
from test_postgres_saver import WireCounter, chain, postgres_saver, query, url, wire

from threadline import serde
from threadline.checkpoint.chains import MIN_BYTES, HeldChains
from threadline.checkpoint.layout import BlobRow
from threadline.checkpoint.postgres import PostgresSaver
from threadline.errors import SerializationError

__all__ = ["url", "wire"]  # fixtures of test_postgres_saver, imported for the tests here

ITEM = 1000  # characters per message
TURNS = 60  # a chain of well over MIN_BYTES


@pytest.fixture
def saver() -> Iterator[PostgresSaver]:
    with postgres_saver() as s:
        yield s


def received(wire: WireCounter, action: object) -> int:
    wire.reset()
    action()  # type: ignore[operator]
    return wire.received


def last_is_delta(saver: PostgresSaver, version: str) -> bool:
    sql = "SELECT base IS NOT NULL FROM {s}.threadline_blobs WHERE key = 'messages' AND version = "
    sql += "%s"
    return bool(query(saver.schema, sql, [version])[0][0])


def test_a_load_reads_only_the_rows_added_since_the_last_one(url: str, wire: WireCounter) -> None:
    records = chain("t1", TURNS, size=ITEM)
    with postgres_saver() as writer:
        for record in records[:-1]:
            writer.put(record)
        with postgres_saver(url=wire.url(url), schema=writer.schema) as reader:
            assert received(wire, lambda: reader.get_tuple("t1")) > TURNS * ITEM // 2
            writer.put(records[-1])  # another process adds a message
            assert last_is_delta(writer, records[-1].checkpoint.versions["messages"])
            got = []
            assert received(wire, lambda: got.append(reader.get_tuple("t1"))) < 4 * ITEM
            assert got[0] is not None and got[0].checkpoint == records[-1].checkpoint


def test_rows_below_a_held_tip_are_not_read_again(saver: PostgresSaver) -> None:
    """Damage below the tip goes unseen by the saver that holds those rows (it never reads
    them again); a cold saver reads them, checks them and refuses."""
    records = chain("t1", TURNS, size=ITEM)
    for record in records:
        saver.put(record)
    assert saver.get_tuple("t1") is not None
    tip = records[-1].checkpoint.versions["messages"]
    query(  # the oldest delta of the tip's chain (prefix rows have no bytes of their own)
        saver.schema,
        "UPDATE {s}.threadline_blobs SET crc32 = crc32 + 1 WHERE key = 'messages'"
        " AND version = (SELECT min(version) FROM {s}.threadline_blobs WHERE key = 'messages'"
        " AND chain_bytes > 0 AND version < %s AND start = (SELECT start FROM"
        " {s}.threadline_blobs WHERE key = 'messages' AND version = %s))",
        [tip, tip],
    )
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == records[-1].checkpoint
    with PostgresSaver(saver.url, schema=saver.schema) as cold, pytest.raises(SerializationError):
        cold.get_tuple("t1")


def test_a_tip_changed_in_the_database_is_read_and_checked(saver: PostgresSaver) -> None:
    records = chain("t1", TURNS, size=ITEM)
    for record in records:
        saver.put(record)
    assert saver.get_tuple("t1") is not None
    tip = records[-1].checkpoint.versions["messages"]
    query(
        saver.schema,
        "UPDATE {s}.threadline_blobs SET crc32 = crc32 + 1 WHERE key = 'messages' AND version = %s",
        [tip],
    )
    with pytest.raises(SerializationError, match="corrupted"):
        saver.get_tuple("t1")


def test_deleting_a_thread_forgets_its_chains(saver: PostgresSaver) -> None:
    for record in chain("t1", TURNS, size=ITEM):
        saver.put(record)
    assert saver.get_tuple("t1") is not None
    assert saver._chains.tips("t1", "")  # white box: nothing else tells what is held
    saver.delete_thread("t1")
    assert saver._chains.tips("t1", "") == {}


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
    (tip,) = chains.rows_below("t", "", {("k", "2"): zlib.crc32(rows[("k", "2")].data)}).values()
    assert tip.base is None and value(tip) == first + second
    third = plain_row("3", "2", ["x"])
    chains.extend("t", "", third, 7)  # a delta stored on the tip
    (tip,) = chains.rows_below("t", "", {("k", "3"): 7}).values()
    assert value(tip) == [*first, *second, "x"] and tip.items == 22
    fourth = plain_row("4", "3", ["y"])
    chains.remember("t", "", "k", "4", {("k", "4"): fourth})  # loaded above the tip
    (tip,) = chains.rows_below("t", "", {("k", "4"): zlib.crc32(fourth.data)}).values()
    assert value(tip)[-2:] == ["x", "y"]  # type: ignore[index]


def test_a_held_chain_of_plain_items_is_decoded_once_and_copied_for_each_load() -> None:
    chains = HeldChains()
    first = [{"text": "a" * MIN_BYTES, "tags": ["t"]}, ("frozen", 1)]
    rows = {("k", "1"): plain_row("1", None, first)}
    chains.remember("t", "", "k", "1", rows)
    crc = zlib.crc32(rows[("k", "1")].data)

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
    (tip,) = chains.rows_below("t", "", {("k", "1"): zlib.crc32(rows[("k", "1")].data)}).values()
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
    assert load("1", zlib.crc32(rows[("k", "1")].data)) == first
    assert held_items() is not None
    grown = [*first, {"text": "c"}]
    chains.remember("t", "", "k", "2", {("k", "2"): plain_row("2", None, grown)})
    assert held_items() is not None  # before any load: carried over
    assert load("2", zlib.crc32(plain_row("2", None, grown).data)) == grown
    other = [{"text": "z" * MIN_BYTES}, {"text": "c"}]
    chains.remember("t", "", "k", "3", {("k", "3"): plain_row("3", None, other)})
    assert held_items() is None  # not an extension: decoded at the next load
    assert load("3", zlib.crc32(plain_row("3", None, other).data)) == other


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
    crc = zlib.crc32(rows[("k", "1")].data)

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
