"""Damaged data in a SQLite file: a changed, cut or missing value fails clearly, naming its key,
and alone; stored bodies give their versions without the classes of their values.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from builders import item, make_cp, rec, step
from sqlite_files import execute, query

from threadline import serde
from threadline.checkpoint import Checkpoint, PlannedTask, SqliteSaver
from threadline.errors import SerializationError

# -- damaged data --------------------------------------------------------------------------------


@contextmanager
def two_threads(path: Path) -> Iterator[tuple[list[Checkpoint], Checkpoint]]:
    """Thread "t1" with a growing list (a delta chain) and bystander thread "t2"."""
    with SqliteSaver(path) as saver:
        parent: Checkpoint | None = None
        cps = []
        for i in range(4):
            log = [item(j, 400) for j in range(4 + i)]  # one full value, then three deltas
            record = step("t1", {"log": log, "k": ["v"]}, parent)  # a list: not inline
            saver.put(record)
            parent = record.checkpoint
            cps.append(parent)
        other = step("t2", {"log": [item(0, 400)], "k": ["v"]}, None)
        saver.put(other)
    yield cps, other.checkpoint


def flip_one_byte(data: bytes) -> bytes:
    return data[:100] + bytes([data[100] ^ 0x01]) + data[101:]


@pytest.mark.parametrize(
    "damage",
    [flip_one_byte, lambda data: data[:-7], lambda data: b""],
    ids=["flipped", "truncated", "emptied"],
)
def test_a_damaged_value_fails_clearly_and_alone(tmp_path: Path, damage: Any) -> None:
    path = tmp_path / "c.db"
    with two_threads(path) as (cps, other):
        where = "WHERE thread_id = 't1' AND key = 'log' AND version = ?"
        damaged = cps[2].id  # a delta in the middle of the chain
        ((data, base),) = query(path, f"SELECT data, base FROM blobs {where}", damaged)
        assert base == cps[1].id
        execute(path, f"UPDATE blobs SET data = ? {where}", damage(data), damaged)
        with SqliteSaver(path) as saver:
            for cp in cps[2:]:  # built on the damaged delta
                with pytest.raises(SerializationError, match="'log'"):
                    saver.get_tuple("t1", "", cp.id)
            with pytest.raises(SerializationError, match="'log'"):
                list(saver.list("t1"))
            for cp in cps[:2]:  # older checkpoints do not use it
                got = saver.get_tuple("t1", "", cp.id)
                assert got is not None and got.checkpoint == cp
            got = saver.get_tuple("t2")
            assert got is not None and got.checkpoint == other
            assert {i.thread_id for i in saver.list_threads()} == {"t1", "t2"}


def test_a_damaged_full_value_names_its_key(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with two_threads(path):
        execute(path, "UPDATE blobs SET data = zeroblob(length(data)) WHERE key = 'k'")
        with SqliteSaver(path) as saver:
            with pytest.raises(SerializationError, match="'k'"):
                saver.get_tuple("t1")
            with pytest.raises(SerializationError, match="'k'"):
                saver.get_tuple("t2")


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        ("UPDATE blobs SET items = 1000000 WHERE version = :v", "longer than its value"),
        ("UPDATE blobs SET base = version WHERE version = :v", "loops"),
        ("DELETE FROM blobs WHERE version = (SELECT base FROM blobs WHERE version = :v)", "lost"),
    ],
    ids=["too-long", "loop", "target-gone"],
)
def test_a_damaged_prefix_row_fails_clearly(tmp_path: Path, damage: str, message: str) -> None:
    path = tmp_path / "c.db"
    cps: list[Checkpoint] = []
    with SqliteSaver(path) as saver:
        parent: Checkpoint | None = None
        for i in range(30):
            record = step("t1", {"log": [item(j, 2000) for j in range(i + 1)]}, parent)
            saver.put(record)
            cps.append(parent := record.checkpoint)
    old = cps[1].versions["log"]
    assert query(path, "SELECT chain_bytes, length(data) FROM blobs WHERE version = ?", old) == [
        (0, 0)
    ]  # compacted into a prefix row
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(damage, {"v": old})
    with SqliteSaver(path) as saver, pytest.raises(SerializationError, match=message):
        saver.get_tuple("t1", "", cps[1].id)


def test_a_missing_value_names_its_key(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with two_threads(path) as (cps, _):
        execute(path, "DELETE FROM blobs WHERE thread_id = 't1' AND version = ?", cps[1].id)
        with SqliteSaver(path) as saver:
            with pytest.raises(SerializationError, match="'log'"):
                saver.get_tuple("t1")
            got = saver.get_tuple("t1", "", cps[0].id)
            assert got is not None and got.checkpoint == cps[0]


def test_a_stale_blob_cache_is_caught_in_the_transaction(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path) as a, SqliteSaver(path) as b:
        first = step("t1", {"log": [item(0)]}, None)
        a.put(first)  # a caches the metadata of the blob its next delta would extend
        b.delete_thread("t1")  # ...which another saver deletes
        again = step("t1", {"log": [item(0), item(1)]}, first.checkpoint)
        a.put(again, fork=True)
        got = b.get_tuple("t1")
        assert got is not None and got.checkpoint == again.checkpoint
    assert query(path, "SELECT base FROM blobs") == [(None,)]  # stored in full, not as a delta


def test_reading_versions_from_a_stored_body_needs_no_classes() -> None:
    from threadline.checkpoint.bodies import body_versions
    from threadline.checkpoint.layout import encode_record

    @serde.register(name="tests.checkpoint.Payload")
    @dataclass(frozen=True)
    class Payload:
        n: int

    cp = make_cp({"a": 1, "b": [2]}, next=(PlannedTask("x", arg=Payload(3), send=True),))
    body = encode_record(rec("t1", cp), lambda key, version: None).row.body
    assert body_versions(body) == cp.versions
    renamed = body.replace(b"checkpoint.Payload", b"checkpoint.Paylo4d")  # unknown class
    assert body_versions(renamed) == cp.versions
    assert body_versions(b"garbage") is None
