"""The saver protocol and the records it stores.

A checkpoint is everything the run loop needs to take its next step: the state values, their
versions, the tasks planned for the next step, and join barriers still waiting. Task writes
("pending writes") are recorded against the checkpoint their step started from, so a step that
failed or was interrupted can be resumed without re-running the tasks that finished.
"""

from __future__ import annotations

import asyncio
import builtins
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, Self, TypeVar

from threadline import serde
from threadline.checkpoint.langgraph_api import CheckpointTuple as CheckpointTuple
from threadline.checkpoint.langgraph_api import LangGraphCheckpointerAPI

T = TypeVar("T")
WriteKind = Literal["result", "error", "interrupt", "resume", "breakpoint", "task", "trace"]
ThreadStatus = Literal["idle", "interrupted", "error", "running", "damaged"]
"""Where a thread stands; ``damaged``: its newest checkpoint row fails its check (only
``list_threads`` says so: nothing stores it)."""

# Records made at every step are not frozen: a frozen dataclass costs about five times as much
# to build, a measurable share of a step. Treat them as immutable (``dataclasses.replace``).


@serde.register(name="threadline.PlannedTask")
@dataclass(slots=True)
class PlannedTask:
    """A task planned for the next step: a node triggered by an edge, or a ``Send``."""

    name: str
    arg: Any = None
    send: bool = False


@serde.register(name="threadline.Checkpoint")
@dataclass(slots=True)
class Checkpoint:
    """One snapshot of a thread, taken at the end of a superstep (or by an input/update/fork)."""

    id: str
    parent_id: str | None
    step: int
    values: dict[str, Any]
    versions: dict[str, str]
    next: tuple[PlannedTask, ...]
    created_at: str
    barriers: dict[str, tuple[str, ...]] = field(default_factory=dict)
    updated_by: tuple[str, ...] = ()


@serde.register(name="threadline.TaskWrite")
@dataclass(slots=True)
class TaskWrite:
    """What one task of a step left behind: its result, error, interrupts or resume answers.

    ``(task_id, kind)`` identifies a write; saving it again replaces it (writes are idempotent).
    """

    task_id: str
    task_name: str
    kind: WriteKind
    value: Any


@dataclass(slots=True)
class CheckpointRecord:
    """A checkpoint as a saver returns it: with its metadata and the pending writes against it.

    The engine saves a ``changes.ChangedRecord``, which also says what changed, so the saver
    stores only that; given a plain record, a saver stores every value.
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint: Checkpoint
    metadata: dict[str, Any]
    pending_writes: tuple[TaskWrite, ...] = ()


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """A thread as ``list_threads`` shows it: where it stands and since when."""

    thread_id: str
    status: ThreadStatus
    checkpoint_id: str
    updated_at: str
    next: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Retention:
    """How much history a saver keeps per thread; it prunes older checkpoints on save.

    ``max_checkpoints`` keeps the newest N of each thread; ``max_age`` drops checkpoints older
    than that, but never a thread's newest one.
    """

    max_checkpoints: int | None = None
    max_age: timedelta | None = None

    def __post_init__(self) -> None:
        if self.max_checkpoints is not None and self.max_checkpoints < 1:
            raise ValueError("Retention.max_checkpoints must be at least 1")


def thread_status(checkpoint: Checkpoint, writes: Sequence[TaskWrite]) -> ThreadStatus:
    """Idle when nothing is planned; else interrupted, failed, or still to run (or running)."""
    names = [t.name for t in checkpoint.next]
    return status_of(names, [(w.task_id, w.kind) for w in writes])


def status_of(next_names: Sequence[str], writes: Iterable[tuple[str, str]]) -> ThreadStatus:
    """``thread_status`` from what a thread row keeps: planned task names, ``(task_id, kind)``."""
    if not next_names:
        return "idle"
    writes = list(writes)
    if not writes:
        return "running"
    finished = {task_id for task_id, kind in writes if kind == "result"}
    kinds = {kind for task_id, kind in writes if task_id not in finished}
    if "error" in kinds:
        return "error"
    if kinds & {"interrupt", "breakpoint"}:
        return "interrupted"
    return "running"


def metadata_matches(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """True when every ``filter`` key is present in ``metadata`` with an equal value."""
    if not filter:
        return True
    return all(key in metadata and metadata[key] == value for key, value in filter.items())


class OffLoop:
    """Async calls made of sync ones (a saver's, ``transactional.Transactional``'s). One that
    does no I/O sets ``in_process``: they then run on the caller's thread or event loop, because
    handing them to another thread would cost more than the call."""

    in_process: bool = False

    async def _off_loop(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a sync method without blocking the event loop (directly if ``in_process``)."""
        if self.in_process:
            return fn(*args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)


class BaseSaver(OffLoop, ABC, LangGraphCheckpointerAPI):
    """Where checkpoints live. Sync methods are abstract; async ones default to a worker thread.

    Every saver also answers LangGraph's checkpointer calls (``get_tuple(config)``,
    ``list(config, ...)``, ``get(config)``, their ``a*`` forms): see ``langgraph_api``.

    Every saver takes ``serde=``, the ``threadline.serde.Serializer`` that encodes all it stores
    (so its compression and encryption apply at rest); the default is plain typed msgpack.

    Savers that have a native async driver override the ``a*`` methods. A saver that does no
    I/O sets ``in_process`` (``OffLoop``).
    """

    @abstractmethod
    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        """The checkpoint with ``checkpoint_id``, or the thread's newest; ``None`` if absent."""

    @abstractmethod
    def list(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointRecord]:
        """Checkpoints of a thread newest first, optionally only those older than ``before``."""

    @abstractmethod
    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        """Save a checkpoint together with its pending writes, in one transaction.

        The checkpoint is saved only on top of the parent it was computed from: unless ``fork``
        is true, its ``parent_id`` must be the newest checkpoint of its thread and namespace
        (``None`` for an empty one), otherwise ``ConcurrentUpdateError`` is raised and nothing
        is written. ``fork=True`` starts a new branch from an older checkpoint on purpose.
        """

    @abstractmethod
    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        """Record task writes against a saved checkpoint; a write with the same key replaces."""

    @abstractmethod
    def delete_thread(self, thread_id: str) -> None:
        """Remove every checkpoint and write of a thread, in every namespace."""

    @abstractmethod
    def list_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> builtins.list[ThreadInfo]:
        """Threads (root namespace) with their status, most recently updated first."""

    @abstractmethod
    def prune(self, thread_id: str, *, keep_last: int) -> int:
        """Delete all but the newest ``keep_last`` checkpoints of each namespace of a thread.

        Returns how many checkpoints were deleted; values still used by a kept checkpoint stay.
        """

    @abstractmethod
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread to a new, empty thread id."""

    async def aget_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        return await self._off_loop(self.get_tuple, thread_id, checkpoint_ns, checkpoint_id)

    async def alist(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointRecord]:
        records = await self._off_loop(
            lambda: list(
                self.list(thread_id, checkpoint_ns, filter=filter, before=before, limit=limit)
            )
        )
        for record in records:
            yield record

    async def aput(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        await self._off_loop(self.put, record, fork=fork)

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        await self._off_loop(self.put_writes, thread_id, checkpoint_ns, checkpoint_id, writes)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._off_loop(self.delete_thread, thread_id)

    async def alist_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> builtins.list[ThreadInfo]:
        return await self._off_loop(self.list_threads, status=status, limit=limit)

    async def aprune(self, thread_id: str, *, keep_last: int) -> int:
        return await self._off_loop(self.prune, thread_id, keep_last=keep_last)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._off_loop(self.copy_thread, source_thread_id, target_thread_id)

    def setup(self) -> None:
        """Create what the saver needs to store checkpoints (tables, indexes), as LangGraph's
        ``checkpointer.setup()``. Idempotent; a no-op for savers that need nothing (memory,
        files, SQLite, which prepares its file when it opens it)."""

    async def asetup(self) -> None:
        """``setup`` from async code."""
        await self._off_loop(self.setup)

    def close(self) -> None:
        """Release connections or files; a no-op for savers that hold none."""

    async def aclose(self) -> None:
        """Close from async code; savers with async connections override it."""
        self.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


BaseCheckpointSaver = BaseSaver
"""LangGraph's name for the saver base class (``langgraph.checkpoint.base``). A custom saver
subclassing it implements threadline's record methods (``get_tuple(thread_id, ns, id)``,
``put(record)``, ...: see docs/storage.md), not LangGraph's config-and-dict ones."""
