"""Fixtures and builders of the plain-files saver's tests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from builders import child

from threadline.checkpoint.base import (
    BaseSaver,
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    TaskWrite,
)
from threadline.checkpoint.changes import SET, Change, ChangedRecord
from threadline.checkpoint.files import FileSaver
from threadline.checkpoint.ids import new_checkpoint_id


@contextmanager
def file_saver(tmp_path: Path, **options: Any) -> Iterator[BaseSaver]:
    """The conformance-suite factory for this saver (``factories.SAVER_FACTORIES``)."""
    with FileSaver(tmp_path / "checkpoints", **options) as saver:
        yield saver


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
    cp = child(parent, cid, values, versions, next, created_at)
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
