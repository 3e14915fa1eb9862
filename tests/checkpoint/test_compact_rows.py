"""Compact checkpoint rows: the loop's metadata stored as no bytes, ``created_at`` as a small
offset from the id's time, each given back exactly on every backend.

``bodies.encode_metadata`` / ``decode_metadata`` and ``stamps`` are the shared encoding; the
``saver`` fixture runs the round trips on every backend (``factories.py``).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from builders import counter_graph, make_cp, rec

from threadline.checkpoint import BaseSaver, SqliteSaver
from threadline.checkpoint.bodies import decode_metadata, encode_metadata, loop_metadata
from threadline.checkpoint.ids import id_millis, new_checkpoint_id
from threadline.checkpoint.layout import CheckpointRow
from threadline.checkpoint.redis.keys import created_at_of, pack_checkpoint, unpack_checkpoint
from threadline.checkpoint.stamps import MAX_OFFSET, created_text, stored_created
from threadline.clock import iso_at, micros_of, now_iso
from threadline.errors import SerializationError

# -- metadata ----------------------------------------------------------------------------------


def test_the_loops_metadata_is_stored_as_no_bytes_and_comes_back_in_order() -> None:
    metadata = {"source": "loop", "step": 7, "parents": {}}
    assert encode_metadata(metadata, "c1", step=7) == b""
    back = decode_metadata(b"", step=7)
    assert back == metadata and list(back) == ["source", "step", "parents"]
    assert loop_metadata(7) == metadata
    assert encode_metadata(metadata, "c1") != b""  # a full row (no step given) keeps the bytes


@pytest.mark.parametrize(
    "metadata",
    [
        {"source": "loop", "step": 6, "parents": {}},  # another step than the row's
        {"source": "input", "step": 7, "parents": {}},
        {"source": "loop", "step": 7, "parents": {"": "c0"}},
        {"source": "loop", "step": 7, "parents": {}, "user": 1},
        {"step": 7, "source": "loop", "parents": {}},  # another key order
        {"source": "loop", "step": 7},
        {"source": "loop", "step": True, "parents": {}},  # True == 1, but is not an int
        {"source": "loop", "step": 7.0, "parents": {}},
        {"source": "loop", "step": 7, "parents": []},
        {},
    ],
)
def test_other_metadata_is_stored_as_it_is(metadata: dict[str, Any]) -> None:
    step = 1 if metadata.get("step") is True else 7
    stored = encode_metadata(metadata, "c1", step=step)
    assert stored != b""
    back = decode_metadata(stored, step=step)
    assert back == metadata and list(back) == list(metadata)
    assert [type(v) for v in back.values()] == [type(v) for v in metadata.values()]


# -- created_at --------------------------------------------------------------------------------


def test_created_at_is_stored_as_microseconds_after_the_ids_millisecond() -> None:
    cid = new_checkpoint_id()
    created = now_iso()
    stored = stored_created(cid, created)
    assert type(stored) is int and abs(stored) < 10_000_000
    assert created_text(cid, stored) == created
    ms = id_millis(cid)
    assert ms is not None and stored_created(cid, iso_at(ms * 1000 - 5)) == -5  # a borrowed ms


@pytest.mark.parametrize(
    "cid",
    [
        "0190A4B2-C3D4-7ABC-8DEF-0123456789AB",  # upper case: not as ids are made
        "0190a4b2-c3d4-4abc-8def-0123456789ab",  # a UUIDv4
        "+190a4b2-c3d4-7abc-8def-0123456789ab",  # int() would read it
        "0190a4b2c3d47abc8def0123456789ab",
        "c1",
    ],
)
def test_an_id_without_a_time_keeps_created_at_as_text(cid: str) -> None:
    near = iso_at(0x0190A4B2C3D4 * 1000 + 1)  # the time those ids would have
    assert id_millis(cid) is None and stored_created(cid, near) == near


@pytest.mark.parametrize(
    "spelled",
    [
        lambda t: t[:19] + "+00:00",  # no microseconds
        lambda t: t[:26] + "Z",
        lambda t: t.replace("T", " "),
        lambda t: t[:26] + "+01:00",
        lambda t: t[:20] + "\u0661" + t[21:],  # an Arabic-Indic digit: int() reads it
        lambda t: "yesterday",
        lambda t: "",
    ],
)
def test_a_created_at_an_offset_would_not_spell_back_is_stored_as_text(
    spelled: Callable[[str], str],
) -> None:
    cid = new_checkpoint_id()
    ms = id_millis(cid)
    assert ms is not None
    created = spelled(iso_at(ms * 1000 + 1))
    assert stored_created(cid, created) == created
    assert created_text(cid, created) == created


def test_the_newest_id_and_time_are_read_as_any_other() -> None:
    """Without a parse (the last millisecond ``new_checkpoint_id`` used, the last text
    ``iso_at`` made), with the same result as a parse; anything else is parsed."""
    cid = new_checkpoint_id()
    assert id_millis(cid) == int(cid[:8] + cid[9:13], 16)
    assert id_millis(cid[:14] + "4" + cid[15:]) is None  # same millisecond, not a UUIDv7
    assert id_millis(cid[:36] + "0") is None
    text = iso_at(1_700_000_000_123_456)
    assert micros_of(text) == 1_700_000_000_123_456  # the last text made
    assert micros_of(iso_at(5)) == 5
    assert micros_of(text) == 1_700_000_000_123_456  # parsed
    assert micros_of(text[:19] + ".000001+00:00") == 1_700_000_000_000_001  # its second held


def test_a_year_before_1000_is_spelled_in_four_digits_and_read_back() -> None:
    micros = -30_628_713_600_000_000  # 0999-06-01
    text = iso_at(micros)
    assert text.startswith("0999-") and len(text) == 32
    iso_at(1_700_000_000_000_000)  # another second formatted since: the old one is parsed
    assert micros_of(text) == micros


def test_before_any_time_is_made_no_text_reads_as_made() -> None:
    """A fresh process has made no text yet: an empty ``created_at`` is not time 0."""
    code = "from threadline.clock import micros_of; print(micros_of(''), micros_of('x' * 32))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["None", "None"]


def test_a_time_far_from_the_ids_is_stored_as_text() -> None:
    cid = new_checkpoint_id()
    ms = id_millis(cid)
    assert ms is not None
    near, far = iso_at(ms * 1000 + MAX_OFFSET), iso_at(ms * 1000 + MAX_OFFSET + 1)
    assert stored_created(cid, near) == MAX_OFFSET and stored_created(cid, far) == far
    hours_ago = (datetime.now(UTC) - timedelta(hours=3)).isoformat(timespec="microseconds")
    assert stored_created(cid, hours_ago) == hours_ago


def test_an_offset_on_an_id_without_a_time_is_refused() -> None:
    with pytest.raises(SerializationError, match=r"checkpoint c1 .* corrupted"):
        created_text("c1", 12)


# -- on every backend --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "created",
    [None, "2020-02-02T02:02:02.020202+00:00", "2020-02-02T02:02:02", "not a time"],
)
def test_rows_give_back_metadata_and_created_at_exactly(
    saver: BaseSaver, created: str | None
) -> None:
    first = make_cp({"n": 1}, created_at=created)
    second = make_cp({"n": 2}, parent=first, created_at=created)
    saver.put(rec("t", first, metadata={"source": "input", "step": -1, "parents": {}}))
    saver.put(rec("t", second, metadata=loop_metadata(second.step)))
    got = [(r.checkpoint.created_at, r.metadata) for r in saver.list("t")]
    assert got == [
        (second.created_at, {"source": "loop", "step": 0, "parents": {}}),
        (first.created_at, {"source": "input", "step": -1, "parents": {}}),
    ]
    assert [list(m) for _, m in got] == [["source", "step", "parents"]] * 2
    assert [r.checkpoint.id for r in saver.list("t", filter={"source": "loop"})] == [second.id]


def test_parents_survive_prunes_forks_and_copies(saver: BaseSaver) -> None:
    """SQLite and PostgreSQL store a parent that was the head as "the previous checkpoint": a
    fork names its parent, a prune names a deleted parent in the row that implied it."""
    cps = [make_cp({"i": 0})]
    saver.put(rec("t", cps[0]))
    for i in range(1, 4):
        cps.append(make_cp({"i": i}, parent=cps[-1]))
        saver.put(rec("t", cps[-1]))
    fork = make_cp({"i": 10}, parent=cps[1])
    saver.put(rec("t", fork), fork=True)
    after = make_cp({"i": 11}, parent=fork)
    saver.put(rec("t", after))
    everything = [after, fork, *reversed(cps)]
    assert [r.checkpoint for r in saver.list("t")] == everything
    saver.copy_thread("t", "copy")
    assert [r.checkpoint for r in saver.list("copy")] == everything
    assert saver.prune("t", keep_last=3) == 3
    assert [r.checkpoint for r in saver.list("t")] == everything[:3]
    for cp in everything[:3]:  # cps[3]'s parent and the fork's are gone: still named
        got = saver.get_tuple("t", "", cp.id)
        assert got is not None and got.checkpoint == cp


def test_a_counter_step_costs_at_most_82_bytes_of_sqlite_row(tmp_path: Path) -> None:
    """A step that only moves a counter writes one row of about 82 bytes (``dbstat``'s
    payload): its id, step, an integer creation time, a 25-byte body and its 7-byte seal
    (``seals``), no metadata and no parent id (it is the previous checkpoint)."""
    path = tmp_path / "c.db"
    with SqliteSaver(path) as saver:
        config = {"configurable": {"thread_id": "t"}, "recursion_limit": 4000}
        graph = counter_graph(2000).compile(checkpointer=saver)
        assert graph.invoke({"n": 0}, config) == {"n": 2000}
    conn = sqlite3.connect(path)
    try:
        ((count,),) = conn.execute("SELECT count(*) FROM checkpoints").fetchall()
        stats = "SELECT sum(payload) FROM dbstat WHERE name = 'checkpoints'"
        ((payload,),) = conn.execute(stats).fetchall()
        typed = "SELECT typeof(created_at), length(metadata), parent_id FROM checkpoints"
        kinds = {tuple(r) for r in conn.execute(typed)}
    finally:
        conn.close()
    assert count == 2002 and payload / count <= 82
    assert ("integer", 0, None) in kinds


def test_a_redis_header_spells_created_at_as_an_offset_or_quoted_text() -> None:
    """``@<microseconds>`` after the id's millisecond, else the text quoted (never an ``@``)."""
    cid = new_checkpoint_id()
    ms = id_millis(cid)
    assert ms is not None
    for created, word in [(iso_at(ms * 1000 + 1500), "@1500"), ("@12", "%4012")]:
        row = CheckpointRow(cid, None, 3, created, b"body", b"")
        packed = pack_checkpoint(row, [])
        assert packed.startswith(f"{word},,3 0".encode())
        assert unpack_checkpoint(cid, packed) == row
        assert created_at_of(cid, packed.split(b" ")[0]) == created
