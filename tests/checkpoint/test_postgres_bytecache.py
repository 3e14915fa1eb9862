"""The PostgreSQL saver keeps the bytes of large values it wrote or read, and a load names them:
the server leaves their data out, so loading a long conversation costs no more each turn. A
row changed meanwhile (by another process, say) has another checksum and is sent again.

Bytes are counted on the wire (``WireCounter.received``, from ``wire_counter.py``); same
server and schema conventions as ``postgres_fixtures.py``.
"""

from __future__ import annotations

import secrets

from builders import step
from postgres_fixtures import chain, postgres_saver, query, saver, url
from wire_counter import WireCounter, counted, wire

from threadline.checkpoint import bytecache
from threadline.checkpoint.layout import BlobRow
from threadline.checkpoint.postgres import PostgresSaver
from threadline.checkpoint.seals import blob_crc

BIG = 200_000  # characters of a large value: well above bytecache.MIN_BYTES
SMALL = 20_000  # more than a load without the large value receives


def text(n: int = BIG) -> str:
    return secrets.token_hex(n // 2)  # incompressible, so TOAST does not hide the size


# Fixtures of postgres_fixtures and wire_counter, imported for the tests here.
__all__ = ["counted", "saver", "url", "wire"]


def received(wire: WireCounter, action: object) -> int:
    wire.reset()
    action()  # type: ignore[operator]
    return wire.received


def test_a_value_written_here_is_not_read_back(
    counted: tuple[PostgresSaver, WireCounter],
) -> None:
    saver, wire = counted
    record = step("t1", {"doc": text(), "n": 1}, None)
    saver.put(record)
    got: list[object] = []
    assert received(wire, lambda: got.append(saver.get_tuple("t1"))) < SMALL
    assert got[0] is not None and got[0].checkpoint == record.checkpoint  # type: ignore[attr-defined]
    assert received(wire, lambda: list(saver.list("t1"))) < SMALL
    assert received(wire, lambda: list(saver.list("t1", filter={}))) < SMALL


async def test_a_value_read_once_is_not_read_again(url: str, wire: WireCounter) -> None:
    """Another saver (another process) wrote it: the first load reads it, later ones do not,
    sync or async."""
    record = step("t1", {"doc": text(), "n": 1}, None)
    with postgres_saver() as writer:
        writer.put(record)
        with postgres_saver(url=wire.url(url), schema=writer.schema) as reader:
            assert received(wire, lambda: reader.get_tuple("t1")) > BIG
            assert received(wire, lambda: reader.get_tuple("t1")) < SMALL
            wire.reset()
            got = await reader.aget_tuple("t1", "", record.checkpoint.id)
            assert wire.received < SMALL
            assert got is not None and got.checkpoint == record.checkpoint


def test_a_row_rewritten_behind_the_saver_is_read_again(saver: PostgresSaver) -> None:
    """Same length, other bytes and checksum (another thread's value, with the checksum this
    row's fields give it): the cached bytes no longer match the row, so the row's own bytes are
    sent and used. (Copied with its checksum, another row's fails: ``seals.blob_crc``.)"""
    mine, theirs = text(), text()
    saver.put(step("t1", {"doc": mine}, None))
    saver.put(step("t2", {"doc": theirs}, None))
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint.values["doc"] == mine
    columns = "key, version, start, base, chain_bytes, full_bytes"
    where = "WHERE thread_id = %s AND key = 'doc'"
    (fields,) = query(
        saver.schema, f"SELECT {columns}, items FROM {{s}}.threadline_blobs {where}", ["t1"]
    )
    ((data,),) = query(saver.schema, f"SELECT data FROM {{s}}.threadline_blobs {where}", ["t2"])
    crc = blob_crc(BlobRow(*fields[:6], bytes(data), fields[6]))
    query(
        saver.schema,
        f"UPDATE {{s}}.threadline_blobs SET data = %s, crc32 = %s {where}",
        [bytes(data), crc, "t1"],
    )
    for _ in range(2):  # read again, then served from what was read
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint.values["doc"] == theirs


def test_a_long_conversation_loads_the_same_from_cache_and_from_sql(saver: PostgresSaver) -> None:
    """A list growing past the cache's threshold: deltas, full blobs, prefix rows written by
    compaction; every checkpoint loads the same through the warm saver as through a cold one."""
    records = chain("t1", 80, size=16_000)  # 1.3 MB: past the first full copy
    for record in records:
        saver.put(record)
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == record.checkpoint
    sizes = "SELECT max(length(data)) FROM {s}.threadline_blobs WHERE key = 'messages'"
    assert query(saver.schema, sizes)[0][0] >= bytecache.MIN_BYTES
    with PostgresSaver(saver.url, schema=saver.schema) as cold:
        for record in records[::-1]:
            warm_got = saver.get_tuple("t1", "", record.checkpoint.id)
            cold_got = cold.get_tuple("t1", "", record.checkpoint.id)
            assert warm_got is not None and cold_got is not None
            assert warm_got.checkpoint == cold_got.checkpoint == record.checkpoint
        assert [r.checkpoint for r in saver.list("t1")] == [r.checkpoint for r in cold.list("t1")]


async def test_deleting_or_copying_over_a_thread_forgets_its_bytes(saver: PostgresSaver) -> None:
    held = saver.backend.bytes  # what a load names (white box: nothing else tells what is kept)
    for thread_id in ("t1", "t2", "t3"):
        saver.put(step(thread_id, {"doc": text()}, None))
        assert len(held.held(thread_id, "")) == 1
    saver.delete_thread("t1")
    await saver.adelete_thread("t2")
    assert held.held("t1", "") == {} and held.held("t2", "") == {}
    saver.copy_thread("t3", "t1")
    assert held.held("t1", "") == {}
    got = saver.get_tuple("t1")
    assert got is not None and len(held.held("t1", "")) == 1
    saver.close()
    assert held.held("t1", "") == {} and held.held("t3", "") == {}
