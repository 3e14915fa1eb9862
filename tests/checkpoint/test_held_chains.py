"""Every saver that holds long delta chains (``chains.HeldChains``) stays right when another
process rewrites the thread under it, even with the same checkpoint ids and versions.

A version's value never changes in normal use (versions are new checkpoint ids), but versions
can be chosen by hand, or a thread deleted and written again from the same records with other
values. A held chain whose tip has the version the storage now holds with other bytes must not
be grown by the next put, or a later load would return the old values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from builders import hints_for, item, rec, step
from factories import SAVER_FACTORIES

from threadline.checkpoint import BaseSaver, Checkpoint, CheckpointRecord, FileSaver, SqliteSaver

TURNS = 40  # 40 KB: a chain long enough to be held


@pytest.fixture(params=["files", "postgres", "redis", "sqlite"])
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSaver]:
    with SAVER_FACTORIES[request.param](tmp_path) as instance:
        yield instance


def twin(saver: BaseSaver) -> AbstractContextManager[BaseSaver]:
    """Another saver on the same storage, as another process would open it."""
    if isinstance(saver, SqliteSaver):
        return SqliteSaver(saver.path)
    if isinstance(saver, FileSaver):
        return FileSaver(saver.directory)
    if type(saver).__name__ == "RedisSaver":
        from threadline.checkpoint.redis import RedisSaver

        return RedisSaver(saver.url, prefix=saver.prefix)  # type: ignore[attr-defined]
    from test_postgres_saver import postgres_saver

    return postgres_saver(schema=saver.schema)  # type: ignore[attr-defined]


def conversation(thread_id: str, texts: list[str]) -> list[CheckpointRecord]:
    """One checkpoint per message, the list growing by one each time."""
    records: list[CheckpointRecord] = []
    parent: Checkpoint | None = None
    for i in range(len(texts)):
        record = step(thread_id, {"messages": texts[: i + 1]}, parent)
        records.append(record)
        parent = record.checkpoint
    return records


@contextmanager
def rewritten(saver: BaseSaver, records: list[CheckpointRecord]) -> Iterator[list[Checkpoint]]:
    """The thread deleted and written again by another saver: same ids, other messages."""
    again: list[Checkpoint] = []
    with twin(saver) as other:
        other.delete_thread(records[0].thread_id)
        for record in records:
            messages = [m.replace("x", "z") for m in record.checkpoint.values["messages"]]
            cp = dataclasses.replace(record.checkpoint, values={"messages": messages})
            other.put(rec(record.thread_id, cp, hints=hints_for(again[-1] if again else None, cp)))
            again.append(cp)
        yield again


def test_a_tip_rewritten_with_the_same_version_is_not_grown_from(saver: BaseSaver) -> None:
    records = conversation("t", [item(i) for i in range(TURNS)])
    for record in records:
        saver.put(record)
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == records[-1].checkpoint  # now held
    with rewritten(saver, records) as again:
        got = saver.get_tuple("t")
        assert got is not None and got.checkpoint == again[-1]
        latest = step("t", {"messages": [*again[-1].values["messages"], "new"]}, again[-1])
        saver.put(latest)
        got = saver.get_tuple("t")
        assert got is not None and got.checkpoint == latest.checkpoint
