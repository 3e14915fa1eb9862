"""``StateGraph``: the builder users write their workflow with."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from threadline.constants import END, RESERVED_NAMES, START
from threadline.errors import ConfigError, GraphValidationError
from threadline.graph.schema import read_schema
from threadline.graph.spec import (
    Branch,
    GraphSpec,
    Join,
    NodeSpec,
    make_branch,
    node_from_callable,
    with_options,
)
from threadline.graph.validate import validate_graph
from threadline.types import CachePolicy, RetryPolicy

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
        self, state_schema: type, context_schema: type | None = None, **_ignored: Any
    ) -> None:
        self.schema = read_schema(state_schema)
        self.context_schema = context_schema
        self.nodes: dict[str, NodeSpec] = {}
        self.edges: list[tuple[str, str]] = []
        self.joins: list[Join] = []
        self.branches: list[Branch] = []

    def add_node(
        self,
        node: str | Callable[..., Any],
        action: Callable[..., Any] | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
        destinations: Sequence[str] | None = None,
        cache_policy: CachePolicy | None = None,
        defer: bool = False,
    ) -> StateGraph:
        """Add a node; ``add_node(fn)`` names it after the function.

        ``cache_policy`` reuses the node's result for the same input when the graph is compiled
        with a ``cache``; a ``defer`` node runs only once the run has nothing else to do.
        """
        if action is None:
            action, node = node, _name_of(node)  # type: ignore[assignment]
        if not isinstance(node, str) or not node:
            raise GraphValidationError(f"node name must be a non-empty string, got {node!r}")
        self._check_name(node)
        if node in self.nodes:
            raise GraphValidationError(f"node {node!r} is already in the graph")
        if retry_policy is not None and not isinstance(retry_policy, RetryPolicy):
            raise GraphValidationError(f"retry_policy of {node!r} must be a RetryPolicy")
        spec = self._node_spec(node, action, retry_policy, destinations)
        self.nodes[node] = with_options(spec, action, cache_policy, defer)
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
        checkpointer: BaseSaver | None = None,
        *,
        cache: BaseCache[Any] | None = None,
        store: BaseStore | None = None,
        interrupt_before: Sequence[str] | str | None = None,
        interrupt_after: Sequence[str] | str | None = None,
        name: str | None = None,
        debug: bool = False,
    ) -> CompiledStateGraph:
        """Validate the graph and freeze it into something that can run."""
        from threadline.graph.compiled import CompiledStateGraph

        if debug:
            raise ConfigError(
                "compile(debug=True) is not supported; use stream_mode='debug' to receive "
                "debug events"
            )

        spec = self._spec()
        before = _breakpoints(spec, interrupt_before, "interrupt_before")
        after = _breakpoints(spec, interrupt_after, "interrupt_after")
        return CompiledStateGraph(
            spec,
            checkpointer=checkpointer,
            store=store,
            interrupt_before=before,
            interrupt_after=after,
            name=name or "LangGraph",
            cache=cache,
            context_schema=self.context_schema,
        )

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
        spec = GraphSpec(
            schema=self.schema,
            nodes=dict(self.nodes),
            edges={k: tuple(v) for k, v in edges.items()},
            branches={k: tuple(v) for k, v in branches.items()},
            joins=tuple(self.joins),
            joins_by_source={k: tuple(v) for k, v in joins_by_source.items()},
        )
        validate_graph(spec)
        return spec

    def _node_spec(
        self,
        name: str,
        action: Any,
        retry: RetryPolicy | None,
        destinations: Sequence[str] | None,
    ) -> NodeSpec:
        from threadline.graph.compiled import CompiledStateGraph

        if isinstance(action, CompiledStateGraph):
            return action.as_node(name, retry, destinations, self.schema)
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


def _breakpoints(spec: GraphSpec, names: Sequence[str] | str | None, what: str) -> frozenset[str]:
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
