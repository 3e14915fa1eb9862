"""``StateGraph``: the builder users write their workflow with."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal

from threadline.constants import END, RESERVED_NAMES, START
from threadline.errors import GraphValidationError
from threadline.graph.nodes import NodeDefaults, destination_targets, is_runnable, runnable_node
from threadline.graph.schema import StateSchema, read_schema
from threadline.graph.spec import (
    Branch,
    ErrorHandler,
    GraphSpec,
    Join,
    NodeSpec,
    annotated_input_schema,
    make_branch,
    node_from_callable,
    with_options,
)
from threadline.graph.validate import Finding, find_problems, raise_findings, validate_graph
from threadline.runtime.migrate import Migrations, Upcaster, checked_version
from threadline.runtime.retry import retry_policies
from threadline.runtime.timeouts import seconds
from threadline.types import CachePolicy, RetryPolicy, TimeoutPolicy, TracePolicy

if TYPE_CHECKING:
    from threadline.cache.base import BaseCache
    from threadline.checkpoint.base import BaseSaver
    from threadline.graph.compiled import CompiledStateGraph
    from threadline.store.base import BaseStore


class StateGraph:
    """A graph whose nodes read a shared state and return updates to it.

    Build it with ``add_node``/``add_edge``/``add_conditional_edges``, then ``compile()`` it.
    """

    def __init__(
        self,
        state_schema: type,
        context_schema: type | None = None,
        *,
        input_schema: type | None = None,
        output_schema: type | None = None,
        state_version: int | None = None,
        **deprecated: Any,
    ) -> None:
        input_schema, output_schema, context_schema = _renamed_schemas(
            deprecated, input_schema, output_schema, context_schema
        )
        self.state_schema = state_schema
        self.input_schema = input_schema or state_schema
        self.output_schema = output_schema or state_schema
        #: Stored for the runtime context (``Runtime.context``); also on the compiled spec.
        self.context_schema = context_schema
        self.schema = read_schema(state_schema)
        self._io_schemas = {
            cls: read_schema(cls) for cls in (input_schema, output_schema) if cls is not None
        }
        self._node_inputs: dict[str, type] = {}
        self.nodes: dict[str, NodeSpec] = {}
        self.edges: list[tuple[str, str]] = []
        self.joins: list[Join] = []
        self.branches: list[Branch] = []
        #: The state's shape version, stored with each checkpoint (threadline/runtime/migrate.py)
        self.state_version = checked_version(state_version, "state_version")
        self.upcasters: dict[int, Upcaster] = {}
        self._defaults = NodeDefaults()  # set_node_defaults

    def set_node_defaults(
        self,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        cache_policy: CachePolicy[Any] | None = None,
        error_handler: Any = None,
        timeout: float | timedelta | TimeoutPolicy | None = None,
    ) -> StateGraph:
        """Options for every node added without its own, applied at ``compile()`` (so nodes
        added before the call get them too); a subgraph's nodes keep their own graph's."""
        if error_handler is not None:
            self._defaults.error_handler = ErrorHandler.of(error_handler)
        if retry_policy is not None:
            self._defaults.retry = retry_policies(retry_policy)
        if cache_policy is not None:
            self._defaults.cache_policy = cache_policy
        if timeout is not None:
            self._defaults.timeout = seconds(timeout)
        return self

    def upcaster(self, from_version: int) -> Callable[[Upcaster], Upcaster]:
        """Register, as a decorator, the function that turns state values of ``from_version``
        into values of the next version; it runs when an older checkpoint loads."""
        if checked_version(from_version, "from_version") is None:
            raise GraphValidationError("upcaster() needs from_version=N, the version it reads")

        def register(fn: Upcaster) -> Upcaster:
            if from_version in self.upcasters:
                raise GraphValidationError(f"an upcaster from version {from_version} exists")
            self.upcasters[from_version] = fn
            return fn

        return register

    def add_node(
        self,
        node: str | Callable[..., Any],
        action: Callable[..., Any] | None = None,
        *,
        retry_policy: RetryPolicy | Sequence[RetryPolicy] | None = None,
        destinations: Mapping[str, str] | Sequence[str] | None = None,
        input_schema: type | None = None,
        cache_policy: CachePolicy[Any] | None = None,
        defer: bool = False,
        timeout: float | timedelta | TimeoutPolicy | None = None,
        metadata: Mapping[str, Any] | None = None,
        trace_policy: TracePolicy | None = None,
        error_handler: Any = None,
    ) -> StateGraph:
        """Add a node; ``add_node(fn)`` names it after the function.

        ``input_schema`` (or, without it, the annotation of the function's first parameter when
        that is a schema class) is what the node reads: it receives that schema's keys only,
        and the schema's keys become channels of the graph (private state between nodes).
        ``cache_policy`` reuses the node's result for the same input when the graph is compiled
        with a ``cache``; a ``defer`` node runs only once the run has nothing else to do.
        ``timeout`` (seconds or a ``timedelta``) limits each attempt: one that runs longer fails
        with ``NodeTimeoutError``, which ``retry_policy`` may retry. A sync node's attempt runs
        in a thread of its own that cannot be stopped: its late result is dropped.
        ``retry_policy`` may be a list: the first policy that accepts an error decides.
        ``metadata`` is shown on the node in ``get_graph()``; ``destinations`` may be a dict of
        target to edge label. The action may also be a runnable (``invoke``/``ainvoke``).
        ``trace_policy`` shapes LangSmith traces, which threadline does not send: accepted,
        with nothing to shape. ``error_handler(state, error: NodeError)`` runs when the node
        fails for good; what it returns (an update, a ``Command``) replaces the node's.
        """
        if action is None:
            if isinstance(node, str):
                raise GraphValidationError(f"node {node!r} has no action: add_node({node!r}, fn)")
            action, node = node, _name_of(node)
        if not isinstance(node, str) or not node:
            raise GraphValidationError(f"node name must be a non-empty string, got {node!r}")
        self._check_name(node)
        if node in self.nodes:
            raise GraphValidationError(f"node {node!r} is already in the graph")
        try:
            retry = retry_policies(retry_policy)
        except TypeError:
            raise GraphValidationError(f"retry_policy of {node!r} must be a RetryPolicy") from None
        targets, labels = destination_targets(node, destinations)
        spec = self._node_spec(node, action, retry, targets)
        handler = ErrorHandler.of(error_handler) if error_handler is not None else None
        spec = dataclasses.replace(
            spec, metadata=dict(metadata or {}), labels=labels, error_handler=handler
        )
        self._defaults.actions[node] = action
        reads = input_schema or annotated_input_schema(action)
        if reads is not None and reads is not self.state_schema:
            if reads not in self._io_schemas:
                self._io_schemas[reads] = read_schema(reads)
            self._node_inputs[node] = reads
        self.nodes[node] = with_options(spec, action, cache_policy, defer, timeout)
        return self

    def add_edge(self, start_key: str | Sequence[str], end_key: str) -> StateGraph:
        """Run ``end_key`` after ``start_key``; with a list of starts, once after all of them."""
        if end_key == START:
            raise GraphValidationError("START cannot be the end of an edge")
        if isinstance(start_key, str):
            if start_key == END:
                raise GraphValidationError("END cannot be the start of an edge")
            self.edges.append((start_key, end_key))
            return self
        sources = frozenset(start_key)
        if not sources:
            raise GraphValidationError(f"add_edge([...], {end_key!r}) needs at least one start")
        if END in sources or START in sources:
            raise GraphValidationError("a join edge cannot start at START or END")
        self.joins.append(Join(sources, end_key))
        return self

    def add_conditional_edges(
        self,
        source: str,
        path: Callable[..., Any],
        path_map: Mapping[Hashable, str] | Sequence[str] | None = None,
    ) -> StateGraph:
        """After ``source``, call ``path(state)`` to choose the next node(s) or ``Send``s."""
        if source == END:
            raise GraphValidationError("END cannot be the source of a conditional edge")
        self.branches.append(make_branch(source, path, path_map))
        return self

    def add_sequence(self, nodes: Sequence[Callable[..., Any] | tuple[str, Any]]) -> StateGraph:
        """Add nodes and chain them with edges, in order."""
        if not nodes:
            raise GraphValidationError("add_sequence needs at least one node")
        previous: str | None = None
        for item in nodes:
            name, action = item if isinstance(item, tuple) else (_name_of(item), item)
            self.add_node(name, action)
            if previous is not None:
                self.add_edge(previous, name)
            previous = name
        return self

    def set_entry_point(self, key: str) -> StateGraph:
        return self.add_edge(START, key)

    def set_conditional_entry_point(
        self,
        path: Callable[..., Any],
        path_map: Mapping[Hashable, str] | Sequence[str] | None = None,
    ) -> StateGraph:
        return self.add_conditional_edges(START, path, path_map)

    def set_finish_point(self, key: str) -> StateGraph:
        return self.add_edge(key, END)

    def compile(
        self,
        checkpointer: BaseSaver | bool | None = None,
        *,
        cache: BaseCache[Any] | None = None,
        store: BaseStore | None = None,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        name: str | None = None,
        debug: bool = False,
        strict: bool = False,
        release_thread: Literal["delete", "keep_last"] | None = None,
        trace: bool = True,
    ) -> CompiledStateGraph:
        """Validate the graph and freeze it into something that can run.

        Mistakes that make a graph unrunnable (an edge to an unknown node, no entry point, a
        breakpoint on an unknown node) always fail here. ``strict=True`` also refuses what
        ``lint()`` finds (unreachable nodes, nodes with no way out), which LangGraph accepts.

        ``checkpointer`` is a saver, or for a subgraph ``None`` (use its parent's, afresh for
        each parent task), ``True`` (keep its own state across its parent's runs) or ``False``
        (never save).

        ``release_thread`` says what becomes of a thread when a run reaches END: ``"delete"``
        removes it, ``"keep_last"`` keeps only its final checkpoint; ``None`` keeps it all.
        ``trace=False``: runs save no execution trace (see ``get_trace``). ``debug=True``: runs
        print their ``updates`` and ``values`` chunks, as LangGraph's do.
        """
        from threadline.graph.compiled import CompiledStateGraph

        spec = self._spec()
        if strict:
            raise_findings(spec)
        before = breakpoint_names(spec, interrupt_before, "interrupt_before")
        after = breakpoint_names(spec, interrupt_after, "interrupt_after")
        return CompiledStateGraph(
            spec,
            checkpointer=checkpointer,
            store=store,
            interrupt_before=before,
            interrupt_after=after,
            name=name or "LangGraph",
            cache=cache,
            context_schema=self.context_schema,
            builder=self,
            release_thread=release_thread,
            migrations=Migrations.of(self.state_version, self.upcasters),
            trace=trace,
            debug=debug,
        )

    def validate(self, interrupt: Sequence[str] | str | None = None) -> StateGraph:
        """Check what ``compile()`` always checks, plus breakpoint names; return the graph.

        As LangGraph's ``validate``: it raises on a graph that cannot run and says nothing of
        style. For reachability and ways out, see ``lint()``.
        """
        spec = self._spec()
        breakpoint_names(spec, interrupt, "interrupt")
        return self

    def lint(self) -> list[Finding]:
        """What ``compile(strict=True)`` would refuse: nodes no edge or declared Command
        destination reaches, and nodes with no outgoing edge or declared destination (their
        branch ends there). Empty when the graph is fully declared."""
        return find_problems(self._spec())

    def _spec(self) -> GraphSpec:
        edges: dict[str, list[str]] = {}
        for source, target in self.edges:
            targets = edges.setdefault(source, [])
            if target not in targets:
                targets.append(target)
        branches: dict[str, list[Branch]] = {}
        for branch in self.branches:
            branches.setdefault(branch.source, []).append(branch)
        joins_by_source: dict[str, list[Join]] = {}
        for join in self.joins:
            for source in join.sources:
                joins_by_source.setdefault(source, []).append(join)
        schema = self.schema.widened(self._io_schemas.values())
        spec = GraphSpec(
            schema=schema,
            nodes=self._nodes_reading(schema),
            edges={k: tuple(v) for k, v in edges.items()},
            branches={k: tuple(v) for k, v in branches.items()},
            joins=tuple(self.joins),
            joins_by_source={k: tuple(v) for k, v in joins_by_source.items()},
            input_schema=self._io_part(self.input_schema, schema),
            output_keys=_output_keys(
                self._io_part(self.output_schema, schema), self.schema, schema
            ),
            context_schema=self.context_schema,
        )
        validate_graph(spec)
        return spec

    def _io_part(self, cls: type, schema: StateSchema) -> StateSchema | None:
        """The input or output schema, when it is not the state schema."""
        return None if cls is self.state_schema else self._io_schemas[cls].reading(schema.channels)

    def _nodes_reading(self, schema: StateSchema) -> dict[str, NodeSpec]:
        """The nodes, each with the reader of its own input schema, if it has one, and the
        defaults of ``set_node_defaults``."""
        nodes = {name: self._defaults.applied(node) for name, node in self.nodes.items()}
        for name, cls in self._node_inputs.items():
            reader = self._io_schemas[cls].reading(schema.channels)
            nodes[name] = dataclasses.replace(nodes[name], reader=reader)
        return nodes

    def _node_spec(
        self,
        name: str,
        action: Any,
        retry: tuple[RetryPolicy, ...],
        destinations: tuple[str, ...] | None,
    ) -> NodeSpec:
        from threadline.graph.compiled import CompiledStateGraph

        if isinstance(action, CompiledStateGraph):
            return action.as_node(name, retry, destinations, self.schema)
        if is_runnable(action):
            return runnable_node(name, action, retry, destinations)
        if not callable(action):
            raise GraphValidationError(
                f"node {name!r} must be callable, got {type(action).__name__}"
            )
        return node_from_callable(name, action, retry, destinations)

    def _check_name(self, name: str) -> None:
        if name in RESERVED_NAMES:
            raise GraphValidationError(f"node name {name!r} is reserved")
        for char in ("|", ":"):
            if char in name:
                raise GraphValidationError(
                    f"node name {name!r} contains {char!r}, which threadline uses in namespaces"
                )


def _name_of(action: Any) -> str:
    name = getattr(action, "name", None) or getattr(action, "__name__", None)
    if not isinstance(name, str) or name == "<lambda>":
        raise GraphValidationError(f"cannot name node {action!r}; use add_node('name', action)")
    return name


def _output_keys(
    output: StateSchema | None, state: StateSchema, channels: StateSchema
) -> tuple[str, ...] | None:
    """The keys a run returns: the output schema's, else the state schema's (``None`` when
    those are all the graph's channels)."""
    if output is not None:
        return tuple(output.channels)
    return tuple(state.channels) if channels is not state else None


def _renamed_schemas(
    deprecated: dict[str, Any], input_: type | None, output: type | None, context: type | None
) -> tuple[type | None, type | None, type | None]:
    """LangGraph's older keyword names (``input``, ``output``, ``config_schema``), still
    accepted there with a deprecation warning; any other keyword is refused."""
    unknown = set(deprecated) - {"input", "output", "config_schema"}
    if unknown:
        raise TypeError(f"StateGraph() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    renames = {
        "input": "input_schema",
        "output": "output_schema",
        "config_schema": "context_schema",
    }
    for old in deprecated:
        warnings.warn(
            f"StateGraph({old}=...) is deprecated; use {renames[old]}=...",
            DeprecationWarning,
            stacklevel=3,
        )
    return (
        input_ or deprecated.get("input"),
        output or deprecated.get("output"),
        context or deprecated.get("config_schema"),
    )


def breakpoint_names(
    spec: GraphSpec, names: Sequence[str] | str | None, what: str
) -> frozenset[str]:
    """``interrupt_before``/``after`` (``what``) as node names, checked; ``"*"``: every node."""
    if names is None:
        return frozenset()
    if names == "*":
        return frozenset({"*"})
    if isinstance(names, str):
        names = [names]
    unknown = [n for n in names if n not in spec.nodes]
    if unknown:
        raise GraphValidationError(
            f"{what} names {unknown[0]!r}, which is not a node (nodes: {', '.join(spec.nodes)})"
        )
    return frozenset(names)
