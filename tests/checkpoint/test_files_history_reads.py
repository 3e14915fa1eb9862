"""``FileSaver.list`` while another saver prunes the same thread: a checkpoint appears whole or
not at all, never as a "missing value" error."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from file_fixtures import make, ns_dir, rec

from threadline.checkpoint.backend import Check, Pair
from threadline.checkpoint.base import CheckpointRecord, Retention
from threadline.checkpoint.files import FileSaver
from threadline.checkpoint.files.backend import FilesTransaction
from threadline.checkpoint.layout import BlobRow
from threadline.errors import SerializationError


def whole(records: Sequence[CheckpointRecord]) -> None:
    """Each record holds the values its metadata says it was saved with."""
    for r in records:
        assert r.checkpoint.values == {"k": [r.metadata["i"]]}


def test_a_prune_between_a_page_and_its_values_is_not_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prune runs (in another saver) once the page's rows are read and before its values
    are: it waits for the page to be read, or the page would name values it deleted."""
    directory = tmp_path / "store"
    reader, pruner = FileSaver(directory), FileSaver(directory)
    cps: list[Any] = []
    for i in range(6):
        cp, changes = make({"k": [i]}, cps[-1] if cps else None)
        reader.put(rec("t1", cp, changes, metadata={"i": i}))
        cps.append(cp)
    values = FilesTransaction.values
    pruned: list[int] = []
    prune = threading.Thread(target=lambda: pruned.append(pruner.prune("t1", keep_last=2)))

    def pruned_first(
        tx: FilesTransaction, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], Check | None]:
        if not prune.is_alive() and not pruned:
            prune.start()
            prune.join(timeout=1.0)  # done at once unless it waits for this read
        return values(tx, thread_id, ns, wanted)

    monkeypatch.setattr(FilesTransaction, "values", pruned_first)
    records = list(reader.list("t1"))
    prune.join()
    monkeypatch.undo()
    assert pruned == [4]
    whole(records)
    assert [r.checkpoint.id for r in records] == [cp.id for cp in reversed(cps)]
    assert [r.checkpoint.id for r in reader.list("t1")] == [cps[-1].id, cps[-2].id]


def test_history_reads_racing_retention_never_fail(tmp_path: Path) -> None:
    """A writer with ``max_checkpoints`` prunes at every put while another saver pages."""
    directory = tmp_path / "store"
    writer = FileSaver(directory, retention=Retention(max_checkpoints=2))
    reader = FileSaver(directory)
    done = threading.Event()
    failures: list[BaseException] = []

    def read() -> None:
        while not done.is_set():
            try:
                whole(list(reader.list("t1", limit=3)))
            except (AssertionError, SerializationError) as exc:
                failures.append(exc)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in readers:
        t.start()
    try:
        parent = None
        for i in range(150):
            cp, changes = make({"k": [i]}, parent)
            writer.put(rec("t1", cp, changes, metadata={"i": i}))
            parent = cp
    finally:
        done.set()
        for t in readers:
            t.join()
    assert failures == []
    assert len(list(reader.list("t1"))) == 2


def test_a_missing_value_of_a_stored_checkpoint_is_still_an_error(tmp_path: Path) -> None:
    with FileSaver(tmp_path / "store") as saver:
        cp, changes = make({"k": [1]})
        saver.put(rec("t1", cp, changes))
        (ns_dir(saver, "t1") / "blobs" / f"k@{cp.id}.blob").unlink()
        with pytest.raises(SerializationError, match=r"'k'.*missing"):
            list(saver.list("t1"))
