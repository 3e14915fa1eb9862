"""Damaged records on every persistent saver: caught, named and alone, never a wrong value.

Three threads (``a`` is damaged, ``b`` its partner in swaps, ``c`` a bystander) of four
checkpoints each: a list that grows (full blob and deltas), a changed list, an inline counter,
metadata and pending writes. For every record of ``a`` that the saver decodes
(``damage_stores``), each damage in turn -- one byte flipped, the record cut short, replaced
with garbage, swapped with ``b``'s record of the same kind -- is made, a fresh saver reads
every checkpoint of every thread and its history, and the record is restored. Each read gives
exactly what was stored or raises ``CorruptedDataError`` naming the thread and never advising
an upgrade; reads of ``c`` are unaffected; the damage is caught by some read; every thread is
still listed and ``scan_damage`` names the damaged ones. Positions and
garbage come from a seeded ``random.Random``, so a failure is reproduced by its test id.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from builders import item, step, w
from damage_stores import FileStore, Record, RedisStore, Store, postgres_store, sqlite_store
from postgres_fixtures import postgres_saver
from redis_fixtures import REDIS_URL, redis_saver
from services import postgres_url

from threadline.checkpoint import BaseSaver, FileSaver, SqliteSaver
from threadline.checkpoint.base import CheckpointRecord, PlannedTask
from threadline.checkpoint.postgres import PostgresSaver
from threadline.checkpoint.redis import RedisSaver
from threadline.errors import CorruptedDataError
from threadline.maintenance import scan_damage

DAMAGED, PARTNER, BYSTANDER = "a", "b", "c"
SEED = 25
Opener = Callable[[], AbstractContextManager[BaseSaver]]


def populate(saver: BaseSaver) -> None:
    for thread_id in (DAMAGED, PARTNER, BYSTANDER):
        parent = None
        for i in range(4):
            values = {"log": [item(j, 300) for j in range(2 + i)], "k": [thread_id, i], "n": i}
            metadata = {"source": "input", "step": -1, "who": thread_id} if i == 0 else None
            planned = (PlannedTask("node"),) if i == 3 else ()
            record = step(thread_id, values, parent, metadata=metadata, next=planned)
            saver.put(record)
            parent = record.checkpoint
            if i >= 2:
                writes = [w(f"task-{i}", value={"out": thread_id * 3, "i": i}), w(f"other-{i}")]
                saver.put_writes(thread_id, "", parent.id, writes)


def snapshot(saver: BaseSaver) -> dict[str, list[CheckpointRecord]]:
    """Every checkpoint of every thread, newest first, as ``list`` and ``get_tuple`` give it."""
    found = {}
    for thread_id in (DAMAGED, PARTNER, BYSTANDER):
        listed = list(saver.list(thread_id))
        assert len(listed) == 4
        assert [saver.get_tuple(thread_id, "", r.checkpoint.id) for r in listed] == listed
        found[thread_id] = listed
    return found


def read_back(open_saver: Opener, expected: dict[str, list[CheckpointRecord]]) -> set[str]:
    """Read everything with a fresh saver; returns the threads where damage was caught."""
    caught: set[str] = set()
    with open_saver() as saver:
        for thread_id, records in expected.items():
            for want in records:
                try:
                    got = saver.get_tuple(thread_id, "", want.checkpoint.id)
                except CorruptedDataError as exc:
                    check_named(exc, thread_id)
                    caught.add(thread_id)
                else:
                    assert got == want, f"thread {thread_id!r} changed silently"
            try:
                listed = list(saver.list(thread_id))
            except CorruptedDataError as exc:
                check_named(exc, thread_id)
                caught.add(thread_id)
            else:
                assert listed == records, f"the history of {thread_id!r} changed silently"
        contained(saver, caught)
    return caught


def contained(saver: BaseSaver, caught: set[str]) -> None:
    """Every thread is still listed, the bystander as it was; a scan names the damage."""
    listed = {info.thread_id: info.status for info in saver.list_threads()}
    assert set(listed) == {DAMAGED, PARTNER, BYSTANDER} and listed[BYSTANDER] == "running"
    assert {found.thread_id for found in scan_damage(saver)} == caught


def check_named(exc: CorruptedDataError, thread_id: str) -> None:
    message = str(exc)
    assert thread_id != BYSTANDER, f"the bystander thread failed: {message}"
    assert repr(thread_id) in message or f"t-{thread_id}" in message, message
    assert "upgrade" not in message, message


def damages(rng: random.Random) -> dict[str, Callable[[bytes], bytes]]:
    def flip(data: bytes) -> bytes:
        at = rng.randrange(len(data))
        return data[:at] + bytes([data[at] ^ rng.randrange(1, 256)]) + data[at + 1 :]

    return {
        "flip": flip,
        "truncate": lambda data: data[: rng.randrange(len(data))],
        "garbage": lambda data: rng.randbytes(rng.randrange(1, 64)),
    }


def run_damage(store: Store, open_saver: Opener) -> int:
    """Every damage on every record of the damaged thread; returns the number of cases."""
    with open_saver() as saver:
        expected = snapshot(saver)
    rng = random.Random(SEED)
    records = store.records()
    mine = [r for r in records if r.thread_id == DAMAGED]
    assert {r.kind for r in mine} >= {"checkpoint", "write", "blob"}
    cases = 0
    for record in mine:
        original = store.read(record)
        for name, damage in damages(rng).items():
            store.write(record, damage(original))
            try:
                caught = read_back(open_saver, expected)
            finally:
                store.write(record, original)
            assert caught == {DAMAGED}, f"{name} of {record} was not caught"
            cases += 1
        partner = _partner(records, record)
        if partner is not None and store.read(partner) != original:
            cases += _swapped(store, open_saver, expected, record, partner, original)
    assert read_back(open_saver, expected) == set()
    return cases


def _partner(records: list[Record], record: Record) -> Record | None:
    """``PARTNER``'s record of the same kind at the same place in its thread."""
    same = [r for r in records if r.kind == record.kind and r.thread_id == DAMAGED]
    theirs = [r for r in records if r.kind == record.kind and r.thread_id == PARTNER]
    at = same.index(record)
    return theirs[at] if at < len(theirs) else None


def _swapped(
    store: Store,
    open_saver: Opener,
    expected: dict[str, list[CheckpointRecord]],
    record: Record,
    partner: Record,
    original: bytes,
) -> int:
    theirs = store.read(partner)
    store.write(record, theirs)
    store.write(partner, original)
    try:
        caught = read_back(open_saver, expected)
    finally:
        store.write(record, original)
        store.write(partner, theirs)
    assert caught == {DAMAGED, PARTNER}, f"a swap of {record} was not caught"
    return 1


def test_damage_on_sqlite(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    with SqliteSaver(path) as saver:
        populate(saver)
    assert run_damage(sqlite_store(path), lambda: SqliteSaver(path)) > 50


def test_damage_on_files(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    with FileSaver(root) as saver:
        populate(saver)
    assert run_damage(FileStore(root), lambda: FileSaver(root)) > 50


def test_damage_on_postgres() -> None:
    with postgres_saver() as saver:
        populate(saver)
        schema, url = saver.schema, postgres_url()

        @contextmanager
        def reopen() -> Iterator[Any]:
            with PostgresSaver(url, schema=schema, pool_size=1) as fresh:
                yield fresh

        assert run_damage(postgres_store(url, schema), reopen) > 50


def test_damage_on_redis() -> None:
    with redis_saver() as saver:
        populate(saver)
        prefix = saver.prefix

        def reopen() -> RedisSaver:
            return RedisSaver(REDIS_URL, prefix=prefix)

        assert run_damage(RedisStore(REDIS_URL, prefix), reopen) > 50
