"""``@entrypoint``: a function that takes one input becomes a durable, resumable workflow."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from threadline.checkpoint.base import BaseSaver
from threadline.errors import GraphValidationError
from threadline.func.final import PREVIOUS, final, state_update
from threadline.func.graph import FunctionalGraph, entrypoint_spec
from threadline.graph.spec import CallStyle, NodeSpec, is_async_callable, with_options
from threadline.runtime.context import current_task
from threadline.runtime.retry import retry_policies
from threadline.runtime.timeouts import seconds, within
from threadline.store.base import BaseStore
from threadline.types import RetryPolicy, TimeoutPolicy

INJECTED = ("config", "previous", "runtime", "store", "writer")


class entrypoint:
    """Turn a function of one input into a workflow: ``invoke``, ``stream``, ``get_state``...

    The function may also declare ``previous`` (what the last run on this thread returned, or
    saved with ``entrypoint.final``), ``config``, ``store``, ``writer`` and ``runtime``; they
    are passed when declared. ``@task`` calls inside it run concurrently and their results are
    saved, so after ``interrupt()`` and ``Command(resume=...)``, a failure or a crash, the
    function runs again from its top and finished tasks return their saved results.
    """

    def __init__(
        self,
        checkpointer: BaseSaver | bool | None = None,
        store: BaseStore | None = None,
        cache: Any = None,
        context_schema: type | None = None,
        cache_policy: Any = None,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
        trace: bool = True,
    ) -> None:
        self.cache = cache  # where @task(cache_policy=...) calls keep their results
        self.cache_policy = cache_policy  # the entrypoint's own result, cached by its input
        self.checkpointer = checkpointer
        self.store = store
        self.context_schema = context_schema
        self.retry_policy = retry_policies(retry_policy)
        self.timeout = seconds(timeout)
        self.trace = trace  # runs save an execution trace (``get_trace``)

    final = final

    def __call__(self, func: Callable[..., Any]) -> FunctionalGraph:
        if inspect.isgeneratorfunction(func) or inspect.isasyncgenfunction(func):
            raise NotImplementedError("Generators are not supported in the Functional API.")
        inject = _injected(func)
        is_async = is_async_callable(func)
        if self.timeout is not None and not is_async:
            raise ValueError(
                f"entrypoint {func.__name__!r} is sync: a timeout needs an async function "
                "(a sync function cannot be stopped in-process); put it on its @task calls"
            )
        body = _body(func, inject, is_async, self.timeout)
        name = func.__name__
        node = (
            NodeSpec(name, None, body, CallStyle(), self.retry_policy)
            if is_async
            else NodeSpec(name, body, None, CallStyle(), self.retry_policy)
        )
        node = with_options(node, func, self.cache_policy, False)
        return FunctionalGraph(
            entrypoint_spec(node, self.context_schema),
            cache=self.cache,
            checkpointer=self.checkpointer,
            store=self.store,
            interrupt_before=frozenset(),
            interrupt_after=frozenset(),
            name="LangGraph",
            trace=self.trace,
        )


def _injected(func: Callable[..., Any]) -> tuple[str, ...]:
    """The parameters after the input that the run passes in; others must have defaults."""
    params = list(inspect.signature(func).parameters.values())
    if not params:
        raise ValueError("Entrypoint function must have at least one parameter")
    names = []
    for p in params[1:]:
        if p.name in INJECTED:
            names.append(p.name)
        elif p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise GraphValidationError(
                f"entrypoint {func.__name__!r}: parameter {p.name!r} has no value to take; "
                f"it takes one input, and may declare {', '.join(INJECTED)}"
            )
    return tuple(names)


def _body(
    func: Callable[..., Any],
    inject: tuple[str, ...],
    is_async: bool,
    timeout: TimeoutPolicy | None,
) -> Callable[[Any], Any]:
    """The graph node: the function called with its input and what it declared, its return
    value split into what the caller gets and what the next run sees as ``previous``."""
    if not is_async:

        def node(arg: Any) -> dict[str, Any]:
            return state_update(func(arg, **_kwargs(inject)))

        return node

    async def anode(arg: Any) -> dict[str, Any]:
        if timeout is None:
            return state_update(await func(arg, **_kwargs(inject)))
        work = func(arg, **_kwargs(inject))
        return state_update(await within(work, timeout, func.__name__, "entrypoint"))

    return anode


def _kwargs(inject: tuple[str, ...]) -> dict[str, Any]:
    if not inject:
        return {}
    ctx = current_task()
    assert ctx is not None  # the function runs as a node
    previous = ctx.env.values.get(PREVIOUS)
    given: dict[str, Callable[[], Any]] = {
        "config": lambda: ctx.config,
        "previous": lambda: previous,
        "store": lambda: ctx.store,
        "writer": lambda: ctx.writer,
        "runtime": lambda: ctx.runtime.override(previous=previous),
    }
    return {name: given[name]() for name in inject}
