"""The PostgreSQL saver holds the rows of a long list's delta chain, so a load walks and reads
only the rows added since: loading turn 200 of a conversation costs what turn 10 does.

Bytes are counted on the wire (``WireCounter.received``, from ``wire_counter.py``).
"""

from __future__ import annotations

import asyncio

import pytest
from postgres_fixtures import chain, postgres_saver, query, saver, url
from wire_counter import WireCounter, wire

from threadline.checkpoint.postgres import PostgresSaver
from threadline.errors import SerializationError

# Fixtures of postgres_fixtures and wire_counter, imported for the tests here.
__all__ = ["saver", "url", "wire"]

ITEM = 1000  # characters per message
TURNS = 60  # a chain of well over MIN_BYTES


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
    assert saver.backend.chains.tips("t1", "")  # white box: nothing else tells what is held
    saver.delete_thread("t1")
    assert saver.backend.chains.tips("t1", "") == {}


@pytest.mark.parametrize("how", ["get_tuple", "list", "aget_tuple"])
def test_a_chain_let_go_while_its_load_was_out_is_read_again_whole(
    saver: PostgresSaver, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The load named a held tip, so the server sent nothing below it; if the chain is let go
    before the reply is decoded (another load or put moved it, or it was evicted), the load is
    read again naming no tips instead of failing as if the value were damaged."""
    records = chain("t1", TURNS, size=ITEM)
    for record in records:
        saver.put(record)
    assert saver.get_tuple("t1") is not None  # now held
    assert saver.backend.chains.tips("t1", "")  # white box: nothing else tells what is held
    real = saver.backend.chains.rows_below

    def let_go_first(*args: object) -> object:
        saver.backend.chains.clear()
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(saver.backend.chains, "rows_below", let_go_first)
    if how == "get_tuple":
        got = saver.get_tuple("t1")
    elif how == "aget_tuple":
        got = asyncio.run(saver.aget_tuple("t1"))
    else:
        got = next(iter(saver.list("t1", limit=1)))
    assert got is not None and got.checkpoint == records[-1].checkpoint
