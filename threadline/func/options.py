"""How a ``@task`` runs: its name, retry policies and per-attempt timeout, checked once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from threadline.cache.keys import node_namespace
from threadline.graph.spec import CallStyle, NodeCache, NodeSpec, is_async_callable
from threadline.runtime.retry import retry_policies
from threadline.runtime.timeouts import seconds
from threadline.types import CachePolicy, RetryPolicy, TimeoutPolicy


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """A task function and how each call of it runs."""

    name: str
    fn: Callable[..., Any]
    is_async: bool
    node: NodeSpec  # the task as the engine describes a runnable (its calls' ``task.node``)
    retry: tuple[RetryPolicy, ...] = ()
    timeout: TimeoutPolicy | None = None
    cache: NodeCache | None = None  # @task(cache_policy=...): where results are cached


def task_options(
    fn: Callable[..., Any],
    name: str | None,
    retry_policy: RetryPolicy | Sequence[RetryPolicy] | None,
    timeout: float | timedelta | TimeoutPolicy | None,
    cache_policy: CachePolicy[Any] | None = None,
) -> TaskOptions:
    if not callable(fn):
        raise TypeError(f"@task decorates a function, got {fn!r}")
    label = name or getattr(fn, "__name__", None) or type(fn).__name__
    is_async = is_async_callable(fn)
    node = (
        NodeSpec(label, None, fn, CallStyle())
        if is_async
        else NodeSpec(label, fn, None, CallStyle())
    )
    cache = NodeCache(cache_policy, node_namespace(label, fn)) if cache_policy is not None else None
    return TaskOptions(
        label, fn, is_async, node, retry_policies(retry_policy), seconds(timeout), cache
    )
