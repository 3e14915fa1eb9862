"""Compaction of long lists in plain files, and loading a long thread again from the header of
its tip.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from builders import item, step
from file_fixtures import (
    ns_dir,
    saver,
)

from threadline import serde
from threadline.checkpoint.base import (
    CheckpointRecord,
)
from threadline.checkpoint.files import FileSaver, disk, rows
from threadline.errors import SerializationError

__all__ = ["saver"]  # fixtures used here


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
        patch.setattr(rows, "open", counting, raising=False)
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
    path = Path(disk.blob_path(str(ns_dir(saver, "t1")), "messages", tip))
    header = json.loads(path.read_bytes().partition(b"\n")[0])
    other = rows.blob_row(header, serde.DEFAULT.dumps(["another last item"]))
    path.write_bytes(rows.blob_file(other))
    assert newest(saver)["messages"] == [
        *records[-2].checkpoint.values["messages"],
        "another last item",
    ]
