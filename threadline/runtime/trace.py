"""The execution trace: what ran, when, for how long, how it ended, and what nodes noted.

A run keeps its entries in a ``RunTrace`` and hands them to the saver with something the run
saves anyway: the checkpoint or the writes where it stops (finished, interrupted, failed), and
on the way, the next checkpoint saved once ``SAVE_EVERY`` seconds have passed. They travel as
one pending write of kind ``trace`` on that checkpoint, so tracing costs no saver call of its
own, and entries go wherever their checkpoint goes: pruned, deleted and copied with it. The run
never reads them back: ``without_trace`` drops them on load.

Why not with every checkpoint: a pending write touches the saver's writes table, which a step
without writes does not, and that doubled what an SQLite commit writes (+40% per step of a
chain of trivial nodes). Held for a second, they cost one such write per second at most; a
crash loses the entries of at most that last second, never a step's state.

A node's start and end are one entry (``at`` is when the attempt started, ``duration`` how long
it took): an entry is saved only when its step's writes are, which is after the node ended.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ormsgpack

from threadline import serde
from threadline.checkpoint.base import Checkpoint, TaskWrite
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.clock import iso_at
from threadline.errors import GraphInterrupt, SerializationError
from threadline.runtime.context import current_task

if TYPE_CHECKING:
    from threadline.runtime.context import TaskContext
    from threadline.runtime.task import Outcome

TRACE_WRITE = "trace"
TRACE_TASK = "__trace__"  # the task name of the write that carries a batch of entries
SAVE_EVERY = 1.0  # seconds a run may hold entries before the next checkpoint carries them
MAX_HELD = 1_000  # entries a run may hold before the next checkpoint carries them
_clock = time.perf_counter_ns  # what entry times are read with (``offset_ns`` makes them UTC)


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One entry of a thread's execution trace (``graph.get_trace(config)``).

    ``kind`` is ``"node"`` or ``"task"`` (one attempt of a node or of a ``@task`` call, with
    ``attempt``, ``duration`` in seconds, ``status`` ``"ok"``, ``"error"`` or
    ``"interrupted"``, and ``error_type``/``error_message`` when it failed), ``"interrupt"``
    (``interrupt()`` stopped the node: ``interrupt_id``, the value asked with in ``data``),
    ``"resume"`` (an answer given with ``Command(resume=...)``: ``interrupt_id``, the answer in
    ``data``) or ``"event"`` (``record_event(name, data)``; ``recorded_by`` names the node or
    task). ``name`` is the node or task (the event's name for events). ``checkpoint_id`` is the
    checkpoint the step started from and ``step`` the step's number; ids sort in the order the
    entries were made.
    """

    id: str
    kind: str
    name: str
    at: str
    checkpoint_id: str
    step: int
    task_id: str = ""
    attempt: int | None = None
    duration: float | None = None
    status: str | None = None
    error_type: str | None = None
    error_message: str | None = None
    interrupt_id: str | None = None
    recorded_by: str | None = None
    data: Any = None


# An entry as a run holds it and a batch stores it: a row of these plain values (``data`` is
# the index of the entry's value in the batch's ``data`` list, which the saver's serializer
# encodes; the rows are plain msgpack, see ``RunTrace.take``).
ROW = (
    "started_ns",
    "kind",
    "name",
    "checkpoint_id",
    "step",
    "task_id",
    "attempt",
    "ended_ns",
    "status",
    "error_type",
    "error_message",
    "interrupt_id",
    "recorded_by",
    "data",
)
_SHOWN = frozenset(ROW) - {"started_ns", "ended_ns", "data"}
# A batch names its row layout by this number, not by ROW's field names: it is stored with every
# run, and the names cost more than the rows of a short run.
BATCH_VERSION = 1


def without_trace(writes: Iterable[TaskWrite]) -> dict[tuple[str, str], TaskWrite]:
    """The writes a run acts on, by ``(task_id, kind)``: all but the trace."""
    return {(w.task_id, w.kind): w for w in writes if w.kind != TRACE_WRITE}


def trace_entries(writes: Iterable[TaskWrite]) -> list[TraceEntry]:
    """The trace entries among a checkpoint's pending writes."""
    return [e for w in writes if w.kind == TRACE_WRITE for e in _batch_entries(w)]


def _batch_entries(write: TaskWrite) -> list[TraceEntry]:
    """A saved batch, in the order its entries started: an entry's id is the batch's id and
    its place in that order, so ids sort as entries happened."""
    batch = write.value
    if batch.get("v") != BATCH_VERSION:
        raise SerializationError(
            f"trace batch {write.task_id} has format {batch.get('v')!r}, which this threadline "
            f"does not read (it reads {BATCH_VERSION}); upgrade threadline to read this trace"
        )
    offset, data = batch["offset_ns"], batch["data"] or ()
    rows = [dict(zip(ROW, values, strict=True)) for values in ormsgpack.unpackb(batch["rows"])]
    rows.sort(key=lambda row: row["started_ns"])
    entries = []
    for index, row in enumerate(rows):
        started, ended, value = row["started_ns"], row["ended_ns"], row["data"]
        entries.append(
            TraceEntry(
                id=f"{write.task_id}.{index:08x}",
                at=iso_at((started + offset) // 1000),
                duration=None if ended is None else (ended - started) / 1e9,
                data=None if value is None else data[value],
                **{k: v for k, v in row.items() if k in _SHOWN},
            )
        )
    return entries


class RunTrace:
    """The entries a run made that are not saved yet; tasks of a step add them from any thread.

    ``at`` moves it to the step that starts from a checkpoint; ``take`` hands the saver the
    entries as one write. An entry is a tuple of plain values in ``ROW`` order, made with the
    least work (each quick step makes one), its times from ``perf_counter_ns``.
    """

    __slots__ = ("_checkpoint_id", "_data", "_due", "_entries", "_lock", "_step")

    def __init__(self) -> None:
        self._entries: list[tuple[Any, ...]] = []
        self._data: list[Any] = []  # the values of entries that carry one
        self._lock = threading.Lock()  # adds an entry and its value together
        self._checkpoint_id = ""
        self._step = 0
        self._due = time.monotonic() + SAVE_EVERY

    def at(self, cp: Checkpoint) -> None:
        self._checkpoint_id = cp.id
        self._step = cp.step + 1

    def take(self, stopping: bool = True) -> tuple[TaskWrite, ...]:
        """The entries to save now, as one write: when the run stops, or when they are due.

        The rows are packed here as plain msgpack, so the saver's serializer sees one
        ``bytes`` value (and the values of events, interrupts and answers): walking a list of
        rows would cost it more than the rest of the save.
        """
        entries = self._entries
        if not entries:
            return ()
        if not stopping and len(entries) < MAX_HELD and time.monotonic() < self._due:
            return ()
        with self._lock:
            entries, data = self._entries, self._data
            self._entries, self._data = [], []
        self._due = time.monotonic() + SAVE_EVERY
        batch = {
            "v": BATCH_VERSION,
            "offset_ns": time.time_ns() - _clock(),
            "rows": ormsgpack.packb(entries),
            "data": data or None,
        }
        return (TaskWrite(new_checkpoint_id(), TRACE_TASK, TRACE_WRITE, batch),)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ attempts
    def begin(self, ctx: TaskContext) -> None:
        """A node or ``@task`` call starts its first attempt."""
        ctx.attempt = 1  # set, so that reading it costs no AttributeError
        ctx.traced = _clock()

    def retry(self, ctx: TaskContext) -> None:
        """A node or ``@task`` call starts another attempt (``ctx.attempt`` is its number)."""
        ctx.traced = _clock()

    def ended(self, ctx: TaskContext, outcome: Outcome) -> None:
        """A node's task ended: its last attempt, and the interrupts it raised."""
        if outcome.result is not None or outcome.parent_command is not None:
            task = ctx.task  # the usual case, made without a call (``attempt`` does the same)
            self._entries.append(
                (
                    ctx.traced,
                    "node",
                    task.name,
                    self._checkpoint_id,
                    self._step,
                    task.id,
                    ctx.attempt,
                    _clock(),
                    "ok",
                    None,
                    None,
                    None,
                    None,
                    None,
                )
            )
        elif outcome.error is not None:
            self.attempt("node", ctx, "error", outcome.error)
        else:
            self.attempt("node", ctx, "interrupted")
            for intr in outcome.interrupts:
                self._add("interrupt", ctx.name, ctx.task_id, intr.id, None, intr.value)

    def call_ended(self, ctx: TaskContext, error: BaseException | None) -> None:
        """A ``@task`` call ended: its last attempt."""
        if error is None:
            self.attempt("task", ctx, "ok")
        elif isinstance(error, GraphInterrupt):  # the caller's entry lists the interrupt
            self.attempt("task", ctx, "interrupted")
        else:
            self.attempt("task", ctx, "error", error)

    def attempt(
        self, kind: str, ctx: TaskContext, status: str, error: BaseException | None = None
    ) -> None:
        """An attempt of ``ctx`` ended (``kind`` ``node`` or ``task``)."""
        failed = error is not None
        self._entries.append(
            (
                ctx.traced,
                kind,
                ctx.name,
                self._checkpoint_id,
                self._step,
                ctx.task_id,
                ctx.attempt,
                _clock(),
                status,
                type(error).__name__ if failed else None,
                str(error) if failed else None,
                None,
                None,
                None,
            )
        )

    # ------------------------------------------------------------------ answers, events
    def answered(
        self, cp: Checkpoint, answers: Mapping[str, Any], pending: Iterable[tuple[TaskWrite, Any]]
    ) -> None:
        """``Command(resume=...)`` answered interrupts waiting at ``cp``."""
        self.at(cp)
        for write, intr in pending:
            if intr.id in answers:
                self._add("resume", write.task_name, write.task_id, intr.id, None, answers[intr.id])

    def event(self, ctx: TaskContext, name: str, data: Any) -> None:
        self._add("event", name, ctx.task_id, None, ctx.name, data)

    def _add(
        self,
        kind: str,
        name: str,
        task_id: str,
        interrupt_id: str | None,
        recorded_by: str | None,
        data: Any,
    ) -> None:
        now = _clock()
        with self._lock:
            index = None
            if data is not None:
                index = len(self._data)
                self._data.append(data)
            self._entries.append(
                (
                    now,
                    kind,
                    name,
                    self._checkpoint_id,
                    self._step,
                    task_id,
                    None,
                    None,
                    None,
                    None,
                    None,
                    interrupt_id,
                    recorded_by,
                    index,
                )
            )


def note_retry(ctx: TaskContext, error: BaseException, kind: str = "node") -> None:
    """An attempt of ``ctx`` failed and will be retried: trace it, if the run traces."""
    trace = ctx.env.trace
    if trace is not None:
        trace.attempt(kind, ctx, "error", error)


def record_event(name: str, data: Any = None) -> None:
    """Add an entry to the thread's execution trace, from inside a node or a ``@task``.

    ``record_event("tool_call", {"tool": "search", "query": q})``: the entry is saved with the
    step, read back with ``graph.get_trace(config)``. ``data`` must be something the saver can
    store (as for state values). Nothing is recorded when the run keeps no trace (no
    checkpointer, or ``compile(trace=False)``).
    """
    ctx = current_task()
    if ctx is None:
        raise RuntimeError("record_event() can only be called inside a running node or task")
    if not isinstance(name, str) or not name:
        raise ValueError(f"record_event() takes a non-empty event name, got {name!r}")
    trace = ctx.env.trace
    if trace is None:
        return
    codec = getattr(ctx.saver, "serde", serde.DEFAULT)
    try:
        codec.dumps(data)
    except (SerializationError, TypeError) as exc:
        raise SerializationError(
            f"record_event({name!r}) in {ctx.name!r}: its data cannot be saved ({exc}); "
            "pass plain values (dicts, lists, strings, numbers) or registered classes"
        ) from exc
    trace.event(ctx, name, data)
