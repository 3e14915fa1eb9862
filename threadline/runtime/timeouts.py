"""Time limits on one attempt of a node or a ``@task`` call, sync or async.

A ``TimeoutPolicy`` caps an attempt's whole run (``run_timeout``) and the time it may go
without progress (``idle_timeout``): ``heartbeat()`` is progress, and under
``refresh_on="auto"`` so is each chunk it streams (``progress()``). The attempt's ``Progress``
lives in a context variable, which the sync attempt's thread and the async attempt's task both
see.

An async attempt is cancelled when its time is up. A sync attempt cannot be stopped
in-process: it runs in a daemon thread of its own and the caller stops waiting for it; the
thread runs on until the function returns, and what it returns then is dropped. A daemon
thread, not a pool's, so an attempt that never returns neither holds a pool worker nor keeps
the process from exiting.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from threadline.errors import NodeTimeoutError
from threadline.types import TimeoutPolicy


class Progress:
    """When an attempt started and last made progress (``time.monotonic()``)."""

    __slots__ = ("last", "policy", "started")

    def __init__(self, policy: TimeoutPolicy) -> None:
        self.policy = policy
        self.started = self.last = time.monotonic()

    def deadline(self) -> tuple[float, str]:
        """The earliest moment the attempt times out, and which limit that is."""
        run, idle = self.policy.limits
        limits = []
        if run is not None:
            limits.append((self.started + run, "run"))
        if idle is not None:
            limits.append((self.last + idle, "idle"))
        return min(limits)

    def error(self, kind: str, name: str, what: str) -> NodeTimeoutError:
        run, idle = self.policy.limits
        elapsed = time.monotonic() - self.started
        return NodeTimeoutError(
            name, elapsed, kind=kind, run_timeout=run, idle_timeout=idle, what=what
        )


_PROGRESS: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "threadline_progress", default=None
)


def heartbeat() -> None:
    """``Runtime.heartbeat``: the running attempt made progress (refreshes its idle timeout)."""
    current = _PROGRESS.get()
    if current is not None:
        current.last = time.monotonic()


def progress() -> None:
    """The running attempt streamed something: progress under ``refresh_on="auto"``."""
    current = _PROGRESS.get()
    if current is not None and current.policy.refresh_on == "auto":
        current.last = time.monotonic()


def seconds(timeout: float | timedelta | TimeoutPolicy | None) -> TimeoutPolicy | None:
    """A timeout as ``add_node``/``@task`` take it, as a policy checked where it is given."""
    if timeout is not None and not isinstance(timeout, float | int | timedelta | TimeoutPolicy):
        raise TypeError(
            f"timeout must be seconds (a number), a timedelta or a TimeoutPolicy, got {timeout!r}"
        )
    return TimeoutPolicy.coerce(timeout)


def call_within(
    policy: TimeoutPolicy, name: str, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    """``fn(*args, **kwargs)`` in a thread of its own, in a copy of this context; raise
    ``NodeTimeoutError`` if it has not returned within the policy's limits."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    tracked = Progress(policy)
    context = contextvars.copy_context()
    context.run(_PROGRESS.set, tracked)

    def attempt() -> None:
        try:
            future.set_result(context.run(fn, *args, **kwargs))
        except BaseException as exc:  # the caller re-raises it, interrupts included
            future.set_exception(exc)

    threading.Thread(target=attempt, name=f"threadline-timed-{name}", daemon=True).start()
    while True:
        deadline, kind = tracked.deadline()
        done, _ = concurrent.futures.wait((future,), max(0.0, deadline - time.monotonic()))
        if done:  # a TimeoutError the function raised itself is its own failure, not this
            return future.result()
        deadline, kind = tracked.deadline()  # progress made while waiting moves it on
        if time.monotonic() >= deadline:
            raise tracked.error(kind, name, what)


async def within(work: Any, policy: TimeoutPolicy, name: str, what: str) -> Any:
    """Await ``work`` (a coroutine or future) within the policy's limits; it is cancelled after
    that and ``NodeTimeoutError`` raised."""
    tracked = Progress(policy)
    token = _PROGRESS.set(tracked)
    expired: list[str] = []
    try:
        async with asyncio.timeout(None) as scope:
            watch = asyncio.create_task(_watch(tracked, scope, expired))
            try:
                return await work
            finally:
                watch.cancel()
    except TimeoutError:
        if not expired:  # raised by the work itself
            raise
        raise tracked.error(expired[0], name, what) from None
    finally:
        _PROGRESS.reset(token)


async def _watch(tracked: Progress, scope: asyncio.Timeout, expired: list[str]) -> None:
    """Expire ``scope`` once the attempt passes its deadline, which progress keeps moving."""
    while True:
        deadline, kind = tracked.deadline()
        now = time.monotonic()
        if now >= deadline:
            expired.append(kind)
            scope.reschedule(asyncio.get_running_loop().time())
            return
        await asyncio.sleep(deadline - now)
