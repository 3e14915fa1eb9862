"""A time limit on one attempt of a node or a ``@task`` call, sync or async.

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


def seconds(timeout: float | timedelta | None) -> float | None:
    """A timeout as positive seconds (a number or a ``timedelta``), checked where it is given."""
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"timeout must be seconds (a number) or a timedelta, got {timeout!r}")
    if not timeout > 0:  # NaN too
        raise ValueError(f"timeout must be positive, got {timeout}")
    return float(timeout)


def call_within(
    timeout: float, name: str, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    """``fn(*args, **kwargs)`` in a thread of its own, in a copy of this context; raise
    ``NodeTimeoutError`` if it has not returned after ``timeout`` seconds."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()
    context = contextvars.copy_context()

    def attempt() -> None:
        try:
            future.set_result(context.run(fn, *args, **kwargs))
        except BaseException as exc:  # the caller re-raises it, interrupts included
            future.set_exception(exc)

    started = time.monotonic()
    threading.Thread(target=attempt, name=f"threadline-timed-{name}", daemon=True).start()
    done, _ = concurrent.futures.wait((future,), timeout)
    if not done:  # a TimeoutError the function raised itself is its own failure, not this
        raise NodeTimeoutError(name, time.monotonic() - started, run_timeout=timeout, what=what)
    return future.result()


async def within(work: Any, timeout: float, name: str, what: str) -> Any:
    """Await ``work`` (a coroutine or future) for at most ``timeout`` seconds; it is cancelled
    after that and ``NodeTimeoutError`` raised."""
    started = time.monotonic()
    try:
        async with asyncio.timeout(timeout) as scope:
            return await work
    except TimeoutError:
        if not scope.expired():  # raised by the work itself
            raise
        elapsed = time.monotonic() - started
        raise NodeTimeoutError(name, elapsed, run_timeout=timeout, what=what) from None
