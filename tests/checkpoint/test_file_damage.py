"""Damaged files are clear errors naming what is wrong, and odd thread ids stay inside the
saver's directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from file_fixtures import (
    chain,
    make,
    ns_dir,
    rec,
    saver,
)

from threadline.checkpoint.base import (
    TaskWrite,
)
from threadline.checkpoint.files import FileSaver
from threadline.errors import SerializationError

__all__ = ["saver"]  # fixtures used here


# -- bad data ------------------------------------------------------------------------------------


def test_corrupted_blob_names_the_key_and_spares_other_threads(saver: FileSaver) -> None:
    cp, changes = make({"messages": ["a", "b"], "other": 1})
    saver.put(rec("t1", cp, changes))
    (keep,) = chain(saver, "t2", 1)
    blob = ns_dir(saver, "t1") / "blobs" / f"messages@{cp.id}.blob"
    blob.write_bytes(blob.read_bytes()[:-3])  # truncated
    with pytest.raises(SerializationError, match="'messages'") as info:
        saver.get_tuple("t1")
    assert "t1" in str(info.value) and "corrupted" in str(info.value)
    got = saver.get_tuple("t2")
    assert got is not None and got.checkpoint == keep

    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF  # same length, one byte flipped
    blob.write_bytes(bytes(data))
    with pytest.raises(SerializationError, match="'messages'"):
        saver.get_tuple("t1")
    blob.write_bytes(b"garbage without a header")
    with pytest.raises(SerializationError, match="'messages'"):
        list(saver.list("t1"))


def test_missing_blob_is_a_serialization_error(saver: FileSaver) -> None:
    cp, changes = make({"k": [1]})
    saver.put(rec("t1", cp, changes))
    (ns_dir(saver, "t1") / "blobs" / f"k@{cp.id}.blob").unlink()
    with pytest.raises(SerializationError, match=r"'k'.*missing"):
        saver.get_tuple("t1")


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[: len(raw) // 2],
        lambda raw: raw.replace(b'"created_at": "', b'"created_at": "1'),
        lambda raw: b"",
    ],
    ids=["truncated", "altered", "empty"],
)
def test_corrupted_row_is_a_clear_error(saver: FileSaver, damage: Any) -> None:
    a, b = chain(saver, "t1", 2)
    (keep,) = chain(saver, "t2", 1)
    path = ns_dir(saver, "t1") / "checkpoints" / f"{b.id}.json"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(SerializationError, match=b.id):
        saver.get_tuple("t1")
    with pytest.raises(SerializationError, match=str(path)):
        list(saver.list("t1"))
    older = saver.get_tuple("t1", "", a.id)
    assert older is not None and older.checkpoint == a
    got = saver.get_tuple("t2")
    assert got is not None and got.checkpoint == keep
    assert "t2" in [t.thread_id for t in saver.list_threads()]


def test_corrupted_write_is_a_clear_error(saver: FileSaver) -> None:
    (a,) = chain(saver, "t1", 1)
    saver.put_writes("t1", "", a.id, [TaskWrite("task", "node", "result", {"x": 1})])
    (path,) = (ns_dir(saver, "t1") / "writes" / a.id).iterdir()
    path.write_text(path.read_text()[:40])
    with pytest.raises(SerializationError, match="write"):
        saver.get_tuple("t1")


# -- odd identifiers -----------------------------------------------------------------------------

ODD = [
    "../x",
    "../../../../../../tmp/escape",
    "a/b",
    "a\\b",
    "/abs",
    ".",
    "..",
    "",
    "CON",
    "nul.txt",
    ".tmp-1-x",
    ".trash-x",
    "t-x",
    "root",
    "~tilde~",
    "%41",
    "Ωμέγα 線程 🧵",
    "x" * 1000,
    "y" * 1000,
    "nl\nand\ttab\0nul",
]


def test_odd_thread_ids_stay_inside_the_directory(tmp_path: Path) -> None:
    directory = tmp_path / "inside" / "store"
    saver = FileSaver(directory)
    for i, odd in enumerate(ODD):
        cps = chain(saver, odd, 2)
        saver.put_writes(odd, "", cps[-1].id, [TaskWrite(odd, odd, "result", odd)])
        chain(saver, odd, 1, ns=f"child:{odd}")
        saver.put_writes(odd, f"child:{odd}", "../../" + odd, [TaskWrite("t", "n", "result", i)])
    # Nothing was created outside the directory, and each thread is one folder in threads/.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inside"]
    assert sorted(p.name for p in (tmp_path / "inside").iterdir()) == ["store"]
    thread_dirs = list((directory / "threads").iterdir())
    assert len(thread_dirs) == len(ODD)
    for path in directory.rglob("*"):
        assert path.resolve().is_relative_to(directory.resolve())
        assert len(path.name.encode()) <= 255
    assert sorted(t.thread_id for t in saver.list_threads()) == sorted(ODD)
    for odd in ODD:
        got = saver.get_tuple(odd)
        assert got is not None and got.thread_id == odd
        assert got.pending_writes == (TaskWrite(odd, odd, "result", odd),)
        child = saver.get_tuple(odd, f"child:{odd}")
        assert child is not None and child.checkpoint_ns == f"child:{odd}"
    # Two long ids sharing a prefix do not collide.
    assert saver.get_tuple("x" * 1000) != saver.get_tuple("x" * 999 + "y")
    for odd in ODD:
        saver.delete_thread(odd)
        assert saver.get_tuple(odd) is None
    assert list((directory / "threads").iterdir()) == []
