"""Where a run stands: its current checkpoint, the writes against it, and what is saved of them.

The loop decides what happens; ``Progress`` holds the result until it is saved and yields the
effects that save it (``Save``, ``SaveWrites``): after every step, or only when the run stops
(``durability="exit"``). It also keeps what the values did since the last save (``changes``),
which the saver is given so it stores only that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from threadline.checkpoint.base import (
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    TaskWrite,
    WriteKind,
)
from threadline.checkpoint.changes import Change, ChangedRecord, then
from threadline.runtime.effects import Effect, Save, SaveWrites
from threadline.runtime.settings import RunSettings
from threadline.runtime.task import Outcome

Writes = dict[tuple[str, WriteKind], TaskWrite]


class Progress:
    """One run's current checkpoint and pending writes, saved through the effects it yields."""

    def __init__(self, settings: RunSettings, saving: bool, now: Callable[[], str]) -> None:
        self.s = settings
        self.saving = saving  # False without a saver: nothing is ever saved
        self.now = now
        self.current: Checkpoint | None = None
        self.meta: dict[str, Any] = {}
        self.writes: Writes = {}
        self.unsaved_writes: list[TaskWrite] = []
        self.saved: Checkpoint | None = None  # the newest checkpoint actually persisted
        self.changes: dict[str, Change] = {}  # what the values did since ``saved``
        self.fork_next = False  # the next save starts a branch from an older checkpoint
        self.dirty = False  # ``current`` is not saved

    def cp(self) -> Checkpoint:
        assert self.current is not None
        return self.current

    def checkpoint(
        self,
        values: dict[str, Any],
        versions: dict[str, str],
        next_: tuple[PlannedTask, ...],
        barriers: dict[str, tuple[str, ...]],
        updated_by: tuple[str, ...],
        step: int,
        cp_id: str,
    ) -> Checkpoint:
        """A new checkpoint, child of the one saved last."""
        parent_id = self.saved.id if self.saved is not None else None
        return Checkpoint(
            cp_id, parent_id, step, values, versions, next_, self.now(), barriers, updated_by
        )

    def adopt(self, saved: Checkpoint, meta: dict[str, Any], writes: Writes) -> None:
        """Go on from a loaded checkpoint, whose ``writes`` are saved already."""
        self.saved = saved
        self.meta = meta
        self.writes = writes
        self.unsaved_writes = []
        self.dirty = False

    def snapshot(self) -> tuple[Any, ...]:
        """What ``restore`` puts back: taken before a step is committed, in case its save
        is refused."""
        return (
            self.current,
            self.meta,
            dict(self.writes),
            list(self.unsaved_writes),
            self.saved,
            dict(self.changes),
            self.fork_next,
            self.dirty,
        )

    def restore(self, snapshot: tuple[Any, ...]) -> None:
        (
            self.current,
            self.meta,
            self.writes,
            self.unsaved_writes,
            self.saved,
            self.changes,
            self.fork_next,
            self.dirty,
        ) = snapshot

    def drop_results(self, task_ids: set[str]) -> None:
        """Forget the unsaved results of these tasks (they cannot be stored)."""
        for task_id in task_ids:
            self.writes.pop((task_id, "result"), None)
        self.unsaved_writes = [
            w for w in self.unsaved_writes if not (w.kind == "result" and w.task_id in task_ids)
        ]

    def note(self, changes: Mapping[str, Change]) -> None:
        """Add what a step (or a Command's update) did to what changed since ``saved``."""
        if not self.saving:
            return  # nothing is ever saved: nobody asks
        mine = self.changes
        if not mine:
            mine.update(changes)
            return
        for key, change in changes.items():
            earlier = mine.get(key)
            mine[key] = change if earlier is None else then(earlier, change)

    def add_writes(self, writes: Iterable[TaskWrite]) -> None:
        for w in writes:
            self.add_write(w)

    def add_write(self, w: TaskWrite) -> None:
        self.writes[(w.task_id, w.kind)] = w
        self.unsaved_writes.append(w)

    def keep(self, outcomes: Iterable[Outcome]) -> bool:
        """Keep every task's outcome as a write; True when every task has a result."""
        complete = True
        for o in outcomes:
            t = o.task
            if o.result is not None:
                self.add_write(TaskWrite(t.id, t.name, "result", o.result))
                continue
            complete = False
            if o.error is not None:
                self.add_write(TaskWrite(t.id, t.name, "error", error_value(o.error)))
            elif o.parent_command is None:
                self.add_write(TaskWrite(t.id, t.name, "interrupt", o.interrupts))
        return complete

    def commit(self, cp: Checkpoint, source: str, writes: list[TaskWrite]) -> tuple[Effect, ...]:
        """Make ``cp`` current; the effect that saves it now, unless durability is ``exit``."""
        self.current = cp
        s = self.s
        self.meta = {**s.metadata, "source": source, "step": cp.step, "parents": dict(s.parents)}
        self.writes = {}
        self.unsaved_writes = []
        if writes:
            self.add_writes(writes)
        self.dirty = True
        return self.flush(stopping=not cp.next) if s.durability != "exit" else ()

    def flush(self, stopping: bool = True) -> tuple[Effect, ...]:
        """The effect that saves what is not saved yet, if anything: the current checkpoint
        and/or its new writes (and the trace, when the run stops here or its trace is due).

        What it saves counts as saved from here on: a run whose save fails does not go on.
        A tuple, not a generator: the loop yields from it at every step.
        """
        if not self.saving:
            return ()
        cp = self.cp()
        traced = self.s.trace.take(cp, stopping) if self.s.trace is not None else ()
        effect: Effect | None = None
        if self.dirty:
            effect = Save(self._record(cp, traced), self.fork_next)
            self.saved = cp
            self.changes = {}
            self.fork_next = False
            self.dirty = False
        elif self.unsaved_writes or traced:
            effect = SaveWrites(cp.id, (*self.unsaved_writes, *traced))
        self.unsaved_writes = []
        return (effect,) if effect is not None else ()

    def _record(self, cp: Checkpoint, traced: Iterable[TaskWrite]) -> CheckpointRecord:
        writes = (*self.writes.values(), *traced)
        s = self.s
        return ChangedRecord(s.thread_id or "", s.ns, cp, self.meta, writes, self.changes)


def error_value(error: BaseException) -> dict[str, str]:
    """How a task's (or a step's) error is saved: its type name and message, never the object."""
    return {"type": type(error).__name__, "message": str(error)}
