"""The plain-files saver's compare-and-set across processes and its crash safety: a put is
whole or absent, whatever kills it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from file_fixtures import (
    chain,
    files_under,
    make,
    ns_dir,
    rec,
    saver,
)

from threadline.checkpoint.base import (
    TaskWrite,
)
from threadline.checkpoint.files import FileSaver
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.errors import ConcurrentUpdateError

__all__ = ["saver"]  # fixtures used here

ROOT = Path(__file__).resolve().parents[2]


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


# -- power failures: which files are fsynced -----------------------------------------------------


def _fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths ``os.fsync`` is called on from now on (files and folders)."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced


def _temp_files(paths: list[str], *folders: Path) -> list[str]:
    return [p for p in paths if Path(p).name.startswith(".tmp-") and Path(p).parent in folders]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads fd paths from /proc")
def test_a_put_fsyncs_its_row_after_head_and_not_the_files_readers_check(
    saver: FileSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The row is the last file fsynced, after the folder that holds ``HEAD``'s rename;
    ``HEAD`` and a ``thread.json`` naming the new head are not fsynced (a garbled or stale one
    no longer names the head); ``thread.json`` rewritten for a write on the head is."""
    (a,) = chain(saver, "t1", 1)
    folder = ns_dir(saver, "t1")
    synced = _fsynced(monkeypatch)
    b, changes = make({"i": 1, "big": list(range(100))}, a)
    saver.put(rec("t1", b, changes))
    row = synced.index(str(folder / "checkpoints"))
    assert synced[row - 2] == str(folder)  # HEAD's rename, then the row file, then its folder
    assert row == len(synced) - 1
    assert not _temp_files(synced, folder, folder.parent)  # HEAD's, thread.json's
    synced.clear()
    saver.put_writes("t1", "", b.id, [TaskWrite("w", "n", "interrupt", "ok?")])
    assert str(folder.parent) in synced  # thread.json's rename, for the new status
    assert _temp_files(synced, folder.parent)  # its bytes


@pytest.mark.parametrize("garbled", ["HEAD", "thread.json"])
def test_a_garbled_head_or_thread_file_reads_as_made_from_the_rows(
    saver: FileSaver, garbled: str
) -> None:
    """What a power failure can leave of a file that is not fsynced: zeros, or nothing."""
    a, b = chain(saver, "t1", 2)
    folder = ns_dir(saver, "t1")
    path = folder / garbled if garbled == "HEAD" else folder.parent / garbled
    path.write_bytes(b"\0" * 40)
    got = saver.get_tuple("t1")
    assert got is not None and got.checkpoint == b
    info = saver.list_threads()[0]
    assert (info.thread_id, info.checkpoint_id, info.status) == ("t1", b.id, "idle")
    c, changes = make({"i": 3}, b)
    saver.put(rec("t1", c, changes))
    assert [r.checkpoint.id for r in saver.list("t1")] == [c.id, b.id, a.id]
    assert json.loads((folder / "HEAD").read_text()) == {"checkpoint_id": c.id}
