"""Sealed rows on SQLite, as a user meets them: a damaged checkpoint row or write is a
``CorruptedDataError`` naming it, never a changed value or an upgrade hint; an intact record of
a newer threadline still asks for an upgrade; rows written before seals still load."""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path
from typing import Any

import pytest
from builders import counter_graph, item, step, w
from sqlite_files import execute, query

from threadline.cache.sqlite import SqliteCache
from threadline.checkpoint import SqliteSaver
from threadline.checkpoint.layout import CheckpointRow
from threadline.checkpoint.seals import BODY_SEAL, seal_row
from threadline.errors import CorruptedDataError, SerializationError
from threadline.serde import wire


def counted(path: Path, thread_id: str, steps: int) -> None:
    with SqliteSaver(path) as saver:
        config = {"configurable": {"thread_id": thread_id}}
        counter_graph(steps).compile(checkpointer=saver).invoke({"n": 0}, config)


def test_a_flipped_last_byte_of_a_checkpoint_row_is_caught_not_loaded(tmp_path: Path) -> None:
    """The counter lives in the row's body: a flipped last byte used to load ``n=7``."""
    path = tmp_path / "c.db"
    counted(path, "t", 6)
    ((cid, body),) = query(
        path, "SELECT checkpoint_id, body FROM checkpoints ORDER BY checkpoint_id DESC LIMIT 1"
    )
    flipped = body[:-1] + bytes([body[-1] ^ 0x01])
    execute(path, "UPDATE checkpoints SET body = ? WHERE checkpoint_id = ?", flipped, cid)
    with SqliteSaver(path) as saver, pytest.raises(CorruptedDataError) as caught:
        saver.get_tuple("t")
    message = str(caught.value)
    assert "SqliteSaver" in message and "'t'" in message and cid in message


def test_garbage_in_a_row_is_damage_not_a_newer_threadline(tmp_path: Path) -> None:
    """``x'deadbeef'`` starts with 0xde, which used to read as "serde format version 222,
    written by a newer threadline; upgrade"."""
    path = tmp_path / "c.db"
    counted(path, "bad", 3)
    execute(path, "UPDATE checkpoints SET body = x'deadbeef' WHERE step = 1")
    ((cid,),) = query(path, "SELECT checkpoint_id FROM checkpoints WHERE step = 1")
    with SqliteSaver(path) as saver, pytest.raises(CorruptedDataError) as caught:
        saver.get_tuple("bad", "", cid)
    assert "upgrade" not in str(caught.value) and "'bad'" in str(caught.value)
    assert isinstance(caught.value, SerializationError)


def test_an_intact_row_of_a_newer_serde_format_asks_for_an_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    counted(path, "t", 2)
    with SqliteSaver(path) as saver:  # the row's fields as the saver reads them
        stored = saver.get_tuple("t")
    assert stored is not None
    cp = stored.checkpoint
    ((metadata,),) = query(path, "SELECT metadata FROM checkpoints WHERE checkpoint_id = ?", cp.id)
    newer = bytes((wire.FORMAT_VERSION + 1, 0)) + b"\x90"
    row = seal_row(CheckpointRow(cp.id, cp.parent_id, cp.step, cp.created_at, newer, metadata))
    execute(path, "UPDATE checkpoints SET body = ? WHERE checkpoint_id = ?", row.body, cp.id)
    with SqliteSaver(path) as saver, pytest.raises(SerializationError, match="upgrade") as caught:
        saver.get_tuple("t")
    assert not isinstance(caught.value, CorruptedDataError)


def test_a_pending_write_moved_to_another_checkpoint_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path) as saver:
        first = step("t", {"log": [item(0, 10)]}, None)
        saver.put(first)
        second = step("t", {"log": [item(0, 10), item(1, 10)]}, first.checkpoint)
        saver.put(second)
        saver.put_writes("t", "", first.checkpoint.id, [w("task", value={"answer": 1})])
    execute(path, "UPDATE writes SET checkpoint_id = ?", second.checkpoint.id)
    with SqliteSaver(path) as saver, pytest.raises(CorruptedDataError, match="'result' write"):
        saver.get_tuple("t")


def test_rows_written_before_seals_still_load(tmp_path: Path) -> None:
    """Unsealed bodies and writes, blob CRC-32s of the data alone: what older savers wrote."""
    path = tmp_path / "c.db"
    with SqliteSaver(path) as saver:
        saver._sealed = False  # type: ignore[attr-defined]
        first = step("t", {"log": [item(0, 100)], "n": 1}, None, metadata={"who": "me"})
        saver.put(first)
        second = step("t", {"log": [item(0, 100), item(1, 100)], "n": 2}, first.checkpoint)
        saver.put(second)
        saver.put_writes("t", "", second.checkpoint.id, [w("task", value={"answer": 1})])
    with sqlite3.connect(path) as conn:
        for key, version, data in conn.execute("SELECT key, version, data FROM blobs").fetchall():
            conn.execute(
                "UPDATE blobs SET crc32 = ? WHERE key = ? AND version = ?",
                (zlib.crc32(data), key, version),
            )
    (body,) = query(path, "SELECT body FROM checkpoints LIMIT 1")[0]
    assert body[:2] == wire.PLAIN_HEADER and len(body) > BODY_SEAL
    with SqliteSaver(path) as saver:
        got = saver.get_tuple("t")
        assert got is not None and got.checkpoint == second.checkpoint
        assert [x.value for x in got.pending_writes] == [{"answer": 1}]
        older = saver.get_tuple("t", "", first.checkpoint.id)
        assert older is not None and older.metadata == {"who": "me"}


def test_a_damaged_or_moved_cache_entry_is_caught(tmp_path: Path) -> None:
    path = tmp_path / "cache.db"
    with SqliteCache[Any](path=path) as cache:
        cache.set({(("node",), "a"): ({"out": 1}, None), (("node",), "b"): ({"out": 2}, None)})
    rows = dict(query(path, "SELECT key, value FROM threadline_cache"))
    execute(path, "UPDATE threadline_cache SET value = ? WHERE key = 'a'", rows["b"])
    flipped = rows["b"][:-1] + bytes([rows["b"][-1] ^ 0x01])
    execute(path, "UPDATE threadline_cache SET value = ? WHERE key = 'b'", flipped)
    with SqliteCache[Any](path=path) as cache:
        for key in "ab":
            with pytest.raises(CorruptedDataError, match=f"entry '{key}' of namespace 'node'"):
                cache.get([(("node",), key)])
