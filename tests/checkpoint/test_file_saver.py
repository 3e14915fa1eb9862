"""What only the plain-files saver promises: readable files, crash safety, cross-process CAS."""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from builders import item, step

from threadline import serde
from threadline.checkpoint.base import (
    BaseSaver,
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    Retention,
    TaskWrite,
)
from threadline.checkpoint.changes import SET, Append, Change, ChangedRecord
from threadline.checkpoint.files import FileSaver, folders, reading, rows
from threadline.checkpoint.files import saver as saver_module
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.urls import from_url
from threadline.errors import ConcurrentUpdateError, SaverUnavailableError, SerializationError

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def file_saver(tmp_path: Path, **options: Any) -> Iterator[BaseSaver]:
    """The conformance-suite factory for this saver (``factories.SAVER_FACTORIES``)."""
    with FileSaver(tmp_path / "checkpoints", **options) as saver:
        yield saver


# -- helpers -------------------------------------------------------------------------------------


def make(
    values: dict[str, Any],
    parent: Checkpoint | None = None,
    *,
    changed: set[str] | None = None,
    next: tuple[PlannedTask, ...] = (),
    created_at: str | None = None,
) -> tuple[Checkpoint, dict[str, Change]]:
    """A checkpoint as the engine makes one: changed keys get this checkpoint's id as version."""
    cid = new_checkpoint_id()
    changed = set(values) if changed is None else changed
    versions = {k: cid if k in changed or parent is None else parent.versions[k] for k in values}
    cp = Checkpoint(
        id=cid,
        parent_id=parent.id if parent else None,
        step=parent.step + 1 if parent else -1,
        values=values,
        versions=versions,
        next=next,
        created_at=created_at or datetime.now(UTC).isoformat(),
    )
    return cp, dict.fromkeys(changed & set(values), SET)


def rec(
    thread_id: str,
    cp: Checkpoint,
    changes: Mapping[str, Change] | None = None,
    *,
    ns: str = "",
    metadata: dict[str, Any] | None = None,
    writes: tuple[TaskWrite, ...] = (),
) -> CheckpointRecord:
    if changes is None:
        return CheckpointRecord(thread_id, ns, cp, metadata or {}, writes)
    return ChangedRecord(thread_id, ns, cp, metadata or {}, writes, changes)


def chain(saver: FileSaver, thread_id: str, n: int, *, ns: str = "") -> list[Checkpoint]:
    cps: list[Checkpoint] = []
    for i in range(n):
        cp, changes = make({"i": i}, cps[-1] if cps else None)
        saver.put(rec(thread_id, cp, changes, ns=ns, metadata={"source": "loop", "i": i}))
        cps.append(cp)
    return cps


def files_under(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def ns_dir(saver: FileSaver, thread_id: str, ns: str = "") -> Path:
    return Path(saver.backend.ns_dir(thread_id, ns))


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[FileSaver]:
    with FileSaver(tmp_path / "store") as s:
        yield s


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


# -- compare-and-set -----------------------------------------------------------------------------


def test_put_on_a_stale_parent_raises_and_writes_nothing(saver: FileSaver) -> None:
    a, b = chain(saver, "t1", 2)
    before = files_under(Path(saver.directory))
    stale, changes = make({"i": 99}, a)
    with pytest.raises(ConcurrentUpdateError) as info:
        saver.put(rec("t1", stale, changes, writes=(TaskWrite("x", "n", "result", 1),)))
    message = str(info.value)
    assert "'t1'" in message and "namespace ''" in message
    assert a.id in message and b.id in message  # expected and actual
    assert files_under(Path(saver.directory)) == before

    with pytest.raises(ConcurrentUpdateError, match="None"):  # a first checkpoint needs none
        saver.put(rec("t1", make({"i": 0})[0]))
    with pytest.raises(ConcurrentUpdateError):  # an empty namespace has no parent
        saver.put(rec("t1", make({"i": 0}, a)[0], ns="child:1"))
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == b


def test_fork_starts_a_branch_from_an_older_checkpoint(saver: FileSaver) -> None:
    a, b = chain(saver, "t1", 2)
    branch, changes = make({"i": 10}, a)
    saver.put(rec("t1", branch, changes), fork=True)
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == branch
    child, changes = make({"i": 11}, branch)
    saver.put(rec("t1", child, changes))
    assert [r.checkpoint.id for r in saver.list("t1")] == [child.id, branch.id, b.id, a.id]
    assert saver.get_tuple("t1", "", b.id).checkpoint == b  # type: ignore[union-attr]


def test_saving_a_checkpoint_again_is_refused(saver: FileSaver) -> None:
    (a,) = chain(saver, "t1", 1)
    before = files_under(Path(saver.directory))
    with pytest.raises(ConcurrentUpdateError):
        saver.put(rec("t1", a, metadata={"rev": 2}))
    with pytest.raises(ConcurrentUpdateError):
        saver.put(rec("t1", a, metadata={"rev": 2}), fork=True)
    assert files_under(Path(saver.directory)) == before


RACER = textwrap.dedent(
    """
    import json, os, sys, time
    from threadline.checkpoint.base import Checkpoint
    from threadline.checkpoint.changes import SET, ChangedRecord
    from threadline.checkpoint.files import FileSaver
    from threadline.checkpoint.ids import new_checkpoint_id
    from threadline.errors import ConcurrentUpdateError

    directory, workdir, me = sys.argv[1:4]
    saver = FileSaver(directory)
    rounds = json.load(open(os.path.join(workdir, "rounds.json")))
    for n, (thread_id, parent_id) in enumerate(rounds):
        cid = new_checkpoint_id()
        cp = Checkpoint(cid, parent_id, 1, {"who": [me]}, {"who": cid}, (), "2030-01-01T00:00:00")
        record = ChangedRecord(thread_id, "", cp, {"who": me}, (), {"who": SET})
        open(os.path.join(workdir, f"ready-{n}-{me}"), "w").close()
        while not os.path.exists(os.path.join(workdir, f"go-{n}")):
            time.sleep(0.0002)
        try:
            saver.put(record)
            print("won", flush=True)
        except ConcurrentUpdateError:
            print("lost", flush=True)
    """
)


def test_two_processes_racing_on_one_parent_exactly_one_wins(tmp_path: Path) -> None:
    rounds = 20
    directory = tmp_path / "store"
    saver = FileSaver(directory)
    bases: list[tuple[str, str]] = []
    for n in range(rounds):
        (base,) = chain(saver, f"race-{n}", 1)
        bases.append((f"race-{n}", base.id))
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "rounds.json").write_text(json.dumps(bases))
    script = tmp_path / "racer.py"
    script.write_text(RACER)
    names = ("p1", "p2")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(directory), str(workdir), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for name in names
    ]
    try:
        for n in range(rounds):
            deadline = time.monotonic() + 60
            while not all((workdir / f"ready-{n}-{name}").exists() for name in names):
                assert time.monotonic() < deadline, "racers did not get ready"
                assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
                time.sleep(0.001)
            (workdir / f"go-{n}").touch()
        outputs = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    results = list(zip(*(out.split() for out, _ in outputs), strict=True))
    assert len(results) == rounds
    for n, pair in enumerate(results):
        assert sorted(pair) == ["lost", "won"], (n, pair)
        winner = names[pair.index("won")]
        history = list(saver.list(f"race-{n}"))
        assert len(history) == 2  # the base and the winner's checkpoint, nothing else
        assert history[0].metadata == {"who": winner}
        assert history[0].checkpoint.values == {"who": [winner]}
        assert history[0].checkpoint.parent_id == bases[n][1]
        # the loser left no values behind either (the base's "i" lives in its row)
        blobs = list((ns_dir(saver, f"race-{n}") / "blobs").iterdir())
        assert len(blobs) == 1


# -- crashes -------------------------------------------------------------------------------------


def test_crash_before_the_row_is_renamed_keeps_the_previous_checkpoint(
    saver: FileSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = chain(saver, "t1", 2)
    real_replace = os.replace

    def crash_on_row(src: Any, dst: Any) -> None:
        if Path(dst).parent.name == "checkpoints":
            raise OSError("simulated crash")
        real_replace(src, dst)

    doomed, changes = make({"i": 2, "big": list(range(100))}, b)
    monkeypatch.setattr(os, "replace", crash_on_row)
    with pytest.raises(OSError, match="simulated crash"):
        saver.put(rec("t1", doomed, changes, writes=(TaskWrite("w", "n", "result", 1),)))
    monkeypatch.setattr(os, "replace", real_replace)

    folder = ns_dir(saver, "t1")
    assert (folder / "writes" / doomed.id).exists()  # written before the row, now orphaned
    assert json.loads((folder / "HEAD").read_text()) == {"checkpoint_id": doomed.id}
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == b
    assert saver.get_tuple("t1", "", doomed.id) is None
    assert [r.checkpoint.id for r in saver.list("t1")] == [b.id, a.id]
    assert saver.list_threads()[0].checkpoint_id == b.id

    # The thread carries on from b; the next writer sweeps up what the crash left.
    c, changes = make({"i": 3}, b)
    saver.put(rec("t1", c, changes))
    assert not (folder / "writes" / doomed.id).exists()
    assert not (folder / "values" / f"{doomed.id}.json").exists()
    assert [r.checkpoint.id for r in saver.list("t1")] == [c.id, b.id, a.id]
    assert not [p for p in folder.rglob(".tmp-*")]


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from threadline.checkpoint.base import Checkpoint, CheckpointRecord, TaskWrite
    from threadline.checkpoint.files import FileSaver

    directory, parent_id, cid = sys.argv[1:4]
    saver = FileSaver(directory)
    real_replace = os.replace

    def replace(src, dst):
        if os.path.basename(os.path.dirname(dst)) == "checkpoints":
            os.kill(os.getpid(), signal.SIGKILL)  # die with the row still a temp file
        real_replace(src, dst)

    os.replace = replace
    cp = Checkpoint(cid, parent_id, 5, {"x": "lost"}, {"x": cid}, (), "2030-01-01T00:00:00")
    write = TaskWrite("t", "n", "result", "lost")
    saver.put(CheckpointRecord("t1", "", cp, {}, (write,)))
    print("not reached")
    """
)


def test_process_killed_mid_put_leaves_the_thread_loadable(
    saver: FileSaver, tmp_path: Path
) -> None:
    a, b = chain(saver, "t1", 2)
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    doomed = new_checkpoint_id()
    proc = subprocess.run(
        [sys.executable, str(script), saver.directory, b.id, doomed],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    folder = ns_dir(saver, "t1")
    assert list((folder / "checkpoints").glob(".tmp-*"))  # the row never got its name
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == b
    assert saver.get_tuple("t1", "", doomed) is None

    reopened = FileSaver(saver.directory)  # a new process would start like this
    c, changes = make({"i": 2}, b)
    reopened.put(rec("t1", c, changes))
    assert [r.checkpoint.id for r in reopened.list("t1")] == [c.id, b.id, a.id]
    assert not list(folder.rglob(".tmp-*"))
    assert not (folder / "writes" / doomed).exists()


def test_stray_temp_files_are_ignored_and_cleaned_up(saver: FileSaver) -> None:
    (a,) = chain(saver, "t1", 1)
    folder = ns_dir(saver, "t1")
    strays = [
        folder / "checkpoints" / ".tmp-123-abc",
        folder / "blobs" / ".tmp-123-def",
        folder / "writes" / ".tmp-1-x",
        folder.parent / ".tmp-9-thread",
    ]
    for path in strays:
        path.write_bytes(b"half a file")
    assert [r.checkpoint.id for r in saver.list("t1")] == [a.id]
    assert saver.get_tuple("t1") is not None
    assert [t.thread_id for t in saver.list_threads()] == ["t1"]

    fresh = FileSaver(saver.directory)  # sweeps on its first write to the namespace
    b, changes = make({"i": 1}, a)
    fresh.put(rec("t1", b, changes))
    assert not any(p.exists() for p in strays)


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


# -- threads, prune, copy, retention -------------------------------------------------------------


def test_list_threads_newest_updated_first_with_status(saver: FileSaver) -> None:
    (idle,) = chain(saver, "idle", 1)
    waiting, changes = make({"x": 1}, next=(PlannedTask("review"),))
    saver.put(rec("waiting", waiting, changes))
    saver.put_writes("waiting", "", waiting.id, [TaskWrite("r1", "review", "interrupt", "ok?")])
    failed, changes = make({"x": 1}, next=(PlannedTask("boom"),))
    saver.put(rec("failed", failed, changes))
    saver.put_writes("failed", "", failed.id, [TaskWrite("b1", "boom", "error", "bad")])
    infos = saver.list_threads()
    assert [i.thread_id for i in infos] == ["failed", "waiting", "idle"]
    assert [i.status for i in infos] == ["error", "interrupted", "idle"]
    assert infos[1].next == ("review",) and infos[1].checkpoint_id == waiting.id
    assert [i.thread_id for i in saver.list_threads(status="interrupted")] == ["waiting"]
    assert [i.thread_id for i in saver.list_threads(limit=2)] == ["failed", "waiting"]
    # A subgraph namespace alone does not make a thread show up.
    chain(saver, "only-child", 1, ns="child:1")
    assert "only-child" not in [i.thread_id for i in saver.list_threads()]
    # A stale thread.json (a crash after the row landed) is recomputed.
    (Path(saver.backend.thread_dir("idle")) / "thread.json").unlink()
    info = {i.thread_id: i for i in saver.list_threads()}["idle"]
    assert info.checkpoint_id == idle.id and info.status == "idle"


def test_prune_keeps_the_newest_and_the_values_they_use(saver: FileSaver) -> None:
    base, changes = make({"big": "x" * 1000, "messages": ["m0"]})
    saver.put(rec("t1", base, changes))
    cps = [base]
    for i in range(1, 6):
        parent = cps[-1]
        values = {"big": "x" * 1000, "messages": [*parent.values["messages"], f"m{i}"]}
        cp, _ = make(values, parent, changed={"messages"})
        grown = {"messages": Append(parent.versions["messages"], i)}
        saver.put(rec("t1", cp, grown))
        saver.put_writes("t1", "", cp.id, [TaskWrite(f"w{i}", "n", "result", i)])
        cps.append(cp)
    chain(saver, "t1", 3, ns="child:1")
    blobs = ns_dir(saver, "t1") / "blobs"
    headers = [json.loads(p.read_bytes().split(b"\n")[0]) for p in blobs.iterdir()]
    assert any(h["base"] is not None for h in headers)  # the list was stored as deltas

    assert saver.prune("t1", keep_last=2) == 4 + 1
    assert [r.checkpoint.id for r in saver.list("t1")] == [cps[5].id, cps[4].id]
    assert len(list(saver.list("t1", "child:1"))) == 2
    for r in saver.list("t1"):
        assert r.checkpoint == next(c for c in cps if c.id == r.checkpoint.id)
    assert len(list((ns_dir(saver, "t1") / "writes").iterdir())) == 2
    kept = {p.name for p in blobs.iterdir()}
    assert f"big@{base.id}.blob" in kept  # still used by the kept checkpoints
    needed = {("big", base.id)}
    for cp in cps[4:]:
        ref: str | None = cp.versions["messages"]
        while ref is not None:
            needed.add(("messages", ref))
            header = json.loads((blobs / f"messages@{ref}.blob").read_bytes().split(b"\n")[0])
            ref = header["base"]
    assert kept == {f"{k}@{v}.blob" for k, v in needed}
    assert saver.prune("t1", keep_last=2) == 0
    assert saver.prune("nope", keep_last=1) == 0


def test_prune_does_not_move_a_thread_up_in_list_threads(saver: FileSaver) -> None:
    """Pruning old checkpoints is not an update: the thread keeps its ``updated_at``."""
    chain(saver, "older", 3)
    chain(saver, "newer", 1)
    before = saver.list_threads()
    assert [i.thread_id for i in before] == ["newer", "older"]
    assert saver.prune("older", keep_last=1) == 2
    assert saver.list_threads() == before


def test_copy_thread(saver: FileSaver) -> None:
    cps = chain(saver, "src", 3)
    saver.put_writes("src", "", cps[-1].id, [TaskWrite("a", "n", "interrupt", 1)])
    child = chain(saver, "src", 2, ns="child:1")
    saver.copy_thread("src", "dst")
    saver.delete_thread("src")
    got = saver.get_tuple("dst")
    assert got is not None and got.thread_id == "dst" and got.checkpoint == cps[-1]
    assert got.pending_writes == (TaskWrite("a", "n", "interrupt", 1),)
    assert [r.checkpoint.id for r in saver.list("dst")] == [c.id for c in reversed(cps)]
    assert [r.checkpoint.id for r in saver.list("dst", "child:1")] == [
        c.id for c in reversed(child)
    ]
    assert [i.thread_id for i in saver.list_threads()] == ["dst"]
    more, changes = make({"i": 9}, cps[-1])
    saver.put(rec("dst", more, changes))  # the copy carries on on its own
    chain(saver, "other", 1)
    with pytest.raises(ValueError, match="already has checkpoints"):
        saver.copy_thread("other", "dst")
    saver.copy_thread("missing", "dst2")
    assert saver.get_tuple("dst2") is None


def test_retention_max_checkpoints(tmp_path: Path) -> None:
    saver = FileSaver(tmp_path / "store", retention=Retention(max_checkpoints=3))
    cps: list[Checkpoint] = []
    for i in range(6):
        cp, changes = make({"i": [i]}, cps[-1] if cps else None)  # a list: one blob each
        saver.put(rec("t1", cp, changes))
        cps.append(cp)
    assert [r.checkpoint.id for r in saver.list("t1")] == [c.id for c in reversed(cps[3:])]
    assert len(list((ns_dir(saver, "t1") / "blobs").iterdir())) == 3


def test_retention_max_age_never_drops_the_newest(tmp_path: Path) -> None:
    saver = FileSaver(tmp_path / "store", retention=Retention(max_age=timedelta(hours=1)))
    old = (datetime.now(UTC) - timedelta(days=2)).isoformat()
    a, changes = make({"i": 0}, created_at=old)
    saver.put(rec("t1", a, changes))
    b, changes = make({"i": 1}, a, created_at=old)
    saver.put(rec("t1", b, changes))
    assert [r.checkpoint.id for r in saver.list("t1")] == [b.id]  # a dropped, b is the newest
    c, changes = make({"i": 2}, b)
    saver.put(rec("t1", c, changes))
    d, changes = make({"i": 3}, c)
    saver.put(rec("t1", d, changes))
    assert [r.checkpoint.id for r in saver.list("t1")] == [d.id, c.id]


def test_hinted_value_missing_on_disk_is_stored_in_full(saver: FileSaver) -> None:
    (a,) = chain(saver, "t1", 1)
    # The engine says "topic" is unchanged since a version this namespace never stored.
    cp = Checkpoint(
        new_checkpoint_id(),
        a.id,
        1,
        {"i": 1, "topic": "t"},
        {"i": "v2", "topic": "elsewhere"},
        (),
        datetime.now(UTC).isoformat(),
    )
    saver.put(rec("t1", cp, {"i": SET}))
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint.values == {"i": 1, "topic": "t"}


# -- compaction ----------------------------------------------------------------------------------


def grow(saver: FileSaver, records: list[CheckpointRecord], n: int, size: int) -> None:
    """Append one item of ``size`` characters to ``messages`` per checkpoint, ``n`` times."""
    for _ in range(n):
        parent = records[-1].checkpoint if records else None
        messages = parent.values["messages"] if parent else []
        records.append(step("t1", {"messages": [*messages, item(len(messages), size)]}, parent))
        saver.put(records[-1])


def blob_files(saver: FileSaver) -> dict[str, tuple[dict[str, Any], bytes]]:
    """version -> (header, value bytes) of every blob file of ``t1``."""
    out = {}
    for path in (ns_dir(saver, "t1") / "blobs").iterdir():
        line, _, data = path.read_bytes().partition(b"\n")
        header = json.loads(line)
        out[header["version"]] = (header, data)
    return out


def test_compaction_keeps_each_item_about_once_and_every_version_loads(tmp_path: Path) -> None:
    records: list[CheckpointRecord] = []
    with FileSaver(tmp_path / "store") as saver:
        grow(saver, records, 200, 500)
        for r in records:
            got = saver.get_tuple("t1", "", r.checkpoint.id)
            assert got is not None and got.checkpoint.values == r.checkpoint.values
        files = blob_files(saver)
    fulls = [v for v, (h, _) in files.items() if h["base"] is None]
    prefixes = {v: h for v, (h, data) in files.items() if h["base"] is not None and not data}
    deltas = [v for v, (h, _) in files.items() if h["chain_bytes"] > 0]
    assert len(fulls) == 1 and len(fulls) + len(prefixes) + len(deltas) == 200
    assert len(deltas) < 60  # the chain after the newest full blob stays short
    assert sorted(h["items"] for h, _ in files.values()) == list(range(1, 201))
    for version, header in prefixes.items():  # the first `items` items of a later version
        assert header["chain_bytes"] == 0 and header["size"] == 0
        assert header["base"] == header["start"] and header["base"] > version
        hops = 0
        while header["base"] is not None and header["chain_bytes"] == 0:
            header, hops = files[header["base"]][0], hops + 1
        assert hops < 20  # one hop per compaction since (prefix rows are not repointed)
    stored = sum(len(data) for _, data in files.values())
    messages = records[-1].checkpoint.values["messages"]
    assert stored < 1.1 * len(serde.DEFAULT.dumps(messages))  # not 2x, not 200 copies


def test_prune_after_compaction_keeps_what_prefix_rows_point_at(tmp_path: Path) -> None:
    records: list[CheckpointRecord] = []
    with FileSaver(tmp_path / "store") as saver:
        grow(saver, records, 120, 500)
        kept = records[-60:]  # older than the newest full blob: some are prefix rows
        assert any(not blob_files(saver)[r.checkpoint.id][1] for r in kept)
        assert saver.prune("t1", keep_last=60) == 60
        assert [r.checkpoint for r in saver.list("t1")] == [r.checkpoint for r in kept[::-1]]
        assert len(blob_files(saver)) < 120
        grow(saver, records, 40, 500)
        saver.copy_thread("t1", "t2")
        assert [r.checkpoint for r in saver.list("t2")] == [r.checkpoint for r in records[:59:-1]]


def test_a_crash_midway_through_compaction_loses_nothing(
    saver: FileSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new full blob lands first; prefix rows go oldest first, so what is left undone is
    the newest versions, still deltas, which the next compaction rewrites."""
    records: list[CheckpointRecord] = []
    folder = ns_dir(saver, "t1") / "blobs"
    real_replace = os.replace
    rewritten: list[str] = []

    def crash_on_third_rewrite(src: Any, dst: Any) -> None:
        if Path(dst).parent == folder and Path(dst).exists():
            rewritten.append(Path(dst).name)
            if len(rewritten) == 3:
                raise OSError("simulated crash")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_third_rewrite)
    with pytest.raises(OSError, match="simulated crash"):
        grow(saver, records, 200, 500)
    monkeypatch.setattr(os, "replace", real_replace)
    doomed = records.pop()
    assert len(rewritten) == 3 and saver.get_tuple("t1", "", doomed.checkpoint.id) is None
    grow(saver, records, 60, 500)
    assert [r.checkpoint for r in saver.list("t1")] == [r.checkpoint for r in records[::-1]]
    undone = [v for v, (h, _) in blob_files(saver).items() if h["chain_bytes"] > 0]
    assert all(v > records[-60].checkpoint.id for v in undone)  # compacted since


def test_readers_racing_compaction_load_every_version(saver: FileSaver) -> None:
    """Readers take no lock: a version they read may turn into a prefix row under them."""
    records: list[CheckpointRecord] = []
    grow(saver, records, 1, 500)
    done = threading.Event()
    failures: list[str] = []

    def read() -> None:
        for n in itertools.count():
            if done.is_set():
                return
            r = records[n % max(len(records) - 1, 1)]  # the last one may be mid-put
            try:
                got = saver.get_tuple("t1", "", r.checkpoint.id)
            except SerializationError as exc:
                failures.append(str(exc))
                continue
            if got is None or got.checkpoint.values != r.checkpoint.values:
                failures.append(f"{r.checkpoint.id}: {got}")

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        grow(saver, records, 150, 500)
    finally:
        done.set()
        for t in readers:
            t.join()
    assert failures == []
    assert any(not data for _, data in blob_files(saver).values())  # it did compact


def test_a_prefix_row_file_is_readable(saver: FileSaver) -> None:
    records: list[CheckpointRecord] = []
    grow(saver, records, 20, 2000)
    first = records[0].checkpoint.id
    text = (ns_dir(saver, "t1") / "blobs" / f"messages@{first}.blob").read_text()
    header = json.loads(text)
    assert text == json.dumps(header) + "\n"  # the header line alone: no bytes of its own
    assert header["items"] == 1 and header["size"] == 0 and header["base"] > first


# -- loading a long thread again -----------------------------------------------------------------


@contextmanager
def blobs_opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the blob files the saver opens inside the block."""
    opened: list[str] = []

    def counting(path: Any, *args: Any, **kwargs: Any) -> Any:
        if Path(path).parent.name == "blobs":
            opened.append(Path(path).name)
        return open(path, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(reading, "open", counting, raising=False)
        yield opened


def newest(saver: FileSaver) -> dict[str, Any]:
    got = saver.get_tuple("t1")
    assert got is not None
    return got.checkpoint.values


def test_a_long_thread_loads_again_from_the_header_of_its_tip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newest value's chain is held (``HeldChains``): loading it again opens one blob file,
    its tip, for the CRC-32 in its header, however long the list has grown."""
    records: list[CheckpointRecord] = []
    with FileSaver(tmp_path / "store") as saver:
        grow(saver, records, 60, 1000)
    with FileSaver(tmp_path / "store") as saver:
        with blobs_opened(monkeypatch) as cold:
            assert newest(saver) == records[-1].checkpoint.values
        with blobs_opened(monkeypatch) as warm:
            assert newest(saver) == records[-1].checkpoint.values
        assert len(cold) > 3 and warm == [cold[0]]
        grow(saver, records, 2, 1000)  # puts move the held tip along
        with blobs_opened(monkeypatch) as after_puts:
            assert newest(saver) == records[-1].checkpoint.values
        assert len(after_puts) == 1


def test_a_held_chain_follows_what_another_saver_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows another process added are read down to the held tip, then the rest is held; its
    compaction (the held tip turns into a prefix row) makes the chain be read again."""
    records: list[CheckpointRecord] = []
    with FileSaver(tmp_path / "store") as reader, FileSaver(tmp_path / "store") as writer:
        grow(writer, records, 60, 1000)
        assert newest(reader) == records[-1].checkpoint.values
        grow(writer, records, 2, 1000)
        with blobs_opened(monkeypatch) as opened:
            assert newest(reader) == records[-1].checkpoint.values
        assert len(opened) == 3  # two new deltas, the header of the held tip
        grow(writer, records, 40, 1000)
        assert newest(reader) == records[-1].checkpoint.values
        for r in records:
            got = reader.get_tuple("t1", "", r.checkpoint.id)
            assert got is not None and got.checkpoint.values == r.checkpoint.values


def test_a_held_chain_is_checked_against_its_tip_on_disk(saver: FileSaver) -> None:
    """A tip file that no longer records the bytes held (rewritten by another process, here by
    hand) is read, never taken for the held value."""
    records: list[CheckpointRecord] = []
    grow(saver, records, 60, 1000)
    assert newest(saver) == records[-1].checkpoint.values
    tip = records[-1].checkpoint.versions["messages"]
    path = Path(folders.blob_path(str(ns_dir(saver, "t1")), "messages", tip))
    header = json.loads(path.read_bytes().partition(b"\n")[0])
    other = rows.blob_row(header, serde.DEFAULT.dumps(["another last item"]))
    path.write_bytes(rows.blob_file(other))
    assert newest(saver)["messages"] == [
        *records[-2].checkpoint.values["messages"],
        "another last item",
    ]


async def test_async_methods_and_context_manager(tmp_path: Path) -> None:
    with FileSaver(tmp_path / "store") as saver:
        cp, changes = make({"x": 1})
        await saver.aput(rec("t1", cp, changes))
        await saver.aput_writes("t1", "", cp.id, [TaskWrite("a", "n", "result", 2)])
        got = await saver.aget_tuple("t1")
        assert got is not None and got.pending_writes == (TaskWrite("a", "n", "result", 2),)
        assert [t.thread_id for t in await saver.alist_threads()] == ["t1"]
        assert await saver.aprune("t1", keep_last=1) == 0
        await saver.acopy_thread("t1", "t2")
        await saver.adelete_thread("t1")
        assert await saver.aget_tuple("t1") is None
        assert [r.thread_id async for r in saver.alist("t2")] == ["t2"]
    saver.close()  # idempotent


def test_delete_thread_while_others_write_it(tmp_path: Path) -> None:
    """Deletes remove a thread's folder (lock file included) under writers waiting on it."""
    directory = tmp_path / "store"
    errors: list[BaseException] = []
    stop = threading.Event()
    wins = [0]

    def writer() -> None:
        saver = FileSaver(directory)
        try:
            while not stop.is_set():
                head = saver.get_tuple("t1")
                parent = head.checkpoint if head else None
                cp, changes = make({"i": parent.step + 1 if parent else 0}, parent)
                try:
                    saver.put(rec("t1", cp, changes, writes=(TaskWrite("a", "n", "result", 1),)))
                    wins[0] += 1
                except ConcurrentUpdateError:
                    pass
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer) for _ in range(3)]
    for t in workers:
        t.start()
    deleter = FileSaver(directory)
    try:
        for _ in range(30):
            time.sleep(0.01)
            deleter.delete_thread("t1")
    finally:
        stop.set()
        for t in workers:
            t.join()
    assert errors == []
    assert wins[0] > 0
    records = list(deleter.list("t1"))  # whatever survived the last delete is whole
    for older, newer in itertools.pairwise(reversed(records)):
        assert newer.checkpoint.parent_id == older.checkpoint.id
    assert all(len(r.pending_writes) == 1 for r in records)
    assert not list(directory.glob(".trash-*"))


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
