"""Starting one ``@task`` call: find its saved result, or run it and save what it returns.

A call runs concurrently with its caller: in a thread of the pool when the caller is sync code,
as an asyncio task when the caller is a coroutine on the event loop. The caller gets a future
(``.result()``, or ``await`` it). Each attempt runs in the call's own task context, so
``interrupt()``, ``get_config()``, ``get_store()`` and nested ``@task`` calls work inside it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import time
from collections.abc import Callable, Coroutine, Generator
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from threadline.cache.base import BaseCache
from threadline.cache.keys import FullKey, hashed_key
from threadline.checkpoint.base import TaskWrite
from threadline.errors import NonDeterminismError
from threadline.func.options import TaskOptions
from threadline.runtime.calls import TASK_WRITE, StepCalls, asettle_calls, call_id, settle_calls
from threadline.runtime.context import TaskContext, current_task, enter_task, leave_task
from threadline.runtime.retry import retry_delay
from threadline.runtime.task import Task
from threadline.runtime.timeouts import call_within, within
from threadline.runtime.trace import note_retry

T = TypeVar("T")

# Calls wait on calls they make: a high cap keeps nested calls from starving the pool.
_POOL = ThreadPoolExecutor(max_workers=256, thread_name_prefix="threadline-task")


class TaskFuture(concurrent.futures.Future[T], Generic[T]):
    """A call's result for sync code; ``await``-able too."""

    def __await__(self) -> Generator[Any, None, T]:
        return asyncio.wrap_future(self).__await__()


@dataclass(frozen=True, slots=True)
class CallInfo:
    """What a running ``@task`` call knows about itself (``get_task_context()``).

    ``idempotency_key`` is the same every time this call runs again (after an interrupt, a
    failure, a crash or a retry), and differs between calls: pass it to an external API that
    deduplicates requests, so a side effect whose result was not saved is not done twice.
    """

    name: str
    idempotency_key: str
    call_index: int
    attempt: int
    caller: str


_current_call: ContextVar[CallInfo | None] = ContextVar("threadline_call", default=None)
# Where finished calls report ``{task name: result}`` while an entrypoint streams "updates"
updates_sink: ContextVar[Callable[[dict[str, Any]], None] | None] = ContextVar(
    "threadline_call_updates", default=None
)


def current_call() -> CallInfo | None:
    return _current_call.get()


def start_call(options: TaskOptions, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Called by a task function: its future, already done if the call's result was saved."""
    caller = current_task()
    if caller is None:
        raise RuntimeError(
            f"task {options.name!r} was called outside a running entrypoint or graph node; "
            "call @task functions from inside an @entrypoint function or a StateGraph node"
        )
    index = caller.next_task_call()
    cid = call_id(caller.ns, index)
    calls = caller.env.calls
    on_loop = _caller_on_loop(caller)
    saved = calls.saved(cid) if calls is not None else None
    if saved is not None:
        if saved.task_name != options.name:
            raise NonDeterminismError(
                f"call #{index} of {caller.name!r} is to task {options.name!r}, but the saved "
                f"result of that call came from task {saved.task_name!r}: the code or its input "
                "changed since the run was saved. Restore the order of the task calls, or "
                "start the thread again with new input"
            )
        return _done(saved.value, on_loop)
    call = _Call(options, args, kwargs, cid, index, caller, calls)
    return call.start_async() if on_loop else call.start_sync()


def _caller_on_loop(caller: TaskContext) -> bool:
    """True when the caller is a coroutine on this thread's running event loop."""
    node = caller.task.node
    if node is None or node.sync_fn is not None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _done(value: Any, on_loop: bool) -> Any:
    future: asyncio.Future[Any] | TaskFuture[Any] = (
        asyncio.get_running_loop().create_future() if on_loop else TaskFuture()
    )
    future.set_result(value)
    return future


class _Call:
    """One call: its attempts, each in the call's own task context, then its saved result."""

    def __init__(
        self,
        options: TaskOptions,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        cid: str,
        index: int,
        caller: TaskContext,
        calls: StepCalls | None,
    ) -> None:
        self.options = options
        self.args = args
        self.kwargs = kwargs
        self.cid = cid
        self.index = index
        self.caller = caller
        self.calls = calls
        task = Task(
            id=cid,
            name=options.name,
            ns=f"{caller.ns}|{options.name}:{cid}",
            input=None,
            node=options.node,
            answers=caller.task.answers,  # answers to interrupts inside the call
        )
        self.ctx = TaskContext(task, caller.env)

    # ------------------------------------------------------------------ sync callers
    def start_sync(self) -> TaskFuture[Any]:
        future: TaskFuture[Any] = TaskFuture()
        runner = _POOL.submit(contextvars.copy_context().run, self._run_sync, future)
        self._started(runner)
        return future

    def _run_sync(self, future: TaskFuture[Any]) -> None:
        token = enter_task(self.ctx)
        trace = self.ctx.env.trace
        if trace is not None:
            trace.begin(self.ctx)
        try:
            value = self._cached_sync()
        except BaseException as exc:  # the caller sees it in .result(), interrupts included
            if trace is not None:
                trace.call_ended(self.ctx, exc)
            future.set_exception(exc)
            return
        finally:
            settle_calls(self.ctx)
            leave_task(token)
        if trace is not None:
            trace.call_ended(self.ctx, None)
        self._deliver(future, value)

    def _cached_sync(self) -> Any:
        """The cached result of an equal call (``@task(cache_policy=...)``), or the call's."""
        entry = self._cache_entry()
        if entry is None:
            return self._attempts_sync()
        cache, key, ttl = entry
        hit = cache.get([key]).get(key)
        if hit is not None:
            return hit["value"]
        value = self._attempts_sync()
        cache.set({key: ({"value": value}, ttl)})
        return value

    def _attempts_sync(self) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._attempt_sync(attempt)
            except Exception as exc:
                delay = retry_delay(self.options.retry, attempt, exc)
                if delay is None:
                    raise
                note_retry(self.ctx, exc, "task")
                time.sleep(delay)
                self.ctx.restart()

    def _attempt_sync(self, attempt: int) -> Any:
        token = _current_call.set(self._info(attempt))
        try:
            opts = self.options
            if opts.is_async:
                return asyncio.run(self._timed(opts.fn(*self.args, **self.kwargs)))
            if opts.timeout is None:
                return opts.fn(*self.args, **self.kwargs)
            return call_within(opts.timeout, opts.name, "task", opts.fn, *self.args, **self.kwargs)
        finally:
            _current_call.reset(token)

    def _deliver(self, future: TaskFuture[Any], value: Any) -> None:
        """Hand the caller its result and save it: after (``async``) or before (else)."""
        if self.calls is None or self.calls.durability != "sync":
            self._resolve(future.set_result, value)
        if self.calls is not None:
            try:
                self.calls.record(self._write(value))
            except Exception as exc:
                self._failed(future, exc)
                return
        if not future.done():
            self._resolve(future.set_result, value)

    # ------------------------------------------------------------------ async callers
    def start_async(self) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        runner = asyncio.ensure_future(self._run_async(future))
        self._started(runner)
        return future

    async def _run_async(self, future: asyncio.Future[Any]) -> None:
        token = enter_task(self.ctx)
        trace = self.ctx.env.trace
        if trace is not None:
            trace.begin(self.ctx)
        try:
            value = await self._cached_async()
        except BaseException as exc:
            if trace is not None:
                trace.call_ended(self.ctx, exc)
            if not future.done():
                future.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        finally:
            await asettle_calls(self.ctx)
            leave_task(token)
        if trace is not None:
            trace.call_ended(self.ctx, None)
        await self._adeliver(future, value)

    async def _adeliver(self, future: asyncio.Future[Any], value: Any) -> None:
        """``_deliver`` for async callers."""
        if self.calls is None or self.calls.durability != "sync":
            self._resolve(future.set_result, value)
        if self.calls is not None:
            try:
                await self.calls.arecord(self._write(value))
            except Exception as exc:
                self._failed(future, exc)
                return
        if not future.done():
            self._resolve(future.set_result, value)

    def _write(self, value: Any) -> TaskWrite:
        return TaskWrite(self.cid, self.options.name, TASK_WRITE, value)

    async def _cached_async(self) -> Any:
        entry = self._cache_entry()
        if entry is None:
            return await self._attempts_async()
        cache, key, ttl = entry
        hit = (await cache.aget([key])).get(key)
        if hit is not None:
            return hit["value"]
        value = await self._attempts_async()
        await cache.aset({key: ({"value": value}, ttl)})
        return value

    async def _attempts_async(self) -> Any:
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._attempt_async(attempt)
            except Exception as exc:
                delay = retry_delay(self.options.retry, attempt, exc)
                if delay is None:
                    raise
                note_retry(self.ctx, exc, "task")
                await asyncio.sleep(delay)
                self.ctx.restart()

    async def _attempt_async(self, attempt: int) -> Any:
        token = _current_call.set(self._info(attempt))
        try:
            if self.options.is_async:
                return await self._timed(self.options.fn(*self.args, **self.kwargs))
            run = contextvars.copy_context().run
            loop = asyncio.get_running_loop()
            work = loop.run_in_executor(
                _POOL, lambda: run(self.options.fn, *self.args, **self.kwargs)
            )
            return await self._timed(work)
        finally:
            _current_call.reset(token)

    async def _timed(self, work: Coroutine[Any, Any, Any] | asyncio.Future[Any]) -> Any:
        if self.options.timeout is None:
            return await work
        return await within(work, self.options.timeout, self.options.name, "task")

    # ------------------------------------------------------------------ both
    def _cache_entry(self) -> tuple[BaseCache[Any], FullKey, float | None] | None:
        """Where this call's result is cached: the run's cache, the task's namespace and a
        hash of ``key_func(*args, **kwargs)``; ``None`` when either side has no cache."""
        node_cache, cache = self.options.cache, self.ctx.env.cache
        if node_cache is None or cache is None:
            return None
        policy, args, kwargs = node_cache.policy, self.args, self.kwargs
        key = hashed_key(lambda _: policy.key_func(*args, **kwargs), None)
        return cache, (node_cache.namespace, key), policy.ttl

    def _resolve(self, resolve: Callable[[Any], None], value: Any) -> None:
        sink = updates_sink.get()
        if sink is not None:
            sink({self.options.name: value})
        resolve(value)

    def _failed(self, future: Any, exc: Exception) -> None:
        """Saving the result failed: the caller gets the error, or, if it already has the
        result (``async``), the step fails with it."""
        if not future.done():
            future.set_exception(exc)
        elif self.calls is not None:
            self.calls.failed_to_save(exc)

    def _info(self, attempt: int) -> CallInfo:
        return CallInfo(self.options.name, self.cid, self.index, attempt, self.caller.name)

    def _started(self, runner: Any) -> None:
        if self.calls is not None:
            self.calls.started(self.caller.ns, runner)


__all__ = ["CallInfo", "TaskFuture", "current_call", "start_call"]
