"""``@task``: a function whose calls run concurrently and whose results are saved."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any, Generic, TypeVar

from threadline.errors import GraphValidationError
from threadline.func.call import start_call
from threadline.func.options import TaskOptions, task_options
from threadline.types import CachePolicy, RetryPolicy, TimeoutPolicy

T = TypeVar("T")


class TaskFunction(Generic[T]):
    """A ``@task`` function: calling it inside an entrypoint or a graph node starts the call
    and returns a future of its result."""

    def __init__(self, options: TaskOptions) -> None:
        self.options = options
        self.func = options.fn
        functools.update_wrapper(self, options.fn)
        self.__name__ = options.name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return start_call(self.options, args, kwargs)

    def __repr__(self) -> str:
        return f"<task {self.options.name}>"


def task(
    __func_or_none__: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
    cache_policy: CachePolicy[Any] | None = None,
    timeout: float | timedelta | TimeoutPolicy | None = None,
) -> Any:
    """Make a function a task: ``@task`` or ``@task(name=..., retry_policy=..., timeout=...)``.

    Called inside an ``@entrypoint`` or a graph node, a task returns a future at once and runs
    concurrently (``.result()`` or ``await`` it). Its result is saved as soon as it returns, so
    when the caller runs again after an interrupt, a failure or a crash, the call returns the
    saved result without running. ``timeout`` (seconds) limits each attempt, sync or async.
    ``cache_policy`` keeps results in the graph's cache (``compile(cache=...)`` or
    ``@entrypoint(cache=...)``), keyed by the call's arguments: a call with equal arguments,
    in any run or thread, returns the cached result without running.
    """
    if cache_policy is not None and not isinstance(cache_policy, CachePolicy):
        raise GraphValidationError(f"cache_policy must be a CachePolicy, got {cache_policy!r}")

    def decorate(fn: Callable[..., Any]) -> TaskFunction[Any]:
        return TaskFunction(task_options(fn, name, retry_policy, timeout, cache_policy))

    if __func_or_none__ is not None:
        return decorate(__func_or_none__)
    return decorate
