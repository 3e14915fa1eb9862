"""The plain-files saver's files are readable: JSON rows with previews, checked edits, and a
format that is refused when newer and migrated when older.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from builders import step
from file_fixtures import (
    chain,
    files_under,
    make,
    ns_dir,
    rec,
    saver,
)

from threadline.checkpoint.base import (
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    Retention,
    TaskWrite,
)
from threadline.checkpoint.files import FileSaver
from threadline.checkpoint.files import saver as saver_module
from threadline.checkpoint.urls import from_url
from threadline.errors import SaverUnavailableError, SerializationError

__all__ = ["saver"]  # fixtures used here


# -- readable files ------------------------------------------------------------------------------


def test_row_file_is_readable_json(saver: FileSaver) -> None:
    # "topic" is a list: a small scalar would live in the row, not in a blob (see below)
    first, changes = make({"topic": ["cats"], "messages": ["hi"]})
    saver.put(rec("t1", first, changes, metadata={"source": "input", "step": -1}))
    second, changes = make(
        {"topic": ["cats"], "messages": ["hi", "there"]},
        first,
        changed={"messages"},
        next=(PlannedTask("agent"), PlannedTask("tools", arg={"q": 1}, send=True)),
    )
    write = TaskWrite("task-1", "agent", "interrupt", {"question": "ok?"})
    saver.put(rec("t1", second, changes, metadata={"source": "loop", "step": 0}, writes=(write,)))

    folder = ns_dir(saver, "t1")
    with open(folder / "checkpoints" / f"{second.id}.json") as f:
        row = json.load(f)
    assert row["checkpoint_id"] == second.id
    assert row["parent_id"] == first.id
    assert row["step"] == 0
    assert row["source"] == "loop"
    assert row["next"] == ["agent", "tools"]
    assert row["versions"] == {"topic": first.id, "messages": second.id}
    assert row["metadata"] == {"source": "loop", "step": 0}
    # The fields above do not show the "tools" task's argument: the exact bytes are kept.
    assert set(row["stored"]) == {"body", "metadata", "crc32"}
    first_row = json.loads((folder / "checkpoints" / f"{first.id}.json").read_text())
    assert set(first_row["stored"]) == {"crc32"}  # its bytes are made again from its fields

    # Values JSON shows exactly are in their blob files as JSON: no values/ preview is needed.
    blob = (folder / "blobs" / f"messages@{second.id}.blob").read_bytes()
    header, text = blob.split(b"\n", 1)
    assert json.loads(header)["json"] is True and json.loads(text) == ["hi", "there"]
    assert list((folder / "values").iterdir()) == []

    (write_file,) = (folder / "writes" / second.id).iterdir()
    assert write_file.name.startswith("000001-interrupt-")
    line, _, value = write_file.read_bytes().partition(b"\n")  # laid out as a blob file
    doc = json.loads(line)
    assert doc["task_id"] == "task-1" and doc["kind"] == "interrupt"
    assert doc["json"] is True and json.loads(value) == {"question": "ok?"}

    # one blob per changed value: "topic" was stored once, at the first checkpoint
    blobs = sorted(p.name for p in (folder / "blobs").iterdir())
    assert blobs == sorted(
        [f"messages@{first.id}.blob", f"messages@{second.id}.blob", f"topic@{first.id}.blob"]
    )
    header = json.loads((folder / "blobs" / f"topic@{first.id}.blob").read_bytes().split(b"\n")[0])
    assert header["key"] == "topic" and header["version"] == first.id and header["base"] is None

    thread = json.loads((folder.parent / "thread.json").read_text())
    assert thread == {
        "thread_id": "t1",
        "status": "interrupted",
        "head": second.id,
        "updated_at": thread["updated_at"],
        "next": ["agent", "tools"],
    }
    assert json.loads((folder / "HEAD").read_text()) == {"checkpoint_id": second.id}


def test_the_preview_of_a_list_that_grew_shows_its_new_items(saver: FileSaver) -> None:
    parent = None
    for n in range(1, 4):
        # bytes: no JSON shows them exactly, so the blob is binary and the preview says it
        record = step("t1", {"log": [str(i).encode() for i in range(n)], "k": 1}, parent)
        saver.put(record)
        parent = record.checkpoint
    assert parent is not None
    preview = json.loads((ns_dir(saver, "t1") / "values" / f"{parent.id}.json").read_text())
    assert preview["values"] == {"log": {"$appended": ["<1 bytes>"], "$length": 3}}


def test_previews_are_never_read_and_edited_fields_are_caught(saver: FileSaver) -> None:
    cp, changes = make({"x": [b"raw"]})  # in a list: not inline, and its blob is binary
    saver.put(rec("t1", cp, changes, metadata={"source": "input"}))
    (ns_dir(saver, "t1") / "values" / f"{cp.id}.json").write_text("not json at all")
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == cp and got.metadata == {"source": "input"}
    # A row's bytes are made again from its fields: an edit fails the row's SHA-256.
    path = ns_dir(saver, "t1") / "checkpoints" / f"{cp.id}.json"
    row = json.loads(path.read_text())
    row.update(metadata={"source": "edited"})
    path.write_text(json.dumps(row))
    with pytest.raises(SerializationError, match="checksum mismatch"):
        saver.get_tuple("t1")


def test_an_edited_json_blob_is_caught(saver: FileSaver) -> None:
    cp, changes = make({"messages": ["hi"]})
    saver.put(rec("t1", cp, changes))
    path = ns_dir(saver, "t1") / "blobs" / f"messages@{cp.id}.blob"
    path.write_bytes(path.read_bytes().replace(b'"hi"', b'"ho"'))
    with pytest.raises(SerializationError, match=r"'messages'.*checksum mismatch"):
        saver.get_tuple("t1")


def test_small_scalars_live_in_the_row_file(saver: FileSaver) -> None:
    """A step that changes only small scalars writes its row file and no blob (nor preview);
    each row shows every small scalar, changed or not, as JSON its bytes are made again from,
    so the newest loads after ``prune(keep_last=1)`` without any blob of them."""
    small = {"n": 0, "ratio": 0.5, "done": False, "none": None, "word": "w" * 64}
    records: list[CheckpointRecord] = []
    parent: Checkpoint | None = None
    for i in range(5):
        # "doc" is one character too long to be inline, "items" a list: blobs as ever
        values = {**small, "n": i, "doc": "d" * 65, "items": [i]}
        records.append(step("t1", values, parent))
        saver.put(records[-1])
        parent = records[-1].checkpoint
    assert parent is not None
    folder = ns_dir(saver, "t1")
    before = files_under(Path(saver.directory))
    counter = step("t1", {**parent.values, "n": 5}, parent)  # only "n" changed
    saver.put(counter)
    records.append(counter)
    row_path = folder / "checkpoints" / f"{counter.checkpoint.id}.json"
    new = set(files_under(Path(saver.directory))) - set(before)
    assert new == {str(row_path.relative_to(saver.directory))}
    assert list((folder / "values").iterdir()) == []  # the rows show what changed

    assert saver.prune("t1", keep_last=1) == 5  # the kept row still holds "word", unchanged
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == counter.checkpoint
    with FileSaver(saver.directory) as again:
        assert [r.checkpoint for r in again.list("t1")] == [counter.checkpoint]
    first, last_items = records[0].checkpoint.id, records[4].checkpoint.id
    blobs = sorted(p.name for p in (folder / "blobs").iterdir())
    assert blobs == [f"doc@{first}.blob", f"items@{last_items}.blob"]

    row = json.loads(row_path.read_text())
    assert row["values"] == {**small, "n": 5}
    assert set(row["stored"]) == {"crc32"}  # its bytes are made again from its fields
    row["values"]["n"] = 6
    row_path.write_text(json.dumps(row))
    with pytest.raises(SerializationError, match="checksum mismatch"):
        saver.get_tuple("t1")


def test_inline_values_json_cannot_show_keep_the_row_bytes(saver: FileSaver) -> None:
    """Bytes and non-finite floats are inline too; the row's ``values`` field only renders
    them, so the row keeps its exact bytes (base64) and loads them."""
    values = {"raw": b"\x00r", "nan": math.nan, "inf": -math.inf, "n": 1}
    record = step("t1", values, None)
    saver.put(record)
    folder = ns_dir(saver, "t1")
    assert list((folder / "blobs").iterdir()) == []
    row = json.loads((folder / "checkpoints" / f"{record.checkpoint.id}.json").read_text())
    assert row["values"] == {"raw": "<2 bytes>", "nan": "nan", "inf": "-inf", "n": 1}
    assert set(row["stored"]) == {"body", "metadata", "crc32"}
    got = saver.get_tuple("t1")
    assert got is not None
    loaded = got.checkpoint.values
    assert loaded["raw"] == b"\x00r" and loaded["inf"] == -math.inf and loaded["n"] == 1
    assert math.isnan(loaded["nan"])
    assert got.checkpoint.versions == record.checkpoint.versions


def test_huge_values_are_cut_short_in_the_preview(saver: FileSaver) -> None:
    text, items = ("x" * 100_000, b"x"), [(i,) for i in range(10_000)]  # tuples: not JSON
    cp, changes = make({"text": text, "items": items, "raw": b"\0" * 100})  # too long to inline
    saver.put(rec("t1", cp, changes))
    preview = json.loads((ns_dir(saver, "t1") / "values" / f"{cp.id}.json").read_text())
    assert len(json.dumps(preview["values"]["text"])) < 3000
    assert len(preview["values"]["items"]) == 101
    assert preview["values"]["raw"] == "<100 bytes>"
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint.values == cp.values


def test_previews_can_be_turned_off(tmp_path: Path) -> None:
    saver = FileSaver(tmp_path / "store", previews=False)
    cp, changes = make({"x": 1})
    saver.put(rec("t1", cp, changes))
    assert list((ns_dir(saver, "t1") / "values").iterdir()) == []
    assert saver.get_tuple("t1") is not None


def test_data_survives_reopening(tmp_path: Path) -> None:
    with FileSaver(tmp_path / "store") as saver:
        cps = chain(saver, "t1", 3)
        saver.put_writes("t1", "", cps[-1].id, [TaskWrite("a", "n", "result", 1)])
    with FileSaver(str(tmp_path / "store")) as again:
        got = again.get_tuple("t1")
        assert got is not None and got.checkpoint == cps[-1]
        assert got.pending_writes == (TaskWrite("a", "n", "result", 1),)
        assert [r.checkpoint.id for r in again.list("t1")] == [c.id for c in reversed(cps)]


def test_from_url_opens_a_file_saver(tmp_path: Path) -> None:
    saver = from_url(f"file://{tmp_path / 'via url'}", retention=Retention(max_checkpoints=2))
    assert isinstance(saver, FileSaver)
    assert saver.directory == str(tmp_path / "via url")
    assert saver.retention == Retention(max_checkpoints=2)


def test_a_newer_format_is_refused(tmp_path: Path) -> None:
    FileSaver(tmp_path / "store")
    marker = tmp_path / "store" / "FORMAT.json"
    marker.write_text(json.dumps({"format": "threadline.files", "version": 999}))
    with pytest.raises(SaverUnavailableError, match="upgrade threadline"):
        FileSaver(tmp_path / "store")


def test_an_older_format_is_migrated_when_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A synthetic next format adds a file: a folder of the current format is migrated and
    marked with the next when opened, and its checkpoints load; a folder older than any
    migration (format 1: the loop's metadata as bytes) is refused."""
    directory = tmp_path / "store"
    with FileSaver(directory) as saver:
        (a,) = chain(saver, "t1", 1)
    migrated: list[str] = []
    current, synthetic = saver_module.FORMAT_VERSION, saver_module.FORMAT_VERSION + 1

    def to_next(folder: str) -> None:
        migrated.append(folder)
        (Path(folder) / "NOTES").write_text(f"format {synthetic}")

    monkeypatch.setattr(saver_module, "FORMAT_VERSION", synthetic)
    monkeypatch.setattr(saver_module, "MIGRATIONS", {current: to_next})
    with FileSaver(directory) as saver:
        assert json.loads((directory / "FORMAT.json").read_text())["version"] == synthetic
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == a
    FileSaver(directory)  # migrated once
    assert migrated == [str(directory)]
    assert (directory / "NOTES").read_text() == f"format {synthetic}"
    marker = {"format": "threadline.files", "version": 1}
    (directory / "FORMAT.json").write_text(json.dumps(marker))
    with pytest.raises(SaverUnavailableError, match="format version 1, which this threadline"):
        FileSaver(directory)


def test_an_unusable_directory_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    with pytest.raises(SaverUnavailableError, match="a-file"):
        FileSaver(tmp_path / "a-file" / "store")


def test_a_checkpoint_that_changed_nothing_has_no_preview(tmp_path: Path) -> None:
    """An input checkpoint (the input waits in its write) changes no value: no values file."""
    saver = FileSaver(tmp_path)
    first, changes = make({"topic": [b"cats"]})  # a binary blob, not inline: a preview shows it
    saver.put(rec("t1", first, changes))
    same, changes = make({"topic": [b"cats"]}, first, changed=set())
    saver.put(rec("t1", same, changes))
    previews = {p.stem for p in (ns_dir(saver, "t1") / "values").iterdir()}
    assert previews == {first.id}
    assert saver.get_tuple("t1") is not None
