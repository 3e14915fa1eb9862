"""The conformance suite's savers, its sync/async ``Api`` and the helpers its modules share.

The suite (``test_conformance_*.py``) holds behaviour every checkpoint saver must share, through
its sync and its async methods. To cover a new saver, add one line to ``SAVER_FACTORIES`` in
``factories.py``. Every test runs once per saver, and those taking ``api`` once per API flavour
too (``sync`` calls ``get_tuple``/``put``/..., ``async`` calls ``aget_tuple``/``aput``/...).

Records are built as the engine builds them (``builders.py``): versions name the checkpoint at
which a key last changed, and a record's changes say which keys changed and which lists only grew.

A test module imports the fixtures it uses, with those they depend on (``api`` needs ``saver``,
``mode`` and ``open_saver``), and names them in ``__all__``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from builders import step
from factories import SAVER_FACTORIES

from threadline.checkpoint import BaseSaver, Checkpoint, CheckpointRecord, TaskWrite, ThreadInfo

# -- savers under test ---------------------------------------------------------------------------

OpenSaver = Callable[..., BaseSaver]


@pytest.fixture(params=sorted(SAVER_FACTORIES))
def open_saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OpenSaver]:
    """Opens savers of one backend, each in its own corner; ``options`` go to the constructor."""
    factory = SAVER_FACTORIES[request.param]
    counter = itertools.count()
    with ExitStack() as stack:

        def open_(**options: Any) -> BaseSaver:
            where = tmp_path / f"saver-{next(counter)}"
            where.mkdir()
            return stack.enter_context(factory(where, **options))

        yield open_


@pytest.fixture
def saver(open_saver: OpenSaver) -> BaseSaver:
    return open_saver()


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


class Api:
    """One awaitable interface over either the sync or the async methods of a saver."""

    def __init__(self, saver: BaseSaver, mode: str) -> None:
        self.saver = saver
        self.mode = mode

    @property
    def sync(self) -> bool:
        return self.mode == "sync"

    async def get(
        self, thread_id: str, ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        if self.sync:
            return self.saver.get_tuple(thread_id, ns, checkpoint_id)
        return await self.saver.aget_tuple(thread_id, ns, checkpoint_id)

    async def list(
        self,
        thread_id: str,
        ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> list[CheckpointRecord]:
        if self.sync:
            return list(self.saver.list(thread_id, ns, filter=filter, before=before, limit=limit))
        return [
            r
            async for r in self.saver.alist(
                thread_id, ns, filter=filter, before=before, limit=limit
            )
        ]

    async def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        if self.sync:
            self.saver.put(record, fork=fork)
        else:
            await self.saver.aput(record, fork=fork)

    async def put_writes(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[TaskWrite]
    ) -> None:
        if self.sync:
            self.saver.put_writes(thread_id, ns, checkpoint_id, writes)
        else:
            await self.saver.aput_writes(thread_id, ns, checkpoint_id, writes)

    async def delete_thread(self, thread_id: str) -> None:
        if self.sync:
            self.saver.delete_thread(thread_id)
        else:
            await self.saver.adelete_thread(thread_id)

    async def list_threads(
        self, *, status: Any = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        if self.sync:
            return self.saver.list_threads(status=status, limit=limit)
        return await self.saver.alist_threads(status=status, limit=limit)

    async def prune(self, thread_id: str, *, keep_last: int) -> int:
        if self.sync:
            return self.saver.prune(thread_id, keep_last=keep_last)
        return await self.saver.aprune(thread_id, keep_last=keep_last)

    async def copy_thread(self, source: str, target: str) -> None:
        if self.sync:
            self.saver.copy_thread(source, target)
        else:
            await self.saver.acopy_thread(source, target)


@pytest.fixture
def api(saver: BaseSaver, mode: str) -> Api:
    return Api(saver, mode)


# -- helpers -------------------------------------------------------------------------------------


async def put_chain(
    api: Api,
    thread_id: str,
    n: int,
    *,
    ns: str = "",
    metadata: Callable[[int], dict[str, Any]] | None = None,
) -> list[Checkpoint]:
    """Save ``n`` checkpoints, each the parent of the next; returns them oldest first."""
    cps: list[Checkpoint] = []
    for i in range(n):
        record = step(
            thread_id,
            {"i": i},
            cps[-1] if cps else None,
            ns=ns,
            metadata=metadata(i) if metadata else {"i": i},
        )
        await api.put(record)
        cps.append(record.checkpoint)
    return cps


def ids(records: list[CheckpointRecord]) -> list[str]:
    return [r.checkpoint.id for r in records]


def newest_first(cps: list[Checkpoint]) -> list[str]:
    return [cp.id for cp in reversed(cps)]


class Opaque:
    """A plain class nobody registered with serde: must never be stored."""


async def history(api: Api, thread_id: str, ns: str = "") -> list[tuple[str, Any, Any]]:
    """Everything a thread namespace holds, as comparable data."""
    return [
        (r.checkpoint.id, r.checkpoint, r.metadata, r.pending_writes)  # type: ignore[misc]
        for r in await api.list(thread_id, ns)
    ]


async def assert_loads(
    api: Api, thread_id: str, expected: Sequence[Checkpoint], ns: str = ""
) -> None:
    """Each checkpoint loads by id with exactly its values (and lists in the same order)."""
    for cp in expected:
        got = await api.get(thread_id, ns, cp.id)
        assert got is not None, cp.id
        assert got.checkpoint == cp, cp.id
