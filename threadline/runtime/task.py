"""Running one task: call the node (with retries), then work out its writes and where it routes.

Both runners return an ``Outcome`` and never raise, so a failing task cannot tear down its
siblings: the loop sees every task's result before deciding what to save.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from threadline import serde
from threadline.constants import START
from threadline.errors import GraphInterrupt, InvalidUpdateError, NodeError, ParentCommand
from threadline.graph.spec import ErrorHandler, GraphSpec, NodeCache, NodeSpec
from threadline.runtime.cached import aremember, entry_key, remember
from threadline.runtime.calls import StepCalls, asettle_calls, settle_calls
from threadline.runtime.context import SpareAnswer, TaskContext, enter_task, leave_task
from threadline.runtime.retry import retry_delay
from threadline.runtime.routing import branch_state, call_branch, drop_end, routes_after
from threadline.runtime.timeouts import call_within, within
from threadline.runtime.trace import RunTrace, note_retry
from threadline.runtime.writes import Update, normalize_output, updates_of
from threadline.types import Command, Interrupt, Send

if TYPE_CHECKING:
    from threadline.cache.base import BaseCache
    from threadline.checkpoint.base import BaseSaver
    from threadline.runtime.runtime import RunControl
    from threadline.runtime.settings import RunSettings
    from threadline.store.base import BaseStore

Gotos = tuple[str | Send, ...]


@serde.register(name="threadline.TaskResult")
@dataclass(slots=True)
class TaskResult:
    """What a finished task wrote to the state and which tasks it triggers."""

    updates: Update
    routes: tuple[str | Send, ...]


@dataclass(slots=True)
class Task:
    """A task of the current step, with what it needs to run."""

    id: str
    name: str
    ns: str
    input: Any
    node: NodeSpec | None
    send: bool = False
    answers: dict[str, Any] = field(default_factory=dict)
    # What ``task_ids.task_id`` made ``id`` from (the trace stores ``index`` instead of the
    # id): the step's checkpoint and the task's place in it; -1 and "" for an id made otherwise.
    index: int = -1
    planned_at: str = ""

    def node_input(self, env: StepEnv) -> Any:
        """A ``Send`` task gets its argument; others the state as the step began, as the
        node's own input schema reads it, if it has one."""
        if self.send:
            return self.input
        reader = self.node.reader if self.node is not None else None
        return (reader or env.spec.schema).node_input(env.values)


@dataclass(slots=True)
class Outcome:
    """How a task ended: exactly one of result, error, interrupts or a parent command.

    ``cached``: the result came from the node cache; the node did not run.
    """

    task: Task
    result: TaskResult | None = None
    error: BaseException | None = None
    interrupts: tuple[Interrupt, ...] = ()
    parent_command: Command[Any] | None = None
    cached: bool = False
    gotos: Gotos = ()  # the node's own ``Command(goto=...)`` targets, among the result's routes


@dataclass(slots=True)
class StepEnv:
    """What every task of a step shares."""

    spec: GraphSpec
    values: Mapping[str, Any]
    config: dict[str, Any]
    saver: BaseSaver | None
    store: BaseStore | None
    writer: Callable[[Any], None]
    durability: str
    sink: Callable[[Any], None] | None = None
    modes: frozenset[str] = frozenset()
    spare: SpareAnswer | None = None
    thread_id: str | None = None
    checkpoint_id: str = ""  # the checkpoint the step started from
    # The checkpoints of the runs above this one by namespace: a subgraph a task runs records
    # them as its checkpoints' ``parents``
    parents: Mapping[str, str] = field(default_factory=dict)
    context: Any = None  # ``invoke(..., context=...)``
    cache: BaseCache[Any] | None = None  # ``compile(cache=...)``
    calls: StepCalls | None = None  # the ``@task`` calls of the step's tasks
    trace: RunTrace | None = None  # where the run keeps its execution trace, if it keeps one
    control: RunControl | None = None  # ``invoke(..., control=...)``: ``Runtime.control``

    @classmethod
    def of_run(
        cls,
        spec: GraphSpec,
        saver: BaseSaver | None,
        store: BaseStore | None,
        s: RunSettings,
        outlets: tuple[Callable[[Any], None], Callable[[Any], None] | None],
    ) -> StepEnv:
        """The env of a run's steps, from its settings and where what streams while tasks run
        goes (``chunks.live_outlets``); ``StepSetup.env`` moves it to each step."""
        writer, sink = outlets
        return cls(
            spec,
            {},
            s.config,
            saver,
            store,
            writer,
            s.durability,
            sink,
            s.stream_modes,
            thread_id=s.thread_id,
            parents=s.parents,
            context=s.context,
            cache=s.cache,
            trace=s.trace,
            control=s.control,
        )


def run_task_sync(task: Task, env: StepEnv) -> Outcome:
    """Run a task in this thread; used directly and from the thread pool."""
    node = task.node
    assert node is not None and node.sync_fn is not None
    if env.cache is not None and node.cache is not None:
        return _cached_sync(task, env, env.cache, node.cache)
    return _run_sync(task, env)


def _run_sync(task: Task, env: StepEnv) -> Outcome:
    node = task.node
    assert node is not None and node.sync_fn is not None
    ctx = TaskContext(task, env)
    token = enter_task(ctx)
    trace = env.trace
    if trace is not None:
        trace.begin(ctx)
    try:
        output = _call_with_retry(node, node.sync_fn, task.node_input(env), ctx)
        outcome = _routed(task, env, *_output_parts(task, env, output, ctx), ctx)
    except (Exception, GraphInterrupt) as exc:
        outcome = _stopped(task, exc)
        if outcome.error is not None and node.error_handler is not None:
            outcome = _handled(task, env, ctx, node.error_handler, outcome.error)
    finally:
        settle_calls(ctx)
        leave_task(token)
    if trace is not None:
        trace.ended(ctx, outcome)
    return outcome


def run_task_async(task: Task, env: StepEnv) -> Coroutine[Any, Any, Outcome]:
    """Run a task on the event loop; a sync node's call goes to a worker thread.

    Not a coroutine itself: it picks the one to await (a frame less per task)."""
    node = task.node
    assert node is not None
    if env.cache is not None and node.cache is not None:
        return _cached_async(task, env, env.cache, node.cache)
    return _run_async(task, env)


async def _run_async(task: Task, env: StepEnv) -> Outcome:
    node = task.node
    assert node is not None
    ctx = TaskContext(task, env)
    token = enter_task(ctx)
    trace = env.trace
    if trace is not None:
        trace.begin(ctx)
    try:
        if node.async_fn is None:
            assert node.sync_fn is not None
            arg = task.node_input(env)
            call = functools.partial(_call_with_retry, node, node.sync_fn, arg, ctx)
            thread_ctx = contextvars.copy_context()
            output = await asyncio.get_running_loop().run_in_executor(None, thread_ctx.run, call)
        else:
            output = await _call_with_retry_async(node, node.async_fn, task.node_input(env), ctx)
        parts = _output_parts(task, env, output, ctx)
        if task.name not in env.spec.branches:  # nothing to await: plain edges and gotos
            outcome = _routed(task, env, *parts, ctx)
        else:
            outcome = await _arouted(task, env, *parts, ctx)
    except (Exception, GraphInterrupt) as exc:
        outcome = _stopped(task, exc)
        if outcome.error is not None and node.error_handler is not None:
            outcome = await _ahandled(task, env, ctx, node.error_handler, outcome.error)
    finally:
        await asettle_calls(ctx)
        leave_task(token)
    if trace is not None:
        trace.ended(ctx, outcome)
    return outcome


def _cached_sync(task: Task, env: StepEnv, cache: BaseCache[Any], node_cache: NodeCache) -> Outcome:
    """The node's stored output for the task's input, routed by the graph as it is now; or
    the task run and its output (updates and gotos, not the routes) stored."""
    try:
        key = entry_key(task, env, node_cache)
        hit = cache.get([key]).get(key)
        if hit is not None:
            ctx = TaskContext(task, env)
            token = enter_task(ctx)  # the node's branches run again: they may use the runtime
            try:
                updates, gotos = hit
                return dataclasses.replace(_routed(task, env, updates, gotos, ctx), cached=True)
            finally:
                leave_task(token)
        outcome = _run_sync(task, env)
        if outcome.result is not None:
            remember(cache, key, (outcome.result.updates, outcome.gotos), node_cache)
        return outcome
    except Exception as exc:
        return Outcome(task, error=exc)


async def _cached_async(
    task: Task, env: StepEnv, cache: BaseCache[Any], node_cache: NodeCache
) -> Outcome:
    try:
        key = entry_key(task, env, node_cache)
        hit = (await cache.aget([key])).get(key)
        if hit is not None:
            ctx = TaskContext(task, env)
            token = enter_task(ctx)
            try:
                updates, gotos = hit
                routed = await _arouted(task, env, updates, gotos, ctx)
                return dataclasses.replace(routed, cached=True)
            finally:
                leave_task(token)
        outcome = await _run_async(task, env)
        if outcome.result is not None:
            await aremember(cache, key, (outcome.result.updates, outcome.gotos), node_cache)
        return outcome
    except Exception as exc:
        return Outcome(task, error=exc)


def _stopped(task: Task, exc: Exception | GraphInterrupt) -> Outcome:
    """How a task ended that raised ``exc``: interrupted, routed to the parent, or failed."""
    if isinstance(exc, GraphInterrupt):
        return Outcome(task, interrupts=tuple(exc.interrupts))
    if isinstance(exc, _ParentBound):
        return Outcome(task, parent_command=exc.command)
    return Outcome(task, error=exc)


def _handled(
    task: Task, env: StepEnv, ctx: TaskContext, handler: ErrorHandler, error: BaseException
) -> Outcome:
    """A failed task whose node has an error handler: the handler's update and
    ``Command(goto=...)`` take the task's place, and the node's own edges do not fire (as in
    LangGraph). A handler that fails fails the task with its own error."""
    ctx.pushed = []  # what the failed attempt pushed is not kept
    try:
        if handler.is_async:
            raise InvalidUpdateError(
                f"the error handler of {task.name!r} is async; run the graph with ainvoke()"
            )
        kwargs = handler.kwargs(ctx, NodeError(task.name, error))
        return _handler_outcome(task, env, ctx, handler.fn(task.node_input(env), **kwargs))
    except Exception as failed:
        return Outcome(task, error=failed)


async def _ahandled(
    task: Task, env: StepEnv, ctx: TaskContext, handler: ErrorHandler, error: BaseException
) -> Outcome:
    ctx.pushed = []
    try:
        kwargs = handler.kwargs(ctx, NodeError(task.name, error))
        if handler.is_async:
            output = await handler.fn(task.node_input(env), **kwargs)
        else:
            call = functools.partial(handler.fn, task.node_input(env), **kwargs)
            output = await asyncio.to_thread(contextvars.copy_context().run, call)
        return _handler_outcome(task, env, ctx, output)
    except Exception as failed:
        return Outcome(task, error=failed)


def _handler_outcome(task: Task, env: StepEnv, ctx: TaskContext, output: Any) -> Outcome:
    updates, gotos = _output_parts(task, env, output, ctx)
    return Outcome(task, result=TaskResult(updates, drop_end(gotos)), gotos=gotos)


class _ParentBound(Exception):
    """A node of this graph returned ``Command(graph=PARENT)``."""

    def __init__(self, command: Command[Any]):
        super().__init__(command)
        self.command = command


def _call_with_retry(node: NodeSpec, fn: Callable[..., Any], arg: Any, ctx: TaskContext) -> Any:
    if node.retry:
        ctx.first_attempt_time = time.time()
    attempt = 0
    while True:
        attempt += 1
        try:
            if node.timeout is not None:
                return call_within(node.timeout, node.name, "node", _call, node, fn, arg, ctx)
            return fn(arg) if node.style.plain else fn(arg, **node.style.kwargs(ctx))
        except ParentCommand as pc:  # as in ``_call``, without its frame
            return pc.command
        except Exception as exc:
            delay = retry_delay(node.retry, attempt, exc)
            if delay is None:
                raise
            note_retry(ctx, exc)
            time.sleep(delay)
            ctx.restart()


async def _call_with_retry_async(
    node: NodeSpec, fn: Callable[..., Any], arg: Any, ctx: TaskContext
) -> Any:
    if node.retry:
        ctx.first_attempt_time = time.time()
    attempt = 0
    while True:
        attempt += 1
        try:
            work = fn(arg) if node.style.plain else fn(arg, **node.style.kwargs(ctx))
            if node.timeout is None:
                return await work
            return await within(work, node.timeout, node.name, "node")
        except ParentCommand as pc:
            return pc.command
        except Exception as exc:
            delay = retry_delay(node.retry, attempt, exc)
            if delay is None:
                raise
            note_retry(ctx, exc)
            await asyncio.sleep(delay)
            ctx.restart()


def _call(node: NodeSpec, fn: Callable[..., Any], arg: Any, ctx: TaskContext) -> Any:
    """Call the node; a ``Command(graph=PARENT)`` raised by a subgraph becomes its output."""
    try:
        return fn(arg) if node.style.plain else fn(arg, **node.style.kwargs(ctx))
    except ParentCommand as pc:
        return pc.command


def start_result(task: Task, env: StepEnv, updates: Update) -> TaskResult:
    """The result of the START task: the input, routed by START's edges and branches (which see
    ``env.values``, the state before the input, and may use the run's context)."""
    if START not in env.spec.branches:
        return TaskResult(updates, routes_after(env.spec, START, env.values, updates, (), None))
    ctx = TaskContext(task, env)  # its branches may call get_runtime(), get_config()...
    token = enter_task(ctx)
    try:
        return TaskResult(updates, routes_after(env.spec, START, env.values, updates, (), ctx))
    finally:
        leave_task(token)


def _output_parts(task: Task, env: StepEnv, output: Any, ctx: TaskContext) -> tuple[Update, Gotos]:
    """What the task writes and where it goes: what it pushed while running (``push_message``)
    first, then what it returned."""
    if not getattr(ctx, "pushed", None):
        return _returned_parts(task, env, output)
    pushed = tuple(
        w for key, value in ctx.pushed for w in updates_of(env.spec.schema, task.name, {key: value})
    )
    updates, gotos = _returned_parts(task, env, output)
    return pushed + updates, gotos


def _returned_parts(task: Task, env: StepEnv, output: Any) -> tuple[Update, Gotos]:
    if type(output) is dict:  # the usual case, checked without the calls below
        return updates_of(env.spec.schema, task.name, output), ()
    if isinstance(output, Command) and output.graph is not None:
        if output.graph != Command.PARENT:
            raise InvalidUpdateError(
                f"node {task.name!r} returned Command(graph={output.graph!r}); "
                "only Command.PARENT is supported"
            )
        raise _ParentBound(Command(update=output.update, goto=output.goto))
    return normalize_output(env.spec.schema, task.name, output)


def _routed(task: Task, env: StepEnv, updates: Update, gotos: Gotos, ctx: TaskContext) -> Outcome:
    """The task's result: its updates, routed by its gotos and its node's edges and branches."""
    routes = routes_after(env.spec, task.name, env.values, updates, gotos, ctx)
    return Outcome(task, result=TaskResult(updates, routes), gotos=gotos)


async def _arouted(
    task: Task, env: StepEnv, updates: Update, gotos: Gotos, ctx: TaskContext
) -> Outcome:
    routes = list(gotos) + list(env.spec.edges.get(task.name, ()))
    for branch in env.spec.branches.get(task.name, ()):
        state = branch_state(env.spec, task.name, env.values, updates)
        chosen = call_branch(branch, state, ctx)
        routes.extend(branch.resolve(await chosen if branch.is_async else chosen))
    return Outcome(task, result=TaskResult(updates, drop_end(routes)), gotos=gotos)
