"""The ``@task`` calls of one step: results saved before, and saving new ones.

A finished call's return value is a pending write of kind ``task`` on the checkpoint the step
started from, under an id derived from its caller's namespace and the call's index. When the
caller runs again (after an interrupt, a failure or a crash) the n-th call finds the n-th saved
result and does not run. When the write is saved follows the run's durability mode: ``sync``
before the caller gets the result, ``async`` right after, ``exit`` only if the run stops here
(the loop saves the writes it is handed with the step's others).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

from threadline.checkpoint.base import BaseSaver, TaskWrite, WriteKind

if TYPE_CHECKING:
    from threadline.runtime.context import TaskContext

TASK_WRITE: Final[Literal["task"]] = "task"


def call_id(caller_ns: str, index: int) -> str:
    """Stable across re-runs of the caller: its namespace holds its checkpoint and task."""
    return hashlib.blake2b(f"{caller_ns}@{index}".encode(), digest_size=16).hexdigest()


class StepCalls:
    """The ``@task`` calls made by the tasks of a step; shared by their threads.

    Made once per run and moved to each step with ``at``, which costs a run that makes no
    calls next to nothing.
    """

    __slots__ = (
        "_after",
        "_checkpoint_id",
        "_durability",
        "_error",
        "_lock",
        "_ns",
        "_results",
        "_running",
        "_saved",
        "_saver",
        "_thread_id",
        "_writes",
        "busy",
        "held",
    )

    def __init__(
        self, saver: BaseSaver | None, thread_id: str | None, ns: str, durability: str
    ) -> None:
        self._saver = saver
        self._thread_id = thread_id
        self._ns = ns
        self._durability = durability
        self._checkpoint_id = ""
        self._writes: Mapping[tuple[str, WriteKind], TaskWrite] = {}
        self._saved: dict[str, TaskWrite] | None = None
        self._results: list[TaskWrite] = []
        self._running: dict[str, list[Any]] = {}
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._after: concurrent.futures.Future[Any] | None = None
        # Plain flags the engine reads at every step and task without taking the lock
        self.busy = False  # a call was started this step
        self.held = False  # the loop has results to take (or a failed save to raise)

    def at(self, checkpoint_id: str, writes: Mapping[tuple[str, WriteKind], TaskWrite]) -> None:
        """Move to the step that starts from ``checkpoint_id`` with these pending writes."""
        self._checkpoint_id = checkpoint_id
        self._writes = writes
        self._saved = None
        self._after = None
        if self.busy:
            self._running = {}
            self.busy = False

    def after(self, save: Any) -> None:
        """The step's checkpoint is still being saved (``durability="async"``): results wait
        for that save, as a put of a checkpoint sets its pending writes (some savers drop
        writes they find for it). ``save`` is a thread's or the event loop's future."""
        if isinstance(save, concurrent.futures.Future):
            self._after = save
            return
        done: concurrent.futures.Future[Any] = concurrent.futures.Future()
        save.add_done_callback(lambda _: done.set_result(None))
        self._after = done

    @property
    def durability(self) -> str:
        return self._durability if self._saver is not None else "none"

    def saved(self, cid: str) -> TaskWrite | None:
        """The result saved for call ``cid``, by an earlier run of the step or this one."""
        with self._lock:
            if self._saved is None:
                self._saved = {w.task_id: w for w in self._writes.values() if w.kind == TASK_WRITE}
            return self._saved.get(cid)

    def record(self, write: TaskWrite) -> None:
        """Keep a finished call's result; save it now unless the run saves only at its exit."""
        saver = self._keep(write)
        if saver is not None:
            if self._after is not None:
                concurrent.futures.wait([self._after])
            saver.put_writes(self._thread_id or "", self._ns, self._checkpoint_id, (write,))

    async def arecord(self, write: TaskWrite) -> None:
        saver = self._keep(write)
        if saver is not None:
            if self._after is not None:
                await asyncio.wait([asyncio.wrap_future(self._after)])
            await saver.aput_writes(self._thread_id or "", self._ns, self._checkpoint_id, (write,))

    def _keep(self, write: TaskWrite) -> BaseSaver | None:
        """Remember ``write`` for re-runs within this run; the saver to save it with now, or
        ``None`` when it is not saved now (no saver, or ``durability="exit"``)."""
        self.saved(write.task_id)  # the saved results are read before this one joins them
        with self._lock:
            assert self._saved is not None
            self._saved[write.task_id] = write
            if self._saver is None:
                return None
            if self._durability == "exit":
                self._results.append(write)
                self.held = True
                return None
        return self._saver

    def failed_to_save(self, error: BaseException) -> None:
        """A save made after the caller had its result failed: the step fails with it."""
        with self._lock:
            self._error = self._error or error
            self.held = True

    def take_held(self) -> list[TaskWrite]:
        """Results the loop saves with the step's other writes if the step stops (``exit``)."""
        with self._lock:
            if self._error is not None:
                raise self._error
            held, self._results = self._results, []
            self.held = False
        return held

    def started(self, caller_ns: str, future: Any) -> None:
        """Note a running call, so its caller's task waits for it before it ends."""
        with self._lock:
            self._running.setdefault(caller_ns, []).append(future)
            self.busy = True

    def running(self, caller_ns: str) -> list[Any]:
        with self._lock:
            return list(self._running.get(caller_ns, ()))


def settle_calls(ctx: TaskContext) -> None:
    """Wait for every call the task made, awaited or not: none outlives its step."""
    calls = ctx.env.calls
    if calls is None or not calls.busy:
        return
    for future in calls.running(ctx.ns):
        if isinstance(future, concurrent.futures.Future):
            concurrent.futures.wait([future])


async def asettle_calls(ctx: TaskContext) -> None:
    calls = ctx.env.calls
    if calls is None or not calls.busy:
        return
    for future in calls.running(ctx.ns):
        waitable = (
            asyncio.wrap_future(future) if isinstance(future, concurrent.futures.Future) else future
        )
        await asyncio.wait([waitable])
