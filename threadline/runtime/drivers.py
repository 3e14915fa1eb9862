"""Carry out the loop's effects: one driver with blocking I/O and threads, one with asyncio.

Both yield ``Emit`` chunks for streaming and finish with a ``Done`` holding the run's output.
A task's ``updates`` and ``tasks`` chunks are emitted the moment it finishes, before its siblings
do; ``custom`` and ``messages`` chunks arrive while tasks run, through a queue.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import queue
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from threadline.checkpoint.base import BaseSaver
from threadline.errors import CorruptedDataError, SerializationError
from threadline.runtime.chunks import Chunks, Emit, Put
from threadline.runtime.effects import Execute, Load, Save, SaveWrites
from threadline.runtime.loop import RunLoop
from threadline.runtime.task import Outcome, StepEnv, Task, run_task_async, run_task_sync
from threadline.runtime.tokens import AsyncRunner, MessageStream, Runner

# Threads are made lazily and reused; the high cap keeps nested subgraphs that wait on their
# own parallel tasks from starving the pool.
_POOL = ThreadPoolExecutor(max_workers=256, thread_name_prefix="threadline")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Done:
    output: dict[str, Any]


@dataclass(frozen=True, slots=True)
class _Finished:
    outcome: Outcome


# Modes whose chunks are made while tasks run, so the driver must listen as they run.
_LIVE_MODES = frozenset({"custom", "messages"})


def _done_chunks(out: Chunks | None, outcome: Outcome) -> list[Emit]:
    return out.task_done(outcome) if out is not None else []


def _streams_each_task(out: Chunks | None, tasks: list[Task]) -> bool:
    """A finished task's chunks must go out before its siblings finish."""
    return out is not None and len(tasks) > 1 and (out.updates or out.task_events)


class _Saves:
    """Saves checkpoints now, or with ``durability="async"`` while the next step runs.

    At most one save is in flight and the next waits for it, so checkpoints land in order; every
    other saver call, and the end of the run, waits too.
    """

    def __init__(self, loop: RunLoop):
        self.loop = loop
        saver, s = loop.saver, loop.s
        # A saver without I/O gains nothing from saving in the background, only the hand-off
        self.background = s.durability == "async" and saver is not None and not saver.in_process
        self.pending: Future[Any] | None = None

    def carry_out(self, effect: Load | Save | SaveWrites) -> Any:
        """Load or save what ``effect`` says; what a ``Load`` found."""
        saver, s = _saver(self.loop), self.loop.s
        if self.pending is not None:
            self.wait()
        if isinstance(effect, Save):
            if self.background:
                self.pending = _POOL.submit(saver.put, effect.record, fork=effect.fork)
            else:
                saver.put(effect.record, fork=effect.fork)
        elif isinstance(effect, SaveWrites):
            saver.put_writes(s.thread_id or "", s.ns, effect.checkpoint_id, effect.writes)
        else:
            return saver.get_tuple(s.thread_id or "", s.ns, effect.checkpoint_id)
        return None

    def wait(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            pending.result()


def _unencodable(exc: SerializationError, effect: Any, background: bool) -> SerializationError:
    """``exc``, raised saving ``effect`` now, to throw into the loop if a value it holds cannot
    be encoded (the loop records the error on the task that wrote it, then raises it); else it
    is raised here (damaged data, or a background save: the loop has moved on)."""
    if isinstance(exc, CorruptedDataError) or background or not isinstance(effect, Save):
        raise exc
    return exc


def _saver(loop: RunLoop) -> BaseSaver:
    """The saver of a run that loads or saves (a run without one yields no such effect)."""
    if loop.saver is None:
        raise AssertionError("a run without a checkpointer yielded a load or save")
    return loop.saver


def drive_sync(loop: RunLoop, input: Any) -> Generator[Emit | Done]:
    """Run ``loop`` in this thread; parallel tasks go to a thread pool."""
    s = loop.s
    saves = _Saves(loop)
    events: queue.SimpleQueue[Any] | None = None
    runner: Runner = run_task_sync
    if s.stream_modes & _LIVE_MODES or s.subgraphs:
        events = queue.SimpleQueue()
        if "messages" in s.stream_modes:
            runner = MessageStream.for_run(loop, events.put).runner(loop, run_task_sync)
    gen = loop.run(input, events.put if events is not None else None)
    value: Any = None
    refused: SerializationError | None = None  # a save that could not be encoded, for the loop
    finished: list[Outcome] = []  # the outcomes of the step running now, as they come
    try:
        while True:
            try:
                effect = gen.send(value) if refused is None else gen.throw(refused)
            except StopIteration as stop:
                saves.wait()
                yield Done(stop.value)
                return
            value, refused = None, None
            if isinstance(effect, Emit):
                yield effect
            elif isinstance(effect, Execute):
                if saves.pending is not None and effect.env.calls is not None:
                    effect.env.calls.after(saves.pending)  # task results go after it
                out, tasks, env = loop.out, effect.tasks, effect.env
                if events is None and not _streams_each_task(out, tasks):
                    # Nothing to stream while tasks run: this thread takes part, saving hand-offs
                    if len(tasks) == 1:
                        value = finished = [run_task_sync(tasks[0], env)]
                    else:
                        value = finished = _Batch(tasks, env).run()
                    if out is not None:
                        for outcome in finished:
                            yield from out.task_done(outcome)
                else:
                    finished = []
                    value = yield from _streamed_sync(effect, out, events, runner, finished)
                finished = []
            else:
                try:
                    value = saves.carry_out(effect)
                except SerializationError as exc:
                    refused = _unencodable(exc, effect, saves.background)
    except GeneratorExit:
        # The stream was closed mid-run (it stops only at a yield, so no save is under way):
        # keep what finished, as a cancelled async run does. Tasks the pool has not started
        # are cancelled; those running cannot be stopped, and their results are dropped.
        if loop.saver is not None:
            for effect in loop.cancelled(finished):
                if isinstance(effect, Save | SaveWrites):
                    saves.carry_out(effect)
        raise
    finally:
        saves.wait()


def _streamed_sync(
    effect: Execute,
    out: Chunks | None,
    events: queue.SimpleQueue[Any] | None,
    runner: Runner,
    finished: list[Outcome],
) -> Generator[Emit, None, list[Outcome]]:
    """Run the step's tasks in the pool, streaming while they run; ``finished`` gets each
    outcome before its chunks go out."""
    tasks, env = effect.tasks, effect.env
    inbox: queue.SimpleQueue[Any] = events if events is not None else queue.SimpleQueue()

    def run(task: Task) -> Outcome:
        outcome = runner(task, env)
        inbox.put(_Finished(outcome))
        return outcome

    futures = [_submit(run, t) for t in tasks]
    remaining = len(futures)
    try:
        while remaining:
            item = inbox.get()
            if isinstance(item, _Finished):
                remaining -= 1
                finished.append(item.outcome)
                yield from _done_chunks(out, item.outcome)
            else:
                yield item
    except GeneratorExit:  # the stream was closed: tasks the pool has not started never run
        for future in futures:
            future.cancel()
        raise
    return [f.result() for f in futures]


class _Batch:
    """A step's tasks, run in parallel by this thread and helpers from the pool.

    Threads take the next task in turn. A helper, as it starts, first asks for another helper
    while at least two tasks wait: tasks that block (I/O) soon have a thread each, as if every
    one had been submitted, while quick tasks are mostly run by the threads already going,
    without a hand-off per task (a pool hand-off costs more than a trivial node). Helpers that
    have not started when the tasks run out are cancelled, never waited for.
    """

    def __init__(self, tasks: list[Task], env: StepEnv) -> None:
        self.tasks = tasks
        self.env = env
        self.outcomes: list[Outcome | None] = [None] * len(tasks)
        self.lock = threading.Lock()
        self.taken = 0
        self.helpers: list[Future[None]] = []

    def run(self) -> list[Outcome]:
        self._ask_for_helper()
        self._work()
        with self.lock:
            helpers, self.helpers = self.helpers, []
            self.taken = len(self.tasks)  # a helper starting late finds nothing to do
        for helper in helpers:
            if not helper.cancel():
                helper.result()
        return self.outcomes  # type: ignore[return-value]  # every slot is filled by now

    def _ask_for_helper(self) -> None:
        with self.lock:
            if len(self.tasks) - self.taken >= 2:
                self.helpers.append(_submit(self._help))

    def _help(self) -> None:
        self._ask_for_helper()
        self._work()

    def _work(self) -> None:
        while True:
            with self.lock:
                index = self.taken
                if index >= len(self.tasks):
                    return
                self.taken = index + 1
            self.outcomes[index] = run_task_sync(self.tasks[index], self.env)


def _submit(fn: Any, *args: Any) -> Future[Any]:
    return _POOL.submit(contextvars.copy_context().run, fn, *args)


async def drive_async(loop: RunLoop, input: Any) -> AsyncGenerator[Emit | Done]:
    """Run ``loop`` on the event loop; async nodes run concurrently, sync ones in threads.

    A cancelled run (``task.cancel()``, ``asyncio.timeout``, a streaming client gone) stops at
    a whole checkpoint: a save under way lands first, and the writes of the step's tasks that
    finished are saved, so the next call goes on from there without running them again.
    """
    saver, s = loop.saver, loop.s
    thread_id = s.thread_id or ""
    background = s.durability == "async"
    pending: asyncio.Future[Any] | None = None
    events: asyncio.Queue[Any] | None = None
    runner: AsyncRunner = run_task_async
    put: Put | None = None
    if s.stream_modes & _LIVE_MODES or s.subgraphs:
        events = asyncio.Queue()
        put = _threadsafe_put(events)
        if "messages" in s.stream_modes:
            runner = MessageStream.for_run(loop, put).async_runner(loop, run_task_async)
    # A cancelled save could land after the run has returned (in a worker thread, or on the
    # server), racing the next call: saves are waited for. A saver whose async calls are its
    # sync ones in a worker thread runs them where they can be, without a task per save.
    in_worker = (
        saver is not None
        and not saver.in_process
        and type(saver).aput is BaseSaver.aput
        and type(saver).aput_writes is BaseSaver.aput_writes
    )
    settle = _settled if saver is not None and not saver.in_process else _awaited
    gen = loop.run(input, put)
    value: Any = None
    refused: SerializationError | None = None  # a save that could not be encoded, for the loop
    step: _Step | None = None  # the step whose tasks are running
    whole = True  # no saver call is under way: the loop's own state is consistent
    try:
        while True:
            try:
                effect = gen.send(value) if refused is None else gen.throw(refused)
                refused = None
            except StopIteration as stop:
                if pending is not None:
                    await _settled(pending)
                    pending = None
                yield Done(stop.value)
                return
            value = None
            if isinstance(effect, Emit):
                yield effect
                continue
            if isinstance(effect, Execute):
                if pending is not None and effect.env.calls is not None:
                    effect.env.calls.after(pending)  # task results go after it
                step = _Step(effect)
                if events is None and not _streams_each_task(loop.out, effect.tasks):
                    value = await step.run()  # nothing streams while tasks run
                    step = None
                    for outcome in value:
                        for chunk in _done_chunks(loop.out, outcome):
                            yield chunk
                    continue
                outcomes: list[Outcome] = []
                async for item in step.stream(loop.out, events, runner, outcomes):
                    yield item
                step = None
                value = outcomes
                continue
            whole = False
            if pending is not None:
                await _settled(pending)
                pending = None
            saver = _saver(loop)
            if isinstance(effect, Save):
                if background:
                    pending = asyncio.ensure_future(saver.aput(effect.record, fork=effect.fork))
                else:
                    try:
                        if in_worker:
                            await _in_worker(saver.put, effect.record, fork=effect.fork)
                        else:
                            await settle(saver.aput(effect.record, fork=effect.fork))
                    except SerializationError as exc:
                        refused = _unencodable(exc, effect, background)
            elif isinstance(effect, SaveWrites):
                args = (thread_id, s.ns, effect.checkpoint_id, effect.writes)
                if in_worker:
                    await _in_worker(saver.put_writes, *args)
                else:
                    await settle(saver.aput_writes(*args))
            elif isinstance(effect, Load):
                value = await saver.aget_tuple(thread_id, s.ns, effect.checkpoint_id)
            whole = True
    except (asyncio.CancelledError, GeneratorExit):
        if whole and saver is not None:
            finished = step.stop() if step is not None else []
            await _settled(_save_cancelled(loop, pending, finished))
            pending = None
        raise
    finally:
        if pending is not None:
            await _settled(pending)


async def _save_cancelled(
    loop: RunLoop, pending: asyncio.Future[Any] | None, finished: list[Outcome]
) -> None:
    """Save what a cancelled run has not saved: its finished tasks' writes, and with
    ``durability="exit"`` the checkpoint it stopped at."""
    if pending is not None:
        await _settled(pending)
    saver, s = _saver(loop), loop.s
    for effect in loop.cancelled(finished):
        if isinstance(effect, Save):
            await saver.aput(effect.record, fork=effect.fork)
        elif isinstance(effect, SaveWrites):
            await saver.aput_writes(s.thread_id or "", s.ns, effect.checkpoint_id, effect.writes)


async def _awaited(aw: Awaitable[T]) -> T:
    return await aw


async def _in_worker(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn`` in a worker thread, as ``BaseSaver``'s async methods run it; if the caller is
    cancelled, a call not started yet never runs and one under way is waited for."""
    done = _POOL.submit(contextvars.copy_context().run, functools.partial(fn, *args, **kwargs))
    try:
        return await asyncio.wrap_future(done)
    except asyncio.CancelledError:
        if not done.cancelled():
            await asyncio.wait([asyncio.wrap_future(done)])
        raise


async def _settled(aw: Awaitable[T]) -> T:
    """Await ``aw`` to its end even if the caller is cancelled meanwhile, then let the
    cancellation go on: what a cancelled run saves is settled by the time it returns."""
    task = asyncio.ensure_future(aw)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await asyncio.wait([task])
        raise


def _threadsafe_put(inbox: asyncio.Queue[Any]) -> Callable[[Emit], None]:
    """Put chunks into ``inbox`` from any thread, keeping their order."""
    aio = asyncio.get_running_loop()
    home = threading.get_ident()

    def put(item: Emit) -> None:
        if threading.get_ident() == home:
            inbox.put_nowait(item)
        else:
            aio.call_soon_threadsafe(inbox.put_nowait, item)

    return put


class _Step:
    """The tasks of one step as they run, so a cancelled run can keep those that finished."""

    def __init__(self, effect: Execute) -> None:
        self.effect = effect
        self.futures: list[asyncio.Future[Outcome]] = []

    async def run(self) -> list[Outcome]:
        """Run the step's tasks; their outcomes in task order."""
        tasks, env = self.effect.tasks, self.effect.env
        if len(tasks) == 1:
            return [await run_task_async(tasks[0], env)]
        # run_task_async never raises: gather returns every task's outcome
        self.futures = [asyncio.ensure_future(run_task_async(t, env)) for t in tasks]
        return await asyncio.gather(*self.futures)

    async def stream(
        self,
        out: Chunks | None,
        events: asyncio.Queue[Any] | None,
        runner: AsyncRunner,
        outcomes: list[Outcome],
    ) -> AsyncIterator[Emit]:
        """Run the step's tasks; fill ``outcomes`` in task order, yield chunks as they come."""
        tasks, env = self.effect.tasks, self.effect.env
        inbox: asyncio.Queue[Any] = events if events is not None else asyncio.Queue()

        async def run(task: Task) -> Outcome:
            outcome = await runner(task, env)
            inbox.put_nowait(_Finished(outcome))
            return outcome

        self.futures = [asyncio.ensure_future(run(t)) for t in tasks]
        remaining = len(tasks)
        while remaining:
            item = await inbox.get()
            if isinstance(item, _Finished):
                remaining -= 1
                for chunk in _done_chunks(out, item.outcome):
                    yield chunk
            else:
                yield item
        outcomes.extend(await asyncio.gather(*self.futures))

    def stop(self) -> list[Outcome]:
        """Cancel the tasks still running; the outcomes of those that finished, in task order.

        A sync node already running in a worker thread cannot be stopped: it ends in the
        background and its result is dropped (it runs again when the thread is continued).
        """
        for future in self.futures:
            future.cancel()
        return [f.result() for f in self.futures if f.done() and not f.cancelled()]
