"""The immutable pieces a compiled graph is made of: nodes, branches, joins."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from threadline.cache.keys import node_namespace
from threadline.constants import END, START
from threadline.errors import GraphValidationError, InvalidUpdateError, NodeError
from threadline.graph.schema import ROOT, StateSchema, is_schema_class
from threadline.runtime.timeouts import seconds
from threadline.types import CachePolicy, Command, RetryPolicy, Send, TimeoutPolicy

if TYPE_CHECKING:
    from threadline.graph.compiled import CompiledStateGraph
    from threadline.runtime.context import TaskContext


@dataclass(frozen=True, slots=True)
class CallStyle:
    """Which optional keyword arguments a user function takes, found once by inspection.

    ``runtime`` is the name of the parameter that receives the ``Runtime`` (``"runtime"``, or
    any parameter annotated ``Runtime[...]``); ``previous`` is always ``None`` in a graph.
    """

    config: bool = False
    store: bool = False
    writer: bool = False
    runtime: str | None = None
    previous: bool = False
    #: The function takes the state only (the common case: call it without kwargs).
    plain: bool = field(init=False, default=True)

    def __post_init__(self) -> None:
        extra = self.config or self.store or self.writer or self.runtime or self.previous
        object.__setattr__(self, "plain", not extra)

    def kwargs(self, ctx: TaskContext | None) -> dict[str, Any]:
        """The keyword arguments of a call in ``ctx``; ``None``: outside any run (routing an
        ``update_state``), with no config, store or stream, and an empty ``Runtime``."""
        extra: dict[str, Any] = {}
        if self.config:
            extra["config"] = ctx.config if ctx is not None else {}
        if self.store:
            extra["store"] = ctx.store if ctx is not None else None
        if self.writer:
            extra["writer"] = ctx.writer if ctx is not None else _drop
        if self.runtime:
            extra[self.runtime] = ctx.runtime if ctx is not None else _outside_run()
        if self.previous:
            extra["previous"] = None
        return extra


def _drop(_: Any) -> None:
    return None


def _outside_run() -> Any:
    from threadline.runtime.runtime import Runtime  # the runtime package imports this module

    return Runtime()


def call_style(fn: Callable[..., Any]) -> CallStyle:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return CallStyle()
    return CallStyle(
        config="config" in params,
        store="store" in params,
        writer="writer" in params,
        runtime=_runtime_param(fn, params),
        previous="previous" in params,
    )


_KEYWORD_KINDS = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


def _runtime_param(fn: Callable[..., Any], params: Mapping[str, inspect.Parameter]) -> str | None:
    """The parameter that takes the ``Runtime``: ``runtime`` as in LangGraph, or one after the
    state annotated ``Runtime``/``Runtime[...]``."""
    if "runtime" in params and params["runtime"].kind in _KEYWORD_KINDS:
        return "runtime"
    from threadline.runtime.runtime import Runtime

    names = [name for name, p in params.items() if p.kind in _KEYWORD_KINDS][1:]
    if not names or all(params[n].annotation is inspect.Parameter.empty for n in names):
        return None
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {n: params[n].annotation for n in names}
    for name in names:
        hint = hints.get(name)
        if hint is Runtime or typing.get_origin(hint) is Runtime:
            return name
        if isinstance(hint, str) and hint.split("[", 1)[0].strip() in (
            "Runtime",
            "runtime.Runtime",
        ):
            return name
    return None


def is_async_callable(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - objects with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


@dataclass(frozen=True, slots=True)
class NodeCache:
    """A node's ``CachePolicy`` and the cache namespace its entries live in."""

    policy: CachePolicy[Any]
    namespace: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """A node: a sync and/or async callable, how to call it, retry it and cache its result.

    A ``defer`` node waits until the run has nothing else to do before it runs; ``timeout``
    limits each attempt (seconds).
    """

    name: str
    sync_fn: Callable[..., Any] | None
    async_fn: Callable[..., Any] | None
    style: CallStyle
    retry: tuple[RetryPolicy, ...] = ()  # the first policy that accepts an error decides
    destinations: tuple[str, ...] | None = None
    subgraph: CompiledStateGraph | None = None
    # The node's own input schema, when it reads other keys than the graph's state schema
    reader: StateSchema | None = None
    cache: NodeCache | None = None
    defer: bool = False
    timeout: TimeoutPolicy | None = None
    metadata: dict[str, Any] = field(default_factory=dict)  # add_node(metadata=...)
    error_handler: ErrorHandler | None = None  # add_node(error_handler=...)
    labels: dict[str, str] = field(default_factory=dict)  # edge labels of ``destinations``


@dataclass(frozen=True, slots=True)
class ErrorHandler:
    """``add_node(..., error_handler=fn)``: called with the state and a ``NodeError`` when the
    node fails for good (after its retries); what it returns takes the failed task's place."""

    fn: Callable[..., Any]
    style: CallStyle
    error_param: str | None  # the parameter that takes the NodeError
    is_async: bool

    @classmethod
    def of(cls, fn: Callable[..., Any]) -> ErrorHandler:
        if not callable(fn):
            raise GraphValidationError(f"error_handler must be callable, got {fn!r}")
        return cls(fn, call_style(fn), _error_param(fn), is_async_callable(fn))

    def kwargs(self, ctx: TaskContext, error: Any) -> dict[str, Any]:
        kwargs = {} if self.style.plain else self.style.kwargs(ctx)
        if self.error_param is not None:
            kwargs[self.error_param] = error
        return kwargs


def _error_param(fn: Callable[..., Any]) -> str | None:
    """The parameter annotated ``NodeError``, else one named ``error``, else none."""
    try:
        params = inspect.signature(fn).parameters
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = {}
        params = inspect.signature(fn).parameters
    typed = [name for name in params if hints.get(name) is NodeError]
    return typed[0] if typed else ("error" if "error" in params else None)


def with_options(
    node: NodeSpec,
    action: Any,
    cache_policy: CachePolicy[Any] | None,
    defer: bool,
    timeout: float | timedelta | TimeoutPolicy | None = None,
) -> NodeSpec:
    """``node`` with its ``add_node`` options ``cache_policy``, ``defer`` and ``timeout``,
    checked."""
    if cache_policy is None and not defer and timeout is None:
        return node
    try:
        limit = seconds(timeout)
    except (TypeError, ValueError) as exc:
        raise GraphValidationError(f"node {node.name!r}: {exc}") from None
    if cache_policy is not None and not isinstance(cache_policy, CachePolicy):
        raise GraphValidationError(
            f"cache_policy of {node.name!r} must be a CachePolicy, "
            f"got {type(cache_policy).__name__}"
        )
    if not isinstance(defer, bool):
        raise GraphValidationError(f"defer of {node.name!r} must be True or False, got {defer!r}")
    cache = None
    if cache_policy is not None:
        cache = NodeCache(cache_policy, node_namespace(node.name, action))
    return dataclasses.replace(node, cache=cache, defer=defer, timeout=limit)


def node_from_callable(
    name: str,
    fn: Callable[..., Any],
    retry: tuple[RetryPolicy, ...],
    destinations: Sequence[str] | None,
) -> NodeSpec:
    declared = tuple(destinations) if destinations is not None else _command_targets(fn)
    if is_async_callable(fn):
        return NodeSpec(name, None, fn, call_style(fn), retry, declared)
    return NodeSpec(name, fn, None, call_style(fn), retry, declared)


def annotated_input_schema(fn: Callable[..., Any]) -> type | None:
    """The class the first parameter of ``fn`` is annotated with, when it is a schema class.

    LangGraph reads a node's input schema from that annotation; a node annotated with another
    schema than the graph's state then receives that schema's keys only.
    """
    call = getattr(fn, "__call__", None)  # noqa: B004 - objects with a typed __call__
    typed: Callable[..., Any] | None = fn
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        typed = call if inspect.ismethod(call) else None
    try:
        first = next(iter(inspect.signature(typed).parameters.values()), None) if typed else None
        hint = typing.get_type_hints(typed).get(first.name) if first is not None else None
    except Exception:  # unresolvable annotations say nothing about the input
        return None
    return hint if is_schema_class(hint) else None


def _command_targets(fn: Callable[..., Any]) -> tuple[str, ...] | None:
    """Targets from a ``-> Command[Literal["a", "b"]]`` return annotation, if there is one."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        hints = getattr(fn, "__annotations__", {}) or {}
    ret = hints.get("return")
    if ret is None or (typing.get_origin(ret) is not Command and ret is not Command):
        return None
    args = typing.get_args(ret)
    if not args or typing.get_origin(args[0]) is not typing.Literal:
        return None
    return tuple(typing.get_args(args[0]))


@dataclass(frozen=True, slots=True)
class Branch:
    """A conditional edge: ``path(state)`` names where to go, optionally through ``path_map``."""

    source: str
    path: Callable[..., Any]
    path_map: Mapping[Hashable, str] | None
    style: CallStyle
    is_async: bool

    def possible_targets(self) -> tuple[str, ...] | None:
        """Every node this branch may route to, or ``None`` when that cannot be known."""
        if self.path_map is not None:
            return tuple(self.path_map.values())
        try:
            ret = typing.get_type_hints(self.path).get("return")
        except Exception:
            ret = None
        if ret is not None and typing.get_origin(ret) is typing.Literal:
            return tuple(typing.get_args(ret))
        return None

    def resolve(self, result: Any) -> tuple[str | Send, ...]:
        """Map what ``path`` returned to targets; END is dropped, unknown keys are errors."""
        items = result if isinstance(result, list | tuple) else [result]
        targets: list[str | Send] = []
        for item in items:
            if isinstance(item, Send):
                targets.append(item)
                continue
            target = self._mapped(item)
            if target != END:
                targets.append(target)
        return tuple(targets)

    def _mapped(self, item: Any) -> str:
        if self.path_map is None:
            if not isinstance(item, str):
                raise InvalidUpdateError(
                    f"branch from {self.source!r} returned {item!r}; return a node name or Send"
                )
            return item
        try:
            return self.path_map[item]
        except (KeyError, TypeError):
            raise InvalidUpdateError(
                f"branch from {self.source!r} returned {item!r}, which is not in its path_map "
                f"({list(self.path_map)})"
            ) from None


def make_branch(
    source: str, path: Callable[..., Any], path_map: Mapping[Hashable, str] | Sequence[str] | None
) -> Branch:
    if not callable(path):
        raise GraphValidationError(f"the path of the branch from {source!r} must be callable")
    mapping: Mapping[Hashable, str] | None
    if path_map is None:
        mapping = None
    elif isinstance(path_map, Mapping):
        mapping = dict(path_map)
    else:
        mapping = {name: name for name in path_map}
    return Branch(source, path, mapping, call_style(path), is_async_callable(path))


@dataclass(frozen=True, slots=True)
class Join:
    """``add_edge([a, b], c)``: ``c`` runs once after every source has finished."""

    sources: frozenset[str]
    target: str

    @property
    def id(self) -> str:
        return f"{'+'.join(sorted(self.sources))}->{self.target}"


@dataclass(frozen=True)
class GraphSpec:
    """Everything the runtime needs to know about a compiled graph, validated and frozen."""

    schema: StateSchema
    nodes: Mapping[str, NodeSpec]
    edges: Mapping[str, tuple[str, ...]]
    branches: Mapping[str, tuple[Branch, ...]]
    joins: tuple[Join, ...]
    joins_by_source: Mapping[str, tuple[Join, ...]] = field(default_factory=dict)
    # What invoke() takes and returns, when not the whole state (input/output schemas)
    input_schema: StateSchema | None = None
    output_keys: tuple[str, ...] | None = None
    # The runtime context's schema (StateGraph(context_schema=...)); None when not given
    context_schema: type | None = None

    def output_values(self, values: Mapping[str, Any]) -> Any:
        """What ``invoke`` returns: the output schema's keys in its order (the state schema's
        by default). As in LangGraph, keys never written are absent."""
        if self.schema.kind == "root":
            return values.get(ROOT)
        keys = self.schema.channels if self.output_keys is None else self.output_keys
        return {key: values[key] for key in keys if key in values}

    def state_values(self, values: Mapping[str, Any]) -> Any:
        """Every channel's value in schema order: ``get_state().values`` and the ``values``
        stream mode, which LangGraph does not narrow to the output schema."""
        if self.schema.kind == "root":
            return values.get(ROOT)
        return {key: values[key] for key in self.schema.channels if key in values}

    def input_updates(self, value: Any) -> Any:
        """An ``invoke`` input as updates: with an input schema, only its keys are taken; a
        state that is one value takes the input as it is.

        Keys of the state that the input schema lacks are dropped, as LangGraph drops them;
        keys of no schema at all are left in, for the caller's check to refuse.
        """
        if self.schema.kind == "root":
            return value
        if self.input_schema is None:
            return self.schema.input_values(value)
        updates = self.input_schema.input_values(value)
        own, channels = self.input_schema.channels, self.schema.channels
        return {k: v for k, v in updates.items() if k in own or k not in channels}

    @functools.cached_property
    def edge_routes(self) -> Mapping[str, tuple[str, ...]]:
        """Where each node without branches goes when it gives no ``goto``: its edges, END
        left out. Routing looks this up after every task instead of working it out."""
        return {
            name: tuple(e for e in self.edges.get(name, ()) if e != END)
            for name in (*self.nodes, START)
            if name not in self.branches
        }

    @functools.cached_property
    def deferred(self) -> frozenset[str]:
        """The nodes added with ``defer=True``."""
        return frozenset(name for name, node in self.nodes.items() if node.defer)

    def has_async_only_node(self) -> str | None:
        for node in self.nodes.values():
            if node.sync_fn is None:
                return node.name
            if node.subgraph is not None and node.timeout is not None:
                # run in a thread, it could not be stopped and would save after its parent
                return f"subgraph {node.name} with a timeout"
        for branches in self.branches.values():
            for branch in branches:
                if branch.is_async:
                    return f"branch from {branch.source}"
        return None
