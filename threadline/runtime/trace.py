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

import sys
import threading
import time
from array import array
from binascii import unhexlify as _unhexlify
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import ormsgpack

from threadline import serde
from threadline.checkpoint.base import Checkpoint, CheckpointRecord, TaskWrite, WriteKind
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.clock import iso_at
from threadline.errors import GraphInterrupt, SerializationError
from threadline.runtime.context import current_task
from threadline.runtime.task_ids import task_id as planned_task_id

if TYPE_CHECKING:
    from threadline.runtime.context import TaskContext
    from threadline.runtime.task import Outcome

TRACE_WRITE: WriteKind = "trace"
TRACE_TASK = ""  # the task name of the write that carries a batch (its kind says it all)
SAVE_EVERY = 1.0  # seconds a run may hold entries before the next checkpoint carries them
MAX_HELD = 1_000  # entries (and step marks) a run may hold before a checkpoint carries them
_clock = time.perf_counter_ns  # what entry times are read with (a batch's ``t0`` makes them UTC)


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


# A batch, as a run holds it and a write stores it: plain values, packed as one msgpack array
# ``[BATCH_VERSION, t0, *items]`` (see ``RunTrace.take``). ``t0`` is the batch's time base in
# ns since the epoch; the items are step marks, each followed by the entries made in that step:
#   mark     an int ``d``: the step after the previous mark's, from the checkpoint whose id is the
#            previous mark's with its ``_number`` counted on by ``d`` (ids a process makes in a
#            row differ only there, see ``_count_on``); an id: the step after the previous
#            mark's, from that checkpoint; (checkpoint, step): the step's checkpoint as 0 (the
#            checkpoint carrying the batch) or 1 (its parent), its step then counted from the
#            carrier's; else its id and step
#   attempt  (start, kind, name, task_id, attempt, duration[, status[, error_type,
#            error_message]]) for kinds ``node`` and ``task``; no status: ``ok``
#   note     (start, kind, name, task_id, interrupt_id, recorded_by, data) for the other kinds
# ``kind`` is its place in ``_KINDS``; ``task_id`` of a node's attempt is its index in the
# step when ``task_ids.task_id`` made it from the step's checkpoint (read back by making it
# again), else the bytes its hex digits spell (when they spell it exactly, as for every id
# threadline makes); ``start`` is in ns after ``t0``,
# ``duration`` in ns, ``data`` the index of the entry's value in the write's value list
# (encoded by the saver's serializer). Every byte here is stored with every run, so nothing
# repeats: a step's checkpoint and number are said once, not per entry, and mostly as one byte.
BATCH_VERSION = 2
_KINDS = ("node", "task", "interrupt", "resume", "event")  # attempts first (``_entry``)
_KIND = {kind: code for code, kind in enumerate(_KINDS)}
_NODE, _TASK = _KIND["node"], _KIND["task"]


def _compact_id(task_id: str) -> bytes | str:
    """A task id as the bytes its hex digits spell, when they spell it exactly (16 bytes for
    the 32 lowercase hex digits of every id threadline makes); else as it is."""
    try:
        raw = _unhexlify(task_id)
    except ValueError:  # (binascii.Error too)
        return task_id
    return raw if raw.hex() == task_id else task_id


def _number(checkpoint_id: str) -> int:
    """The first 16 hex digits of a canonical UUID (of a v7: its millisecond, version and
    counter) as one int, so a mark can say how far an id is from the previous; -1 for an id
    that ``_id_of`` would not spell back exactly."""
    digits = checkpoint_id[:18].replace("-", "")
    try:
        raw = _unhexlify(digits)
    except ValueError:
        return -1
    canonical = len(raw) == 8 and raw.hex() == digits and checkpoint_id[8:14:5] == "--"
    return int.from_bytes(raw) if canonical else -1


def _id_of(number: int, tail: str) -> str:
    """The id whose ``_number`` is ``number`` and whose characters after the 18th are ``tail``."""
    digits = f"{number:016x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:]}{tail}"


def without_trace(writes: Iterable[TaskWrite]) -> dict[tuple[str, WriteKind], TaskWrite]:
    """The writes a run acts on, by ``(task_id, kind)``: all but the trace."""
    return {(w.task_id, w.kind): w for w in writes if w.kind != TRACE_WRITE}


def trace_entries(record: CheckpointRecord) -> list[TraceEntry]:
    """The trace entries among a checkpoint's pending writes."""
    carrier = record.checkpoint
    return [e for w in record.pending_writes if w.kind == TRACE_WRITE for e in _batch(w, carrier)]


def _batch(write: TaskWrite, carrier: Checkpoint) -> list[TraceEntry]:
    """A saved batch, in the order its entries started: an entry's id is the batch's id and
    its place in that order, so ids sort as entries happened."""
    value = write.value
    rows, data = (value, ()) if type(value) is bytes else value
    stored = ormsgpack.unpackb(rows)
    if type(stored) is not list or not stored or stored[0] != BATCH_VERSION:
        version = stored[0] if type(stored) is list and stored else None
        raise SerializationError(
            f"trace batch {write.task_id} has format {version!r}, which this threadline "
            f"does not read (it reads {BATCH_VERSION}); upgrade threadline to read this trace"
        )
    made = []  # (entry, checkpoint id, step)
    checkpoint_id, step = "", 0
    for item in stored[2:]:
        if type(item) is int:  # the next step, from an id counted on
            checkpoint_id, step = _counted_on(checkpoint_id, item), step + 1
        elif type(item) is str:  # the next step, from this id
            checkpoint_id, step = item, step + 1
        elif len(item) == 2:
            checkpoint_id, step = item
            if type(checkpoint_id) is int:  # the carrier or its parent
                step += carrier.step
                checkpoint_id = (carrier.id, carrier.parent_id or "")[checkpoint_id]
        else:
            made.append((item, checkpoint_id, step))
    made.sort(key=lambda m: m[0][0])
    return [
        _entry(f"{write.task_id}.{index:08x}", row, checkpoint_id, step, stored[1], data)
        for index, (row, checkpoint_id, step) in enumerate(made)
    ]


def _entry(
    entry_id: str, row: list[Any], checkpoint_id: str, step: int, t0: int, data: Any
) -> TraceEntry:
    start, code, name, task_id = row[:4]
    kind = _KINDS[code]
    if type(task_id) is bytes:
        task_id = task_id.hex()
    elif type(task_id) is int:  # its index in the step: the id planning made from the mark's
        task_id = planned_task_id(checkpoint_id, task_id, name)
    at = iso_at((t0 + start) // 1000)
    if code <= _TASK:
        attempt, duration = row[4:6]
        status = row[6] if len(row) > 6 else "ok"
        error_type, error_message = row[7:] or (None, None)
        return TraceEntry(
            entry_id, kind, name, at, checkpoint_id, step, task_id, attempt, duration / 1e9,
            status, error_type, error_message,
        )  # fmt: skip
    interrupt_id, recorded_by, index = row[4:]
    return TraceEntry(
        entry_id, kind, name, at, checkpoint_id, step, task_id,
        interrupt_id=interrupt_id,
        recorded_by=recorded_by,
        data=None if index is None else data[index],
    )  # fmt: skip


def _counted_on(checkpoint_id: str, by: int) -> str:
    """The id of an int step mark: ``checkpoint_id`` (the previous mark's) counted on by ``by``."""
    number = _number(checkpoint_id)
    if number < 0:
        raise SerializationError(f"a trace step mark counts on from {checkpoint_id!r}, no UUID")
    return _id_of(number + by, checkpoint_id[18:])


def _relative(mark: tuple[Any, ...], carrier: Checkpoint) -> tuple[Any, ...]:
    """A step mark as the batch stores it: the carrier's id or its parent's as 0 or 1, with the
    step counted from the carrier's (``_batch`` reads it back)."""
    checkpoint_id, step = mark
    if checkpoint_id == carrier.id:
        return 0, step - carrier.step
    if checkpoint_id == carrier.parent_id:
        return 1, step - carrier.step
    return mark


class RunTrace:
    """The entries a run made that are not saved yet; tasks of a step add them from any thread.

    ``at`` marks where a step's entries start; ``take`` hands the saver the entries as one
    write. An entry is a tuple of plain values (see ``BATCH_VERSION``), made with the least
    work (each quick step makes one), its times from ``perf_counter_ns``.
    """

    __slots__ = ("_base", "_data", "_due", "_entries", "_id", "_jumps", "_lock", "_step")

    def __init__(self) -> None:
        self._entries: list[Any] = []  # step marks, each before its step's entries
        self._data: list[Any] = []  # the values of entries that carry one
        self._lock = threading.Lock()  # adds an entry and its value together
        self._base = _clock()  # the time entries' starts count from
        self._due = time.monotonic() + SAVE_EVERY
        self._jumps: list[int] = []  # where the marks in full are (``_count_on`` skips them)
        self._id, self._step = "", -2  # the last mark's

    def at(self, cp: Checkpoint) -> None:
        """The entries made next are the step's that starts from ``cp`` (a mark says so): its
        id alone when the step follows the last mark's (``take`` counts it on), else in full."""
        checkpoint_id, step = cp.id, cp.step + 1
        if step == self._step + 1:
            self._entries.append(checkpoint_id)
        elif checkpoint_id != self._id:
            self._jumps.append(len(self._entries))
            self._entries.append((checkpoint_id, step))
        else:
            return  # (answering an interrupt at ``cp`` marked it already)
        self._id, self._step = checkpoint_id, step

    def take(self, carrier: Checkpoint, stopping: bool = True) -> tuple[TaskWrite, ...]:
        """The entries to save now, as one write on ``carrier``: when the run stops, or when
        they are due.

        The rows are packed here as plain msgpack, so the saver's serializer sees one
        ``bytes`` value (and the values of events, interrupts and answers): walking a list of
        rows would cost it more than the rest of the save.
        """
        entries = self._entries
        if not stopping and len(entries) < MAX_HELD and time.monotonic() < self._due:
            return ()
        with self._lock:
            entries, data, base = self._entries, self._data, self._base
            jumps = self._jumps
            end = len(entries)
            while end and _is_mark(entries[end - 1]):  # marks of steps that made no entry (yet)
                end -= 1
            if not end:
                return ()
            mark = end - 1
            while mark >= 0 and not _is_mark(entries[mark]):  # the mark of the last entries
                mark -= 1
            # the next batch starts with the mark of the step its entries are of, in full
            self._entries = [(self._id, self._step)] if self._id else []
            self._jumps = []
            self._data, self._base = [], _clock()
        self._due = time.monotonic() + SAVE_EVERY
        del entries[end:]
        _count_on(entries, jumps)
        if mark >= 0 and type(entries[mark]) is tuple:
            entries[mark] = _relative(entries[mark], carrier)
        rows = ormsgpack.packb([BATCH_VERSION, base + time.time_ns() - _clock(), *entries])
        batch = [rows, data] if data else rows
        return (TaskWrite(new_checkpoint_id(), TRACE_TASK, TRACE_WRITE, batch),)

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
            started = ctx.traced
            task_id: int | bytes | str
            if task.planned_at == self._id and task.index >= 0:  # from this step's mark
                task_id = task.index
            else:
                try:  # a hexdigest (planning.task_id): ``_compact_id`` needs no check
                    task_id = _unhexlify(task.id)
                except ValueError:
                    task_id = task.id
            self._entries.append(
                (started - self._base, _NODE, task.name, task_id, ctx.attempt, _clock() - started)
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
        started = ctx.traced
        entry: tuple[Any, ...] = (
            started - self._base,
            _KIND[kind],
            ctx.name,
            _compact_id(ctx.task_id),
            ctx.attempt,
            _clock() - started,
        )
        if error is not None:
            entry += (status, type(error).__name__, str(error))
        elif status != "ok":
            entry += (status,)
        self._entries.append(entry)

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
                (now - self._base, _KIND[kind], name, _compact_id(task_id), interrupt_id,
                 recorded_by, index)
            )  # fmt: skip


def _is_mark(item: Any) -> bool:
    """A held item is a step mark (an id, an int or a pair), not an entry (a longer tuple)."""
    return type(item) is str or type(item) is int or len(item) == 2


def _count_on(entries: list[Any], jumps: list[int]) -> None:
    """Make the marks that are an id alone (``RunTrace.at``) ints: how far the id's
    ``_number`` is from the previous mark's, when the two share their last 18 characters (a
    process's UUIDv7 ids do). The first item is the batch's first mark, in full.

    For the whole batch at once: its ids are checked and read in C loops (join, replace,
    fromhex, array), not per step. A batch with an id that is no canonical UUID keeps its ids
    in full, and so does the mark after one in full (``jumps``).
    """
    marks = [at for at, item in enumerate(entries) if type(item) is str]
    if not marks or type(entries[0]) is not tuple or type(entries[0][0]) is not str:
        return
    ids = [entries[0][0], *map(entries.__getitem__, marks)]
    text = "".join(ids)
    dashes = text[8::36] + text[13::36] + text[18::36] + text[23::36]
    if len(text) != 36 * len(ids) or dashes != "-" * 4 * len(ids) or text.lower() != text:
        return
    try:
        raw = bytes.fromhex(text.replace("-", " "))  # (it skips spaces)
    except ValueError:
        return
    if len(raw) != 16 * len(ids):  # (a dash or space elsewhere leaves fewer digits)
        return
    halves = array("Q", raw)  # an id's _number, then its last 16 hex digits
    if sys.byteorder == "little":
        halves.byteswap()
    numbers, tails = halves[0::2].tolist(), halves[1::2].tolist()
    one_process = tails.count(tails[0]) == len(tails)
    for k, at in enumerate(marks):
        if one_process or tails[k + 1] == tails[k]:
            entries[at] = numbers[k + 1] - numbers[k]
    for jump in jumps:  # the mark after one in full keeps its id
        k = bisect_left(marks, jump)
        if k < len(marks):
            entries[marks[k]] = ids[k + 1]


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
