"""Threads after their runs: release finished ones, prune old ones, continue what a crash left,
find damaged ones (``scan_damage``, from ``checkpoint/scan.py``).

Built on the saver protocol only (``list_threads``, ``get_tuple``, ``prune``,
``delete_thread``), so it works the same on every saver. See docs/threads.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections.abc import AsyncGenerator, Generator, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from threadline.checkpoint.base import BaseSaver, ThreadInfo, ThreadStatus
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.rules import check_keep_last
from threadline.checkpoint.scan import Damage, scan_damage
from threadline.errors import (
    CheckpointerRequiredError,
    ConcurrentUpdateError,
    ConfigError,
    CorruptedDataError,
)

if TYPE_CHECKING:
    from threadline.runtime.chunks import Emit
    from threadline.runtime.drivers import Done
    from threadline.runtime.loop import RunLoop

ReleasePolicy = Literal["delete", "keep_last"]
RELEASE_POLICIES: tuple[str, ...] = ("delete", "keep_last")
THREAD_STATUSES: tuple[str, ...] = ("idle", "interrupted", "error", "running")
Outcome = Literal["finished", "interrupted", "failed", "busy", "damaged"]


# ---------------------------------------------------------------------- releasing finished threads
def release_policy(value: Any, checkpointer: Any) -> ReleasePolicy | None:
    """``compile(release_thread=...)`` checked: ``None``, ``"delete"`` or ``"keep_last"``."""
    if value is None:
        return None
    if value not in RELEASE_POLICIES:
        raise ConfigError(f"release_thread must be None, 'delete' or 'keep_last', got {value!r}")
    if not isinstance(checkpointer, BaseSaver):
        raise ConfigError(
            f"release_thread={value!r} needs a saver: compile(checkpointer=..., "
            f"release_thread={value!r}) (a subgraph's threads belong to its parent)"
        )
    return cast(ReleasePolicy, value)  # one of RELEASE_POLICIES


def released(items: Generator[Emit | Done], loop: RunLoop, policy: str) -> Generator[Emit | Done]:
    """A run's items; when the run finishes the thread, it is released before ``Done`` goes out."""
    mark = new_checkpoint_id()  # checkpoints this run makes sort after it
    saver, thread_id = loop.saver, loop.s.thread_id
    assert saver is not None and thread_id is not None  # a policy needs a saver, a run a thread
    with contextlib.closing(items):  # closing this closes the run at once
        for item in items:
            if _finished_here(item, loop, mark):
                if policy == "delete":
                    saver.delete_thread(thread_id)
                else:
                    saver.prune(thread_id, keep_last=1)
            yield item


async def areleased(
    items: AsyncGenerator[Emit | Done], loop: RunLoop, policy: str
) -> AsyncGenerator[Emit | Done]:
    mark = new_checkpoint_id()
    saver, thread_id = loop.saver, loop.s.thread_id
    assert saver is not None and thread_id is not None  # a policy needs a saver, a run a thread
    async with contextlib.aclosing(items):  # closing this closes the run at once
        async for item in items:
            if _finished_here(item, loop, mark):
                if policy == "delete":
                    await saver.adelete_thread(thread_id)
                else:
                    await saver.aprune(thread_id, keep_last=1)
            yield item


def _finished_here(item: Any, loop: RunLoop, mark: str) -> bool:
    """The run is over, ended at a checkpoint with nothing planned, and made that checkpoint
    itself: ``invoke(None)`` on a thread that had finished already releases nothing."""
    from threadline.runtime.drivers import Done

    cp = loop.progress.current
    return isinstance(item, Done) and cp is not None and not cp.next and cp.id > mark


# ---------------------------------------------------------------------- pruning old threads
@dataclass(frozen=True, slots=True)
class Pruned:
    """What ``prune`` removed: the threads it touched and how many checkpoints went; and the
    threads it left alone because a record of theirs is damaged (``scan_damage`` says which)."""

    threads: tuple[str, ...]
    checkpoints: int
    damaged: tuple[str, ...] = ()


def prune(
    saver: BaseSaver,
    *,
    before: datetime,
    keep_last: int = 0,
    status: ThreadStatus | Iterable[ThreadStatus] | None = None,
) -> Pruned:
    """Prune every thread last updated before ``before`` (a cleanup job's call).

    ``keep_last=0`` deletes those threads; ``keep_last=N`` keeps the newest N checkpoints of
    each. ``status`` limits it to threads in that status (or those statuses): ``"idle"`` for
    finished runs only, for example. ``before`` must be timezone-aware.
    """
    statuses = _statuses(status, "status")
    check_keep_last(keep_last)
    touched, deleted, damaged = [], 0, []
    for info in _older(saver.list_threads(), before, statuses):
        try:
            count = _pruned(info, saver.prune, keep_last)
        except CorruptedDataError:
            damaged.append(info.thread_id)
            continue
        if count:
            touched.append(info.thread_id)
            deleted += count
    return Pruned(tuple(touched), deleted, tuple(damaged))


async def aprune(
    saver: BaseSaver,
    *,
    before: datetime,
    keep_last: int = 0,
    status: ThreadStatus | Iterable[ThreadStatus] | None = None,
) -> Pruned:
    """``prune`` from async code."""
    statuses = _statuses(status, "status")
    check_keep_last(keep_last)
    touched, deleted, damaged = [], 0, []
    for info in _older(await saver.alist_threads(), before, statuses):
        try:
            if info.status == "damaged":
                raise CorruptedDataError(f"thread {info.thread_id!r} is damaged")
            count = await saver.aprune(info.thread_id, keep_last=keep_last)
        except CorruptedDataError:
            damaged.append(info.thread_id)
            continue
        if count:
            touched.append(info.thread_id)
            deleted += count
    return Pruned(tuple(touched), deleted, tuple(damaged))


def _pruned(info: ThreadInfo, prune: Any, keep_last: int) -> int:
    """``prune`` on the thread, unless it is listed damaged (``CorruptedDataError``, as
    ``prune`` raises for a damaged row it finds): damage stays for a person to inspect."""
    if info.status == "damaged":
        raise CorruptedDataError(f"thread {info.thread_id!r} is damaged")
    return int(prune(info.thread_id, keep_last=keep_last))


def _older(
    threads: list[ThreadInfo], before: datetime, statuses: frozenset[str] | None
) -> list[ThreadInfo]:
    if not isinstance(before, datetime):
        raise TypeError(f"before must be a datetime, got {type(before).__name__}")
    if before.tzinfo is None:
        raise ConfigError(
            "before must be timezone-aware (threads' times are UTC): for example "
            "datetime.now(UTC) - timedelta(days=30)"
        )
    return [
        info
        for info in threads
        if (statuses is None or info.status in statuses or info.status == "damaged")
        and _updated(info) < before
    ]


def _updated(info: ThreadInfo) -> datetime:
    when = datetime.fromisoformat(info.updated_at)
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _statuses(value: Any, name: str) -> frozenset[str] | None:
    if value is None:
        return None
    statuses = frozenset([value] if isinstance(value, str) else value)
    unknown = sorted(statuses - set(THREAD_STATUSES))
    if unknown:
        raise ConfigError(f"{name} {unknown[0]!r} is not one of {THREAD_STATUSES}")
    return statuses


# ---------------------------------------------------------------------- resuming after a crash
@dataclass(frozen=True, slots=True)
class ResumeReport:
    """What ``resume_unfinished`` did with one thread.

    ``outcome``: ``"finished"`` (the run reached its end), ``"interrupted"`` (it stopped at an
    interrupt or a breakpoint and waits for a person), ``"failed"`` (it raised ``error``),
    ``"busy"`` (another process moved the thread on meanwhile: it was still running there) or
    ``"damaged"`` (a record it needs fails its check: ``error`` is the ``CorruptedDataError``;
    nothing ran, nothing was written).
    ``values`` is what ``invoke`` returned, when it returned.
    """

    thread_id: str
    status: ThreadStatus  # where the thread stood before
    outcome: Outcome
    values: dict[str, Any] | None = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.outcome in ("finished", "interrupted")


RESUMABLE: tuple[str, ...] = ("running", "error")


def resume_unfinished(
    graph: Any,
    saver: BaseSaver | None = None,
    *,
    statuses: Iterable[ThreadStatus] = ("running",),
    idle_for: timedelta | None = None,
    limit: int | None = None,
    config: Mapping[str, Any] | None = None,
    **options: Any,
) -> list[ResumeReport]:
    """Continue, with ``invoke(None)``, every run a crash left behind; one report per thread.

    A crash leaves a thread whose newest checkpoint plans tasks that never finished: status
    ``"running"``. Add ``"error"`` to ``statuses`` to retry failed runs too. A thread waiting at
    an interrupt or breakpoint is never touched, nor one whose newest checkpoint is an
    ``update_state`` edit (its caller continues it). A live run elsewhere also shows as
    ``"running"``: pass ``idle_for`` to take only threads not updated for that long, or run
    this where no other worker runs (at a worker's start). ``config`` and ``options``
    (``durability``, ``context``...) go to each ``invoke``.
    """
    graph, saver = _on_saver(graph, saver)
    wanted = _resumable(statuses)
    _thread_config(config, "")  # refuse a bad config before any thread runs
    reports = []
    for info in _candidates(saver.list_threads(), wanted, idle_for, limit):
        cfg = _thread_config(config, info.thread_id)
        try:
            record = _resumable_head(info, saver.get_tuple)
            if record is None or record.metadata.get("source") == "update":
                continue
            values = graph.invoke(None, cfg, **options)
        except Exception as exc:
            reports.append(_failed(info, exc))
            continue
        waiting = bool(graph.get_state(cfg).next)
        reports.append(_report(info, values, waiting))
    return reports


async def aresume_unfinished(
    graph: Any,
    saver: BaseSaver | None = None,
    *,
    statuses: Iterable[ThreadStatus] = ("running",),
    idle_for: timedelta | None = None,
    limit: int | None = None,
    config: Mapping[str, Any] | None = None,
    concurrency: int = 1,
    **options: Any,
) -> list[ResumeReport]:
    """``resume_unfinished`` from async code, continuing up to ``concurrency`` threads at once.

    Reports come in the order the threads were listed (most recently updated first).
    """
    if not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}")
    graph, saver = _on_saver(graph, saver)
    wanted = _resumable(statuses)
    _thread_config(config, "")  # refuse a bad config before any thread runs
    gate = asyncio.Semaphore(concurrency)

    async def resume(info: ThreadInfo) -> ResumeReport | None:
        async with gate:
            cfg = _thread_config(config, info.thread_id)
            try:
                if info.status == "damaged":
                    _resumable_head(info, saver.get_tuple)
                record = await saver.aget_tuple(info.thread_id)
                if record is None or record.metadata.get("source") == "update":
                    return None
                values = await graph.ainvoke(None, cfg, **options)
            except Exception as exc:
                return _failed(info, exc)
            waiting = bool((await graph.aget_state(cfg)).next)
            return _report(info, values, waiting)

    threads = _candidates(await saver.alist_threads(), wanted, idle_for, limit)
    reports = await asyncio.gather(*(resume(info) for info in threads))
    return [r for r in reports if r is not None]


def _on_saver(graph: Any, saver: BaseSaver | None) -> tuple[Any, BaseSaver]:
    """The graph to run and the saver whose threads to list: the graph's own by default."""
    own = getattr(graph, "checkpointer", None)
    if saver is None or saver is own:
        if not isinstance(own, BaseSaver):
            raise CheckpointerRequiredError(
                "resume_unfinished needs a saver: compile(checkpointer=...) or pass saver="
            )
        return graph, own
    if not isinstance(saver, BaseSaver):
        raise ConfigError(f"saver must be a threadline saver, got {type(saver).__name__}")
    moved = copy.copy(graph)  # the same graph, run on the threads of ``saver``
    moved.checkpointer = saver
    return moved, saver


def _resumable(statuses: Iterable[ThreadStatus]) -> frozenset[str]:
    wanted = _statuses(statuses, "statuses") or frozenset()
    refused = sorted(wanted - set(RESUMABLE))
    if refused:
        raise ConfigError(
            f"resume_unfinished continues runs that stopped on their own ({RESUMABLE}); "
            f"{refused[0]!r} threads are waiting for a person (Command(resume=...)) or done"
        )
    return wanted


def _candidates(
    threads: list[ThreadInfo],
    wanted: frozenset[str],
    idle_for: timedelta | None,
    limit: int | None,
) -> list[ThreadInfo]:
    if idle_for is not None and not isinstance(idle_for, timedelta):
        raise TypeError(f"idle_for must be a timedelta, got {type(idle_for).__name__}")
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be a positive integer, got {limit!r}")
    cutoff = datetime.now(UTC) - idle_for if idle_for is not None else None
    chosen = [  # damaged threads too, to be reported
        info
        for info in threads
        if (info.status in wanted or info.status == "damaged")
        and (cutoff is None or _updated(info) < cutoff)
    ]
    return chosen[:limit] if limit is not None else chosen


def _thread_config(config: Mapping[str, Any] | None, thread_id: str) -> dict[str, Any]:
    base = dict(config or {})
    configurable = dict(base.get("configurable") or {})
    if "checkpoint_id" in configurable or "thread_id" in configurable:
        raise ConfigError(
            "resume_unfinished picks each thread itself: leave thread_id and checkpoint_id "
            "out of config['configurable']"
        )
    return {**base, "configurable": {**configurable, "thread_id": thread_id}}


def _resumable_head(info: ThreadInfo, get_tuple: Any) -> Any:
    """The thread's newest record; ``CorruptedDataError`` if the thread is listed damaged (or
    a record of its newest checkpoint fails its check)."""
    if info.status == "damaged":
        get_tuple(info.thread_id)  # raises, naming the damaged record
        raise CorruptedDataError(f"thread {info.thread_id!r}: its newest checkpoint is damaged")
    return get_tuple(info.thread_id)


def _failed(info: ThreadInfo, exc: Exception) -> ResumeReport:
    """The report of a thread whose resume raised ``exc``."""
    outcome: Outcome = "failed"
    if isinstance(exc, ConcurrentUpdateError):
        outcome = "busy"
    elif isinstance(exc, CorruptedDataError):
        outcome = "damaged"
    return ResumeReport(info.thread_id, info.status, outcome, error=exc)


def _report(info: ThreadInfo, values: Any, waiting: bool) -> ResumeReport:
    outcome: Outcome = "interrupted" if waiting else "finished"
    return ResumeReport(info.thread_id, info.status, outcome, values)


__all__ = [
    "Damage",
    "Pruned",
    "ResumeReport",
    "aprune",
    "aresume_unfinished",
    "prune",
    "resume_unfinished",
    "scan_damage",
]
